"""Time budgets: one deadline shared by the steps of a command, and what a step will cost.

:func:`ntkcheck.independence.decision.decide` takes ``timeout`` seconds; every route calls
:meth:`Budget.check` between its steps (truncation orders, working precisions,
directions, identity attempts, and inside long loops over measures or product terms).
An exhausted budget raises :class:`OutOfTime`, which never leaves the package:
``decide`` turns it into an ``inconclusive`` verdict that lists what was tried.

The other long routes (``screen``, ``gram``, ``run_claim``, ``run_experiment``, ``sweep``; on
the command line ``--max-seconds``) take ``time_budget`` seconds and share **one** budget with
every step below them through :func:`scope`, a context-local deadline (each thread and each
asyncio task sees its own; nothing is process-global):

* a decision started inside a scope gets what is left of it (or its own ``timeout``, whichever
  ends first; :func:`current`);
* inside a *stoppable* scope (``scope(..., stoppable=True)``: the Gram's float64 spectrum, its
  certificate, an experiment), :func:`checkpoint` raises :class:`OutOfTime` once the deadline has
  passed. Every update of a progress bar (:mod:`ntkcheck._progress`: head blocks, feature tiles,
  Cholesky steps, the steps of an experiment) is such a checkpoint, whether the bar is shown or
  not; the caller that opened the stoppable scope turns :class:`OutOfTime` into an honest result
  ("not certified (time budget spent)", an inconclusive experiment) or a refusal;
* a step that cannot be interrupted once started (one LAPACK call on an ``M x M`` matrix, an
  Arb inverse) is estimated first: :func:`require` raises before starting what would not finish in
  the time left (in a stoppable scope), and :func:`fits` lets an optional step (the SVD fallback of
  the spectrum, the slowest eigenvector) be skipped with a note;
* since an estimate can be off by several times on a loaded machine, the LAPACK calls themselves
  run through :func:`run`: in a stoppable scope with a limit, in a daemon thread that the caller
  stops waiting for at the deadline (numpy releases the GIL in LAPACK); the call is abandoned, not
  killed. Its thread is told it was abandoned, and the next :func:`checkpoint` it passes (in any
  scope, stoppable or not) raises :class:`OutOfTime` there, so the work it would have wasted ends
  at its next checkpoint instead of running on beside what the process does next (a d = 384
  flow certificate cut at 3 s ran on for minutes on both cores). A single LAPACK call finishes
  first. Arb (python-flint holds the GIL) relies on its estimate alone.

Dense estimates (:func:`dense_seconds`): the BLAS-3 rate of this process is timed once, the first
time a budget needs an estimate (a ``512 x 2048`` product, best of 3, a tenth of a second), and
each kind of factorisation is charged a measured multiple of it per flop (:data:`CHOLESKY`,
:data:`EIGVALSH`, :data:`SVDVALS`, :data:`SVD`: their time per flop over a ``syrk``'s at
``M = 1600``, ``K = 4 M`` on this machine's 2 cores, quiet). On a loaded machine the time of one
factorisation moves by up to 10x (a Cholesky of ``M = 1600`` took 0.3 s and 3.3 s a minute apart
on 2 cores shared by 5 busy processes), so an estimate only keeps from starting what cannot fit;
:func:`run` is what holds the deadline. Small problems (under :data:`SMALL_FLOPS`) are never
estimated.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["Budget", "OutOfTime", "UNLIMITED", "scope", "current", "checkpoint", "require", "fits", "run", "capped",
           "dense_seconds", "BLAS3", "CHOLESKY", "EIGVALSH", "SVDVALS", "SVD", "SAFETY"]


class OutOfTime(Exception):  # noqa: N818 (an internal signal, not an error shown to users)
    """The time budget ran out during ``stage`` (or ``stage`` would not finish in what is left)."""

    def __init__(self, stage: str) -> None:
        super().__init__(stage)
        self.stage = stage


@dataclass(frozen=True)
class Budget:
    """A deadline on :func:`time.perf_counter`; ``seconds=None`` never expires.

    Attributes
    ----------
    seconds : float or None
        The budget given.
    start : float
        ``perf_counter()`` when the budget was created.
    """

    seconds: float | None
    start: float = field(default_factory=time.perf_counter)

    @property
    def deadline(self) -> float | None:
        return None if self.seconds is None else self.start + self.seconds

    def remaining(self) -> float:
        """Seconds left (``inf`` without a limit, never negative)."""
        if self.seconds is None:
            return float("inf")
        return max(0.0, self.start + self.seconds - time.perf_counter())

    def expired(self) -> bool:
        return self.seconds is not None and time.perf_counter() >= self.start + self.seconds

    def check(self, stage: str) -> None:
        """Raise :class:`OutOfTime` if the budget is exhausted (``stage`` says where)."""
        if self.expired():
            raise OutOfTime(stage)

    def fits(self, seconds: float) -> bool:
        """Whether a step estimated at ``seconds`` finishes within what is left."""
        return seconds <= self.remaining()

    def require(self, seconds: float, stage: str) -> None:
        """Raise :class:`OutOfTime` before starting ``stage`` (estimated at ``seconds``, not
        interruptible) when it would not finish within what is left."""
        left = self.remaining()
        if seconds > left:
            raise OutOfTime(f"{stage}, estimated at {seconds:.1f} s, not started with {left:.1f} s of the budget "
                            "left (it cannot be interrupted once started)")

    def tighter(self, other: Budget) -> Budget:
        """The budget of the two that ends first."""
        a, b = self.deadline, other.deadline
        return self if b is None or (a is not None and a <= b) else other


#: a budget that never expires (the default of the lower-level functions)
UNLIMITED = Budget(None)


# ------------------------------------------------------------------ the budget of the running command


@dataclass(frozen=True)
class _Frame:
    budget: Budget
    stoppable: bool


_ACTIVE: ContextVar[_Frame | None] = ContextVar("ntkcheck_time_budget", default=None)
#: the events of the :func:`run` calls this thread works for (innermost last): one is set when its
#: caller stops waiting for the call
_ABANDONED: ContextVar[tuple[threading.Event, ...]] = ContextVar("ntkcheck_abandoned", default=())


def current(budget: Budget | None = None) -> Budget:
    """``budget`` or the budget of the enclosing :func:`scope`, whichever ends first
    (:data:`UNLIMITED` when there is neither)."""
    frame = _ACTIVE.get()
    outer = UNLIMITED if frame is None else frame.budget
    return outer if budget is None else budget.tighter(outer)


@contextlib.contextmanager
def scope(budget: Budget | None = None, *, stoppable: bool = False) -> Iterator[Budget]:
    """Run the block under ``budget`` (never later than an enclosing scope's deadline).

    With ``stoppable``, :func:`checkpoint` and :func:`require` raise :class:`OutOfTime` in the block
    (the caller catches it); without, they do nothing there, and the budget only bounds what
    decisions and optional steps may take (:func:`current`, :func:`fits`).
    """
    b = current(budget)
    token = _ACTIVE.set(_Frame(b, stoppable))
    try:
        yield b
    finally:
        _ACTIVE.reset(token)


def checkpoint(stage: str) -> None:
    """In a stoppable scope whose deadline has passed, or in a :func:`run` call its caller has
    abandoned, raise :class:`OutOfTime` (else nothing)."""
    events = _ABANDONED.get()
    if events and any(e.is_set() for e in events):
        raise OutOfTime(f"{stage} (abandoned: its caller stopped waiting at the deadline)")
    frame = _ACTIVE.get()
    if frame is not None and frame.stoppable:
        frame.budget.check(stage)


def require(seconds: float | Callable[[], float], stage: str) -> None:
    """In a stoppable scope with a limit, raise :class:`OutOfTime` before starting a step estimated at
    ``seconds`` (a number, or a function computing it: called only then) that would not finish in
    the time left (:meth:`Budget.require`)."""
    frame = _ACTIVE.get()
    if frame is not None and frame.stoppable and frame.budget.seconds is not None:
        frame.budget.require(seconds() if callable(seconds) else seconds, stage)


def capped(seconds: float | None) -> float | None:
    """``seconds`` (a step's own time budget, None: none) never beyond what is left of the current budget."""
    left = current().remaining()
    if left == float("inf"):
        return seconds
    return left if seconds is None else min(float(seconds), left)


def fits(seconds: float | Callable[[], float]) -> bool:
    """Whether an optional step estimated at ``seconds`` (a number, or a function computing it:
    called only under a limit) finishes within the current budget."""
    b = current()
    return b.seconds is None or b.fits(seconds() if callable(seconds) else seconds)


_T = TypeVar("_T")


def run(func: Callable[[], _T], stage: str) -> _T:
    """``func()``, one call that cannot be interrupted (a LAPACK factorisation), such that the caller
    gets control back at the deadline: in a stoppable scope with a limit it runs in a daemon thread,
    and when the budget is spent before it returns, :class:`OutOfTime` is raised and the call is
    abandoned: its result is dropped, and it stops at the next :func:`checkpoint` it passes. Elsewhere
    it is just called."""
    frame = _ACTIVE.get()
    if frame is None or not frame.stoppable or frame.budget.seconds is None:
        return func()
    box: dict[str, Any] = {}
    events = (*_ABANDONED.get(), threading.Event())  # a call abandoned by an abandoned call is abandoned too

    def target() -> None:
        _ABANDONED.set(events)  # the thread's own context
        try:
            box["value"] = func()
        except BaseException as exc:  # noqa: BLE001 (re-raised in the caller's thread)
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"ntkcheck: {stage}", daemon=True)
    worker.start()
    try:
        worker.join(frame.budget.remaining())
    finally:  # the deadline, or the caller interrupted (Ctrl-C in a notebook): the call is abandoned
        if worker.is_alive():
            events[-1].set()
    if worker.is_alive():
        raise OutOfTime(f"{stage} (not finished when the time budget ran out: abandoned, its result dropped)")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


# ------------------------------------------------------------------ what a dense step costs

#: time per flop, as a multiple of the timed BLAS-3 product's: syrk / gemm (measured 0.8-1.0)
BLAS3 = 1.0
#: Cholesky (``M^3 / 3`` flops): measured 3 on a quiet machine, up to 60 with 2 cores shared by 5
#: busy processes (LAPACK's panel steps stall when their threads are descheduled)
CHOLESKY = 3.0
#: eigvalsh (``4 M^3 / 3`` flops; the tridiagonal reduction is half BLAS-2): measured 7-60
EIGVALSH = 7.0
#: singular values of ``(M, K)``, ``K >= M`` (``4 M^2 K`` flops): measured 12-25
SVDVALS = 17.0
#: thin SVD with the left singular vectors (``4 M^2 K`` flops counted): measured 30-45
SVD = 35.0
#: factor on every estimate: 1, the estimate is the typical time (a call that takes longer is
#: abandoned at the deadline by :func:`run`; the estimate only keeps what cannot fit from starting)
SAFETY = 1.0
#: steps of fewer flops than this are never estimated (milliseconds)
SMALL_FLOPS = 2e8
#: rows of the timed product ``(n, 4 n) x (4 n, n)`` (1.1 GFlop: a few hundredths of a second)
_TIMED = 512


@functools.lru_cache(maxsize=1)
def _seconds_per_flop() -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    A = rng.standard_normal((_TIMED, 4 * _TIMED))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        A @ A.T
        best = min(best, time.perf_counter() - t0)
    return best / (2.0 * _TIMED * _TIMED * 4 * _TIMED)


def dense_seconds(flops: float, kind: float = BLAS3) -> float:
    """Estimated seconds of a dense step of ``flops`` floating-point operations whose time per flop
    is ``kind`` times the BLAS-3 product's (:data:`CHOLESKY`, :data:`EIGVALSH`, ...); 0 below
    :data:`SMALL_FLOPS`."""
    if flops < SMALL_FLOPS:
        return 0.0
    return SAFETY * kind * float(flops) * _seconds_per_flop()
