"""Reading user data: token files, arrays, state dicts and (with the ``models`` extra) real models.

What lives here: loaders that turn ``.npy``/``.npz`` files into validated samples and
empirical laws (``files``), heads files into :class:`~ntkcheck.ntk.gram_matrix.features.Heads` (``heads``),
arrays from ``.npy``/``.npz``/``.safetensors``/``.pt`` files never unpickled (``arrays``), the heads of a
trained attention layer from its state dict (``state_dict``: PyTorch ``nn.MultiheadAttention`` and Hugging
Face layers), and ``models``, which reads a locally installed sentence-embedding model; it is imported on
demand (``import ntkcheck.io.models``).

May import: :mod:`ntkcheck.ntk`, :mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

# arrays and state dicts
from .arrays import load_array as load_array
from .arrays import read_tensors as read_tensors
from .files import bundled_path as bundled_path
from .files import load_laws as load_laws

# files
from .files import load_samples as load_samples

# heads files
from .heads import load_heads as load_heads
from .state_dict import heads_from_file as heads_from_file
from .state_dict import heads_from_state_dict as heads_from_state_dict

__all__ = [
    'load_samples',
    'load_laws',
    'bundled_path',
    'load_heads',
    'load_array',
    'read_tensors',
    'heads_from_state_dict',
    'heads_from_file',
]
