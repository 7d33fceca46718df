"""What ``ntkcheck screen`` and ``ntkcheck gram`` print, and the exit status they return.

Built from the fields of :class:`~ntkcheck.screening.ScreenReport` and
:class:`~ntkcheck.ntk.gram_matrix.GramResult` (no reprs): long vectors are summarised
(:func:`~ntkcheck.cli._text.vector_summary`), the report ends with a bottom line and the next
step, and :func:`structured` turns the library's free-text JSON values into values.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from .._text import exact_vector, vector_summary
from ._args import EXIT_INCONCLUSIVE, EXIT_NEGATIVE, EXIT_OK

#: what the bundled ``screen_default.npz`` is (ntkcheck/data/make_screen_default.py)
BUNDLED = ("bundled example: samples 0-3 random tokens in d = 3, samples 4-6 the product "
           "{0,u}, {0,v}, {0,u,v,u+v} that makes the Gram singular")

_SHARED = re.compile(r"^(\d+) shared atoms?$")


def heads_json(args: argparse.Namespace, count: int) -> dict[str, Any]:
    """The heads as values: ``{kind, q_scale, b_scale, seed, count, file}``."""
    if getattr(args, "heads_file", None) is not None:
        return {"kind": "file", "q_scale": None, "b_scale": None, "seed": None, "count": count,
                "file": str(args.heads_file)}
    return {"kind": args.dist, "q_scale": args.q_scale, "b_scale": args.b_scale, "seed": args.seed,
            "count": count, "file": None}


def _overlap(value: Any, prediction: Any) -> Any:
    if not isinstance(value, str):
        return value
    m = _SHARED.match(value)
    shared = int(m.group(1)) if m else (prediction.get("shared") if isinstance(prediction, dict) else None)
    return {"shared_atoms": shared, "description": value}


def structured(obj: Any) -> Any:
    """A copy of a library ``to_dict()`` with values instead of free text: ``coefficient``
    ``"-"`` becomes null, ``overlap`` ``"1 shared atom"`` becomes ``{"shared_atoms": 1, ...}``."""
    if isinstance(obj, list):
        return [structured(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: structured(v) for k, v in obj.items()}
    if out.get("coefficient") == "-":
        out["coefficient"] = None
    if "overlap" in out:
        out["overlap"] = _overlap(out["overlap"], out.get("prediction"))
    return out


def sentence(dec: Any) -> str:
    """The plain-English verdict of a decision (a property or a method, depending on the result type)."""
    s = getattr(dec, "sentence", None)
    if callable(s):
        s = s()
    return s if isinstance(s, str) else dec.verdict.sentence(dec.property)


def _certified_singular(cc: Any) -> bool:
    """An exact (certified) CGF dependency with overlap: seed 003 Prop. 8 proves the kernel."""
    return (cc.weak.verdict.value == "dependent" and cc.statement == "necessity" and cc.agreement == "agrees")


def screen_outcome(report: Any, *, certify: bool = True) -> tuple[int, str, str]:
    """``(exit status, bottom line, next step)`` of a screening report."""
    g, cc = report.gram, report.crosscheck
    checks = [cc] + ([report.complement] if report.complement is not None else [])
    if any(c.agreement == "disagrees" for c in checks):
        return (EXIT_NEGATIVE, "the Gram and seed 003 Prop. 8 disagree on these data: the verdict and the "
                "spectrum contradict each other, so neither can be trusted here.",
                "rerun with more heads (--heads) or another --seed; if it persists, report the data.")
    if g.certified_positive:
        return (EXIT_OK, f"the NTK Gram is certified positive (lambda_min >= {g.certified.lower_bound:.3g}): at "
                "FixUp the attention NTK is injective on these samples, so gradient flow from a small enough "
                "initial loss converges linearly (seed 002 Thm. 8.5).",
                "ntkcheck flow PATH measures the rate and certifies it for given targets.")
    if _certified_singular(cc):
        return (EXIT_NEGATIVE, "the NTK Gram is singular, certified by an exact dependency of the samples' CGFs "
                "with overlap (seed 003 Prop. 8): the part of a residual in its kernel never decays, so "
                "training plateaus.",
                "drop or perturb a sample of the dependence structure above; ntkcheck flow --experiment "
                "plateau shows the plateau.")
    if g.positive:
        why = "--no-certify was given" if not certify else "the certificate did not conclude"
        return (EXIT_INCONCLUSIVE, f"the Gram is positive in float64 only ({why}): likely injective, not certified.",
                "rerun without --no-certify, or ntkcheck gram PATH --certify.")
    return (EXIT_INCONCLUSIVE, f"not certified: the Gram is {g.status} and the CGF verdict is "
            f"{cc.weak.verdict.value} ({cc.statement}); nothing is proved either way.",
            "more heads (--heads) resolve a small lambda_min; ntkcheck decide PATH --method exact may settle "
            "the verdict.")


def _gram_block(g: Any) -> list[str]:
    out = [f"  lambda_min          {g.lambda_min:.6g}   (relative {g.relative_lambda_min:.3g})",
           f"  lambda_max          {g.lambda_max:.6g}",
           f"  condition           {g.condition:.3g}   (spectrum: {g.method})",
           f"  status              {g.status_text()}"]
    if g.certified is not None:
        c = g.certified
        if c.positive:
            out.append(f"  certificate         {c.kind}: lambda_min >= {c.lower_bound:.4g} ({c.bits} bits)")
        else:
            out.append(f"  certificate         inconclusive at {c.bits} bits: {c.detail}")
    return out


def screen_lines(report: Any, label: str, *, thm85: dict | None, plot: str | None, bottom: str,
                 step: str) -> list[str]:
    """The screening report, line by line (wrapped to 100 columns by the caller)."""
    out = [f"ntkcheck screen: {label}", "",
           f"{'sample':>6} {'tokens':>6} {'distinct':>8} {'max mult':>8} {'radius':>8} {'c_i':>6}  mean"]
    for s in report.samples:
        out.append(f"{s.index:>6} {s.tokens:>6} {s.distinct:>8} {s.max_multiplicity:>8} {s.radius:>8.3f} "
                   f"{s.coefficient[:6]:>6}  {vector_summary(s.mean)}")
    out.append("")
    for name, dec in (("weak", report.weak), ("strong", report.strong)):
        cert = getattr(dec.certificate, "kind", "-")
        out.append(f"{name + ' independence:':<22}{dec.verdict.value} (method {dec.method}, certificate {cert})")
        out.append(f"{'':<22}{sentence(dec)}")
        if name == "strong" and dec.direction:
            out.append(f"{'':<22}direction w = {exact_vector(dec.direction)}")
    st = report.structure
    if st is not None:
        lines = st.lines()
        out.append(f"{'dependence structure:':<22}{lines[0] if lines else 'none named'}")
        out.extend(f"{'':<22}{line}" for line in lines[1:])
        out.append(f"{'':<22}(dependency rank {st.rank}, {st.rank_linear_free} without linear part; "
                   f"{'exact' if st.exact else 'a lower bound'})")
    g = report.gram
    out += ["", f"NTK Gram at FixUp:    M = {g.atoms} distinct atoms ({g.tokens} tokens), H = {g.heads} heads, "
            f"d = {g.dim}", f"  heads drawn         {report.heads}", *_gram_block(g)]
    if report.crosscheck.kernel is not None:
        out.append(f"  kernel dimension    {report.crosscheck.kernel.sentence()}")
    out += ["", f"cross-check:          {report.crosscheck.agreement} -- {report.crosscheck.message}"]
    if report.complement is not None:
        idx = exact_vector(report.complement_indices, head=8)
        out.append(f"  samples {idx} (outside the dependency): {report.complement.agreement} -- "
                   f"{report.complement.message}")
    out += ["", f"NTK lambda_0:         T lambda_min = {report.lambda_0:.4g}  (per-token loss, mean-field depth "
            f"T = {report.depth_T:g}; the loss decays at 2 lambda_0 near FixUp; not the Thm. 8.5 rate: --thm85)"]
    if thm85 is not None:
        out.append(f"Thm. 8.5 rate:        lambda_0 = T^2 lambda_min(G_r) = {thm85['lambda_0']:.4g}, Lambda = "
                   f"{thm85['lambda_max_0']:.4g}  (readout loss, heads shared over depth T = {thm85['depth_T']:g})")
        out.append(f"  {thm85['caveat']}")
        out.append(f"  lambda_0 above: {report.rate_caveat}")
    for n in (*report.notes, *g.notes):
        out.append(f"  note: {n}")
    if plot:
        out.append(f"plot written to {plot}")
    out += ["", f"bottom line: {bottom}", f"next: {step}"]
    return out


def gram_lines(res: Any, st: Any, kc: Any, label: str) -> list[str]:
    """The ``ntkcheck gram`` report, line by line."""
    out = [f"NTK Gram at FixUp for {label}",
           f"  size M              {res.atoms} distinct atoms ({res.tokens} tokens)",
           f"  heads H, dim d      {res.heads}, {res.dim}", *_gram_block(res)]
    if st is not None and kc is not None:
        lines = st.lines() or ["none named"]
        out.append(f"  structure           {lines[0]}")
        out.extend(f"                      {line}" for line in lines[1:])
        out.append(f"  kernel dimension    {kc.sentence()}")
        out.append(f"                      ({'exact' if st.exact else 'lower bound'}: {st.certificate})")
    for n in res.notes:
        out.append(f"  note: {n}")
    return out
