"""Reading attention heads from a file: ``.npz`` with arrays ``Q (H, d, d)`` and ``b (H, d)``.

The arrays are read at their exact values (:class:`~ntkcheck.ntk.gram_matrix.features.Heads`; theory/certificates.md,
"Inputs: exact, refused or rounded"). Pickled objects are never loaded (``allow_pickle=False``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from ..ntk.gram_matrix.features import Heads
from ._preflight import check_numpy_file

__all__ = ["load_heads"]


def load_heads(path: str | Path) -> Heads:
    """Heads from an ``.npz`` file with arrays ``Q`` of shape ``(H, d, d)`` and ``b`` of shape ``(H, d)``.

    The arrays are read at their exact values (:class:`~ntkcheck.ntk.gram_matrix.features.Heads`): integer
    and long-double arrays are not rounded silently (``Heads.rounded`` says when their doubles
    differ from them); complex, boolean and string arrays are refused. A ``.npy`` file holds one
    array, not the two a head set needs: refused with the way to write an ``.npz``.
    """
    import zipfile

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such heads file" if not p.exists() else f"{p}: not a regular file")
    check_numpy_file(p, "the heads file")  # a corrupt zip or a header claiming terabytes: refused unread
    how = "write it with numpy.savez(path, Q=Q, b=b)"
    try:
        z = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{p}: not a readable .npz heads file ({exc}); {how}") from None
    if not hasattr(z, "keys"):  # a .npy: one array
        raise InputError(f"{p}: a heads file is an .npz with two arrays, Q (H, d, d) and b (H, d); this file holds "
                         f"a single array of shape {getattr(z, 'shape', '?')}: {how}")
    try:
        with z:
            keys = list(z.keys())
            if "Q" not in keys or "b" not in keys:
                raise InputError(f"{p}: expected arrays named Q (H, d, d) and b (H, d), found {keys}")
            Q, b = z["Q"], z["b"]
    except InputError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{p}: not a readable .npz heads file ({exc})") from None
    try:
        return Heads(Q, b)
    except InputError as exc:
        raise InputError(f"{p}: {exc}") from None
