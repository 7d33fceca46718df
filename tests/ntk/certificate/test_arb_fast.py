"""Tests of the preconditioned lambda_min certificate (ntkcheck.ntk.certificate.arb_fast) and its routing.

Independent references: the Gram assembled in Arb ball arithmetic from the exact inputs
(python-flint, 256 bits) whose eigenvalues mpmath computes at 80 digits; the Arb inverse route
(``method="arb"``) and Rayleigh quotients evaluated in Arb (rigorous upper bounds on the exact
lambda_min); closed forms for 2 x 2 matrices; numpy's SVD / eigvalsh for the norm helpers.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from flint import arb, arb_mat, ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import as_laws
from ntkcheck.errors import NtkcheckError, PrecisionError
from ntkcheck.ntk.certificate import arb_fast as fast
from ntkcheck.ntk.certificate.routes import MAX_CERTIFY_TOKENS, certify_lambda_min, gram_matrix_arb
from ntkcheck.ntk.gram_matrix.features import attention_features, init_heads


def _laws(seed: int, n: int, N: int, d: int):
    rng = np.random.default_rng(seed)
    return as_laws([rng.standard_normal((N, d)) / np.sqrt(d) for _ in range(n)])


def _mp_lambda_min(laws, heads) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(lambda_min, lambda_max) of the Gram built in Arb at 256 bits, by mpmath at 80 digits.

    The balls have radius below 2^-200 relative to the entries, so by Weyl the midpoint
    matrix's eigenvalues are those of the exact Gram to ~1e-60 of lambda_max."""
    G = gram_matrix_arb(laws, heads, 256)
    n = G.nrows()
    mpmath.mp.dps = 80
    A = mpmath.matrix(n, n)
    for r in range(n):
        for c in range(n):
            A[r, c] = mpmath.mpf(G[r, c].mid().str(70, radius=False))
    ev = mpmath.eigsy(A, eigvals_only=True)
    return min(ev), max(ev)


@settings(max_examples=12)
@given(seed=st.integers(0, 2**16), d=st.sampled_from([2, 3]), N=st.integers(2, 5), n=st.integers(2, 4),
       scale=st.sampled_from([20.0, 1.0, 0.05, 1e-3]))
def test_bound_holds_against_high_precision_eigenvalues(seed, d, N, n, scale):
    laws = _laws(seed, n, N, d)
    M = n * N
    heads = init_heads(-(-2 * M // d), d, q_scale=scale, b_scale=scale, seed=seed)
    lo, hi = _mp_lambda_min(laws, heads)
    res = fast.preconditioned_bound(laws, heads)
    if res.lower_bound is None:
        # a refusal is sound; it may only happen below what the route resolves (sigma_min
        # near the feature radius), never for a comfortably conditioned Gram
        assert lo < 1e-20 * hi, res.statement
        return
    # soundness: below the exact lambda_min (mpmath's value is exact to ~1e-60 lambda_max)
    assert mpmath.mpf(res.lower_bound) <= lo + mpmath.mpf(10) ** -50 * hi
    # sharpness: the losses are the 1.0001 margin on ||X||^2, the Gershgorin radius and the
    # feature radius (which carries the 2^-44 allowance on np.exp, _rounding.U_EXP): at
    # sigma_min >= 1e-10 sigma_max that costs at most a few per cent
    if lo > 1e-20 * hi:
        assert mpmath.mpf(res.lower_bound) >= 0.95 * lo


def test_resolves_far_below_float64_and_refuses_beyond():
    # q, b scale 1e-4 at d = 2: relative lambda_min ~4e-21, five orders below u = 1.1e-16, where
    # any float64 enclosure of the Gram itself has a radius ~1e-16 lambda_max. At scale 1e-6
    # (relative ~4e-29, sigma_min ~ 6e-15 sigma_max: the preconditioner's own rounding) the route
    # refuses, and auto falls back to Arb (M = 12 <= 256), which certifies.
    laws = _laws(5, 3, 4, 2)
    heads = init_heads(12, 2, q_scale=1e-4, b_scale=1e-4, seed=2)
    lo, hi = _mp_lambda_min(laws, heads)
    assert lo < 1e-20 * hi
    res = fast.preconditioned_bound(laws, heads)
    assert res.lower_bound is not None, res.statement
    assert 0.95 * lo <= mpmath.mpf(res.lower_bound) <= lo  # 0.98 measured: the exp allowance
    tiny = init_heads(12, 2, q_scale=1e-6, b_scale=1e-6, seed=2)
    lo, hi = _mp_lambda_min(laws, tiny)
    assert 0 < lo < 1e-27 * hi
    res = fast.preconditioned_bound(laws, tiny)
    assert res.lower_bound is None and "below resolution at M = 12" in res.statement
    c = certify_lambda_min(laws, tiny)
    assert c.kind == "arb-inverse-frobenius" and 0 < mpmath.mpf(c.lower_bound) <= lo


def test_radius_is_subtracted_in_sigma():
    # F^ = [[1, 0], [1, delta]] is within delta of the singular [[1, 0], [1, 0]]: with that radius
    # nothing may be certified; with radius 0, lambda_min(F^ F^T) in closed form
    delta = 1e-6
    F = np.array([[1.0, 0.0], [1.0, delta]])
    assert fast.sigma_min_lower(F, delta).lower_bound is None
    t = 2.0 + delta**2
    exact = 2.0 * delta**2 / (t + math.sqrt(t * t - 4.0 * delta**2))  # ~delta^2 / 2, no cancellation
    b = fast.sigma_min_lower(F, 0.0).lower_bound
    assert b is not None and 0.99 * exact <= b <= exact
    # a radius of half of sigma_min costs (1/2)^2 of the bound
    half = math.sqrt(exact) / 2
    b2 = fast.sigma_min_lower(F, half).lower_bound
    assert b2 is not None and b2 <= exact / 4 and b2 >= 0.98 * exact / 4


def test_refuses_exactly_singular_features():
    F = np.array([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0]])  # rank 1 exactly
    assert fast.sigma_min_lower(F, 0.0).lower_bound is None
    assert fast.sigma_min_lower(np.ones((3, 2)), 0.0).lower_bound is None  # more rows than columns


@pytest.mark.parametrize("case", ["same sample twice", "permuted duplicate", "single Diracs", "product"])
def test_refuses_grams_singular_in_exact_arithmetic(case):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 2))
    z, u, v = np.zeros(2), np.array([1.0, 0.25]), np.array([-0.5, 1.0])
    samples = {
        "same sample twice": [x, x.copy()],
        # the same law, atoms in another order: float64 rows differ by rounding, the exact ones do not
        "permuted duplicate": [x, x[::-1].copy()],
        # a duplicated atom fed as separate samples
        "single Diracs": [x[:1], x[:1].copy(), x[1:2]],
        # Lambda_3 = Lambda_1 + Lambda_2 with the shared atom 0 (seed 003 Prop. 8, condition (34))
        "product": [np.array([z, u]), np.array([z, v]), np.array([z, u, v, u + v])],
    }[case]
    laws = as_laws(samples)
    heads = init_heads(64, 2, seed=0)
    assert fast.preconditioned_bound(laws, heads).lower_bound is None
    c = certify_lambda_min(laws, heads, max_bits=256)
    assert not c.positive and c.kind == "inconclusive" and c.lower_bound is None


def test_matches_the_arb_route_and_an_arb_rayleigh_quotient():
    # M = 128 at d = 2 (H = M): both routes certify; the Arb route's 1/||G^-1||_F is the weaker
    # one (it can lose up to sqrt(M)); the Rayleigh quotient of the float64 eigenvector, in Arb,
    # is a rigorous upper bound on the exact lambda_min that the new bound must not exceed
    laws = _laws(11, 16, 8, 2)
    heads = init_heads(128, 2, seed=1)
    new = certify_lambda_min(laws, heads, method="preconditioned")
    old = certify_lambda_min(laws, heads, method="arb")
    assert new.kind == "float64-preconditioned" and old.kind == "arb-inverse-frobenius"
    assert old.lower_bound <= new.lower_bound
    F = attention_features(laws, heads)
    _, s, vt = np.linalg.svd(F.T, full_matrices=False)
    vec = vt[-1]
    G = gram_matrix_arb(laws, heads, 192)
    old_prec = ctx.prec
    ctx.prec = 192
    try:
        va = arb_mat([[arb(float(t))] for t in vec])
        q = (va.transpose() * G * va)[0, 0] / (va.transpose() * va)[0, 0]
        assert bool(arb(new.lower_bound) <= q)
    finally:
        ctx.prec = old_prec
    assert new.lower_bound >= 0.99 * s[-1] ** 2


def test_helpers_bound_what_they_claim():
    rng = np.random.default_rng(3)
    X = np.tril(rng.standard_normal((40, 40)))
    F = rng.standard_normal((40, 70))
    ref = np.linalg.norm(np.abs(X) @ np.abs(F), 2)
    got = fast._abs_product_norm(X, F)
    assert ref <= got <= 1.5 * ref  # Collatz-Wielandt from above, four power steps
    A = np.abs(F)
    assert np.linalg.norm(A @ A.T, 2) <= fast._abs_gram_norm(F) <= 1.5 * np.linalg.norm(A @ A.T, 2)
    C = np.eye(30) + 1e-3 * rng.standard_normal((30, 30))
    C = (C + C.T) / 2
    assert np.max(np.abs(np.linalg.eigvalsh(C) - 1.0)) <= fast._gershgorin(np.tril(C))
    P = X @ X.T
    top = np.linalg.eigvalsh(P)[-1]
    got = fast._lambda_max_upper(np.tril(P))
    assert got is not None and top <= got <= 1.01 * top


def test_routing_and_bad_input():
    laws = _laws(4, 48, 8, 2)  # M = 384 > 256 at d = 2: only the preconditioned route certifies
    heads = init_heads(384, 2, seed=4, q_scale=0.7, b_scale=0.7)
    c = certify_lambda_min(laws, heads)
    assert c.positive and c.kind == "float64-preconditioned" and c.bits == 53
    s = np.linalg.svd(attention_features(laws, heads), compute_uv=False)
    assert s[-1] ** 2 / s[0] ** 2 < 1e-12  # float64 alone would not call it positive
    assert c.lower_bound <= s[-1] ** 2 * (1 + 1e-6)  # the SVD's value, itself accurate to ~1e-7 here
    with pytest.raises(PrecisionError, match="limited to 256"):
        certify_lambda_min(laws, heads, method="arb")
    with pytest.raises(NtkcheckError, match="method must be"):
        certify_lambda_min(laws, heads, method="exact")
    few = certify_lambda_min(_laws(1, 3, 3, 2), init_heads(4, 2))  # H d = 8 < M = 9: rank F < M
    assert few.kind == "inconclusive" and "singular by size" in few.detail
    big = as_laws([np.array([[float(i), 0.5]]) for i in range(MAX_CERTIFY_TOKENS + 1)])
    with pytest.raises(PrecisionError, match=f"below resolution at M = {MAX_CERTIFY_TOKENS + 1}"):
        certify_lambda_min(big, init_heads(4, 2))


def test_certify_positive_falls_back_to_the_preconditioned_route():
    # the float64 Gram route refuses at d = 2, M = 384 (relative lambda_min ~5e-13 is below its
    # radius); with arb=True it hands over to certify_lambda_min, labelled with that route's kind
    from ntkcheck.ntk.certificate.routes import certify_positive

    laws = _laws(4, 48, 8, 2)
    heads = init_heads(384, 2, seed=4, q_scale=0.7, b_scale=0.7)
    alone = certify_positive(laws, heads, arb=False)
    assert not alone.positive and "below resolution at M = 384" in alone.statement
    both = certify_positive(laws, heads)
    assert both.positive and both.method == "float64-preconditioned"
    s = np.linalg.svd(attention_features(laws, heads), compute_uv=False)
    assert both.lower_bound <= s[-1] ** 2 * (1 + 1e-6)
