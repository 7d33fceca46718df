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
