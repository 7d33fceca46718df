"""Extreme eigenvalues without ``eigvalsh`` (ntkcheck.ntk.gram_matrix.extremal).

References are independent of the code under test: mpmath's ``eigsy`` at 60 digits on the stored
float64 matrix (its exact eigenvalues), numpy's ``eigvalsh``, closed-form spectra built as
``Q diag(lambda) Q^T``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from gram_references import _gram_of, _work

from ntkcheck.ntk.certificate import rounding as rnd
from ntkcheck.ntk.gram_matrix import extremal as ex
from ntkcheck.ntk.gram_matrix.spectrum import _extremal_pairs


def _with_spectrum(lams: np.ndarray, seed: int) -> np.ndarray:
    """A symmetric matrix with eigenvalues ``lams`` (to rounding): Q diag(lams) Q^T, Q orthogonal."""
    n = lams.size
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    G = (Q * lams) @ Q.T
    return (G + G.T) / 2


def _mp_eigenvalues(G: np.ndarray) -> list:
    """Exact eigenvalues of the stored float64 matrix, by mpmath at 60 digits (every double is exact)."""
    with mpmath.workdps(60):
        A = mpmath.matrix([[mpmath.mpf(float(v)) for v in row] for row in G])
        return sorted(mpmath.eigsy(A, eigvals_only=True))


@pytest.mark.parametrize("case", ["random", "clustered", "near-singular"])
def test_lanczos_pairs_bracket_mpmath_eigenvalues(monkeypatch, case):
    """On n = 40 (ARPACK forced: dense_max 0) the smallest and largest Ritz values lie within their
    stated tolerance of an exact eigenvalue of the stored matrix, which is the extreme one; the
    tolerance is the residual bound, so it must also be small: <= 1e-8 lambda_max here."""
    monkeypatch.setattr(ex, "DENSE_MAX", 0)
    n = 40
    rng = np.random.default_rng(7)
    if case == "random":
        G = _gram_of(rng.standard_normal((n, 2 * n)))
    elif case == "clustered":  # five eigenvalues within 1e-9 of each other at the bottom
        lams = np.concatenate([1.0 + 1e-10 * np.arange(5), np.linspace(2.0, 50.0, n - 5)])
        G = _with_spectrum(lams, 3)
    else:  # relative lambda_min 1e-12
        G = _with_spectrum(np.concatenate([[1e-12], np.linspace(0.5, 1.0, n - 1)]), 4)
    work = _work(G)
    pairs = _extremal_pairs(work)
    assert pairs is not None
    small, big = pairs
    ev = _mp_eigenvalues(G)
    # the claim: an eigenvalue of the stored matrix within the tolerance (checked at 60 digits)
    assert min(abs(mpmath.mpf(small.value) - e) for e in ev) <= small.tolerance
    assert min(abs(mpmath.mpf(big.value) - e) for e in ev) <= big.tolerance
    # and it is the extreme one: Lanczos found lambda_min and lambda_max
    assert abs(mpmath.mpf(small.value) - ev[0]) <= small.tolerance
    assert abs(mpmath.mpf(big.value) - ev[-1]) <= big.tolerance
    assert small.tolerance <= 1e-8 * float(ev[-1]) and big.tolerance <= 1e-8 * float(ev[-1])
    if case == "clustered":  # the cluster's spread is 4e-10: the value is in it, the tolerance far below
        assert small.tolerance < 1e-10


def test_cluster_of_smallest_pairs_against_eigvalsh(monkeypatch):
    """smallest_cluster(k) on n = 300 with a cluster of 3 near 1e-6 and a gap: the three values
    against eigvalsh within the stated tolerances (plus eigvalsh's own ~n u lambda_max), ascending."""
    monkeypatch.setattr(ex, "DENSE_MAX", 0)
    lams = np.concatenate([[1e-6, 1.1e-6, 1.3e-6], np.linspace(1e-3, 1.0, 297)])
    G = _with_spectrum(lams, 5)
    work = _work(G)
    assert work.factor(0.0) is not None
    pairs = ex.smallest_cluster(work, 3)
    ev = np.linalg.eigvalsh(G)
    assert [p.value for p in pairs] == sorted(p.value for p in pairs)
    for p, e in zip(pairs, ev[:3]):
        assert abs(p.value - e) <= p.tolerance + 300 * rnd.U * ev[-1]
        assert p.tolerance < 1e-3 * e
