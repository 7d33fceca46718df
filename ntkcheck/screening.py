r"""Initialisation screening: everything ntkcheck can say about a dataset at FixUp.

For token sets :math:`X_1, \dots, X_n` and heads drawn from an init spec, the report holds

* a per-sample summary (tokens, distinct atoms, largest multiplicity, radius, whether the
  sample enters the dependency found); each sample is its empirical law
  (:class:`~ntkcheck.cgf.empirical.Empirical`): repeated tokens are one atom with their summed mass;
* the weak and strong CGF verdicts with their certificates (``ntkcheck.decide``);
* the NTK Gram spectrum at FixUp on the distinct atoms (``ntkcheck.ntk.gram_matrix.pipeline``) and the
  cross-check against seed 003 Prop. 8 (``ntkcheck.ntk.prop8.crosscheck``); when the samples are
  dependent, the cross-check is repeated on the samples outside the dependency, so both
  outcomes are visible;
* the dependence structure by name (``ntkcheck.ntk.prop8.structure``: "sample 12 is sample 3",
  translates with their shift, products, single Diracs) and the dimension of the Gram
  kernel it predicts beside the number of eigenvalues observed at the rounding floor;
* the smallest NTK eigenvalue :math:`\lambda_0` under the screen's own convention: the
  mean-field depth-``T`` model (each layer's heads drawn from the same law :math:`\rho`,
  ``theory/local-convergence.md``) and the per-token loss
  :math:`\tfrac12\sum_i \|x_T - y_i\|^2_{L^2(\mu_i)}`, whose NTK is ``T`` times the
  one-layer NTK (:mod:`ntkcheck.dynamics.model` normalises that loss by ``1/n``, which divides
  it by ``n``; heads shared by every layer multiply it by another ``T``):

  .. math::

      \lambda_0 = T\,\lambda_{\min}(W^{1/2} K W^{1/2}) .

  Near initialisation the linearised residual decays at :math:`\lambda_0` and the loss at
  :math:`2\lambda_0`. It is *not* the rate of seed 002 Thm. 8.5: that theorem is stated for
  the readout loss with heads shared over depth (:func:`ntkcheck.convergence.lipschitz.readout_ntk_fixup`,
  ``ntkcheck screen --thm85``), and its rate is guaranteed only for targets close enough to the
  initial outputs, which needs the targets and a certified bound on how far the NTK moves
  (:func:`ntkcheck.convergence.guarantee.convergence_certificate`, ``ntkcheck flow``).

The report ends with a bottom line (:attr:`ScreenReport.bottom_line`): what the data is,
what the verdict means for training, and what to do next.

References: seed 003 Prop. 8, seed 002 Thm. 8.5; ``theory/ntk-prop8.md`` (the Prop. 8 cross-check
and its table of cases), ``theory/local-convergence.md`` (what :math:`\lambda_0` buys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._records import plain, restore, structured
from ._report_plot import plot_report as plot_report  # re-exported: the screening's picture
from ._report_text import (
    bottom_sentences,
    crosscheck_lines,
    gram_lines,
    paragraphs,
    sample_lines,
    verdict_lines,
)
from ._text import fit
from ._validate import within_time_budget
from .cgf import Empirical, as_laws
from .cgf.empirical import require_float_view
from .errors import InputError
from .independence.results import Decision, no_truth_value
from .io.files import BUNDLED_DATA, bundled_path, load_samples
from .io.heads import load_heads as load_heads  # re-exported: its historic home
from .ntk.certificate.useful_rate import (
    DEFAULT_MIN_RELATIVE_LAMBDA,
    SlowMode,
    check_min_relative_lambda,
    near_dependency,
    slow_mode,
    useful_rate,
)
from .ntk.gram_matrix._sizes import check_gram_range
from .ntk.gram_matrix.features import Heads, _atom_count
from .ntk.gram_matrix.pipeline import GramResult, certify_result, gram
from .ntk.heads import law as _head_law
from .ntk.heads.law import HeadLawBound
from .ntk.heads.rank import default_head_count
from .ntk.heads.search import HeadSearch, proved_by_rank, search_heads
from .ntk.prop8.crosscheck import CrosscheckResult, crosscheck
from .ntk.prop8.hypotheses import HeadLawSupport, law_support
from .ntk.prop8.structure import DependenceStructure, dependence_structure

__all__ = ["SampleSummary", "ScreenReport", "screen", "default_head_count", "load_heads", "plot_report",
           "RATE_CAVEAT", "BUNDLED_DATA"]

RATE_CAVEAT = (
    "convention: mean-field depth T (heads of each layer drawn from the same law), per-token loss "
    "(1/2) sum_i ||x_T - y_i||^2 in L^2(mu_i) (ntkcheck flow's 1/n-normalised loss divides lambda_0 by n; "
    "heads shared by all layers multiply it by T). Near initialisation the residual decays at lambda_0 and "
    "the loss at 2 lambda_0. Not the rate of seed 002 Thm. 8.5, which is stated for the readout loss with heads "
    "shared over depth (--thm85) and guaranteed only for targets close enough to the initial "
    "outputs, by a certified bound on how far the NTK moves (L_K; ntkcheck flow certifies it for given targets)"
)

#: what a screening can conclude (:attr:`ScreenReport.outcome`), in order of precedence
OUTCOMES: tuple[str, ...] = ("disagrees", "certified positive", "certified positive, below a useful rate",
                             "certified singular", "positive in float64 only", "not certified")

#: highest Arb precision of the Gram certificate of ``screen`` and ``ntkcheck gram`` (one route for both)
CERTIFY_MAX_BITS = 512




@dataclass(frozen=True)
class SampleSummary:
    """One sample: ``tokens`` N_i, ``distinct`` atoms, ``max_multiplicity`` (largest number of
    tokens on one atom), ``radius`` max |x|, ``mean`` (of its law), and its coefficient in the
    dependency found (``"0"`` when it is not involved)."""

    index: int
    tokens: int
    distinct: int
    radius: float
    mean: tuple[float, ...]
    coefficient: str
    max_multiplicity: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tokens": self.tokens, "distinct": self.distinct,
                "max_multiplicity": self.max_multiplicity, "radius": self.radius,
                "mean": list(self.mean), "coefficient": self.coefficient}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SampleSummary:
        return restore(cls, d)


@dataclass(frozen=True)
class ScreenReport:
    """Result of :func:`screen` (see the module docstring)."""

    samples: tuple[SampleSummary, ...]
    heads: str
    weak: Any
    strong: Any
    gram: GramResult
    crosscheck: CrosscheckResult
    complement: CrosscheckResult | None
    complement_indices: tuple[int, ...]
    depth_T: float
    lambda_0: float
    rate_caveat: str = RATE_CAVEAT
    notes: tuple[str, ...] = field(default=())
    source: str | None = None
    min_relative_lambda: float = DEFAULT_MIN_RELATIVE_LAMBDA
    slow_mode: SlowMode | None = None
    #: the heads screened (not written by :meth:`to_dict`; a certificate file records them)
    drawn_heads: Heads | None = field(default=None, repr=False, compare=False)
    #: lambda_min of the head law's NTK, with its probability (None: skipped, or explicit heads)
    head_law: HeadLawBound | None = None
    #: how many heads were drawn and why (loaded from a dict: without the heads array)
    head_search: HeadSearch | None = None
    #: whether the head law meets seed 003 Prop. 8's hypothesis (an open set of (Q, b)), and the
    #: kernel proved where it does not
    law_support: HeadLawSupport | None = None
    #: the heads as values, ``{kind, q_scale, b_scale, seed, count, file}`` (``kind``: the law drawn
    #: from, ``"given"`` for explicit heads, ``"file"`` for a heads file)
    heads_spec: dict[str, Any] | None = None

    # a dataclass is always truthy: ``if screen(...):`` would read a dependent verdict as success
    __bool__ = no_truth_value

    @property
    def involved(self) -> tuple[int, ...]:
        """Samples with a non-zero coefficient in the dependency found (empty when independent)."""
        return tuple(s.index for s in self.samples if s.coefficient not in ("0", "-"))

    @property
    def outcome(self) -> str:
        """What the screening concludes, one of :data:`OUTCOMES` (the first that applies):
        ``"disagrees"`` (the Gram and seed 003 Prop. 8 contradict each other), ``"certified
        positive"`` (a rigorous lower bound on ``lambda_min`` of at least ``min_relative_lambda``
        times ``lambda_max``: a useful rate), ``"certified positive, below a useful rate"`` (a
        rigorous bound, but under that fraction: no training reaches the rate, and the data are
        near a dependency, :attr:`near_dependency`), ``"certified singular"`` (an exact CGF
        dependency with overlap: Prop. 8 proves the kernel; or an exact proof on these heads,
        Gram status ``"singular"``; or the rank of these heads: ``H d < M``, or the certified rank
        bound :math:`r + (H - 1) A < M`), ``"positive in float64 only"``,
        ``"not certified"``. ``ntkcheck screen``'s exit status is read from it."""
        g, cc = self.gram, self.crosscheck
        checks = [cc] + ([self.complement] if self.complement is not None else [])
        if any(c.agreement == "disagrees" for c in checks):
            return "disagrees"
        if g.certified_positive:
            return ("certified positive" if useful_rate(g, self.min_relative_lambda)
                    else "certified positive, below a useful rate")
        if g.status == "singular" or (cc.weak.dependent and cc.statement == "necessity" and cc.agreement == "agrees"):
            return "certified singular"
        if self.law_support is not None and self.law_support.singular:  # every head of the law: these too
            return "certified singular"
        if proved_by_rank(cc.kernel, g):  # H d < M, or the certified rank bound r + (H - 1) A < M
            return "certified singular"
        return "positive in float64 only" if g.positive else "not certified"

    @property
    def bottom_line(self) -> str:
        """Three sentences for a reader who skips the table: the data, what the verdict means
        for training near FixUp initialisation, and what to do next. Certified claims say so;
        everything else says what was seen."""
        return paragraphs(*self._bottom_parts())

    @property
    def next_step(self) -> str:
        """The last sentence of :attr:`bottom_line`: what to do next."""
        return self._bottom_parts()[2].removeprefix("Next: ")

    def _bottom_parts(self) -> tuple[str, str, str]:
        """The data, training and next-step sentences of :attr:`bottom_line`."""
        return bottom_sentences(self)

    @property
    def summary(self) -> str:
        """Alias of :attr:`bottom_line`."""
        return self.bottom_line

    @property
    def decision_notes(self) -> tuple[str, ...]:
        """The notes of the weak and strong decisions (e.g. a certificate resting on differences at
        the rounding level of float64 data), each once."""
        return tuple(dict.fromkeys((*self.weak.notes, *self.strong.notes)))

    @property
    def near_dependency(self) -> dict[str, Any] | None:
        """For ``"certified positive, below a useful rate"``: the samples carrying the slowest
        eigenvector (:class:`~ntkcheck.ntk.certificate.useful_rate.SlowMode`) and the decisions' notes at
        the rounding level of the data; None otherwise."""
        below = self.outcome == "certified positive, below a useful rate"
        return near_dependency(self.slow_mode, self.decision_notes) if below else None

    @property
    def exit_code(self) -> int:
        """What ``ntkcheck screen`` exits with: 0 certified positive with a useful rate, 1 certified
        singular or a disagreement, 3 otherwise (the README's table)."""
        return {"disagrees": 1, "certified positive": 0, "certified singular": 1}.get(self.outcome, 3)

    def heads_object(self) -> dict[str, Any]:
        """The heads as values (what ``--json`` writes as ``heads``)."""
        if self.heads_spec is not None:
            return dict(self.heads_spec)
        return {"kind": "given", "q_scale": None, "b_scale": None, "seed": None, "count": self.gram.heads,
                "file": None}

    def to_dict(self) -> dict[str, Any]:
        """The report as values: the ``--json`` object of ``ntkcheck screen`` without what only the command
        line knows (``schema``, ``path``, ``plot``, ``thm85``, ``certificate_out``, ``provenance``); it validates
        against the same schema with those keys not required (``load_schema("screen", api=True)``)."""
        return structured({
            "samples": [s.to_dict() for s in self.samples],
            "heads": self.heads_object(),
            "weak": self.weak.to_dict(),
            "strong": self.strong.to_dict(),
            "gram": self.gram.to_dict(),
            "crosscheck": self.crosscheck.to_dict(),
            "structure": None if self.structure is None else self.structure.to_dict(),
            "kernel": None if self.crosscheck.kernel is None else self.crosscheck.kernel.to_dict(),
            "complement": None if self.complement is None else {
                "samples": list(self.complement_indices), **self.complement.to_dict()},
            "depth_T": self.depth_T,
            "lambda_0": self.lambda_0,
            "rate_caveat": self.rate_caveat,
            "notes": list(self.notes),
            "source": self.source,
            "min_relative_lambda": self.min_relative_lambda,
            "slow_mode": None if self.slow_mode is None else self.slow_mode.to_dict(),
            "head_law": None if self.head_law is None else self.head_law.to_dict(),
            "head_search": None if self.head_search is None else self.head_search.to_dict(),
            "law_support": None if self.law_support is None else self.law_support.to_dict(),
            "bottom_line": self.bottom_line,
            "outcome": {"exit_code": self.exit_code, "conclusion": self.outcome, "bottom_line": self.bottom_line,
                        "next_step": self.next_step, "notes": list(self.decision_notes),
                        "near_dependency": self.near_dependency},
        })

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScreenReport:
        """The report from its :meth:`to_dict` (a saved ``ntkcheck screen --json`` object too).

        The heads are not saved: ``drawn_heads`` is None and so is ``head_search.heads`` (its count,
        attempts, Gram and kernel prediction are restored), so :meth:`table`, :attr:`bottom_line` and
        :meth:`to_dict` are the original's."""
        d = plain(d)
        if isinstance(h := d.get("heads"), dict):  # the --json form: {kind, q_scale, b_scale, seed, ...}
            d["heads_spec"] = h
            d["heads"] = "given" if h["kind"] in ("file", "given") else f"{h['kind']}, q_scale {h['q_scale']:g}, " \
                f"b_scale {h['b_scale']:g}, seed {h['seed']}"
        comp = d.get("complement")
        rep = restore(cls, {**d, "complement_indices": [] if comp is None else comp["samples"]},
                      weak=Decision.from_dict, strong=Decision.from_dict,
                      complement=lambda c: None if c is None else CrosscheckResult.from_dict(c),
                      head_search=lambda _: None,
                      law_support=lambda v: None if v is None else HeadLawSupport.from_dict(v))
        if d.get("head_search") is None:
            return rep
        # screen() gives the cross-check the search's own Gram and kernel prediction: the same records
        kc = rep.crosscheck.kernel
        return replace(rep, head_search=HeadSearch.from_dict(d["head_search"], gram=rep.gram,
                                                             kernel=None if kc is None else kc.heads))

    @property
    def structure(self) -> DependenceStructure | None:
        """The named dependence structures and the kernel dimension they predict."""
        return self.crosscheck.structure

    def __repr__(self) -> str:
        return (f"ScreenReport({self.outcome}: n={len(self.samples)}, weak={self.weak.verdict.value}, "
                f"strong={self.strong.verdict.value}, gram={self.gram.status} (lambda_min={self.gram.lambda_min:.3g}), "
                f"crosscheck={self.crosscheck.agreement}, lambda_0={self.lambda_0:.3g}; the report: .table(), "
                "the conclusion: .bottom_line)")

    def table(self, *, title: str | None = None, extra: tuple[str, ...] = ()) -> str:
        """The human-readable report (``ntkcheck screen`` prints it), lines of at most 100 columns:
        the samples, both verdicts in words, the dependence structure, the Gram and its
        certificate, the Prop. 8 cross-check, ``lambda_0``, ``extra`` lines (the command line adds
        its Thm. 8.5 block and the plot path), the notes, and the bottom line last."""
        return _report_table(self, title=title, extra=extra)


# ----------------------------------------------------------------------------- the report's text


def _report_table(report: ScreenReport, *, title: str | None, extra: tuple[str, ...]) -> str:
    """:meth:`ScreenReport.table`: its sections in order, then ``extra``, the notes and the
    bottom line, fitted to :func:`~ntkcheck._text.report_width` columns (``COLUMNS`` when narrower than 100)."""
    out = [title, ""] if title else []
    out += sample_lines(report.samples)
    out.append("")
    out += verdict_lines(report)
    out += ["", *gram_lines(report)]
    out += ["", *crosscheck_lines(report)]
    g = report.gram
    if abs(g.lambda_min) <= max(g.floor, g.lambda_min_tolerance or 0.0):  # singular at the rounding level: no rate
        out += ["", f"NTK lambda_0:         below resolution (T lambda_min, float64 sees {report.lambda_0:.1g}): no "
                "convergence rate, the Gram is singular to working precision"]
    else:
        out += ["", f"NTK lambda_0:         T lambda_min = {report.lambda_0:.4g}  (per-token loss, mean-field depth "
                f"T = {report.depth_T:g}; the loss decays at 2 lambda_0 near FixUp)", f"  caveat: {report.rate_caveat}"]
    out.extend(extra)
    out.extend(f"  note: {n}" for n in (*report.notes, *report.gram.notes))
    out.extend(f"  note (decide): {n}" for n in report.decision_notes)
    out += ["", *report.bottom_line.splitlines()]
    return fit(out)


def _complement_check(laws: list[Empirical], hs: Heads, weak: Any, st: DependenceStructure, *, certify: bool,
                      max_bits: int, progress: bool, spectrum: str,
                      support: HeadLawSupport) -> tuple[Any, tuple[int, ...], list[str]]:
    """The cross-check on the samples outside a certified dependency (what the init scales change),
    their indices, and a note when ``H d`` is below their atom count."""
    if not (weak.dependent and weak.null_vector is not None):
        return None, (), []
    involved = {i for r in st.relations for i, ci in enumerate(r.c) if ci != 0}
    involved |= {i for i, ci in enumerate(weak.null_vector) if ci != 0}
    comp_idx = tuple(i for i in range(len(laws)) if i not in involved)
    if not comp_idx:
        return None, (), []
    sub = [laws[i] for i in comp_idx]
    if hs.count * laws[0].dim < _atom_count(sub):
        return None, comp_idx, [f"samples {list(comp_idx)} not cross-checked separately: H d < their atom count"]
    g_sub = gram(sub, hs, progress=progress, spectrum=spectrum)
    if certify and g_sub.positive:
        g_sub = certify_result(sub, hs, g_sub, max_bits=max_bits, progress=progress)
    return (crosscheck(sub, hs, gram_result=g_sub, certify=certify, progress=progress,
                       law_support=support.for_laws(sub)), comp_idx, [])


def _summaries(laws: list[Empirical], c: tuple[Any, ...] | None) -> tuple[SampleSummary, ...]:
    out = []
    for i, law in enumerate(laws):
        X = law.atoms
        out.append(SampleSummary(
            index=i, tokens=law.n_tokens, distinct=law.n_atoms,
            radius=float(np.linalg.norm(X, axis=1).max()), mean=tuple(float(v) for v in law.masses @ X),
            coefficient="-" if c is None else str(c[i]), max_multiplicity=law.max_multiplicity,
        ))
    return tuple(out)


@within_time_budget  # one budget for the decisions, the Gram, its certificate and the cross-checks
def screen(
    samples: Any = None,
    *,
    heads: int | str | Heads | None = None,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    seed: int = 0,
    dist: str = "gaussian",
    depth_T: float = 1.0,
    certify: bool = True,
    max_bits: int = CERTIFY_MAX_BITS,
    progress: bool = False,
    source: str | None = None,
    min_relative_lambda: float = DEFAULT_MIN_RELATIVE_LAMBDA,
    delta: float = 1e-6,
    head_law_seconds: float | None = None,
    spectrum: str = "extremal",
    time_budget: float | None = 300.0,
) -> ScreenReport:
    r"""Screen token data at FixUp initialisation.

    Parameters
    ----------
    samples : list of Empirical, list of (N_i, d) float arrays, (n, N, d) array, or None
        Arrays are turned into laws once (:func:`~ntkcheck.cgf.empirical.as_laws`): the Gram,
        the verdicts and the structure report all see distinct atoms with their masses.
        None screens the bundled example (:data:`BUNDLED_DATA`).
    heads : int, "auto", Heads or None
        A head count drawn from the init spec (``q_scale``, ``b_scale``, ``dist``, ``seed``),
        explicit heads, or ``"auto"``/None: from :func:`default_head_count` (rank room ``4 M`` for
        the span of the atoms), doubled until the Gram is certified positive, or its kernel is the
        head law's, or the budget is spent (:func:`~ntkcheck.ntk.heads.search.search_heads`).
    depth_T : float
        Depth ``T`` of the model: the NTK and :math:`\lambda_0` scale by ``T``.
    certify : bool
        Certificate for the Gram when float64 cannot decide and no kernel is predicted
        (``M <= 4096``, :func:`~ntkcheck.ntk.certificate.routes.certify_lambda_min`).
    max_bits : int
        Highest Arb precision of that certificate (512 keeps a singular Gram's failed
        attempts near one second; a Gram with relative ``lambda_min`` ~1e-40 needs ~300).
    source : str or None
        What the data is, in words, for the report's bottom line (set for the bundled data).
    min_relative_lambda : float
        The smallest certified ``lambda_min / lambda_max`` called a useful rate (default
        ``1e-12``, :mod:`ntkcheck.ntk.certificate.useful_rate` says why; 0 turns the gate off): a Gram
        certified positive below it concludes ``"certified positive, below a useful rate"``.
    delta, head_law_seconds : float
        Failure probability and time budget of the certificate of the head law's NTK
        (:func:`~ntkcheck.ntk.heads.law.head_law_bound`; None: ``DEFAULT_SECONDS`` of that module, 20 s; 0 skips it).
    spectrum : {"extremal", "full"}
        Of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`: ``"full"`` keeps every eigenvalue (``M <= 4096``),
        which :func:`plot_report` draws.
    time_budget : float, Budget or None
        Seconds for the whole screening (default 300; None: no limit; each step gets at most what is left).

    Returns
    -------
    ScreenReport

    Examples
    --------
    >>> from ntkcheck.io.files import bundled_path, load_samples
    >>> r = screen(load_samples(bundled_path()))
    >>> r.weak.verdict.value, r.crosscheck.agreement, r.complement.agreement
    ('dependent', 'agrees', 'agrees')
    """
    from .independence.decision import decide

    if samples is None:
        samples = load_samples(bundled_path())
        source = BUNDLED_DATA if source is None else source
    laws = as_laws(samples)
    require_float_view(laws, "the screening's Gram")
    check_gram_range(laws)  # before the dependence structure's moments overflow: no warning ahead of the refusal
    if not (isinstance(depth_T, (int, float)) and math.isfinite(depth_T) and depth_T > 0):
        raise InputError(f"depth_T: expected a positive number, got {depth_T!r}")
    min_relative_lambda = check_min_relative_lambda(min_relative_lambda)
    spec = "given" if isinstance(heads, Heads) else f"{dist}, q_scale {q_scale:g}, b_scale {b_scale:g}, seed {seed}"
    weak = decide(laws, property="weak")
    strong = decide(laws, property="strong")
    st = dependence_structure(laws, weak=weak)
    # Prop. 8's hypothesis on the head law, checked before anything invokes it
    sup = law_support(laws, q_scale=q_scale, b_scale=b_scale, dist=dist,
                      heads=heads if isinstance(heads, Heads) else None)
    # the heads and their Gram, certified where sensible (never where a kernel is predicted)
    hsr = search_heads(laws, heads, structure=st, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed,
                       certify=certify, max_bits=max_bits, progress=progress,
                       spectrum=spectrum, law_kernel=sup.kernel.dimension if sup.singular else 0)  # type: ignore[union-attr]
    hs, g = hsr.heads, hsr.gram
    hl = _head_law_step(laws, sup, st, hsr, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed, delta=delta,
                        seconds=head_law_seconds, given=isinstance(heads, Heads))
    cc = crosscheck(laws, hs, weak=weak, gram_result=g, structure=st, heads_kernel=hsr.kernel, head_law=hl,
                    law_support=sup)
    complement, comp_idx, notes = _complement_check(laws, hs, weak, st, certify=certify, max_bits=max_bits,
                                                    progress=progress, spectrum=spectrum, support=sup)
    return ScreenReport(
        samples=_summaries(laws, weak.null_vector if weak.dependent else None),
        heads=spec,
        weak=weak,
        strong=strong,
        gram=g,
        crosscheck=cc,
        complement=complement,
        complement_indices=comp_idx,
        depth_T=float(depth_T),
        lambda_0=float(depth_T) * g.lambda_min,
        notes=tuple(notes),
        source=source,
        min_relative_lambda=min_relative_lambda,
        slow_mode=slow_mode(laws, hs) if useful_rate(g, min_relative_lambda) is False else None,
        drawn_heads=hs,
        heads_spec={"kind": "given", "q_scale": None, "b_scale": None, "seed": None, "count": g.heads, "file": None}
        if isinstance(heads, Heads) else {"kind": dist, "q_scale": float(q_scale), "b_scale": float(b_scale),
                                          "seed": int(seed), "count": g.heads, "file": None},
        head_law=hl,
        head_search=hsr,
        law_support=sup,
    )


def _head_law_step(laws: list[Empirical], sup: HeadLawSupport, st: DependenceStructure, hsr: HeadSearch, *,
                   q_scale: float, b_scale: float, dist: str, seed: int, delta: float, seconds: float | None,
                   given: bool) -> HeadLawBound | None:
    """The certificate of the head law's NTK: None for explicit heads (their Gram is their law's NTK)
    or ``seconds == 0``; ``lambda_min(K_rho) = 0`` exactly, without drawing, where the law's kernel is
    proved (:mod:`ntkcheck.ntk.prop8.hypotheses`); else drawn (:func:`~ntkcheck.ntk.heads.law.head_law_bound`)."""
    s = _head_law.DEFAULT_SECONDS if seconds is None else seconds
    if not s or given:
        return None
    if sup.singular:
        assert sup.kernel is not None
        return HeadLawBound("singular", delta, 0.0, 0.0, detail=sup.kernel.short())
    g = hsr.gram
    return _head_law.head_law_bound(laws, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed, delta=delta,
                                    seconds=s, pilot=g.lambda_min if g.positive else None, structure=st,
                                    span=hsr.span)
