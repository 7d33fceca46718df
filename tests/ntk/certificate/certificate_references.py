"""Laws for the certificate's tests.
"""

from __future__ import annotations

import numpy as np
from flint import arb

from ntkcheck.cgf import Empirical, as_laws


def _laws(seed: int, n: int, N: int, d: int, weighted: bool, scale: float = 1.0) -> list[Empirical]:
    rng = np.random.default_rng(seed)
    X = [rng.standard_normal((N, d)) * (scale / np.sqrt(d)) for _ in range(n)]
    if weighted:  # unequal masses: the softmax is weighted
        return [Empirical(x, [1 + (k % 3) for k in range(N)]) for x in X]
    return as_laws(X)


def _arb_le(x: arb, bound: float) -> bool:
    """True only if every point of the ball ``x`` is <= ``bound`` (rigorous)."""
    return bool(x <= arb(bound))
