r"""The lens of a round, chosen from heads that round does not use: a preconditioner ``T``, a
truncation level ``B`` and a direction ``v``.

From a float estimate :math:`\hat K` of :math:`K_\rho` (earlier rounds' heads), with
:math:`\hat K = U \operatorname{diag}(w) U^T`,

* :math:`T = U \operatorname{diag}((w + \varepsilon)^{-1/2}) U^T`, :math:`\varepsilon = w_{\min}/2`:
  :math:`T K_\rho T` is near the identity, so one head's :math:`T X_\theta T` is of order ``M / d``
  against :math:`\lambda_{\min}(T K_\rho T)` of order 1, where :math:`X_\theta` against
  :math:`\lambda_{\min}(K_\rho)` is of order ``L / lambda`` (1e4 to 1e6 on random tokens);
* ``B``: among the quantiles of :math:`\lambda_{\max}(T X_\theta T)` over a calibration block of heads
  drawn for this purpose (never the round's), and :math:`\|T\|^2 L` (nothing truncated), the one
  whose predicted lower bound is largest: truncation lowers the mean along the bottom direction
  (predicted from the calibration heads) and shrinks the range;
* ``v``: the bottom eigenvector of :math:`\hat K` (and, from the calibration heads, the variance of
  :math:`v^T X_\theta v` that sizes the first bet of the upper bound).

Any choice is sound (the bounds hold for every fixed lens); a good one needs far fewer heads.
Derived in ``theory/ntk-head-law.md`` ("Preconditioned and truncated").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...cgf import Empirical
from ..certificate import rounding as rnd
from ..certificate.routes import certify_gram_enclosure
from ..gram_matrix.features import DEFAULT_CHUNK, Heads, _feature_columns, _groups
from .accumulate import Lens, RoundSums, _NoBar
from .head_range import direction_bound
from .tail_bounds import bernstein_lower

#: "auto": the lens predicted to give the larger lower bound; "identity" or "preconditioned" force one
#: (the tests calibrate each)
CHOICE = "auto"
#: quantiles of the calibration heads' lambda_max(T X T) tried as the truncation level
TRUNCATION_QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 1.0)


class Estimate:
    r"""A float estimate :math:`\hat K` of :math:`K_\rho` from the Grams of the rounds so far (undoing each
    round's preconditioner: :math:`T^{-1}\tilde G T^{-1}`, a little low where heads were truncated),
    weighted by their head counts; :meth:`set` replaces a round's contribution as it grows. It only
    chooses lenses: no statement uses it."""

    def __init__(self, M: int) -> None:
        self.M = M
        self._parts: dict[int, tuple[np.ndarray, int]] = {}

    def set(self, j: int, sums: RoundSums, Tinv: np.ndarray | None) -> None:
        if sums.heads_gram == 0 or sums.S is None:
            return
        G = sums.S / float(sums.heads_gram)
        G = np.tril(G) + np.tril(G, -1).T
        if Tinv is not None:
            G = Tinv @ G @ Tinv
        self._parts[j] = (G, sums.heads_gram)

    @property
    def heads(self) -> int:
        return sum(n for _, n in self._parts.values())

    @property
    def K(self) -> np.ndarray:
        n = self.heads
        if n == 0:
            return np.zeros((self.M, self.M))
        return sum((G * (k / n) for G, k in self._parts.values()), np.zeros((self.M, self.M)))


def _norm_bound(T: np.ndarray, top: float) -> float:
    r"""A certified :math:`\tau \ge \|T\|_2` for the exactly symmetric ``T`` whose float eigenvalues
    lie in ``(0, top]``: verified Cholesky factorisations of :math:`\tau I - T` and :math:`\tau I + T`
    (the diagonal's rounding in the radius)."""
    M = T.shape[0]
    for f in (1.0 + 1e-6, 1.01, 1.5):
        tau = top * f
        ok = True
        for sign in (-1.0, 1.0):
            A = sign * T
            A[np.diag_indices(M)] += tau
            if not certify_gram_enclosure(A, rnd.U * tau * 2.0).positive:
                ok = False
                break
        if ok:
            return tau
    return float(np.linalg.norm(T)) * (1.0 + rnd.gamma(M * M + 2))  # Frobenius: always an upper bound


def _abs_norm_bound(T: np.ndarray) -> float:
    r""":math:`\ge \| |T| \|_2 = \rho(|T|)` (Collatz-Wielandt with a positive vector from power steps)."""
    A = np.abs(T)
    y = np.ones(T.shape[0])
    for _ in range(6):
        y = A @ y
        y = y / max(float(y.max()), 1e-300) + 1e-3
    return float(np.max((A @ y) / y)) * (1.0 + rnd.gamma(T.shape[0] + 4))


def _features(laws: Sequence[Empirical], Q: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""Rows :math:`\sqrt{m_{ia}}\,\phi_{ia}` of the heads ``(Q, b)`` side by side (``M x k d``, float)."""
    k, d = Q.shape[0], Q.shape[2]
    F = np.empty((sum(law.n_atoms for law in laws), k * d))
    _feature_columns(_groups(list(laws), 1), Heads(Q, b), 0, k, F, DEFAULT_CHUNK, _NoBar())
    return F


def _calibrate(T: np.ndarray, v: np.ndarray, F: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Float :math:`\lambda_{\max}(T X_\theta T)` and :math:`v^T T X_\theta T v` for the calibration
    heads (features ``F`` of ``k`` heads)."""
    M = T.shape[0]
    C = (T @ F).reshape(M, k, -1)
    S = np.einsum("mki,mkj->kij", C, C)
    y = np.einsum("mki,m->ki", C, v)
    return np.linalg.eigvalsh(S)[:, -1], np.sum(y * y, axis=1)


def choose_range(ell: np.ndarray, y: np.ndarray, cap: float, mu: float, heads: int,
                 t: float) -> tuple[float, float]:
    r"""The truncation level ``B`` with the largest predicted lower bound
    :func:`~ntkcheck.ntk.heads.tail_bounds.bernstein_lower` at ``heads`` heads: the mean ``mu`` along the
    bottom direction scaled by the share of it the truncation keeps on the calibration heads
    (:math:`\sum_h \min(1, B/\ell_h) y_h / \sum_h y_h`); and that predicted bound."""
    cands = sorted({min(float(np.quantile(ell, q)), cap) for q in TRUNCATION_QUANTILES} | {cap})
    total = float(np.sum(y))
    best, arg = -1.0, cap
    for B in cands:
        if not B > 0:
            continue
        kept = float(np.sum(np.minimum(1.0, B / np.maximum(ell, 1e-300)) * y)) / total if total > 0 else 1.0
        val = bernstein_lower(mu * kept, B, heads, t)
        if val > best:
            best, arg = val, B
    return arg, max(best, 0.0)


def make_lens(est: Estimate, laws: Sequence[Empirical], L: float, calib: tuple[np.ndarray, np.ndarray],
              heads: int, t: float) -> tuple[Lens, np.ndarray | None]:
    """The lens of the next round from the estimate ``est`` and a calibration block ``calib`` of heads
    (drawn for it alone), its truncation level chosen for ``heads`` heads at ``t = log(2 / delta_j)``,
    and ``T^{-1}`` (to undo it in the estimate). The identity lens (with the bottom direction when
    there is one) when the estimate is not positive definite."""
    K = (est.K + est.K.T) * 0.5
    w, U = np.linalg.eigh(K)
    v = np.ascontiguousarray(U[:, 0])
    v2 = float(v @ v) * (1.0 - rnd.gamma(v.size + 2))
    Lv = min(L * float(v @ v) * (1.0 + rnd.gamma(v.size + 2)), direction_bound(laws, v))
    k = calib[0].shape[0]
    F = _features(laws, *calib)
    yv = (F.T @ v).reshape(k, -1)
    zvar = float(np.var(np.sum(yv * yv, axis=1)))  # of v^T X v on the calibration heads: sizes the first bet
    if CHOICE == "identity" or not (w[0] > 1e-12 * w[-1] > 0):
        return Lens(None, 1.0, 1.0, L, v, v2, Lv, zvar), None
    eps = 0.5 * float(w[0])
    r = 1.0 / np.sqrt(w + eps)
    T = (U * r) @ U.T
    T = (T + T.T) * 0.5
    Tinv = (U * (1.0 / r)) @ U.T
    tau = _norm_bound(T.copy(), float(r.max()))
    tau2 = tau * tau * (1.0 + 4.0 * rnd.U)
    ell, y = _calibrate(T, v, F, k)
    mu = max(float(w[0] / (w[0] + eps)), 0.0)  # lambda_min(T K^ T)
    B, pred = choose_range(ell, y, tau2 * L, mu, heads, t)
    if CHOICE == "auto" and pred / tau2 <= bernstein_lower(float(w[0]), L, heads, t):
        return Lens(None, 1.0, 1.0, L, v, v2, Lv, zvar), None  # the identity is predicted to do better
    return Lens(T, tau2, _abs_norm_bound(T), B, v, v2, Lv, zvar), Tinv


def predicted_mu(est: Estimate, lens: Lens) -> float:
    r"""A float estimate of :math:`\lambda_{\min}(T K_\rho T)` (of :math:`\lambda_{\min}(K_\rho)` for the
    identity lens), for sizing rounds only."""
    K = (est.K + est.K.T) * 0.5
    if lens.T is not None:
        K = lens.T @ K @ lens.T
    return max(float(np.linalg.eigvalsh(K)[0]), 0.0)


def predicted_form(est: Estimate, lens: Lens) -> float:
    r"""A float estimate of :math:`v^T K_\rho v`, for sizing rounds only."""
    if lens.v is None:
        return math.nan
    return max(float(lens.v @ est.K @ lens.v), 0.0)
