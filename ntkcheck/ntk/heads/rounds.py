r"""The rounds of the head-law certificate: each draws fresh heads, reads its sums through a lens
chosen from the heads before it, and turns them into bounds at its share of the failure probability.

Round ``j`` spends :math:`\delta_j = \delta/((j+1)(j+2))` (half for each side); the statements of
all rounds hold together with probability at least :math:`1 - \sum_j \delta_j > 1 - \delta`, so the
certificate keeps the largest lower and the smallest upper bound over the rounds. Round 0 (the
pilot) uses the identity lens: Bernstein with the range ``L`` below, matrix Chernoff above. Later
rounds use the preconditioned, truncated Gram below (Bernstein with the range ``B``, divided by
:math:`\|T\|^2`) and the quadratic form along ``v`` above (scalar Chernoff-Hoeffding, no
:math:`\log M`). A round's sizes and lens are fixed before its heads are drawn, from the clock and
from earlier heads only; a round the deadline interrupts is dropped
(``theory/ntk-head-law.md``, "Adaptive rounds").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from ...cgf import Empirical
from . import tail_bounds as tb
from .accumulate import Lens, RoundSums, bottom_bounds, draw_block
from .preconditioner import Estimate, make_lens, predicted_form, predicted_mu

#: heads of the first round at least this many (a few blocks of BLAS work)
MIN_HEADS = 64
#: heads of the pilot round at least this many
PILOT_HEADS = 256
#: largest number of heads one round draws
MAX_HEADS = 1 << 34
#: heads of the calibration block that sets a round's truncation level
CALIBRATION_HEADS = 256
#: stream numbers: round j draws from stream j; calibration blocks from _CALIB + j
_CALIB = 1 << 20
#: checkpoints per side of a round (its full size, half, a quarter)
CHECKPOINTS = 3
#: the rounds stop once upper <= TIGHT * lower
TIGHT = 1.25
#: each side of a round is sized for this ratio to the estimate (lower) and its inverse (upper)
_AIM = 0.85
#: a round's sizes grow at most this factor over the previous round's
_GROWTH = 8
#: share of the time left the last round is sized for (the rates are those of the previous rounds)
_LAST = 0.7


@dataclass(frozen=True)
class Setup:
    """What every round needs: the laws heads are drawn for (reduced or not), their dimension, the
    head law, ``L``, the rounding term ``eta`` and the seed of the head stream."""

    laws: list[Empirical]
    dim: int
    q_scale: float
    b_scale: float
    dist: str
    seed: int
    L: float
    eta: float
    reduced: int | None

    @property
    def M(self) -> int:
        return int(sum(law.n_atoms for law in self.laws))

    def block(self, k: int, count: int, stream: int) -> tuple[np.ndarray, np.ndarray]:
        return draw_block(k, count, self.dim, q_scale=self.q_scale, b_scale=self.b_scale, dist=self.dist,
                          seed=self.seed, stream=stream)


@dataclass(frozen=True)
class Outcome:
    """One checkpoint of a round (``side`` lower: its Gram; upper: its form along ``v``): ``c``/``g``
    (bounds of the bottom of the Gram), the form ``z`` and mean square ``w`` along ``v``, the bounds
    ``lower``/``upper`` at ``delta``, sizes, seconds, lens summary."""

    heads: int
    heads_gram: int
    c: float | None
    g: float
    z: float | None
    w: float | None
    lower: float
    upper: float
    delta: float
    seconds: float
    kind: str
    truncated: int
    B: float
    round: int = 0
    side: str = "lower"


@dataclass(frozen=True)
class Plan:
    """A round's sizes: ``gram`` heads enter the Gram, ``total`` heads the form along ``v``."""

    gram: int
    total: int


def marks(n: int) -> list[tuple[int, int]]:
    """Checkpoints ``(heads, i)`` of a side of ``n`` heads: ``n / 2^i`` for ``i < CHECKPOINTS`` (those of at
    least ``MIN_HEADS``, and ``n`` itself), smallest first."""
    out: dict[int, int] = {}
    for i in range(CHECKPOINTS - 1, -1, -1):
        m = n >> i
        if i == 0 or m >= MIN_HEADS:
            out.setdefault(m, i)
    return sorted(out.items())


def share(delta_j: float, i: int) -> float:
    r"""Failure probability of checkpoint ``i`` of one side of round ``j``: :math:`\delta_j 2^{-(i+2)}`
    (summed over the checkpoints of both sides, less than :math:`\delta_j`)."""
    return delta_j / 2.0 ** (i + 2)


def run_round(s: Setup, j: int, lens: Lens, plan: Plan, delta_j: float, deadline: float | None,
              stream: int) -> tuple[list[Outcome], RoundSums, bool]:
    """Draw ``plan.total`` heads from ``stream`` (the first ``plan.gram`` into the Gram), with bounds at the
    checkpoints of :func:`marks` of either side. When the deadline passes first the checkpoints reached
    are returned (their sizes were fixed before any head was drawn) and ``finished`` is False."""
    t0 = time.perf_counter()
    sums = RoundSums(s.laws, lens)
    gm, fm = marks(plan.gram), marks(plan.total) if lens.v is not None else []
    outs: list[Outcome] = []
    k = 0
    while sums.heads < plan.total:
        if deadline is not None and time.perf_counter() > deadline:
            return outs, sums, False
        gram = sums.heads_gram < plan.gram
        nxt = [m - sums.heads_gram for m, _ in gm if m > sums.heads_gram] if gram else []
        nxt += [m - sums.heads for m, _ in fm if m > sums.heads]
        c = min([sums.per_block(gram), plan.total - sums.heads, *nxt])
        Q, b = s.block(k, c, stream)
        sums.add(Q, b, gram=gram)
        k += 1
        for m, i in gm:
            if gram and sums.heads_gram == m:
                outs.append(replace(lower_at(s, lens, sums, share(delta_j, i), time.perf_counter() - t0), round=j))
        for m, i in fm:
            if sums.heads == m:
                outs.append(replace(upper_at(s, lens, sums, share(delta_j, i), time.perf_counter() - t0), round=j,
                                    side="upper"))
    return outs, sums, True


def _outcome(s: Setup, lens: Lens, sums: RoundSums, c: float | None, g: float, z: float | None,
             w: float | None, lower: float, upper: float, delta: float, seconds: float) -> Outcome:
    kind = "plain" if lens.T is None else "preconditioned"
    return Outcome(sums.heads, sums.heads_gram, c, g, z, w, lower, upper, delta, seconds, kind, sums.truncated,
                   s.L if lens.T is None else lens.B)


def lower_at(s: Setup, lens: Lens, sums: RoundSums, delta: float, seconds: float) -> Outcome:
    r"""The lower bound from the Gram's heads so far, failing with probability ``delta``: Bernstein on the
    bottom of the (preconditioned, truncated) Gram with the range ``L`` (``B``), divided by
    :math:`\|T\|^2`; with the identity lens and no direction, also matrix Chernoff's upper bound (at the
    upper side's ``delta``, ``t`` adding ``log M``)."""
    G, radius = sums.gram()
    c, g = bottom_bounds(G, radius) if math.isfinite(radius) else (None, math.inf)
    rng = s.L if lens.T is None else lens.B
    t = math.log(1.0 / delta)
    low = tb.bernstein_lower(c or 0.0, rng, sums.heads_gram, t) / lens.tau2 * (1.0 - 1e-12)
    lower = low - s.eta if low > s.eta else 0.0
    upper = math.inf
    if lens.T is None and lens.v is None and math.isfinite(g):
        upper = tb.chernoff_upper(g, s.L, sums.heads_gram, t + math.log(s.M)) * (1.0 + 1e-12) + s.eta
    return _outcome(s, lens, sums, c, g, None, None, lower, upper, delta, seconds)


def upper_at(s: Setup, lens: Lens, sums: RoundSums, delta: float, seconds: float) -> Outcome:
    """The upper bound from the quadratic form along ``v`` over the heads so far, failing with probability
    ``delta``: the smaller of Chernoff-Hoeffding (``delta / 2``) and the second-moment bound (``delta / 2``,
    two events of ``delta / 4``), with the range ``L_v``, divided by :math:`|v|^2`."""
    z, w = sums.form_moments()
    U = math.inf
    if math.isfinite(z):
        U = min(tb.chernoff_upper(z, lens.Lv, sums.heads, math.log(2.0 / delta)),
                tb.second_moment_upper(z, w, lens.Lv, sums.heads, math.log(4.0 / delta))) / lens.v2
    return _outcome(s, lens, sums, None, math.inf, z, w, 0.0, U * (1.0 + 1e-12) + s.eta, delta, seconds)


@dataclass
class Rates:
    """Seconds per head measured on finished rounds: in the Gram, and for the features alone."""

    gram: float = math.nan
    features: float = math.nan

    def update(self, sums: RoundSums) -> None:
        if sums.heads_gram:
            self.gram = sums.seconds_gram / sums.heads_gram
        if sums.heads:
            self.features = sums.seconds_features / sums.heads

    def seconds(self, plan: Plan) -> float:
        return plan.gram * (self.gram + self.features) + (plan.total - plan.gram) * self.features


def pilot_size(s: Setup) -> int:
    """Heads of the pilot round: enough for a Gram of full rank several times over (``8 M / dim``),
    and at least ``PILOT_HEADS``."""
    return int(min(MAX_HEADS, max(PILOT_HEADS, math.ceil(8 * s.M / s.dim))))


def plan_next(s: Setup, est: Estimate, lens: Lens, prev: Plan, t: float, rates: Rates,
              left: float | None, square: float) -> tuple[Plan, float, float]:
    """Sizes of the next round (lower side for a ratio ``_AIM``, upper for ``1 / _AIM``, each at most
    ``_GROWTH`` times the previous) cut to ``_LAST`` of the time left; also the heads either side needs for
    a factor 2 (the report's estimate)."""
    mu = predicted_mu(est, lens)
    rng = s.L if lens.T is None else lens.B
    want_g = tb.heads_for_lower(_AIM, rng, t) * rng * t / mu if mu > 0 else math.inf
    two_g = tb.heads_for_lower(0.5, rng, t) * rng * t / mu if mu > 0 else math.inf
    z = predicted_form(est, lens)
    want_u = two_u = math.inf
    if z > 0:  # the better of Chernoff-Hoeffding and the second-moment bound (mean square ``square z^2``)
        t8 = t + math.log(4.0)
        want_u = min(tb.heads_for_upper(1.0 / _AIM) * lens.Lv * t / z,
                     tb.heads_for_second_moment(1.0 / _AIM, z, square * z * z, lens.Lv, t8))
        two_u = min(tb.heads_for_upper(2.0) * lens.Lv * t / z,
                    tb.heads_for_second_moment(2.0, z, square * z * z, lens.Lv, t8))
    gram = int(min(max(want_g, MIN_HEADS), _GROWTH * max(prev.gram, MIN_HEADS), MAX_HEADS))
    total = int(min(max(want_u, gram), _GROWTH * max(prev.total, MIN_HEADS), MAX_HEADS))
    plan = Plan(gram, max(total, gram))
    if left is not None and rates.seconds(plan) > _LAST * left:
        f = _LAST * left / rates.seconds(plan)  # the last round: what the time left allows
        plan = Plan(max(1, int(plan.gram * f)), max(1, int(plan.total * f)))
    return plan, two_g, two_u


def run_fixed(s: Setup, delta: float, heads: int, pilot: int) -> tuple[list[Outcome], list[Lens]]:
    """A pilot of ``pilot`` heads (no statement: it only chooses the lens), then one round of
    ``heads`` heads with all of ``delta``."""
    est = Estimate(s.M)
    id_lens = Lens(None, 1.0, 1.0, s.L)
    _, sums, _ = run_round(s, 0, id_lens, Plan(pilot, pilot), 0.5, None, stream=_CALIB - 1)
    est.add(sums, None)
    lens, _ = make_lens(est, s.laws, s.L, s.block(0, CALIBRATION_HEADS, _CALIB), heads, math.log(2.0 / delta))
    outs, _, _ = run_round(s, 1, lens, Plan(heads, heads), delta, None, stream=1)
    return outs, [lens]


def run_adaptive(s: Setup, delta: float, seconds: float | None,
                 pilot: int) -> tuple[list[Outcome], str, tuple[float, float, Rates]]:
    """Rounds until ``upper <= TIGHT * lower``, the deadline, or ``MAX_HEADS``; the outcomes, why they
    stopped, and the heads (Gram, form) a factor 2 would need with the measured rates."""
    t0 = time.perf_counter()
    deadline = None if seconds is None else t0 + seconds
    est, rates = Estimate(s.M), Rates()
    lens = Lens(None, 1.0, 1.0, s.L)
    Tinv: np.ndarray | None = None
    plan = Plan(pilot, pilot)
    outs: list[Outcome] = []
    need = (math.inf, math.inf)
    j = 0
    while True:
        got, sums, finished = run_round(s, j, lens, plan, tb.round_delta(delta, j), deadline, stream=j)
        outs += got
        if not finished:
            why = (f"the time budget ({seconds:g} s) ran out during round {j + 1} ({plan.total} heads): "
                   f"{sums.heads} drawn, its checkpoints reached are kept")
            return outs, why, (*need, rates)
        rates.update(sums)
        est.add(sums, Tinv)
        lo, up = max(o.lower for o in outs), min(o.upper for o in outs)
        if lo > 0 and up <= TIGHT * lo:
            return outs, f"upper <= {TIGHT:g} x lower", (*need, rates)
        if plan.total >= MAX_HEADS:
            return outs, f"the schedule stops at {MAX_HEADS} heads a round", (*need, rates)
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return outs, f"the time budget ({seconds:g} s) is spent", (*need, rates)
        cal = s.block(0, CALIBRATION_HEADS, _CALIB + j + 1)
        t = math.log(2.0 / tb.round_delta(delta, j + 1))
        lens, Tinv = make_lens(est, s.laws, s.L, cal, 2 * max(plan.gram, MIN_HEADS), t)
        left = None if deadline is None else deadline - time.perf_counter()
        square = next((o.w / (o.z * o.z) for o in reversed(outs) if o.z and o.w and math.isfinite(o.w)), 3.0)
        plan, *need_ = plan_next(s, est, lens, plan, t, rates, left, square)
        need = (need_[0], need_[1])
        if left is not None and plan.gram < MIN_HEADS // 4:
            return outs, f"the time budget ({seconds:g} s) leaves no room for another round", (*need, rates)
        j += 1
