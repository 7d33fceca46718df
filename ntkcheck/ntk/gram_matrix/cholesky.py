r"""The float64 model and the Gram's Cholesky work array.

Model: IEEE binary64, round to nearest, :math:`u = 2^{-53}`, :math:`\gamma_k = k u / (1 - k u)`; a
dot product of length ``k`` evaluated in any order (BLAS, blocked, with or without FMA) has error
at most :math:`\gamma_k \sum |a_i b_i|` (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., Sec. 3.1). Underflow is covered by absolute allowances (``_TINY``).

:class:`SymmetricWork` holds the accumulated Gram :math:`\hat G` and every Cholesky factor of
:math:`\hat G - tI` in one ``M x M`` array: the float spectrum (:mod:`ntkcheck.ntk.gram_matrix.extremal`)
runs its Lanczos steps on it, and a factorisation that runs to completion proves
:math:`\lambda_{\min}(\hat G) \ge t - s` with Rump's allowance ``s`` (:func:`rump_allowance`), which
the certificate (:mod:`ntkcheck.ntk.certificate`) turns into a bound for the exact Gram. Derived in
``theory/certificates.md`` ("Certified positivity at scale").
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import scipy.linalg as sla
from threadpoolctl import ThreadpoolController

from ... import _budget

__all__ = ["U", "gamma", "serial_blas", "rump_allowance", "SymmetricWork"]

U = 2.0**-53
#: absolute allowance for underflow per computed quantity (far above the subnormal spacing
#: 2^-1074 times the at most ~10^4 operations that feed one entry).
_TINY = 2.0**-1000
#: relative inflation applied to every bound evaluated in floating point (each bound is
#: a short expression of positive terms: its own rounding is below 1e-14 relative).
_SAFE = 1.0 + 1e-10


@contextlib.contextmanager
def serial_blas() -> Iterator[None]:
    """One BLAS thread inside: matrix-vector products and triangular solves are memory-bound, and
    OpenBLAS's threaded level-2 kernels were measured 10-30x slower than one thread when the other
    core is busy (``dsymv`` of order 1024: 36 ms against 1.3 ms), for little gain on an idle one;
    its threaded ``dpotrf`` 10x slower there (order 2048: 1.98 s against 0.19 s), for a gain below
    2x on an idle machine. Process-wide while it lasts (threadpoolctl), like any BLAS thread setting.
    The libraries are looked up once (``threadpool_limits`` scans them on every call: 1.2 ms, against
    0.02 ms for the limit of a kept controller; a Gram enters this context a handful of times)."""
    global _CONTROLLER
    if _CONTROLLER is None:  # numpy and scipy, hence their BLAS, are loaded by now
        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


#: the BLAS libraries of the process, looked up at the first :func:`serial_blas`
_CONTROLLER: ThreadpoolController | None = None


def gamma(k: Any) -> Any:
    """:math:`\\gamma_k = k u / (1 - k u)`, inflated by ``_SAFE`` (``k`` an int or an int array)."""
    if isinstance(k, np.ndarray):
        ku = k.astype(np.float64) * U
        return np.where(ku < 0.5, ku / np.maximum(1.0 - ku, 0.5), np.inf) * _SAFE
    ku = k * U
    if ku >= 0.5:
        return math.inf
    return ku / (1.0 - ku) * _SAFE


def rump_allowance(diag: np.ndarray) -> float:
    r"""``s`` with :math:`\lambda_{\min}(A) > -s` when the float64 Cholesky of ``A`` (diagonal ``diag``)
    runs to completion: :math:`\frac{\gamma_{n+1}}{1-\gamma_{n+1}} \operatorname{tr} A` plus an
    underflow allowance (Demmel's backward error, Higham Thm. 10.3; Rump, BIT 46 (2006))."""
    n = diag.shape[0]
    g = gamma(n + 1)
    alpha = g / (1.0 - g)
    trace = float(np.sum(diag)) * (1.0 + gamma(n))
    under = 4.0 * n * (2.0 * (n + 1) + float(diag.max())) * _TINY
    return (alpha * trace + under) * _SAFE


class SymmetricWork:
    r"""Repeated Cholesky factorisations of :math:`\hat G - tI` in one ``M x M`` array.

    The array ``A`` (Fortran order) arrives with :math:`\hat G` in its lower triangle; the strict
    lower triangle is copied once into the strict upper one and the diagonal saved. LAPACK
    ``dpotrf`` (lower) overwrites only the lower triangle, so :math:`\hat G` is restored from the
    upper copy before each new shift: the Gram, the factor and the copy share ``8 M^2`` bytes.
    In every state :meth:`matvec` multiplies by :math:`\hat G` (the upper copy and the saved
    diagonal) and, after a successful factorisation, :meth:`inverse` by
    :math:`(\hat G - tI)^{-1}`: the Lanczos steps of :mod:`ntkcheck.ntk.gram_matrix.extremal` run on the
    same array.
    """

    def __init__(self, A: np.ndarray, bs: int = 128) -> None:
        if not (A.flags.f_contiguous and A.dtype == np.float64):
            A = np.asfortranarray(A, dtype=np.float64)
        self.A = A
        self.n = A.shape[0]
        self.bs = bs
        self.diag = np.diagonal(A).copy()
        self._copy(lower_to_upper=True)
        self.factored = False
        self.ok = False  # the last factorisation ran to completion: the factor is in the lower triangle
        self.shift = 0.0
        self.factorizations = 0

    def _copy(self, lower_to_upper: bool) -> None:
        """One strict triangle into the other, transposed, tile by tile: a transposed copy reads one
        side with a stride of ``n``, and ``bs x bs`` tiles keep both sides in cache (measured at
        ``n = 4096``: 68 ms with tiles of 128 against 120 ms with strips of 512, the former blocking).
        The diagonal is left to the caller (the saved one, shifted or not)."""
        A, n, b = self.A, self.n, self.bs
        for j0 in range(0, n, b):
            j1 = min(n, j0 + b)
            D = A[j0:j1, j0:j1]
            D[...] = np.tril(D) + np.tril(D, -1).T if lower_to_upper else np.triu(D) + np.triu(D, 1).T
            for i0 in range(j1, n, b):
                i1 = min(n, i0 + b)
                if lower_to_upper:
                    A[j0:j1, i0:i1] = A[i0:i1, j0:j1].T
                else:
                    A[i0:i1, j0:j1] = A[j0:j1, i0:i1].T

    def restore(self) -> None:
        r""":math:`\hat G` back in the lower triangle and on the diagonal (after a factorisation)."""
        if self.factored:
            self._copy(lower_to_upper=False)
            self.A[np.arange(self.n), np.arange(self.n)] = self.diag
            self.factored = self.ok = False

    def factor(self, t: float) -> float | None:
        r"""Cholesky of :math:`\mathrm{fl}(\hat G - tI)` in place; on success return Rump's ``s``
        (:math:`\lambda_{\min}(\hat G) \ge t - s - u \max_i |a_{ii}|`, the shift's rounding included),
        on failure None."""
        if self.factored:
            self._copy(lower_to_upper=False)
        A = self.A
        diag = self.diag - t  # rounded once: |fl(g - t) - (g - t)| <= u |fl(g - t)|
        A[np.arange(self.n), np.arange(self.n)] = diag
        self.factored, self.ok, self.shift = True, False, float(t)
        self.factorizations += 1
        if not np.all(diag > 0):
            return None
        # under a time budget: not started when it would not fit, abandoned at the deadline (ntkcheck._budget)
        # (partial, not a lambda: the budget calls numpy and LAPACK, never back into this module)
        _budget.require(partial(_budget.dense_seconds, self.n**3 / 3, _budget.CHOLESKY), f"a Cholesky of order {self.n}")
        with serial_blas():  # OpenBLAS's threaded dpotrf: 10x slower with the other core busy (see serial_blas)
            c, info = _budget.run(partial(sla.lapack.dpotrf, A, lower=1, clean=0, overwrite_a=1),
                                  f"a Cholesky of order {self.n}")
        if not np.shares_memory(c, A):  # not in place (should not happen for a Fortran float64 array)
            A[...] = np.tril(c) + np.triu(A, 1)
        if info != 0:
            return None
        self.ok = True
        return (rump_allowance(diag) + U * float(diag.max())) * _SAFE

    def matvec(self, v: np.ndarray) -> np.ndarray:
        r""":math:`\hat G v` from the strict upper copy and the saved diagonal (BLAS ``dsymv``, any state)."""
        _budget.checkpoint("Lanczos on the Gram")  # each product of an ARPACK iteration
        v = np.ravel(v)
        y = sla.blas.dsymv(1.0, self.A, v, lower=0)
        y += (self.diag - np.diagonal(self.A)) * v
        return y

    def inverse(self, v: np.ndarray) -> np.ndarray:
        r""":math:`(\hat G - tI)^{-1} v` by two triangular solves with the factor (BLAS ``dtrsv``: measured
        twice as fast here as LAPACK ``dpotrs`` on one vector)."""
        if not self.ok:
            raise np.linalg.LinAlgError("no Cholesky factor: the last factorisation failed or none ran")
        _budget.checkpoint("Lanczos on the inverse of the Gram")
        y = sla.blas.dtrsv(self.A, np.ravel(v), lower=1, trans=0)
        return sla.blas.dtrsv(self.A, y, lower=1, trans=1, overwrite_x=1)

    def abs_norm(self) -> float:
        r"""A bound on :math:`\| |\hat G| \|_2` for a computed Gram :math:`\hat G = \mathrm{fl}(\hat F \hat F^T)`:
        :math:`|\hat g_{ij}| \le (1 + 3\gamma_K) \sqrt{\hat g_{ii} \hat g_{jj}}` (each entry a sum of products
        within :math:`\gamma_K` of the exact one, ``K < 2^32``), so the trace times ``1 + 1e-6``."""
        return float(np.sum(np.abs(self.diag))) * (1.0 + 1e-6) * _SAFE
