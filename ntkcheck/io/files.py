"""Reading token files: ``.npy`` of shape ``(n, N, d)`` or ``.npz`` with one array per sample.

Only plain real numeric arrays are read (integers and floats): pickled objects,
complex, boolean, string and other dtypes are refused with a message naming the file
and the dtype, never converted silently.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .._validate import as_samples
from ..errors import InputError
from ..cgf import Empirical, as_laws

__all__ = ["load_samples", "load_laws", "bundled_path"]

_SAMPLE_KEY = re.compile(r"^sample_(\d+)$")

_KINDS = {"c": "complex", "b": "boolean", "U": "string", "S": "bytes", "O": "object", "V": "structured",
          "M": "datetime", "m": "timedelta"}


def bundled_path(name: str = "screen_default.npz") -> Path:
    """Path of a data file shipped with the package (``ntkcheck/data/``)."""
    return Path(str(resources.files("ntkcheck") / "data" / name))


def _real(arr: np.ndarray, where: str) -> np.ndarray:
    """``arr`` if it holds real numbers that fit float64; else an InputError naming ``where``."""
    if arr.dtype.kind not in "iuf":
        what = _KINDS.get(arr.dtype.kind, "non-numeric")
        raise InputError(f"{where}: expected real numeric tokens (integers or floats), got a {what} array "
                         f"(dtype {arr.dtype}); convert the tokens to float64 first")
    if arr.dtype.kind in "iu" and arr.size and (int(arr.max()) > 2**53 or int(arr.min()) < -(2**53)):
        raise InputError(f"{where}: an integer token coordinate exceeds 2^53 and would be rounded in float64; "
                         "rescale the tokens")
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:  # long double: may exceed float64
        big = np.abs(arr[np.isfinite(arr)])
        if big.size and big.max() > np.finfo(np.float64).max:
            top = np.format_float_scientific(big.max(), precision=3)
            raise InputError(f"{where}: a token coordinate ({top}) is beyond the float64 range (1.8e308)")
    return arr


def _read(p: Path) -> Any:
    """The raw token arrays of a file: one ``(n, N, d)`` array or a list of ``(N_i, d)`` arrays."""
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a .npy or .npz file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            return _real(np.load(p, allow_pickle=False), str(p))
        if suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                keys = list(z.keys())
                numbered = sorted(
                    ((int(m.group(1)), k) for k in keys if (m := _SAMPLE_KEY.match(k))), key=lambda t: t[0]
                )
                if numbered:
                    idx = [i for i, _ in numbered]
                    if idx != list(range(len(idx))):
                        raise InputError(f"{p}: sample keys must be sample_0 ... sample_{len(idx) - 1} without gaps, got {[k for _, k in numbered]}")
                    return [_real(z[k], f"{p}[{k}]") for _, k in numbered]
                if "tokens" in keys:
                    return _real(z["tokens"], f"{p}[tokens]")
                raise InputError(f"{p}: expected arrays named sample_0, sample_1, ... or one array 'tokens', found {keys}")
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        why = "it holds pickled objects or is not in .npy format; only plain numeric arrays are read" if "pickle" in str(exc) else str(exc)
        raise InputError(f"{p}: not a readable numpy array file ({why})") from None
    raise InputError(f"{p}: unsupported file type {suffix!r}; expected .npy or .npz")


def _in_file(p: Path, exc: InputError) -> InputError:
    msg = str(exc)
    return InputError(msg if msg.startswith(str(p)) else f"{p}: {msg}")


def load_samples(path: str | Path) -> list[np.ndarray]:
    """Load token samples from a file.

    Parameters
    ----------
    path : str or Path
        ``.npy``: one array of shape ``(n, N, d)``. ``.npz``: arrays ``sample_0``,
        ``sample_1``, ... of shapes ``(N_i, d)`` (ragged allowed, taken in numeric
        order of the suffix), or a single array ``tokens`` of shape ``(n, N, d)``.
        Integer or float dtypes only.

    Returns
    -------
    list of (N_i, d) float arrays, validated (finite, non-empty, one dimension).
    """
    p = Path(path)
    raw = _read(p)
    try:
        return as_samples(raw)
    except InputError as exc:
        raise _in_file(p, exc) from None


def load_laws(path: str | Path) -> list[Empirical]:
    """Load a token file as empirical laws (:class:`~ntkcheck.cgf.empirical.Empirical`).

    The file formats are those of :func:`load_samples`. Each sample becomes its law:
    repeated tokens are merged into one atom whose exact rational mass counts them
    (``[[0], [1], [0]]`` is ``2/3 delta_0 + 1/3 delta_1``).

    Returns
    -------
    list of Empirical, one per sample, of one dimension.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "t.npz"
    >>> np.savez(f, sample_0=np.array([[0.0], [1.0], [0.0]]), sample_1=np.array([[2.0], [5.0]]))
    >>> [[str(m) for m in law.weights] for law in load_laws(f)]
    [['2/3', '1/3'], ['1/2', '1/2']]
    """
    p = Path(path)
    raw = _read(p)
    try:
        return as_laws(raw)
    except InputError as exc:
        raise _in_file(p, exc) from None
