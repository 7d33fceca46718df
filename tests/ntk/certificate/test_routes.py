"""Tests of the certificate routes (ntkcheck.ntk.certificate.routes): the verified Cholesky of
``certify_positive`` and ``certify_gram_enclosure``, and the Arb route.

Independent references: Arb ball arithmetic (python-flint) for the features and the Gram; exact
rationals (fractions) for the hand-assembled singular Gram; mpmath at 50 digits for lambda_min of an
exact F F^T; numpy's eigvalsh / cholesky for the float64 quantities the certificate is compared with;
the CGF identity Lambda_3 = Lambda_1 + Lambda_2 (seed 003 Prop. 8) for an exact kernel vector.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from certificate_references import _laws
from flint import arb, arb_mat, ctx

from ntkcheck.cgf import Empirical
from ntkcheck.ntk.certificate import rounding as rnd
from ntkcheck.ntk.certificate import routes
from ntkcheck.ntk.certificate.routes import (
    _features_arb,
    _gram_arb,
    certify_factored,
    certify_gram_enclosure,
    certify_positive,
)
from ntkcheck.ntk.gram_matrix import cholesky
from ntkcheck.ntk.gram_matrix.features import attention_features, init_heads


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


def _exact_gram_lambda_min(F: np.ndarray) -> float:
    """lambda_min of F F^T for the float64 F taken as exact rationals, by mpmath at 50 digits."""
    with mpmath.workdps(50):
        A = mpmath.matrix([[mpmath.mpf(float(v)) for v in row] for row in F])
        return float(min(mpmath.eigsy(A * A.T, eigvals_only=True)))


@pytest.mark.parametrize("singular", [False, True])
def test_enclosure_certificate_below_the_mpmath_lambda_min(singular):
    """certify_gram_enclosure on fl(F F^T) with the gamma_K |F||F|^T radius of the product: the
    bound never exceeds lambda_min of the exact F F^T (mpmath, 50 digits), including an exactly
    singular one (a repeated row), which is refused."""
    rng = np.random.default_rng(11)
    F = rng.standard_normal((24, 30))
    if singular:
        F[5] = F[2]
    G = F @ F.T
    A = np.abs(F)
    radius = rnd.gamma(F.shape[1]) * np.linalg.norm(A @ A.T, 2) * 1.01
    cert = certify_gram_enclosure(G, radius)
    lam = _exact_gram_lambda_min(F)
    if singular:
        assert not cert.positive and abs(lam) < 1e-40
    else:
        assert cert.positive and 0 < cert.lower_bound <= lam


def test_mutation_without_the_cholesky_allowance_is_caught(monkeypatch):
    """Mutation: Rump's allowance dropped (rump_allowance -> 0). The token-slot Gram
    [[1/4, s], [s, 3/4]] (s = fl(sqrt 3 / 4)) is singular in exact arithmetic; float64 sees it
    positive. The true certifier refuses; the mutant proves a positive bound above the exact
    lambda_min = 0, which the soundness check (bound <= exact lambda_min) catches."""
    s = math.sqrt(3.0) / 4.0
    G = np.array([[0.25, s], [s, 0.75]])
    exact_det = Fraction(1, 4) * Fraction(3, 4) - Fraction(3, 16)  # with s exact: 0
    assert exact_det == 0
    radius = rnd.U * s * 1.01  # the one rounding of s
    assert not certify_gram_enclosure(G, radius).positive

    for module in (cholesky, routes):  # the work array's factor() and the shift choice of the route
        monkeypatch.setattr(module, "rump_allowance", lambda diag: 0.0)
        monkeypatch.setattr(module, "U", 0.0)
    mutant = certify_gram_enclosure(G, 0.0)
    exact_lambda_min = 0.0
    assert mutant.positive and not (mutant.lower_bound <= exact_lambda_min)


@pytest.mark.parametrize("prec", [53, 128])
def test_arb_features_of_double_heads_are_those_of_their_rationals(monkeypatch, prec):
    """Heads held as doubles enter the Arb features as exact balls (``arb`` of a double, radius 0),
    not through one ``Fraction`` per entry. Reference: the same heads forced through the rational
    route (``rounded`` planted True: every entry as ``Fraction`` then ``fmpq``); the two feature
    matrices must be equal entry by entry, midpoint and radius (exact inputs at >= 53 bits are
    exact balls either way). Mutation caught: a fast path that rounds the doubles (e.g. to float32)."""
    laws = _laws(5, 2, 3, 4, weighted=True)
    heads = init_heads(3, 4, seed=2)
    fast = _features_arb(laws, heads, prec)
    monkeypatch.setattr(type(heads), "rounded", property(lambda self: True))
    slow = _features_arb(laws, heads, prec)
    assert (fast.nrows(), fast.ncols()) == (slow.nrows(), slow.ncols())
    for i in range(fast.nrows()):
        for j in range(fast.ncols()):
            assert fast[i, j].mid() == slow[i, j].mid() and fast[i, j].rad() == slow[i, j].rad(), (i, j)
