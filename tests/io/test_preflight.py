"""Numpy files are measured from their headers before loading (ntkcheck.io._preflight)."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
from numpy.lib import format as npformat

from ntkcheck._memory import MEMORY_ENV, MemoryLimitError
from ntkcheck.errors import InputError
from ntkcheck.io._preflight import ROW_OVERHEAD, check_numpy_file, load_cost
from ntkcheck.io.files import load_samples


def test_load_cost_counts_the_array_its_copy_and_the_rows():
    """Independent count: the raw array (itemsize), a float64 copy and the distinct atoms (16 bytes
    an entry), ROW_OVERHEAD per token row."""
    assert load_cost(6, 4, 2) == 6 * 4 + 6 * 16 + 2 * ROW_OVERHEAD


def test_a_header_larger_than_the_data_is_refused_unread(tmp_path):
    p = tmp_path / "t.npy"
    with open(p, "wb") as fh:
        npformat.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 4, 3)})
        fh.write(bytes(80))
    with pytest.raises(InputError, match=r"claims an array of shape \(1000000, 4, 3\).*holds only 80 bytes"):
        check_numpy_file(p)
    with pytest.raises(InputError, match="truncated or corrupt"):
        load_samples(p)


def test_a_valid_file_passes_and_loads_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "1G")
    x = np.arange(24, dtype=float).reshape(2, 4, 3)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", sample_0=x[0], sample_1=x[1])
    check_numpy_file(tmp_path / "x.npy")
    check_numpy_file(tmp_path / "x.npz")
    for name in ("x.npy", "x.npz"):
        got = load_samples(tmp_path / name)
        np.testing.assert_array_equal(np.stack(got), x)  # exact: nothing is converted


def test_a_zip_member_that_inflates_past_memory_is_refused(tmp_path, monkeypatch):
    """A member of 16 MB of zeros (stored in a few kB) with 4 MiB available: refused from the zip
    directory and the member's .npy header, before inflating it."""
    p = tmp_path / "bomb.npz"
    rows = 2 * 10**6
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("sample_0.npy", "w") as fh:
            npformat.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (rows, 1)})
            fh.write(bytes(8 * rows))
    assert p.stat().st_size < 100_000
    monkeypatch.setenv(MEMORY_ENV, "4M")
    with pytest.raises(MemoryLimitError, match=r"would need about .* 4\.0 MiB available"):
        load_samples(p)
    monkeypatch.setenv(MEMORY_ENV, "1G")  # the same file fits in 1 GiB and loads
    assert load_samples(p)[0].shape == (rows, 1)


def test_not_a_zip_and_not_a_regular_file(tmp_path):
    (tmp_path / "c.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(InputError, match="not a zip archive"):
        load_samples(tmp_path / "c.npz")
    import os

    os.mkfifo(tmp_path / "f.npy")
    with pytest.raises(InputError, match="not a regular file"):
        load_samples(tmp_path / "f.npy")  # opening a FIFO would block: refused before
