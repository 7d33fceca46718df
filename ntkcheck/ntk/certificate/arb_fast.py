r"""Fast rigorous lower bound on :math:`\lambda_{\min}(F F^T)` when it is far below float64's resolution.

Private helper of :func:`ntkcheck.ntk.certificate.routes.certify_lambda_min` (the route ``_certify``
tries first). The Gram :math:`G = F F^T = W^{1/2} K W^{1/2}` of the NTK at FixUp has, at
``d = 2``, a relative :math:`\lambda_{\min}` of ``1e-13 .. 1e-15`` already at a few thousand
atoms: any enclosure of ``G`` itself in float64 has a radius of order :math:`M u \|G\|`, far
above it. This route works with the *singular values* of ``F`` instead, where every float64
error enters linearly: :math:`\sigma_{\min}(F)/\|F\| \approx 10^{-7}` there, eight digits
above the rounding.

1. :math:`\hat F` (float64, :meth:`GramProblem.features <ntkcheck.ntk.gram_matrix.problem.GramProblem.features>`) with the proved
   radius :math:`\|\hat F - F\|_2 \le \|\hat F - F\|_F \le \varepsilon_F = (\sum_r e2_r)^{1/2}` of
   :func:`ntkcheck.ntk.certificate.rounding.feature_radius_sq` (valid while the proved rounding of the
   scores is at most 1), and :math:`\sigma_{\min}(F) \ge \sigma_{\min}(\hat F) - \varepsilon_F` (Weyl);
2. a preconditioner: a lower-triangular float matrix ``X`` with :math:`X \hat F` nearly
   orthonormal rows (shifted Cholesky-QR rounds, all BLAS-3; *how* ``X`` is found does not
   matter to the proof, only that it is a known float matrix);
3. for any ``X``: if :math:`Y = X\hat F` has :math:`\lambda_{\min}(Y Y^T) \ge \ell > 0`, then ``X``
   is invertible and :math:`\lambda_{\min}(\hat F \hat F^T) \ge \ell / \|X\|_2^2`
   (put :math:`v = X^T w`: :math:`\|\hat F^T v\| = \|Y^T w\| \ge \sqrt{\ell}\,\|w\| \ge \sqrt{\ell}\,\|v\|/\|X\|_2`);
4. :math:`\ell`: :math:`\hat Y = \mathrm{fl}(X \hat F)` with :math:`|\hat Y - Y| \le \gamma_M |X||\hat F|`,
   :math:`\hat C = \mathrm{fl}(\hat Y \hat Y^T)` with :math:`|\hat C - \hat Y\hat Y^T| \le \gamma_K |\hat Y||\hat Y|^T`,
   and Gershgorin on :math:`\hat C - I`; :math:`\|X\|_2^2 \le \lambda_{\max}(\mathrm{fl}(X X^T))` plus
   its rounding, the former proved by a Cholesky of :math:`s I - \mathrm{fl}(X X^T)` with
   Rump's criterion (:func:`_cholesky_ok`).

Then :math:`\lambda_{\min}(G) \ge (\sqrt{\ell}/\|X\|_2 - \varepsilon_F)^2`. Every 2-norm of a
nonnegative product is bounded by a Collatz-Wielandt quotient. It inherits one *tested*
assumption of the float64 feature enclosure (``np.exp`` within 2 ulps); the Arb route
(:func:`ntkcheck.ntk.certificate.routes.gram_matrix_arb`) needs none and stays the fallback for small
problems. Cost: about :math:`8 M^3` flops of BLAS-3 (``K = 2M``), memory three ``M x K``
arrays.

References: seed 003 Prop. 5; ``theory/certificates.md`` (the Gram at ``d = 2``); S. M. Rump,
"Verification of positive definiteness", BIT 46 (2006); Y. Fukaya et al., "Shifted Cholesky
QR for computing the QR factorization of ill-conditioned matrices", SIAM J. Sci. Comput. 42
(2020) (the shift of the first round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla

from ..gram_matrix.cholesky import _SAFE, _TINY, U
from ..gram_matrix.cholesky import gamma as _gamma
from ..gram_matrix.features import Heads
from ..gram_matrix.problem import GramProblem
from .rounding import DELTA_MAX, feature_radius_sq

__all__ = ["FastBound", "preconditioned_bound", "problem_bound", "sigma_min_lower"]

#: entries of the nonnegative matrices in Collatz-Wielandt bounds are raised to at least this:
#: a product of four of them and of v >= 1e-3 stays a normal float (no underflow to account for)
_FLOOR = 2.0**-250
#: preconditioning rounds (each a Cholesky of the current Gram, shifted when it fails)
MAX_ROUNDS = 6
#: Gershgorin radius of fl(Y Y^T) - I below which the rows of Y count as orthonormal
_ETA_STOP = 0.25
#: the route holds ``F``, ``X F`` and one absolute copy (``M x K`` each): at most this many entries
MAX_FEATURE_ENTRIES = 1 << 26


def _abs_gram_norm(A: np.ndarray, iters: int = 4) -> float:
    r"""Upper bound on :math:`\rho(|A||A|^T) \ge \|A\|_2^2` (Collatz-Wielandt: for nonnegative ``B``
    and any ``v > 0``, :math:`\rho(B) \le \max_i (Bv)_i/v_i`; two products of nonnegative terms,
    relative error at most :math:`\gamma_{M+K}`, inflated away)."""
    aA = np.maximum(np.abs(A), _FLOOR)  # entrywise larger: a larger Perron root; no product underflows
    M, K = aA.shape
    v = np.ones(M)
    for _ in range(iters):
        w = aA @ (aA.T @ v)
        top = float(w.max())
        if not top > 0:
            return 0.0
        v = w / top + 1e-3  # strictly positive
    w = aA @ (aA.T @ v)
    return float(np.max(w / v)) * (1.0 + _gamma(M + K + 2)) * _SAFE


def _cholesky_ok(A: np.ndarray) -> float | None:
    r"""If the float64 Cholesky of the symmetric ``A`` (lower triangle, consumed) runs to completion,
    return ``s`` with :math:`\lambda_{\min}(A) > -s`: Demmel's backward error (Higham Thm. 10.3)
    gives :math:`\|\Delta A\|_2 \le \frac{\gamma_{n+1}}{1-\gamma_{n+1}} \operatorname{tr} A` (Rump, BIT 46
    (2006), the criterion of his ``isspd``), plus an underflow allowance. None when it fails."""
    n = A.shape[0]
    diag = np.diagonal(A).copy()
    if not np.all(diag > 0):
        return None
    _, info = sla.lapack.dpotrf(A, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        return None
    g = _gamma(n + 1)
    trace = float(np.sum(diag)) * (1.0 + _gamma(n))
    return (g / (1.0 - g) * trace + 4.0 * n * (2.0 * (n + 1) + float(diag.max())) * _TINY) * _SAFE


@dataclass(frozen=True)
class FastBound:
    r"""Result of :func:`preconditioned_bound` / :func:`sigma_min_lower`.

    ``lower_bound``: :math:`\lambda_{\min}(F F^T) \ge` ``lower_bound`` ``> 0`` in exact
    arithmetic, or None (refused; ``statement`` says why). ``sigma_hat``: the proved lower bound
    on :math:`\sigma_{\min}(\hat F)`, ``eps_F`` the proved :math:`\|\hat F - F\|_2`, ``eta`` the
    proved :math:`\|YY^T - I\|_2` of the preconditioned rows, ``rounds`` the Cholesky rounds.
    """

    lower_bound: float | None
    statement: str
    sigma_hat: float | None
    eps_F: float
    eta: float | None
    rounds: int


def _down(x: float) -> float:
    """A float <= x for a computed x whose own rounding is a few ulps."""
    return float(np.nextafter(x * (1.0 - 8.0 * U), -np.inf))


def _abs_product_norm(X: np.ndarray, F: np.ndarray, iters: int = 4) -> float:
    r"""Upper bound on :math:`\|\,|X|\,|F|\,\|_2` (Collatz-Wielandt on :math:`A A^T`, :math:`A = |X||F|`).

    For nonnegative ``A`` and any ``v > 0``, :math:`\rho(AA^T) \le \max_i (AA^T v)_i / v_i`;
    the four products of nonnegative terms are computed with relative error at most
    :math:`\gamma_{2M + 2K}`, inflated away.
    """
    aX, aF = np.maximum(np.abs(X), _FLOOR), np.maximum(np.abs(F), _FLOOR)
    M, K = aF.shape
    v = np.ones(M)
    w = v
    for _ in range(iters + 1):
        w = aX @ (aF @ (aF.T @ (aX.T @ v)))
        top = float(w.max())
        if not top > 0:
            return 0.0
        if _ < iters:
            v = w / top + 1e-3  # strictly positive
    rho = float(np.max(w / v)) * (1.0 + _gamma(2 * M + 2 * K + 2)) * _SAFE
    return math.sqrt(rho) * _SAFE


def _gershgorin(C_lower: np.ndarray) -> float:
    r"""Upper bound on :math:`\|C - I\|_2` for the symmetric ``C`` stored in its lower triangle:
    the largest row sum of :math:`|C - I|` (sums of nonnegative terms: :math:`\gamma_{M}`;
    :math:`\mathrm{fl}(c_{ii} - 1)`: one rounding)."""
    M = C_lower.shape[0]
    off = np.abs(np.tril(C_lower, -1))
    dev = np.abs(np.diagonal(C_lower) - 1.0) * (1.0 + U)
    rows = dev + off.sum(axis=1) + off.sum(axis=0)
    return (float(rows.max()) * (1.0 + _gamma(M + 2)) + M * _TINY) * _SAFE


def _lambda_max_upper(P_lower: np.ndarray) -> float | None:
    r"""Upper bound on :math:`\lambda_{\max}` of the symmetric ``P`` (lower triangle): a power
    iteration estimate ``q`` (a Rayleigh quotient, so ``q <= lambda_max``), then a Cholesky of
    :math:`\mathrm{fl}(s I - P)`, ``s`` = 1.0001 q, 1.001 q, ..., 10 q: the shift rounds each diagonal entry
    once (:math:`u \max_i a_{ii}`) and :func:`_cholesky_ok` gives :math:`\lambda_{\min}(sI - P) > -s'`,
    so :math:`\lambda_{\max}(P) \le s + s' + u \max_i a_{ii}`."""
    M = P_lower.shape[0]
    Pf = np.tril(P_lower) + np.tril(P_lower, -1).T
    v = np.random.default_rng(0).standard_normal(M)
    q = 0.0
    for _ in range(60):
        w = Pf @ v
        nw = float(np.linalg.norm(w))
        if not (nw > 0 and math.isfinite(nw)):
            return None
        q = float(v @ w) / float(v @ v)
        v = w / nw
    del Pf
    if not (q > 0 and math.isfinite(q)):
        return None
    idx = np.arange(M)
    for f in (1.0001, 1.001, 1.01, 1.1, 2.0, 10.0):
        s = q * f
        A = np.asfortranarray(-np.tril(P_lower))
        A[idx, idx] += s
        top = float(np.max(A[idx, idx]))
        s2 = _cholesky_ok(A)
        if s2 is not None:
            return (s + s2 + U * top) * _SAFE
    return None


def _preconditioner(F: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None, int]:
    r"""Lower-triangular ``X`` with :math:`\mathrm{fl}(X \hat F)` nearly orthonormal rows.

    Round ``k``: :math:`C = \mathrm{fl}(Y Y^T)` (``Y`` = ``F`` at first, then
    :math:`\mathrm{fl}(X F)`); stop when :func:`_gershgorin` of ``C`` is below ``_ETA_STOP``;
    else ``C = L L^T`` (LAPACK ``dpotrf``), shifted by
    :math:`s = 11 (K M + M(M+1)) u \operatorname{tr} C` (then 10 s, ...) when it fails (Fukaya et
    al.), and :math:`X \leftarrow L^{-1} X`. Returns ``(X, Y, C, rounds)``; ``X`` None when no
    round succeeded. ``Y = fl(X F)`` and ``C = fl(Y Y^T)`` are the last computed (the proof uses
    them as they are: nothing here needs to be exact).
    """
    M, K = F.shape
    X: np.ndarray | None = None
    for k in range(MAX_ROUNDS + 1):
        Y = F if X is None else sla.blas.dtrmm(1.0, X, F.T, side=1, lower=1, trans_a=1).T
        C = sla.blas.dsyrk(1.0, Y.T, trans=1, lower=1)
        if X is not None and _gershgorin(C) < _ETA_STOP:
            return X, Y, C, k
        if k == MAX_ROUNDS or not np.all(np.isfinite(C)):
            break
        tr = float(np.sum(np.diagonal(C)))
        if not (tr > 0 and math.isfinite(tr)):
            break
        L, info = sla.lapack.dpotrf(C, lower=1, clean=1)
        s = 11.0 * (K * M + M * (M + 1)) * U * tr
        while info != 0 and s < tr:
            A = np.array(C, order="F", copy=True)
            A[np.diag_indices(M)] += s
            L, info = sla.lapack.dpotrf(A, lower=1, clean=1)
            s *= 10.0
        if info != 0:
            break
        Xk, info = sla.lapack.dtrtri(L, lower=1)
        if info != 0 or not np.all(np.isfinite(Xk)):
            break
        X = Xk if X is None else sla.blas.dtrmm(1.0, Xk, X, side=0, lower=1)
        del Y, C
    return None, None, None, MAX_ROUNDS


def sigma_min_lower(F: np.ndarray, eps_F: float) -> FastBound:
    r"""Rigorous lower bound on :math:`\lambda_{\min}(F_\star F_\star^T)` for every :math:`F_\star`
    with :math:`\|F_\star - F\|_2 \le` ``eps_F`` (``F`` a float64 ``M x K`` matrix, ``M <= K``), or a refusal.

    :math:`\lambda_{\min} \ge (\sqrt{\ell}/\nu^{1/2} - \varepsilon_F)^2` with
    :math:`\ell \le \lambda_{\min}(Y Y^T)`, :math:`Y = XF`, and :math:`\nu \ge \|X\|_2^2` proved as in
    the module docstring.

    Examples
    --------
    >>> b = sigma_min_lower(np.array([[2.0, 0.0], [0.0, 1.0]]), 0.0).lower_bound
    >>> 0.999 < b <= 1.0
    True
    """
    F = np.ascontiguousarray(F, dtype=np.float64)
    M, K = F.shape
    if M > K:
        return FastBound(None, f"F has {M} rows and {K} columns: F F^T is singular by size", None, eps_F, None, 0)
    X, Y, C, rounds = _preconditioner(F)
    if X is None or Y is None or C is None:
        return FastBound(None, f"no preconditioner in {rounds} Cholesky rounds: sigma_min(F) is below float64 "
                               f"resolution (below resolution at M = {M})", None, eps_F, None, rounds)
    eps_Y = _gamma(M) * _abs_product_norm(X, F) + math.sqrt(M * K) * M * _TINY
    nY2 = _abs_gram_norm(Y)  # >= ||Y^||_2^2
    del Y
    eta = (_gershgorin(C) + _gamma(K) * nY2 + M * K * _TINY + 2.0 * eps_Y * math.sqrt(nY2) + eps_Y * eps_Y) * _SAFE
    del C
    if not eta < 1.0:
        return FastBound(None, f"the preconditioned rows are not proved independent (||YY^T - I|| <= {eta:.3g}): "
                               f"below resolution at M = {M}", None, eps_F, eta, rounds)
    P = sla.blas.dsyrk(1.0, X, trans=0, lower=1)  # fl(X X^T)
    nu0 = _lambda_max_upper(P)
    del P
    if nu0 is None:
        return FastBound(None, "no upper bound on ||X||_2 (Cholesky of s I - X X^T failed)", None, eps_F, eta, rounds)
    nu = (nu0 + _gamma(M) * _abs_gram_norm(X) + M * M * _TINY) * _SAFE
    sig = _down(math.sqrt(_down(1.0 - eta) / nu))
    if not (sig > 0 and math.isfinite(sig)):
        return FastBound(None, f"||X||_2 too large ({nu:.3g})", None, eps_F, eta, rounds)
    s = _down(sig - eps_F * _SAFE)
    if not s > 0:
        return FastBound(None, f"sigma_min(F^) >= {sig:.3g} is not above the feature radius {eps_F:.3g}: "
                               f"below resolution at M = {M}", sig, eps_F, eta, rounds)
    lb = _down(s * s)
    return FastBound(lb, f"lambda_min >= {lb:.6g}: sigma_min(F^) >= {sig:.6g} (preconditioned, {rounds} Cholesky "
                         f"rounds, ||YY^T - I|| <= {eta:.2g}), ||F^ - F||_2 <= {eps_F:.3g}", sig, eps_F, eta, rounds)


def preconditioned_bound(samples: Any, heads: Heads) -> FastBound:
    """:func:`problem_bound` of the samples and heads given (validated here)."""
    return problem_bound(GramProblem.of(samples, heads))


def problem_bound(problem: GramProblem) -> FastBound:
    r"""Rigorous lower bound on :math:`\lambda_{\min}(W^{1/2} K W^{1/2})` (on distinct atoms) from the
    float64 features :math:`\hat F` of the validated ``problem`` and their proved radius
    :math:`\|\hat F - F\|_2 \le \|\hat F - F\|_F \le (\sum_r e2_r)^{1/2}`
    (:func:`ntkcheck.ntk.certificate.rounding.feature_radius_sq`), or a refusal (fewer feature columns than
    atoms, a score rounding bound above ``DELTA_MAX``, or below resolution)."""
    M, K = problem.M, problem.K
    if K < M:
        return FastBound(None, f"H d = {K} < M = {M}: the Gram is singular by size", None, 0.0, None, 0)
    if M * K > MAX_FEATURE_ENTRIES:
        return FastBound(None, f"F has {M} x {K} entries, above {MAX_FEATURE_ENTRIES} (three copies are held): "
                               "not attempted", None, 0.0, None, 0)
    e2, _, dmax = feature_radius_sq(problem, problem.heads)
    eps_F = math.sqrt(float(np.sum(e2)) * (1.0 + _gamma(M + 2))) * _SAFE
    if not (dmax <= DELTA_MAX and math.isfinite(eps_F)):
        return FastBound(None, f"the proved rounding of the attention scores reaches {dmax:.3g} (> {DELTA_MAX:g}): "
                               "the float64 enclosure of the features says nothing there", None, eps_F, None, 0)
    return sigma_min_lower(problem.features(), eps_F)
