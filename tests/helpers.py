"""Shared tolerances and reference computations for the tests.

Tolerances are stated with their reason; use these names rather than bare numbers.
"""

from __future__ import annotations

import numpy as np

#: float64 evaluations of the same closed form by two routes: a few ulps times the
#: condition of log-sum-exp (O(1) for the sizes tested).
RTOL_FLOAT = 1e-12

#: float64 against an mpmath evaluation at 50 digits: float64 rounding only.
RTOL_FLOAT_VS_MP = 1e-12


def lln_tolerance(std: float, n_samples: int, z: float = 6.0) -> float:
    """Half-width of a law-of-large-numbers check: ``z`` standard errors (6 sigma: a
    false failure has probability below 1e-8 for a fixed seed, which is fixed anyway)."""
    return z * std / np.sqrt(n_samples)


def arb_contains_exact(ball, q) -> bool:
    """Whether the Arb ball ``ball`` contains the rational ``q`` (Fraction or fmpq), decided
    exactly from the ball's dyadic midpoint and radius (no rounding of ``q`` into a ball)."""
    from fractions import Fraction

    def dyadic(x) -> Fraction:
        man, exp = x.man_exp()
        return Fraction(int(man)) * Fraction(2) ** int(exp)

    qf = q if isinstance(q, Fraction) else Fraction(int(q.p), int(q.q))
    return abs(dyadic(ball.mid()) - qf) <= dyadic(ball.rad())


def fd_derivatives(f, h: float) -> list[float]:
    """Derivatives 1..4 of ``f`` at 0 by central differences (orders h^4, h^4, h^2, h^2)."""
    f2p, f1p, f0, f1m, f2m = (f(2 * h), f(h), f(0.0), f(-h), f(-2 * h))
    d1 = (-f2p + 8 * f1p - 8 * f1m + f2m) / (12 * h)
    d2 = (-f2p + 16 * f1p - 30 * f0 + 16 * f1m - f2m) / (12 * h**2)
    d3 = (f2p - 2 * f1p + 2 * f1m - f2m) / (2 * h**3)
    d4 = (f2p - 4 * f1p + 6 * f0 - 4 * f1m + f2m) / h**4
    return [d1, d2, d3, d4]
