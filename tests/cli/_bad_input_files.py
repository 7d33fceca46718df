"""The files the bad-input suite (``test_bad_input.py``) feeds to the command line and the API.

Each is made small and fast; the ones that claim to be huge only claim it (a header, a zip
member of zeros that compresses a thousandfold).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npformat

#: rows of zeros in the zip bomb's member (float64, one column): 800 MB inflated, under 1 MB stored
BOMB_ROWS = 10**8


def _npz(path: Path, **arrays: np.ndarray) -> None:
    np.savez(path, **arrays)


def _header_only(path: Path, shape: tuple[int, ...], data: bytes = b"\0" * 64) -> None:
    """A .npy whose header claims ``shape`` (float64) followed by only ``data``."""
    with open(path, "wb") as fh:
        npformat.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": shape})
        fh.write(data)


def _bomb(path: Path) -> None:
    """``sample_0`` of shape (BOMB_ROWS, 1), all zeros: 800 MB once inflated."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("sample_0.npy", "w", force_zip64=True) as fh:
            npformat.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (BOMB_ROWS, 1)})
            chunk = bytes(1 << 24)
            left = 8 * BOMB_ROWS
            while left:
                n = min(left, len(chunk))
                fh.write(chunk[:n])
                left -= n


def _csv(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def token_files(root: Path) -> None:
    """Token files, good and bad, in ``root``."""
    rng = np.random.default_rng(0)
    good = [np.round(rng.standard_normal((k, 3)) * 8) / 8 for k in (4, 5, 3)]
    _npz(root / "good.npz", **{f"sample_{i}": x for i, x in enumerate(good)})
    np.save(root / "good.npy", np.round(rng.standard_normal((4, 5, 3)) * 8) / 8)
    _npz(root / "d2.npz", **{f"sample_{i}": rng.standard_normal((3, 2)) for i in range(3)})
    (root / "corrupt.npz").write_bytes(b"PK\x03\x04" + b"not a zip archive" * 8)
    (root / "corrupt.npy").write_bytes(b"\x93NUMPY garbage" * 4)
    _header_only(root / "truncated.npy", (100, 5, 3))
    _header_only(root / "huge_header.npy", (10**5, 10**4, 10**4))
    _bomb(root / "bomb.npz")
    bad = np.ones((2, 3, 2))
    bad[1, 0, 1] = np.nan
    np.save(root / "nan.npy", bad)
    bad[1, 0, 1] = np.inf
    np.save(root / "inf.npy", bad)
    _npz(root / "empty_sample.npz", sample_0=np.ones((2, 3)), sample_1=np.ones((0, 3)))
    _npz(root / "mixed_dims.npz", sample_0=np.ones((2, 3)), sample_1=np.ones((2, 2)))
    _npz(root / "ragged.npz", sample_0=np.array([[0.0], [1.0]]), sample_1=np.array([[0.0], [2.0], [5.0]]),
         sample_2=np.array([[1.0], [3.0], [4.0], [9.0]]))
    _npz(root / "gap_keys.npz", sample_0=np.ones((2, 2)), sample_2=np.ones((2, 2)))
    _npz(root / "wrong_keys.npz", x=np.ones((2, 2)))
    np.save(root / "objects.npy", np.array([np.ones(2), "x"], dtype=object), allow_pickle=True)
    np.save(root / "strings.npy", np.array([[["a", "b"]]]))
    np.save(root / "bools.npy", np.ones((2, 2, 2), dtype=bool))
    np.save(root / "complex.npy", np.ones((2, 2, 2), dtype=complex))
    np.save(root / "two_d.npy", np.ones((5, 3)))
    np.save(root / "scalar.npy", np.float64(1.0))
    np.save(root / "int_big.npy", np.full((2, 2, 1), 2**60, dtype=np.int64))
    one = rng.standard_normal((3, 4, 3))
    one[0, 0, 0] = 1e308
    np.save(root / "coord_1e308.npy", one)
    np.save(root / "e155.npy", rng.standard_normal((3, 4, 3)) * 1e155)
    # 400 generic samples: the Arb certificate of their 400 x 400 block takes half a minute (issue 19 item 4)
    np.save(root / "many.npy", np.random.default_rng(5).standard_normal((400, 4, 2)))
    np.save(root / "tokens.txt", np.ones((2, 2, 2)))  # a .npy under a .txt name
    (root / "no_suffix").write_bytes((root / "good.npy").read_bytes())
    (root / "dir.npz").mkdir()
    (root / "corrupt.safetensors").write_bytes(b"\xff" * 8 + b"{not json")
    (root / "tokens.pt").write_bytes(b"PK\x03\x04 not a torch file")
    os.mkfifo(root / "fifo.npy")
    _csv(root / "good.csv", "sample,token,x0,x1\n0,0,0.5,1\n0,1,1,0\n1,0,2,1\n1,1,0,3\n")
    _csv(root / "bad_header.csv", "id,a,b\n0,1,2\n")
    _csv(root / "not_numbers.csv", "sample,x0\n0,abc\n")
    _csv(root / "gap_ids.csv", "sample,x0\n0,1\n2,3\n")
    _csv(root / "empty.csv", "")
    _csv(root / "short_row.csv", "sample,x0,x1\n0,1\n")


def head_files(root: Path) -> None:
    """Heads files for ``--heads-file`` (tokens in d = 3)."""
    rng = np.random.default_rng(1)
    _npz(root / "heads.npz", Q=rng.standard_normal((6, 3, 3)), b=rng.standard_normal((6, 3)))
    _npz(root / "heads_d2.npz", Q=rng.standard_normal((6, 2, 2)), b=rng.standard_normal((6, 2)))
    _npz(root / "heads_keys.npz", W=rng.standard_normal((6, 3, 3)))
    _npz(root / "heads_shape.npz", Q=rng.standard_normal((6, 3, 2)), b=rng.standard_normal((6, 3)))
    q = rng.standard_normal((6, 3, 3))
    q[0, 0, 0] = np.nan
    _npz(root / "heads_nan.npz", Q=q, b=rng.standard_normal((6, 3)))
    _npz(root / "heads_none.npz", Q=np.zeros((0, 3, 3)), b=np.zeros((0, 3)))
    (root / "heads_corrupt.npz").write_bytes(b"PK\x05\x06" + bytes(40))
    _header_only(root / "heads_huge.npy", (10**6, 10**4, 10**4))


def text_files(root: Path) -> None:
    """Texts for ``ntkcheck tokens``."""
    (root / "texts.txt").write_text("the cat sat on the mat\na dog ran\n", encoding="utf-8")
    (root / "blank.txt").write_text("\n  \n\n", encoding="utf-8")
    (root / "binary.txt").write_bytes(b"\xff\xfe\x00\x81 not utf-8 \xc3\x28")


def make_all(root: Path) -> Path:
    token_files(root)
    head_files(root)
    text_files(root)
    return root
