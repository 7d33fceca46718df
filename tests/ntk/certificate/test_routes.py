"""Tests of the float64 positivity certificate (ntkcheck.ntk.certificate.routes.certify_positive).

Independent references: Arb ball arithmetic (python-flint) for the exponential, the
features and the Gram; exact rationals (fractions) for the hand-assembled singular Gram;
numpy's eigvalsh / cholesky for the float64 quantities the certificate is compared with;
the CGF identity Lambda_3 = Lambda_1 + Lambda_2 (seed 003 Prop. 8) for an exact kernel vector.
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
from ntkcheck.ntk.certificate import rounding as rnd
from ntkcheck.ntk.certificate.routes import (
    _features_arb,
    _gram_arb,
    certify_factored,
    certify_gram_enclosure,
    certify_positive,
)
from ntkcheck.ntk.gram_matrix.extremal import smallest
from ntkcheck.ntk.gram_matrix.features import DEFAULT_CHUNK, attention_features, init_heads


def _laws(seed: int, n: int, N: int, d: int, weighted: bool, scale: float = 1.0) -> list[Empirical]:
    rng = np.random.default_rng(seed)
    X = [rng.standard_normal((N, d)) * (scale / np.sqrt(d)) for _ in range(n)]
    if weighted:  # unequal masses: the softmax is weighted
        return [Empirical(x, [1 + (k % 3) for k in range(N)]) for x in X]
    return as_laws(X)


def _arb_le(x: arb, bound: float) -> bool:
    """True only if every point of the ball ``x`` is <= ``bound`` (rigorous)."""
    return bool(x <= arb(bound))


def _full(G_lower: np.ndarray) -> np.ndarray:
    return np.tril(G_lower) + np.tril(G_lower, -1).T


def test_exp_within_the_assumed_error():
    # The enclosure assumes |np.exp(y) - e^y| <= U_EXP e^y + EXP_ABS on [-800, 201]: every
    # exponential the feature builder evaluates (shifted scores <= 0, unshifted ones within
    # 200 + rounding), subnormal and underflowing results included. Arb at 128 bits is the reference.
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-800.0, 201.0, 3000), rng.uniform(-760.0, -700.0, 1000),
                        rng.uniform(-1.0, 1.0, 1000), [0.0, -745.2, -744.4, -708.4, 201.0]])
    y = np.exp(x)
    assert np.any((y > 0) & (y < 2.0**-1022)) and np.any(y == 0)  # the subnormal range is exercised
    old = ctx.prec
    ctx.prec = 128
    try:
        bad = [xi for xi, yi in zip(x, y)
               if not _arb_le(abs(arb(float(yi)) - arb(float(xi)).exp()) - rnd.U_EXP * arb(float(xi)).exp(), rnd.EXP_ABS)]
    finally:
        ctx.prec = old
    assert bad == []


def _feature_errors_ok(laws, heads) -> tuple[bool, float]:
    """(every |F^ - F| <= e entrywise with F in Arb at 200 bits, the largest ratio error / e)."""
    d = heads.dim
    F = attention_features(laws, heads)
    e = rnd.feature_radius(laws, heads)
    Fa = _features_arb(laws, heads, 200)
    old = ctx.prec
    ctx.prec = 200
    try:
        ok, worst = True, 0.0
        for r in range(F.shape[0]):
            for c in range(F.shape[1]):
                err = abs(arb(float(F[r, c])) - Fa[r, c])
                ok = ok and _arb_le(err, float(e[r, c // d]))
                worst = max(worst, float(err.upper()) / float(e[r, c // d]))
    finally:
        ctx.prec = old
    return ok, worst


@given(seed=st.integers(0, 2**16), d=st.integers(1, 4), N=st.integers(1, 6), H=st.integers(1, 4),
       q=st.sampled_from([0.1, 1.0, 4.0, 30.0]), scale=st.sampled_from([0.3, 1.0, 4.0]), weighted=st.booleans())
def test_feature_radius_encloses_the_arb_features(seed, d, N, H, q, scale, weighted):
    # scores from ~0.01 to ~1e4 (the old a-priori validity limit was 200): shifted and unshifted
    # tiles, underflowing exponentials, unequal masses
    laws = _laws(seed, 2, N, d, weighted, scale)
    heads = init_heads(H, d, q_scale=q, b_scale=q, seed=seed)
    ok, worst = _feature_errors_ok(laws, heads)
    assert ok, worst


def test_feature_radius_where_exponentials_underflow():
    # scores up to ~1e4: the max-shifted exponentials of most atoms underflow to 0 or to
    # subnormals, and the bound must still hold (it is far from tight there: worst ratio ~1e-5)
    laws = _laws(1, 3, 6, 3, True, 10.0)
    heads = init_heads(3, 3, q_scale=10.0, b_scale=10.0, seed=2)
    assert rnd.score_bound(laws, heads).max() > 5000  # the old refusal threshold was 200
    X = laws[0].atoms
    S = (X @ heads.Q[0].T + heads.b[0]) @ X.T
    assert np.min(S - S.max(axis=1, keepdims=True)) < -745  # some exp(shifted score) is exactly 0
    ok, worst = _feature_errors_ok(laws, heads)
    assert ok and worst < 1.0


@pytest.mark.parametrize(("seed", "n", "d", "H"), [(0, 3, 2, 5), (1, 2, 3, 4), (2, 4, 1, 6)])
def test_enclosed_gram_covers_the_arb_gram(monkeypatch, seed, n, d, H):
    # One head per block (the accumulation runs H syrk updates): the proved radius must cover
    # ||fl(G) - G_exact||_F >= ||.||_2 with G_exact in Arb; its product part must cover
    # |fl(G) - F^ F^^T| (F^ the float features, product in Arb); the |F| bound must be >= the
    # Perron root of |F^||F^|^T from eigvalsh.
    monkeypatch.setattr(rnd, "_head_block", lambda M, H, d: 1)
    laws = _laws(seed, n, 4, d, weighted=seed % 2 == 0, scale=2.0)
    heads = init_heads(H, d, q_scale=2.0, b_scale=2.0, seed=seed)
    enc = rnd.enclosed_gram(laws, heads, DEFAULT_CHUNK)
    assert enc.blocks == H and enc.why is None
    G = _full(enc.G)
    Ga = _gram_arb(laws, heads, 160)
    F = attention_features(laws, heads)
    A = np.abs(F) @ np.abs(F).T
    assert np.linalg.eigvalsh(A)[-1] <= enc.abs_norm * (1 + 1e-12)  # eigvalsh error ~1e-16 ||A||
    old = ctx.prec
    ctx.prec = 160
    try:
        M = G.shape[0]
        Fx = arb_mat([[arb(float(v)) for v in row] for row in F])
        P = Fx * Fx.transpose()
        fro = sum(((arb(float(G[i, j])) - Ga[i, j]) ** 2 for i in range(M) for j in range(M)), arb(0)).sqrt()
        prod = max(float(abs(arb(float(G[i, j])) - P[i, j]).upper()) for i in range(M) for j in range(M))
    finally:
        ctx.prec = old
    assert _arb_le(fro, enc.radius), (fro, enc.radius)
    assert prod <= enc.rounding


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


@pytest.mark.parametrize(("seed", "n", "d", "q"),
                         [(0, 4, 2, 1.0), (1, 3, 3, 1.0), (2, 2, 8, 1.0), (5, 6, 2, 1.0), (6, 4, 8, 1.0),
                          (7, 4, 3, 12.0), (8, 3, 2, 25.0)])
def test_small_certificates_hold_against_arb(seed, n, d, q):
    # lower_bound <= lambda_min <= v^T G v / v^T v for the float eigenvector v, G in Arb: the
    # bound must not exceed the exact lambda_min, and must be at least half the float64 one.
    # q = 12, 25: scores in the hundreds and thousands (refused before, a-priori bound > 200).
    laws = _laws(seed, n, 8, d, weighted=seed % 2 == 1, scale=1.0 if q == 1.0 else 3.0)
    heads = init_heads(2 * 8 * n // d, d, q_scale=q, b_scale=q, seed=seed + 10)  # H d = 2 M
    cert = certify_positive(laws, heads, arb=False)
    F = attention_features(laws, heads)
    w, V = np.linalg.eigh(F @ F.T)
    assert cert.positive and cert.method == "float64-cholesky", cert
    assert cert.lower_bound <= _rayleigh_upper(laws, heads, V[:, 0])
    assert cert.lower_bound >= w[0] / 2


def test_d384_large_token_norms_certified():
    # d = 384 with token norms ~3 and N(0, 1) query entries: the a-priori score bound is ~4e3
    # (the old certificate refused above 200); the Gram (relative lambda_min 6e-7) is certified.
    d = 384
    laws = _laws(7, 6, 8, d, weighted=False, scale=3.0)
    heads = init_heads(2, d, seed=3)
    assert rnd.score_bound(laws, heads).max() > 1000
    cert = certify_positive(laws, heads, arb=False)
    F = attention_features(laws, heads)
    w, V = np.linalg.eigh(F @ F.T)
    assert cert.positive, cert
    assert w[0] / 2 <= cert.lower_bound <= _rayleigh_upper(laws, heads, V[:, 0])


def test_M1024_d8_certified_within_half_the_float_lambda_min():
    M, d = 1024, 8
    laws = _laws(0, M // 8, 8, d, weighted=False)
    heads = init_heads(2 * M // d, d, seed=1)
    cert = certify_positive(laws, heads, arb=False)
    F = attention_features(laws, heads)
    lam = np.linalg.eigvalsh(F @ F.T)[0]
    assert cert.positive and cert.M == M, cert
    assert lam / 2 <= cert.lower_bound <= lam * (1 + 1e-6)  # eigvalsh error here ~1e-16 ||G|| << 1e-6 lam
    # one Cholesky for the estimate, one at t = 0.9 lambda: no retries on a well-conditioned Gram
    assert "2 Cholesky factorisations" in cert.statement


def test_symmetric_work_factors_in_place_and_restores():
    # The factor of fl(G) - tI in the shared array equals numpy's Cholesky of a separate copy,
    # and the Gram is restored bit for bit from the upper copy between factorisations.
    rng = np.random.default_rng(0)
    n = 560  # above the block size 512: the blocked triangle copies cross a block edge
    B = rng.standard_normal((n, 2 * n))  # lambda_min ~ (sqrt(2n) - sqrt(n))^2 ~ 120
    G = B @ B.T
    work = rnd.SymmetricWork(np.asfortranarray(np.tril(G)))
    for t in (0.0, 1.0, 0.5):
        s = work.factor(t)
        assert s is not None and s > 0
        L = np.linalg.cholesky(G - t * np.eye(n))
        assert np.allclose(np.tril(work.A), L, rtol=0, atol=1e-9 * np.abs(L).max())  # LAPACK vs LAPACK
        assert np.array_equal(np.triu(work.A, 1), np.triu(G, 1))  # the copy is untouched
    x = work.solve(np.ones(n))
    assert np.allclose((G - 0.5 * np.eye(n)) @ x, np.ones(n), atol=1e-8)
    lam = np.linalg.eigvalsh(G)[0]
    assert work.factor(lam * 1.5) is None  # G - tI indefinite: the factorisation fails
    assert work.factor(0.0) is not None
    assert abs(smallest(work).value - lam) <= 1e-6 * lam
    assert work.factorizations == 5


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
    assert "below resolution at M = 3" in cert.statement and "float64 says positive" in cert.statement


def test_overlap_product_triple_refused_though_float64_positive():
    # mu_1 = {0, u}, mu_2 = {0, v}, mu_3 = {0, u, v, u+v}: Lambda_3 = Lambda_1 + Lambda_2 and the
    # laws share the atom 0, so (seed 003 Prop. 8) the exact Gram has the kernel vector
    # v = (1, 0, 1, 0, -sqrt 2, 0, 0, 0) (rows: atoms of each law in order). Checked in Arb:
    # v^T F contains 0 with a radius < 1e-30. Whatever the rounding makes of fl(G), no seed is
    # certified; for these head seeds float64 sees it positive (Cholesky and eigvalsh succeed on
    # fl(G), a property of this machine's BLAS, checked here) and the statement says so.
    u, w, z = np.array([1.0, 0.5]), np.array([-0.25, 1.0]), np.zeros(2)
    laws = [Empirical(np.array([z, u])), Empirical(np.array([z, w])), Empirical(np.array([z, u, w, u + w]))]
    old = ctx.prec
    ctx.prec = 128
    try:
        Fa = _features_arb(laws, init_heads(16, 2, seed=3), 128)
        va = arb_mat([[arb(1), arb(0), arb(1), arb(0), -arb(2).sqrt(), arb(0), arb(0), arb(0)]])
        r = va * Fa
        assert all(r[0, c].contains(0) and float(r[0, c].rad()) < 1e-30 for c in range(r.ncols()))
    finally:
        ctx.prec = old
    # every seed is refused, whatever float64 makes of fl(G): the statement says what the package's
    # own float64 pass saw (its Cholesky failed, or it succeeded and the proof still refused), never
    # a positive bound. Which seeds float64 sees positive depends on how the BLAS rounds, so that is
    # not asserted here; the branch "float64 says positive, not certified" is exercised on a matrix
    # whose float64 positivity does not depend on rounding (test_says_positive_branch_refuses_...).
    for seed in range(12):
        heads = init_heads(16, 2, seed=seed)
        cert = certify_positive(laws, heads, arb=False)
        assert not cert.positive and cert.method == "refused", (seed, cert)
        assert "below resolution at M = 8" in cert.statement
        if cert.statement.startswith("float64 says positive"):
            assert "may be singular" in cert.statement or "every shifted Cholesky" in cert.statement
        else:
            assert cert.statement.startswith("float64 Cholesky of the Gram fails"), cert.statement


def test_says_positive_branch_refuses_when_the_radius_reaches_lambda():
    """A matrix float64 sees positive (G = [[1, 1], [1, 1]] + 1e-10 I: its Cholesky succeeds on any
    BLAS, lambda_min = 1e-10 is a million times the rounding) with a proved radius 1e-9 that covers
    the exactly singular [[1, 1], [1, 1]]: the certificate must refuse, saying float64 saw it
    positive. A mutation that drops the radius from the criterion certifies it (caught here)."""
    G = np.asfortranarray(np.array([[1.0 + 1e-10, 1.0], [1.0, 1.0 + 1e-10]]))
    work = rnd.SymmetricWork(np.tril(G).copy(order="F"))
    cert = certify_factored(work, 1e-10, 1e-9)
    assert not cert.positive and cert.method == "refused"
    assert cert.statement.startswith("float64 says positive") and "may be singular" in cert.statement
    # the same matrix with a radius far below lambda_min is certified (the branch can say yes)
    work = rnd.SymmetricWork(np.tril(G).copy(order="F"))
    ok = certify_factored(work, 1e-10, 1e-14)
    assert ok.positive and 0 < ok.lower_bound < 1e-10


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


def test_progress_shows_memory(monkeypatch, capsys):
    monkeypatch.setenv("NTKCHECK_PROGRESS_DELAY", "0")
    laws = _laws(0, 8, 8, 8, weighted=False)
    cert = certify_positive(laws, init_heads(16, 8, seed=1), arb=False, progress=True)
    err = capsys.readouterr().err
    assert cert.positive
    assert "certified Gram" in err and "certify: Cholesky" in err and "GB" in err


def test_gram_certify_above_the_arb_limit_uses_the_preconditioned_route():
    # M = 384 > 256 at d = 2, relative lambda_min ~ 5e-13: float64 says "small", the float64 Gram
    # certificate cannot resolve it; the preconditioned route (issue 14, tests/ntk/certificate/test_arb_fast.py)
    # proves it, with a bound below the SVD's lambda_min (accurate to ~1e-7 relative here).
    from ntkcheck.ntk import gram

    rng = np.random.default_rng(4)
    laws = as_laws([rng.standard_normal((8, 2)) / np.sqrt(2) for _ in range(48)])
    r = gram(laws, init_heads(384, 2, seed=4, q_scale=0.7, b_scale=0.7), certify=True)
    assert r.relative_lambda_min < 1e-12 and r.certified_positive
    assert r.certified.kind == "float64-preconditioned"
    assert 0 < r.certified.lower_bound <= r.lambda_min * (1 + 1e-6)
