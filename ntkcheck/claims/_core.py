"""The claim object, its outcomes, and the runner that tries a claim on hypothesis-drawn instances.

A claim is a seed statement "hypotheses => conclusion" made executable: a checker of the
hypotheses, a checker of the conclusion, and a strategy of instances. Running a claim
means asking hypothesis for instances, keeping those that meet the hypotheses, and
checking the conclusion on each. A conclusion that fails on an instance meeting the
hypotheses is a counterexample; hypothesis shrinks it and the runner reports the
shrunk instance. An engine that cannot decide (``decide`` returning ``inconclusive``,
an eigenvalue too close to the float floor) gives ``inconclusive``, never a failure.
"""

from __future__ import annotations

import enum
import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, is_dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as _hseed
from hypothesis.errors import Unsatisfiable
from hypothesis.strategies import SearchStrategy

from .._budget import scope
from .._records import restore
from .._validate import as_budget
from ..errors import NtkcheckError, TimeBudgetError

__all__ = ["Outcome", "Check", "Claim", "ClaimReport", "check_instance", "run_claim", "describe"]


class Outcome(enum.StrEnum):
    """What one instance says about a claim."""

    HELD = "held"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"
    #: the instance does not meet the claim's hypotheses: it says nothing
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Check:
    """Outcome of a conclusion checker on one instance, with what was measured."""

    outcome: Outcome
    detail: str = ""

    @classmethod
    def held(cls, detail: str = "") -> Check:
        return cls(Outcome.HELD, detail)

    @classmethod
    def failed(cls, detail: str = "") -> Check:
        return cls(Outcome.FAILED, detail)

    @classmethod
    def inconclusive(cls, detail: str = "") -> Check:
        return cls(Outcome.INCONCLUSIVE, detail)

    @classmethod
    def of(cls, ok: bool, detail: str = "") -> Check:
        return cls(Outcome.HELD if ok else Outcome.FAILED, detail)


Instance = Mapping[str, Any]


@dataclass(frozen=True)
class Claim:
    """A seed claim, executable.

    Attributes
    ----------
    id : str
        ``"<seed>.<place>.<part>"``, e.g. ``"003.prop8.sufficiency"``.
    seed, place : str
        Which seed (``"003"``, ``"002"``) and where (``"Prop. 8"``).
    statement : str
        The claim in words, hypotheses and conclusion.
    hypothesis : callable(instance) -> bool
        Whether an instance meets the hypotheses.
    conclusion : callable(instance) -> Check
    instances : callable() -> SearchStrategy of instances
        Built lazily: the strategies import the families.
    status : {"open", "refuted"}
        ``"refuted"`` when a counterexample is known; it is stored in ``counterexample``.
    counterexample : mapping, optional
        The shrunk counterexample (JSON-serialisable) of a refuted claim.
    examples : tuple of callables returning instances
        The seed's own cases, always checked first (pinned ``@example``s in the tests).
    requires : tuple of str
        Modules the checkers need (``"ntkcheck.dynamics.model"``); a claim whose modules are
        missing is listed and not run.
    cost : int
        Relative cost of one instance; the runner divides the example budget by it.
    min_held : int
        Instances (pinned cases included) that must hold in a run; the runner keeps drawing
        past the budget until they do (or a cap of ``budget + 4 min_held`` draws) and fails
        the claim when they do not.
    max_inconclusive : float
        Largest fraction of the checked instances that may be inconclusive (0 for claims
        decided in exact arithmetic; a float threshold leaves a documented grey zone).
    """

    id: str
    seed: str
    place: str
    statement: str
    hypothesis: Callable[[Instance], bool]
    conclusion: Callable[[Instance], Check]
    instances: Callable[[], SearchStrategy[Any]]
    status: str = "open"
    counterexample: Mapping[str, Any] | None = None
    examples: tuple[Callable[[], Instance], ...] = ()
    requires: tuple[str, ...] = ()
    cost: int = 1
    min_held: int = 1
    max_inconclusive: float = 0.0

    def __post_init__(self) -> None:
        if int(self.min_held) != self.min_held or self.min_held < 0:
            raise ValueError(f"claim {self.id}: min_held must be a non-negative integer, got {self.min_held!r}")
        if not 0.0 <= self.max_inconclusive <= 1.0:
            raise ValueError(f"claim {self.id}: max_inconclusive is a fraction in [0, 1], got {self.max_inconclusive!r}")
        if self.status not in ("open", "refuted"):
            raise ValueError(f"claim {self.id}: status must be 'open' or 'refuted', got {self.status!r}")
        if self.status == "refuted" and self.counterexample is None:
            raise ValueError(f"claim {self.id}: a refuted claim must store its counterexample")

    @property
    def reference(self) -> str:
        return f"seed {self.seed} {self.place}"

    def available(self) -> bool:
        """Whether every module the checkers need can be imported."""
        for mod in self.requires:
            try:
                importlib.import_module(mod)
            except ImportError:
                return False
        return True

    def check(self, instance: Instance) -> Check:
        """Check one instance: ``SKIPPED`` if it misses the hypotheses, else the conclusion."""
        return check_instance(self, instance)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "seed": self.seed,
            "place": self.place,
            "statement": self.statement,
            "status": self.status,
            "counterexample": None if self.counterexample is None else describe(self.counterexample),
            "requires": list(self.requires),
            "min_held": self.min_held,
            "max_inconclusive": self.max_inconclusive,
        }

    def __repr__(self) -> str:
        return f"Claim({self.id!r}, {self.reference}, status={self.status!r})"


def check_instance(claim: Claim, instance: Instance) -> Check:
    """Run the hypothesis checker, then (if met) the conclusion checker, on one instance.

    An error ntkcheck raises (``NtkcheckError``) while checking an instance is a failure:
    the toolkit refused an input the claim covers; except a :class:`~ntkcheck.errors.TimeBudgetError`
    (the run's time budget, not the instance), which propagates: the runner stops there. Any other
    exception propagates (a bug of the checker; the runner reports it and fails the claim).
    """
    try:
        if not claim.hypothesis(instance):
            return Check(Outcome.SKIPPED, "hypotheses not met")
        return claim.conclusion(instance)
    except TimeBudgetError:
        raise
    except NtkcheckError as exc:
        return Check.failed(f"toolkit error {type(exc).__name__}: {exc}")


def describe(x: Any) -> Any:
    """A JSON-serialisable description of an instance (arrays as lists, Fractions as str)."""
    if isinstance(x, Mapping):
        return {str(k): describe(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, Fraction):
        return str(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    if isinstance(x, (list, tuple)):
        return [describe(v) for v in x]
    if hasattr(x, "to_dict"):
        return describe(x.to_dict())
    if is_dataclass(x):
        return repr(x)
    return repr(x)


@dataclass(frozen=True)
class ClaimReport:
    """What running a claim on a budget of instances showed.

    Counts per status: ``tried`` instances met the hypotheses (``skipped`` the others), of
    which ``held``, ``refuted`` (0 or 1: hypothesis stops at the first failure and shrinks
    it, the shrunk instance is ``counterexample``) and ``inconclusive``. ``shortfall`` says
    why a run that found no counterexample still fails the claim (fewer than ``min_held``
    held, or more than ``max_inconclusive`` of the checked instances inconclusive).
    ``unexpected`` is True when an open claim failed, fell short or its checker raised, or
    when a claim marked refuted no longer reproduces its counterexample. ``timed_out``: the time
    budget ran out before the run ended; only what ran is counted, and without a counterexample
    the claim is neither held nor failed but not established (:attr:`cut_short`).
    """

    id: str
    reference: str
    status: str
    tried: int
    held: int
    refuted: int
    inconclusive: int
    skipped: int
    seconds: float
    counterexample: Any = None
    detail: str = ""
    error: str = ""
    ran: bool = True
    min_held: int = 0
    max_inconclusive: float = 0.0
    shortfall: str = ""
    timed_out: bool = False

    @property
    def cut_short(self) -> bool:
        """The time budget ended the run before it could establish the claim (no counterexample,
        no checker error): ``ntkcheck claims`` exits 3, never "holds"."""
        return self.timed_out and self.refuted == 0 and not self.error

    @property
    def unexpected(self) -> bool:
        if self.error:
            return True
        if not self.ran or self.cut_short:
            return False
        if self.status == "refuted":
            return self.refuted == 0
        return self.refuted > 0 or bool(self.shortfall)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClaimReport:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "reference": self.reference,
            "status": self.status,
            "tried": self.tried,
            "held": self.held,
            "refuted": self.refuted,
            "inconclusive": self.inconclusive,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 3),
            "counterexample": self.counterexample,
            "detail": self.detail,
            "error": self.error,
            "ran": self.ran,
            "min_held": self.min_held,
            "max_inconclusive": self.max_inconclusive,
            "shortfall": self.shortfall,
            "timed_out": self.timed_out,
            "unexpected": self.unexpected,
        }


class _Counterexample(AssertionError):
    """Raised inside the hypothesis test so that hypothesis shrinks the failing instance."""


class _OutOfTime(BaseException):
    """Raised inside the hypothesis test when the time budget is spent: not an ``Exception``, so
    hypothesis neither shrinks nor reports it, it stops the run at once."""


@dataclass
class _Tally:
    tried: int = 0
    held: int = 0
    inconclusive: int = 0
    skipped: int = 0
    failed: bool = False
    last: Any = None
    last_detail: str = ""
    details: list[str] = field(default_factory=list)

    def add(self, chk: Check, inst: Any) -> None:
        if chk.outcome is Outcome.FAILED:
            # hypothesis replays the shrunk instance last: keep the latest failure
            if not self.failed:
                self.tried += 1
            self.failed = True
            self.last, self.last_detail = inst, chk.detail
            return
        if self.failed:
            return  # shrinking: do not count
        if chk.outcome is Outcome.SKIPPED:
            self.skipped += 1
            return
        self.tried += 1
        if chk.outcome is Outcome.HELD:
            self.held += 1
        else:
            self.inconclusive += 1
            if len(self.details) < 3:
                self.details.append(chk.detail)


def _shortfall(claim: Claim, tally: _Tally, timed_out: str = "") -> str:
    if tally.failed or (claim.status == "refuted" and not timed_out):
        return ""
    why = [timed_out] if timed_out else []
    if tally.held < claim.min_held:
        why.append(f"{tally.held} instances held, the claim needs at least {claim.min_held} "
                   f"({tally.skipped} skipped, {tally.inconclusive} inconclusive)")
    if tally.tried and tally.inconclusive > claim.max_inconclusive * tally.tried:
        why.append(f"{tally.inconclusive} of {tally.tried} checked instances inconclusive, "
                   f"more than the budget {claim.max_inconclusive:.0%}")
    return "; ".join(why)


#: seconds of a claim run by default (``run_claim``'s ``time_budget``; ``ntkcheck claims --max-seconds``)
DEFAULT_TIME_BUDGET = 1800.0


def run_claim(claim: Claim, *, examples: int = 20, seed: int = 0, shrink: bool = True,
              time_budget: float | None = DEFAULT_TIME_BUDGET) -> ClaimReport:
    """Try ``claim`` on its pinned cases and on at least ``examples // claim.cost`` drawn instances.

    Drawing continues past that budget until ``claim.min_held`` instances have held (at
    most ``budget + 4 * min_held`` draws). The report fails the claim (``unexpected``) on a
    counterexample, a checker error, hypothesis giving up (``Unsatisfiable``), fewer than
    ``min_held`` instances held, or more than ``max_inconclusive`` of them inconclusive.

    Parameters
    ----------
    examples : int
        Hypothesis budget (``max_examples``) before dividing by the claim's cost.
    seed : int
        Hypothesis seed: the same seed draws the same instances.
    shrink : bool
        Shrink a counterexample (slower, gives a minimal one).
    time_budget : float, Budget or None
        Seconds for the run (default 1800; None: no limit; a ``Budget`` is shared, e.g. by the claims
        of one ``ntkcheck claims``). Checked between instances, and every decision inside an
        instance gets at most what is left; once spent no instance is drawn, a shrink stops at the
        last failing instance, and the report counts only what ran (``timed_out``).
    """
    budget = as_budget(time_budget)
    with scope(budget) as b:
        return _run_claim(claim, examples, seed, shrink, b)


def _run_claim(claim: Claim, examples: int, seed: int, shrink: bool, budget: Any) -> ClaimReport:
    """:func:`run_claim` under its time budget."""
    t0 = time.perf_counter()
    if not claim.available():
        return ClaimReport(claim.id, claim.reference, claim.status, 0, 0, 0, 0, 0, 0.0,
                           detail=f"not run: needs {', '.join(claim.requires)}", ran=False,
                           min_held=claim.min_held, max_inconclusive=claim.max_inconclusive)
    tally = _Tally()
    timed_out = ""
    for make in claim.examples:
        if budget.expired():
            break
        inst = make()
        try:
            tally.add(check_instance(claim, inst), inst)
        except TimeBudgetError:
            break  # the instance did not fit in what was left: not counted
        if tally.failed:
            break
    error = ""
    draws = max(1, int(examples) // max(1, claim.cost))
    if not tally.failed and (budget.expired() or tally.tried + tally.skipped < len(claim.examples)):
        timed_out = (f"time budget of {budget.seconds:g} s spent " + ("during the pinned cases" if tally.tried
                                                                      or tally.skipped else "before this claim started"))
    if not tally.failed and not timed_out:
        phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
        drawn = 0

        @_hseed(int(seed))
        @settings(max_examples=draws + 4 * claim.min_held, deadline=None, database=None, derandomize=False,
                  phases=phases, suppress_health_check=list(HealthCheck), print_blob=False,
                  report_multiple_bugs=False)
        @given(claim.instances())
        def _trial(inst: Any) -> None:
            nonlocal drawn
            if not tally.failed and drawn >= draws and tally.held >= claim.min_held:
                return  # draws done and the minimum met: the remaining draws are not checked
            if budget.expired():
                raise _OutOfTime
            drawn += 1
            try:
                chk = check_instance(claim, inst)
            except TimeBudgetError:
                raise _OutOfTime from None  # the instance did not fit in what was left: not counted
            tally.add(chk, inst)
            if chk.outcome is Outcome.FAILED:
                raise _Counterexample(chk.detail)

        try:
            _trial()
        except _Counterexample:
            pass
        except _OutOfTime:
            timed_out = (f"time budget of {budget.seconds:g} s spent after {drawn} drawn instances"
                         + (" (the counterexample below is the last failing one, shrinking stopped)"
                            if tally.failed else ""))
        except Unsatisfiable as exc:
            error = f"Unsatisfiable: hypothesis could not draw instances ({exc})"
        except Exception as exc:  # a checker bug: report it, do not hide it
            error = f"{type(exc).__name__}: {exc}"
    cex = describe(tally.last) if tally.failed else None
    detail = tally.last_detail if tally.failed else "; ".join(tally.details)
    return ClaimReport(
        claim.id, claim.reference, claim.status, tally.tried, tally.held, int(tally.failed),
        tally.inconclusive, tally.skipped, time.perf_counter() - t0, cex, detail, error,
        min_held=claim.min_held, max_inconclusive=claim.max_inconclusive,
        shortfall=_shortfall(claim, tally, timed_out), timed_out=bool(timed_out),
    )
