r"""Eigenvalue bounds for every symmetric matrix in a ball ``[mid +- rad]`` (entrywise).

Private to :mod:`ntkcheck.convergence.enclosure`. For a symmetric :math:`A` with
:math:`|A - M| \le R` entrywise, Weyl's inequality gives
:math:`\lambda_{\min}(A) \ge \lambda_{\min}(M) - \|R\|_2` and :math:`\lambda_{\max}(A) \le \lambda_{\max}(M) + \|R\|_2`,
with :math:`\|R\|_2 \le \max_i\sum_j R_{ij}` for a symmetric nonnegative ``R``. The symmetric part
:math:`M = \mathrm{fl}((M_0 + M_0^\top)/2)` carries its own rounding into ``R``; :math:`\lambda_{\min}(M)`
is proved by a float64 Cholesky of :math:`M - tI` that completes with Rump's allowance
(:func:`ntkcheck.convergence.coercivity._linear._lam_min_lower`).
"""

from __future__ import annotations

import numpy as np

from ..coercivity._linear import _lam_min_lower
from ._series import U, _up


def _symmetric(mid: np.ndarray, rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric float matrix and a symmetric radius enclosing the symmetric parts of the ball."""
    M = 0.5 * (mid + mid.T)
    R = _up(0.5 * (rad + rad.T) + U * np.abs(M) + U * 0.5 * (np.abs(mid) + np.abs(mid.T)))
    return M, R


def _norm2_up(R: np.ndarray) -> float:
    """An upper bound of the spectral norm of a symmetric nonnegative matrix (its largest row sum)."""
    n = R.shape[0]
    return float(_up(np.array(np.max(R.sum(axis=1))), n))


def lambda_min_lower(mid: np.ndarray, rad: np.ndarray) -> float:
    r"""A proved lower bound of :math:`\lambda_{\min}` of every symmetric matrix in ``[mid +- rad]``."""
    M, R = _symmetric(mid, rad)
    low = _lam_min_lower(M)
    return float(low - _norm2_up(R) * (1.0 + 1e-15)) if np.isfinite(low) else -np.inf


def lambda_max_upper(mid: np.ndarray, rad: np.ndarray) -> float:
    r"""A proved upper bound of :math:`\lambda_{\max}` of every symmetric matrix in ``[mid +- rad]``."""
    return -lambda_min_lower(-mid, rad)
