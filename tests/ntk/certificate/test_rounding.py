"""Tests of ntkcheck.ntk.certificate.rounding: the proved radii of the float64 features and of the
Gram accumulated over head blocks, against Arb ball arithmetic (python-flint) for the exponential,
the features and the Gram.
"""

from __future__ import annotations

import numpy as np
import pytest
from certificate_references import _arb_le, _laws
from flint import arb, arb_mat, ctx
from hypothesis import given
from hypothesis import strategies as st

from ntkcheck.ntk.certificate import rounding as rnd
from ntkcheck.ntk.certificate.routes import (
    _features_arb,
    _gram_arb,
)
from ntkcheck.ntk.gram_matrix import accumulate as accumulate_module
from ntkcheck.ntk.gram_matrix.features import DEFAULT_CHUNK, attention_features, init_heads


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
    monkeypatch.setattr(accumulate_module, "_head_block", lambda M, H, d: 1)
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
