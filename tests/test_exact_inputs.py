"""Issue 19: a verdict is about the numbers the user gave (theory/certificates.md, "Inputs: exact,
refused or rounded").

Each case of the issue is a value that float64 rounds (a ``Fraction``, an int64 beyond 2^53, a
long double), where the verdict about the nearest doubles differs from the verdict about the
values given. Every expectation is checked against an independent computation: cumulants and
translations in ``Fraction`` arithmetic, and the Gram's eigenvalues by mpmath at two precisions
from the exact values (``tests/helpers.py``, no ntkcheck). Each group ends with the mutation it
catches: the old behaviour (values rounded before the exact engines run) planted back.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest
from helpers import exact_value, ref_features, ref_gram_eigenvalues, ref_law
from hypothesis import given, settings
from hypothesis import strategies as st

import ntkcheck as nk
from ntkcheck.errors import InputError
from ntkcheck.ntk.certificate.routes import (
    GramCertificate,
    _for_values_given,
    certify_gram_enclosure,
    certify_positive,
)
from ntkcheck.ntk.gram_matrix.features import Heads
from ntkcheck.ntk.gram_matrix.problem import GramProblem
from ntkcheck.ntk.prop8.structure import dependence_structure

LD = np.longdouble
EXTENDED = np.finfo(LD).nmant >= 63  # x86-64: 64-bit mantissa, 1 + 2^-60 is a long double
needs_ld = pytest.mark.skipif(not EXTENDED, reason="long double is double here")


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    """``python -m ntkcheck ARGS`` in a process of its own: for what only a process shows (a warning
    Python prints to stderr, the interpreter's exit status)."""
    return subprocess.run([sys.executable, "-m", "ntkcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def _main(*args: str, cwd) -> subprocess.CompletedProcess:
    """``ntkcheck ARGS`` run in this process by the entry point's function (``ntkcheck.cli.main``) in
    ``cwd``, its exit status and output as :func:`_cli` gives them (no interpreter start-up and
    package import per call): Python's default warning filters as in a fresh process, and every
    warning that escapes the command appended to stderr as Python would print it."""
    from ntkcheck.cli import main

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    with warnings.catch_warnings(record=True) as seen, redirect_stdout(out), redirect_stderr(err):
        warnings.resetwarnings()  # the suite's "error" filter off: a fresh interpreter's defaults
        warnings.simplefilter("default")
        os.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(here)
    shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in seen)
    return subprocess.CompletedProcess(["ntkcheck", *args], code, out.getvalue(), err.getvalue() + shown)


# ------------------------------------------------------------------------------------------------
# (a) exact heads whose rows are (c, -3c): the Gram is exactly singular


X_A = [[0, 0], [3, 1], [1, -1]]  # Q_h (3, 1) = 0 for every head: atoms 0 and 1 score alike


def _heads_fraction() -> tuple[list, list]:
    c = F(1, 3)  # not a double
    Q = [[[c * k, -3 * c * k], [c * (k + 1), -3 * c * (k + 1)]] for k in range(1, 7)]
    b = [[F(k, 7), F(-k, 5)] for k in range(1, 7)]
    return Q, b


def _heads_long_double() -> tuple[np.ndarray, np.ndarray]:
    # c0 has 61 significant bits and 3 c0 has 62: both exact in a long double; their doubles are
    # 1 + 2^-52 and 3 + 2^-51, and 3 (1 + 2^-52) != 3 + 2^-51: the rounded rows do not annihilate (3, 1)
    c0 = 1 + LD(2) ** -53 + LD(2) ** -60
    ks = [1, 2, 4, 8, 16, 32]
    Q = np.array([[[c0 * k, -3 * c0 * k], [c0 * ks[(i + 2) % 6], -3 * c0 * ks[(i + 2) % 6]]]
                  for i, k in enumerate(ks)], dtype=LD)
    b = np.array([[LD(k) / 7, -LD(k) / 5] for k in range(1, 7)], dtype=LD)
    return Q, b


def _check_rows_annihilate(Q) -> None:
    """Independent: every row (q1, q2) of every Q_h has 3 q1 + q2 = 0 in exact arithmetic."""
    for Qh in Q:
        for row in Qh:
            assert 3 * exact_value(row[0]) + exact_value(row[1]) == 0


@pytest.mark.parametrize("kind", ["fraction", pytest.param("long double", marks=needs_ld)])
def test_exact_heads_make_the_gram_exactly_singular(kind):
    """Issue 19 item 1. Reference: the Gram from the exact values has lambda_min = 0 in mpmath at
    60 and 120 digits (two identical rows), while the Gram of the heads' nearest doubles is positive
    (~1.3e-32) at both: a certificate of the doubles is not one about the heads given."""
    Q, b = _heads_fraction() if kind == "fraction" else _heads_long_double()
    _check_rows_annihilate(Q)
    Ql = [[list(r) for r in q] for q in Q]
    bl = [list(r) for r in b]
    Qf = [[[float(v) for v in r] for r in q] for q in Ql]
    bf = [[float(v) for v in r] for r in bl]
    for dps in (60, 120):
        exact_ev = ref_gram_eigenvalues([ref_law(X_A)], Ql, bl, dps)
        view_ev = ref_gram_eigenvalues([ref_law(X_A)], Qf, bf, dps)
        assert exact_ev[0] <= mpmath.mpf(10) ** (-dps + 10) * exact_ev[-1]  # zero to working precision
        assert view_ev[0] > 1e-34  # the doubles' Gram: positive, well above both precisions
    heads = Heads(np.array(Q, dtype=object) if kind == "fraction" else Q, np.array(b, dtype=object)
                  if kind == "fraction" else b)
    assert heads.rounded
    g = nk.gram([X_A], heads, certify=True)
    assert not g.certified_positive and g.status == "singular"
    assert g.certified is not None and g.certified.kind == "exactly-singular"
    assert "positive, certified" not in g.status_text()
    r = nk.screen([X_A], heads=heads)
    assert r.outcome == "certified singular" and not r.gram.certified_positive


@needs_ld
def test_exact_heads_file_on_the_command_line(tmp_path):
    """Issue 19 item 1 through ``--heads-file``: a long-double .npz is read exactly; exit 1 (singular,
    proved), never 0 with "positive, certified"."""
    Q, b = _heads_long_double()
    np.savez(tmp_path / "heads.npz", Q=Q, b=b)
    np.save(tmp_path / "a.npy", np.array([X_A], dtype=np.float64))
    for cmd in (["screen", "a.npy"], ["gram", "a.npy", "--certify"]):
        out = _main(*cmd, "--heads-file", "heads.npz", "--no-progress", cwd=tmp_path)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "positive, certified" not in out.stdout and "singular" in out.stdout
        assert "Traceback" not in out.stderr


def test_mutation_arb_from_the_rounded_heads_is_caught(monkeypatch):
    """Mutation: the Arb route fed the heads' nearest doubles (the old ``arb(float(v))``) certifies
    the rounded Gram "positive"; the check above (status singular, not certified) catches it."""
    Q, b = _heads_fraction()
    heads = Heads(np.array(Q, dtype=object), np.array(b, dtype=object))
    monkeypatch.setattr(Heads, "rational_Q", lambda self, h: [[F(float(v)) for v in r] for r in self.Q[h]])
    monkeypatch.setattr(Heads, "rational_b", lambda self, h: [F(float(v)) for v in self.b[h]])
    monkeypatch.setattr("ntkcheck.ntk.certificate.cascade.exactly_singular", lambda laws, heads: None)
    g = nk.gram([X_A], heads, certify=True)
    assert g.certified_positive  # the unsound verdict the issue reported ("positive, certified")


# ------------------------------------------------------------------------------------------------
# (b) A = {0, 1}, B = {0, 1 + 2^-60}: equal doubles, independent laws


def _kappa_2_4(law) -> tuple[F, F]:
    """kappa_2, kappa_4 of a 1-D law from its moments, in Fraction (independent of ntkcheck)."""
    m = [sum((p * x[0] ** k for x, p in law.atoms.items()), F(0)) for k in range(5)]
    c = [sum((p * (x[0] - m[1]) ** k for x, p in law.atoms.items()), F(0)) for k in range(5)]
    return c[2], c[4] - 3 * c[2] ** 2


def _case_b(kind: str) -> list:
    if kind == "fraction":
        return [[[F(0)], [F(1)]], [[F(0)], [1 + F(1, 2**60)]]]
    ld = np.zeros((2, 2, 1), dtype=LD)
    ld[0, 1, 0] = 1
    ld[1, 1, 0] = 1 + LD(2) ** -60
    return list(ld)


@pytest.mark.parametrize("kind", ["fraction", pytest.param("long double", marks=needs_ld)])
def test_tokens_below_double_resolution_are_independent(kind):
    """Issue 19 item 2. Reference: the kappa_2 / kappa_4 determinant in Fraction equals
    (s_A^2 s_B^2 / 32)(s_A^2 - s_B^2) != 0, so the CGFs are independent; the Gram's lambda_min is
    8.2e-40 at 80 and 160 digits (mpmath, exact values), and the certificate lies below it."""
    samples = _case_b(kind)
    A, B = (ref_law(s) for s in samples)
    (k2a, k4a), (k2b, k4b) = _kappa_2_4(A), _kappa_2_4(B)
    sa, sb = F(1), 1 + F(1, 2**60)
    det = k2a * k4b - k4a * k2b
    assert det == sa**2 * sb**2 / 32 * (sa**2 - sb**2) and det != 0
    for prop in ("weak", "strong"):
        for method in ("auto", "exact", "interval"):
            dec = nk.decide(samples, prop, method=method)
            assert dec.verdict.value == "independent", (prop, method, dec.trail)
    heads = nk.init_heads(16, 1, seed=0)  # what screen draws for M = 4, d = 1
    ev = [ref_gram_eigenvalues([A, B], heads.Q.tolist(), heads.b.tolist(), dps) for dps in (80, 160)]
    lam = ev[1][0]
    assert abs(ev[0][0] - lam) < 1e-60 and 1e-40 < lam < 1e-38
    g = nk.gram(samples, heads, certify=True)
    assert g.certified_positive and 0 < g.certified.lower_bound <= float(lam)
    # positive, but ~1e-40 relative: the usefulness gate (issue 25) says so; without it, certified positive
    r = nk.screen(samples)
    assert r.weak.independent and r.outcome == "certified positive, below a useful rate"
    assert nk.screen(samples, min_relative_lambda=0).outcome == "certified positive"


@needs_ld
def test_long_double_token_file_is_read_exactly(tmp_path):
    """Issue 19 item 2 on the command line: decide exits 0 (independent), screen 0 (with the
    usefulness gate off: the Gram's relative lambda_min is ~1e-40), not 1."""
    np.save(tmp_path / "b.npy", np.stack(_case_b("long double")))
    for cmd, code in ((["decide", "b.npy"], 0),
                      (["screen", "b.npy", "--no-progress", "--min-relative-lambda", "0"], 0),
                      (["screen", "b.npy", "--no-progress"], 3)):
        out = _main(*cmd, cwd=tmp_path)
        assert out.returncode == code, out.stdout + out.stderr


def test_mutation_rounding_the_tokens_is_caught(monkeypatch):
    """Mutation: tokens rounded to float64 before the exact engines run (the old behaviour): the two
    laws become equal and decide certifies "dependent", which the test above refuses."""
    import ntkcheck.cgf.empirical as emp

    real = emp.as_token_values
    monkeypatch.setattr(emp, "as_token_values", lambda *a, **k: (real(*a, **k)[0], None))
    assert nk.decide(_case_b("fraction")).verdict.value == "dependent"


# ------------------------------------------------------------------------------------------------
# (c) exact translates: dependent


def _case_c() -> dict[str, list]:
    return {
        "fractions": [[[F(0)], [F(1, 10)]], [[F(1, 5)], [F(3, 10)]]],
        "int64": [np.array([[0], [2**60 + 1]], dtype=np.int64), np.array([[1], [2**60 + 2]], dtype=np.int64)],
        "int lists": [[[0], [2**60 + 1]], [[1], [2**60 + 2]]],
    }


@pytest.mark.parametrize("name", list(_case_c()))
def test_exact_translates_are_dependent(name):
    """Issue 19 item 3. Reference: B - A is one shift s in Fraction arithmetic (a translate: seed 003
    Ex. 6), so Lambda_B - Lambda_A = s t is affine; their doubles are not translates."""
    samples = _case_c()[name]
    A, B = (ref_law(s) for s in samples)
    shifts = {yb[0] - xa[0] for xa, yb in zip(sorted(A.atoms), sorted(B.atoms), strict=True)}
    assert len(shifts) == 1
    s = shifts.pop()
    for prop in ("weak", "strong"):
        for method in ("auto", "exact", "interval", "float"):
            dec = nk.decide(samples, prop, method=method)
            assert dec.verdict.value == "dependent", (prop, method, dec.trail)
            c = dec.null_vector
            assert c[0] == -c[1] != 0 and dec.affine[0] == (c[1] * s,)  # c_B (mean_B - mean_A)
    st = dependence_structure(samples)
    assert [(r.kind, r.shift) for r in st.relations] == [("translate", (s,))]
    doubles = [np.array([[float(exact_value(v)) for v in row] for row in smp]) for smp in samples]
    assert nk.decide(doubles).verdict.value == "independent"  # the verdict about the doubles


@settings(max_examples=12)
@given(den=st.sampled_from([3, 5, 10, 100]), d=st.sampled_from([1, 2]),
       atoms=st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=2, max_size=4, unique=True),
       shift=st.tuples(st.integers(-50, 50), st.integers(-50, 50)))
def test_translates_at_non_double_values_are_dependent(den, d, atoms, shift):
    """Seed 003 Ex. 6 (a law and its translate are dependent) for tokens and shifts that are not
    doubles (multiples of 1/3, 1/10, ...). Reference: B - A is the shift in Fraction arithmetic,
    and Lambda_B(a) - Lambda_A(a) - <s, a> = 0 at 50 digits (identity_residual). Every example (12)
    must be certified dependent, with the exact shift as its linear part."""
    from helpers import identity_residual

    A = [[F(x[k], den) for k in range(d)] for x in atoms]
    s = [F(shift[k], den) for k in range(d)]
    B = [[a + sk for a, sk in zip(x, s)] for x in A]
    if len({tuple(x) for x in A}) < 2:
        return  # one atom in this dimension: a Dirac, structural (tested elsewhere)
    ref = [ref_law(A), ref_law(B)]
    assert identity_residual(ref, [-1, 1], s, 0, [[F(1, 3)] * d, [F(-2, 1)] + [F(1, 7)] * (d - 1)]) < 1e-40
    dec = nk.decide([A, B])
    assert dec.verdict.value == "dependent", dec.trail
    c = dec.null_vector
    assert dec.affine[0] == tuple(c[1] * sk for sk in s)


def test_exact_translates_from_an_int64_file(tmp_path):
    """Issue 19 item 3 on the command line: an int64 .npy beyond 2^53 exits 1 (dependent), not 0."""
    np.save(tmp_path / "c.npy", np.stack(_case_c()["int64"]))
    out = _main("decide", "c.npy", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr


# ------------------------------------------------------------------------------------------------
# weights and directions


@needs_ld
def test_long_double_weights_are_exact():
    """Issue 19: weights (1/2, 1/2) against long-double weights (1/2 + 2^-62, 1/2 - 2^-62) on {0, 1}.
    Reference: p(1-p) and p(1-p)(1-2p) (kappa_2, kappa_3 of a two-point law) give the determinant
    k2(p) k3(q) - k3(p) k2(q) = k2(p) k3(q) != 0 in Fraction: independent. As doubles the weights
    are equal: one law twice, "dependent"."""
    x = np.array([[0.0], [1.0]])
    q = F(1, 2) + F(1, 2**62)
    w = np.array([LD(0.5) - LD(2) ** -62, LD(0.5) + LD(2) ** -62], dtype=LD)
    assert exact_value(w[1]) == q and float(w[1]) == 0.5
    k2 = [p * (1 - p) for p in (F(1, 2), q)]
    k3 = [p * (1 - p) * (1 - 2 * p) for p in (F(1, 2), q)]
    assert k2[0] * k3[1] - k3[0] * k2[1] != 0
    laws = [nk.Empirical(x), nk.Empirical(x, w)]
    assert laws[1].weights == (1 - q, q)
    assert nk.decide(laws).verdict.value == "independent"
    assert nk.decide([nk.Empirical(x), nk.Empirical(x, w.astype(np.float64))]).verdict.value == "dependent"


@needs_ld
def test_long_double_direction_is_exact():
    """Issue 19: A = {0, e1}, B = {0, e2} along w = (1, 1 + 2^-60) project to {0, 1} and
    {0, 1 + 2^-60} (independent, case b); along its double (1, 1) to one law twice, which is
    dependence along that w only: no verdict on strong independence (issue 30 item 6)."""
    A = np.array([[0.0, 0.0], [1.0, 0.0]])
    B = np.array([[0.0, 0.0], [0.0, 1.0]])
    w = np.array([1, 1 + LD(2) ** -60], dtype=LD)
    assert nk.decide([A, B], "strong", direction=w).verdict.value == "independent"
    along = nk.decide([A, B], "strong", direction=w.astype(np.float64))
    assert along.verdict.value == "inconclusive" and along.certificate.evidence[0].kind.endswith("-identity")


def test_exact_functions_read_exact_values():
    """cumulants_1d_exact and taylor_1d_exact take Fraction tokens and weights at their values
    (reference: the two-point law {0, 1/10} with masses 1/3, 2/3 has kappa_2 = (1/10)^2 * 2/9)."""
    k = nk.cumulants_1d_exact([[F(0)], [F(1, 10)]], [1], 2, weights=[1, 2])
    assert k == [F(1, 15), F(1, 100) * F(2, 9)]


# ------------------------------------------------------------------------------------------------
# carrying a float64 certificate over to the values given


_small_int = st.integers(-30, 30)


@settings(max_examples=8)
@given(den=st.sampled_from([3, 7, 10, 1000]), toks=st.lists(st.lists(st.tuples(_small_int, _small_int), min_size=2,
                                                                         max_size=4), min_size=1, max_size=3),
       qs=st.lists(st.tuples(_small_int, _small_int, _small_int, _small_int, _small_int, _small_int), min_size=1,
                   max_size=4), round_heads=st.booleans())
def test_rounding_radius_bounds_the_feature_change(den, toks, qs, round_heads):
    """The proved radius E >= ||F(values given) - F(nearest doubles)||_F, on random tokens with
    denominator ``den`` (not a double unless it is a power of two) and heads at thirds or at doubles.
    Reference: both feature matrices by mpmath at 50 digits from the exact values. Claim checked
    on every example (8); E is also at most 1e6 times the change (not vacuous)."""
    from ntkcheck.ntk.certificate.inputs import rounding_radius

    samples = [[[F(a, den), F(c, den)] for a, c in t] for t in toks]
    hd = 3 if round_heads else 4
    Qx = [[[F(q[0], hd), F(q[1], hd)], [F(q[2], hd), F(q[3], hd)]] for q in qs]
    bx = [[F(q[4], hd), F(q[5], hd)] for q in qs]
    laws = [nk.Empirical(smp) for smp in samples]
    heads = Heads(np.array(Qx, dtype=object), np.array(bx, dtype=object))
    E = rounding_radius(laws, heads)
    given_ = ref_features(samples, Qx, bx, 50)
    view = ref_features([[[float(v) for v in r] for r in smp] for smp in samples],
                        [[[float(v) for v in r] for r in q] for q in Qx], [[float(v) for v in r] for r in bx], 50)
    with mpmath.workdps(50):
        change = mpmath.sqrt(mpmath.fsum((a - c) ** 2 for a, c in zip(given_, view, strict=True)))
    assert change <= E
    if change > 0:
        assert E <= 1e6 * change
    if not (round_heads or any(law.rounded for law in laws)):
        assert E == 0 == change


def test_a_float64_bound_carries_over_only_above_the_radius():
    """(sqrt(l) - E)^2 is reported for the values given when sqrt(l) > E; below, the certificate is
    inconclusive with the float64 one as evidence. Mutation: E = 0 would pass l through."""
    laws = [nk.Empirical([[F(1, 10)], [F(7, 10)]])]
    heads = nk.init_heads(4, 1, seed=1)
    from ntkcheck.ntk.certificate.inputs import rounding_radius

    E = rounding_radius(laws, heads)
    assert 0 < E < 1e-14
    problem = GramProblem.of(laws, heads)
    big = _for_values_given(problem, GramCertificate("float64-cholesky", 1e-6, 53, "view"))
    assert big.positive and big.inputs_rounded
    assert big.lower_bound <= (1e-3 - E) ** 2 and big.lower_bound > 0.99e-6
    small = _for_values_given(problem, GramCertificate("float64-cholesky", (E / 2) ** 2, 53, "view"))
    assert not small.positive and small.evidence is not None and small.evidence.lower_bound == (E / 2) ** 2
    assert "not a certificate about the values given" in small.detail


def test_certify_positive_on_decimal_tokens_holds_for_the_decimals():
    """A float64 Cholesky certificate for decimal tokens (CSV-like 0.123) carries over; reference: the
    bound is below lambda_min of the Gram from the exact decimals, by mpmath at 40 and 80 digits."""
    rng = np.random.default_rng(7)
    toks = [[[F(int(v), 1000) for v in row] for row in rng.integers(-1500, 1500, size=(3, 2))] for _ in range(3)]
    laws = [nk.Empirical(t) for t in toks]
    assert all(law.rounded for law in laws)
    heads = nk.init_heads(8, 2, seed=2)
    pc = certify_positive(laws, heads, arb=False)
    assert pc.positive and pc.inputs_rounded and pc.method == "float64-cholesky"
    refs = [ref_gram_eigenvalues([ref_law(t) for t in toks], heads.Q.tolist(), heads.b.tolist(), dps)[0]
            for dps in (40, 80)]
    assert abs(refs[0] - refs[1]) < 1e-30 * abs(refs[1])
    assert 0 < pc.lower_bound <= float(refs[1]) and pc.lower_bound > 0.5 * float(refs[1])


# ------------------------------------------------------------------------------------------------
# heads files and certify_gram_enclosure


def test_complex_heads_are_refused_without_a_warning(tmp_path):
    """Issue 19 item 5: complex heads were accepted with a ComplexWarning (imaginary part dropped)
    and certified. Now: InputError (API), one line and exit 2 (CLI), no warning."""
    Q = np.ones((2, 2, 2)) + 1j
    b = np.zeros((2, 2), dtype=complex)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InputError, match="complex"):
            Heads(Q, b)
        np.savez(tmp_path / "c.npz", Q=Q, b=b)
        with pytest.raises(InputError, match="complex"):
            nk.screening.load_heads(tmp_path / "c.npz")
    np.save(tmp_path / "a.npy", np.array([X_A], dtype=np.float64))
    out = _cli("screen", "a.npy", "--heads-file", "c.npz", cwd=tmp_path)
    assert out.returncode == 2 and "complex" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_heads_file_given_a_npy_is_refused_clearly(tmp_path):
    """Issue 19 item 5: ``--heads-file x.npy`` raised AttributeError from numpy; now it says what a
    heads file is and how to write one (exit 2)."""
    np.save(tmp_path / "h.npy", np.ones((3, 2, 2)))
    with pytest.raises(InputError, match=r"single array of shape \(3, 2, 2\).*savez"):
        nk.screening.load_heads(tmp_path / "h.npy")
    np.save(tmp_path / "a.npy", np.array([X_A], dtype=np.float64))
    out = _main("gram", "a.npy", "--heads-file", "h.npy", cwd=tmp_path)
    assert out.returncode == 2 and "savez" in out.stderr and "Traceback" not in out.stderr


def test_enclosure_refuses_a_non_symmetric_matrix():
    """Issue 19 item 7. Reference (numpy, independent of the certificate): the symmetric
    S = [[0.825, 0.3], [0.3, 0.825]] is within 0.35 of G = [[1, 0.6], [0, 1]] in the 2-norm and
    has lambda_min = 0.525 < 0.55, so "lambda_min >= 0.55 for everything within 0.35" is false.
    Mutation: reading the lower triangle without the check certified 0.55."""
    G = np.array([[1.0, 0.6], [0.0, 1.0]])
    S = np.array([[0.825, 0.3], [0.3, 0.825]])
    assert np.linalg.norm(S - G, 2) <= 0.35 + 1e-12  # float64 2-norm of a 2 x 2: a few ulps
    np.testing.assert_allclose(np.linalg.eigvalsh(S)[0], 0.525, rtol=1e-14)  # ulps of a 2 x 2 eigensolve
    with pytest.raises(InputError, match="not symmetric"):
        certify_gram_enclosure(G, 0.35)
    from ntkcheck.ntk.certificate.routes import _certify_lower

    mutated = _certify_lower(np.asfortranarray(np.tril(G)), 0.35)  # the old behaviour
    assert mutated.positive and mutated.lower_bound > 0.525
    sym = certify_gram_enclosure((G + G.T) / 2, 0.35 + 0.3)  # radius + ||G - G^T||_2 / 2
    assert sym.positive and sym.lower_bound <= 0.05 + 1e-15  # lambda_min((G + G^T)/2) = 0.7
