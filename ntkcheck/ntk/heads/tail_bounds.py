r"""Tail bounds for means of i.i.d. bounded nonnegative variables, and their inversions.

The head-law certificate (:mod:`ntkcheck.ntk.heads.law`) reads a certified number off ``H``
heads (the bottom of a Gram, a quadratic form along a fixed direction) and turns it into a
statement about its mean with failure probability :math:`e^{-t}`:

* :func:`bernstein_lower`: variables in ``[0, L]`` whose mean is at most :math:`\lambda`; their
  mean exceeds :math:`\lambda + \sqrt{2L\lambda t/H} + Lt/(3H)` with probability at most
  :math:`e^{-t}` (Bernstein, sub-gamma form), so a certified ``c`` below the mean gives
  :math:`\lambda > x^2`;
* :func:`chernoff_upper`: the lower tail of the same variables (Chernoff-Hoeffding, and its
  matrix form with a factor ``M`` in :math:`e^{t}`), so a certified ``g`` above the mean gives
  :math:`\lambda \le U(g)`;
* :func:`betting_upper`: a confidence sequence for the mean of the same variables (a bound that holds at
  every number of heads at once), from bets fixed before each head, the quadratic form's upper bound;
* :func:`heads_for_lower`, :func:`heads_for_betting`: how many heads either needs to come within a
  given ratio of :math:`\lambda` (they size the rounds, never a statement).

Every inequality is derived in ``theory/ntk-head-law.md`` ("A certificate for ``K_rho``").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: relative deflation of a lower bound (inflation of an upper bound) evaluated in float64: each is a
#: short expression of positive terms, whose rounding is far below 1e-12
_SAFE = 1e-12


def bernstein_lower(c: float, L: float, H: int, t: float) -> float:
    r"""The smallest :math:`\lambda \ge 0` with :math:`c < \lambda + \sqrt{2 L \lambda t / H} + L t/(3H)`.

    Bernstein's inequality for the mean of ``H`` i.i.d. variables in ``[0, L]`` with mean at most
    :math:`\lambda` (second moment at most :math:`L\lambda`): the mean exceeds
    :math:`\lambda + \sqrt{2L\lambda t/H} + Lt/(3H)` with probability at most :math:`e^{-t}`.
    With :math:`x = \sqrt\lambda`, :math:`a = \sqrt{2Lt/H}`, :math:`b = Lt/(3H)`: the root of
    :math:`x^2 + a x + b - c`, written without cancellation; 0 when :math:`c \le b`. ``a`` and ``b``
    are rounded up first (the root decreases in both), then every operation is relative-accurate
    (one subtraction of two floats included), so a deflation by ``1e-12`` makes it a lower bound.
    """
    a = math.sqrt(2.0 * L * t / H) * (1.0 + _SAFE)
    b = L * t / (3.0 * H) * (1.0 + _SAFE)
    if not c > b:
        return 0.0
    x = 2.0 * (c - b) / (a + math.sqrt(a * a + 4.0 * (c - b)))
    return x * x * (1.0 - _SAFE)


def _x_minus_log1p(x: float) -> float:
    r""":math:`x - \log(1 + x)` for :math:`x \ge 0`, accurate to ~1e-13 relative (series near 0)."""
    if x < 1e-3:
        return x * x * (0.5 - x * (1.0 / 3.0 - x * (0.25 - x / 5.0)))
    return x - math.log1p(x)


def chernoff_upper(g: float, L: float, H: int, t: float) -> float:
    r"""The largest :math:`\lambda` with :math:`(H/L)\,(\lambda - g - g\log(\lambda/g)) \le t`.

    Chernoff-Hoeffding, lower tail: for ``H`` i.i.d. variables in ``[0, L]`` with mean
    :math:`\mu`, :math:`P(\bar Y \le g) \le \exp(-(H/L)(\mu - g - g\log(\mu/g)))` for
    :math:`g < \mu` (W. Hoeffding, *J. Amer. Statist. Assoc.* 58 (1963), Thm. 1, with
    :math:`\mathrm{KL}(p'\|p) \ge p'\log(p'/p) + p - p'`). The matrix form (J. A. Tropp, "User-friendly
    tail bounds for sums of random matrices", *Found. Comput. Math.* 12 (2012), Thm. 1.1) bounds
    :math:`P(\lambda_{\min}(G_H) \le g)` by ``M`` times the same: ``t`` then includes
    :math:`\log M`. With :math:`\lambda = g(1 + x)` the left side is
    :math:`(H/L)\,g\,(x - \log(1 + x))`, increasing in :math:`x \ge 0` and evaluated without
    cancellation: bisection in ``x``, the upper end of the bracket returned and inflated.
    """
    s = L * t / H * (1.0 + _SAFE)
    if g <= 0.0:
        return s * (1.0 + _SAFE)
    r = s / g
    lo, hi = 0.0, 2.0 * r + 2.0 * math.sqrt(r) + 1.0
    while _x_minus_log1p(hi) <= r:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _x_minus_log1p(mid) <= r:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return g * (1.0 + hi * (1.0 + 1e-11)) * (1.0 + _SAFE)


def round_delta(delta: float, j: int) -> float:
    r""":math:`\delta_j = \delta / ((j+1)(j+2))`: summed over all rounds, at most :math:`\delta`."""
    return delta / ((j + 1) * (j + 2))


def heads_for_lower(ratio: float, L: float, t: float) -> float:
    r"""Heads for :func:`bernstein_lower` to return ``ratio`` times :math:`\lambda` when ``c`` is
    :math:`\lambda`: with :math:`s = Lt/(H\lambda)`, :math:`\sqrt{\rho}\sqrt{2s} + s/3 = 1 - \rho`,
    so :math:`H = L t / (s \lambda)`; returned per unit of :math:`L t / \lambda`, i.e. ``1 / s``
    (5.25 for ``ratio = 1/2``)."""
    # the positive root of s / 3 + sqrt(2 ratio) sqrt(s) - (1 - ratio) in sqrt(s)
    a, b, c = 1.0 / 3.0, math.sqrt(2.0 * ratio), -(1.0 - ratio)
    y = (-b + math.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)
    return 1.0 / (y * y)


def betting_margin(n: float, var: float, L: float, t: float) -> float:
    r"""The margin :math:`D` above the mean at which :func:`betting_upper` stops at ``n`` heads of variance
    ``var`` with the bet :func:`bet` (sizing only: :math:`\psi = 1/2`, the sums at their means):
    the smaller root of :math:`\lambda n D - \lambda^2 n (V + D^2)/2 = t`; inf when there is none."""
    lam = bet(L, t, int(max(n, 1)), var)
    A, B, C = lam * lam * n / 2.0, lam * n, t + lam * lam * n * var / 2.0
    disc = B * B - 4.0 * A * C
    return 2.0 * C / (B + math.sqrt(disc)) if disc > 0 else math.inf


def heads_for_betting(ratio: float, z: float, w: float, L: float, t: float) -> float:
    r"""Heads for :func:`betting_upper` to return ``ratio`` times ``z`` (mean ``z``, mean square ``w``,
    range ``L``): the :func:`betting_margin` reaches :math:`(\rho - 1) z` (bisection in
    :math:`\log n`; the margin decreases in ``n``)."""
    D, var = (ratio - 1.0) * z, max(w - z * z, 0.0)
    if not (D > 0 and L > 0):
        return math.inf
    lo, hi = 1.0, 2.0
    while betting_margin(hi, var, L, t) > D:
        lo, hi = hi, hi * 2.0
        if hi > 2.0**80:
            return math.inf
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if betting_margin(mid, var, L, t) > D:
            lo = mid
        else:
            hi = mid
    return hi


def log1p_curvature(c: float) -> float:
    r""":math:`\psi(c) = (-\log(1 - c) - c)/c^2` (rounded up), ``0 <= c < 1``: for every :math:`x \ge -c`,
    :math:`\log(1 + x) \ge x - \psi(c)\, x^2` (the function :math:`(x - \log(1+x))/x^2` decreases on
    :math:`(-1, \infty)`; X. Fan, I. Grama, Q. Liu, *Electron. J. Probab.* 20 (2015), art. 35, Lemma 4.1).
    ``inf`` for ``c >= 1``."""
    if not c < 1.0:
        return math.inf
    c = max(c, 0.0)
    if c < 1e-3:  # series 1/2 + c/3 + c^2/4 + c^3/5 + ..., the tail below c^4 / (6 (1 - c))
        return (0.5 + c * (1.0 / 3.0 + c * (0.25 + c / 5.0)) + c**4 / (6.0 * (1.0 - c))) * (1.0 + _SAFE)
    return (-math.log1p(-c) - c) / (c * c) * (1.0 + 1e-10)


@dataclass
class BetSums:
    r"""The sums behind :func:`betting_upper` over the heads so far: with the bet :math:`\lambda_h` fixed
    before head ``h`` is drawn (from earlier heads only) and ``zh`` an upper bound of :math:`Z_h`,
    ``a`` :math:`= \sum\lambda_h`, ``b`` :math:`= \sum\lambda_h z_h`, ``alpha`` :math:`= \sum\lambda_h^2`,
    ``beta`` :math:`= \sum\lambda_h^2 z_h`, ``gamma`` :math:`= \sum\lambda_h^2 z_h^2`, ``c`` :math:`= \max_h
    \lambda_h z_h`, and ``n`` heads. Float sums of nonnegative terms: each within :math:`\gamma_n` of the
    exact one (:func:`betting_upper` widens them)."""

    a: float = 0.0
    b: float = 0.0
    alpha: float = 0.0
    beta: float = 0.0
    gamma: float = 0.0
    c: float = 0.0
    n: int = 0

    def add(self, lam: float, zh: np.ndarray) -> None:
        k = int(zh.size)
        self.a += lam * k
        self.b += lam * float(np.sum(zh))
        self.alpha += lam * lam * k
        self.beta += lam * lam * float(np.sum(zh))
        self.gamma += lam * lam * float(np.sum(zh * zh))
        self.c = max(self.c, lam * float(np.max(zh)) if k else 0.0)
        self.n += k


def betting_upper(s: BetSums, t: float) -> float:
    r"""An upper bound of the mean :math:`\mu` of i.i.d. variables in ``[0, L]`` that fails with
    probability at most :math:`e^{-t}` **simultaneously for every number of heads** (a confidence
    sequence), from bets :math:`0 \le \lambda_h \le 1/L` fixed before each head.

    :math:`K_n(m) = \prod_{h \le n} (1 + \lambda_h (m - Z_h))` is nonnegative and, at :math:`m = \mu`, a
    martingale of mean 1, so :math:`P(\exists n: K_n(\mu) \ge e^t) \le e^{-t}` (Ville's inequality);
    :math:`K_n` increases in ``m``, so :math:`\mu < m` for every ``m`` with :math:`\log K_n(m) \ge t`
    (I. Waudby-Smith, A. Ramdas, "Estimating means of bounded random variables by betting", *J. R.
    Stat. Soc. B* 86 (2024)). With :func:`log1p_curvature`
    :math:`\psi = \psi(\max_h \lambda_h z_h)` and :math:`z_h \ge Z_h`,
    :math:`\log K_n(m) \ge \sum_h \lambda_h(m - z_h) - \psi \sum_h \lambda_h^2 (m - z_h)^2 =: A(m)`, a
    concave quadratic; the bound is its smaller root of :math:`A(m) = t`. The range enters only through
    :math:`\lambda_h \le 1/L`: about :math:`L t / n` above the mean when the variance is small, against
    :math:`2 L t / n` for a second-moment (Maurer) bound; ``inf`` when :math:`A < t` everywhere."""
    if s.n == 0 or not (s.a > 0 and math.isfinite(s.gamma)):
        return math.inf
    psi = log1p_curvature(s.c * (1.0 + _SAFE))
    if not math.isfinite(psi):
        return math.inf
    g = (s.n + 4) * 2.0**-53 / (1.0 - (s.n + 4) * 2.0**-53)  # gamma_{n+4}: every float sum within it
    a, b = s.a * (1.0 - g), s.b * (1.0 + g)
    alpha, beta, gamma = s.alpha * (1.0 + g), s.beta * (1.0 - g), s.gamma * (1.0 + g)
    # A(m) >= a m - b - psi (alpha m^2 - 2 beta m + gamma) =: -R m^2 + Qc m - P + t
    P = (b + psi * gamma + t) * (1.0 + _SAFE)
    Qc = (a + 2.0 * psi * beta) * (1.0 - _SAFE)
    R = psi * alpha * (1.0 + _SAFE)
    # the root grows as the discriminant shrinks: lowered by its rounding (a few ulps of Qc^2 + 4RP)
    disc = Qc * Qc - 4.0 * R * P - 8.0 * 2.0**-52 * (Qc * Qc + 4.0 * R * P)
    if not disc > 0:
        return math.inf
    return 2.0 * P / (Qc + math.sqrt(disc) * (1.0 - _SAFE)) * (1.0 + 1e-11)


def bet(L: float, t: float, n: int, var: float) -> float:
    r"""The bet for a confidence sequence read at about ``n`` heads: :math:`\sqrt{2t/(n V)}` (it maximises
    :math:`n\lambda D - \lambda^2 n V/2` at the margin ``D`` that reaches ``t``), at most
    :math:`(1 - 2^{-10})/L` (the factors stay positive whatever the variables in ``[0, L]``)."""
    cap = (1.0 - 2.0**-10) / L
    if not (var > 0 and n > 0):
        return cap
    return min(cap, math.sqrt(2.0 * t / (n * var)))
