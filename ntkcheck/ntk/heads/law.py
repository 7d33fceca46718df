r"""The NTK of the head law (``H`` = infinity), certified with a stated probability.

Seed 003 Prop. 8 is a statement about the mean-field NTK at FixUp, an expectation over the
head law :math:`\rho`,

.. math::

    K_\rho = E_{\theta\sim\rho}\, X_\theta, \qquad
    X_\theta = W^{1/2}\Phi_\theta\Phi_\theta^T W^{1/2} \quad (M \times M,\ \text{PSD}),

whose finite-head Gram :math:`G_H = \frac1H\sum_h X_{\theta_h}` (:func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`) is
an unbiased estimator. Every :math:`X_\theta` has :math:`\lambda_{\max} \le L` whatever
:math:`\rho` (features are convex combinations of atoms). Rounds of fresh i.i.d. heads, each read
through a lens fixed by earlier heads (:mod:`~ntkcheck.ntk.heads.preconditioner`), give with
probability at least :math:`1 - \delta` over all heads drawn

.. math::

    \lambda_{\min}(K_\rho) \ge x^2/\|T\|^2 - \eta, \quad x^2 + x\sqrt{2Bt/H} + Bt/(3H) = c_T,
    \qquad
    \lambda_{\min}(K_\rho) \le U/|v|^2 + \eta,

the first by Bernstein's inequality along the bottom eigenvector of :math:`T K_\rho T` (``c_T`` a
certified lower bound of the bottom of the Gram of the heads' :math:`T X_\theta T` truncated to the
range ``B``; no dimension factor; ``T = I``, ``B = L`` in the pilot round), the second by a
betting confidence sequence ``U`` for the mean of :math:`v^T X_\theta v` along a direction ``v``
(:func:`~ntkcheck.ntk.heads.tail_bounds.betting_upper`: no factor ``M``, valid at every head count
at once; matrix Chernoff in the pilot round); :math:`\eta` covers the
rounding of the drawn heads and, for Gaussian heads, of the reduction to the span of the atoms.
The heads are drawn in blocks, their sums accumulated with proved errors
(:mod:`~ntkcheck.ntk.heads.accumulate`); the rounds (:mod:`~ntkcheck.ntk.heads.rounds`) run until
the bounds are within 25% of each other or the time budget is spent, never refusing up front.

References: seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 5, Prop. 8;
``theory/ntk-head-law.md``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import _budget
from ..._records import restore
from ...cgf import Empirical, as_laws
from ...errors import InputError
from . import rounds
from .draw_rounding import eta_atoms, eta_draw
from .head_range import head_bound, sample_radii
from .rank import AtomSpan, atom_span
from .span_reduction import reduce_to_span

__all__ = ["HeadLawRound", "HeadLawBound", "head_law_bound", "DEFAULT_DELTA", "DEFAULT_SECONDS"]

#: failure probability of the head-law statements unless another is asked for
DEFAULT_DELTA = 1e-6
#: time budget of the adaptive head count, in seconds
DEFAULT_SECONDS = 20.0


@dataclass(frozen=True)
class HeadLawRound:
    """One checkpoint of round ``round`` (``side`` ``"lower"``: read off the round's Gram; ``"upper"``: off
    its quadratic form along the round's direction): ``heads`` drawn in the round so far (the first
    ``heads_gram`` into its Gram), the certified bounds ``draw_lower`` (``None``: not certified positive)
    and ``draw_upper`` of the bottom of that Gram (preconditioned and truncated when ``kind`` is
    ``"preconditioned"``: ``truncated`` heads scaled to the range ``B``), the upper bound ``form`` of the
    mean quadratic form along the direction, the bounds ``lower``/``upper`` on
    :math:`\\lambda_{\\min}(K_\\rho)` it gives at failure probability ``delta`` (the lower checkpoints'
    deltas, plus the upper side's of each round counted once: its checkpoints read one confidence sequence
    and fail together, sum to less than the certificate's), and the seconds since the round began."""

    heads: int
    draw_lower: float | None
    draw_upper: float
    lower: float
    upper: float
    delta: float
    seconds: float
    heads_gram: int = 0
    kind: str = "plain"
    truncated: int = 0
    B: float | None = None
    form: float | None = None
    round: int = 0
    side: str = "lower"

    def to_dict(self) -> dict[str, Any]:
        return {"heads": self.heads, "draw_lower": self.draw_lower, "draw_upper": self.draw_upper,
                "lower": self.lower, "upper": self.upper, "delta": self.delta, "seconds": self.seconds,
                "heads_gram": self.heads_gram, "kind": self.kind, "truncated": self.truncated, "B": self.B,
                "form": self.form, "round": self.round, "side": self.side}

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
        Heads drawn in all rounds together (0: none); the statement is over all of them.
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
        Heads one more round would need for bounds within a factor 2 of the estimate of
        :math:`\lambda_{\min}(K_\rho)` (None when unknown).
    seconds_estimate : float or None
        The seconds that round would take at the rates measured on the rounds run.
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
    seconds_estimate: float | None = None

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
        lows = [r for r in self.rounds if r.side == "lower"]
        if lows:
            r = lows[-1]
            dl = "not certified" if r.draw_lower is None else f">= {r.draw_lower:.3g}"
            how = ("preconditioned Gram" if r.kind == "preconditioned" else "Gram") + f" of {r.heads_gram} heads"
            out.append(f"    last round: {how}, lambda_min {dl}; L = {self.L:.3g}, rounding {self.eta:.1g}; "
                       f"{self.rounds[-1].round + 1} round(s), {self.seconds:.1f} s"
                       + (f", heads drawn in the {self.reduced_dim}-dimensional span of the atoms"
                          if self.reduced_dim else ""))
            out.append(f"    stopped: {self.detail}")
        if self.heads_estimate and not self._tight():
            secs = "" if self.seconds_estimate is None else f", about {self.seconds_estimate:.3g} s"
            out.append(f"    about {self.heads_estimate} more heads{secs} would give bounds within a factor 2 "
                       "(a larger --head-law-seconds)")
        return out

    def _tight(self) -> bool:
        return bool(self.lower and self.upper and self.upper <= 4.0 * self.lower)

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
                "heads_estimate": self.heads_estimate, "seconds_estimate": self.seconds_estimate,
                "statement": self.statement()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeadLawBound:
        """The certificate from its :meth:`to_dict` (``statement`` is derived and not read)."""
        return restore(cls, d)


# ---------------------------------------------------------------------------- the setup


def _setup(laws: list[Empirical], span: AtomSpan, *, q_scale: float, b_scale: float, dist: str,
           seed: int) -> rounds.Setup:
    """``L``, the reduction to the span (Gaussian heads) and the rounding terms."""
    d = laws[0].dim
    red = reduce_to_span(laws, span) if dist == "gaussian" else None
    draw_laws = laws if red is None else red.laws
    dim = d if red is None else red.dim
    R = np.maximum(sample_radii(laws), sample_radii(draw_laws))
    L = max(head_bound(laws), head_bound(draw_laws)) if red is not None else head_bound(laws)
    eta = eta_draw(R, L, dist, dim, q_scale, b_scale)
    if red is not None:
        eta += eta_atoms(red.eps, R, L, d, q_scale, b_scale)
    return rounds.Setup(draw_laws, dim, q_scale, b_scale, dist, seed, L, eta, None if red is None else red.dim)


def _as_round(o: rounds.Outcome) -> HeadLawRound:
    return HeadLawRound(o.heads, o.c, o.g, o.lower, o.upper, o.delta, o.seconds, o.heads_gram, o.kind,
                        o.truncated, o.B, o.z, o.round, o.side)


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
    pilot_heads: int | None = None,
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
        A fixed number of heads: a pilot (``pilot_heads``, no statement) chooses the lens, then one
        round of ``heads`` heads spends all of ``delta``. None: adaptive rounds within ``seconds``.
    seconds : float or None
        Time budget of the adaptive rounds (None: no limit; they stop once upper <= 1.25 lower, which
        can take many heads).
    pilot : float or None
        An estimate of :math:`\lambda_{\min}(K_\rho)` (a draw's :math:`\lambda_{\min}`): only used for
        the report's estimate of the heads needed when no round finishes; never part of the statement.
    structure : DependenceStructure, optional
        When it predicts a kernel, :math:`K_\rho` is singular exactly and nothing is drawn.
    span : AtomSpan, optional
        :func:`~ntkcheck.ntk.heads.rank.atom_span` of the samples, if computed.
    pilot_heads : int or None
        Heads of the pilot round (default: ``max(64, 8 M / dim)``, a Gram of full rank).

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
    _check(delta, heads, seconds, dist, pilot_heads)
    seconds = _budget.capped(seconds)  # inside screen or a command: never past its time budget
    if structure is not None and structure.predicted_kernel > 0:
        return HeadLawBound("singular", delta, 0.0, 0.0,
                            detail=f"the dependence structure proves a kernel of dimension {structure.predicted_kernel}")
    t0 = time.perf_counter()
    if all(not law.rounded and not np.any(law.atoms) for law in laws):
        return HeadLawBound("singular", delta, 0.0, 0.0, detail="every atom is 0, so every feature is 0")
    why_not = _collapsed(laws)
    if why_not:
        return HeadLawBound("not run", delta, None, None, detail=why_not)
    s = _setup(laws, atom_span(laws) if span is None else span, q_scale=float(q_scale), b_scale=float(b_scale),
               dist=dist, seed=int(seed))
    if not (math.isfinite(s.L) and math.isfinite(s.eta)):  # tokens near the float64 range: every bound vacuous
        return HeadLawBound("not run", delta, None, None, detail=(
            f"at these token norms (largest radius {float(np.max(sample_radii(laws))):.3g}) the bound on one head's "
            f"lambda_max (L = {s.L:.3g}) or on the float64 rounding of a draw (eta = {s.eta:.3g}) is not finite, "
            "so no number of heads can give a bound; rescale the tokens"))
    npilot = rounds.pilot_size(s) if pilot_heads is None else int(pilot_heads)
    est: tuple[float, float] | None = None
    if heads is not None:
        outs = rounds.run_fixed(s, delta, int(heads), npilot)
        why = f"{heads} heads, as asked (after a pilot of {npilot} heads that chose the lens)"
        drawn = int(heads) + npilot + rounds.CALIBRATION_HEADS
    else:
        outs, why, (need_g, need_u, rates) = rounds.run_adaptive(s, delta, seconds, npilot)
        per_round: dict[int, int] = {}
        for o in outs:
            per_round[o.round] = max(per_round.get(o.round, 0), o.heads)
        drawn = sum(per_round.values()) + rounds.CALIBRATION_HEADS * max(len(per_round) - 1, 0)
        est = _estimate(need_g, need_u, rates, s, delta, pilot)
    secs = time.perf_counter() - t0
    n_est, s_est = (None, None) if est is None or not math.isfinite(est[0]) else (int(est[0]), est[1])
    if not outs:
        return HeadLawBound("not separated", delta, None, None, 0, (), s.L, s.eta, s.reduced, secs, why, n_est, s_est)
    lower = max(o.lower for o in outs)
    upper = min(o.upper for o in outs)
    status = "positive" if lower > 0 else "not separated"
    if status == "not separated" and all(o.c is None for o in outs):
        why = f"{why}; the draw's Gram is not certified positive"
    return HeadLawBound(status, delta, lower, upper, drawn, tuple(_as_round(o) for o in outs), s.L, s.eta,
                        s.reduced, secs, why, n_est, s_est)


def _estimate(need_g: float, need_u: float, rates: rounds.Rates, s: rounds.Setup, delta: float,
              pilot: float | None) -> tuple[float, float | None]:
    """Heads (and seconds) of a round with both sides within a factor 2: from the last lens, or from
    the ``pilot`` estimate of the draw and the range ``L`` when no round finished."""
    if not math.isfinite(need_g) and pilot:
        t = math.log(2.0 / rounds.tb.round_delta(delta, 1))
        need_g = need_u = rounds.tb.heads_for_lower(0.5, s.L, t) * s.L * t / pilot
    if not (math.isfinite(need_g) and math.isfinite(need_u)):
        return math.inf, None
    plan = rounds.Plan(int(math.ceil(need_g)), int(math.ceil(max(need_g, need_u))))
    sec = rates.seconds(plan)
    return float(plan.total), (sec if math.isfinite(sec) else None)


def _collapsed(laws: list[Empirical]) -> str:
    """Why the head-law step cannot run on the float64 view of the atoms (two distinct atoms of a law on
    one float64 point, every atom 0 in float64 while some value given is not, or non-finite), or ""."""
    for i, law in enumerate(laws):
        A = np.asarray(law.atoms, dtype=np.float64)
        if not np.all(np.isfinite(A)):
            return f"sample {i}: an atom is not finite in float64"
        if law.n_atoms > 1 and len({tuple(r) for r in A.tolist()}) < law.n_atoms:
            return (f"sample {i}: distinct atoms share one float64 value (tokens below the float64 range, "
                    "e.g. 1e-400): the head law's NTK is computed in float64 and is not certified here")
    if all(not np.any(law.atoms) for law in laws):
        return ("every atom is 0 in float64 while the values given are not (tokens below the float64 range): "
                "the head law's NTK is computed in float64 and is not certified here")
    return ""


def _check(delta: Any, heads: Any, seconds: Any, dist: Any, pilot_heads: Any = None) -> None:
    if not (isinstance(delta, (int, float)) and 0.0 < float(delta) < 1.0):
        raise InputError(f"delta: expected a probability in (0, 1), got {delta!r}")
    if heads is not None and (isinstance(heads, bool) or not isinstance(heads, (int, np.integer)) or heads < 1):
        raise InputError(f"heads: expected a positive integer or None, got {heads!r}")
    if pilot_heads is not None and (isinstance(pilot_heads, bool) or not isinstance(pilot_heads, (int, np.integer))
                                    or pilot_heads < 1):
        raise InputError(f"pilot_heads: expected a positive integer or None, got {pilot_heads!r}")
    if seconds is not None and not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"seconds: expected a time budget >= 0 or None, got {seconds!r}")
    if dist not in ("gaussian", "uniform"):
        raise InputError(f"dist: expected 'gaussian' or 'uniform', got {dist!r}")
