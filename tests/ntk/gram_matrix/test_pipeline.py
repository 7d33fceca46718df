"""Tests of ntkcheck.ntk.gram_matrix.pipeline: gram() end to end, against the finite-difference NTK of
the attention output, the token-slot assembly and seed 003's claims (permutation invariance,
sharper heads keep an injective case injective), with its certificate on the pass already made.
"""

from __future__ import annotations

import numpy as np
from gram_references import _fd_jacobian_in_V, _laws, _random, _reference_features
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import Empirical
from ntkcheck.ntk.certificate import routes
from ntkcheck.ntk.certificate.routes import (
    certify_lambda_min,
    gram_matrix_arb,
)
from ntkcheck.ntk.gram_matrix import accumulate as accumulate_module
from ntkcheck.ntk.gram_matrix import pipeline
from ntkcheck.ntk.gram_matrix.features import attention_features, init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram
from ntkcheck.ntk.gram_matrix.problem import GramProblem, SampleSize
from ntkcheck.screening import default_head_count
from ntkcheck.strategies import token_sets


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


def _readme_tokens():
    """The README's example with one repeated token: sample 2 has 8 tokens on 7 atoms."""
    X = np.random.default_rng(0).normal(size=(6, 8, 3))
    X[2, 7] = X[2, 0]
    return list(X)


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


def test_certify_reuses_the_pass_and_the_cholesky(monkeypatch):
    """gram(certify=True): one pass over the heads (the accumulation runs once, and F is never
    formed whole) and two Cholesky factorisations in all (the float path's and the verified
    shifted one)."""
    calls = []
    real = accumulate_module.accumulate

    def counted(problem, desc=None):
        calls.append("pass")
        return real(problem, desc)

    def whole(self):
        calls.append("F")
        raise AssertionError("F formed whole")

    for module in (pipeline, routes):  # the pass of the float path, or of the verified Cholesky alone
        monkeypatch.setattr(module, "accumulate", counted)
    monkeypatch.setattr(GramProblem, "features", whole)
    laws = _laws(32, 8, 8, 1)
    r = gram(laws, init_heads(64, 8, seed=1), certify=True)
    assert calls == ["pass"]
    assert r.certified_positive and r.certified.kind == "float64-cholesky"
    assert "2 Cholesky factorisations" in r.certified.detail
    # the bound is below the float lambda_min, and within 0.9 of it (t = 0.9 lambda, tiny radius)
    assert 0.85 * r.lambda_min <= r.certified.lower_bound <= r.lambda_min
