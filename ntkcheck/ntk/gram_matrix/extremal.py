r"""Extreme eigenvalues of the NTK Gram without a full eigendecomposition.

``eigvalsh`` reduces the whole Gram to tridiagonal form (``4 M^3 / 3`` flops, memory-bound: at
``M = 2048`` it was 5-8x the Cholesky here); the reports need :math:`\lambda_{\min}`,
:math:`\lambda_{\max}` and, only near the rounding floor, the smallest eigenpairs. Here, on the
array of a :class:`~ntkcheck.ntk.gram_matrix.cholesky.SymmetricWork` (the Gram and its Cholesky factor in
``8 M^2`` bytes):

* :func:`largest`: Lanczos (ARPACK) on :math:`\hat G`, one ``dsymv`` a step;
* :func:`smallest`: Lanczos on :math:`(\hat G - tI)^{-1}` through the Cholesky factor (two
  triangular solves a step; ``M^3 / 3`` flops for the factor, at level-3 speed), whose largest
  eigenvalue is :math:`1/(\lambda_{\min} - t)`; :func:`smallest_cluster` the ``k`` smallest
  eigenpairs the same way.

**Tolerance.** Each value is the Rayleigh quotient :math:`\theta = v^T \hat G v` of a computed
unit vector ``v``, reported with :math:`\tau \ge \|\hat G v - \theta v\|`: for a symmetric matrix
some eigenvalue lies in :math:`[\theta - \tau, \theta + \tau]` (Weyl / Bauer-Fike), and
:math:`\lambda_{\min} \le \theta \le \lambda_{\max}`. So a smallest pair brackets
:math:`\lambda_{\min}(\hat G) \in [\theta - \tau, \theta]` as soon as the eigenvalue within
:math:`\tau` is the smallest, which Lanczos from a fixed pseudo-random start finds with
probability one (a start orthogonal to its eigenvector has measure zero). :math:`\tau` is the
computed residual plus its rounding, :math:`\gamma_{M+4}(\||\hat G|\|_2 + |\theta|)`
(Higham's bound for the product, any summation order). These are statements about the stored
float64 Gram :math:`\hat G`; its distance to the exact Gram is what the certificate
(:mod:`ntkcheck.ntk.certificate.routes`) bounds.

References: B. N. Parlett, *The Symmetric Eigenvalue Problem* (SIAM, 1998), Thm. 4.5.1 (the
residual bound) and ch. 13 (Lanczos); ARPACK through ``scipy.sparse.linalg.eigsh``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from .cholesky import gamma, serial_blas

#: below this order the eigenpairs come from a dense ``eigh`` of the Gram (cheaper than ARPACK there)
DENSE_MAX = 256
#: ARPACK's relative tolerance on the Ritz values of the operator (G^-1 for lambda_min, G for lambda_max)
LANCZOS_TOL = 1e-10
#: Lanczos basis size (ARPACK's ncv); one restart cycle costs ncv - k operator applications
NCV = 24
#: fixed seed of the Lanczos start vectors: reruns give the same numbers
SEED = 20261130


@dataclass(frozen=True, eq=False)
class RitzPair:
    r"""An approximate eigenpair of the float64 Gram with its tolerance.

    ``value`` is :math:`\theta = v^T \hat G v` (``vector`` ``v`` of unit norm), ``tolerance`` a bound
    :math:`\tau \ge \|\hat G v - \theta v\|_2` with its rounding: an eigenvalue of :math:`\hat G` lies
    in ``[value - tolerance, value + tolerance]``. ``steps``: operator applications (Lanczos steps).
    """

    value: float
    tolerance: float
    vector: np.ndarray
    steps: int

    def __repr__(self) -> str:
        return f"RitzPair({self.value:.10g} +/- {self.tolerance:.2g}, {self.steps} steps)"


def ritz_pair(matvec: Callable[[np.ndarray], np.ndarray], v: np.ndarray, abs_norm: float, steps: int = 0) -> RitzPair:
    r"""The Rayleigh quotient of ``v`` under the symmetric ``matvec`` and its residual bound.

    ``abs_norm`` bounds :math:`\||\hat G|\|_2`; the computed product is within
    :math:`\gamma_n \||\hat G|\|_2` of the exact one, the subtraction and the norm add relative
    :math:`u` terms, and ``v`` is unit to within :math:`\gamma_n`.
    """
    v = np.asarray(v, dtype=np.float64)
    v = v / np.linalg.norm(v)
    n = v.size
    Gv = matvec(v)
    theta = float(v @ Gv)
    with np.errstate(over="ignore"):  # a Gram near the float64 range: an inf residual, a vacuous tolerance
        r = float(np.linalg.norm(Gv - theta * v))
    g = gamma(n + 4)
    tol = (r * (1.0 + g) + g * (abs_norm + abs(theta))) / (1.0 - g) * (1.0 + 1e-10)
    return RitzPair(theta, tol, v, steps)


def _start(n: int, k: int = 0) -> np.ndarray:
    return np.random.default_rng(SEED + k).standard_normal(n)


def _arpack(op: LinearOperator, k: int, tol: float) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The ``k`` largest eigenpairs of ``op`` by ARPACK (values ascending), the steps taken; what
    converged when ARPACK stops early; None when it fails outright."""
    n = op.shape[0]
    count = [0]
    inner = op.matvec

    def mv(x: np.ndarray) -> np.ndarray:
        count[0] += 1
        return inner(x)

    counted = LinearOperator(op.shape, matvec=mv, dtype=np.float64)
    try:
        w, V = eigsh(counted, k=k, which="LA", tol=tol, v0=_start(n), ncv=min(n, max(NCV, 2 * k + 8)))
    except ArpackNoConvergence as exc:
        w, V = exc.eigenvalues, exc.eigenvectors
        if w.size == 0:
            return None
    except ArpackError:
        return None
    order = np.argsort(w)
    return w[order], V[:, order], count[0]


def _dense(work: Any) -> np.ndarray:
    """The Gram, whole and exactly symmetric, from the work array's upper copy and saved diagonal."""
    A = np.triu(work.A, 1)
    A = A + A.T
    A[np.arange(work.n), np.arange(work.n)] = work.diag
    return A


def _inverse_iteration(work: Any, steps: int = 30) -> tuple[np.ndarray, int]:
    """A vector for the smallest eigenvalue by inverse iteration (when ARPACK fails)."""
    v = _start(work.n)
    for _ in range(steps):
        x = work.inverse(v)
        nx = float(np.linalg.norm(x))
        if not (nx > 0 and math.isfinite(nx)):
            break
        v = x / nx
    return v, steps


def smallest(work: Any, *, tol: float = LANCZOS_TOL, dense_max: int = DENSE_MAX) -> RitzPair | None:
    r"""The smallest eigenpair of the Gram of ``work`` (a :class:`~ntkcheck.ntk.gram_matrix.cholesky.SymmetricWork`
    whose last factorisation of :math:`\hat G - tI`, ``t`` below :math:`\lambda_{\min}`, succeeded), or None
    without a factor.

    Lanczos on :math:`(\hat G - tI)^{-1}` (two triangular solves a step); ``M <= dense_max``: a dense
    ``eigh`` instead. The returned value is the Rayleigh quotient on :math:`\hat G` with its tolerance.
    """
    pairs = smallest_cluster(work, 1, tol=tol, dense_max=dense_max)
    return None if not pairs else pairs[0]


def smallest_cluster(work: Any, k: int, *, tol: float = LANCZOS_TOL, dense_max: int = DENSE_MAX) -> list[RitzPair]:
    r"""The ``k`` smallest eigenpairs of the Gram of ``work`` (ascending), by Lanczos on the
    shifted inverse as :func:`smallest`; empty without a factor."""
    if not work.ok:
        return []
    with serial_blas():
        return _smallest_cluster(work, k, tol, dense_max)


def _smallest_cluster(work: Any, k: int, tol: float, dense_max: int) -> list[RitzPair]:
    n = work.n
    k = max(1, min(k, n - 1)) if n > 1 else 1
    norm = work.abs_norm()
    if n <= dense_max:
        w, V = np.linalg.eigh(_dense(work))
        return [ritz_pair(work.matvec, V[:, i], norm, 1) for i in range(min(k, n))]
    op = LinearOperator((n, n), matvec=work.inverse, dtype=np.float64)
    got = _arpack(op, k, tol)
    if got is None:
        v, steps = _inverse_iteration(work)
        return [ritz_pair(work.matvec, v, norm, steps)]
    _, V, steps = got
    # the largest eigenvalues of the inverse are the smallest of the Gram: reverse to ascending
    pairs = [ritz_pair(work.matvec, V[:, i], norm, steps) for i in range(V.shape[1] - 1, -1, -1)]
    return sorted(pairs, key=lambda p: p.value)


def largest(work: Any, *, tol: float = LANCZOS_TOL, dense_max: int = DENSE_MAX) -> RitzPair:
    r"""The largest eigenpair of the Gram of ``work`` by Lanczos on :math:`\hat G` (``dsymv`` on the
    upper copy, any factorisation state); ``M <= dense_max``: a dense ``eigh``."""
    with serial_blas():
        return _largest(work, tol, dense_max)


def _largest(work: Any, tol: float, dense_max: int) -> RitzPair:
    n = work.n
    norm = work.abs_norm()
    if n <= dense_max:
        w, V = np.linalg.eigh(_dense(work))
        return ritz_pair(work.matvec, V[:, -1], norm, 1)
    op = LinearOperator((n, n), matvec=work.matvec, dtype=np.float64)
    got = _arpack(op, 1, tol)
    if got is None:  # power steps: the Perron-like top eigenvalue of a Gram is well separated
        v = _start(n)
        for _ in range(50):
            v = work.matvec(v)
            v /= np.linalg.norm(v)
        return ritz_pair(work.matvec, v, norm, 50)
    _, V, steps = got
    return ritz_pair(work.matvec, V[:, -1], norm, steps)
