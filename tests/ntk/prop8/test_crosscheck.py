"""Tests of ntkcheck.ntk.prop8.crosscheck: seed 003 Prop. 8 against the NTK Gram (the table in theory/ntk-prop8.md)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TABLE, _reference_kernel
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import Empirical, Gaussian, as_laws
from ntkcheck.independence.decision import decide
from ntkcheck.ntk.gram_matrix.features import init_heads
from ntkcheck.ntk.prop8.crosscheck import crosscheck
from ntkcheck.ntk.prop8.prediction import KERNEL_RTOL, kernel_residual, predicted_kernel_vector
from ntkcheck.screening import default_head_count
from ntkcheck.strategies import single_diracs, token_sets, translates, two_point_products


@pytest.mark.parametrize("name", list(TABLE))
def test_math_table_row(name):
    """Every row of the table: verdict, overlap, Gram outcome, the structures by name, and
    the kernel dimension predicted from them equal to the one observed (H d = 4 M), itself
    checked against a reference assembled from the definition."""
    S, verdict, overlap, outcome, named, kernel = TABLE[name]
    M = sum(len(X) for X in S)
    heads = init_heads(2 * M, 2, seed=1)
    res = crosscheck(S, heads)
    assert res.weak.verdict.value == verdict
    assert res.overlap == overlap
    assert res.structure.lines() == named
    assert res.structure.exact and res.structure.predicted_kernel == kernel
    assert res.kernel.observed == kernel == _reference_kernel(as_laws(S), heads)
    assert res.kernel.status == "equal"
    singular = outcome == "singular"
    assert (res.statement == "necessity") == singular
    assert res.agreement == ("agrees" if singular or verdict == "independent" else "no prediction")
    assert (res.kernel_residual is not None and res.kernel_residual <= KERNEL_RTOL) == singular
    # the table's 1e-16 .. 2.5e-17: singular to working precision (SVD floor ~1e-26); its
    # 2.6e-4 .. 5e-4 at 4000 heads: with 4M/d heads, positive rows stay well above 1e-8
    assert (res.gram.relative_lambda_min < 1e-20) == singular
    assert (res.gram.positive and res.gram.relative_lambda_min > 1e-8) == (not singular)


def test_non_compact_family_flagged():
    g = [Gaussian((0, 0), ((1, 0), (0, 1))), Gaussian((1, 0), ((2, 0), (0, 1)))]
    res = crosscheck(g, init_heads(4, 2))
    assert res.agreement == "not applicable" and res.non_compact == (0, 1) and res.gram is None


@settings(max_examples=8)
@given(S=token_sets(n=st.integers(2, 3), sizes=st.integers(2, 4), dim=st.integers(1, 3)), seed=st.integers(0, 2**16))
def test_independent_implies_positive_gram(S, seed):
    """Seed 003 Prop. 8 (sufficiency): compactly supported, weakly independent CGFs and heads
    from a law with an open support => the NTK is injective (Gram positive)."""
    weak = decide(S, property="weak")
    assume(weak.independent)
    d = S[0].shape[1]
    M = sum(len(X) for X in S)
    res = crosscheck(S, init_heads(int(np.ceil(4 * M / d)), d, seed=seed), weak=weak)
    assert res.gram.positive, res
    assert res.agreement == "agrees"


@settings(max_examples=12)
@given(dep=st.one_of(translates(overlap=True), two_point_products(shared_origin=True),
                     single_diracs(more_than_dim=True, dim=st.integers(1, 2))),
       seed=st.integers(0, 2**16))
def test_overlap_predicts_annihilated_kernel_vector(dep, seed):
    """Seed 003 Prop. 8, condition (34): a dependency with overlap gives the kernel vector
    p_i = c_i dnu/dmu_i of G; G[p] must vanish for every head."""
    S = dep.samples
    d = S[0].shape[1]
    M = sum(len(X) for X in S)
    heads = init_heads(int(np.ceil(4 * M / d)), d, seed=seed)
    res = crosscheck(S, heads)
    assert res.statement == "necessity", res
    assert res.kernel_residual <= KERNEL_RTOL
    if dep.kind != "single Diracs":
        pred = predicted_kernel_vector(S, dep.null_vector, dep.alpha)
        assert pred is not None and kernel_residual(S, heads, pred.p) <= KERNEL_RTOL


def test_readme_repeated_token_agrees():
    """The README example with X[2, 7] = X[2, 0]: independent CGFs, the atom Gram positive,
    kernel predicted 0 = observed 0 (before issue 11: relative lambda_min 1.8e-32, 'disagrees')."""
    X = np.random.default_rng(0).normal(size=(6, 8, 3))
    X[2, 7] = X[2, 0]
    heads = init_heads(default_head_count(47, 3), 3)
    res = crosscheck(list(X), heads)
    assert res.agreement == "agrees" and res.gram.positive
    assert res.gram.relative_lambda_min > 1e-5
    assert (res.kernel.predicted, res.kernel.observed, res.kernel.status) == (0, 0, "equal")


def test_duplicated_sample_d64_reports_the_duplicate_and_its_kernel():
    """Sample 12 an exact copy of sample 3 (10 tokens each, d = 64): named, 10 shared atoms
    (not '1 shared atom'), predicted kernel 10 (p_3 = f, p_12 = -f for any f on the 10 atoms)
    = 10 eigenvalues at the floor, also in the reference assembled from the definition."""
    X = np.random.default_rng(7).normal(size=(13, 10, 64))
    X[12] = X[3]
    laws = as_laws(X)
    heads = init_heads(default_head_count(130, 64), 64)
    res = crosscheck(laws, heads)
    assert res.structure.lines() == ["sample 12 is sample 3 (equal laws)"]
    assert res.overlap == "10 shared atoms" and res.agreement == "agrees"
    assert res.kernel.predicted == res.kernel.observed == 10 == _reference_kernel(laws, heads)
    assert res.kernel.exact and res.kernel.status == "equal"
    assert res.kernel.residual <= KERNEL_RTOL
    # the gap that makes the count meaningful: the 11th eigenvalue is far above the floor
    assert res.kernel.next_relative > 1e-6
    d = res.to_dict()
    assert d["structure"]["relations"][0]["kind"] == "duplicate"
    assert d["kernel"]["predicted"] == d["kernel"]["observed"] == 10


_GRID = 2.0**20


def _grid(a):
    """Round to the 2^-20 grid: sums and differences of such numbers below 2^30 are exact."""
    return np.round(np.asarray(a) * _GRID) / _GRID


@st.composite
def structured_samples(draw):
    """Random base samples plus structures built exactly in float64 (2^-20 grid): duplicates,
    translates by generic shifts, translates that share atoms (shift = difference of two
    atoms), two-point products with their factors, single Diracs, and repeated tokens."""
    d = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    samples = [_grid(rng.standard_normal((draw(st.integers(2, 3)), d))) for _ in range(draw(st.integers(1, 2)))]
    ops = draw(st.lists(st.sampled_from(["duplicate", "translate", "shared", "product", "dirac", "repeat"]),
                        min_size=1, max_size=3))
    for op in ops:
        i = draw(st.integers(0, len(samples) - 1))
        X = samples[i]
        if op == "duplicate":
            samples.append(X[rng.permutation(len(X))])
        elif op == "translate":
            samples.append(X + _grid(4 * rng.standard_normal(d)))
        elif op == "shared" and len(np.unique(X, axis=0)) > 1:
            samples.append(X + (X[0] - X[1]))
        elif op == "product":
            A, B = _grid(rng.standard_normal((2, d))), _grid(rng.standard_normal((2, d)))
            samples += [A, B, (A[:, None, :] + B[None, :, :]).reshape(-1, d)]
        elif op == "dirac":
            samples.append(_grid(rng.standard_normal((1, d))))
        elif op == "repeat":
            samples[i] = np.vstack([X, X[:1]])
    return samples


@settings(max_examples=15)
@given(S=structured_samples(), seed=st.integers(0, 2**16))
def test_predicted_kernel_dimension_is_observed(S, seed):
    """theory/ntk-prop8.md, "The dimension of the kernel": for compactly supported laws and
    heads with an open support, dim ker G = sum_z dim D_S(z) - dim((sum_z D_S(z) + D_0)/D_0).
    On generated mixtures of duplicates, translates, products and Diracs the count (when it is
    certified exact) equals the number of eigenvalues at the floor of a reference Gram
    assembled from the definition, and the predicted kernel is annihilated."""
    laws = as_laws(S)
    d = laws[0].dim
    M = sum(law.n_atoms for law in laws)
    heads = init_heads(int(np.ceil(4 * M / d)), d, seed=seed)
    res = crosscheck(laws, heads, certify=False)
    assume(res.structure.exact)  # an inconclusive decide leaves a lower bound: nothing to compare
    assert res.kernel.predicted == _reference_kernel(laws, heads) == res.kernel.observed, res
    # the whole predicted kernel is annihilated (a residual exists exactly when it is non-zero)
    assert (res.kernel.residual is None) == (res.kernel.predicted == 0)
    assert (res.kernel.residual or 0.0) <= KERNEL_RTOL


def test_weighted_laws_accepted_and_not_relabelled():
    """Laws given as Empirical pass through as_laws untouched (no re-validation, same object)."""
    law = Empirical(np.array([[0.0], [1.0]]), [1, 3])
    assert as_laws([law])[0] is law
