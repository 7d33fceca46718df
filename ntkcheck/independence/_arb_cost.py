"""What one Arb inversion will cost, measured before it starts.

The rigorous inverse of an ``n x n`` ball matrix (``arb_mat.inv``) runs in FLINT and cannot be
interrupted: a decision with ``timeout=8`` that starts a 400 x 400 inverse at 1024 bits returns
after half a minute. So its cost is estimated first: a random ``48 x 48`` inverse is timed at
the same precision (once per precision and process, a few milliseconds to a few tenths of a
second) and scaled by ``(n / 48)^3``, the operation count of Gaussian elimination; the
approximate solve that guides the precision ladder adds about a third. Measured on this
machine, the scaled estimate is within 0.6x-1.6x of the actual time for n = 128-256 from 64
to 4096 bits, so :data:`SAFETY` = 1.5 is applied before comparing with the time left. When the
estimate exceeds it, :class:`~ntkcheck._budget.OutOfTime` is raised with the estimate: the
decision is ``inconclusive`` and its trail says which step was skipped and why.
"""

from __future__ import annotations

import functools
import random
import time

from flint import arb, arb_mat

from .._budget import Budget, OutOfTime
from .._precision import flint_prec

__all__ = ["arb_inverse_seconds", "check_arb_inverse", "SAFETY", "TIMED_N"]

#: size of the timed inverse
TIMED_N = 48
#: blocks below this size are never estimated (milliseconds at any precision of the ladder)
SMALL_N = 64
#: factor on the estimate (inverse and approximate solve, and the spread of the scaling)
SAFETY = 1.5


@functools.lru_cache(maxsize=32)
def _seconds_per_cube(prec: int) -> float:
    rng = random.Random(prec)
    with flint_prec(prec):
        B = arb_mat(TIMED_N, TIMED_N, [arb(rng.random()) for _ in range(TIMED_N * TIMED_N)])
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            B.inv()
            best = min(best, time.perf_counter() - t0)
    return best / TIMED_N**3


def arb_inverse_seconds(n: int, prec: int) -> float:
    """Estimated seconds of the rigorous inverse and the approximate solve of an ``n x n`` ball
    matrix at ``prec`` bits (the timed constant times ``n^3``, times :data:`SAFETY`)."""
    return SAFETY * _seconds_per_cube(int(prec)) * float(n) ** 3 * (4.0 / 3.0)


def check_arb_inverse(n: int, prec: int, budget: Budget | None) -> None:
    """Raise :class:`OutOfTime` when an ``n x n`` Arb inverse at ``prec`` bits would not finish
    within what is left of ``budget`` (no check without a budget or for small blocks)."""
    if budget is None or budget.seconds is None or n < SMALL_N:
        return
    budget.check(f"Arb certificate of a {n} x {n} block at {prec} bits")
    est = arb_inverse_seconds(n, prec)
    left = budget.remaining()
    if est > left:
        raise OutOfTime(f"Arb inverse of a {n} x {n} block at {prec} bits, estimated at {est:.1f} s, skipped with "
                        f"{left:.1f} s of the budget left (it cannot be interrupted once started)")
