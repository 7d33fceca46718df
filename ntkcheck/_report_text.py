"""The sections of the screening report's text (:meth:`ntkcheck.screening.ScreenReport.table`).

Each function turns one part of a :class:`~ntkcheck.screening.ScreenReport` (read by its
attributes: this module sits below :mod:`ntkcheck.screening`) into lines of at most
:data:`~ntkcheck._text.WIDTH` columns once fitted: the samples, the two verdicts with the
dependence structure, the Gram at FixUp, the Prop. 8 cross-check, and the bottom line's
paragraphs.
"""

from __future__ import annotations

import textwrap
from typing import Any

from ._text import exact_vector, vector_summary
from .independence.results import decision_sentence

__all__ = ["sample_lines", "verdict_lines", "gram_lines", "crosscheck_lines", "paragraphs"]


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
