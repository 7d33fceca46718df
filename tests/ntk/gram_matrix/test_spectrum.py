"""Tests of ntkcheck.ntk.gram_matrix.spectrum: the route from the accumulated Gram to the reported
spectrum (Cholesky + Lanczos, eigvalsh where the report needs every eigenvalue, the shifted
cluster above the spectrum limit, the SVD of F below eigvalsh's resolution), against eigvalsh and
the SVD on the same Gram.
"""

from __future__ import annotations

import numpy as np
import pytest
from gram_references import _gram_of, _laws, _random, _work

from ntkcheck.ntk.certificate import rounding as rnd
from ntkcheck.ntk.gram_matrix import problem as problem_module
from ntkcheck.ntk.gram_matrix.features import attention_features, init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram
from ntkcheck.ntk.gram_matrix.spectrum import _extremal_eigh, _extremal_pairs


def test_svd_and_eigh_agree_when_well_conditioned():
    S = _random(n=4, N=3, d=2, seed=3)
    heads = init_heads(40, 2, seed=5)
    a = gram(S, heads, method="svd")
    b = gram(S, heads, method="eigh")
    # relative lambda_min ~1e-4: eigvalsh's absolute error ~ M eps lambda_max is 1e-12 relative to it
    np.testing.assert_allclose([a.lambda_min, a.lambda_max], [b.lambda_min, b.lambda_max], rtol=1e-9)
    assert a.status == b.status == "positive"
    assert a.eigenvalues is not None and len(a.eigenvalues) == a.atoms == a.tokens  # no repeats here


def test_extremal_route_matches_eigvalsh():
    """Cholesky + Lanczos (used above M = 4096) against the full eigvalsh on a small Gram."""
    F = attention_features(_random(n=6, N=4, d=3, seed=8), init_heads(30, 3, seed=1))
    G = F @ F.T
    ext = _extremal_eigh(G)
    ev = np.linalg.eigvalsh(G)
    assert ext is not None
    # Lanczos tol 1e-12 on a well-separated extreme eigenvalue
    np.testing.assert_allclose(ext, (ev[0], ev[-1]), rtol=1e-8)
    assert _extremal_eigh(np.zeros((3, 3))) is None  # not positive definite: caller falls back


def test_singular_gram_has_no_extremal_pairs():
    """An exactly singular Gram (a repeated row of F): the Cholesky of fl(G) fails or the Lanczos
    value is within its tolerance of 0; never a clearly positive lambda_min."""
    F = np.random.default_rng(1).standard_normal((30, 60))
    F[7] = F[3]
    G = _gram_of(F)
    pairs = _extremal_pairs(_work(G))
    if pairs is not None:
        assert pairs[0].value <= pairs[0].tolerance + 30 * rnd.U * pairs[1].value


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
    monkeypatch.setattr(problem_module, "MAX_EIGENVALUES", 8)
    laws = _laws(6, 4, 3, 5)
    laws = [*laws, laws[0], laws[1]]
    r = gram(laws, init_heads(60, 3, seed=1), method="eigh")
    assert r.eigenvalues is None and r.method == "cholesky-lanczos"
    assert r.relative_lambda_min < 1e-10 and r.status == "below resolution"
    assert any("sigma" in n for n in r.notes) or r.lambda_min <= r.lambda_min_tolerance


def test_kernel_observed_counts_the_floor():
    """A duplicated sample of m atoms puts m eigenvalues at the rounding floor (SVD route),
    reported with the gap to the next one."""
    rng = np.random.default_rng(1)
    S = [rng.standard_normal((3, 2)) for _ in range(3)]
    S.append(S[1].copy())
    res = gram(S, init_heads(16, 2, seed=0))
    assert res.method == "svd" and res.kernel_observed == 3
    ev = np.asarray(res.eigenvalues) / res.lambda_max
    # exact zeros come out near (eps ||F||)^2; the next eigenvalue is O(1e-4) here
    assert ev[2] <= 1e-26 < 1e-8 < ev[3]
    assert res.next_relative_eigenvalue == pytest.approx(ev[3], rel=1e-12)
