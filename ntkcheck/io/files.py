"""Reading token files: numpy, safetensors, torch and CSV.

Formats (one dataset of ``n`` samples of ``d``-dimensional tokens):

* ``.npy``: one array of shape ``(n, N, d)``.
* ``.npz`` and ``.safetensors``: arrays ``sample_0``, ``sample_1``, ... of shapes
  ``(N_i, d)`` (ragged allowed, numeric order of the suffix), or one array ``tokens`` of
  shape ``(n, N, d)``. ``.safetensors`` is read with numpy through the ``safetensors``
  package (``pip install ntkcheck[models]``), no torch.
* ``.pt`` / ``.pth``: a tensor ``(n, N, d)``, or a dict of tensors named as in ``.npz``,
  or a list of ``(N_i, d)`` tensors, read with ``torch.load(..., weights_only=True)``
  (torch is optional and never installed by ntkcheck).
* ``.csv``: one row per token, with a header. Columns ``sample`` (the sample id, integers
  ``0 .. n-1``), optionally ``token`` (the token's position in its sample; rows are
  sorted by it, else kept in file order) and ``x0, x1, ..., x{d-1}`` (the coordinates)::

      sample,token,x0,x1
      0,0,0.0,0.5
      0,1,1.0,-0.25
      1,0,2.0,0.0

Only plain real numeric arrays are read (integers and floats): pickled objects,
complex, boolean, string and other dtypes are refused with a message naming the file
and the dtype, never converted silently. Values are kept exact: integer arrays beyond
2^53, long doubles and CSV decimals that are not doubles (``0.1``) reach the exact engines
at the values in the file (theory/certificates.md, "Inputs: exact, refused or rounded").
"""

from __future__ import annotations

import csv
import math
import re
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .._memory import require_memory
from .._validate import as_exact_samples
from ..cgf import Empirical, as_laws
from ..errors import InputError
from ._preflight import check_numpy_file, load_cost

__all__ = ["load_samples", "load_laws", "bundled_path", "BUNDLED_DATA"]

_FORMATS = ".npy, .npz, .safetensors, .pt or .csv"

_SAMPLE_KEY = re.compile(r"^sample_(\d+)$")

_KINDS = {"c": "complex", "b": "boolean", "U": "string", "S": "bytes", "O": "object", "V": "structured",
          "M": "datetime", "m": "timedelta"}


#: What the dataset shipped with the package (``ntkcheck/data/screen_default.npz``) is.
BUNDLED_DATA = (
    "the bundled example (ntkcheck/data/screen_default.npz, d = 3): samples 0-3 are random Gaussian "
    "token sets; samples 4-6 are a planted dependency, sample 6 = {0, u, v, u+v} is the law of X+Y "
    "for X ~ sample 4 = {0, u} and Y ~ sample 5 = {0, v}, sharing the atom 0"
)


def bundled_path(name: str = "screen_default.npz") -> Path:
    """Path of a data file shipped with the package (``ntkcheck/data/``)."""
    return Path(str(resources.files("ntkcheck") / "data" / name))


def _real(arr: np.ndarray, where: str) -> np.ndarray:
    """``arr`` if it holds real numbers within the float64 range; else an InputError naming ``where``.

    Integers (any width) and long doubles are kept as they are: their values are exact even
    where float64 would round them (theory/certificates.md, "Inputs: exact, refused or rounded")."""
    if arr.dtype.kind not in "iuf":
        what = _KINDS.get(arr.dtype.kind, "non-numeric")
        raise InputError(f"{where}: expected real numeric tokens (integers or floats), got a {what} array "
                         f"(dtype {arr.dtype}); convert the tokens to float64 first")
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:  # long double: may exceed float64
        big = np.abs(arr[np.isfinite(arr)])
        if big.size and big.max() > np.finfo(np.float64).max:
            top = np.format_float_scientific(big.max(), precision=3)
            raise InputError(f"{where}: a token coordinate ({top}) is beyond the float64 range (1.8e308)")
    return arr


def _from_named(arrays: dict[str, Any], p: Path) -> Any:
    """``sample_0, sample_1, ...`` or ``tokens`` from a mapping of arrays (npz, safetensors, torch)."""
    keys = list(arrays.keys())
    numbered = sorted(((int(m.group(1)), k) for k in keys if (m := _SAMPLE_KEY.match(k))), key=lambda t: t[0])
    if numbered:
        idx = [i for i, _ in numbered]
        if idx != list(range(len(idx))):
            raise InputError(f"{p}: sample keys must be sample_0 ... sample_{len(idx) - 1} without gaps, "
                             f"got {[k for _, k in numbered]}")
        return [_real(np.asarray(arrays[k]), f"{p}[{k}]") for _, k in numbered]
    if "tokens" in keys:
        return _real(np.asarray(arrays["tokens"]), f"{p}[tokens]")
    raise InputError(f"{p}: expected arrays named sample_0, sample_1, ... or one array 'tokens', found {keys}")


def _read_safetensors(p: Path) -> Any:
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
    except ImportError:
        raise InputError(f"{p}: reading .safetensors needs the safetensors package "
                         "(pip install 'ntkcheck[models]')") from None
    try:
        arrays = load_file(str(p))
    except (SafetensorError, OSError, ValueError, TypeError) as exc:
        raise InputError(f"{p}: not a readable safetensors file ({exc})") from None
    return _from_named(arrays, p)


def _torch_to_numpy(t: Any, where: str) -> np.ndarray:
    import torch

    if not isinstance(t, torch.Tensor):
        raise InputError(f"{where}: expected a tensor, got {type(t).__name__}")
    if t.is_floating_point() and t.dtype not in (torch.float32, torch.float64):
        t = t.double()  # bfloat16 / float16 have no exact numpy counterpart: widen exactly
    return t.detach().cpu().numpy()


def _read_torch(p: Path) -> Any:
    try:
        import torch
    except ImportError:
        raise InputError(f"{p}: reading .pt files needs torch, which is not installed; install torch, or "
                         "save the tokens with safetensors or numpy (.safetensors, .npz)") from None
    try:
        obj = torch.load(str(p), map_location="cpu", weights_only=True)  # never unpickles code
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, ... for bad files
        raise InputError(f"{p}: not a readable torch tensor file ({type(exc).__name__}: {exc})") from None
    if isinstance(obj, dict):
        return _from_named({k: _torch_to_numpy(v, f"{p}[{k}]") for k, v in obj.items()}, p)
    if isinstance(obj, (list, tuple)):
        return [_real(_torch_to_numpy(v, f"{p}[{i}]"), f"{p}[{i}]") for i, v in enumerate(obj)]
    return _real(_torch_to_numpy(obj, str(p)), str(p))


def _read_csv(p: Path) -> Any:
    """One row per token: ``sample``, optional ``token``, ``x0 .. x{d-1}`` (see the module docstring)."""
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: not a readable CSV file ({exc})") from None
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if not rows:
        raise InputError(f"{p}: empty CSV file; expected a header sample,token,x0,x1,... and one row per token")
    header = [c.strip() for c in rows[0]]
    coords = [c for c in header if re.fullmatch(r"x\d+", c)]
    want = [f"x{k}" for k in range(len(coords))]
    if "sample" not in header or not coords or sorted(coords, key=lambda c: int(c[1:])) != want:
        raise InputError(f"{p}: expected a header with columns sample, optionally token, and x0 ... x{{d-1}}; "
                         f"got {header}")
    extra = [c for c in header if c not in ("sample", "token", *want)]
    if extra:
        raise InputError(f"{p}: unexpected columns {extra}; expected sample, token (optional), x0 ... x{len(want) - 1}")
    col = {c: header.index(c) for c in header}
    samples: dict[int, list[tuple[int, list[float]]]] = {}
    for line, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise InputError(f"{p}, line {line}: {len(r)} fields, the header has {len(header)}")
        try:
            sid = int(r[col["sample"]])
            pos = int(r[col["token"]]) if "token" in col else line
            x = [_decimal(r[col[c]]) for c in want]
        except (ValueError, ZeroDivisionError):
            raise InputError(f"{p}, line {line}: expected an integer sample id"
                             f"{', an integer token index' if 'token' in col else ''} and numbers, got {r}") from None
        samples.setdefault(sid, []).append((pos, x))
    ids = sorted(samples)
    if ids != list(range(len(ids))):
        raise InputError(f"{p}: sample ids must be 0 ... {len(ids) - 1} without gaps, got {ids}")
    out = []
    for sid in ids:
        toks = sorted(samples[sid], key=lambda t: t[0])
        pos = [t[0] for t in toks]
        if "token" in col and len(set(pos)) != len(pos):
            raise InputError(f"{p}: sample {sid} repeats a token index")
        vals = [t[1] for t in toks]
        exact = all(isinstance(v, float) for row in vals for v in row)
        out.append(np.array(vals, dtype=np.float64 if exact else object))
    return out


def _decimal(text: str) -> float | Fraction:
    """A CSV coordinate at its exact value: the float when the decimal is a double (``0.25``), else
    the ``Fraction`` it denotes (``0.1`` is 1/10); ``nan`` and ``inf`` stay floats (refused later)."""
    x = float(text)
    if not math.isfinite(x):
        return x
    q = Fraction(text.strip())
    return x if Fraction(x) == q else q


def _read(p: Path) -> Any:
    """The raw token arrays of a file: one ``(n, N, d)`` array or a list of ``(N_i, d)`` arrays."""
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a token file ({_FORMATS})")
    if not p.is_file():  # a FIFO or a device would block or never end
        raise InputError(f"{p}: not a regular file, expected a token file ({_FORMATS})")
    suffix = p.suffix.lower()
    check_numpy_file(p)  # headers and zip sizes first: corrupt or too large files are refused unread
    if suffix == ".safetensors":
        return _read_safetensors(p)
    if suffix in (".pt", ".pth"):
        return _read_torch(p)
    if suffix == ".csv":
        # a text number is at least 2 bytes ("0,"): at most size / 2 entries, each a Python float in a list
        require_memory(load_cost(p.stat().st_size // 2, 40, 0), f"reading {p}", "the size of the file")
        return _read_csv(p)
    try:
        if suffix == ".npy":
            return _real(np.load(p, allow_pickle=False), str(p))
        if suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                return _from_named(z, p)
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        why = "it holds pickled objects or is not in .npy format; only plain numeric arrays are read" if "pickle" in str(exc) else str(exc)
        raise InputError(f"{p}: not a readable numpy array file ({why})") from None
    raise InputError(f"{p}: unsupported file type {suffix!r}; expected {_FORMATS}")


def _in_file(p: Path, exc: InputError) -> InputError:
    msg = str(exc)
    return InputError(msg if msg.startswith(str(p)) else f"{p}: {msg}")


def load_samples(path: str | Path) -> list[np.ndarray]:
    """Load token samples from a file.

    Parameters
    ----------
    path : str or Path
        ``.npy``: one array of shape ``(n, N, d)``. ``.npz`` or ``.safetensors``: arrays
        ``sample_0``, ``sample_1``, ... of shapes ``(N_i, d)`` (ragged allowed, taken in
        numeric order of the suffix), or a single array ``tokens`` of shape ``(n, N, d)``.
        ``.pt``: the same as tensors (torch optional). ``.csv``: one row per token with
        columns ``sample``, optional ``token``, ``x0 .. x{d-1}`` (module docstring).
        Integer or float dtypes only.

    Returns
    -------
    list of (N_i, d) arrays, validated (finite, non-empty, one dimension): float64 when the
    file's values are doubles, else the exact values (the integer or long-double array as
    stored, or, for a CSV decimal such as ``0.1``, an object array of ``Fraction``), so that
    nothing is rounded before the exact engines see it.
    """
    p = Path(path)
    raw = _read(p)
    try:
        return as_exact_samples(raw)
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
