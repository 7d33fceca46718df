r"""Measured rates of the seeds' limit theorems: fitted slopes with confidence intervals.

A limit theorem bounds an error by a rate, ``err(x) <= C r(x)`` (``x`` = tokens ``N``, heads
``H``, depth ``L``, inverse temperature ``beta``; or time ``t`` for an exponential
convergence). An experiment measures the error at several ``x`` for several independent
seeds; :func:`fit_rate` fits, per seed, the least-squares slope of ``log err`` against
``log x`` (``scale="loglog"``) or against ``x`` (``scale="semilog"``), and reports the mean
slope with a Student-t 95 % confidence interval over the seeds.

The theorem's rate is an *upper bound*: a measurement is consistent with it when the
error decays at least as fast, and only a measurement that *shows* decay can say so.
:func:`fit_rate` compares the measured slope with the theorem's slope over the same ``x``
(the least-squares slope of ``log r(x)``, so that logarithmic factors such as
``sqrt(log N)`` are accounted for at the sizes measured), plus a stated ``slack``:

- :data:`SLOWER` (``"slower than the theorem's rate on this window"``): the whole interval
  lies above the theorem's slope plus the slack (decay significantly slower over the sizes
  measured; for a decay theorem this includes every interval at or above 0). For a bound
  ``err(x) <= C r(x)`` with a constant ``C`` (and sizes from which it applies) that the theorem
  does not give, no finite window refutes it: the error may follow ``C r(x)`` only beyond the
  sizes measured. So this is a statement about the window, never a refutation;
- ``"inconsistent"``: the same, for a fit marked ``refutes=True``: a theorem that binds on
  every window, such as a differential inequality ``E' <= -r E`` (Gronwall:
  ``E(s_2) <= e^{-r (s_2 - s_1)} E(s_1)`` for all ``s_1 < s_2``, the Langevin free energy of
  :mod:`ntkcheck.limits._langevin_lsi`), where decay significantly slower on one window
  contradicts it;
- ``"consistent"``: all of

  1. the whole interval lies on the theorem's side of 0 (below 0 for a decaying rate:
     decay is demonstrated; above 0 for a growth rate);
  2. the interval reaches the theorem's slope plus the slack (decay at least as fast is
     not excluded);
  3. the interval is no wider than ``|theorem slope|`` (the measurement resolves the
     theorem's rate from no decay at all) nor than ``max_ci_width`` -- or, for a decay
     rate, it lies wholly at or below the theorem's slope plus the slack (decay at least as
     fast is then shown, whatever the width);
  4. every mean error stands at least ``floor_factor`` times above the error of the
     reference solution (the limit the errors are measured against);

- ``"inconclusive"`` otherwise (decay not shown, too noisy, or on the reference's floor).

Calibration (``tests/limits/test_rates.py``, 2000 synthetic trials per case, truth known, 5
seeds): with no decay the rule says consistent in 0-0.4 % of trials (at most 5 % asserted),
with errors growing like ``x^0.1`` in at most 0.1 % (at most 2 % asserted), with decay at the
theorem's rate and log-noise of sd 0.1 in 93-98 % (at least 90 % asserted); each asserted
level holds at the 99 % Clopper-Pearson bound (table in ``theory/README.md``).

For ``scale="semilog"`` with ``theorem_slope=None`` the theorem promises exponential decay
at an unspecified rate: consistent when the whole interval is below zero and no wider than
``max_ci_width``, :data:`SLOWER` (or inconsistent with ``refutes=True``) when it is at or above zero.

Each experiment module (one per claim: :data:`EXPERIMENTS`) exposes
``run(*, size="default", seeds=5, seed=0, progress=None) -> LimitExperiment`` and
``SIZES`` (the names it accepts, ``"small"`` among them: the size the tests and the
notebook use).
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._budget import OutOfTime, scope
from .._records import restore
from .._validate import as_budget
from ..errors import NtkcheckError

__all__ = ["RateFit", "LimitExperiment", "fit_rate", "EXPERIMENTS", "run_experiment", "experiment_module",
           "SLOWER", "VERDICTS"]

#: experiment name (``ntkcheck experiment NAME``) -> module in :mod:`ntkcheck.limits`
EXPERIMENTS: dict[str, str] = {
    "chaos-tokens": "chaos_tokens",
    "heads-lln": "heads_lln",
    "depth-heads": "depth_heads",
    "langevin": "langevin",
    "low-temperature": "low_temperature",
    "stability": "stability",
    "joint-fluctuations": "joint_fluctuations",
}

#: the verdict of a fit significantly slower than a bound that a finite window cannot refute
SLOWER = "slower than the theorem's rate on this window"
#: every verdict, from best to worst (an experiment's verdict is the worst of its fits and checks)
VERDICTS: tuple[str, ...] = ("consistent", "inconclusive", SLOWER, "inconsistent")
_VERDICT_ORDER = {v: k for k, v in enumerate(VERDICTS)}


@dataclass(frozen=True)
class RateFit:
    r"""One measured rate beside the theorem's.

    Attributes
    ----------
    variable : str
        What varies: ``"N"``, ``"H"``, ``"L"``, ``"beta"``, ``"t"``.
    quantity : str
        What is measured, in words or symbols (``"E max_i |x_i^N(t) - xbar_i(t)|"``).
    xs : tuple of float
        The values of ``variable``.
    errors : ndarray, shape (seeds, len(xs))
        The measured error, one row per seed.
    scale : {"loglog", "semilog"}
        ``log err`` against ``log x`` or against ``x``.
    theorem : str
        The theorem's rate as written (``"N^(-1/4)"``).
    theorem_slope : float or None
        Its slope over ``xs`` on the same scale (None: decay at an unspecified rate).
    slope : float
        Mean over seeds of the per-seed least-squares slopes.
    ci : (float, float)
        Student-t 95 % confidence interval of ``slope`` over the seeds.
    per_seed : tuple of float
        The per-seed slopes.
    reference_error : float or None
        Estimated error of the reference the errors are measured against.
    verdict : {"consistent", "inconclusive", SLOWER, "inconsistent"}
    reason : str
        Why the verdict is what it is, in one sentence.
    refutes : bool
        Whether decay significantly slower on this window contradicts the theorem (a differential
        inequality, which binds on every window): then the verdict is ``"inconsistent"``, else
        :data:`SLOWER`.
    """

    variable: str
    quantity: str
    xs: tuple[float, ...]
    errors: np.ndarray
    scale: str
    theorem: str
    theorem_slope: float | None
    slope: float
    ci: tuple[float, float]
    per_seed: tuple[float, ...]
    reference_error: float | None
    verdict: str
    reason: str
    refutes: bool = False

    @property
    def seeds(self) -> int:
        return int(self.errors.shape[0])

    def line(self) -> str:
        """One line: measured slope, CI, theorem's slope, verdict."""
        th = "unspecified (decay)" if self.theorem_slope is None else f"{self.theorem_slope:+.3f}"
        axis = f"log err vs {'log ' if self.scale == 'loglog' else ''}{self.variable}"
        return (f"{self.quantity} vs {self.variable}: slope {self.slope:+.3f} "
                f"[{self.ci[0]:+.3f}, {self.ci[1]:+.3f}] ({self.seeds} seeds, {axis}); "
                f"theorem {self.theorem}: {th} -> {self.verdict}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RateFit:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d, errors=lambda e: np.asarray(e, dtype=float))

    def to_dict(self) -> dict[str, Any]:
        return {"variable": self.variable, "quantity": self.quantity, "xs": list(self.xs),
                "errors": self.errors.tolist(), "scale": self.scale, "theorem": self.theorem,
                "theorem_slope": self.theorem_slope, "slope": self.slope, "ci": list(self.ci),
                "per_seed": list(self.per_seed), "reference_error": self.reference_error,
                "verdict": self.verdict, "reason": self.reason, "refutes": self.refutes}

    def plot(self, ax: Any) -> None:
        """Errors per seed (faint), their mean, the fitted rate and the theorem's rate anchored
        at the first mean error; log axes as the scale says; labelled, with a legend."""
        xs = np.asarray(self.xs, dtype=float)
        mean = np.exp(np.mean(np.log(self.errors), axis=0))
        for k, row in enumerate(self.errors):
            ax.plot(xs, row, color="0.7", lw=0.8, marker=".", label="per seed" if k == 0 else None)
        ax.plot(xs, mean, "o-", color="C0", label="geometric mean over seeds")
        u = np.log(xs) if self.scale == "loglog" else xs
        c = float(np.mean(np.log(mean) - self.slope * u))
        ax.plot(xs, np.exp(c + self.slope * u), "--", color="C1",
                label=f"fit: slope {self.slope:+.2f} [{self.ci[0]:+.2f}, {self.ci[1]:+.2f}]")
        if self.theorem_slope is not None:
            ax.plot(xs, mean[0] * np.exp(self.theorem_slope * (u - u[0])), ":", color="C3",
                    label=f"theorem {self.theorem} (slope {self.theorem_slope:+.2f})")
        if self.reference_error and self.reference_error >= 1e-3 * float(np.min(self.errors)):
            ax.axhline(self.reference_error, color="0.5", lw=0.8, ls="-.", label="reference error")
        elif self.reference_error:  # far below the data: a line would only squash the panel
            ax.annotate(f"reference error {self.reference_error:.1g} (below the axis)", (0.02, 0.02),
                        xycoords="axes fraction", fontsize=7, color="0.4")
        if self.scale == "loglog":
            _log_ticks(ax, xs)
        ax.set_yscale("log")
        ax.set_xlabel(self.variable)
        ax.set_ylabel(self.quantity)
        ax.set_title(f"{self.verdict}", fontsize=9)
        # below the axes, never over the data (issue 25: legends covered the curves)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)


def _log_ticks(ax: Any, xs: np.ndarray) -> None:
    """A log x axis labelled at the sizes measured only (at most five, plain numbers, no minor
    labels): matplotlib's minor labels ``3x10^2 4x10^2`` ran into each other (issue 25)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    ax.set_xscale("log")
    ticks = xs if xs.size <= 5 else xs[np.unique(np.linspace(0, xs.size - 1, 5).round().astype(int))]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(lambda v, _pos: f"{v:g}")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


@functools.lru_cache(maxsize=64)
def _t975(dof: int) -> float:
    """The 0.975 quantile of Student's t with ``dof`` degrees of freedom (cached: the fit is
    called thousands of times by the calibration)."""
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


def _slopes(u: np.ndarray, logE: np.ndarray) -> np.ndarray:
    """Least-squares slope of every row of ``logE`` against ``u``."""
    uc = u - u.mean()
    return (logE - logE.mean(axis=1, keepdims=True)) @ uc / float(uc @ uc)


#: a theorem slope smaller than this in absolute value states no direction (neither decay nor growth)
_FLAT = 1e-12


def _slower(refutes: bool, what: str) -> tuple[str, str]:
    """The verdict and reason of a fit significantly slower than the theorem's rate: a refutation only
    for a theorem that binds on every window (``refutes``)."""
    if refutes:
        return "inconsistent", f"{what}; the theorem binds on every window (a differential inequality): refuted"
    return SLOWER, (f"{what}; slower than the theorem's rate on this window only: a bound err <= C r(x) with a "
                    "constant the theorem does not give is not refuted by a finite window")


def _verdict(ci: tuple[float, float], th: float | None, *, slack: float, max_ci_width: float,
             floor: tuple[float, float] | None, refutes: bool = False) -> tuple[str, str]:
    """The rule of the module docstring: ``(verdict, reason)``.

    ``floor`` is ``(smallest mean error, floor_factor * reference error)`` when a reference
    error was given.
    """
    width = ci[1] - ci[0]
    if th is None:
        if ci[0] >= 0:
            return _slower(refutes, "no decay: the whole interval is at or above 0")
        if ci[1] >= 0:
            return "inconclusive", "the interval reaches 0: decay not demonstrated"
        if width > max_ci_width:
            return "inconclusive", f"interval wider than {max_ci_width:g}"
        return "consistent", "the whole interval is below 0: exponential decay"
    line = th + slack
    if ci[0] > line:
        what = "decay significantly slower than" if th < 0 else "growth significantly faster than"
        return _slower(refutes, f"{what} the theorem's rate: the interval lies above {line:+.3f}")
    direction = 0 if abs(th) < _FLAT else (1 if th > 0 else -1)
    if direction < 0 and ci[1] >= 0:
        return "inconclusive", "the interval reaches 0: decay not demonstrated"
    if direction > 0 and ci[0] <= 0:
        return "inconclusive", "the interval reaches 0: growth not demonstrated"
    if floor is not None and floor[0] < floor[1]:
        return "inconclusive", (f"the smallest mean error {floor[0]:.3g} is within the floor {floor[1]:.3g} "
                                f"(floor factor x reference error)")
    cap = max_ci_width if direction == 0 else min(max_ci_width, abs(th))
    # an interval wholly at or below the theorem's slope shows decay at least as fast, whatever its width
    beyond = direction < 0 and ci[1] <= line
    if width > cap and not beyond:
        return "inconclusive", (f"interval wider than {cap:.3g}"
                                + (" (|theorem slope|: it cannot resolve the rate from no decay)"
                                   if cap < max_ci_width else ""))
    kind = "decay" if direction <= 0 else "growth"
    return "consistent", (f"{kind} shown, and the interval's lower end {ci[0]:+.3f} is at or below the theorem's "
                          f"slope {th:+.3f}" + (f" (+ slack {slack:g})" if slack else "")
                          + f": {kind} at least as fast as the theorem's rate is not excluded")


def fit_rate(
    xs: Sequence[float],
    errors: Any,
    *,
    variable: str,
    quantity: str,
    theorem: str,
    theorem_rate: Callable[[np.ndarray], np.ndarray] | None,
    scale: str = "loglog",
    reference_error: float | None = None,
    slack: float = 0.0,
    max_ci_width: float = 1.0,
    floor_factor: float = 3.0,
    refutes: bool = False,
) -> RateFit:
    r"""Fit the decay of ``errors`` (seeds x len(xs)) and compare it with the theorem's rate.

    Parameters
    ----------
    xs : sequence of float
        At least 3 distinct positive values (``loglog``) or distinct values (``semilog``).
    errors : array_like, shape (seeds, len(xs))
        Positive finite errors, at least 2 seeds.
    theorem_rate : callable or None
        ``r(x)`` up to a constant; its slope over ``xs`` is the theorem's slope. None: the
        theorem promises decay at an unspecified rate (``semilog`` only).
    slack : float
        Allowance added to the theorem's slope before comparing (stated by the caller, e.g.
        for a lower-order term the fit cannot separate); 0 by default.
    max_ci_width, floor_factor : float
        See the module docstring (the width cap is also never above ``|theorem slope|``).
    refutes : bool
        The theorem binds on every window (a differential inequality): decay significantly slower
        is ``"inconsistent"``. Default False: a bound ``err <= C r(x)`` with an unknown constant,
        which a finite window never refutes (:data:`SLOWER`).

    Raises
    ------
    NtkcheckError
        On fewer than 2 seeds or 3 sizes, non-positive or non-finite errors, mismatched shapes.
    """
    if scale not in ("loglog", "semilog"):
        raise NtkcheckError(f"fit_rate: scale must be 'loglog' or 'semilog', got {scale!r}")
    x = np.asarray(xs, dtype=float)
    E = np.atleast_2d(np.asarray(errors, dtype=float))
    if x.ndim != 1 or len(x) < 3 or len(np.unique(x)) != len(x):
        raise NtkcheckError(f"fit_rate: need at least 3 distinct values of {variable}, got {list(x)}")
    if E.shape[1] != len(x) or E.shape[0] < 2:
        raise NtkcheckError(f"fit_rate: errors must have shape (seeds >= 2, {len(x)}), got {E.shape}")
    if not (np.all(np.isfinite(E)) and np.all(E > 0)):
        raise NtkcheckError(f"fit_rate: errors must be positive and finite (measured: {E.tolist()})")
    if scale == "loglog" and not np.all(x > 0):
        raise NtkcheckError(f"fit_rate: log-log fit needs positive {variable}")
    if theorem_rate is None and scale != "semilog":
        raise NtkcheckError("fit_rate: an unspecified theorem rate is only meaningful for exponential decay (semilog)")
    u = np.log(x) if scale == "loglog" else x
    logE = np.log(E)
    per = _slopes(u, logE)
    n = len(per)
    mean = float(per.mean())
    half = _t975(n - 1) * float(per.std(ddof=1)) / math.sqrt(n)
    ci = (mean - half, mean + half)
    th = None if theorem_rate is None else float(
        _slopes(u, np.log(np.asarray(theorem_rate(x), dtype=float))[None, :])[0])
    floor = None
    if reference_error is not None:
        floor = (float(np.min(np.exp(logE.mean(axis=0)))), floor_factor * reference_error)
    verdict, reason = _verdict(ci, th, slack=slack, max_ci_width=max_ci_width, floor=floor, refutes=refutes)
    return RateFit(variable, quantity, tuple(float(v) for v in x), E, scale, theorem, th, mean, ci,
                   tuple(float(p) for p in per), reference_error, verdict, reason, bool(refutes))


@dataclass(frozen=True)
class LimitExperiment:
    """Result of one limit-theorem experiment.

    Attributes
    ----------
    name : str
        The experiment's name in :data:`EXPERIMENTS`.
    reference : str
        Seed and place, e.g. ``"seed 002 Thm. 4.2"``.
    setting : str
        The experiment in one or two sentences (model, sizes, reference solution).
    fits : tuple of RateFit
        The measured rates (one per variable).
    checks : mapping str -> bool
        Other conclusions tested directly (e.g. ``"convexity along interpolations"``).
    notes : tuple of str
        What the reader should know (the head scaling used, a missing factor in a proof).
    elapsed : float
        Wall-clock seconds.
    data : mapping
        Extra curves for the figure (JSON-serialisable values).
    """

    name: str
    reference: str
    setting: str
    fits: tuple[RateFit, ...]
    checks: Mapping[str, bool] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    elapsed: float = 0.0
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """The worst fit verdict (:data:`VERDICTS`); ``"inconsistent"`` also when a direct check fails. Without fits:
        ``"consistent"`` when every direct check holds (``"inconclusive"`` with no checks either)."""
        empty = "consistent" if self.checks else "inconclusive"  # an experiment of direct checks only
        worst = max((f.verdict for f in self.fits), key=_VERDICT_ORDER.__getitem__, default=empty)
        if self.checks and not all(self.checks.values()):
            return "inconsistent"
        return worst

    def lines(self) -> list[str]:
        out = [f"{self.name} ({self.reference}): {self.verdict}", f"  {self.setting}"]
        out += [f"  {f.line()}" for f in self.fits]
        out += [f"  check: {k}: {'holds' if v else 'FAILS'}" for k, v in self.checks.items()]
        out += [f"  note: {n}" for n in self.notes]
        out.append(f"  ({self.elapsed:.1f} s)")
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LimitExperiment:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d, fits=lambda fs: tuple(RateFit.from_dict(f) for f in fs))

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "ntkcheck/experiment/1", "name": self.name, "reference": self.reference,
                "setting": self.setting, "verdict": self.verdict, "fits": [f.to_dict() for f in self.fits],
                "checks": dict(self.checks), "notes": list(self.notes), "elapsed": self.elapsed,
                "data": dict(self.data)}

    def plot(self, fig: Any = None) -> Any:
        """One log-scale panel per fit (an experiment of direct checks only: one panel listing them);
        returns the matplotlib figure."""
        import matplotlib.pyplot as plt

        k = max(1, len(self.fits))
        if fig is None:
            fig = plt.figure(figsize=(4.6 * k, 5.2), layout="constrained")  # room for the legends below
        axes = fig.subplots(1, k, squeeze=False)[0]
        for ax, f in zip(axes, self.fits, strict=False):
            f.plot(ax)
        if not self.fits:
            import textwrap

            lines = [f"{'holds' if ok else 'FAILS'}: {textwrap.shorten(name, 62)}" for name, ok in self.checks.items()]
            axes[0].axis("off")
            axes[0].text(0.0, 1.0, "\n".join(lines) or "no checks", va="top", fontsize=7, family="monospace",
                         transform=axes[0].transAxes)
        fig.suptitle(f"{self.name} ({self.reference}): {self.verdict}", fontsize=10)
        return fig


def experiment_module(name: str) -> Any:
    """The module implementing experiment ``name`` (``NtkcheckError`` lists the names)."""
    if name not in EXPERIMENTS:
        raise NtkcheckError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f"{__package__}.{EXPERIMENTS[name]}")


#: seconds of an experiment by default (``run_experiment``'s ``time_budget``; ``--max-seconds``)
DEFAULT_TIME_BUDGET = 900.0


def run_experiment(name: str, *, size: str = "default", seeds: int = 5, seed: int = 0,
                   progress: bool | None = None, time_budget: float | None = DEFAULT_TIME_BUDGET) -> LimitExperiment:
    """Run experiment ``name`` at ``size`` over ``seeds`` independent seeds starting at ``seed``.

    ``time_budget`` (seconds, default 900; None: no limit; :mod:`ntkcheck._budget`) is checked at every
    step of the experiment's progress (a size, a seed, a block of layers or of flow time): once it is
    spent the experiment stops there and is ``"inconclusive"``, with a note saying where it stopped;
    no rate is fitted on part of the sizes.
    """
    mod = experiment_module(name)
    if size not in mod.SIZES:
        raise NtkcheckError(f"experiment {name}: unknown size {size!r}; known: {', '.join(mod.SIZES)}")
    if seeds < 2:
        raise NtkcheckError(f"experiment {name}: need at least 2 seeds for a confidence interval, got {seeds}")
    budget = as_budget(time_budget)
    try:
        with scope(budget, stoppable=True) as b:
            return mod.run(size=size, seeds=seeds, seed=seed, progress=progress)
    except OutOfTime as exc:
        summary = (mod.__doc__ or name).strip().splitlines()[0]
        return LimitExperiment(name, f"theory/limits-{name}.md", summary, (), {}, (
            f"stopped by the time budget of {b.seconds:g} s during {exc.stage} (size {size}, {seeds} seeds): no "
            "rate is fitted on part of the sizes, so nothing is concluded; raise --max-seconds (time_budget) or "
            "use a smaller --size",), elapsed=float(b.seconds or 0.0) - b.remaining())
