r"""The NTK of the head law (``H`` = infinity), certified with a stated probability.

Seed 003 Prop. 8 is a statement about the mean-field NTK at FixUp, an expectation over the
head law :math:`\rho`,

.. math::

    K_\rho = E_{\theta\sim\rho}\, X_\theta, \qquad
    X_\theta = W^{1/2}\Phi_\theta\Phi_\theta^T W^{1/2} \quad (M \times M,\ \text{PSD}),

whose finite-head Gram :math:`G_H = \frac1H\sum_h X_{\theta_h}` (:func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`) is
an unbiased estimator. Every :math:`X_\theta` has :math:`\lambda_{\max} \le L` whatever
:math:`\rho` (features are convex combinations of atoms). From ``H`` i.i.d. heads and a
certified lower bound ``c`` (upper bound ``g``) of :math:`\lambda_{\min}(G_H)`, with probability
at least :math:`1 - \delta` over the heads drawn,

.. math::

    \lambda_{\min}(K_\rho) \ge x^2 - \eta, \quad x^2 + x\sqrt{2Lt/H} + Lt/(3H) = c,
    \qquad
    \lambda_{\min}(K_\rho) \le U(g) + \eta,

the first by Bernstein's inequality applied to :math:`u^T G_H u` (``u`` the bottom
eigenvector of :math:`K_\rho`: no dimension factor), the second by the matrix Chernoff lower
tail (J. A. Tropp, "User-friendly tail bounds for sums of random matrices", Found. Comput.
Math. 12 (2012), Thm. 1.1; a factor ``M``); :math:`\eta` covers the rounding of the drawn
heads and, for Gaussian heads, of the reduction to the span of the atoms. The heads are
drawn in blocks and their Gram accumulated with a proved error (features never whole); ``H``
starts at four times the positivity threshold for a pilot estimate of :math:`\lambda_{\min}` and
doubles until the lower bound is positive or the time budget is spent, round ``j`` using
:math:`\delta_j = \delta/((j+1)(j+2))`.

References: seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 5, Prop. 8;
``theory/ntk-head-law.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import _budget
from ..._records import restore
from ...cgf import Empirical, as_laws
from ...errors import InputError
from . import _law_steps as steps
from .rank import AtomSpan, atom_span

__all__ = ["HeadLawRound", "HeadLawBound", "head_law_bound", "DEFAULT_DELTA", "DEFAULT_SECONDS"]

#: failure probability of the head-law statements unless another is asked for
DEFAULT_DELTA = 1e-6
#: time budget of the adaptive head count, in seconds
DEFAULT_SECONDS = 20.0
#: heads of the first round at least this many (a few blocks of BLAS work)
_MIN_HEADS = 64
#: largest number of heads the schedule reaches
_MAX_HEADS = 1 << 34


@dataclass(frozen=True)
class HeadLawRound:
    """One round of the schedule: ``heads`` drawn in total, the certified bounds ``draw_lower``
    (``None``: not certified positive) and ``draw_upper`` of the draw's :math:`\\lambda_{\\min}`, the
    bounds ``lower``/``upper`` on :math:`\\lambda_{\\min}(K_\\rho)` this round gives at failure
    probability ``delta``, and the seconds it took."""

    heads: int
    draw_lower: float | None
    draw_upper: float
    lower: float
    upper: float
    delta: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"heads": self.heads, "draw_lower": self.draw_lower, "draw_upper": self.draw_upper,
                "lower": self.lower, "upper": self.upper, "delta": self.delta, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeadLawRound:
        """The round from its :meth:`to_dict`."""
        return restore(cls, d)


@dataclass(frozen=True)
class HeadLawBound:
    r"""What is certified about :math:`\lambda_{\min}(K_\rho)`, the NTK of the head law.

    Attributes
    ----------
    status : str
        ``"positive"`` (``lower > 0``, probability at least ``1 - delta``), ``"singular"`` (a
        kernel proved exactly by the dependence structure: probability 1), ``"not separated"``
        (no positive lower bound within the budget: ``upper`` still holds), ``"not run"``.
    delta : float
        Failure probability of ``lower`` and ``upper`` together, over the heads drawn.
    lower, upper : float or None
        :math:`\lambda_{\min}(K_\rho) \in [\mathrm{lower}, \mathrm{upper}]`.
    heads : int
        Heads drawn for the last round (0: none).
    rounds : tuple of HeadLawRound
    L : float or None
        The bound on one head's Gram.
    eta : float
        What rounding (of the heads, and of the reduction to the span) adds to both bounds.
    reduced_dim : int or None
        The dimension of the span the Gaussian heads were drawn in (None: the tokens' own).
    seconds : float
    detail : str
        Why the schedule stopped, or why nothing was drawn.
    heads_estimate : int or None
        Heads that would put the lower bound within a factor 2 of the draw's :math:`\lambda_{\min}`
        (from the last draw; None when unknown).
    """

    status: str
    delta: float
    lower: float | None
    upper: float | None
    heads: int = 0
    rounds: tuple[HeadLawRound, ...] = field(default=())
    L: float | None = None
    eta: float = 0.0
    reduced_dim: int | None = None
    seconds: float = 0.0
    detail: str = ""
    heads_estimate: int | None = None

    @property
    def positive(self) -> bool:
        return self.status == "positive"

    def statement(self) -> str:
        """The certified statement in one sentence (what, with which probability, from how many heads)."""
        if self.status == "singular":
            return f"lambda_min(K_rho) = 0 exactly ({self.detail})"
        if self.status == "not run":
            return f"not computed ({self.detail})"
        if self.upper is None:
            return f"no bound: {self.detail}"
        p = f"with probability >= 1 - {self.delta:g} over the {self.heads} heads drawn"
        up = f"lambda_min(K_rho) <= {self.upper:.3g}"
        if self.status == "positive":
            return f"{p}: {self.lower:.3g} <= lambda_min(K_rho); {up}"
        return f"{p}: {up}; no positive lower bound ({self.detail})"

    def report_lines(self) -> list[str]:
        """The ``head law`` block of the ``screen`` and ``gram`` reports."""
        out = [f"  head law (H = inf)  {self.statement()}"]
        if self.rounds:
            r = self.rounds[-1]
            dl = "not certified" if r.draw_lower is None else f">= {r.draw_lower:.3g}"
            out.append(f"    draw of {r.heads} heads: lambda_min {dl}, <= {r.draw_upper:.3g}; L = {self.L:.3g}, "
                       f"rounding {self.eta:.1g}; {len(self.rounds)} round(s), {self.seconds:.1f} s"
                       + (f", heads drawn in the {self.reduced_dim}-dimensional span of the atoms"
                          if self.reduced_dim else ""))
        if self.status == "not separated" and self.heads_estimate:
            out.append(f"    about {self.heads_estimate} heads would give a bound within a factor 2 of the draw "
                       "(a larger --head-law-seconds)")
        return out

    def training_clause(self) -> str:
        """A clause for a screening's bottom line: ``", lambda_min(K_rho) >= x with probability ..."``
        when the head law is certified positive, else ``""``."""
        if not self.positive:
            return ""
        return f", lambda_min(K_rho) >= {self.lower:.3g} with probability >= 1 - {self.delta:g}"

    def compare(self, statement: str, agreement: str, message: str, kernel: int) -> tuple[str, str]:
        """Seed 003 Prop. 8 against this certificate: the cross-check's ``(agreement, message)`` for a
        branch ``statement`` and the head law's kernel ``kernel`` proved by the dependence structure.

        A positive head law against a proved kernel disagrees (unless the event of probability
        ``delta`` happened); against independent CGFs it agrees, whatever the draw showed."""
        said = f" Head law: {self.statement()}."
        if self.status != "positive":
            return agreement, message + said
        if statement == "necessity" or kernel > 0:
            return "disagrees", (message + said + " A kernel is proved, so this contradicts it (or the event of "
                                 f"probability <= {self.delta:g} happened).")
        if statement == "sufficiency" and agreement != "disagrees":
            return "agrees", message + said + " As Prop. 8 says."
        return agreement, message + said

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "delta": self.delta, "lower": self.lower, "upper": self.upper,
                "heads": self.heads, "rounds": [r.to_dict() for r in self.rounds], "L": self.L, "eta": self.eta,
                "reduced_dim": self.reduced_dim, "seconds": self.seconds, "detail": self.detail,
                "heads_estimate": self.heads_estimate, "statement": self.statement()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeadLawBound:
        """The certificate from its :meth:`to_dict` (``statement`` is derived and not read)."""
        return restore(cls, d)


# ---------------------------------------------------------------------------- the rounds


@dataclass(frozen=True)
class _Setup:
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
    trace: float  # sum_i R_i^2 >= tr K_rho >= M lambda_min(K_rho)


def _setup(laws: list[Empirical], span: AtomSpan, *, q_scale: float, b_scale: float, dist: str,
           seed: int) -> _Setup:
    """``L``, the reduction to the span (Gaussian heads) and the rounding terms."""
    d = laws[0].dim
    red = steps.reduce_to_span(laws, span) if dist == "gaussian" else None
    draw_laws = laws if red is None else red.laws
    dim = d if red is None else red.dim
    R = np.maximum(steps.sample_radii(laws), steps.sample_radii(draw_laws))
    L = max(steps.head_bound(laws), steps.head_bound(draw_laws)) if red is not None else steps.head_bound(laws)
    eta = steps.eta_draw(R, L, dist, dim, q_scale, b_scale)
    if red is not None:
        eta += steps.eta_atoms(red.eps, R, L, d, q_scale, b_scale)
    return _Setup(draw_laws, dim, q_scale, b_scale, dist, seed, L, eta, None if red is None else red.dim,
                  float(np.sum(R**2)))


def _grow(acc: steps.Accumulated, s: _Setup, target: int, block_no: int, deadline: float | None) -> int | None:
    """Draw heads up to ``target`` in total into ``acc``; the next block number, or None when the
    deadline passed first (the round is then incomplete and must not be used)."""
    per = steps.head_blocks(target, s.dim)
    while acc.heads < target:
        if deadline is not None and time.perf_counter() > deadline:
            return None
        c = min(per, target - acc.heads)
        Q, b = steps.draw_block(block_no, c, s.dim, q_scale=s.q_scale, b_scale=s.b_scale, dist=s.dist, seed=s.seed)
        acc.add(s.laws, Q, b)
        block_no += 1
    return block_no


def _round(acc: steps.Accumulated, s: _Setup, j: int, delta_j: float, M: int, t0: float) -> HeadLawRound:
    """The bounds of round ``j`` from the accumulated Gram: certified ``c`` and ``g``, then
    Bernstein (``t = log(2/delta_j)``) and Chernoff (``t = log(2M/delta_j)``)."""
    G, radius = acc.gram()
    H = acc.heads
    c, g = steps.bottom_bounds(G, radius) if (acc.why is None and math.isfinite(radius)) else (None, math.inf)
    lower = steps.bernstein_lower(c or 0.0, s.L, H, math.log(2.0 / delta_j))
    upper = steps.chernoff_upper(g, s.L, H, math.log(2.0 * M / delta_j)) if math.isfinite(g) else math.inf
    lower = max(0.0, lower - s.eta) if lower > s.eta else 0.0
    return HeadLawRound(H, c, g, lower, upper + s.eta, delta_j, time.perf_counter() - t0)


def _threshold(s: _Setup, M: int, delta: float, pilot: float | None) -> float:
    r"""Heads below which no lower bound can be positive in the first round: :math:`L t / (3 c)` at the
    pilot's :math:`\lambda_{\min}` ``c``, and at least :math:`L M t / (3 \sum_i R_i^2)` (as
    :math:`M \lambda \le \mathrm{tr} K_\rho \le \sum_i R_i^2`)."""
    t = math.log(2.0 / steps.round_delta(delta, 0))
    need = s.L * M * t / (3.0 * s.trace)
    if pilot is not None and pilot > 0:
        need = max(need, s.L * t / (3.0 * pilot))
    return need


def _first_heads(need: float) -> int:
    r"""The first round: a power of two at least four times the positivity threshold ``need`` (the
    lower bound is then about 0.3 of the draw's :math:`\lambda_{\min}`), and at least ``_MIN_HEADS``."""
    return int(min(_MAX_HEADS, 2 ** math.ceil(math.log2(max(_MIN_HEADS, 4.0 * need)))))


def _estimate(rounds: Sequence[HeadLawRound], L: float, delta: float, pilot: float | None) -> int | None:
    """Heads for a lower bound of half the draw's lambda_min: ``5.25 L t / c`` (``t`` of the next round)."""
    c = next((r.draw_lower for r in reversed(rounds) if r.draw_lower), None) or pilot
    if not c:
        return None
    t = math.log(2.0 / steps.round_delta(delta, len(rounds)))
    return int(math.ceil(5.25 * L * t / c))


def _rate(s: _Setup, H: int) -> float:
    """Seconds per head, timed on a probe block drawn from a separate stream (its heads are
    discarded: the schedule depends on the clock, never on the heads it certifies with)."""
    n = min(H, 1 << 10, steps.head_blocks(H, s.dim))
    probe = steps.Accumulated(sum(law.n_atoms for law in s.laws))
    t = time.perf_counter()
    Q, b = steps.draw_block(0, n, s.dim, q_scale=s.q_scale, b_scale=s.b_scale, dist=s.dist, seed=s.seed, stream=1)
    probe.add(s.laws, Q, b)
    return max((time.perf_counter() - t) / n, 1e-12)


def _schedule(s: _Setup, M: int, delta: float, *, pilot: float | None, fixed: int | None,
              seconds: float | None) -> tuple[list[HeadLawRound], str]:
    """The rounds: ``fixed`` heads once (all of ``delta``); or, adaptively, from :func:`_first_heads`
    (cut to what fits in the budget at the probed rate; nothing at all when even the positivity
    threshold does not fit), doubling until the lower bound is positive or the next round would not
    fit in ``seconds``. A round that overruns the budget is dropped (its size is part of the statement)."""
    t0 = time.perf_counter()
    acc = steps.Accumulated(M)
    rounds: list[HeadLawRound] = []
    if fixed is not None:
        _grow(acc, s, fixed, 0, None)
        rounds.append(_round(acc, s, 0, delta, M, t0))
        return rounds, f"{fixed} heads, as asked"
    need = _threshold(s, M, delta, pilot)
    H = _first_heads(need)
    deadline = None if seconds is None else t0 + seconds
    if seconds is not None:
        rate = _rate(s, H)
        left = 0.9 * (deadline - time.perf_counter())  # type: ignore[operator]
        if pilot is not None and need * rate > left:
            return rounds, (f"not attempted: a positive lower bound needs more than {need:.3g} heads, about "
                            f"{need * rate:.3g} s at the measured {rate * 1e3:.3g} ms per head (budget {seconds:g} s)")
        if H * rate > left:
            H = max(_MIN_HEADS, 2 ** int(math.floor(math.log2(max(left / rate, 1.0)))))
    block_no, j = 0, 0
    while True:
        start = time.perf_counter()
        nxt = _grow(acc, s, H, block_no, deadline)
        if nxt is None:
            return rounds, f"the time budget ({seconds:g} s) ran out during the round of {H} heads, which is dropped"
        block_no = nxt
        rounds.append(_round(acc, s, j, steps.round_delta(delta, j), M, t0))
        if rounds[-1].lower > 0:
            return rounds, "the lower bound is positive"
        took = time.perf_counter() - start
        if H * 2 > _MAX_HEADS:
            return rounds, f"the schedule stops at {_MAX_HEADS} heads"
        if deadline is not None and time.perf_counter() + 2.0 * took > deadline:
            return rounds, (f"the next round ({2 * H} heads, ~{2 * took:.0f} s) would exceed the {seconds:g} s "
                            "budget")
        H, j = 2 * H, j + 1


def head_law_bound(
    samples: Any,
    *,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    dist: str = "gaussian",
    seed: int = 0,
    delta: float = DEFAULT_DELTA,
    heads: int | None = None,
    seconds: float | None = DEFAULT_SECONDS,
    pilot: float | None = None,
    structure: Any = None,
    span: AtomSpan | None = None,
) -> HeadLawBound:
    r"""Certify :math:`\lambda_{\min}(K_\rho)` for the head law ``dist`` with scales ``q_scale``, ``b_scale``.

    Parameters
    ----------
    samples : list of Empirical or (N_i, d) float arrays
    q_scale, b_scale, dist
        The head law :math:`\rho` (as :func:`~ntkcheck.ntk.gram_matrix.features.init_heads`).
    seed : int
        Seed of the head-law stream (independent of the heads ``init_heads(H, d, seed=seed)`` draws).
    delta : float
        Failure probability of the statement, in (0, 1).
    heads : int or None
        A fixed number of heads (one round, all of ``delta``); None: the adaptive schedule.
    seconds : float or None
        Time budget of the adaptive schedule (None: no limit).
    pilot : float or None
        An estimate of :math:`\lambda_{\min}(K_\rho)` (a draw's :math:`\lambda_{\min}`) that sizes the
        first round; it is not part of the statement.
    structure : DependenceStructure, optional
        When it predicts a kernel, :math:`K_\rho` is singular exactly and nothing is drawn.
    span : AtomSpan, optional
        :func:`~ntkcheck.ntk.heads.rank.atom_span` of the samples, if computed.

    Returns
    -------
    HeadLawBound

    Examples
    --------
    >>> x = np.array([[-1.0], [1.0]])
    >>> hl = head_law_bound([x], heads=2000, delta=0.1, q_scale=2.0, b_scale=10.0)
    >>> hl.status, hl.lower > 0.05, hl.upper < 0.2     # lambda_min(K_rho) = 0.0925 by quadrature
    ('positive', True, True)
    """
    laws = as_laws(samples)
    _check(delta, heads, seconds, dist)
    seconds = _budget.capped(seconds)  # inside screen or a command: never past its time budget
    if structure is not None and structure.predicted_kernel > 0:
        return HeadLawBound("singular", delta, 0.0, 0.0,
                            detail=f"the dependence structure proves a kernel of dimension {structure.predicted_kernel}")
    t0 = time.perf_counter()
    M = sum(law.n_atoms for law in laws)
    s = _setup(laws, atom_span(laws) if span is None else span, q_scale=float(q_scale), b_scale=float(b_scale),
               dist=dist, seed=int(seed))
    rounds, why = _schedule(s, M, delta, pilot=pilot, fixed=heads, seconds=seconds)
    secs = time.perf_counter() - t0
    est = _estimate(rounds, s.L, delta, pilot)
    if not rounds:
        return HeadLawBound("not separated", delta, None, None, 0, (), s.L, s.eta, s.reduced, secs, why, est)
    last = rounds[-1]
    status = "positive" if last.lower > 0 else "not separated"
    if status == "not separated" and last.draw_lower is None:
        why = f"{why}; the draw's Gram is not certified positive"
    return HeadLawBound(status, delta, last.lower, last.upper, last.heads, tuple(rounds), s.L, s.eta, s.reduced,
                        secs, why, est)


def _check(delta: Any, heads: Any, seconds: Any, dist: Any) -> None:
    if not (isinstance(delta, (int, float)) and 0.0 < float(delta) < 1.0):
        raise InputError(f"delta: expected a probability in (0, 1), got {delta!r}")
    if heads is not None and (isinstance(heads, bool) or not isinstance(heads, (int, np.integer)) or heads < 1):
        raise InputError(f"heads: expected a positive integer or None, got {heads!r}")
    if seconds is not None and not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"seconds: expected a time budget >= 0 or None, got {seconds!r}")
    if dist not in ("gaussian", "uniform"):
        raise InputError(f"dist: expected 'gaussian' or 'uniform', got {dist!r}")
