"""Tests of ntkcheck.crosscheck: seed 003 Prop. 8 against the NTK Gram (MATH.md section 3 table)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ntkcheck.crosscheck import KERNEL_RTOL, crosscheck, kernel_residual, predicted_kernel_vector
from ntkcheck.decide import decide
from ntkcheck.families import Gaussian
from ntkcheck.gram import init_heads
from ntkcheck.strategies import single_diracs, token_sets, translates, two_point_products

Z, U, V = np.zeros(2), np.array([1.0, 0.25]), np.array([-0.5, 1.0])
E1 = np.array([1.0, 0.0])
_rng = np.random.default_rng(3)
_X = np.array([[0.0, 0.0], [1.0, 0.5], [0.25, 1.0]])

# MATH.md section 3, every row: (samples, weak verdict, overlap, Gram outcome)
TABLE = {
    "product, shared atom 0": ([np.array([Z, U]), np.array([Z, V]), np.array([Z, U, V, U + V])],
                               "dependent", "1 shared atom", "singular"),
    "product, translated apart": ([np.array([Z, U]) + [3, 0.5], np.array([Z, V]) + [-2, 1.5],
                                   np.array([Z, U, V, U + V]) + [0.5, -3]], "dependent", "none", "positive"),
    "translate, disjoint": ([_X, _X + [5.0, 4.0]], "dependent", "none", "positive"),
    "{0,e1,2e1} and translate by e1": ([np.array([Z, E1, 2 * E1]), np.array([E1, 2 * E1, 3 * E1])],
                                       "dependent", "2 shared atoms", "singular"),
    "3 single Diracs, d=2": ([np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([[1.0, 2.0]])],
                             "dependent", "n > d Diracs (sum c_i x_i = 0)", "singular"),
    "3 random samples of 3 tokens": ([_rng.standard_normal((3, 2)) for _ in range(3)],
                                     "independent", "not needed", "positive"),
}


@pytest.mark.parametrize("name", list(TABLE))
def test_math_table_row(name):
    """Every row of the MATH.md section 3 table: verdict, overlap and Gram outcome (H d = 4 M)."""
    S, verdict, overlap, outcome = TABLE[name]
    M = sum(len(X) for X in S)
    res = crosscheck(S, init_heads(2 * M, 2, seed=1))
    assert res.weak.verdict.value == verdict
    assert res.overlap == overlap
    if outcome == "singular":
        assert res.statement == "necessity" and res.agreement == "agrees"
        assert res.kernel_residual <= KERNEL_RTOL
        # the table's 1e-16 .. 2.5e-17: singular to working precision (SVD floor ~1e-26)
        assert res.gram.relative_lambda_min < 1e-20 and not res.gram.positive
    else:
        # the table's 2.6e-4 .. 5e-4 at 4000 heads; with 4M/d heads: well above 1e-12
        assert res.gram.positive and res.gram.relative_lambda_min > 1e-8
        expected = "agrees" if verdict == "independent" else "no prediction"
        assert res.agreement == expected


def test_product_kernel_vector_is_the_documented_one():
    """p_i = c_i d delta_0 / d mu_i: N_i c_i on the atom 0, zero elsewhere (e = any unit vector)."""
    S = TABLE["product, shared atom 0"][0]
    pred = predicted_kernel_vector(S, (1, 1, -1), (0, 0))
    np.testing.assert_array_equal(pred.p, [2, 0, 2, 0, -4, 0, 0, 0])
    assert pred.nu == (((0.0, 0.0), 1),)


def test_kernel_residual_detects_non_kernel_vectors():
    """A vector that is not in the kernel has an O(1) relative residual (the check can fail)."""
    S = TABLE["product, shared atom 0"][0]
    heads = init_heads(16, 2, seed=0)
    assert kernel_residual(S, heads, [2, 0, 2, 0, -4, 0, 0, 0]) < KERNEL_RTOL
    assert kernel_residual(S, heads, [2, 0, 2, 0, 4, 0, 0, 0]) > 1e-3


def test_no_prediction_for_one_shared_atom_when_alpha_nonzero():
    """alpha != 0 needs nu(R^d) = 0, i.e. two shared atoms: one is not enough."""
    S = [np.array([Z, E1]), np.array([E1, 2 * E1])]  # translate by e1, share only e1
    assert predicted_kernel_vector(S, (1, -1), (Fraction(-1), Fraction(0))) is None


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
