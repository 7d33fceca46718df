"""Tests of token file reading (ntkcheck.io)."""

from __future__ import annotations

import numpy as np
import pytest

from ntkcheck.errors import InputError
from ntkcheck.io import load_samples


def test_npy_and_npz(tmp_path):
    x = np.random.default_rng(0).normal(size=(3, 4, 2))
    np.save(tmp_path / "a.npy", x)
    got = load_samples(tmp_path / "a.npy")
    assert len(got) == 3 and all(np.array_equal(g, xi) for g, xi in zip(got, x))
    np.savez(tmp_path / "b.npz", sample_1=x[1, :2], sample_0=x[0], sample_10=x[2], **{f"sample_{k}": x[0] for k in range(2, 10)})
    got = load_samples(tmp_path / "b.npz")
    assert len(got) == 11 and got[1].shape == (2, 2) and np.array_equal(got[10], x[2])  # numeric order, ragged
    np.savez(tmp_path / "c.npz", tokens=x)
    assert len(load_samples(tmp_path / "c.npz")) == 3


@pytest.mark.parametrize(
    "setup, msg",
    [
        (lambda p: p.write_text("hello"), "not a readable"),
        (lambda p: np.save(p, np.zeros((2, 3))), "shape"),
        (lambda p: np.save(p, np.full((1, 2, 2), np.nan)), "non-finite"),
    ],
)
def test_bad_files(tmp_path, setup, msg):
    p = tmp_path / "bad.npy"
    setup(p)
    with pytest.raises(InputError, match=msg):
        load_samples(p)


def test_missing_and_wrong_keys(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_samples(tmp_path / "nope.npz")
    np.savez(tmp_path / "k.npz", foo=np.zeros((1, 2, 2)))
    with pytest.raises(InputError, match="sample_0"):
        load_samples(tmp_path / "k.npz")
    np.savez(tmp_path / "m.npz", sample_0=np.zeros((2, 2)), sample_1=np.zeros((2, 3)))
    with pytest.raises(InputError, match="dimension"):
        load_samples(tmp_path / "m.npz")
