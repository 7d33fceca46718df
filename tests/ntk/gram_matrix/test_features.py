"""Tests of ntkcheck.ntk.gram_matrix.features: the heads and the tiled attention features, against
the definition (one atom and one head at a time), cgf_gradient and the weighted softmax.
"""

from __future__ import annotations

import numpy as np
import pytest
from gram_references import RTOL_FEATURES, _random, _reference_features
from scipy.special import softmax

from ntkcheck.cgf import Empirical
from ntkcheck.cgf.core import cgf_gradient
from ntkcheck.errors import InputError
from ntkcheck.ntk.gram_matrix import features as features_module
from ntkcheck.ntk.gram_matrix.features import Heads, attention_features, init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram


def test_features_match_cgf_gradient():
    """Each feature block is grad Lambda_i(Q_h x + b_h) (cgf_gradient), scaled by sqrt(1/(N_i H))."""
    S = _random(n=3, N=4, d=3, seed=1)
    heads = init_heads(4, 3, q_scale=2.0, seed=2)
    F = attention_features(S, heads, chunk=7)  # tiny chunk: many blocks
    r = 0
    for X in S:
        for x in X:
            for h in range(heads.count):
                ref = cgf_gradient(X, heads.Q[h] @ x + heads.b[h]) * np.sqrt(1.0 / (len(X) * heads.count))
                np.testing.assert_allclose(F[r, h * 3:(h + 1) * 3], ref, rtol=RTOL_FEATURES, atol=1e-15)
            r += 1


@pytest.mark.parametrize(
    "sizes, d, H, scale, chunk",
    [
        ([3, 5, 3, 5, 2], 3, 7, 1.0, 1 << 17),  # interleaved lengths: the scatter buffer
        ([3, 5, 3, 5, 2], 3, 7, 1.0, 7),  # tiny chunk: one sample and one head per tile
        ([8] * 5, 16, 130, 0.3, 1 << 17),  # more heads than one serial product takes: head sub-tiles
        ([8] * 5, 16, 130, 0.3, 300),
        ([4, 4, 6], 2, 9, 40.0, 1 << 17),  # score bound above 200: the max-shifted path
        ([1, 2], 2, 3, 1.0, 1 << 17),  # a single token: its feature is the token itself
        ([8, 8, 5], 192, 3, 0.1, 1 << 17),  # N (d+1) d > 2^18: one 2-D query product per tile
    ],
)
def test_features_match_reference_loop(sizes, d, H, scale, chunk):
    """The tiled kernel against the per-slot, per-head definition. Compared norm-wise
    per row: an entry that cancels (a mean of tokens of both signs) has a large relative
    error in any float64 evaluation, the row does not."""
    rng = np.random.default_rng(len(sizes) + d + H)
    S = [rng.standard_normal((n, d)) for n in sizes]
    heads = init_heads(H, d, q_scale=scale, b_scale=scale, seed=d)
    F = attention_features(S, heads, chunk=chunk)
    ref = _reference_features(S, heads.Q, heads.b)
    # a few ulps, times the O(|score|) amplification of the rounding of the scores in exp
    # (scores up to ~1e2 at scale 40): 1e-12 of the row norm
    err = np.linalg.norm(F - ref, axis=1) / np.linalg.norm(ref, axis=1)
    assert err.max() <= RTOL_FEATURES, err.max()


def test_features_shifted_and_unshifted_paths_agree(monkeypatch):
    """Skipping the max-shift when the a-priori score bound is below 200 is an exact
    identity: forcing the shift everywhere changes F by rounding only."""
    S = _random(n=4, N=5, d=3, seed=6)
    heads = init_heads(12, 3, q_scale=2.0, seed=3)
    plain = attention_features(S, heads)
    monkeypatch.setattr(features_module, "_EXP_SAFE", -1.0)
    shifted = attention_features(S, heads)
    # exp of a shifted vs unshifted argument: relative rounding ~ |score| eps, scores O(10)
    np.testing.assert_allclose(shifted, plain, rtol=1e-12, atol=1e-14 * np.abs(plain).max())


def test_features_no_overflow_at_huge_scores():
    """Scores of order 1e6: the max-shift keeps every feature finite (the argmax token)."""
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    F = attention_features([X], init_heads(3, 2, q_scale=1e6, b_scale=1e6, seed=0))
    assert np.all(np.isfinite(F))


def _weighted_reference_features(laws, Q, b):
    """F on atoms from the definition, one atom and one head at a time:
    sqrt(m_a / H) * sum_k softmax_k(<Q_h x_a + b_h, x_k> + log m_k) x_k (scipy's softmax
    max-shifts; the masses enter as log-weights, a route the tiled kernel does not take)."""
    H = Q.shape[0]
    rows = []
    for law in laws:
        X, m = law.atoms, law.masses
        for a, x in enumerate(X):
            rows.append(np.concatenate([softmax(X @ (Q[h] @ x + b[h]) + np.log(m)) @ X for h in range(H)])
                        * np.sqrt(m[a] / H))
    return np.array(rows)


@pytest.mark.parametrize(
    "sizes, d, H, scale, chunk",
    [
        ([3, 5, 3, 5, 2], 3, 7, 1.0, 1 << 17),  # interleaved atom counts: the scatter buffer
        ([4, 4, 4], 2, 9, 1.0, 7),  # tiny chunk: one law and one head per tile
        ([4, 4, 6], 2, 9, 40.0, 1 << 17),  # score bound above 200: the max-shifted path
    ],
)
def test_features_with_masses_match_reference(sizes, d, H, scale, chunk):
    """Laws with unequal masses (given weights, and repeats): the tiled kernel against the
    per-atom definition with the masses as log-weights. Laws of equal atom count with equal
    and unequal masses share a group, so both the cancelling and the weighted softmax run.
    Tolerance as in test_features_match_reference_loop (1e-12 of the row norm)."""
    rng = np.random.default_rng(sum(sizes) + d)
    laws = []
    for i, n in enumerate(sizes):
        X = rng.standard_normal((n, d))
        laws.append(Empirical(X, rng.integers(1, 5, n).tolist()) if i % 2 else Empirical(X))
    heads = init_heads(H, d, q_scale=scale, b_scale=scale, seed=d)
    F = attention_features(laws, heads, chunk=chunk)
    ref = _weighted_reference_features(laws, heads.Q, heads.b)
    err = np.linalg.norm(F - ref, axis=1) / np.linalg.norm(ref, axis=1)
    assert err.max() <= RTOL_FEATURES, err.max()


def test_bad_heads():
    with pytest.raises(InputError, match="zero heads"):
        Heads(np.zeros((0, 2, 2)), np.zeros((0, 2)))
    with pytest.raises(InputError, match="shape"):
        Heads(np.zeros((2, 2, 3)), np.zeros((2, 2)))
    with pytest.raises(InputError, match="non-finite"):
        Heads(np.full((1, 2, 2), np.inf), np.zeros((1, 2)))
    with pytest.raises(InputError, match="dimension 3"):
        gram([np.zeros((2, 2))], init_heads(4, 3))
    with pytest.raises(InputError, match="positive integer"):
        init_heads(0, 2)
