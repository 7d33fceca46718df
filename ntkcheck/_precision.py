"""The one place that sets working precision: mpmath's ``mp`` and python-flint's ``ctx``.

Both contexts are process-global: ``mpmath.workdps`` and ``flint.ctx.prec`` / ``ctx.cap``
change the precision (and FLINT's series cap) of every thread at once. Two threads deciding
at the same time could therefore compute with each other's precision or truncate each other's
series, and return different verdicts than they return alone. Every region of the package
that sets a precision enters it through a helper of this module, which holds
:data:`PRECISION_LOCK` (re-entrant: regions nest) from the moment the precision is set until
it is restored. Work outside these regions never depends on the precision.

The lock serialises only the high-precision regions (a series, a ball inverse, an mpmath
evaluation), not whole decisions, so concurrent calls still overlap in their float64 and
exact-integer work; each call's time budget keeps running while it waits.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import mpmath
from flint import ctx

__all__ = ["PRECISION_LOCK", "flint_prec", "flint_cap", "mp_dps", "mp_prec"]

#: held by every region that sets a precision (and by sweeps around each screening)
PRECISION_LOCK = threading.RLock()


@contextmanager
def flint_prec(bits: int, cap: int | None = None) -> Iterator[None]:
    """python-flint's Arb precision ``bits`` (and series cap of at least ``cap`` terms), restored on exit."""
    with PRECISION_LOCK:
        old_prec, old_cap = ctx.prec, ctx.cap
        ctx.prec = int(bits)
        if cap is not None:
            ctx.cap = max(old_cap, int(cap))
        try:
            yield
        finally:
            ctx.prec, ctx.cap = old_prec, old_cap


@contextmanager
def flint_cap(cap: int) -> Iterator[None]:
    """python-flint's series cap (``fmpq_series`` / ``arb_series`` truncate at it) set to ``cap`` terms."""
    with PRECISION_LOCK:
        old_cap = ctx.cap
        ctx.cap = int(cap)
        try:
            yield
        finally:
            ctx.cap = old_cap


@contextmanager
def mp_dps(dps: int) -> Iterator[None]:
    """mpmath's working precision in decimal digits (``mpmath.workdps``), under the lock."""
    with PRECISION_LOCK, mpmath.workdps(int(dps)):
        yield


@contextmanager
def mp_prec(bits: int) -> Iterator[None]:
    """mpmath's working precision in bits (``mpmath.workprec``), under the lock."""
    with PRECISION_LOCK, mpmath.workprec(int(bits)):
        yield
