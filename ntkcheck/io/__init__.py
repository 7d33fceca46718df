"""Reading user data: token files and (with the ``models`` extra) real models.

What lives here: loaders that turn ``.npy``/``.npz`` files into validated samples and
empirical laws (``files``), heads files into :class:`~ntkcheck.ntk.gram_matrix.features.Heads` (``heads``), and ``models``, which reads a locally installed
sentence-embedding model; it is imported on demand (``import ntkcheck.io.models``).

May import: :mod:`ntkcheck.ntk`, :mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

from .files import bundled_path as bundled_path
from .files import load_laws as load_laws

# files
from .files import load_samples as load_samples

# heads files
from .heads import load_heads as load_heads

__all__ = [
    'load_samples',
    'load_laws',
    'bundled_path',
    'load_heads',
]
