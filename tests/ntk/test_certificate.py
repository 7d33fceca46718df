"""Tests of the float64 positivity certificate (ntkcheck.ntk.certificate.certify_positive).

Independent references: Arb ball arithmetic (python-flint) for the exponential, the
features and the Gram; exact rationals (fractions) for the hand-assembled singular Gram;
numpy's eigvalsh for the float64 lambda_min the certificate is compared with.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from flint import arb, arb_mat, ctx
from hypothesis import given
from hypothesis import strategies as st

from ntkcheck.cgf import Empirical, as_laws
from ntkcheck.ntk import _rounding as rnd
from ntkcheck.ntk.certificate import (
    _features_arb,
    _gram_arb,
    certify_gram_enclosure,
    certify_positive,
)
from ntkcheck.ntk.features import attention_features, init_heads


def _laws(seed: int, n: int, N: int, d: int, weighted: bool) -> list[Empirical]:
    rng = np.random.default_rng(seed)
    X = [rng.standard_normal((N, d)) / np.sqrt(d) for _ in range(n)]
    if weighted:  # unequal masses: the softmax is weighted
        return [Empirical(x, [1 + (k % 3) for k in range(N)]) for x in X]
    return as_laws(X)


def _arb_le(x: arb, bound: float) -> bool:
    """True only if every point of the ball ``x`` is <= ``bound`` (rigorous)."""
    return bool(x <= arb(bound))


def test_exp_within_the_assumed_error():
    # The enclosure assumes |np.exp(x) - e^x| <= U_EXP e^x on [-400, 200] (every exponential
    # the feature builder evaluates under the score bound 200). Arb at 128 bits is the reference.
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-400.0, 200.0, 3000), rng.uniform(-1.0, 1.0, 1000)])
    y = np.exp(x)
    old = ctx.prec
    ctx.prec = 128
    try:
        worst = max(float((abs(arb(float(yi)) / arb(float(xi)).exp() - 1)).upper()) for xi, yi in zip(x, y))
    finally:
        ctx.prec = old
    assert worst <= rnd.U_EXP


@given(seed=st.integers(0, 2**16), d=st.integers(1, 4), N=st.integers(1, 6), H=st.integers(1, 4),
       q=st.sampled_from([0.1, 1.0, 4.0]), weighted=st.booleans())
def test_feature_radius_encloses_the_arb_features(seed, d, N, H, q, weighted):
    laws = _laws(seed, 2, N, d, weighted)
    heads = init_heads(H, d, q_scale=q, b_scale=q, seed=seed)
    assert rnd.score_bound(laws, heads) <= rnd.SCORE_BOUND  # inputs chosen inside the valid region
    F = attention_features(laws, heads)
    e, _ = rnd.feature_radius(laws, heads)
    Fa = _features_arb(laws, heads, 160)
    old = ctx.prec
    ctx.prec = 160
    try:
        bad = [(r, c) for r in range(F.shape[0]) for c in range(F.shape[1])
               if not _arb_le(abs(arb(float(F[r, c])) - Fa[r, c]), float(e[r]))]
    finally:
        ctx.prec = old
    assert bad == []


def _rayleigh_upper(laws, heads, v: np.ndarray) -> float:
    """Rigorous upper bound on lambda_min(G) = min Rayleigh quotient, G in Arb at 128 bits."""
    G = _gram_arb(laws, heads, 128)
    old = ctx.prec
    ctx.prec = 128
    try:
        va = arb_mat([[arb(float(t))] for t in v])
        num = (va.transpose() * G * va)[0, 0]
        den = (va.transpose() * va)[0, 0]
        return float((num / den).upper())
    finally:
        ctx.prec = old


@pytest.mark.parametrize(("seed", "n", "d"), [(0, 4, 2), (1, 3, 3), (2, 2, 8), (5, 6, 2), (6, 4, 8)])
def test_small_certificates_hold_against_arb(seed, n, d):
    # lower_bound <= lambda_min <= v^T G v / v^T v for the float eigenvector v, G in Arb: the
    # bound must not exceed the exact lambda_min, and must be at least half the float64 one.
    laws = _laws(seed, n, 8, d, weighted=seed % 2 == 1)
    heads = init_heads(2 * 8 * n // d, d, seed=seed + 10)  # H d = 2 M, as in the benchmark
    cert = certify_positive(laws, heads, arb=False)
    F = attention_features(laws, heads)
    w, V = np.linalg.eigh(F @ F.T)
    assert cert.positive and cert.method == "float64-cholesky", cert
    assert cert.lower_bound <= _rayleigh_upper(laws, heads, V[:, 0])
    assert cert.lower_bound >= w[0] / 2


def test_M1024_d8_certified_within_half_the_float_lambda_min():
    M, d = 1024, 8
    laws = _laws(0, M // 8, 8, d, weighted=False)
    heads = init_heads(2 * M // d, d, seed=1)
    cert = certify_positive(laws, heads, arb=False)
    F = attention_features(laws, heads)
    lam = np.linalg.eigvalsh(F @ F.T)[0]
    assert cert.positive and cert.M == M, cert
    assert lam / 2 <= cert.lower_bound <= lam * (1 + 1e-6)  # eigvalsh error here ~1e-16 ||G|| << 1e-6 lam


def test_refuses_singular_token_slot_gram_that_float64_calls_positive():
    # Token slots of one weighted sample before merging: the same atom twice with weights
    # 1 and 3 (masses 1/4, 3/4), plus an orthogonal slot. With K the atom's kernel value 1,
    # G = [[1/4, sqrt(3)/4, 0], [sqrt(3)/4, 3/4, 0], [0, 0, 1]] is singular in exact arithmetic.
    s = math.sqrt(3.0) / 4.0
    G = np.array([[0.25, s, 0.0], [s, 0.75, 0.0], [0.0, 0.0, 1.0]])
    # float64 says positive: the stored matrix is positive definite even in exact rationals
    assert Fraction(1, 4) * Fraction(3, 4) - Fraction(s) ** 2 > 0
    np.linalg.cholesky(G)  # succeeds
    assert np.linalg.eigvalsh(G)[0] > 0
    # the exact Gram is within |s - sqrt(3)/4| <= u s of G (one correctly rounded sqrt, exact /4)
    cert = certify_gram_enclosure(G, rnd.U * s * 1.01)
    assert not cert.positive and cert.lower_bound is None and cert.method == "refused"
    assert "below resolution at M = 3" in cert.statement


def test_refuses_a_duplicated_sample():
    # two identical samples: the rows of F repeat, the exact Gram is singular
    laws = _laws(4, 2, 8, 2, weighted=False)
    laws = laws + [Empirical(laws[0].atoms)]
    cert = certify_positive(laws, init_heads(16, 2, seed=2), arb=False)
    assert not cert.positive and cert.method == "refused"
    assert "below resolution" in cert.statement


def test_enclosure_is_monotone_in_the_radius():
    # the same matrix is certified with a small radius and refused once the radius exceeds lambda_min
    G = np.diag([1.0, 2.0, 3.0])
    assert certify_gram_enclosure(G, 0.1).lower_bound >= 0.5
    assert not certify_gram_enclosure(G, 1.5).positive


def test_gram_certify_reports_the_refusal_above_the_arb_limit():
    # M = 384 > 256 at d = 2, relative lambda_min ~ 5e-13: float64 says "small", the float64
    # certificate cannot resolve it and gram() must say so rather than claim positivity.
    from ntkcheck.ntk import gram

    rng = np.random.default_rng(4)
    laws = as_laws([rng.standard_normal((8, 2)) / np.sqrt(2) for _ in range(48)])
    r = gram(laws, init_heads(384, 2, seed=4, q_scale=0.7, b_scale=0.7), certify=True)
    assert r.status != "positive" and not r.certified_positive
    assert any("below resolution at M = 384" in n for n in r.notes)
