r"""The rounds of the head-law certificate: each draws fresh heads, reads its sums through a lens
chosen from the heads before it, and turns them into bounds at its share of the failure probability.

Round ``j`` spends at most :math:`\delta_j = \delta/((j+1)(j+2))`: half over the checkpoints of its
lower side (:func:`share`), half on its upper side, whose checkpoints are read off one confidence
sequence (one event for all of them); the statements of all checkpoints hold together with
probability at least :math:`1 - \sum_j \delta_j > 1 - \delta`, so the certificate keeps the largest
lower and the smallest upper bound among them. Round 0 (the
pilot) uses the identity lens: Bernstein with the range ``L`` below, matrix Chernoff above. Later
rounds use the preconditioned, truncated Gram below (Bernstein with the range ``B``, divided by
:math:`\|T\|^2`) and the quadratic form along ``v`` above (a betting confidence sequence with the
range ``L_v``, no :math:`\log M`). A round's lens and base sizes are fixed before its heads are drawn, from the clock
and from earlier heads only, and every checkpoint's heads are fixed in advance; a round the
deadline interrupts keeps the checkpoints it reached (``theory/ntk-head-law.md``, "Adaptive rounds").
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


def share(delta_j: float, i: int) -> float:
    r"""Failure probability of checkpoint ``i`` of the lower side of round ``j`` (and of both sides of the pilot):
    :math:`\frac{\delta_j}{2} \frac{1}{(i+1)(i+2)}` (summed over all checkpoints of a side: :math:`\delta_j / 2`)."""
    return delta_j / (2.0 * (i + 1) * (i + 2))


def checkpoint(base: int, i: int) -> int:
    """Heads at checkpoint ``i`` of a side of base size ``base``: ``base 2^(i - 2)`` (a quarter, half, the
    base, then doublings past it), at least 1."""
    return max(1, base << (i - 2) if i >= 2 else base >> (2 - i))


class Round:
    r"""One round: a lens and a stream fixed before its heads are drawn, and base sizes ``plan``.

    The Gram's heads are the blocks ``0, 1, ...`` of stream ``(j, 0)``; the form's heads are the first
    ``plan.gram`` of those, then the blocks of stream ``(j, 1)``: every checkpoint's set of heads is
    fixed in advance, whatever the schedule later decides. Each side has checkpoints at
    :func:`checkpoint` sizes (a quarter of its base, half, the base, then doublings, as far as the
    round is extended), a checkpoint smaller than ``MIN_HEADS`` (but the base) skipped. Checkpoint ``i`` of
    the lower side fails with probability :func:`share`; the upper side's checkpoints all read one
    confidence sequence, failing together with probability ``delta_j / 2``; its bets are fixed before
    each block from the form's earlier heads (:meth:`_bet`)."""

    def __init__(self, s: Setup, j: int, lens: Lens, plan: Plan, delta_j: float, stream: int,
                 single: bool = False) -> None:
        self.s, self.j, self.lens, self.plan, self.delta_j, self.stream = s, j, lens, plan, delta_j, stream
        self.single = single  # one checkpoint per side, at the base, with half of delta_j each
        self.sums = RoundSums(s.laws, lens)
        self.outs: list[Outcome] = []
        self._t0 = time.perf_counter()
        self._ka = self._kb = 0  # next block of either stream
        self._ga = 0  # heads of stream (j, 0) drawn
        self._ig = self._if = 0  # next checkpoint index of either side
        self._lg = self._lf = 0  # size of the last checkpoint emitted on either side
        self._form = lens.v is not None

    def _share(self, i: int) -> float:
        return self.delta_j / 2.0 if self.single else share(self.delta_j, i)

    def _next(self, base: int, i: int, last: int) -> tuple[int, int]:
        """The next checkpoint ``(size, index)`` above the size ``last`` emitted, from index ``i`` on
        (skipping those below ``MIN_HEADS``, but never the base; only the base when ``single``)."""
        if self.single:
            return (base, 2) if last < base else (1 << 62, 3)
        while True:
            m = checkpoint(base, i)
            if m > last and (m >= MIN_HEADS or i >= 2):
                return m, i
            i += 1

    def advance(self, gram: int, total: int, deadline: float | None) -> bool:
        """Draw until the Gram has ``gram`` heads and the form ``total`` (Gram first); False when the
        deadline passed first (the checkpoints reached are in ``outs``)."""
        sums, s = self.sums, self.s
        while sums.heads_gram < gram or (self._form and sums.heads < total):
            if deadline is not None and time.perf_counter() > deadline:
                self._read_upper()
                return False
            if sums.heads_gram < gram:  # stream (j, 0): the Gram, and the form while inside the base Gram
                in_form = self._form and self._ga < self.plan.gram
                c = min(sums.per_block(True), gram - sums.heads_gram,
                        self._next(self.plan.gram, self._ig, self._lg)[0] - sums.heads_gram)
                if in_form:
                    c = min(c, self.plan.gram - self._ga,
                            self._next(self.plan.total, self._if, self._lf)[0] - sums.heads)
                    sums.bet_lambda = self._bet(total)
                Q, b = s.block(self._ka, c, 2 * self.stream)
                self._ka += 1
                self._ga += c
                sums.add(Q, b, gram=True, form=in_form)
            else:  # stream (j, 1): the form only
                c = min(sums.per_block(False), total - sums.heads,
                        self._next(self.plan.total, self._if, self._lf)[0] - sums.heads)
                sums.bet_lambda = self._bet(total)
                Q, b = s.block(self._kb, c, 2 * self.stream + 1)
                self._kb += 1
                sums.add(Q, b, gram=False, form=True)
            self._check()
        return True

    def _bet(self, total: int) -> float:
        """The bet of the next block of the form (:func:`~ntkcheck.ntk.heads.tail_bounds.bet`), from the heads
        before it only: tuned for ``total`` heads with the variance of the form so far (of the lens's
        calibration heads while fewer than ``CALIBRATION_HEADS`` have entered)."""
        sums = self.sums
        var = self.lens.zvar
        if sums.heads >= CALIBRATION_HEADS:
            z, w = sums.form_moments()
            var = w - z * z
        return tb.bet(self.lens.Lv, math.log(2.0 / self.delta_j), total, var)

    def _check(self) -> None:
        """Bounds at the checkpoints just reached."""
        sums = self.sums
        m, i = self._next(self.plan.gram, self._ig, self._lg)
        if sums.heads_gram == m:
            self.outs.append(replace(lower_at(self.s, self.lens, sums, self._share(i), self._seconds()),
                                     round=self.j))
            self._ig, self._lg = i + 1, m
        if self._form:
            m, i = self._next(self.plan.total, self._if, self._lf)
            if sums.heads == m:
                self.outs.append(replace(upper_at(self.s, self.lens, sums, self.delta_j / 2.0, self._seconds()),
                                         round=self.j, side="upper"))
                self._if, self._lf = i + 1, m

    def _read_upper(self) -> None:
        """At the deadline: the upper side's confidence sequence read at the heads drawn so far (it holds at
        every head count at once, so this costs no failure probability)."""
        sums = self.sums
        if self._form and sums.heads > self._lf:
            self.outs.append(replace(upper_at(self.s, self.lens, sums, self.delta_j / 2.0, self._seconds()),
                                     round=self.j, side="upper"))
            self._lf = sums.heads

    def _seconds(self) -> float:
        return time.perf_counter() - self._t0


def _outcome(s: Setup, lens: Lens, sums: RoundSums, c: float | None, g: float, z: float | None,
             w: float | None, lower: float, upper: float, delta: float, seconds: float) -> Outcome:
    kind = "plain" if lens.T is None else "preconditioned"
    return Outcome(sums.drawn, sums.heads_gram, c, g, z, w, lower, upper, delta, seconds, kind, sums.truncated,
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
    """The upper bound from the quadratic form along ``v`` over the heads so far: the confidence sequence
    :func:`~ntkcheck.ntk.heads.tail_bounds.betting_upper` with the range ``L_v``, divided by :math:`|v|^2`.
    It holds at every number of heads at once, so all checkpoints of the side fail together with
    probability at most ``delta`` (half of the round's)."""
    z, w = sums.form_moments()
    U = math.inf
    if math.isfinite(z) and sums.z_finite:
        U = tb.betting_upper(sums.bets, math.log(1.0 / delta)) / lens.v2
    return _outcome(s, lens, sums, None, math.inf, z, w, 0.0, U * (1.0 + 1e-12) + s.eta, delta, seconds)


@dataclass
class Rates:
    """Seconds per head measured on finished rounds: in the Gram, and for the features alone."""

    gram: float = math.nan
    features: float = math.nan

    def update(self, sums: RoundSums) -> None:
        if sums.heads_gram:
            self.gram = sums.seconds_gram / sums.heads_gram
        if sums.drawn:
            self.features = sums.seconds_features / sums.drawn

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
    if z > 0:  # the confidence sequence with the mean square ``square z^2`` seen so far
        want_u = tb.heads_for_betting(1.0 / _AIM, z, square * z * z, lens.Lv, t)
        two_u = tb.heads_for_betting(2.0, z, square * z * z, lens.Lv, t)
    gram = int(min(max(want_g, MIN_HEADS), _GROWTH * max(prev.gram, MIN_HEADS), MAX_HEADS))
    total = int(min(max(want_u, gram), _GROWTH * max(prev.total, MIN_HEADS), MAX_HEADS))
    plan = Plan(gram, max(total, gram))
    if left is not None and rates.seconds(plan) > _LAST * left:
        f = _LAST * left / rates.seconds(plan)  # the last round: what the time left allows
        plan = Plan(max(1, int(plan.gram * f)), max(1, int(plan.total * f)))
    return plan, two_g, two_u


def run_fixed(s: Setup, delta: float, heads: int, pilot: int) -> list[Outcome]:
    """A pilot of ``pilot`` heads (no statement: it only chooses the lens), then one round of ``heads``
    heads with all of ``delta`` (half for each side, no intermediate checkpoints)."""
    est = Estimate(s.M)
    first = Round(s, 0, Lens(None, 1.0, 1.0, s.L), Plan(pilot, pilot), 0.5, stream=_CALIB - 1)
    first.advance(pilot, pilot, None)
    est.set(0, first.sums, None)
    lens, _ = make_lens(est, s.laws, s.L, s.block(0, CALIBRATION_HEADS, _CALIB), heads, math.log(2.0 / delta))
    r = Round(s, 1, lens, Plan(heads, heads), delta, stream=1, single=True)
    r.advance(heads, heads, None)
    return r.outs


def _tight(outs: list[Outcome]) -> bool:
    lo, up = max(o.lower for o in outs), min(o.upper for o in outs)
    return lo > 0 and up <= TIGHT * lo


def run_adaptive(s: Setup, delta: float, seconds: float | None,
                 pilot: int) -> tuple[list[Outcome], str, tuple[float, float, Rates]]:
    """Rounds until ``upper <= TIGHT * lower``, the deadline, or ``MAX_HEADS``; the outcomes, why they
    stopped, and the heads (Gram, form) a factor 2 would need with the measured rates.

    After a round reaches its base sizes, a new round (a new lens from every earlier head) starts when
    its planned sizes fit in ``_LAST`` of the time left and both its sides (the Gram and the form) at least
    double the current round's; otherwise the current round is extended (the side further from the
    estimate doubled, same lens, same streams). At the deadline the upper side's confidence sequence is
    read once more at the heads drawn."""
    deadline = None if seconds is None else time.perf_counter() + seconds
    est, rates = Estimate(s.M), Rates()
    cur = Round(s, 0, Lens(None, 1.0, 1.0, s.L), Plan(pilot, pilot), tb.round_delta(delta, 0), stream=0)
    done: list[Outcome] = []
    Tinv: np.ndarray | None = None
    need = (math.inf, math.inf)
    g, tot = pilot, pilot
    while True:
        finished = cur.advance(g, tot, deadline)
        outs = done + cur.outs
        if not finished:
            why = (f"the time budget ({seconds:g} s) ran out during round {cur.j + 1}: its checkpoints reached "
                   "are kept")
            return outs, why, (*need, rates)
        rates.update(cur.sums)
        est.set(cur.j, cur.sums, Tinv)
        if outs and _tight(outs):
            return outs, f"upper <= {TIGHT:g} x lower", (*need, rates)
        if max(g, tot) >= MAX_HEADS:
            return outs, f"the schedule stops at {MAX_HEADS} heads a round", (*need, rates)
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return outs, f"the time budget ({seconds:g} s) is spent", (*need, rates)
        t = math.log(2.0 / tb.round_delta(delta, cur.j + 1))
        square = next((o.w / (o.z * o.z) for o in reversed(outs) if o.z and o.w and math.isfinite(o.w)), 3.0)
        plan, *need_ = plan_next(s, est, cur.lens, Plan(g, tot), t, rates, left, square)
        need = (need_[0], need_[1])
        # a new round restarts both sides: only worth it when it can at least double both
        if left is None or (plan.gram >= 2 * cur.sums.heads_gram and plan.total >= 2 * cur.sums.heads):
            cal = s.block(0, CALIBRATION_HEADS, _CALIB + cur.j + 1)
            lens, Tinv = make_lens(est, s.laws, s.L, cal, plan.gram, t)
            done = outs
            cur = Round(s, cur.j + 1, lens, plan, tb.round_delta(delta, cur.j + 1), stream=cur.j + 1)
            g, tot = plan.gram, plan.total
        else:  # extend the current round (same lens, nested heads): the side(s) further from the estimate
            g, tot = _extend(outs, est, g, tot)


def _extend(outs: list[Outcome], est: Estimate, g: int, tot: int) -> tuple[int, int]:
    """Doubled sizes for the side whose best bound is further from the estimate of
    :math:`\\lambda_{\\min}(K_\rho)` (both when they are within 10% of each other)."""
    lam = max(float(np.linalg.eigvalsh((est.K + est.K.T) * 0.5)[0]), 0.0)
    lo, up = max(o.lower for o in outs), min(o.upper for o in outs)
    bad_lo = lam / lo if lo > 0 else math.inf
    bad_up = up / lam if lam > 0 else math.inf
    if not (math.isfinite(bad_lo) and math.isfinite(bad_up)) or abs(bad_lo - bad_up) <= 0.1 * min(bad_lo, bad_up):
        return 2 * g, 2 * tot
    return (2 * g, tot) if bad_lo > bad_up else (g, 2 * tot)
