"""Tests of ntkcheck.cgf.core: empirical CGFs, their derivatives, series and cumulants."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy as sp
from helpers import RTOL_FLOAT, RTOL_FLOAT_VS_MP, arb_contains_exact
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ntkcheck.cgf import core as cgf
from ntkcheck.errors import InputError

finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False)


def test_log_mgf_overflow_safe():
    """Scores of 1e4 must not overflow: Lambda(a) = max score + log(mean exp(shifted))."""
    x = np.array([[0.0], [1.0]])
    val = cgf.log_mgf(x, np.array([1e4]))
    # exact: 1e4 + log((1 + e^-1e4)/2) = 1e4 - log 2 to float precision
    np.testing.assert_allclose(val, 1e4 - np.log(2), rtol=1e-15)


def test_overflowing_scores_raise():
    with pytest.raises(InputError, match="overflow"):
        cgf.log_mgf(np.array([[1e200]]), np.array([1e200]))


@given(arrays(np.float64, (5, 2), elements=finite), arrays(np.float64, (2,), elements=finite))
def test_gradient_and_hessian_match_finite_differences(x, a):
    """grad Lambda is the softmax-weighted mean and the Hessian the tilted covariance (seed 003 eq. 1)."""
    h = 1e-5
    g = cgf.cgf_gradient(x, a)
    fd = np.array([(cgf.log_mgf(x, a + h * e) - cgf.log_mgf(x, a - h * e)) / (2 * h) for e in np.eye(2)])
    # central differences: O(h^2 |D^3 Lambda|) ~ 1e-10 * 27 plus rounding eps/h ~ 1e-11
    np.testing.assert_allclose(g, fd, atol=1e-7)
    H = cgf.cgf_hessian(x, a)
    fdH = np.array([(cgf.cgf_gradient(x, a + h * e) - cgf.cgf_gradient(x, a - h * e)) / (2 * h) for e in np.eye(2)])
    np.testing.assert_allclose(H, fdH, atol=1e-7)


def test_float_matches_mpmath():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(7, 3))
    a = rng.normal(size=3)
    ref = cgf.log_mgf_mp(x, a, dps=50)
    np.testing.assert_allclose(cgf.log_mgf(x, a), float(ref), rtol=RTOL_FLOAT_VS_MP)


def test_exact_cumulants_match_sympy_series():
    """Exact series coefficients equal sympy's series of log(mean exp(z t)) (independent route)."""
    z = [Fraction(0), Fraction(1, 2), Fraction(-3, 4), Fraction(2)]
    t = sp.Symbol("t")
    expr = sp.log(sp.Add(*[sp.exp(sp.Rational(v.numerator, v.denominator) * t) for v in z]) / 4)
    ser = sp.series(expr, t, 0, 8).removeO()
    ours = cgf.series_log_mgf_exact(z, None, 7)
    for k in range(8):
        assert sp.Rational(int(ours[k].p), int(ours[k].q)) == ser.coeff(t, k)


def test_arb_series_encloses_exact():
    rng = np.random.default_rng(2)
    z = list(rng.normal(size=6))
    exact = cgf.series_log_mgf_exact(z, None, 12)
    balls = cgf.series_log_mgf_arb(z, None, 12, prec=80)
    for e, b in zip(exact, balls):
        assert arb_contains_exact(b, e)


def test_modp_series_is_reduction_of_exact():
    rng = np.random.default_rng(3)
    z = [Fraction(v) for v in rng.normal(size=5)]
    p = 4611686018427387847
    exact = cgf.series_log_mgf_exact(z, None, 20)
    modp = cgf.series_log_mgf_modp(z, None, 20, p)
    assert [cgf._modp(Fraction(int(c.p), int(c.q)), p) for c in exact] == modp


def test_cumulants_two_point():
    """Bernoulli(1/2): kappa = 1/2, 1/4, 0, -1/8."""
    assert cgf.cumulants_1d_exact(np.array([[0.0], [1.0]]), [1], 4) == [Fraction(1, 2), Fraction(1, 4), 0, Fraction(-1, 8)]


def test_joint_cumulants_agree_with_directional():
    """Homogeneous part of degree k along w equals the 1-D Taylor coefficient: sum_alpha kappa_alpha w^alpha / alpha!."""
    from math import factorial

    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, size=(5, 2)).astype(float) / 2
    idx, vals = cgf.joint_cumulants(x, 4, exact=True)
    w = [Fraction(2), Fraction(-1)]
    c = cgf.taylor_1d_exact(x, w, 4)
    for k in range(1, 5):
        tot = sum(
            v * w[0] ** al[0] * w[1] ** al[1] / (factorial(al[0]) * factorial(al[1]))
            for al, v in zip(idx, vals)
            if sum(al) == k
        )
        assert tot == Fraction(int(c[k].p), int(c[k].q))
    _, fvals = cgf.joint_cumulants(x, 4)
    np.testing.assert_allclose(fvals, [float(v) for v in vals], rtol=RTOL_FLOAT, atol=1e-12)


def test_project_exact_handles_tiny_and_huge():
    x = np.array([[1e-300, 1e300], [0.0, -2.5]])
    z = cgf._project_exact(x, [Fraction(1, 3), 1])
    assert z[0] == Fraction(1e-300) / 3 + Fraction(1e300)
    assert z[1] == Fraction(-5, 2)


@pytest.mark.parametrize(
    "bad, msg",
    [
        (np.array([[np.nan, 0.0]]), "non-finite"),
        (np.zeros((0, 2)), "empty"),
        (np.zeros(3), "shape"),
        ("abc", "numeric"),
    ],
)
def test_bad_tokens(bad, msg):
    with pytest.raises(InputError, match=msg):
        cgf.log_mgf(bad, np.zeros(2))


def test_mpmath_precision_is_local():
    cgf.log_mgf_mp(np.array([[0.0], [1.0]]), [1.0], dps=80)
    assert mpmath.mp.dps == 15


@pytest.mark.parametrize("p", [4611686018427387847, 10007])
def test_modp_series_weights_repeats_and_reference(p):
    """The mod-p series (power sums from a product tree of nmod_poly fractions) against the
    exact rational series reduced here: weights, repeated atoms, a zero weight, a small prime."""
    z = [Fraction(1, 3), Fraction(-2), Fraction(1, 3), Fraction(5, 4), Fraction(7)]
    w = [Fraction(1), Fraction(2), Fraction(3), Fraction(0), Fraction(1, 2)]
    K = 30
    exact = cgf.series_log_mgf_exact(z, w, K)
    ref = [int(c.p) * pow(int(c.q), -1, p) % p for c in exact]
    assert cgf.series_log_mgf_modp(z, w, K, p) == ref
    with pytest.raises(ZeroDivisionError):
        cgf.series_log_mgf_modp([Fraction(1, 10007)], None, 4, 10007)
