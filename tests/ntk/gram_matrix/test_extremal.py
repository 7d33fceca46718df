"""Extreme eigenvalues without ``eigvalsh`` (ntkcheck.ntk.gram_matrix.extremal) and the gram() route built on them.

References are independent of the code under test: mpmath's ``eigsy`` at 60 digits on the stored
float64 matrix (its exact eigenvalues), numpy's ``eigvalsh``, closed-form spectra built as
``Q diag(lambda) Q^T``; the certified route's bound against ``lambda_min`` of the exact Gram
evaluated in mpmath from exact rational features.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from ntkcheck.cgf import as_laws
from ntkcheck.ntk import certify_gram_enclosure, gram, init_heads
from ntkcheck.ntk.certificate import rounding as rnd
from ntkcheck.ntk.gram_matrix import extremal as ex
from ntkcheck.ntk.gram_matrix import pipeline as gram_module
from ntkcheck.ntk.gram_matrix._steps import _extremal_pairs


def _work(G: np.ndarray) -> rnd.SymmetricWork:
    return rnd.SymmetricWork(np.asfortranarray(np.tril(G)))


def _gram_of(F: np.ndarray) -> np.ndarray:
    return F @ F.T


def _with_spectrum(lams: np.ndarray, seed: int) -> np.ndarray:
    """A symmetric matrix with eigenvalues ``lams`` (to rounding): Q diag(lams) Q^T, Q orthogonal."""
    n = lams.size
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    G = (Q * lams) @ Q.T
    return (G + G.T) / 2


def _mp_eigenvalues(G: np.ndarray) -> list:
    """Exact eigenvalues of the stored float64 matrix, by mpmath at 60 digits (every double is exact)."""
    with mpmath.workdps(60):
        A = mpmath.matrix([[mpmath.mpf(float(v)) for v in row] for row in G])
        return sorted(mpmath.eigsy(A, eigvals_only=True))


@pytest.mark.parametrize("case", ["random", "clustered", "near-singular"])
def test_lanczos_pairs_bracket_mpmath_eigenvalues(monkeypatch, case):
    """On n = 40 (ARPACK forced: dense_max 0) the smallest and largest Ritz values lie within their
    stated tolerance of an exact eigenvalue of the stored matrix, which is the extreme one; the
    tolerance is the residual bound, so it must also be small: <= 1e-8 lambda_max here."""
    monkeypatch.setattr(ex, "DENSE_MAX", 0)
    n = 40
    rng = np.random.default_rng(7)
    if case == "random":
        G = _gram_of(rng.standard_normal((n, 2 * n)))
    elif case == "clustered":  # five eigenvalues within 1e-9 of each other at the bottom
        lams = np.concatenate([1.0 + 1e-10 * np.arange(5), np.linspace(2.0, 50.0, n - 5)])
        G = _with_spectrum(lams, 3)
    else:  # relative lambda_min 1e-12
        G = _with_spectrum(np.concatenate([[1e-12], np.linspace(0.5, 1.0, n - 1)]), 4)
    work = _work(G)
    pairs = _extremal_pairs(work)
    assert pairs is not None
    small, big = pairs
    ev = _mp_eigenvalues(G)
    # the claim: an eigenvalue of the stored matrix within the tolerance (checked at 60 digits)
    assert min(abs(mpmath.mpf(small.value) - e) for e in ev) <= small.tolerance
    assert min(abs(mpmath.mpf(big.value) - e) for e in ev) <= big.tolerance
    # and it is the extreme one: Lanczos found lambda_min and lambda_max
    assert abs(mpmath.mpf(small.value) - ev[0]) <= small.tolerance
    assert abs(mpmath.mpf(big.value) - ev[-1]) <= big.tolerance
    assert small.tolerance <= 1e-8 * float(ev[-1]) and big.tolerance <= 1e-8 * float(ev[-1])
    if case == "clustered":  # the cluster's spread is 4e-10: the value is in it, the tolerance far below
        assert small.tolerance < 1e-10


def test_cluster_of_smallest_pairs_against_eigvalsh(monkeypatch):
    """smallest_cluster(k) on n = 300 with a cluster of 3 near 1e-6 and a gap: the three values
    against eigvalsh within the stated tolerances (plus eigvalsh's own ~n u lambda_max), ascending."""
    monkeypatch.setattr(ex, "DENSE_MAX", 0)
    lams = np.concatenate([[1e-6, 1.1e-6, 1.3e-6], np.linspace(1e-3, 1.0, 297)])
    G = _with_spectrum(lams, 5)
    work = _work(G)
    assert work.factor(0.0) is not None
    pairs = ex.smallest_cluster(work, 3)
    ev = np.linalg.eigvalsh(G)
    assert [p.value for p in pairs] == sorted(p.value for p in pairs)
    for p, e in zip(pairs, ev[:3]):
        assert abs(p.value - e) <= p.tolerance + 300 * rnd.U * ev[-1]
        assert p.tolerance < 1e-3 * e


def test_singular_gram_has_no_extremal_pairs():
    """An exactly singular Gram (a repeated row of F): the Cholesky of fl(G) fails or the Lanczos
    value is within its tolerance of 0; never a clearly positive lambda_min."""
    F = np.random.default_rng(1).standard_normal((30, 60))
    F[7] = F[3]
    G = _gram_of(F)
    pairs = _extremal_pairs(_work(G))
    if pairs is not None:
        assert pairs[0].value <= pairs[0].tolerance + 30 * rnd.U * pairs[1].value


def test_work_matvec_and_inverse_after_factorisation():
    """The work array multiplies by G (upper copy + saved diagonal) in every state, and inverts
    G - tI through the factor: against numpy on a copy."""
    rng = np.random.default_rng(2)
    G = _gram_of(rng.standard_normal((70, 90)))
    work = _work(G)
    v = rng.standard_normal(70)
    np.testing.assert_allclose(work.matvec(v), G @ v, rtol=1e-12, atol=1e-12 * np.abs(G).max())  # products in another order
    assert work.factor(0.5) is not None
    np.testing.assert_allclose(work.matvec(v), G @ v, rtol=1e-12, atol=1e-12 * np.abs(G).max())
    x = work.inverse(v)
    # backward-stable solve: residual ~ n u ||G|| ||x||
    assert np.linalg.norm((G - 0.5 * np.eye(70)) @ x - v) <= 1e-10 * np.linalg.norm(G, 2) * np.linalg.norm(x)
    work.restore()
    np.testing.assert_array_equal(np.tril(work.A), np.tril(G))


def _laws(n, N, d, seed):
    rng = np.random.default_rng(seed)
    return as_laws([rng.standard_normal((N, d)) / math.sqrt(d) for _ in range(n)])


def test_gram_extremal_against_the_full_spectrum():
    """gram()'s default route (Cholesky + Lanczos) against spectrum="full" (eigvalsh) on the same
    Gram: within the Lanczos tolerance plus eigvalsh's backward error (M u lambda_max). The
    tolerance is dominated by the worst-case rounding of the residual, ~ M u tr(G): 1e-7 of
    lambda_min here (the two values agree to 1e-12 relative)."""
    laws = _laws(40, 8, 4, 3)
    heads = init_heads(160, 4, seed=2)
    a = gram(laws, heads)
    b = gram(laws, heads, spectrum="full")
    assert a.method == "cholesky-lanczos" and a.eigenvalues is None and b.method == "eigvalsh"
    assert b.eigenvalues is not None and len(b.eigenvalues) == 320
    tol = a.lambda_min_tolerance + 320 * rnd.U * b.lambda_max
    assert abs(a.lambda_min - b.lambda_min) <= tol and a.lambda_min_tolerance < 1e-6 * a.lambda_min
    assert abs(a.lambda_max - b.lambda_max) <= a.lambda_max_tolerance + 320 * rnd.U * b.lambda_max
    assert a.status == b.status == "positive" and a.kernel_observed == b.kernel_observed == 0
    assert a.next_relative_eigenvalue == pytest.approx(b.next_relative_eigenvalue, rel=1e-8)


def test_gram_near_the_floor_computes_the_kernel():
    """A duplicated sample puts lambda_min at the rounding floor: the default route computes every
    eigenvalue there (the kernel is counted) and falls back to the SVD, as spectrum="full" does."""
    laws = _laws(6, 4, 3, 5)
    laws = [*laws, laws[0]]
    heads = init_heads(60, 3, seed=1)
    a = gram(laws, heads)
    assert a.status == "below resolution" and a.method == "svd" and a.eigenvalues is not None
    assert a.kernel_observed == 4  # the 4 atoms of the repeated sample


def test_gram_above_the_spectrum_limit_uses_the_shifted_cluster(monkeypatch):
    """Above MAX_EIGENVALUES (patched to 8) a Gram whose Cholesky fails gets lambda_min from a
    shifted Cholesky and Lanczos, not a full eigvalsh: at the floor, said so in the notes."""
    monkeypatch.setattr(gram_module, "MAX_EIGENVALUES", 8)
    laws = _laws(6, 4, 3, 5)
    laws = [*laws, laws[0], laws[1]]
    r = gram(laws, init_heads(60, 3, seed=1), method="eigh")
    assert r.eigenvalues is None and r.method == "cholesky-lanczos"
    assert r.relative_lambda_min < 1e-10 and r.status == "below resolution"
    assert any("sigma" in n for n in r.notes) or r.lambda_min <= r.lambda_min_tolerance


def test_certify_reuses_the_pass_and_the_cholesky(monkeypatch):
    """gram(certify=True): one pass over the heads (enclosed_gram called once) and two Cholesky
    factorisations in all (the float path's and the verified shifted one)."""
    calls = []
    real = rnd.enclosed_gram

    def counted(*a, **kw):
        calls.append(kw.get("bound"))
        return real(*a, **kw)

    monkeypatch.setattr(rnd, "enclosed_gram", counted)
    laws = _laws(32, 8, 8, 1)
    r = gram(laws, init_heads(64, 8, seed=1), certify=True)
    assert calls == [True]
    assert r.certified_positive and r.certified.kind == "float64-cholesky"
    assert "2 Cholesky factorisations" in r.certified.detail
    # the bound is below the float lambda_min, and within 0.9 of it (t = 0.9 lambda, tiny radius)
    assert 0.85 * r.lambda_min <= r.certified.lower_bound <= r.lambda_min


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

    monkeypatch.setattr(rnd, "rump_allowance", lambda diag: 0.0)
    monkeypatch.setattr(rnd, "U", 0.0)
    mutant = certify_gram_enclosure(G, 0.0)
    exact_lambda_min = 0.0
    assert mutant.positive and not (mutant.lower_bound <= exact_lambda_min)
