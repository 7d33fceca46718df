"""Issue 30 item 4: distinct atoms are keyed exactly for every number type, and data whose float64
view cannot stand for them are refused by the float64 routes with a sentence, never a crash.

References are independent of ntkcheck: the distinct atoms and the Taylor coefficients of the
CGFs in ``Fraction`` arithmetic (``tests/helpers.py``), from the exact values of the long doubles
or decimals given.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from fractions import Fraction as F

import numpy as np
import pytest
from helpers import exact_rank, exact_value, ref_law, ref_rows
from hypothesis import given, settings
from hypothesis import strategies as st

import ntkcheck as nk
from ntkcheck.cgf.empirical import FLOAT_VIEW_MIN_NORM, Empirical, as_laws, require_float_view
from ntkcheck.cli import main
from ntkcheck.errors import InputError

LD = np.longdouble
#: x86-64 extended precision: 1e-400 is a long double (its double is 0.0)
WIDE_RANGE = np.finfo(LD).minexp < -1100
needs_wide = pytest.mark.skipif(not WIDE_RANGE, reason="long double has the range of double here")


def _tiny_pair() -> np.ndarray:
    """Samples {0, 1e-400} and {0, 3e-400} as one (2, 2, 1) long-double array."""
    a = np.zeros((2, 2, 1), dtype=LD)
    a[0, 1, 0] = LD("1e-400")
    a[1, 1, 0] = LD("3e-400")
    return a


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    """``python -W error -m ntkcheck ARGS`` in a process of its own: the interpreter's exit status."""
    return subprocess.run([sys.executable, "-W", "error", "-m", "ntkcheck", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def _in_process(capsys, *args: str) -> tuple[int, str, str]:
    """``ntkcheck ARGS`` in this process (``cli.main``, which ``python -m ntkcheck`` exits with), every
    warning an error as under the child's ``-W error``: ``(exit status, stdout, stderr)``. A Python
    start-up and ``import ntkcheck`` (1-2 s) per case is saved; each test still runs one case in a
    process of its own (:func:`_cli`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@needs_wide
def test_atoms_below_the_float64_range_stay_distinct():
    """{0, 1e-400} has two atoms and the CGFs of {0, 1e-400}, {0, 3e-400} are independent. Reference:
    the exact Taylor coefficients of orders 2..5 (Fraction, from the long doubles' exact values) have
    rank 2, so no combination is affine; ntkcheck must certify 'independent', never 'dependent'."""
    samples = list(_tiny_pair())
    refs = [ref_law(s) for s in samples]
    assert [len(r.atoms) for r in refs] == [2, 2]
    rows, _ = ref_rows(refs, [(F(1),)], 5)
    assert exact_rank(rows) == 2
    laws = as_laws(samples)
    assert [law.n_atoms for law in laws] == [2, 2]
    for prop in ("weak", "strong"):
        assert nk.decide(samples, prop).verdict.value == "independent"


@needs_wide
@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from([-1, 1]), st.integers(1, 2**20), st.integers(-16440, 1000)),
                min_size=1, max_size=12))
def test_distinct_atoms_are_the_distinct_exact_values(entries):
    """Every long double m 2^e (|m| <= 2^20, e from the long-double subnormals up to 2^1000: values beyond the float64 range are refused)
    is one point: the atoms of the law are the distinct exact values (Fraction, no ntkcheck), with
    -0.0 and 0.0 one point."""
    vals = [LD(s * m) * LD(2) ** e for s, m, e in entries] + [LD("-0.0"), LD(0)]
    x = np.array(vals, dtype=LD)[:, None]
    want = {exact_value(v) for v in x[:, 0]}
    law = Empirical(x)
    assert law.n_atoms == len(want)
    assert {r[0] for r in law.rational_atoms()} == want


@needs_wide
def test_mutation_the_double_split_key_is_caught(monkeypatch):
    """Mutation: the former key (the value split into two doubles, which underflows to (0, 0) for
    1e-400) merges 1e-400 with 0, and decide certifies 'dependent': the test above refuses that."""
    import ntkcheck.cgf.empirical as emp

    def double_split(ex):
        hi = ex.astype(np.float64)
        return np.concatenate([hi, (ex - hi.astype(ex.dtype)).astype(np.float64)], axis=1) + 0.0

    monkeypatch.setattr(emp, "_exact_float_key", double_split)
    assert [law.n_atoms for law in as_laws(list(_tiny_pair()))] == [1, 1]
    assert nk.decide(list(_tiny_pair())).verdict.value == "dependent"


def _write_both(tmp_path) -> list[str]:
    """The tiny pair as a long-double .npy (where long doubles reach 1e-400) and as a CSV of decimals."""
    (tmp_path / "tiny.csv").write_text("sample,x0\n0,0\n0,1e-400\n1,0\n1,3e-400\n")
    names = ["tiny.csv"]
    if WIDE_RANGE:
        np.save(tmp_path / "tiny.npy", _tiny_pair())
        names.append("tiny.npy")
    return names


def test_collapsed_float64_view_is_refused_by_the_float_routes(tmp_path, capsys, monkeypatch):
    """The CSV decimals (and the long doubles) are read exactly: decide exits 0 (independent, as the
    exact rank above says); screen and gram run the Gram in float64, where 0 and 1e-400 are one
    double, and refuse with one line naming the samples and atoms (exit 2), no traceback and no
    warning (every warning an error: the interpreter runs with -W error). ``screen`` on the CSV runs
    in a process of its own (the interpreter's exit status), the other cases in this one."""
    monkeypatch.chdir(tmp_path)
    for name in _write_both(tmp_path):
        code, out, err = _in_process(capsys, "decide", name)
        assert code == 0, out + err
        for cmd in ("screen", "gram"):
            if (cmd, name) == ("screen", "tiny.csv"):
                res = _cli(cmd, name, "--no-progress", cwd=tmp_path)
                code, out, err = res.returncode, res.stdout, res.stderr
            else:
                code, out, err = _in_process(capsys, cmd, name, "--no-progress")
            assert code == 2, (cmd, name, out + err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "sample 0: atoms 0 and 1 are distinct" in lines[0], err
            assert "same nearest doubles" in lines[0] and "Traceback" not in err


def test_screen_refuses_a_collapsed_view_in_the_api():
    """The API: decimals 0 and 1e-400 as Fractions; screen raises InputError naming sample 0."""
    samples = [[[F(0)], [F(1, 10**400)]], [[F(0)], [F(3, 10**400)]]]
    assert nk.decide(samples).verdict.value == "independent"
    with pytest.raises(InputError, match="sample 0: atoms 0 and 1"):
        nk.screen(samples)


@pytest.mark.parametrize("scale", [1e-200, 5e-324, 1e-142])
def test_tokens_too_small_for_the_float64_gram_are_refused(scale, tmp_path, capsys, monkeypatch):
    """Doubles whose Gram entries (at most R^2) fall below the normal range with room for the
    resolution 1e-26: refused with the norm and the bound, before the head-law step divides by the
    trace sum R_i^2 (which underflowed to 0: ZeroDivisionError, exit 4, before). Independent check
    of the boundary: R^2 1e-26 < 2.2e-308 exactly when R < FLOAT_VIEW_MIN_NORM. ``screen`` at 5e-324
    runs in a process of its own (the interpreter's exit status under -W error), the rest in this
    one with every warning an error."""
    assert scale < FLOAT_VIEW_MIN_NORM and FLOAT_VIEW_MIN_NORM**2 * 1e-26 == pytest.approx(2.2250738585072014e-308)
    np.save(tmp_path / "small.npy", np.array([[[0.0], [scale]], [[scale / 2], [-scale]]]))
    monkeypatch.chdir(tmp_path)
    for cmd in ("screen", "gram"):
        if (cmd, scale) == ("screen", 5e-324):
            res = _cli(cmd, "small.npy", "--no-progress", cwd=tmp_path)
            code, out, err = res.returncode, res.stdout, res.stderr
        else:
            code, out, err = _in_process(capsys, cmd, "small.npy", "--no-progress")
        assert code == 2, out + err
        assert "largest token norm" in err and "Traceback" not in err
    with pytest.raises(InputError, match="largest token norm"):
        require_float_view(as_laws([np.array([[scale, 0.0]])]), "the Gram")


def test_exactly_zero_tokens_and_normal_tokens_pass():
    """Exactly zero data are left to the routes (they prove the kernel of a Dirac at 0); tokens at
    the bound pass; distinct doubles in one sample pass however close."""
    require_float_view(as_laws([np.zeros((2, 2))]), "the Gram")
    require_float_view(as_laws([np.array([[FLOAT_VIEW_MIN_NORM]])]), "the Gram")
    require_float_view(as_laws([np.array([[1.0], [np.nextafter(1.0, 2.0)]])]), "the Gram")
