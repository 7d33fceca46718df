"""Tests of ntkcheck.ntk.heads.head_range: the bound L on one head's Gram and the bound L_v along a
direction, against the features of many heads computed from the definition (numpy), at several
scales (large scales push the features to the atoms, where the bounds are nearly attained)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ntkcheck.cgf import as_laws
from ntkcheck.ntk.heads import head_range


def _features(X, masses, Q, b):
    """Rows sqrt(m_a) phi(x_a; Q, b) of one sample, from the definition (numpy)."""
    S = (X @ Q.T + b) @ X.T + np.log(masses)
    P = np.exp(S - logsumexp(S, axis=1, keepdims=True))
    return np.sqrt(masses)[:, None] * (P @ X)


def test_head_bound_dominates_every_head():
    """L >= lambda_max(X_theta) for heads of any scale (features are convex combinations of atoms),
    and L is min(sum_i R_i^2, lambda_max(sum_i Z_i^T Z_i))."""
    rng = np.random.default_rng(1)
    S = [rng.standard_normal((4, 5)) * s for s in (0.5, 1.0, 2.0)]
    laws = as_laws(S)
    L = head_range.head_bound(laws)
    ref = min(sum(np.max(np.sum(X * X, axis=1)) for X in S),
              np.linalg.eigvalsh(sum(X.T @ X for X in S))[-1])
    np.testing.assert_allclose(L, ref, rtol=1e-5)  # the certified value is the estimate plus 1e-6 relative
    for scale in (0.1, 1.0, 30.0):
        for _ in range(20):
            Q, b = rng.standard_normal((5, 5)) * scale, rng.standard_normal(5) * scale
            A = np.vstack([_features(law.atoms, law.masses, Q, b) for law in laws])
            assert np.linalg.eigvalsh(A @ A.T)[-1] <= L


def test_direction_bound_dominates_every_head_and_beats_L():
    """L_v >= v^T X_theta v for heads of any scale along random directions and along the bottom
    eigenvector of a Monte Carlo Gram (where it matters), and L_v < L |v|^2 there: the range along a
    direction is smaller than the worst case over directions (8 samples of 8 tokens, d = 4)."""
    rng = np.random.default_rng(5)
    S = list(rng.standard_normal((8, 8, 4)) / 2.0)
    laws = as_laws(S)
    L = head_range.head_bound(laws)
    heads = [(rng.standard_normal((4, 4)) * s, rng.standard_normal(4) * s) for s in (0.3, 1.0, 3.0, 30.0)
             for _ in range(25)]
    feats = [np.vstack([_features(law.atoms, law.masses, Q, b) for law in laws]) for Q, b in heads]
    G = sum(A @ A.T for A in feats[:50]) / 50
    dirs = [np.linalg.eigh(G)[1][:, 0]] + [rng.standard_normal(64) for _ in range(5)]
    for v in dirs:
        Lv = head_range.direction_bound(laws, v)
        assert max(float(np.sum((A.T @ v) ** 2)) for A in feats) <= Lv
    assert head_range.direction_bound(laws, dirs[0]) < L * float(dirs[0] @ dirs[0])
