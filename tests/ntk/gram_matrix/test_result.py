"""Tests of ntkcheck.ntk.gram_matrix.result: the GramResult (the kept matrix against the
finite-difference NTK, the kernel basis against the predicted kernel, no truth value).
"""

from __future__ import annotations

import numpy as np
import pytest
from gram_references import _fd_jacobian_in_V, _random

from ntkcheck.ntk.gram_matrix.features import init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram


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


def test_gram_result_has_no_truth_value():
    """bool(GramResult) would be True for a singular Gram: it raises and names .positive."""
    res = gram(_random(n=2, N=2, d=2), 4)
    with pytest.raises(TypeError, match=r"\.positive"):
        bool(res)
