r"""Rigorous float64 error bounds for the feature matrix, the Gram product and a Cholesky test.

Private helpers of :func:`ntkcheck.ntk.certificate.certify_positive`; every bound and every
assumption is derived in ``theory/certificates.md`` (section "Certified positivity at
scale"). Model: IEEE binary64, round to nearest, :math:`u = 2^{-53}`,
:math:`\gamma_k = k u / (1 - k u)`; a dot product of length ``k`` evaluated in any order
(BLAS, blocked, with or without FMA) has error at most :math:`\gamma_k \sum |a_i b_i|`
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Sec. 3.1).
Underflow is covered by an absolute allowance per quantity (``_TINY``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.linalg as sla

from ..cgf.empirical import Empirical
from .features import Heads

U = 2.0**-53
#: assumed bound on the relative error of ``np.exp`` on [-400, 400] (2 ulps; numpy's
#: SIMD and libm exp are documented/measured below 1 ulp): tested against Arb.
U_EXP = 4.0 * U
#: a-priori score bound up to which the feature enclosure is valid: every exponential
#: the feature builder evaluates (shifted or not) lies in [e^-400, e^200], a normal float.
SCORE_BOUND = 200.0
#: absolute allowance for underflow per computed quantity (far above the subnormal spacing
#: 2^-1074 times the at most ~10^4 operations that feed one entry).
_TINY = 2.0**-1000
#: relative inflation applied to every bound evaluated in floating point (each bound is
#: a short expression of positive terms: its own rounding is below 1e-14 relative).
_SAFE = 1.0 + 1e-10


def gamma(k: int) -> float:
    """:math:`\\gamma_k = k u / (1 - k u)`, inflated by ``_SAFE``."""
    ku = k * U
    if ku >= 0.5:
        return math.inf
    return ku / (1.0 - ku) * _SAFE


def score_bound(laws: Sequence[Empirical], heads: Heads) -> float:
    r""":math:`B = \max_h (\|Q_h\|_F R + \|b_h\|) R \ge |\langle |Q_h| |x| + |b_h|, |y|\rangle|`, ``R`` the largest token norm."""
    R = max(float(np.max(np.linalg.norm(law.atoms, axis=1))) for law in laws)
    q = np.linalg.norm(heads.Q.reshape(heads.count, -1), axis=1)
    bn = np.linalg.norm(heads.b, axis=1)
    return float(np.max(q * R + bn) * R) * _SAFE


def feature_radius(laws: Sequence[Empirical], heads: Heads) -> tuple[np.ndarray, float]:
    r"""Per-row bound ``e`` with :math:`|\hat F_{rc} - F_{rc}| \le e_r` for every column, and ``rho``.

    :math:`\delta = \gamma_{2d+2} B + 3 u B` bounds the error of each (shifted) score,
    :math:`\rho = \mathrm{expm1}(2\delta + 2(u_{\exp} + 8u + \gamma_N))` the relative error of
    each softmax weight (with the row scale folded in), and
    :math:`e_r = \sqrt{m_r/H}\,X_i\,(\rho + \gamma_N (1 + \rho))` plus the underflow allowance,
    :math:`X_i = \max_{k,c} |x_{ik,c}|`. Requires ``score_bound <= SCORE_BOUND`` (checked by the caller).
    """
    d, H = heads.dim, heads.count
    B = score_bound(laws, heads)
    R = max(float(np.max(np.linalg.norm(law.atoms, axis=1))) for law in laws)
    delta = gamma(2 * d + 2) * B + 3.0 * U * B + (d + 2) * _TINY * (1.0 + R)
    out = []
    rho_max = 0.0
    for law in laws:
        N = law.n_atoms
        gN = gamma(N)
        rho = math.expm1((2.0 * delta + 2.0 * (U_EXP + 8.0 * U + gN)) * _SAFE) * _SAFE
        rho_max = max(rho_max, rho)
        X = float(np.max(np.abs(law.atoms)))
        scale = np.sqrt(law.masses / H) * (1.0 + 4.0 * U)
        out.append(scale * X * (rho + gN * (1.0 + rho)) * _SAFE + (N + 2) * _TINY * (1.0 + X))
    return np.concatenate(out), rho_max


def abs_gram_norm(F: np.ndarray, iters: int = 4) -> float:
    r"""Upper bound on :math:`\rho(|F| |F|^T) \ge \|F\|_2^2` (Collatz-Wielandt with a positive vector).

    For a nonnegative symmetric ``A`` and any ``v > 0``, :math:`\rho(A) \le \max_i (A v)_i / v_i`.
    ``v`` comes from a few power steps (any positive ``v`` is valid); the product of nonnegative
    terms is computed with relative error at most :math:`\gamma_{M + K}`, inflated away.
    """
    A = np.abs(F)
    M, K = A.shape
    v = np.ones(M)
    for _ in range(iters):
        w = A @ (A.T @ v)
        top = float(w.max())
        if not top > 0:
            return 0.0
        v = w / top + 1e-3  # strictly positive, bounded away from 0
    w = A @ (A.T @ v)
    return float(np.max(w / v)) * (1.0 + gamma(M + K + 2)) * _SAFE


def lower_gram(F: np.ndarray) -> np.ndarray:
    """``fl(F F^T)`` by BLAS ``syrk``: lower triangle only, Fortran order."""
    return sla.blas.dsyrk(1.0, np.ascontiguousarray(F).T, trans=1, lower=1)


def cholesky_shift_bound(G_lower: np.ndarray, t: float) -> float | None:
    r"""If the float64 Cholesky of :math:`\mathrm{fl}(G - tI)` succeeds, return ``s`` with
    :math:`\lambda_{\min}(G) \ge t - s`; None when it fails.

    Demmel's backward error of a Cholesky run to completion,
    :math:`\hat R^T \hat R = A + \Delta A`, :math:`|\Delta A| \le \gamma_{n+1} |\hat R^T| |\hat R|`
    (Higham Thm. 10.3), with :math:`\|\hat r_j\|^2 \le a_{jj} / (1 - \gamma_{n+1})`, gives
    :math:`\|\Delta A\|_2 \le \frac{\gamma_{n+1}}{1-\gamma_{n+1}} \operatorname{tr} A`; as
    :math:`\hat R^T \hat R \succ 0`, :math:`\lambda_{\min}(A) > -\|\Delta A\|_2` (Rump, BIT 46 (2006),
    the criterion of his ``isspd``). The diagonal shift is rounded once more:
    :math:`A = G - tI + D`, :math:`|D_{ii}| \le u |a_{ii}|`. Only the lower triangle is read.
    """
    n = G_lower.shape[0]
    A = np.array(G_lower, order="F", copy=True)
    idx = np.arange(n)
    A[idx, idx] -= t
    diag = A[idx, idx].copy()
    if not np.all(diag > 0):
        return None
    _, info = sla.lapack.dpotrf(A, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        return None
    g = gamma(n + 1)
    alpha = g / (1.0 - g)
    trace = float(np.sum(diag)) * (1.0 + gamma(n))
    under = 4.0 * n * (2.0 * (n + 1) + float(diag.max())) * _TINY
    return (alpha * trace + U * float(diag.max()) + under) * _SAFE


def smallest_eig_estimate(G_lower: np.ndarray, iters: int = 12) -> float | None:
    """Float estimate of lambda_min by inverse iteration with a Cholesky (None: not positive in float64)."""
    try:
        c = sla.cho_factor(G_lower, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    v = np.random.default_rng(0).standard_normal(G_lower.shape[0])
    v /= np.linalg.norm(v)
    lam = None
    for _ in range(iters):
        w = sla.cho_solve(c, v, check_finite=False)
        nw = float(np.linalg.norm(w))
        if not (nw > 0 and math.isfinite(nw)):
            return None
        q = float(v @ w)  # v^T G^-1 v <= 1 / lambda_min, increasing to it
        if not q > 0:
            return None
        lam = 1.0 / q
        v = w / nw
    return lam
