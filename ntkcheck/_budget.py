"""A time budget shared by the routes of one decision.

:func:`ntkcheck.independence.decision.decide` takes ``timeout`` seconds; every route calls
:meth:`Budget.check` between its steps (truncation orders, working precisions,
directions, identity attempts, and inside long loops over measures or product terms).
An exhausted budget raises :class:`OutOfTime`, which never leaves the package:
``decide`` turns it into an ``inconclusive`` verdict that lists what was tried.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["Budget", "OutOfTime"]


class OutOfTime(Exception):  # noqa: N818 (an internal signal, not an error shown to users)
    """The time budget of one decision ran out during ``stage``."""

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


#: a budget that never expires (the default of the lower-level functions)
UNLIMITED = Budget(None)
