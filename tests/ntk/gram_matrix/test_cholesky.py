"""Tests of ntkcheck.ntk.gram_matrix.cholesky: the work array that holds the Gram and its Cholesky
factors, against numpy on separate copies.
"""

from __future__ import annotations

import numpy as np
from gram_references import _gram_of, _work

from ntkcheck.ntk.gram_matrix.cholesky import SymmetricWork
from ntkcheck.ntk.gram_matrix.extremal import smallest


def test_work_matvec_and_inverse_after_factorisation():
    """The work array multiplies by G (upper copy + saved diagonal) in every state, and inverts
    G - tI through the factor: against numpy on a copy."""
    rng = np.random.default_rng(2)
    G = _gram_of(rng.standard_normal((70, 90)))
    work = _work(G)
    v = rng.standard_normal(70)
    np.testing.assert_allclose(work.matvec(v), G @ v, rtol=1e-12, atol=1e-12 * np.abs(G).max())  # products in another order
    assert work.factor(0.5) is not None
    np.testing.assert_allclose(work.matvec(v), G @ v, rtol=1e-12, atol=1e-12 * np.abs(G).max())
    x = work.inverse(v)
    # backward-stable solve: residual ~ n u ||G|| ||x||
    assert np.linalg.norm((G - 0.5 * np.eye(70)) @ x - v) <= 1e-10 * np.linalg.norm(G, 2) * np.linalg.norm(x)
    work.restore()
    np.testing.assert_array_equal(np.tril(work.A), np.tril(G))


def test_symmetric_work_factors_in_place_and_restores():
    # The factor of fl(G) - tI in the shared array equals numpy's Cholesky of a separate copy,
    # and the Gram is restored bit for bit from the upper copy between factorisations.
    rng = np.random.default_rng(0)
    n = 560  # not a multiple of the tile size 128: the tiled triangle copies cross tile edges
    B = rng.standard_normal((n, 2 * n))  # lambda_min ~ (sqrt(2n) - sqrt(n))^2 ~ 120
    G = B @ B.T
    work = SymmetricWork(np.asfortranarray(np.tril(G)))
    for t in (0.0, 1.0, 0.5):
        s = work.factor(t)
        assert s is not None and s > 0
        L = np.linalg.cholesky(G - t * np.eye(n))
        assert np.allclose(np.tril(work.A), L, rtol=0, atol=1e-9 * np.abs(L).max())  # LAPACK vs LAPACK
        assert np.array_equal(np.triu(work.A, 1), np.triu(G, 1))  # the copy is untouched
    x = work.inverse(np.ones(n))
    assert np.allclose((G - 0.5 * np.eye(n)) @ x, np.ones(n), atol=1e-8)
    lam = np.linalg.eigvalsh(G)[0]
    assert work.factor(lam * 1.5) is None  # G - tI indefinite: the factorisation fails
    assert work.factor(0.0) is not None
    assert abs(smallest(work).value - lam) <= 1e-6 * lam
    assert work.factorizations == 5
