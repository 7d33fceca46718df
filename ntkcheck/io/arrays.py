r"""Numeric arrays and state dicts from the files people save: ``.npy``, ``.npz``, ``.safetensors``, ``.pt``.

:func:`read_tensors` returns every array of a file by name, never unpickling anything:

* ``.npy`` / ``.npz``: ``numpy.load(..., allow_pickle=False)`` after the header checks of
  :func:`~ntkcheck.io._preflight.check_numpy_file` (a header claiming more than the file holds is refused);
* ``.safetensors``: read here from its documented layout (an 8-byte little-endian header length, a
  JSON header mapping each name to ``dtype``, ``shape`` and ``data_offsets``, then the raw bytes),
  because numpy has no bfloat16: a ``BF16`` tensor becomes float32 exactly (a bfloat16 number is the
  upper half of a float32) and keeps the precision name ``"bfloat16"``, so a certificate's default
  error bound is that of bfloat16. The ``safetensors`` package reads the same files but refuses BF16
  with numpy;
* ``.pt`` / ``.pth`` (``torch.save``): with torch installed, ``torch.load(..., weights_only=True)``
  (tensors and dicts of tensors only: no code runs); without it, a one-line error says how to save
  the tensor as ``.npy``. torch is optional and never imported otherwise.

:func:`load_array` is the one-array case (a matrix or a Jacobian for ``ntkcheck certify``).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._memory import require_memory
from ..errors import InputError
from ._preflight import check_numpy_file

__all__ = ["Tensor", "read_tensors", "load_array", "SAVE_HINT"]

#: how to save a tensor as a file every route reads
SAVE_HINT = "save it with numpy.save('K.npy', tensor.detach().cpu().double().numpy())"

#: safetensors dtype names and the numpy dtypes they are read as (BF16: raw 16-bit words)
_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
              "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8"}
#: the largest safetensors JSON header read (the format's own limit is 100 MB)
_MAX_HEADER = 100 << 20


@dataclass(frozen=True)
class Tensor:
    """An array read from a file and the precision its values were stored in (``"bfloat16"`` for a
    BF16 tensor held as float32; otherwise the numpy dtype's name)."""

    array: np.ndarray
    precision: str


def _npy(p: Path) -> dict[str, Tensor]:
    import zipfile

    check_numpy_file(p, "the array file")
    try:
        z = np.load(p, allow_pickle=False)
    except ValueError:
        raise InputError(f"{p}: holds Python objects, not numbers: {SAVE_HINT}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{p}: not a readable .npy or .npz file ({exc})") from None
    if isinstance(z, np.ndarray):
        return {"array": Tensor(z, str(z.dtype))}
    out: dict[str, Tensor] = {}
    with z:
        for name in z.files:
            try:
                a = z[name]
            except ValueError:
                raise InputError(f"{p}: an array holds Python objects, not numbers: {SAVE_HINT}") from None
            out[name] = Tensor(a, str(a.dtype))
    return out


def _safetensors(p: Path) -> dict[str, Tensor]:
    size = p.stat().st_size
    with p.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise InputError(f"{p}: not a safetensors file (shorter than its 8-byte header length)")
        (hlen,) = struct.unpack("<Q", head)
        if hlen > min(_MAX_HEADER, size - 8):
            raise InputError(f"{p}: not a safetensors file (its header claims {hlen} bytes)")
        try:
            header = json.loads(fh.read(hlen).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise InputError(f"{p}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise InputError(f"{p}: not a safetensors file (its header is not a JSON object)")
    base, out = 8 + hlen, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        out[name] = _st_tensor(p, name, info, base, size)
    return out


def _st_tensor(p: Path, name: str, info: object, base: int, size: int) -> Tensor:
    bad = InputError(f"{p}: tensor {name!r} has a malformed entry in the safetensors header")
    if not isinstance(info, dict):
        raise bad
    dt, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dt not in _ST_DTYPES:
        raise InputError(f"{p}: tensor {name!r} has dtype {dt!r}; expected one of {', '.join(_ST_DTYPES)}")
    if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)
            and isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)):
        raise bad
    dtype = np.dtype(_ST_DTYPES[dt])
    count = math.prod(shape)
    start, end = offs
    if not (0 <= start <= end and end - start == count * dtype.itemsize and base + end <= size):
        raise InputError(f"{p}: tensor {name!r} claims bytes beyond the file or a size that does not match its shape")
    require_memory(count * (dtype.itemsize + 8) * 2, f"tensor {name!r} of {p}", "the file size")
    raw = np.fromfile(p, dtype=dtype, count=count, offset=base + start).reshape(shape)
    if dt == "BF16":  # a bfloat16 number is the upper half of a float32: exact
        return Tensor((raw.astype(np.uint32) << 16).view(np.float32), "bfloat16")
    return Tensor(raw, str(raw.dtype))


def _torch(p: Path) -> dict[str, Tensor]:
    try:
        import torch
    except ImportError:
        raise InputError(f"{p}: reading a {p.suffix} file needs torch, which ntkcheck does not require; {SAVE_HINT} "
                         "(or save a state dict with safetensors)") from None
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)  # tensors and containers only: no code runs
    except Exception as exc:  # noqa: BLE001 (torch raises many types for a file it cannot read safely)
        raise InputError(f"{p}: not a {p.suffix} file of tensors that torch reads without unpickling code "
                         f"({type(exc).__name__}); {SAVE_HINT}") from None
    items = obj.items() if isinstance(obj, dict) else [("array", obj)]
    out: dict[str, Tensor] = {}
    for name, t in items:
        if not isinstance(t, torch.Tensor):
            continue
        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            out[str(name)] = Tensor(t.float().numpy(), "bfloat16")
        elif t.is_floating_point() or not t.is_complex():
            out[str(name)] = Tensor(t.numpy(), str(t.numpy().dtype))
    if not out:
        raise InputError(f"{p}: holds no tensor; {SAVE_HINT}")
    return out


def read_tensors(path: str | Path) -> dict[str, Tensor]:
    """Every array of a ``.npy`` / ``.npz`` / ``.safetensors`` / ``.pt`` file by name (a ``.npy`` or a
    single ``.pt`` tensor is named ``"array"``), or :class:`~ntkcheck.errors.InputError`."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file" if not p.exists() else f"{p}: not a regular file")
    suffix = p.suffix.lower()
    if suffix in (".npy", ".npz"):
        return _npy(p)
    if suffix == ".safetensors":
        return _safetensors(p)
    if suffix in (".pt", ".pth", ".bin"):
        return _torch(p)
    raise InputError(f"{p}: expected a .npy, .npz, .safetensors or .pt file; {SAVE_HINT}")


def load_array(path: str | Path, what: str = "matrix") -> Tensor:
    """The one array of a file (``what`` names it in errors)."""
    tensors = read_tensors(path)
    if len(tensors) != 1:
        names = ", ".join(sorted(tensors)[:6]) + (" ..." if len(tensors) > 6 else "")
        raise InputError(f"{path}: expected one array (the {what}), found {len(tensors)}: {names}")
    return next(iter(tensors.values()))
