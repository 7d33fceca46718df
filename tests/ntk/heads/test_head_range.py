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


def _relaxation_max(laws, v, n=2000, seed=0):
    """A lower estimate of sup |sum_ia c_ia phi_ia|^2 over features chosen independently in the convex hulls
    (the set L_v bounds): for random unit w every phi_ia is the atom maximising sign(c_ia) <z, w>, which
    attains <sum c phi, w> = h(w), the support function; the largest h(w)^2 over the w tried (numpy)."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, laws[0].dim))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    h, off = np.zeros(n), 0
    for law in laws:
        k = law.n_atoms
        c = np.sqrt(law.masses) * v[off:off + k]
        off += k
        P = W @ law.atoms.T
        h += np.sum(np.where(c[None] > 0, c[None] * P.max(1)[:, None], c[None] * P.min(1)[:, None]), axis=1)
    return float(h.max() ** 2)


def test_direction_bound_holds_over_independent_features_and_its_diameter_term_is_needed(monkeypatch):
    """L_v bounds |F^T v|^2 over features chosen independently in each sample's convex hull (not only over
    heads): above the support-function maximum found by search, along 6 directions (8 samples of 8 tokens,
    d = 4), never above the radius-only bound (sum_i ||c_i||_1 r_i, computed here) and below 0.8 of it along
    some direction (the diameter refinement; measured 0.76 to 0.88 here, 0.68 along the bottom direction of
    the benchmark's M = 64, d = 4 row). The mutation "half the diameter" is caught: below the search's value
    along some direction."""
    rng = np.random.default_rng(5)
    laws = as_laws(list(rng.standard_normal((8, 8, 4)) / 2.0))
    dirs = [np.random.default_rng(s).standard_normal(64) for s in range(6)]
    found = [_relaxation_max(laws, v) for v in dirs]
    for v, f in zip(dirs, found):
        assert f <= head_range.direction_bound(laws, v)
    ratios = []
    for v in dirs:
        tot, out, off = np.zeros(4), 0.0, 0
        for law in laws:
            c = np.sqrt(law.masses) * v[off:off + law.n_atoms]
            off += law.n_atoms
            zbar = law.atoms.mean(axis=0)
            tot += c.sum() * zbar
            out += np.abs(c).sum() * np.max(np.linalg.norm(law.atoms - zbar, axis=1))
        ratios.append(head_range.direction_bound(laws, v) / (np.linalg.norm(tot) + out) ** 2)
    assert max(ratios) <= 1.0 + 1e-9 and min(ratios) <= 0.8, ratios
    real = head_range._diameter_up
    monkeypatch.setattr(head_range, "_diameter_up", lambda X: real(X) / 2.0)
    assert any(f > head_range.direction_bound(laws, v) for v, f in zip(dirs, found))
