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
* :func:`heads_for_lower`, :func:`heads_for_upper`: how many heads either needs to come within a
  given ratio of :math:`\lambda` (they size the rounds, never a statement).

Every inequality is derived in ``theory/ntk-head-law.md`` ("A certificate for ``K_rho``").
"""

from __future__ import annotations

import math

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


def second_moment_upper(z: float, w: float, L: float, H: int, t: float) -> float:
    r"""An upper bound of the mean :math:`\mu` of ``H`` i.i.d. variables in ``[0, L]`` from their mean
    ``z`` and mean square ``w``, failing with probability at most :math:`2e^{-t}`.

    A nonnegative ``Z`` has :math:`E e^{-s(Z - \mu)} \le e^{s^2 E Z^2 / 2}` (from
    :math:`e^{-x} \le 1 - x + x^2/2`, :math:`x \ge 0`), so :math:`P(\bar Z \le \mu - a) \le
    e^{-H a^2 / (2 E Z^2)}`; the same for :math:`W = Z^2 \in [0, L^2]` with :math:`E W^2 \le L^2 E W`
    bounds :math:`E Z^2` by :math:`m^2`, :math:`m = (a + \sqrt{a^2 + 4w})/2`, :math:`a = L\sqrt{2t/H}`.
    Hence :math:`\mu \le z + m\sqrt{2t/H}`: the range enters as :math:`2Lt/H`, not as
    :math:`\sqrt{L\mu t/H}` (Chernoff-Hoeffding), so tight bounds need fewer heads (A. Maurer, "A bound on
    the deviation probability for sums of non-negative random variables", *J. Inequal. Pure Appl.
    Math.* 4 (2003), art. 15).
    """
    a = L * math.sqrt(2.0 * t / H) * (1.0 + _SAFE)
    m = 0.5 * (a + math.sqrt(a * a + 4.0 * w)) * (1.0 + _SAFE)
    return (z + m * math.sqrt(2.0 * t / H) * (1.0 + _SAFE)) * (1.0 + _SAFE)


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


def heads_for_upper(ratio: float) -> float:
    r"""Heads for :func:`chernoff_upper` to return ``ratio`` times ``g`` (``ratio > 1``), per unit of
    :math:`L t / g`: :math:`1 / (\rho - 1 - \log \rho)` (3.26 for ``ratio = 2``)."""
    return 1.0 / _x_minus_log1p(ratio - 1.0)


def heads_for_second_moment(ratio: float, z: float, w: float, L: float, t: float) -> float:
    r"""Heads for :func:`second_moment_upper` to return ``ratio`` times ``z`` (mean ``z``, mean square
    ``w``, range ``L``): with :math:`y = \sqrt{2t/H}`, :math:`y\,(Ly + \sqrt{L^2y^2 + 4w})/2 = (\rho - 1) z`,
    increasing in ``y``: bisection, then :math:`H = 2t/y^2`."""
    D = (ratio - 1.0) * z
    if not (D > 0 and L > 0):
        return math.inf
    lo, hi = 0.0, 1.0
    while hi * (L * hi + math.sqrt(L * L * hi * hi + 4.0 * w)) / 2.0 < D:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid * (L * mid + math.sqrt(L * L * mid * mid + 4.0 * w)) / 2.0 < D:
            lo = mid
        else:
            hi = mid
    return 2.0 * t / (lo * lo) if lo > 0 else math.inf
