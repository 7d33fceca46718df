"""The sections of the screening report's text (:meth:`ntkcheck.screening.ScreenReport.table`).

Each function turns one part of a :class:`~ntkcheck.screening.ScreenReport` (read by its
attributes: this module sits below :mod:`ntkcheck.screening`) into lines of at most
:data:`~ntkcheck._text.WIDTH` columns once fitted: the samples, the two verdicts with the
dependence structure, the Gram at FixUp, the Prop. 8 cross-check, and the bottom line's
sentences and paragraphs.
"""

from __future__ import annotations

import textwrap
from typing import Any

from ._text import exact_vector, vector_summary
from .independence.results import decision_sentence
from .ntk.certificate.useful_rate import below_rate_sentences, rounding_notes
from .ntk.heads.search import finite_heads_sentences

__all__ = ["sample_lines", "verdict_lines", "gram_lines", "crosscheck_lines", "paragraphs", "bottom_sentences"]


def sample_lines(samples: Any) -> list[str]:
    """The per-sample table: a header, then one row per sample."""
    out = [f"{'sample':>6} {'tokens':>6} {'distinct':>8} {'max mult':>8} {'radius':>8} {'c_i':>6}  mean"]
    for s in samples:
        out.append(f"{s.index:>6} {s.tokens:>6} {s.distinct:>8} {s.max_multiplicity:>8} {s.radius:>8.3f} "
                   f"{s.coefficient[:6]:>6}  {vector_summary(s.mean)}")
    return out


def verdict_lines(report: Any) -> list[str]:
    """Both verdicts in words (the strong one with its direction), then the dependence structure."""
    out = []
    for name, dec in (("weak", report.weak), ("strong", report.strong)):
        cert = getattr(dec.certificate, "kind", "-")
        out.append(f"{name + ' independence:':<22}{dec.verdict.value} (method {dec.method}, certificate {cert})")
        out.append(f"{'':<22}{decision_sentence(dec)}")
        if name == "strong" and dec.direction:
            out.append(f"{'':<22}direction w = {exact_vector(dec.direction)}")
    st = report.structure
    if st is not None:
        lines = st.lines()
        out.append(f"{'dependence structure:':<22}{lines[0] if lines else 'none named'}")
        out.extend(f"{'':<22}{line}" for line in lines[1:])
        out.append(f"{'':<22}(dependency rank {st.rank}, {st.rank_linear_free} without linear part; "
                   f"{'exact' if st.exact else 'a lower bound'}: {st.certificate})")
    return out


def gram_lines(report: Any) -> list[str]:
    """The Gram at FixUp: its size, the heads, its spectrum and certificate, the kernel dimension."""
    g = report.gram
    out = [f"NTK Gram at FixUp:    M = {g.atoms} distinct atoms ({g.tokens} tokens), H = {g.heads} heads, "
           f"d = {g.dim}", f"  heads drawn         {report.heads}", *g.report_lines()]
    if report.head_search is not None:
        out.insert(2, f"  head count          {report.head_search.sentence()}")
    if report.crosscheck.kernel is not None:
        out.append(f"  kernel dimension    {report.crosscheck.kernel.sentence()}")
    sup = getattr(report, "law_support", None)
    if sup is not None and not sup.open_set:
        out.append(f"  head law support    {sup.sentence()}")
    return out + ([] if report.head_law is None else report.head_law.report_lines())


def crosscheck_lines(report: Any) -> list[str]:
    """The Prop. 8 cross-check, then its repetition on the samples outside the dependency."""
    cc = report.crosscheck
    out = [f"cross-check:          {cc.agreement} -- {cc.message}"]
    if report.complement is not None:
        out.append(f"  samples {exact_vector(report.complement_indices, head=8)} (outside the dependency): "
                   f"{report.complement.agreement} -- {report.complement.message}")
    return out


def paragraphs(*parts: str, width: int = 100) -> str:
    """The bottom line's sentences, each wrapped to ``width`` columns (continuations indented)."""
    return "\n".join(textwrap.fill(p, width=width, subsequent_indent="  ", break_on_hyphens=False)
                     for p in parts)


def bottom_sentences(report: Any) -> tuple[str, str, str]:
    """The three sentences of :attr:`~ntkcheck.screening.ScreenReport.bottom_line` (data, training, next step),
    from the first case that applies: too few heads, disagreement, independent, dependent,
    inconclusive."""
    g = report.gram
    n = len(report.samples)
    data = (f"Data: {report.source}." if report.source else
            f"Data: {n} samples, {g.atoms} distinct atoms in d = {g.dim}, screened with H = {g.heads} heads.")
    few = finite_heads_sentences(report.crosscheck.kernel, g, report.head_law, given=report.heads == "given")
    if few is not None:
        return data, *few
    if report.outcome == "disagrees":
        meaning = ("Training: nothing can be concluded: the Gram and seed 003 Prop. 8 disagree on these data "
                   "(the CGF verdict and the spectrum contradict each other), so neither can be trusted here.")
        nxt = "Next: rerun with more heads or another seed; if it persists, report the data."
        return data, meaning, nxt
    sup = getattr(report, "law_support", None)
    if sup is not None and sup.singular:
        return data, *_law_kernel_sentences(sup)
    if g.status == "singular" and g.certified is not None:
        meaning = (f"Training: the Gram on these heads is singular, proved in exact arithmetic ({g.certified.detail}): "
                   "gradient flow from FixUp cannot move the residual along its kernel, whatever the targets.")
        nxt = ("Next: draw the heads from a law with a density (seed 003 Prop. 8 needs a head law whose support "
               "contains an open set) or change the heads file, and rerun.")
        return data, meaning, nxt
    if report.outcome == "certified positive, below a useful rate":
        return (data, *below_rate_sentences(g, report.min_relative_lambda, report.slow_mode,
                                            rounding_notes(report.decision_notes)))
    if report.weak.independent:
        return (data, *_independent_sentences(report))
    if report.weak.dependent:
        return (data, *_dependent_sentences(report))
    meaning = ("Training: not certified either way: the CGF decision is inconclusive; the Gram is "
               f"{g.status_text()} (what was seen, not a proof).")
    nxt = "Next: call ntkcheck.decide on the samples with a larger time budget or precision, and inspect its trail."
    return data, meaning, nxt


def _law_kernel_sentences(sup: Any) -> tuple[str, str]:
    """A head law without an open set of ``(Q, b)`` whose NTK is proved singular: no Prop. 8, the proof."""
    meaning = (f"Training: under the head law ({sup.law}), {sup.why}, so seed 003 Prop. 8 does not apply; its NTK "
               f"is singular for every head of this law, proved: {sup.kernel.sentence()}. Gradient flow from "
               "FixUp cannot move the residual along that kernel, whatever the targets and however many heads.")
    nxt = ("Next: give the heads a law with a density on (Q, b) (positive --q-scale and --b-scale; seed 003 Prop. 8 "
           "then applies to weakly independent CGFs), or other heads, and rerun.")
    return meaning, nxt


def _independent_sentences(report: Any) -> tuple[str, str]:
    """What a certified weakly independent verdict means for training, and what to do next
    (train, or certify the Gram first: how far to trust its ``lambda_min``). Prop. 8 is invoked
    only for a head law whose support contains an open set of ``(Q, b)``."""
    g = report.gram
    how = (f"certified: {g.certified.how}" if g.certified_positive and g.certified else
           "positive in float64 only, not certified" if g.positive else f"not established ({g.status})")
    law = "" if report.head_law is None else report.head_law.training_clause()
    sup = getattr(report, "law_support", None)
    if sup is None or sup.open_set:
        head = (f"the CGFs are certified weakly independent, so the NTK of the head law at FixUp is "
                f"injective (seed 003 Prop. 8){law}")
    elif sup.given:
        head = ("the CGFs are certified weakly independent, but seed 003 Prop. 8 (for a head law whose support "
                "contains an open set of (Q, b)) does not apply to the heads given: their NTK is their Gram")
    else:
        head = (f"the CGFs are certified weakly independent, but under the head law ({sup.law}), {sup.why}, so "
                "seed 003 Prop. 8 does not apply: they do not decide whether its NTK is injective"
                + (f" (the head law's own certificate does: {law.removeprefix(', ')})" if law else ""))
    floor = abs(g.lambda_min) <= max(getattr(g, "floor", 0.0), getattr(g, "lambda_min_tolerance", None) or 0.0)
    rate = (": below resolution, so no convergence rate can be read from it" if floor else
            f", lambda_0 = {report.lambda_0:.3g}: near initialisation the linearised residual of gradient flow on "
            "the per-token loss decays at least at that rate")
    meaning = (f"Training: {head}; the Gram of the heads drawn (the NTK of training those "
               f"heads) is {'positive' if g.positive else 'seen'} ({how}){rate}.")
    if g.certified_positive:
        nxt = ("Next: train; to guarantee linear convergence for your targets, certify the rate with "
               "`ntkcheck flow` (seed 002 Thm. 8.5, corrected threshold).")
    elif g.certified is None:  # certification was not asked for (--no-certify, certify=False)
        nxt = ("Next: certify the Gram (certify=True, or the command line without --no-certify) before relying on "
               "its lambda_min" + ("; then certify the rate with `ntkcheck flow`." if g.positive else
                                   ", or use more heads."))
    elif "time budget" in g.certified.detail:
        nxt = ("Next: the certificate was cut short by the time budget: rerun with a larger --max-seconds "
               "(time_budget) before relying on a rate.")
    else:
        nxt = ("Next: the certificate was attempted and failed (lambda_min is at the rounding floor of the Gram): "
               "do not rely on a rate from it; rescale the tokens to order 1, or use more heads.")
    return meaning, nxt


def _dependent_sentences(report: Any) -> tuple[str, str]:
    """What a certified dependency means for training (a kernel only when the supports
    overlap), and what to do next, with the samples outside the dependency."""
    g, cc = report.gram, report.crosscheck
    inv = list(report.involved)
    st = report.structure
    named = st.lines()[0] if (st is not None and st.lines()) else f"samples {inv} are dependent"
    if cc.statement == "necessity":
        k = g.kernel_observed
        meaning = (f"Training: {named}; the dependency is certified and the samples share atoms, so the "
                   f"NTK at FixUp has a kernel ({'observed dimension ' + str(k) if k is not None else 'seen'}"
                   f", cross-check {cc.agreement}): gradient flow cannot move the residual along it near "
                   "initialisation (a plateau), whatever the targets.")
    else:
        meaning = (f"Training: {named} (certified), but Prop. 8 predicts a kernel only when the supports "
                   f"overlap ({cc.overlap}); the Gram is {g.status_text()}.")
    comp = report.complement
    rest = ""
    if report.complement_indices:
        seen = "not cross-checked" if comp is None else f"cross-check {comp.agreement}"
        if comp is not None and comp.gram is not None:
            seen += f", Gram {comp.gram.status_text()}"
        rest = f" Samples {list(report.complement_indices)} alone: {seen}."
    if cc.statement != "necessity" and g.positive:
        nxt = ("Next: the NTK is positive on these heads despite the dependency (the converse of Prop. 8 "
               "needs overlapping supports): training proceeds as in the independent case; certify the "
               f"rate with `ntkcheck flow`.{rest}")
    else:
        nxt = (f"Next: remove or change one of samples {inv} (a copy, translate or product of the others "
               f"adds no direction to the NTK) and rerun.{rest}")
    return meaning, nxt
