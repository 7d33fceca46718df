r"""How many heads a screening draws: from the span of the atoms, doubled until the Gram says something.

The Gram of ``H`` heads has rank at most :math:`r + (H-1)A` (:mod:`ntkcheck.ntk.heads.rank`), so
the default head count leaves rank room of four times the ``M`` rows
(:func:`~ntkcheck.ntk.heads.rank.default_head_count`). With ``heads="auto"`` (the default of
:func:`ntkcheck.screen`) the count doubles until the draw's Gram is certified positive, or its
kernel is the head law's (the dependence structure's: more heads cannot remove it), or the
budget (doublings, seconds) is spent; :class:`HeadSearch` records every attempt and why it
stopped.

References: seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 5, Prop. 8;
``theory/ntk-head-law.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import _budget
from ..._records import restore
from ...cgf import Empirical
from ...errors import InputError, TimeBudgetError
from ..gram_matrix._sizes import require_drawn_gram
from ..gram_matrix.features import Heads, _atom_count, init_heads
from ..gram_matrix.pipeline import certify_result, gram
from ..gram_matrix.result import GramResult
from .rank import AtomSpan, HeadsKernel, atom_span, default_head_count, heads_kernel

__all__ = ["HeadAttempt", "HeadSearch", "search_heads", "MAX_DOUBLINGS", "SEARCH_SECONDS"]

#: ``heads="auto"`` doubles the head count at most this many times (64 times the first count)
MAX_DOUBLINGS = 6
#: ``heads="auto"`` starts no attempt that would end after this many seconds (three times the last one)
SEARCH_SECONDS = 60.0


@dataclass(frozen=True)
class HeadAttempt:
    """One draw of the search: its head count, the Gram's status (certified or not), the kernel
    observed and predicted for that count, and the seconds it took."""

    heads: int
    status: str
    certified: bool
    observed: int | None
    predicted: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"heads": self.heads, "status": self.status, "certified": self.certified, "observed": self.observed,
                "predicted": self.predicted, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeadAttempt:
        """The attempt from its :meth:`to_dict`."""
        return restore(cls, d)


@dataclass(frozen=True, eq=False)
class HeadSearch:
    """The heads a screening used and how they were chosen.

    A search loaded from its :meth:`to_dict` (a saved ``--json`` object) has no heads array:
    ``heads`` is None there (:attr:`count` still holds, from the last attempt), and ``gram`` and
    ``kernel`` are what the loader was given (:meth:`from_dict`), else None.

    Attributes
    ----------
    heads : Heads or None
        The heads of the last attempt (those the report describes); None on a loaded record.
    gram : GramResult or None
        Their Gram (certified when asked and sensible); None on a loaded record unless given.
    kernel : HeadsKernel or None
        The kernel dimension predicted for them; None on a loaded record unless given.
    attempts : tuple of HeadAttempt
    mode : str
        ``"auto"``, ``"count"`` (a head count given) or ``"given"`` (explicit heads).
    stopped : str
        Why the search ended (``auto``), or ``""``.
    span : AtomSpan
    """

    heads: Heads | None
    gram: GramResult | None
    kernel: HeadsKernel | None
    attempts: tuple[HeadAttempt, ...]
    mode: str
    stopped: str
    span: AtomSpan

    @property
    def count(self) -> int:
        """``H``, the head count of the last attempt."""
        return self.attempts[-1].heads if self.heads is None else self.heads.count

    def sentence(self) -> str:
        """The head count and how it was chosen, in words."""
        if self.mode == "given":
            return f"H = {self.count} heads, as given"
        if self.mode == "count":
            return f"H = {self.count} heads, as asked"
        path = " -> ".join(str(a.heads) for a in self.attempts)
        return (f"H = {self.count} heads (auto: {path}, starting from rank room 4 M with {self.span.sentence()}; "
                f"{self.stopped})")

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "heads": self.count, "attempts": [a.to_dict() for a in self.attempts],
                "stopped": self.stopped, "span": self.span.to_dict(), "sentence": self.sentence()}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, gram: GramResult | None = None,
                  kernel: HeadsKernel | None = None) -> HeadSearch:
        """The search from its :meth:`to_dict`, with ``heads`` None (the heads drawn are not saved).

        ``gram`` and ``kernel`` are the Gram and kernel prediction of the last attempt when the
        caller has them from the same saved object (a screening report's ``gram`` and its
        cross-check's ``kernel.heads``: :meth:`ntkcheck.screening.ScreenReport.from_dict`); None
        otherwise. The saved ``heads`` (the count) must be the last attempt's.
        """
        out = restore(cls, {**d, "gram": gram, "kernel": kernel}, heads=lambda _: None)
        if not out.attempts:
            raise InputError("HeadSearch.from_dict: 'attempts' is empty (every search records its draws)")
        if d.get("heads") != out.count:
            raise InputError(f"HeadSearch.from_dict: 'heads' is {d.get('heads')!r}, the last attempt drew "
                             f"{out.count} heads")
        return out


def _attempt(laws: list[Empirical], heads: Heads, structure: Any, span: AtomSpan, *, certify: bool, max_bits: int,
             progress: bool, spectrum: str = "extremal") -> tuple[GramResult, HeadsKernel]:
    """The Gram of ``heads`` and the kernel predicted for them; certified when asked, unless a
    kernel is predicted (a singular Gram is never certified positive: nothing to try). Where the
    dependence structure predicts no kernel the certificate is computed with the Gram, on the same
    pass over the heads; elsewhere only once the heads' own prediction allows it."""
    early = certify and structure is not None and structure.predicted_kernel == 0
    g = gram(laws, heads, progress=progress, certify=early, max_bits=max_bits, spectrum=spectrum)
    hk = heads_kernel(laws, heads, structure, gram=g, span=span)
    if certify and g.certified is None and (g.positive or hk.predicted == 0):
        g = certify_result(laws, heads, g, max_bits=max_bits, progress=progress)
    return g, hk


def _done(g: GramResult, hk: HeadsKernel, certify: bool, law_kernel: int = 0) -> str | None:
    """Why the search may stop after this attempt, or None."""
    obs = g.kernel_observed
    if g.certified_positive:
        return "the Gram is certified positive"
    if hk.structural > 0 and obs is not None and obs <= hk.structural:
        return f"the kernel observed is the head law's ({hk.structural}, from the dependence structure)"
    if law_kernel > 0 and obs is not None and obs <= hk.structural + law_kernel:
        return f"the kernel observed is the head law's (>= {law_kernel}, proved for every head of the law)"
    if not certify and g.positive:
        return "the Gram is positive in float64 (certification not asked)"
    return None


def search_heads(laws: list[Empirical], heads: Any, *, structure: Any, q_scale: float = 1.0, b_scale: float = 1.0,
                 dist: str = "gaussian", seed: int = 0, certify: bool = True, max_bits: int = 512,
                 progress: bool = False, doublings: int = MAX_DOUBLINGS, seconds: float = SEARCH_SECONDS,
                 span: AtomSpan | None = None, start: int | None = None, spectrum: str = "extremal",
                 law_kernel: int = 0) -> HeadSearch:
    r"""Draw the heads of a screening and their Gram.

    Parameters
    ----------
    laws : list of Empirical
    heads : "auto", None, int or Heads
        ``"auto"`` and None: start at :func:`~ntkcheck.ntk.heads.rank.default_head_count` (rank room
        :math:`r + (H-1)A \ge 4M`) and double until the Gram is certified positive (or positive in
        float64 when ``certify`` is false), or the kernel observed is the head law's, or
        ``doublings`` or ``seconds`` run out. An int: that many heads, once. Heads: those.
    structure : DependenceStructure
        Of the same laws (the head law's kernel ``k``).
    q_scale, b_scale, dist, seed
        The init law of drawn heads (:func:`~ntkcheck.ntk.gram_matrix.features.init_heads`).
    certify, max_bits, progress
        As :func:`~ntkcheck.ntk.gram_matrix.pipeline.certify_result`.
    doublings, seconds
        The budget of ``"auto"``.
    span : AtomSpan, optional
        :func:`~ntkcheck.ntk.heads.rank.atom_span` of the laws, if computed.
    start : int, optional
        The first count of ``"auto"`` instead of the default head count.
    law_kernel : int
        The dimension of a kernel proved for every head of the law
        (:class:`~ntkcheck.ntk.prop8.hypotheses.LawKernel`): more heads cannot remove it.

    Returns
    -------
    HeadSearch
    """
    span = atom_span(laws) if span is None else span
    d = laws[0].dim
    if isinstance(heads, Heads):
        g, hk = _attempt(laws, heads, structure, span, certify=certify, max_bits=max_bits, progress=progress,
                         spectrum=spectrum)
        return HeadSearch(heads, g, hk, (HeadAttempt(heads.count, g.status, g.certified_positive,
                                                     g.kernel_observed, hk.predicted, 0.0),), "given", "", span)
    auto = heads is None or heads == "auto"
    if not auto and (isinstance(heads, bool) or not isinstance(heads, (int, np.integer)) or heads < 1):
        raise InputError(f"heads: expected a positive integer, 'auto', Heads or None, got {heads!r}")
    H = int(heads) if not auto else int(start) if start else default_head_count(_atom_count(laws), d, span)
    attempts: list[HeadAttempt] = []
    last: tuple[Heads, GramResult, HeadsKernel] | None = None
    t0 = time.perf_counter()
    while True:
        t1 = time.perf_counter()
        require_drawn_gram(laws, H)  # the heads and the Gram, before the heads are drawn
        hs = init_heads(H, d, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed)  # type: ignore[arg-type]
        try:
            g, hk = _attempt(laws, hs, structure, span, certify=certify, max_bits=max_bits, progress=progress,
                             spectrum=spectrum)
        except TimeBudgetError:
            if last is None:  # not even the first draw's spectrum fits: nothing to report
                raise
            return HeadSearch(*last, tuple(attempts), "auto",
                              f"the draw of {H} heads did not fit in the time budget", span)
        last = (hs, g, hk)
        took = time.perf_counter() - t1
        attempts.append(HeadAttempt(H, g.status, g.certified_positive, g.kernel_observed, hk.predicted, took))
        if not auto:
            return HeadSearch(hs, g, hk, tuple(attempts), "count", "", span)
        why = _done(g, hk, certify, law_kernel)
        if why is None and len(attempts) > doublings:
            why = f"{doublings} doublings spent"
        if why is None and time.perf_counter() - t0 + 3.0 * took > seconds:
            why = f"the next draw ({2 * H} heads) would exceed the {seconds:g} s budget"
        if why is None and not _budget.fits(3.0 * took):
            why = f"the next draw ({2 * H} heads) would not fit in the time budget"
        if why is None and not _fits(laws, 2 * H):
            why = f"the next draw ({2 * H} heads) and its Gram would not fit in the available memory"
        if why is not None:
            return HeadSearch(hs, g, hk, tuple(attempts), "auto", why, span)
        H *= 2


def _fits(laws: list[Empirical], H: int) -> bool:
    """Whether ``H`` heads and their Gram fit in the available memory."""
    from ..._memory import MemoryLimitError

    try:
        require_drawn_gram(laws, H)
    except MemoryLimitError:
        return False
    return True


def proved_by_rank(kernel: Any, g: GramResult) -> bool:
    """Whether the Gram of these heads is proved singular by its rank alone: ``H d < M``, or the certified
    rank bound :math:`r^+ + (H - 1) A^+ < M` (:class:`~ntkcheck.ntk.heads.rank.HeadsKernel`, or a kernel
    comparison holding one as ``heads``), whatever the data."""
    hk = kernel if isinstance(kernel, HeadsKernel) else getattr(kernel, "heads", None)
    return bool(g.rank_deficient_by_size) or (
        hk is not None and hk.span.exact and hk.atoms - hk.span.rank_bound(hk.heads, certified=True) > 0)


def finite_heads_sentences(kernel: Any, g: GramResult, head_law: Any = None,
                           given: bool = False) -> tuple[str, str] | None:
    """The training and next-step sentences of a screening's bottom line when the Gram of these
    heads is singular because they are too few (the rank bound or saturated heads predict more
    zero eigenvalues than the head law has); None otherwise. ``given``: the heads came from a file
    (the advice then names no option that draws heads)."""
    hk = None if kernel is None else kernel.heads
    more = ("a heads file with at least {n} heads (e.g. the heads of more layers), or rerun without --heads-file "
            "to screen heads drawn from a law (--heads auto, the default)" if given else
            "at least {n} heads, or with --heads auto (the default)")
    if g.positive or hk is None or not hk.finite_heads:
        if g.rank_deficient_by_size:
            return (f"Training: these heads' Gram is singular, proved by its rank: with H d = {g.heads * g.dim} < "
                    f"M = {g.atoms} it has rank at most H d whatever the data, so gradient flow from FixUp cannot move "
                    "the residual along its kernel.",
                    "Next: rerun with " + more.format(n=-(-g.atoms // g.dim)) + ".")
        return None
    law = ("" if head_law is None or not head_law.positive else
           f" The head law's NTK is positive ({head_law.statement()}): enough heads drawn from it have a positive "
           "Gram, but training uses the heads drawn.")
    proved = "proved by its certified rank bound" if proved_by_rank(kernel, g) else "as predicted"
    meaning = (f"Training: these heads' Gram is singular ({proved}): {hk.reason()}, whatever the data (the head "
               f"law's kernel has dimension {hk.structural}).{law}")
    need = hk.heads_needed
    if given:
        nxt = "Next: use " + more.format(n=need if need else "more")
    else:
        nxt = f"Next: rerun with {hk.next_step()}, or with --heads auto (the default)"
    return meaning, nxt + "."
