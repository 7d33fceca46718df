"""Tests of the decision engine (ntkcheck.independence.decision) against the seed's claims and examples."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import Empirical, EmpiricalConvolution, UniformCube
from ntkcheck.errors import DomainError, InputError, PrecisionError
from ntkcheck.independence.decision import decide
from ntkcheck.independence.examples import seed_examples
from ntkcheck.independence.results import Verdict

EXAMPLES = seed_examples()


def _proportional(c, ref) -> bool:
    c = [Fraction(v) for v in c]
    ref = [Fraction(v) for v in ref]
    k = next(i for i, v in enumerate(ref) if v != 0)
    if c[k] == 0:
        return False
    s = c[k] / ref[k]
    return all(a == s * b for a, b in zip(c, ref))


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.name for e in EXAMPLES])
@pytest.mark.parametrize("method", ["auto", "exact", "interval"])
def test_seed_examples(ex, method):
    """Every row of the seed's example table (seed 003 Ex. 3-6, Prop. 12, Remark 5) is decided as the seed states."""
    dec = decide(list(ex.measures), ex.property, method=method)
    assert dec.verdict.value == ex.expected, dec
    if ex.expected == "dependent":
        c = dec.null_vector
        assert c is not None and any(v != 0 for v in c)
        if ex.null_vector is not None:
            assert _proportional(c, ex.null_vector), (c, ex.null_vector)
        # the certificate is an exact identity, checked again here numerically
        alpha, beta = dec.affine
        rng = np.random.default_rng(0)
        for _ in range(3):
            a = rng.normal(size=ex.measures[0].dim) * 0.3
            lhs = sum(float(ci) * m.cgf(a) for ci, m in zip(c, ex.measures))
            rhs = float(np.dot([float(v) for v in alpha], a)) + float(beta)
            # float64 evaluation of a handful of O(1) CGFs: rounding only
            np.testing.assert_allclose(lhs, rhs, atol=1e-10)
    else:
        assert dec.certificate.kind in ("exact-minor", "ball-bound", "vandermonde", "gap-condition", "prop7-strong-implies-weak")


@pytest.mark.parametrize("ex", [e for e in EXAMPLES if e.expected == "dependent"], ids=lambda e: e.name)
def test_negative_examples_never_independent_strong(ex):
    """Ex. 6 / Remark 5: weak dependence forces strong dependence (Prop. 7 contrapositive)."""
    dec = decide(list(ex.measures), "strong")
    assert dec.verdict is Verdict.DEPENDENT


token_sets = st.integers(2, 6).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(3, 8), st.integers(1, 3), st.integers(0, 2**31 - 1))
)


@given(token_sets)
@settings(max_examples=20)
def test_random_token_sets_strongly_independent(params):
    """Seed 003 Prop. 10: i.i.d. tokens from a density are strongly independent (almost surely)."""
    n, N, d, seed = params
    x = list(np.random.default_rng(seed).normal(size=(n, N, d)))
    dec = decide(x, "strong")
    assert dec.verdict is Verdict.INDEPENDENT
    assert dec.direction is not None


@given(st.integers(0, 2**31 - 1), st.sampled_from(["auto", "exact", "interval", "float"]), st.integers(1, 3))
@settings(max_examples=20)
def test_dependent_constructions_never_independent(seed, method, d):
    """Seed 003 Ex. 6: translates, products and Diracs are never certified independent, at any precision."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-4, 5, size=(3, d)).astype(float) / 4
    shift = rng.integers(-4, 5, size=d).astype(float)
    p = np.vstack([np.zeros(d), rng.integers(-3, 4, size=d) / 2])
    q = np.vstack([np.zeros(d), rng.integers(-3, 4, size=d) / 2])
    prod = np.array([a + b for a in p for b in q])
    kind = seed % 3
    if kind == 0:
        measures = [base, base + shift, rng.normal(size=(4, d))]
    elif kind == 1:
        measures = [p, q, prod]
    else:
        measures = [rng.normal(size=(1, d)) for _ in range(d + 1)]
    for prop in ("weak", "strong"):
        dec = decide(measures, prop, method=method, max_bits=256)
        assert dec.verdict is not Verdict.INDEPENDENT, dec
        if dec.verdict is Verdict.DEPENDENT and dec.affine is not None and prop == "weak":
            c = [float(v) for v in dec.null_vector]
            a = rng.normal(size=d) * 0.5
            lhs = sum(ci * float(Empirical(m).cgf(a)) for ci, m in zip(c, measures))
            rhs = float(np.dot([float(v) for v in dec.affine[0]], a))
            np.testing.assert_allclose(lhs, rhs, atol=1e-9)  # rounding of a few O(1) log-sum-exps


def test_near_degenerate_uniform_radii():
    """Radii 1.00, 1.01, ..., 1.09 (seed 003 Ex. 3 near its hypothesis' boundary): certified or inconclusive, never wrong."""
    ms = [UniformCube(Fraction(100 + k, 100), 2) for k in range(10)]
    for method in ("exact", "interval"):
        dec = decide(ms, "strong", method=method)
        assert dec.verdict is Verdict.INDEPENDENT
        assert dec.margin is not None and dec.margin < 1e-12  # float64 alone could not see it
    flt = decide(ms, "strong", method="float")
    assert flt.verdict is not Verdict.DEPENDENT
    if flt.verdict is Verdict.INCONCLUSIVE:
        assert flt.certificate.margin is not None


def test_interval_ladder_reports_bits():
    ms = [UniformCube(1 + Fraction(k, 15), 1) for k in range(16)]
    dec = decide(ms, "strong", method="interval")
    assert dec.verdict is Verdict.INDEPENDENT and dec.precision.endswith("bits")
    lower = dec.certificate.sigma_min_lower
    assert lower > 0


def test_interval_inconclusive_when_capped():
    """A precision cap too low for the conditioning gives inconclusive with the margin, not a guess."""
    ms = [UniformCube(Fraction(1000 + k, 1000), 1) for k in range(12)]
    dec = decide(ms, "strong", method="float")
    assert dec.verdict is Verdict.INCONCLUSIVE
    assert "interval" in dec.certificate.suggestion
    assert dec.to_dict()["certificate"]["margin"] == dec.margin


def test_strong_with_direction_dependent_along_w():
    """Two sets whose projections on w = e1 coincide are dependent along e1 but independent along e2.
    Strong independence (eq. 33) is independence along SOME direction, so e1 decides nothing about
    it (issue 30 item 6): the verdict at e1 is inconclusive, with the identity along e1 (c = (1, -1))
    as its evidence and the direction in its sentence; at e2 it is certified independent."""
    x = np.array([[0.0, 0.5], [1.0, 0.0]])
    y = np.array([[0.0, 1.0], [1.0, -2.0]])
    along_e1 = decide([x, y], "strong", direction=[1, 0])
    assert along_e1.verdict is Verdict.INCONCLUSIVE and along_e1.null_vector is None
    (proof,) = along_e1.certificate.evidence
    assert proof.kind.endswith("-identity") and _proportional(proof.null_vector, [1, -1])
    assert "Along w = (1, 0)" in along_e1.sentence and "decides nothing" in along_e1.sentence
    along_e2 = decide([x, y], "strong", direction=[0, 1])
    assert along_e2.verdict is Verdict.INDEPENDENT and "along w = (0, 1)" in along_e2.sentence


def test_gaussians_weak_independent_strong_dependent():
    """n <= d(d+1)/2 Gaussians with independent covariances: weakly independent, strongly dependent (quadratic)."""
    from ntkcheck.cgf import Gaussian

    ms = [Gaussian([0, 0], [[1, 0], [0, 1]]), Gaussian([0, 0], [[2, 0], [0, 1]]), Gaussian([0, 0], [[2, 1], [1, 2]])]
    assert decide(ms, "weak").verdict is Verdict.INDEPENDENT
    strong = decide(ms, "strong")
    assert strong.verdict is Verdict.DEPENDENT and strong.certificate.kind == "structural"


def test_decision_to_dict_is_json():
    import json

    dec = decide([np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])])
    d = json.loads(json.dumps(dec.to_dict()))
    assert d["verdict"] == "independent" and "certificate" in d and "margin" in d


@pytest.mark.parametrize(
    "kwargs, err",
    [
        ({"measures": [np.array([[np.inf, 0.0]])]}, InputError),
        ({"measures": [np.zeros((0, 2))]}, InputError),
        ({"measures": [np.zeros((2, 2)), np.zeros((2, 3))]}, InputError),
        ({"measures": []}, InputError),
        ({"measures": [np.eye(2)], "property": "strong", "direction": [0, 0]}, InputError),
        ({"measures": [np.eye(2)], "property": "medium"}, DomainError),
        ({"measures": [np.eye(2)], "method": "guess"}, DomainError),
        ({"measures": [np.eye(2)], "max_bits": 10}, PrecisionError),
    ],
)
def test_bad_input(kwargs, err):
    with pytest.raises(err):
        decide(**kwargs)


def test_ragged_samples_are_valid():
    dec = decide([np.random.default_rng(0).normal(size=(3, 2)), np.random.default_rng(1).normal(size=(7, 2))])
    assert dec.verdict is Verdict.INDEPENDENT


def test_exact_weights_translate():
    """Weights [1, 1, 1] are read as exactly 1/3 each: the weighted set is a translate of the uniform one."""
    a = Empirical(np.array([[0.0], [1.0], [2.0]]), weights=np.array([1.0, 1.0, 1.0]))
    b = Empirical(np.array([[5.0], [6.0], [7.0]]))
    dec = decide([a, b])
    assert dec.verdict is Verdict.DEPENDENT and _proportional(dec.null_vector, [1, -1])
    c = Empirical(np.array([[5.0], [6.0], [7.0]]), weights=np.array([1.0, 2.0, 1.0]))
    assert decide([a, c]).verdict is Verdict.INDEPENDENT


def test_null_vector_at_two_precisions_is_evidence_only():
    """A null vector of the truncation found at two precisions is evidence, never a dependence.

    Radii 3/2, 3/2, 1: the two equal cubes give the null vector (1, -1, 0) of every
    truncation; the evidence object reports it with both residuals and precisions.
    """
    from ntkcheck.independence._rows import _Run, _two_precision_null
    from ntkcheck.independence.results import NullVectorEvidence

    ms = [UniformCube(Fraction(3, 2), 1), UniformCube(Fraction(3, 2), 1), UniformCube(Fraction(1), 1)]
    run = _Run(ms, "interval", 8, 512)
    got = _two_precision_null(run, [(Fraction(1),)])
    assert got is not None
    vec, ev = got
    assert isinstance(ev, NullVectorEvidence) and ev.kind == "null-vector-two-precisions"
    v = np.array(vec) / vec[0]
    np.testing.assert_allclose(v, [1.0, -1.0, 0.0], atol=1e-20)  # exact up to working precision
    assert ev.residuals[0] < 2.0**-100 and ev.residuals[1] < 2.0**-230
    d = ev.to_dict()
    assert d["prec_bits"] == [128, 256] and d["orders"] == "2..8" and "not proof" in d["statement"]
    independent = _Run([UniformCube(Fraction(1), 1), UniformCube(Fraction(2), 1)], "interval", 8, 512)
    assert _two_precision_null(independent, [(Fraction(1),)]) is None


def test_rounding_level_translate_is_flagged():
    """x + s computed in float64 is not exactly a translate: the exact verdict stands, with a note saying why."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 3))
    others = list(rng.normal(size=(3, 6, 3)))
    dec = decide([x, x + np.array([0.1, 0.7, -0.3])] + others)
    if dec.verdict is Verdict.INDEPENDENT:
        assert any("rounding level" in n for n in dec.notes), dec.notes
    clean = decide(others)
    assert clean.verdict is Verdict.INDEPENDENT and not clean.notes


def test_duplicate_sample_in_high_dimension():
    """A repeated sample in d = 32 is found from the searched directions alone (no d(d+1)/2 stack)."""
    rng = np.random.default_rng(5)
    x = list(rng.normal(size=(6, 8, 32)))
    x.append(x[2].copy())
    dec = decide(x)
    assert dec.verdict is Verdict.DEPENDENT
    assert _proportional(dec.null_vector, [0, 0, 1, 0, 0, 0, -1])
    assert all(v == 0 for v in dec.affine[0])


# =========================================================================== issue 9
# References used below, independent of the engine: Fraction power series for the Taylor
# coefficients of log sum_j p_j exp(z_j t), exact determinants, and an mpmath log-sum-exp.


def _ref_taylor(z, p, K):
    """Exact c_0..c_K of log sum_j p_j exp(z_j t) from the moments (Fractions only)."""
    z = [Fraction(v) for v in z]
    p = [Fraction(v) for v in p]
    tot = sum(p)
    p = [v / tot for v in p]
    m, fact = [], 1
    for k in range(K + 1):
        fact = fact * k if k else 1
        m.append(sum(pj * zj**k for pj, zj in zip(p, z)) / fact)
    ell = [Fraction(0)] * (K + 1)
    for k in range(1, K + 1):  # M' = M L'  =>  k l_k = k m_k - sum_{j<k} j l_j m_{k-j}
        ell[k] = (k * m[k] - sum(j * ell[j] * m[k - j] for j in range(1, k))) / k
    return ell


def _ref_rows(samples, w, K):
    """Exact coefficient rows (orders 2..K) of token samples (uniform weights, repeats kept)."""
    rows = []
    for x in samples:
        x = np.asarray(x, dtype=np.float64)
        z = [sum(Fraction(float(a)) * Fraction(b) for a, b in zip(row, w)) for row in x]
        rows.append(_ref_taylor(z, [1] * len(z), K)[2:])
    return rows


def _ref_det(M):
    M = [[Fraction(v) for v in r] for r in M]
    n, det = len(M), Fraction(1)
    for c in range(n):
        piv = next((r for r in range(c, n) if M[r][c] != 0), None)
        if piv is None:
            return Fraction(0)
        if piv != c:
            M[c], M[piv] = M[piv], M[c]
            det = -det
        det *= M[c][c]
        for r in range(c + 1, n):
            f = M[r][c] / M[c][c]
            M[r] = [a - f * b for a, b in zip(M[r], M[c])]
    return det


def _check_minor(cert, samples, w):
    """An exact-minor / ball-bound certificate at direction w: its minor is non-singular (exact)."""
    K = max(cert.columns)
    rows = _ref_rows(samples, w, K)
    square = [[r[k - 2] for k in cert.columns] for r in rows]
    assert _ref_det(square) != 0, cert


def _ref_lse(x, a):
    """log mean_j exp(<a, x_j>) in mpmath at the caller's working precision."""
    import mpmath

    s = [mpmath.fsum(mpmath.mpf(float(ai)) * mpmath.mpf(float(xi)) for ai, xi in zip(a, row)) for row in x]
    return mpmath.log(mpmath.fsum(mpmath.exp(v) for v in s) / len(s))


CUBES_1300 = [UniformCube(1, 1), UniformCube(1 + Fraction(1, 10**1300), 1)]
TINY = [np.array([[0.0], [1.0], [1e-80]]), np.array([[0.0], [1.0], [0.0]])]


@pytest.mark.parametrize("method", ["auto", "exact", "interval", "float"])
@pytest.mark.parametrize("prop", ["weak", "strong"])
def test_below_precision_pairs_never_dependent(method, prop):
    """Issue 9: laws that differ below the working precision (radius 1 + 10^-1300; an atom
    at 1e-80 instead of 0) are distinct, hence independent. Never ``dependent``;
    auto and exact certify independence."""
    for ms in (CUBES_1300, TINY):
        dec = decide(ms, prop, method=method)
        assert dec.verdict is not Verdict.DEPENDENT, dec
        assert dec.null_vector is None  # evidence is never reported as a dependence
        if method in ("auto", "exact"):
            assert dec.verdict is Verdict.INDEPENDENT, dec
        if dec.verdict is Verdict.INCONCLUSIVE:
            assert "(certified)" not in dec.sentence
            assert dec.certificate.orders and dec.certificate.suggestion


def test_below_precision_tokens_exact_minor_checked():
    """The exact route's minor for [[0],[1],[1e-80]] vs [[0],[1],[0]], recomputed from our own
    cumulants, is non-singular (the two rows differ at relative size 1e-80)."""
    dec = decide(TINY, "strong", method="exact")
    assert dec.certificate.kind == "exact-minor" and dec.certificate.directions == ((Fraction(1),),)
    _check_minor(dec.certificate, TINY, [1])


def test_cube_pair_interval_needs_the_bits():
    """UniformCube(1) vs UniformCube(1 + 10^-1300): the interval route is inconclusive at the
    default cap (4096 bits < 1300 log2(10) ~ 4319 bits), naming the bits as the remedy,
    and certifies with 8192 bits at a precision above 4319 bits."""
    dec = decide(CUBES_1300, "strong", method="interval")
    assert dec.verdict is Verdict.INCONCLUSIVE
    assert "max_bits" in dec.certificate.suggestion and 4096 in dec.certificate.bits
    big = decide(CUBES_1300, "strong", method="interval", max_bits=8192)
    assert big.verdict is Verdict.INDEPENDENT and big.certificate.kind == "ball-bound"
    assert big.certificate.prec_bits > 1300 * np.log2(10)
    # the stated bound is tiny but positive, about the relative difference of the rows
    assert -1300 * np.log2(10) - 40 < big.certificate.sigma_min_lower_log2 < -1300 * np.log2(10) + 40


def test_float_route_attaches_null_vector_evidence():
    """method="float" on rows that agree to 1e-80: inconclusive, with the two-precision null
    vector (1, -1) as evidence and the exact rank saying that more precision would certify."""
    from ntkcheck.independence.results import NullVectorEvidence

    dec = decide(TINY, "strong", method="float")
    assert dec.verdict is Verdict.INCONCLUSIVE and dec.method == "none"
    ev = [e for e in dec.certificate.evidence if isinstance(e, NullVectorEvidence)]
    assert len(ev) == 1
    v = np.array(ev[0].vector)
    np.testing.assert_allclose(v / v[0], [1.0, -1.0], atol=1e-12)  # rows equal to 1e-80
    assert ev[0].prec_bits[0] < ev[0].prec_bits[1] and ev[0].orders >= 2
    assert "full rank over Q" in " ".join(dec.trail)
    assert "evidence" in dec.sentence and "(certified)" not in dec.sentence


def test_method_labels():
    """Each result names the route that decided it; float is never labelled interval."""
    x = [np.array([[0.0], [1.0], [3.0]]), np.array([[0.0], [1.0], [4.0]])]
    expected = {"auto": {"gap-condition"}, "exact": {"exact"}, "interval": {"interval"}, "float": {"float"}}
    for method, labels in expected.items():
        dec = decide(x, "strong", method=method)
        assert dec.verdict is Verdict.INDEPENDENT and dec.method in labels, (method, dec)
        if dec.certificate.kind in ("exact-minor", "ball-bound"):
            _check_minor(dec.certificate, x, [1])
        if method == "float":
            assert dec.precision == "53 bits"
        dep = decide([x[0], x[0] + 2.0], "strong", method=method)
        assert dep.verdict is Verdict.DEPENDENT and dep.method == "identity"


def _gaps_ok(cert, samples):
    """Recompute the gap condition from the tokens (Fractions) and compare with the certificate."""
    w = cert.direction
    gaps = []
    for x in samples:
        z = sorted({sum(Fraction(float(a)) * b for a, b in zip(row, w)) for row in np.asarray(x)}, reverse=cert.side == "top")
        gaps.append(abs(z[0] - z[1]))
    return len(set(gaps)) == len(gaps) and list(cert.gaps) == gaps


def _crash_inputs():
    yield "normal(128, 5, 2) * 3", list(np.random.default_rng(0).normal(size=(128, 5, 2)) * 3)
    yield "normal(128, 16, 4)", list(np.random.default_rng(0).normal(size=(128, 16, 4)))
    yield "64 samples ~ N(0, 1e4)", list(np.random.default_rng(2).normal(size=(64, 8, 2)) * 100)
    yield "3 samples ~ 1e40", list(np.random.default_rng(3).normal(size=(3, 5, 2)) * 1e40)
    yield "3 samples ~ 1e300", list(np.random.default_rng(4).normal(size=(3, 5, 2)) * 1e300)


@pytest.mark.parametrize("name, samples", list(_crash_inputs()), ids=[n for n, _ in _crash_inputs()])
def test_ordinary_data_gets_a_verdict(name, samples):
    """Issue 9: inputs whose high-order cumulants overflow float64 get a verdict (they crashed
    in the float screen). Gaussian tokens are strongly independent a.s. (seed 003 Prop. 10)."""
    dec = decide(samples, "strong", timeout=60)
    assert dec.verdict is Verdict.INDEPENDENT, dec
    if dec.certificate.kind == "gap-condition":
        assert _gaps_ok(dec.certificate, samples)


@pytest.mark.parametrize("method", ["exact", "interval", "float"])
def test_huge_tokens_every_route(method):
    """Tokens of size 1e300: the coefficient of order k is ~1e300^k; rows and columns are
    scaled by powers of two from the balls' exponents, never through float64."""
    samples = list(np.random.default_rng(5).normal(size=(3, 4, 2)) * 1e300)
    for prop in ("weak", "strong"):
        dec = decide(samples, prop, method=method, timeout=60)
        assert dec.verdict is not Verdict.DEPENDENT, dec
        if method != "float":
            assert dec.verdict is Verdict.INDEPENDENT, dec


@pytest.mark.parametrize("scale", [1.7e308, 1e300])
def test_tokens_near_float_max(scale):
    """Tokens near the top of the float range: a verdict or the package's own error, never a crash."""
    from ntkcheck.errors import NtkcheckError

    samples = list(np.random.default_rng(1).uniform(-1, 1, size=(3, 4, 2)) * scale)
    for method in ("auto", "exact", "interval", "float"):
        try:
            dec = decide(samples, "strong", method=method, timeout=60)
        except NtkcheckError as exc:
            assert str(exc)
        else:
            assert dec.verdict is not Verdict.DEPENDENT


def test_scaled_ball_certificate_for_mixed_scales():
    """Samples of scale 1 and 2^100: the rows differ by 2^(100 k) at order k; the certificate
    scales rows by powers of two <= 1 and its minor is non-singular (recomputed exactly)."""
    rng = np.random.default_rng(6)
    x = [rng.integers(-8, 9, size=(4, 1)) / 4, rng.integers(-8, 9, size=(4, 1)) / 4 * 2.0**100, rng.integers(-8, 9, size=(5, 1)) / 8]
    dec = decide(x, "strong", method="interval")
    assert dec.verdict is Verdict.INDEPENDENT
    cert = dec.certificate
    assert all(r <= 0 for r in cert.row_scale_log2) and any(r < 0 for r in cert.row_scale_log2)
    _check_minor(cert, x, [1])


def test_scale_rows_reads_exponents_not_floats():
    from flint import arb

    from ntkcheck.independence import rank as C

    rows = [[arb(2) ** 5000, arb(3) * arb(2) ** -5000, arb(0)], [arb(2) ** 4999, arb(2) ** -5001, arb(0)]]
    S = C.scale_rows(rows)
    # column j times 2^c_j puts its largest entry in [1/2, 1): 2^5000 -> 1/2, 3 * 2^-5000 -> 3/4
    assert list(S.col_exp[:2]) == [-5001, 4998] and list(S.row_exp) == [0, 0]
    np.testing.assert_array_equal(S.A, [[0.5, 0.75, 0.0], [0.25, 0.125, 0.0]])  # powers of two: exact
    assert not S.nonzero[0, 2] and not S.nonzero[1, 2]
    # rows of very different size are scaled down (2^r, r <= 0), never up
    T = C.scale_rows([[arb(2) ** 300, arb(2) ** 400], [arb(1), arb(3)]])
    assert T.row_exp[1] == 0 and T.row_exp[0] < -200
    assert np.all(np.max(np.abs(T.A), axis=0) >= 0.5) and np.all(np.abs(T.A) < 1)


def _convolution_pair(seed=0):
    rng = np.random.default_rng(seed)
    A = Empirical(rng.integers(-8, 9, size=(3, 2)) / 4)
    B = Empirical(rng.integers(-8, 9, size=(2, 2)) / 4)
    E = EmpiricalConvolution(A, B)
    return A, B, E, E.as_empirical()


@pytest.mark.parametrize("method", ["auto", "exact", "interval", "float"])
def test_convolution_against_its_empirical_law(method):
    """Issue 9, the hang: EmpiricalConvolution(A, B) and its own empirical law (A 3 atoms,
    B 2, d = 2) are one law. The product identity proves it; with a time budget the
    verdict is asserted (a regression to sympy would give inconclusive, not a hang)."""
    A, B, E, law = _convolution_pair()
    for prop in ("weak", "strong"):
        dec = decide([E, law], prop, method=method, timeout=30)
        assert dec.verdict is Verdict.DEPENDENT, dec
        assert _proportional(dec.null_vector, [1, -1])
        ident = getattr(dec.certificate, "weak", dec.certificate)
        assert ident.kind == "product-identity"
    # the identity, checked at 50 digits from the atoms: Lambda_E = Lambda_A + Lambda_B = Lambda_law
    import mpmath

    rng = np.random.default_rng(1)
    sums = np.array([x + y for x in A.atoms for y in B.atoms])  # dyadic: exact in float64
    with mpmath.workdps(50):
        for _ in range(3):
            a = rng.normal(size=2)
            assert abs(_ref_lse(A.atoms, a) + _ref_lse(B.atoms, a) - _ref_lse(sums, a)) < mpmath.mpf(10) ** -45


@pytest.mark.parametrize("method", ["auto", "exact", "interval", "float"])
def test_timeout_gives_inconclusive(method):
    """An exhausted budget is an inconclusive verdict that says so, on every route."""
    ms = [UniformCube(1 + Fraction(k, 127), 1) for k in range(128)]
    dec = decide(ms, "strong", method=method, timeout=1e-6)
    assert dec.verdict is Verdict.INCONCLUSIVE
    assert dec.certificate.timed_out and "time budget" in dec.trail[-1]
    assert "timeout" in dec.certificate.suggestion and "time budget" in dec.sentence


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "10", True])
def test_bad_timeout(bad):
    with pytest.raises(DomainError, match="timeout"):
        decide([np.eye(2)], timeout=bad)


def test_bad_orders():
    with pytest.raises(DomainError, match="max_order"):
        decide([np.eye(2), 2 * np.eye(2)], K=10, max_order=8)
    with pytest.raises(DomainError, match="K"):
        decide([np.eye(2)], K=1)


def _prouhet(K, a, b, steps):
    A, B = [a], [b]
    for h in steps[:K]:
        A, B = A + [y + h for y in B], B + [x + h for x in A]
    return np.array(A, dtype=np.float64)[:, None], np.array(B, dtype=np.float64)[:, None]


@st.composite
def _shared_cumulants(draw):
    K = draw(st.integers(3, 9))
    a, b = draw(st.lists(st.integers(-3, 3), min_size=2, max_size=2, unique=True))
    steps = [draw(st.integers(1, 4)) * draw(st.sampled_from([-1, 1])) for _ in range(K)]
    scale = draw(st.sampled_from([1.0, 0.25, 2.0**-30]))
    XA, XB = _prouhet(K, a, b, steps)
    return K, XA * scale, XB * scale


@given(_shared_cumulants())
@settings(max_examples=12)
def test_shared_cumulants_certified_by_raising_K(case):
    """Prouhet pairs: distinct laws with equal power sums (hence cumulants) up to order K,
    K = 3..9 (issue 9). Their truncations 2..K coincide, so a truncation-based dependence
    would be wrong. Never dependent; auto and exact certify independence, and an exact
    minor must use an order above K (recomputed exactly from our own cumulants)."""
    K, XA, XB = case
    ra, rb = _ref_rows([XA, XB], [1], K)
    assert ra == rb  # the construction: rows 2..K agree exactly
    for method in ("auto", "exact", "interval", "float"):
        dec = decide([XA, XB], "strong", method=method, timeout=30)
        assert dec.verdict is not Verdict.DEPENDENT, (method, dec)
        if method in ("auto", "exact"):
            assert dec.verdict is Verdict.INDEPENDENT, (method, dec)
        if dec.certificate.kind in ("exact-minor", "ball-bound"):
            assert max(dec.certificate.columns) > K and dec.K > K
            _check_minor(dec.certificate, [XA, XB], [1])


@st.composite
def _near_equal(draw):
    d = draw(st.integers(1, 2))
    rows = draw(st.lists(st.lists(st.integers(-8, 8).filter(bool), min_size=d, max_size=d), min_size=1, max_size=3, unique_by=tuple))
    X = np.array([[0.0] * d] + [[v / 4 for v in r] for r in rows])
    Y = X.copy()
    Y[0, draw(st.integers(0, d - 1))] = 2.0 ** -draw(st.integers(60, 1070))
    return X, Y


@given(_near_equal())
@settings(max_examples=12)
def test_tokens_differing_below_precision(pair):
    """One atom moved from 0 to 2^-e (e = 60..1070): a different law, never dependent on any
    route; auto and exact certify independence (weak property, Prop. 7 included)."""
    X, Y = pair
    for method in ("auto", "exact", "interval", "float"):
        dec = decide([X, Y], "weak", method=method, timeout=30)
        assert dec.verdict is not Verdict.DEPENDENT, (method, dec)
        if method in ("auto", "exact"):
            assert dec.verdict is Verdict.INDEPENDENT, (method, dec)


def test_symmetric_laws_raise_K_to_2n():
    """Uniform cubes have vanishing odd orders: the first truncation (n + 2) is short and the
    ladder raises K; the exact minor uses only even orders (the odd columns vanish)."""
    ms = [UniformCube(1 + Fraction(k, 7), 1) for k in range(8)]
    dec = decide(ms, "strong", method="exact")
    assert dec.verdict is Verdict.INDEPENDENT
    assert dec.orders[0] == 10 and dec.K >= 16 and len(dec.orders) >= 2
    assert all(k % 2 == 0 for k in dec.certificate.columns)


def test_many_measures_lift_null_vectors_mod_p():
    """n = 30 > 24 samples with one translate: the null vector comes from the mod-p null space
    lifted to rationals, then the product identity proves it."""
    rng = np.random.default_rng(7)
    x = list(rng.integers(-16, 17, size=(29, 4, 1)) / 8)
    x.append(x[3] + 0.5)
    dec = decide(x, "strong", timeout=60)
    assert dec.verdict is Verdict.DEPENDENT
    c = [0] * 30
    c[3], c[29] = 1, -1
    assert _proportional(dec.null_vector, c)


def test_structural_gives_its_null_vector_and_affine_part():
    """Gaussians with independent covariances are strongly dependent by the structural bound;
    the reported c and (alpha, beta) satisfy the identity along the reported direction."""
    from ntkcheck.cgf import Gaussian

    ms = [Gaussian([0, 0], [[1, 0], [0, 1]]), Gaussian([1, 0], [[2, 0], [0, 1]]), Gaussian([0, 3], [[2, 1], [1, 2]])]
    dec = decide(ms, "strong")
    assert dec.verdict is Verdict.DEPENDENT and dec.certificate.kind == "structural"
    w = dec.direction
    c = [Fraction(v) for v in dec.null_vector]
    (alpha,), beta = dec.affine
    for t in (Fraction(1, 3), Fraction(-2)):
        # Lambda_i(t w) = t <w, m_i> + t^2 w^T S_i w / 2, exactly
        val = sum(ci * (t * sum(wk * Fraction(mk) for wk, mk in zip(w, m.mean))
                        + t * t * sum(w[i] * m.cov[i][j] * w[j] for i in range(2) for j in range(2)) / 2)
                  for ci, m in zip(c, ms))
        assert val == alpha * t + beta


def test_inconclusive_reports_orders_bits_and_evidence_as_json():
    import json

    dec = decide(TINY, "strong", method="float")
    d = json.loads(json.dumps(dec.to_dict()))
    cert = d["certificate"]
    assert d["verdict"] == "inconclusive" and cert["orders"] and cert["bits"] == [53]
    assert cert["evidence"] and d["null_vector"] is None and d["orders"] == cert["orders"]


def test_margin_is_none_when_a_condition_decides():
    dec = decide([np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])], "strong")
    assert dec.method == "gap-condition" and dec.margin is None


def test_order_and_precision_caps():
    """Orders and precisions that no budget could reach are refused with the value received."""
    with pytest.raises(DomainError, match="20000"):
        decide([np.eye(2)], K=10**6)
    with pytest.raises(PrecisionError, match="max_bits"):
        decide([np.eye(2)], max_bits=10**9)


@pytest.mark.parametrize("tokens, verdict", [
    ([np.array([[0.0], [1.0]]), np.array([[5.0], [6.0]])], "dependent"),      # translates: Lambda_2 = Lambda_1 + 5a
    ([np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]])], "independent"),
])
def test_decision_has_no_truth_value(tokens, verdict):
    """A dataclass is truthy, so ``if decide(...):`` would pass for a dependent verdict: it
    raises TypeError naming the fields to test instead."""
    dec = decide(tokens)
    assert dec.verdict.value == verdict
    with pytest.raises(TypeError, match=r"\.independent, \.dependent or \.verdict"):
        bool(dec)
    with pytest.raises(TypeError):
        if dec:  # the trap itself
            pass
    assert dec.independent is (verdict == "independent") and dec.dependent is (verdict == "dependent")
