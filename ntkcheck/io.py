"""Reading token files: ``.npy`` of shape ``(n, N, d)`` or ``.npz`` with one array per sample."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import numpy as np

from ._validate import as_samples
from .errors import InputError

__all__ = ["load_samples", "bundled_path"]

_SAMPLE_KEY = re.compile(r"^sample_(\d+)$")


def bundled_path(name: str = "screen_default.npz") -> Path:
    """Path of a data file shipped with the package (``ntkcheck/data/``)."""
    return Path(str(resources.files("ntkcheck") / "data" / name))


def load_samples(path: str | Path) -> list[np.ndarray]:
    """Load token samples from a file.

    Parameters
    ----------
    path : str or Path
        ``.npy``: one array of shape ``(n, N, d)``. ``.npz``: arrays ``sample_0``,
        ``sample_1``, ... of shapes ``(N_i, d)`` (ragged allowed, taken in numeric
        order of the suffix), or a single array ``tokens`` of shape ``(n, N, d)``.

    Returns
    -------
    list of (N_i, d) float arrays, validated (finite, non-empty, one dimension).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a .npy or .npz file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
            return as_samples(arr)
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
                    return as_samples([z[k] for _, k in numbered])
                if "tokens" in keys:
                    return as_samples(z["tokens"])
                raise InputError(f"{p}: expected arrays named sample_0, sample_1, ... or one array 'tokens', found {keys}")
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        why = "it holds pickled objects or is not in .npy format; only plain numeric arrays are read" if "pickle" in str(exc) else str(exc)
        raise InputError(f"{p}: not a readable numpy array file ({why})") from None
    raise InputError(f"{p}: unsupported file type {suffix!r}; expected .npy or .npz")
