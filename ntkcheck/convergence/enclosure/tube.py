r"""A validated enclosure of the true gradient flow from a given state: a tube around a Taylor solution.

``theory/flow-numerics.md``, "The validated enclosure", states and proves what is computed here.
On each step :math:`[s_n, s_n + h]` the numerical solution is a polynomial
:math:`p_n(t) = \sum_{k=0}^{m+1} c_k t^k` (float coefficients, exact as stored: the Taylor polynomial of
the computed flow through the node :math:`q_n`). Its **defect** :math:`\delta = p_n' - f(p_n)` is bounded at
every :math:`t \in [0, h]`, not at sample points: the Taylor coefficients :math:`g_0..g_m` of
:math:`g(t) = f(p_n(t))` at ``t = 0`` are enclosed in ball arithmetic, and the Lagrange remainder
:math:`g^{(m+1)}(\tau)/(m+1)!` for all :math:`\tau \in [0, h]` by evaluating the same Taylor recursion
with the base point a ball containing :math:`p_n(\tau)` for every :math:`\tau` (so
:math:`|\delta(t)| \le \sum_k |d_k| t^k + |R| t^{m+1}`, :math:`d_k = (k+1)c_{k+1} - g_k`). The
**one-sided Lipschitz** bound :math:`\bar\mu \ge \lambda_{\max}(\mathrm{sym}\,Df)` holds on a box containing
the tube :math:`\{p(s) + \eta: |\eta| \le \bar e\}` over a segment of steps (:func:`~.point.field_mu`).
For the true solution :math:`\theta` from the same start, :math:`e = |\theta - p|` obeys
:math:`e' \le \bar\mu e + |\delta|` while :math:`e \le \bar e` (**Gronwall**), so
:math:`e(s_n + h) \le e^{\bar\mu h}(e(s_n) + \int_0^h|\delta|)`, and at a node the next polynomial starts at the
float value :math:`q_{n+1}` of :math:`p_n(h)`, a jump bounded in ball arithmetic. The bootstrap
:math:`e \le \bar e` on the segment is checked afterwards (else :math:`\bar e` is raised and the segment redone).

References: E. Hairer, S. P. Nørsett, G. Wanner, *Solving ODEs I*, Thm. I.10.6 (Gronwall with a
one-sided Lipschitz constant); W. Tucker, *Validated Numerics* (2011), ch. 6.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..._records import restore
from ...errors import DomainError
from ._model import Model
from ._model import field as model_field
from ._series import Taylor, U, _up
from .point import field_mu_line, line_of_path, loss_bounds

__all__ = ["Enclosure", "TubeOptions", "enclose"]


@dataclass(frozen=True)
class TubeOptions:
    """``order``: degree ``m`` of the enclosed jet (the polynomial has degree ``m + 1``); ``defect``: the
    target bound of :math:`\\sup|\\delta|` per step (Euclidean, absolute); ``segment``: the flow time of the first
    segment over which one :math:`\\bar\\mu` is proved; ``growth``: the target of
    :math:`\\bar\\mu\\times` (segment length) by which the next segment's length is chosen; ``cheap``: the growth :math:`\\bar\\mu\\times` (segment length) up to which the cheap bound
    :math:`|u|\\,M_2` is taken instead; ``max_step``: the longest Taylor step."""

    order: int = 10
    defect: float = 1e-9
    segment: float = 0.2
    growth: float = 0.1
    cheap: float = 0.02
    max_step: float = math.inf


@dataclass(frozen=True)
class _Step:
    s: float
    h: float
    coeffs: np.ndarray  # (m + 2, P)
    defect_int: float  # upper bound of the integral of |delta| over the step
    defect_sup: float
    box_mid: np.ndarray  # a box containing p(s + tau), tau in [0, h]
    box_rad: np.ndarray
    end: np.ndarray  # q_{n+1} = fl(p(h))
    jump: float  # |p(h) - q_{n+1}| (exact p(h))


@dataclass(frozen=True)
class Enclosure:
    r"""The tube: at node ``s[k]`` the true flow is within ``radius[k]`` (the particle metric
    :math:`D`) of ``states[k]``; between nodes within ``radius`` of the step's polynomial.

    Attributes
    ----------
    s, radius : node times and proved radii (``radius[0] = 0``: the flow starts at the given state)
    mu : per step, the proved one-sided Lipschitz bound used on it (``how``: ``"taylor-model"`` or ``"cheap"``)
    defect : per step, the proved :math:`\int|\delta|` (Euclidean)
    loss_upper : per node, a proved upper bound of the true flow's loss there
    complete : the tube reached the requested time (else the budget or a failure stopped it: ``message``)
    states : the nodes' float states (not serialised)
    """

    s: tuple[float, ...]
    radius: tuple[float, ...]
    mu: tuple[float, ...]
    defect: tuple[float, ...]
    loss_upper: tuple[float, ...]
    complete: bool
    message: str
    seconds: float
    states: tuple[np.ndarray, ...] = field(repr=False, compare=False, default=())
    how: tuple[str, ...] = ()
    mu_last: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"s": list(self.s), "radius": list(self.radius), "mu": list(self.mu), "defect": list(self.defect),
                "loss_upper": list(self.loss_upper), "complete": self.complete, "message": self.message,
                "seconds": self.seconds, "how": list(self.how), "mu_last": self.mu_last}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Enclosure:
        """The tube from its :meth:`to_dict` (the nodes' float states are not serialised: none)."""
        return restore(cls, d)


# ----------------------------------------------------------------------------- the Taylor solution


def solution_jet(mdl: Model, q: np.ndarray, order: int) -> np.ndarray:
    r"""Float Taylor coefficients :math:`c_0..c_{m+1}` of the flow through ``q``: :math:`c_{k+1} = g_k/(k+1)`."""
    c = np.zeros((order + 2, q.size))
    c[0] = q
    for k in range(order + 1):
        _, g = model_field(mdl, Taylor(c[: k + 1].copy(), None))
        c[k + 1] = g.mid[k] / (k + 1)
    if not np.all(np.isfinite(c)):
        raise DomainError("the Taylor solution of the flow is not finite")
    return c


def _step_size(c: np.ndarray, tol: float) -> float:
    """The step at which the last two terms of the series are at ``tol`` (the usual Taylor-method rule)."""
    hs = []
    for k in (c.shape[0] - 2, c.shape[0] - 1):
        a = float(np.linalg.norm(c[k])) * k
        if a > 0 and k > 1:
            hs.append((tol / a) ** (1.0 / (k - 1)))
    return 0.9 * min(hs) if hs else 1.0


#: the Taylor-model bound of mu holds three P x P arrays: beyond this many bytes only the cheap bound is used
HESSIAN_BYTES = 1 << 30

#: node times are multiples of this power of two, so that ``s + h`` is exact below ``2^21``
GRID = 2.0**-32


def _exact_step(s: float, h: float) -> tuple[float, float]:
    """``(s_next, h')`` on the grid of ``GRID``: ``s_next = s + h'`` exactly, ``0 < h' <= h``."""
    hh = max(math.floor(h / GRID), 1) * GRID
    s_next = s + hh
    if s_next >= 2.0**21 or Fraction(s) + Fraction(hh) != Fraction(s_next):
        raise DomainError(f"flow time {s_next:g} is beyond the enclosure's time grid (2^21)")
    return s_next, hh


def _shifted(c: np.ndarray, h: float) -> Taylor:
    r"""The Taylor coefficients in ``t`` of :math:`p(\tau + t)` for all :math:`\tau \in [0, h]` (balls)."""
    P, n = c.shape[1], c.shape[0]
    tm, tr = np.zeros((n, P)), np.zeros((n, P))
    tm[0], tr[0], tm[1] = h / 2, h / 2, 1.0  # tau + t, tau in [0, h]; n coefficients keep the products untruncated
    tau = Taylor(tm, tr)
    acc = Taylor.const(c[-1])
    for k in range(c.shape[0] - 2, -1, -1):
        acc = acc * tau + c[k]
    return acc  # type: ignore[return-value]


def _defect(mdl: Model, c: np.ndarray, h: float) -> tuple[float, float, np.ndarray, np.ndarray]:
    r"""Proved :math:`\int_0^h|\delta|`, :math:`\sup_{[0,h]}|\delta|`, and a box containing :math:`p([0, h])`."""
    m = c.shape[0] - 2
    _, g = model_field(mdl, Taylor(c[: m + 1].copy(), np.zeros((m + 1, c.shape[1]))))
    k1 = np.arange(1, m + 2, dtype=np.float64)[:, None]
    pd = c[1:] * k1  # (k + 1) c_{k+1}, rounded
    d_mid = pd - g.mid
    d_rad = _up(g.rad + U * np.abs(pd) + U * np.abs(d_mid))  # type: ignore[operator]
    dn = np.sqrt(_up(np.sum((np.abs(d_mid) + d_rad) ** 2, axis=1), c.shape[1])) * (1.0 + 4.0 * U)
    sh = _shifted(c, h)
    _, gr = model_field(mdl, sh)
    R = float(np.sqrt(_up(np.sum(gr.upper_abs()[m + 1] ** 2), c.shape[1]))) * (1.0 + 4.0 * U)
    powers = h ** np.arange(m + 2)
    sup = float(_up(np.sum(dn * powers[: m + 1]) + R * powers[m + 1], 2 * m))
    integral = float(_up(np.sum(dn * powers[1 : m + 2] / k1[:, 0]) + R * powers[m + 1] * h / (m + 2), 2 * m))
    return integral, sup, sh.mid[0], sh.rad[0]  # type: ignore[index]


def _node(c: np.ndarray, h: float) -> tuple[np.ndarray, float]:
    """``q = fl(p(h))`` and a proved bound of :math:`|p(h) - q|`."""
    q = c[-1].copy()
    for k in range(c.shape[0] - 2, -1, -1):
        q = q * h + c[k]
    ball = Taylor.const(c[-1])
    for k in range(c.shape[0] - 2, -1, -1):
        ball = ball.scale(h) + c[k]
    gap = np.abs(ball.mid[0] - q) + ball.rad[0]  # type: ignore[index]
    return q, float(np.sqrt(_up(np.sum(gap * gap), q.size)) * (1.0 + 4.0 * U))


def _take_step(mdl: Model, s: float, q: np.ndarray, opts: TubeOptions, h_max: float) -> _Step:
    c = solution_jet(mdl, q, opts.order)
    h = min(_step_size(c, opts.defect), h_max, opts.max_step)
    for _ in range(40):
        s_next, h = _exact_step(s, h)
        integral, sup, bm, br = _defect(mdl, c, h)
        if sup <= 10.0 * opts.defect or h < 1e-12:
            end, jump = _node(c, h)
            return _Step(s, h, c, integral, sup, bm, br, end, jump)
        h *= 0.5
    raise DomainError("the defect of the Taylor solution could not be made small: the flow is too stiff here")


# ----------------------------------------------------------------------------- Gronwall over a segment


def _gronwall(steps: list[_Step], e0: float, mu: float) -> tuple[list[float], float]:
    """Radii after each step and the largest radius anywhere on the segment (Euclidean)."""
    mu = max(mu, 0.0)
    e, out, top = e0, [], e0
    for st in steps:
        grow = (math.exp(mu * st.h) if mu * st.h < 709.0 else math.inf) * (1.0 + 8.0 * U)  # overflow: unbounded
        inside = (e + st.defect_int) * grow
        top = max(top, inside)
        e = float(_up(np.array(inside + st.jump)))
        out.append(e)
        top = max(top, e)
    return out, top


def _pieces(steps: list[_Step]) -> list[tuple[float, np.ndarray, float]]:
    return [(st.s, st.coeffs, st.h) for st in steps]


def _collect(mdl: Model, s: float, q: np.ndarray, s_end: float, opts: TubeOptions, span: float,
             pending: list[_Step], deadline: float | None) -> list[_Step]:
    """The steps of one segment from ``(s, q)``, up to a flow time ``span``: first those ``pending`` (computed
    before, they start at ``(s, q)``), then new ones; a step that would overshoot ``span`` by more than half is
    left in ``pending`` for the next segment."""
    steps: list[_Step] = []
    t, qq = s, q
    while t < s_end and t - s < span:
        st = pending.pop(0) if pending else _take_step(mdl, t, qq, opts, s_end - t)
        if steps and st.s + st.h - s > 1.5 * span:
            pending.insert(0, st)
            break
        steps.append(st)
        t, qq = t + st.h, st.end
        if deadline is not None and time.perf_counter() >= deadline:
            break
    return steps


def _prove_or_split(mdl: Model, steps: list[_Step], pending: list[_Step], e0: float, mu_prev: float, cheap: Any,
                    opts: TubeOptions) -> tuple[list[_Step], list[float], float, str]:
    """:func:`_prove_segment`; where the Taylor model of the segment is too wide (a softmax normaliser not enclosed
    away from 0), the segment is halved (its second half back to ``pending``), a single step retaken at half its
    length."""
    while True:
        try:
            radii, mu, how = _prove_segment(mdl, steps, e0, mu_prev, cheap, opts)
            return steps, radii, mu, how
        except DomainError:
            if len(steps) > 1:
                half = len(steps) // 2
                pending[:0] = steps[half:]
                steps = steps[:half]
                continue
            st = steps[0]
            if st.h < 1e-9:
                raise
            pending.clear()  # the steps after this one started at its end
            steps = [_take_step(mdl, st.s, st.coeffs[0], opts, st.h / 2.0)]


def _segment_mu(mdl: Model, steps: list[_Step], ebar: float, cheap: Any, opts: TubeOptions) -> tuple[float, str]:
    r""":math:`\bar\mu` on the tube of radius ``ebar`` around the segment: the cheap bound
    :math:`|u|\,M_2` (``cheap(centre, radius)`` returns :math:`M_2` on the particle-metric ball) when it costs
    little growth over the segment, else the Taylor-model bound on the residual part of the Hessian (the
    smaller of the two)."""
    a, b, r, w = line_of_path(_pieces(steps), ebar)
    mu_c = math.inf
    if cheap is not None:
        sq = math.sqrt(mdl.heads)
        reach = float(_up(np.array(np.linalg.norm(b) * w + np.linalg.norm(r)), a.size)) / sq * (1.0 + 4.0 * U)
        try:
            u_up = math.sqrt(2.0 * loss_bounds(mdl, a, _up(np.abs(b) * w + r), floor=False)[1])
            mu_c = float(_up(np.array(u_up * cheap(a, reach))))
        except DomainError:  # the box is too wide for the ball forward pass: no cheap bound here
            mu_c = math.inf
    if mu_c * 2.0 * w <= opts.cheap or a.size * a.size * 24 > HESSIAN_BYTES:
        return mu_c, "cheap"  # cheap enough, or the Hessian (three P x P arrays) does not fit
    return min(mu_c, field_mu_line(mdl, a, b, r, w, full=False)), "taylor-model"


def _prove_segment(mdl: Model, steps: list[_Step], e0: float, mu_prev: float, cheap: Any,
                   opts: TubeOptions) -> tuple[list[float], float, str]:
    r""":math:`\bar\mu` on the segment's tube, then Gronwall; the tube radius ``ebar`` assumed for
    :math:`\bar\mu` is raised until the radius stays below it."""
    span = steps[-1].s + steps[-1].h - steps[0].s
    growth = max(mu_prev, 0.0) * span
    if not growth < 700.0:  # exp overflows: no finite radius can be assumed for the segment
        raise DomainError(f"the tube's growth over a segment, exp({growth:.3g}), overflows")
    ebar = 4.0 * (e0 + sum(st.defect_int + st.jump for st in steps)) * math.exp(growth) + 1e-300
    for _ in range(6):
        if not math.isfinite(ebar):
            break
        with np.errstate(over="ignore"):  # an overflow is an infinite bound: the segment is then not proved
            mu, how = _segment_mu(mdl, steps, ebar, cheap, opts)
        radii, top = _gronwall(steps, e0, mu)
        if top <= ebar:
            return radii, mu, how
        ebar = 4.0 * top
    raise DomainError("the tube's radius could not be bounded on a segment (the bootstrap failed)")


@dataclass(frozen=True)
class Start:
    """Where a tube starts: time, state, proved radius (Euclidean) there, and the last segment's mu."""

    s: float
    q: np.ndarray
    e: float = 0.0
    mu: float = 0.0


def enclose(mdl: Model, theta0: np.ndarray, s_end: float, *, options: TubeOptions | None = None,
            deadline: float | None = None, progress: Any = None, cheap: Any = None,
            start: Start | None = None) -> Enclosure:
    r"""The tube of the true flow :math:`\dot\theta = -H\nabla\mathcal L` from ``theta0`` on ``[0, s_end]``.

    ``start`` continues an earlier tube (its last node) instead of starting at ``theta0``. ``cheap(centre,
    radius)``: an upper bound of :math:`\sup\|D^2z\|_\rho` on a ball (for the cheap :math:`\bar\mu`). Stops
    early (``complete=False``, the reason in ``message``) at ``deadline`` (``time.perf_counter``).
    """
    opts = options or TubeOptions()
    started = time.perf_counter()
    sq = math.sqrt(mdl.heads)
    st0 = start or Start(0.0, np.asarray(theta0, dtype=np.float64).copy())
    s, q, e, mu_prev = st0.s, st0.q, st0.e, st0.mu
    S, R, MU, DF, LU, ST, HOW = [s], [e / sq], [], [], [loss_bounds(mdl, q, np.full(q.size, e))[1]], [q.copy()], []
    message, span, cost = "", opts.segment, 0.0
    pending: list[_Step] = []
    while s < s_end:
        if deadline is not None and time.perf_counter() + cost >= deadline:  # the next segment would not fit
            message = f"the time budget was spent at s = {s:.4g}"
            break
        t_seg = time.perf_counter()
        try:
            steps = _collect(mdl, s, q, s_end, opts, span, pending, deadline)
            steps, radii, mu_prev, how = _prove_or_split(mdl, steps, pending, e, mu_prev, cheap, opts)
        except DomainError as exc:  # no proved continuation: the tube ends here, and says why
            message = f"the tube could not be continued at s = {s:.4g}: {exc}"
            break
        done = steps[-1].s + steps[-1].h - steps[0].s
        grew = max(mu_prev, 0.0) * done
        # the next segment's length: about opts.growth of growth each (mu decays along the run: they lengthen)
        span = done * min(2.0, max(0.5, opts.growth / grew)) if grew > 0 else 2.0 * done
        for st, r in zip(steps, radii, strict=True):
            s, q, e = st.s + st.h, st.end, r
            S.append(s)
            R.append(float(r / sq * (1.0 + 4.0 * U)))
            MU.append(mu_prev)
            DF.append(st.defect_int)
            HOW.append(how)
            LU.append(loss_bounds(mdl, q, np.full(q.size, e))[1])
            ST.append(q.copy())
        cost = time.perf_counter() - t_seg
        if progress is not None:
            progress(s, e)
    complete = s >= s_end
    return Enclosure(tuple(S), tuple(R), tuple(MU), tuple(DF), tuple(LU), complete,
                     message or "reached the requested time", time.perf_counter() - started, tuple(ST),
                     tuple(HOW), mu_prev)
