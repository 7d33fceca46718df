"""What a numpy file will cost, read from its headers before any array is loaded.

A ``.npy`` header states the shape and dtype of the array; a ``.npz`` is a zip whose central
directory states each member's decompressed size (``zipfile`` never inflates a member past
it) and whose members start with ``.npy`` headers. :func:`check_numpy_file` reads those
(``numpy.lib.format.read_magic`` / ``read_array_header_*``, ``zipfile.ZipFile.infolist``), then

* refuses a header that claims more data than the file (or the member) holds: a corrupt or
  truncated file, which ``np.load`` would otherwise answer by allocating the claimed size;
* refuses a file whose arrays, once read and turned into laws, would not fit in the
  available memory (:func:`ntkcheck._memory.require_memory`), with the estimate;
* turns a file that is not a zip (``BadZipFile``) into one :class:`~ntkcheck.errors.InputError`.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npformat

from .._memory import require_memory
from ..errors import InputError

__all__ = ["check_numpy_file", "load_cost"]

#: bytes per token row that the laws add beyond the coordinates (an exact rational mass per atom,
#: index arrays); measured on Empirical laws, rounded up
ROW_OVERHEAD = 200

#: largest .npy header read (numpy's own default)
MAX_HEADER = 10_000


def load_cost(count: int, itemsize: int, rows: int) -> int:
    """Peak bytes of reading ``count`` entries of ``itemsize`` bytes in ``rows`` token rows and
    turning them into laws: the raw array, its float64 copy, the distinct atoms, and
    :data:`ROW_OVERHEAD` per row."""
    return count * (itemsize + 16) + rows * ROW_OVERHEAD


def _header(fh: BinaryIO, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an open ``.npy`` stream, positioned after the header."""
    try:
        version = npformat.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = npformat.read_array_header_1_0(fh, max_header_size=MAX_HEADER)
        else:  # 2.0 and 3.0 share the 4-byte header length (3.0 only allows utf-8 field names)
            shape, _, dtype = npformat.read_array_header_2_0(fh, max_header_size=MAX_HEADER)
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise InputError(f"{where}: not a readable .npy array ({exc})") from None
    return tuple(int(s) for s in shape), dtype


def _check_array(shape: tuple[int, ...], dtype: np.dtype, stored: int, where: str) -> int:
    """The load cost of one array whose data part holds ``stored`` bytes; refuses a header that
    claims more than that."""
    count = math.prod(shape)
    claimed = count * dtype.itemsize
    if not dtype.hasobject and claimed > stored:
        raise InputError(f"{where}: the header claims an array of shape {shape} ({claimed} bytes of {dtype}) but "
                         f"the file holds only {stored} bytes of data: the file is truncated or corrupt")
    rows = count // shape[-1] if shape and shape[-1] > 0 else count
    return load_cost(count, dtype.itemsize, rows)


def _check_npy(p: Path) -> int:
    try:
        with open(p, "rb") as fh:
            shape, dtype = _header(fh, str(p))
            stored = os.fstat(fh.fileno()).st_size - fh.tell()
    except OSError as exc:
        raise InputError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    return _check_array(shape, dtype, stored, str(p))


def _check_npz(p: Path) -> int:
    total = 0
    try:
        with zipfile.ZipFile(p) as z:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                where = f"{p}[{info.filename[:-4]}]"
                with z.open(info) as fh:
                    shape, dtype = _header(fh, where)
                    stored = info.file_size - fh.tell()
                total += _check_array(shape, dtype, stored, where)
    except zipfile.BadZipFile as exc:
        raise InputError(f"{p}: not a readable .npz file (not a zip archive: {exc})") from None
    except (zipfile.LargeZipFile, NotImplementedError, RuntimeError, OSError, EOFError) as exc:
        raise InputError(f"{p}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
    return total


def check_numpy_file(path: str | Path, what: str = "the token file") -> None:
    """Read the headers of a ``.npy`` / ``.npz`` file and refuse it before loading when it is
    corrupt (a header larger than the data, not a zip) or would not fit in memory.

    Other suffixes are left to their readers.

    Raises
    ------
    InputError
        A corrupt file; :class:`~ntkcheck._memory.MemoryLimitError` when the estimate of
        reading it exceeds the available memory.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        cost = _check_npy(p)
    elif suffix == ".npz":
        cost = _check_npz(p)
    else:
        return
    require_memory(cost, f"reading {p} ({what})", "the size of the file (fewer or shorter samples)")
