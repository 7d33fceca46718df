"""Tests of ntkcheck.ntk.prop8.prediction: the kernel vector of condition (34) and the residual of
the features on it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from helpers import E1, TABLE, U, V, Z

from ntkcheck.ntk.gram_matrix.features import init_heads
from ntkcheck.ntk.prop8.prediction import KERNEL_RTOL, kernel_residual, predicted_kernel_vector


def test_product_kernel_vector_is_the_documented_one():
    """p_i = c_i d delta_0 / d mu_i: c_i / m_i(0) on the atom 0, zero elsewhere (e = any unit vector)."""
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


def test_repeated_atom_prediction_uses_the_mass():
    """p_i(x) = c_i nu({x}) / mu_i({x}) with mu_i({0}) = 2/5 when 0 is two of five tokens; the
    vector is annihilated (the L^2(mu_i) kernel), and the copies are one entry of p."""
    S = [np.array([Z, U]), np.array([Z, V]), np.array([Z, U, V, U + V, Z])]
    pred = predicted_kernel_vector(S, (1, 1, -1), (0, 0))
    np.testing.assert_allclose(pred.p, [2, 0, 2, 0, -2.5, 0, 0, 0], rtol=1e-15)
    heads = init_heads(16, 2, seed=0)
    # sample 2 is no longer the product law (0 has mass 2/5): p is not in the kernel
    assert kernel_residual(S, heads, pred.p) > 1e-3
    with pytest.raises(Exception, match="distinct atoms"):
        kernel_residual(S, heads, np.ones(9))
