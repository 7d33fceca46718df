"""Tests of token file reading (ntkcheck.io.files)."""

from __future__ import annotations

import numpy as np
import pytest

from ntkcheck.errors import InputError
from ntkcheck.io.files import load_samples


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


def test_load_laws_merges_repeats_with_exact_masses(tmp_path):
    """A sample is its law (seed 003 section 3): repeated tokens are one atom with their mass."""
    from fractions import Fraction

    from ntkcheck.cgf import Empirical
    from ntkcheck.io.files import load_laws

    np.savez(tmp_path / "r.npz", sample_0=np.array([[0.0], [1.0], [0.0]]), sample_1=np.array([[2.0], [5.0], [5.0], [5.0], [7.0]]))
    laws = load_laws(tmp_path / "r.npz")
    assert all(isinstance(m, Empirical) for m in laws)
    assert laws[0].atoms[:, 0].tolist() == [0.0, 1.0] and laws[0].weights == (Fraction(2, 3), Fraction(1, 3))
    assert laws[1].atoms[:, 0].tolist() == [2.0, 5.0, 7.0] and laws[1].weights == (Fraction(1, 5), Fraction(3, 5), Fraction(1, 5))
    x = np.random.default_rng(0).integers(-3, 4, size=(3, 4, 2))  # integer tokens are read exactly
    np.save(tmp_path / "i.npy", x)
    laws = load_laws(tmp_path / "i.npy")
    assert len(laws) == 3 and all(sum(m.weights) == 1 for m in laws)
    assert [sorted(map(tuple, m.atoms.tolist())) for m in laws] == [sorted(set(map(tuple, xi.tolist()))) for xi in x]


@pytest.mark.parametrize(
    "array, what",
    [
        (np.ones((2, 3, 1)) + 1j, "complex"),
        (np.ones((2, 3, 1), dtype=bool), "boolean"),
        (np.array([[["1"], ["2"]]]), "string"),
        (np.array([[[b"1"], [b"2"]]]), "bytes"),
        (np.zeros((1, 2, 1), dtype=[("x", "f8")]), "structured"),
        (np.zeros((1, 2, 1), dtype="datetime64[s]"), "datetime"),
    ],
    ids=["complex", "bool", "str", "bytes", "structured", "datetime"],
)
def test_non_real_arrays_are_refused(tmp_path, array, what):
    """Issue 9 item 6: complex, bool and string tokens were read silently (imaginary part dropped)."""
    from ntkcheck.io.files import load_laws

    np.save(tmp_path / "x.npy", array)
    np.savez(tmp_path / "x.npz", sample_0=np.zeros((2, 1)), sample_1=array[0])
    for load in (load_samples, load_laws):
        with pytest.raises(InputError, match=f"x.npy: expected real numeric tokens.*{what}"):
            load(tmp_path / "x.npy")
        with pytest.raises(InputError, match=rf"x.npz\[sample_1\]: expected real numeric tokens.*{what}"):
            load(tmp_path / "x.npz")


def test_object_arrays_are_refused(tmp_path):
    """Pickled object arrays are never unpickled, in .npy files or as .npz members."""
    from ntkcheck.io.files import load_laws

    obj = np.array([[[1], [2]]], dtype=object)
    np.save(tmp_path / "o.npy", obj, allow_pickle=True)
    np.savez(tmp_path / "o.npz", sample_0=np.zeros((2, 1)), sample_1=obj[0])
    for load in (load_samples, load_laws):
        for name in ("o.npy", "o.npz"):
            with pytest.raises(InputError, match="pickled objects"):
                load(tmp_path / name)


@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max, reason="long double is double here")
def test_long_doubles_beyond_float64_are_refused(tmp_path):
    """A long double beyond 1.8e308 would become inf in float64: refused with its value."""
    from ntkcheck.io.files import load_laws

    np.save(tmp_path / "ld.npy", np.full((1, 2, 1), np.longdouble(10) ** 400))
    for load in (load_samples, load_laws):
        with pytest.raises(InputError, match="1.e\\+400.*beyond the float64 range"):
            load(tmp_path / "ld.npy")


def test_integers_beyond_2_53_are_refused(tmp_path):
    """Integer tokens beyond 2^53 would be rounded in float64 (the exact engines would then
    decide a different law): refused; 2^53 itself is exact and read."""
    from ntkcheck.io.files import load_laws

    np.save(tmp_path / "big.npy", np.full((1, 2, 1), 2**60 + 1, dtype=np.int64))
    np.save(tmp_path / "ok.npy", np.full((1, 2, 1), 2**53, dtype=np.int64))
    for load in (load_samples, load_laws):
        with pytest.raises(InputError, match="2\\^53"):
            load(tmp_path / "big.npy")
    assert load_samples(tmp_path / "ok.npy")[0][0, 0] == 2.0**53
    assert load_laws(tmp_path / "ok.npy")[0].atoms[0, 0] == 2.0**53


def test_errors_name_the_file(tmp_path):
    from ntkcheck.io.files import load_laws

    np.savez(tmp_path / "m.npz", sample_0=np.zeros((2, 2)), sample_1=np.zeros((2, 3)))
    with pytest.raises(InputError, match=r"m.npz: sample 1 has dimension 3, the others have 2"):
        load_laws(tmp_path / "m.npz")
    np.save(tmp_path / "n.npy", np.array([[[0.0], [np.inf]]]))
    with pytest.raises(InputError, match=r"n.npy: sample 0: token 1 has a non-finite entry"):
        load_laws(tmp_path / "n.npy")
