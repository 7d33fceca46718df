"""Tests of ntkcheck.ntk.gram_matrix.pipeline: features, the assembled NTK Gram at FixUp, its spectrum and certificate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from scipy.special import softmax

from ntkcheck.cgf import Empirical, as_laws
from ntkcheck.cgf.core import cgf_gradient
from ntkcheck.errors import InputError, NtkcheckWarning
from ntkcheck.ntk.certificate.routes import certify_lambda_min, gram_matrix_arb
from ntkcheck.ntk.gram_matrix import features as features_module
from ntkcheck.ntk.gram_matrix import pipeline as gram_module
from ntkcheck.ntk.gram_matrix.features import Heads, attention_features, init_heads
from ntkcheck.ntk.gram_matrix.pipeline import (
    SampleSize,
    _extremal_eigh,
    _gram_accumulated,
    gram,
)
from ntkcheck.screening import default_head_count
from ntkcheck.strategies import token_sets

# float64 evaluations of the same softmax means by two routes (batched matmul vs
# cgf_gradient): a few ulps times O(1) conditioning.
RTOL_FEATURES = 1e-12


def _random(n=3, N=3, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N + (i % 2), d)) for i in range(n)]


def _attention_output(samples, Q, b, V):
    """Multi-head attention at one layer, written independently of ntkcheck.ntk.gram_matrix.pipeline:
    y_ij = (1/H) sum_h V_h softmax_k(<Q_h x_ij + b_h, x_ik>) x_ik (seed 003 eq. 1)."""
    H = Q.shape[0]
    out = []
    for X in samples:
        for x in X:
            acc = np.zeros(X.shape[1])
            for h in range(H):
                pi = softmax(X @ (Q[h] @ x + b[h]))
                acc += V[h] @ (pi @ X)
            out.append(acc / H)
    return np.concatenate(out)


def _fd_jacobian_in_V(S, heads, step=1e-3):
    """Central differences of the attention output in every V_h entry at V = 0: (M d) x (H d^2)."""
    H, d = heads.count, heads.dim
    M = sum(len(X) for X in S)
    P = H * d * d
    J = np.empty((M * d, P))
    for k in range(P):
        E = np.zeros(P)
        E[k] = step
        J[:, k] = (_attention_output(S, heads.Q, heads.b, E.reshape(H, d, d))
                   - _attention_output(S, heads.Q, heads.b, -E.reshape(H, d, d))) / (2 * step)
    return J


def test_gram_equals_finite_difference_ntk():
    r"""NTK from the Jacobian of the attention output with respect to every V_h at V = 0.

    With the mean-field time scale (d theta_h/ds = -H grad, theory/local-convergence.md) the NTK on
    outputs is Theta = H J J^T, J = d y / d V ((M d) x (H d^2)). Since
    d y_{ij,a} / d V_h[b, c] = delta_ab phi_ij^h[c] / H, Theta = K (x) I_d with
    K = (1/H) sum_h <phi^h, phi^h>, and the NTK Gram of theory/ntk-prop8.md is
    (W^1/2 (x) I_d) Theta (W^1/2 (x) I_d) = (F F^T) (x) I_d.
    """
    S = _random(n=3, N=2, d=2, seed=4)
    heads = init_heads(5, 2, seed=7)
    H, d = heads.count, heads.dim
    J = _fd_jacobian_in_V(S, heads)
    w = np.concatenate([np.full(len(X), 1.0 / len(X)) for X in S])
    Wh = np.kron(np.diag(np.sqrt(w)), np.eye(d))
    ntk = Wh @ (H * J @ J.T) @ Wh
    F = attention_features(S, heads)
    # y is linear in V, so central differences are exact up to rounding: eps |y| / step ~ 1e-13.
    np.testing.assert_allclose(ntk, np.kron(F @ F.T, np.eye(d)), rtol=1e-9, atol=1e-11)
    res = gram(S, heads)
    ev = np.linalg.eigvalsh(ntk)
    np.testing.assert_allclose([res.lambda_min, res.lambda_max], [ev[0], ev[-1]], rtol=1e-8, atol=1e-12)


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


def _reference_features(samples, Q, b):
    """F by the definition, one slot and one head at a time, independent of the tiled
    kernel: F[(i, j), h d:(h+1) d] = sqrt(1/(N_i H)) softmax_k(<Q_h x_ij + b_h, x_ik>) @ X_i
    (scipy's softmax max-shifts)."""
    H = Q.shape[0]
    rows = []
    for X in samples:
        for x in X:
            rows.append(np.concatenate([softmax(X @ (Q[h] @ x + b[h])) @ X for h in range(H)])
                        * np.sqrt(1.0 / (len(X) * H)))
    return np.array(rows)


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


def test_gram_accumulated_matches_formed_gram(monkeypatch):
    """F F^T summed over head blocks by syrk (the route above M = 4096) equals F @ F.T on
    its lower triangle; the upper triangle is never written."""
    monkeypatch.setattr(gram_module, "_GRAM_BLOCK", 1)  # smallest blocks: 128 heads of d = 2
    S = _random(n=12, N=4, d=2, seed=9)
    heads = init_heads(300, 2, seed=4)
    F = attention_features(S, heads)
    G = _gram_accumulated(as_laws(S), heads, 1 << 17, False)
    # sums of the same products in a different order: a few ulps of |G|
    np.testing.assert_allclose(np.tril(G), np.tril(F @ F.T), rtol=0, atol=1e-14 * np.abs(F @ F.T).max())
    assert not np.triu(G, 1).any()
    ext = _extremal_eigh(G)  # reads only the lower triangle
    ev = np.linalg.eigvalsh(F @ F.T)
    assert ext is not None
    np.testing.assert_allclose(ext, (ev[0], ev[-1]), rtol=1e-8)  # Lanczos tol 1e-12


def test_features_no_overflow_at_huge_scores():
    """Scores of order 1e6: the max-shift keeps every feature finite (the argmax token)."""
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    F = attention_features([X], init_heads(3, 2, q_scale=1e6, b_scale=1e6, seed=0))
    assert np.all(np.isfinite(F))


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


def test_singular_product_is_below_resolution_and_not_certified():
    z, u, v = np.zeros(2), np.array([1.0, 0.25]), np.array([-0.5, 1.0])
    S = [np.array([z, u]), np.array([z, v]), np.array([z, u, v, u + v])]
    res = gram(S, init_heads(16, 2, seed=0), certify=True, max_bits=256)
    assert res.status == "below resolution"
    assert not res.positive
    assert res.certified is not None and res.certified.kind == "inconclusive" and res.certified.lower_bound is None


def test_certificate_beyond_float_resolution():
    """Tiny Q, b (nearly uniform attention): relative lambda_min ~1e-13, below what float64
    may call positive; the Arb certificate proves positivity and bounds lambda_min from below."""
    S = _random(n=3, N=3, d=2, seed=3)
    heads = init_heads(18, 2, q_scale=1e-4, b_scale=1e-4, seed=1)
    plain = gram(S, heads)
    assert plain.status != "positive" and plain.relative_lambda_min < 1e-12
    res = gram(S, heads, certify=True)
    assert res.status == "positive" and res.certified.positive
    lb = res.certified.lower_bound
    # a rigorous lower bound: below the SVD's lambda_min (itself accurate to ~1e-6 relative here)
    assert 0 < lb <= res.lambda_min * (1 + 1e-6)
    # 1/||G^-1||_F is within sqrt(M) of lambda_min
    assert lb >= res.lambda_min / np.sqrt(res.atoms) * (1 - 1e-6)


def test_certify_well_conditioned_is_tight():
    S = _random(n=3, N=3, d=2, seed=11)
    heads = init_heads(18, 2, seed=1)
    c = certify_lambda_min(S, heads)
    g = gram(S, heads)
    assert c.positive and c.bits == 128
    assert g.lambda_min / np.sqrt(g.atoms) <= c.lower_bound <= g.lambda_min * (1 + 1e-9)


def test_rank_deficient_by_size_warns():
    S = _random(n=3, N=3, d=2)
    with pytest.warns(NtkcheckWarning, match="singular by rank"):
        res = gram(S, init_heads(2, 2))
    assert res.rank_deficient_by_size and res.status == "singular by size" and not res.positive


@pytest.mark.parametrize(
    "samples, match",
    [
        ([np.zeros((2, 2)), np.zeros((2, 3))], "dimension"),
        ([np.array([[0.0, np.nan]])], "non-finite"),
        ([np.zeros((0, 2))], "empty"),
        ([], "no samples"),
    ],
)
def test_bad_samples(samples, match):
    with pytest.raises(InputError, match=match):
        gram(samples, init_heads(4, 2))


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


@settings(max_examples=10)
@given(S=token_sets(n=st.integers(2, 3), sizes=st.integers(2, 4), dim=st.integers(1, 3)),
       seed=st.integers(0, 2**16), data=st.data())
def test_permutation_invariance(S, seed, data):
    """Seed 003 section 3.1: the NTK depends on the token distributions, not on the order of
    the tokens within a sample nor of the samples; its spectrum must not change."""
    d = S[0].shape[1]
    M = sum(len(X) for X in S)
    heads = init_heads(int(np.ceil(2 * M / d)), d, seed=seed)
    perm_tokens = [X[data.draw(st.permutations(range(len(X))))] for X in S]
    order = data.draw(st.permutations(range(len(S))))
    a = gram(S, heads, method="svd")
    b = gram([perm_tokens[i] for i in order], heads, method="svd")
    # permuting rows of F leaves its singular values invariant up to rounding of the SVD
    np.testing.assert_allclose(b.eigenvalues, a.eigenvalues, rtol=1e-7, atol=1e-13 * a.lambda_max)


@settings(max_examples=8)
@given(S=token_sets(n=st.integers(2, 3), sizes=st.integers(2, 4), dim=st.just(2)),
       s=st.floats(1.5, 4.0), seed=st.integers(0, 2**16))
def test_scaling_heads_keeps_injective_case_nonsingular(S, s, seed):
    """Seed 003 Prop. 8: injectivity holds for any head law whose support contains an open
    set; scaling every Q, b by s > 1 (sharper attention) keeps an injective case injective."""
    M = sum(len(X) for X in S)
    heads = init_heads(2 * M, 2, seed=seed)
    base = gram(S, heads)
    assume(base.status == "positive")  # only injective cases are in scope
    sharp = gram(S, heads.scaled(s), certify=True)
    assert sharp.status == "positive", sharp


def test_overflowing_scores_are_refused():
    """Tokens of norm 1e300: the scores <Q x + b, y> cannot be formed in float64; a clear error, not a LinAlgError."""
    from ntkcheck.errors import InputError as _InputError

    x = [np.full((3, 2), 1e300), np.full((2, 2), -1e300)]
    with pytest.raises(_InputError, match="beyond float64"):
        gram(x, init_heads(4, 2))


# ------------------------------------------------------------------ distinct atoms (issue 11)


def _readme_tokens():
    """The README's example with one repeated token: sample 2 has 8 tokens on 7 atoms."""
    X = np.random.default_rng(0).normal(size=(6, 8, 3))
    X[2, 7] = X[2, 0]
    return list(X)


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


def _slot_to_atom(samples):
    """P (slots x atoms) with P[(i,j),(i,a)] = 1/sqrt(c_ia) when token j of sample i is one of the
    c_ia copies of atom a (atoms in order of first appearance, found by exact row equality)."""
    cols, rows = [], []
    col0 = 0
    for X in samples:
        first: dict[bytes, int] = {}
        idx = [first.setdefault((x + 0.0).tobytes(), len(first)) for x in X]
        counts = np.bincount(idx)
        rows.extend(idx_j + col0 for idx_j in idx)
        cols.append(counts[idx])
        col0 += len(first)
    P = np.zeros((len(rows), col0))
    P[np.arange(len(rows)), rows] = 1.0 / np.sqrt(np.concatenate(cols))
    return P


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


@settings(max_examples=20)
@given(S=token_sets(n=st.integers(1, 3), sizes=st.integers(1, 4), dim=st.integers(1, 3)),
       repeats=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=4),
       seed=st.integers(0, 2**16), data=st.data())
@example(S=[np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]), np.array([[1.0, 1.0], [-1.0, 0.0]])],
         repeats=[(0, 0, 3), (1, 1, 1)], seed=0, data=None)
def test_repeating_tokens_changes_only_the_masses(S, repeats, seed, data):
    r"""Seed 003 section 3: the NTK acts on L^2(mu_i), where copies of a token are one point.

    Exact relation tested, after repeating tokens of random samples (copies shuffled among
    the other tokens): with P the slot -> atom isometry (P[(i,j),(i,a)] = c_ia^{-1/2} when
    token j of sample i is one of the c_ia copies of atom a), the token-slot Gram G_slots
    (weights 1/N_i, assembled independently from the definition one slot and one head at a
    time) and the distinct-atom Gram G_atoms of ntkcheck (masses c_ia / N_i) satisfy

        P^T G_slots P = G_atoms   and   spec(G_slots) = spec(G_atoms) + (M_slots - M_atoms) zeros,

    i.e. repeating tokens changes the spectrum only through the masses, and the only
    eigenvalues the slot assembly adds are the spurious zeros of the copies.
    """
    X = [x.copy() for x in S]
    for i, j, c in repeats:
        i %= len(X)
        j %= len(X[i])
        X[i] = np.vstack([X[i], np.repeat(X[i][j:j + 1], c, axis=0)])
    if data is not None:
        X = [x[data.draw(st.permutations(range(len(x))))] for x in X]
    d = X[0].shape[1]
    M_slots = sum(len(x) for x in X)
    heads = init_heads(int(np.ceil(2 * M_slots / d)), d, seed=seed)
    Fs = _reference_features(X, heads.Q, heads.b)
    Gs = Fs @ Fs.T
    P = _slot_to_atom(X)
    F = attention_features(X, heads)
    Ga = F @ F.T
    assert F.shape[0] == P.shape[1] < M_slots
    # features agree to 1e-12 of their row norm (test_features_match_reference_loop), so
    # inner products of rows, and their combinations by the isometry P, to ~1e-12 of max |G|
    scale = max(np.abs(Gs).max(), 1e-300)
    np.testing.assert_allclose(P.T @ Gs @ P, Ga, rtol=0, atol=1e-11 * scale)
    np.testing.assert_allclose(Gs, P @ Ga @ P.T, rtol=0, atol=1e-11 * scale)
    ev_slots = np.linalg.eigvalsh(Gs)
    res = gram(X, heads, method="svd")
    expected = np.sort(np.concatenate([res.eigenvalues, np.zeros(M_slots - res.atoms)]))
    # Weyl: |delta lambda| <= ||delta G||_2 <= M 1e-11 max|G|; eigvalsh adds ~M eps lambda_max
    np.testing.assert_allclose(ev_slots, expected, rtol=0, atol=1e-10 * max(ev_slots[-1], 1e-300))


def test_readme_repeated_token_gram_is_positive():
    """The README example with X[2, 7] = X[2, 0] at the screen's default heads (H d >= 4 M):
    the slot assembly (independent reference) has one exact zero from the two copies; the
    atom Gram drops exactly that eigenvalue, and its positivity is certified in Arb."""
    X = _readme_tokens()
    heads = init_heads(default_head_count(47, 3), 3)
    res = gram(X, heads, spectrum="full")
    assert (res.atoms, res.tokens) == (47, 48)
    assert res.samples[2] == SampleSize(tokens=8, atoms=7, max_multiplicity=2)
    assert res.samples[0] == SampleSize(tokens=8, atoms=8, max_multiplicity=1)
    assert any("sample 2 (8 tokens on 7 atoms, largest multiplicity 2)" in n for n in res.notes)
    Fs = _reference_features(X, heads.Q, heads.b)
    ev = np.linalg.eigvalsh(Fs @ Fs.T)
    # the spurious zero of the slot assembly: rounding only (~M eps lambda_max)
    assert ev[0] <= 1e-13 * ev[-1]
    # the rest of the slot spectrum is the atom spectrum (Weyl, as in the property test)
    np.testing.assert_allclose(ev[1:], res.eigenvalues, rtol=0, atol=1e-10 * ev[-1])
    assert res.status == "positive" and res.relative_lambda_min > 1e-5
    assert res.kernel_observed == 0
    cert = certify_lambda_min(X, heads)
    # rigorous: 0 < lower bound <= lambda_min (float, itself accurate to ~1e-12 relative here)
    assert cert.positive and 0 < cert.lower_bound <= res.lambda_min * (1 + 1e-9)


def test_arb_gram_uses_the_masses():
    """The Arb Gram (exact rational masses in balls) encloses the float64 Gram on atoms, for
    laws with repeats and given weights: midpoints agree to float rounding (1e-12 of max |G|)
    and every ball is tight (radius below 1e-20 at 128 bits)."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((3, 2))
    laws = [Empirical(np.vstack([X, X[:1]])), Empirical(rng.standard_normal((2, 2)), ["0.25", "0.75"])]
    heads = init_heads(5, 2, seed=2)
    G = gram_matrix_arb(laws, heads, 128)
    mid = np.array([[float(G[r, c].mid()) for c in range(G.ncols())] for r in range(G.nrows())])
    rad = np.array([[float(G[r, c].rad()) for c in range(G.ncols())] for r in range(G.nrows())])
    F = attention_features(laws, heads)
    assert mid.shape == (5, 5)
    np.testing.assert_allclose(mid, F @ F.T, rtol=0, atol=1e-12 * np.abs(mid).max())
    assert rad.max() < 1e-20


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


# ------------------------------------------------------------ the API of issue 13


def test_heads_as_int_are_the_init_heads_screen_draws():
    """gram(samples, H, seed=s) draws init_heads(H, d, seed=s), as screen does: the same
    numbers bit for bit (same heads, same arithmetic)."""
    from ntkcheck.screening import screen

    S = _random(n=3, N=3, d=2, seed=1)
    by_int = gram(S, 9, q_scale=0.5, b_scale=2.0, seed=3)
    by_heads = gram(S, init_heads(9, 2, q_scale=0.5, b_scale=2.0, seed=3))
    assert (by_int.lambda_min, by_int.lambda_max, by_int.heads) == (by_heads.lambda_min, by_heads.lambda_max, 9)
    rep = screen(S, heads=9, q_scale=0.5, b_scale=2.0, seed=3, certify=False)
    assert rep.gram.lambda_min == by_int.lambda_min
    for bad in (0, -2, 2.5, "8", True):
        with pytest.raises(InputError, match="heads"):
            gram(S, bad)


def test_kept_matrix_is_the_finite_difference_ntk():
    """keep_matrix=True returns W^1/2 K W^1/2 itself; reference: the NTK from central
    differences of the attention output in V (written without ntkcheck, see
    test_gram_equals_finite_difference_ntk), one d x d block per pair of tokens."""
    S = _random(n=3, N=2, d=2, seed=4)
    heads = init_heads(5, 2, seed=7)
    H, d = heads.count, heads.dim
    M = sum(len(X) for X in S)
    J = _fd_jacobian_in_V(S, heads)
    w = np.concatenate([np.full(len(X), 1.0 / len(X)) for X in S])
    ntk = np.diag(np.sqrt(w)) @ (H * J[0::d] @ J[0::d].T) @ np.diag(np.sqrt(w))  # output coordinate 0
    res = gram(S, heads, keep_matrix=True)
    assert res.matrix is not None and res.matrix.shape == (M, M)
    # y is linear in V: central differences are exact up to rounding (eps |y| / step ~ 1e-13)
    np.testing.assert_allclose(res.matrix, ntk, rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(res.matrix, res.matrix.T)
    assert res.kernel_vectors is not None and res.kernel_vectors.shape == (M, 0)
    assert gram(S, heads).matrix is None  # not kept unless asked


def test_kernel_vectors_span_the_predicted_kernel():
    """Seed 003 Prop. 8 (necessity): for {0,u}, {0,v}, {0,u,v,u+v} the Gram kernel is the
    vector predicted from the certified CGF identity (ntkcheck.ntk.prop8.structure, computed from
    the null vector c, not from the Gram). The kept kernel basis spans the same line: the
    cosine of the principal angle is 1 up to eps * cond of the eigenproblem (~1e-10)."""
    from ntkcheck.ntk.prop8.structure import dependence_structure

    z, u, v = np.zeros(2), np.array([1.0, 0.25]), np.array([-0.5, 1.0])
    S = [np.array([z, u]), np.array([z, v]), np.array([z, u, v, u + v])]
    res = gram(S, 16, seed=0, keep_matrix=True)
    K = res.kernel_vectors
    assert res.kernel_observed == 1 and K.shape == (8, 1)
    np.testing.assert_allclose(K.T @ K, np.eye(1), atol=1e-12)  # orthonormal: eps-level
    basis = dependence_structure(S).kernel_basis
    assert basis is not None and basis.shape == (8, 1)
    b = basis[:, 0] / np.linalg.norm(basis[:, 0])
    np.testing.assert_allclose(abs(float(b @ K[:, 0])), 1.0, atol=1e-10)
    # and the Gram annihilates it to the rounding floor of the formed matrix (eps * lambda_max)
    assert np.linalg.norm(res.matrix @ K[:, 0]) <= 1e-13 * res.lambda_max


def test_keep_matrix_refused_beyond_the_limit(monkeypatch):
    monkeypatch.setattr(gram_module, "MAX_EIGENVALUES", 4)
    with pytest.raises(InputError, match="keep_matrix"):
        gram(_random(n=3, N=2, d=2), 8, keep_matrix=True)


def test_gram_result_has_no_truth_value():
    """bool(GramResult) would be True for a singular Gram: it raises and names .positive."""
    res = gram(_random(n=2, N=2, d=2), 4)
    with pytest.raises(TypeError, match=r"\.positive"):
        bool(res)
