r"""Numerical kernels of :mod:`ntkcheck.limits.chaos_tokens`: the 1-D multi-head attention
field by two routes, the classical RK4 integrator, and the quadratures.

Private. The formulas are documented in :mod:`ntkcheck.limits.chaos_tokens` and in
``theory/limits-chaos-tokens.md``.

**Two routes to one field.** For a weighted measure :math:`\mu = \sum_j w_j\delta_{y_j}` on
the line and a head with score :math:`a\,x y` (``a = Q K / sqrt(d)``, ``d = 1``) and value
``V``, the head's velocity is :math:`V\,\sum_j w_j e^{a x y_j} y_j / \sum_j w_j e^{a x y_j}`.

* ``direct``: the softmax over the atoms with log-weights as offsets, max-shifted
  (:func:`scipy.special.logsumexp`); cost ``P M`` per head for ``P`` points and ``M`` atoms.
* ``series``: :math:`e^{a x y} = \sum_k (a x y)^k / k!`, so the normaliser and the numerator
  are power series in ``x`` whose coefficients are the moments
  :math:`m_k = \sum_j w_j y_j^k`; cost ``(P + M) K``. With :math:`A = |a|\max|x|\max|y|`
  the truncation after ``K`` terms leaves at most :math:`A^{K+1}e^{A}/(K+1)!` in either sum
  while the normaliser is at least :math:`e^{-A}`: ``K`` is the first order with
  :math:`A^{K+1}e^{2A}/(K+1)! \le 10^{-17}`. Rounding: the terms add up to at most
  :math:`e^{A}` in absolute value against a normaliser :math:`\ge e^{-A}`, so the relative
  rounding error is about :math:`e^{2A}` ulps; the series is used for :math:`A \le`
  :data:`SERIES_MAX_A` only (rounding below :math:`10^{-12}`), the direct route beyond.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

#: the series route is used while |a| max|x| max|y| stays below this (e^(2 A) ulps of rounding)
SERIES_MAX_A = 6.0


def series_terms(A: float) -> int:
    """Smallest ``K`` with ``A^(K+1) e^(2A) / (K+1)! <= 1e-17`` (truncation of the exponential series)."""
    K, term = 0, A  # term = A^(K+1) / (K+1)!
    bound = 1e-17 * math.exp(-2.0 * A)
    while term > bound:
        K += 1
        term *= A / (K + 1)
    return K


def field_direct(x: np.ndarray, atoms: np.ndarray, logw: np.ndarray, a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Head-averaged field at ``x`` (B, P) of the measures ``(atoms, exp(logw))`` (B, M): softmax route."""
    out = np.zeros(x.shape)
    for ah, vh in zip(a, v, strict=True):
        s = ah * x[:, :, None] * atoms[:, None, :] + logw[:, None, :]
        p = np.exp(s - logsumexp(s, axis=2, keepdims=True))
        out += vh * np.einsum("bpm,bm->bp", p, atoms)
    return out / len(a)


def field_series(x: np.ndarray, atoms: np.ndarray, w: np.ndarray, a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Head-averaged field at ``x`` (B, P) of the measures ``(atoms, w)`` (B, M): moment-series route."""
    A = float(np.max(np.abs(a))) * float(np.max(np.abs(x))) * float(np.max(np.abs(atoms)))
    K = series_terms(A)
    moments = np.empty(atoms.shape[:-1] + (K + 2,))
    power = w.copy()
    for k in range(K + 2):
        moments[:, k] = power.sum(axis=1)
        power = power * atoms
    inv_fact = np.array([1.0 / math.factorial(k) for k in range(K + 1)])
    out = np.zeros(x.shape)
    for ah, vh in zip(a, v, strict=True):
        c = (float(ah) ** np.arange(K + 1)) * inv_fact
        cz = moments[:, : K + 1] * c  # (B, K+1): normaliser coefficients
        cn = moments[:, 1 : K + 2] * c  # numerator coefficients
        Z = np.broadcast_to(cz[:, K : K + 1], x.shape).copy()
        Nm = np.broadcast_to(cn[:, K : K + 1], x.shape).copy()
        for k in range(K - 1, -1, -1):  # Horner
            Z *= x
            Z += cz[:, k : k + 1]
            Nm *= x
            Nm += cn[:, k : k + 1]
        out += vh * (Nm / Z)
    return out / len(a)


def series_applies(x: np.ndarray, atoms: np.ndarray, a: np.ndarray) -> bool:
    """Whether ``|a| max|x| max|y| <= SERIES_MAX_A`` (the series route's rounding stays below 1e-12)."""
    return float(np.max(np.abs(a))) * float(np.max(np.abs(x))) * float(np.max(np.abs(atoms))) <= SERIES_MAX_A


def rk4(x0: np.ndarray, rhs: Callable[[np.ndarray], np.ndarray], T: float, steps: int) -> np.ndarray:
    """Classical fourth-order Runge-Kutta for the autonomous ``x' = rhs(x)``: trajectory (steps+1, *x0.shape)."""
    h = T / steps
    out = np.empty((steps + 1,) + x0.shape)
    out[0] = x = x0
    for n in range(steps):
        k1 = rhs(x)
        k2 = rhs(x + 0.5 * h * k1)
        k3 = rhs(x + 0.5 * h * k2)
        k4 = rhs(x + h * k3)
        x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        out[n + 1] = x
    return out


def gauss_legendre_uniform(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n``-point Gauss-Legendre nodes and weights for the uniform law on [-1, 1] (weights sum to 1)."""
    xi, wi = np.polynomial.legendre.leggauss(n)
    return xi, wi / 2.0


def quantile_cells(N: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre points in each cell ``((k-1)/N, k/N]`` of (0, 1): ``u`` (N, m) and weights (m,) summing to 1."""
    xi, wi = gauss_legendre_uniform(m)
    u = (np.arange(N)[:, None] + (xi[None, :] + 1.0) / 2.0) / N
    return u, wi
