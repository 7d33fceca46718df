"""Tests of token file reading (ntkcheck.io.files)."""

from __future__ import annotations

from fractions import Fraction

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


def test_integers_beyond_2_53_are_read_exactly(tmp_path):
    """Issue 19: integer tokens beyond 2^53 are exact values that float64 would round; they are
    read at their exact values (the engines decide the law given), and 2^53 itself is a double."""
    from ntkcheck.io.files import load_laws

    np.save(tmp_path / "big.npy", np.array([[[0], [2**60 + 1]], [[1], [2**60 + 2]]], dtype=np.int64))
    np.save(tmp_path / "ok.npy", np.full((1, 2, 1), 2**53, dtype=np.int64))
    got = load_samples(tmp_path / "big.npy")
    assert got[0].dtype == np.int64 and int(got[0][1, 0]) == 2**60 + 1
    laws = load_laws(tmp_path / "big.npy")
    assert [law.rounded for law in laws] == [True, True]
    assert laws[0].rational_atoms() == [(Fraction(0),), (Fraction(2**60 + 1),)]
    assert laws[1].projected([1]) == [Fraction(1), Fraction(2**60 + 2)]  # not 2^60, its double
    assert load_samples(tmp_path / "ok.npy")[0][0, 0] == 2.0**53
    assert not load_laws(tmp_path / "ok.npy")[0].rounded


def test_csv_decimals_are_read_exactly(tmp_path):
    """Issue 19: a CSV coordinate 0.1 is 1/10, not its double; dyadic decimals stay float64."""
    from ntkcheck.io.files import load_laws

    (tmp_path / "t.csv").write_text("sample,x0\n0,0.1\n0,0.25\n1,0.5\n1,-2\n")
    got = load_samples(tmp_path / "t.csv")
    assert got[0].dtype == object and got[1].dtype == np.float64
    laws = load_laws(tmp_path / "t.csv")
    assert laws[0].rational_atoms() == [(Fraction(1, 10),), (Fraction(1, 4),)] and not laws[1].rounded


def test_errors_name_the_file(tmp_path):
    from ntkcheck.io.files import load_laws

    np.savez(tmp_path / "m.npz", sample_0=np.zeros((2, 2)), sample_1=np.zeros((2, 3)))
    with pytest.raises(InputError, match=r"m.npz: sample 1 has dimension 3, the others have 2"):
        load_laws(tmp_path / "m.npz")
    np.save(tmp_path / "n.npy", np.array([[[0.0], [np.inf]]]))
    with pytest.raises(InputError, match=r"n.npy: sample 0: token 1 has a non-finite entry"):
        load_laws(tmp_path / "n.npy")


# ------------------------------------------------------------------ other formats (issue 13)


def _reference_csv(path, samples, *, token_column=True, shuffle=False):
    """Write ``samples`` in the documented CSV layout with the csv module (the reference writer)."""
    import csv

    d = samples[0].shape[1]
    rows = [(i, a, *x) for i, s in enumerate(samples) for a, x in enumerate(s)]
    if shuffle:  # rows in any order: the token column restores it
        rows = [rows[k] for k in np.random.default_rng(3).permutation(len(rows))]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["sample", *(["token"] if token_column else []), *[f"x{k}" for k in range(d)]])
        for r in rows:
            w.writerow([r[0], *([r[1]] if token_column else []), *[repr(float(v)) for v in r[2:]]])


@pytest.mark.parametrize("token_column, shuffle", [(True, False), (True, True), (False, False)])
def test_csv_layout_round_trips(tmp_path, token_column, shuffle):
    """The documented layout (sample, token, x0..x{d-1}) reads back the arrays written, ragged
    samples included. repr(float) writes the shortest decimal that rounds back to the double:
    the file's numbers are those decimals (read exactly, issue 19), and their nearest doubles are
    exactly the arrays written."""
    rng = np.random.default_rng(0)
    x = [rng.normal(size=(4, 3)), rng.normal(size=(2, 3)), rng.normal(size=(5, 3))]
    _reference_csv(tmp_path / "t.csv", x, token_column=token_column, shuffle=shuffle)
    got = load_samples(tmp_path / "t.csv")
    assert len(got) == 3
    for g, xi in zip(got, x, strict=True):
        np.testing.assert_array_equal(g.astype(np.float64), xi)
        assert all(Fraction(repr(float(v))) == v for v in g.reshape(-1))  # the decimals of the file


def test_csv_laws_merge_repeats(tmp_path):
    """load_laws on a CSV merges repeated tokens into atoms with exact masses, as for .npz."""
    from ntkcheck.io.files import load_laws

    (tmp_path / "r.csv").write_text("sample,token,x0\n0,0,0\n0,1,1\n0,2,0\n1,0,2\n1,1,5\n")
    laws = load_laws(tmp_path / "r.csv")
    assert [[str(m) for m in law.weights] for law in laws] == [["2/3", "1/3"], ["1/2", "1/2"]]


@pytest.mark.parametrize(
    "text, msg",
    [
        ("", "empty CSV"),
        ("a,b\n1,2\n", "expected a header"),
        ("sample,x0,x2\n0,1,2\n", "expected a header"),
        ("sample,x0,colour\n0,1,red\n", "unexpected columns"),
        ("sample,x0\n0,abc\n", "line 2"),
        ("sample,x0\n0,1,2\n", "line 2: 3 fields"),
        ("sample,x0\n0,1\n2,1\n", "without gaps"),
        ("sample,token,x0\n0,0,1\n0,0,2\n", "repeats a token index"),
        ("sample,x0\n0,nan\n", "non-finite"),
    ],
)
def test_csv_bad_input(tmp_path, text, msg):
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(InputError, match=msg):
        load_samples(tmp_path / "bad.csv")


def test_safetensors_named_and_stacked(tmp_path):
    """safetensors files (numpy writer of the safetensors package) read like .npz: sample_k
    keys (ragged) or one 'tokens' array; float32 values widen exactly to float64."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="the models extra is not installed")
    rng = np.random.default_rng(1)
    x = [rng.normal(size=(3, 2)), rng.normal(size=(5, 2)).astype(np.float32)]
    safetensors_numpy.save_file({"sample_1": x[1], "sample_0": x[0]}, str(tmp_path / "s.safetensors"))
    got = load_samples(tmp_path / "s.safetensors")
    np.testing.assert_array_equal(got[0], x[0])
    np.testing.assert_array_equal(got[1], x[1].astype(np.float64))
    stacked = rng.normal(size=(2, 4, 3))
    safetensors_numpy.save_file({"tokens": stacked}, str(tmp_path / "t.safetensors"))
    np.testing.assert_array_equal(np.stack(load_samples(tmp_path / "t.safetensors")), stacked)
    safetensors_numpy.save_file({"weights": stacked}, str(tmp_path / "w.safetensors"))
    with pytest.raises(InputError, match="sample_0, sample_1"):
        load_samples(tmp_path / "w.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(InputError, match="not a readable safetensors"):
        load_samples(tmp_path / "junk.safetensors")


def test_torch_file(tmp_path):
    """.pt files are read with weights_only=True; without torch the message says what to do."""
    p = tmp_path / "t.pt"
    try:
        import torch
    except ImportError:
        p.write_bytes(b"anything")
        with pytest.raises(InputError, match="needs torch, which is not installed"):
            load_samples(p)
        pytest.skip("torch is not installed (optional): only the missing-torch message was checked")
    x = np.random.default_rng(2).normal(size=(2, 3, 4))
    torch.save({"tokens": torch.from_numpy(x)}, p)
    np.testing.assert_array_equal(np.stack(load_samples(p)), x)
    torch.save([torch.from_numpy(x[0]), torch.from_numpy(x[1, :2])], p)
    got = load_samples(p)
    np.testing.assert_array_equal(got[1], x[1, :2])


def test_unsupported_suffix_lists_formats(tmp_path):
    (tmp_path / "t.txt").write_text("1 2 3")
    with pytest.raises(InputError, match=r"\.safetensors, \.pt or \.csv"):
        load_samples(tmp_path / "t.txt")
