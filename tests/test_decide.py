"""Tests of the decision engine (ntkcheck.decide) against the seed's claims and examples."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.decide import Verdict, decide
from ntkcheck.errors import DomainError, InputError, PrecisionError
from ntkcheck.examples import seed_examples
from ntkcheck.families import Empirical, UniformCube

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
    """Every row of MATH.md section 4 (seed 003 Ex. 3-6, Prop. 12, Remark 5) is decided as the seed states."""
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
    """Two sets whose projections on w = e1 coincide are dependent along e1 but independent along e2."""
    x = np.array([[0.0, 0.5], [1.0, 0.0]])
    y = np.array([[0.0, 1.0], [1.0, -2.0]])
    along_e1 = decide([x, y], "strong", direction=[1, 0])
    assert along_e1.verdict is Verdict.DEPENDENT
    assert _proportional(along_e1.null_vector, [1, -1])
    along_e2 = decide([x, y], "strong", direction=[0, 1])
    assert along_e2.verdict is Verdict.INDEPENDENT


def test_gaussians_weak_independent_strong_dependent():
    """n <= d(d+1)/2 Gaussians with independent covariances: weakly independent, strongly dependent (quadratic)."""
    from ntkcheck.families import Gaussian

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


def test_null_vector_at_two_precisions():
    """Where no exact identity is attempted, a null vector verified at two precisions is reported with both residuals."""
    from ntkcheck.decide import _Run, _two_precision_null

    ms = [UniformCube(Fraction(3, 2), 1), UniformCube(Fraction(3, 2), 1), UniformCube(Fraction(1), 1)]
    run = _Run(ms, "interval", 8, 512)
    got = _two_precision_null(run, [(Fraction(1),)])
    assert got is not None
    vec, cert = got
    # the null vector is proportional to (1, -1, 0): the third law has a different radius
    v = np.array(vec) / vec[0]
    np.testing.assert_allclose(v, [1.0, -1.0, 0.0], atol=1e-20)  # exact up to working precision
    assert cert.residuals[0] < 2.0**-100 and cert.residuals[1] < 2.0**-230
    assert cert.to_dict()["prec_bits"] == [128, 256]
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
