r"""Cross-check of the CGF verdict against the NTK Gram (seed 003 Prop. 8, both halves).

* **Sufficiency**: compact supports, heads from a law whose support contains an open set,
  weakly independent CGFs :math:`\Rightarrow` the NTK map :math:`G` is injective, so the
  Gram is positive.
* **Necessity needs overlap** (condition (34)): if :math:`\sum_i c_i\Lambda_i = \langle\alpha,a\rangle+\beta`
  with :math:`c\ne0` and a non-zero signed measure :math:`\nu \ll \mu_i` for every
  :math:`c_i\ne0` (with :math:`\nu(\mathbb R^d)=0` when :math:`\alpha\ne0`), then
  :math:`p_i = c_i\,(d\nu/d\mu_i)\,e` is in the kernel of :math:`G`:

  .. math::

      G[p](Q,b) = \sum_i c_i \int \nabla\Lambda_i(Qx+b)\,d\nu(x)\; e^T
               = \int \nabla\Big(\sum_i c_i\Lambda_i\Big)(Qx+b)\,d\nu(x)\; e^T
               = \alpha\,\nu(\mathbb R^d)\, e^T = 0 .

  For empirical laws: one shared atom ``u`` (:math:`\nu=\delta_u`) when :math:`\alpha=0`, two
  shared atoms ``u, v`` (:math:`\nu=\delta_u-\delta_v`) otherwise. Samples whose tokens are
  all equal (single Diracs) have a constant :math:`\nabla\Lambda_i = x_i`, so for them any
  :math:`\nu_i` of the same total mass does: they need not share the atom. This covers
  the table row "``n > d`` single Diracs" of ``theory/ntk-prop8.md``, where the kernel vector comes
  from :math:`\sum_i c_i x_i = 0`.
* **Without overlap** the seed makes no prediction; the cross-check says so.

Atom equality is exact (float64 bit patterns after ``-0.0 -> 0.0``; the exact values when the
tokens were given at values that are not doubles).

Beyond the seed: the dependence structure of the samples (:mod:`ntkcheck.ntk.prop8.structure`)
predicts the exact dimension of the kernel, compared with the eigenvalues at the rounding
floor (``theory/ntk-prop8.md``, "The dimension of the kernel").

References: seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 5, Prop. 8, condition
(34); ``theory/ntk-prop8.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._records import restore
from ...cgf import Empirical, Family, as_laws
from ...independence.results import no_truth_value
from ..gram_matrix.features import Heads, _as_heads, _features
from ..gram_matrix.pipeline import gram
from ..gram_matrix.result import GramResult
from ..gram_matrix.spectrum import POSITIVE_REL, RESOLUTION_EIGH
from ..heads.rank import HeadsKernel, heads_kernel
from .prediction import (
    KERNEL_RTOL,
    KernelPrediction,
    _overlap_label,
    _overlap_prediction,
    kernel_residual,
    subspace_residual,
)
from .structure import DependenceStructure, dependence_structure

__all__ = ["KernelComparison", "CrosscheckResult", "crosscheck"]

@dataclass(frozen=True)
class KernelComparison:
    r"""The kernel of the Gram: dimension predicted from the dependence structure beside the
    number of eigenvalues observed at the rounding floor.

    Attributes
    ----------
    predicted : int
        The kernel predicted for these heads (per output coordinate): the head law's,
        :attr:`~ntkcheck.ntk.prop8.structure.DependenceStructure.predicted_kernel`, or more when the
        heads are too few for the rank of the data (:class:`~ntkcheck.ntk.heads.rank.HeadsKernel`);
        a lower bound unless ``exact``.
    exact : bool
    observed : int or None
        Eigenvalues at or below ``floor`` (:attr:`~ntkcheck.ntk.gram_matrix.result.GramResult.kernel_observed`).
    floor : float
        The rounding floor, relative to :math:`\lambda_{\max}`.
    next_relative : float or None
        The smallest eigenvalue above the floor, relative to :math:`\lambda_{\max}`.
    residual : float or None
        :func:`subspace_residual` of the predicted kernel (None when it is empty or not built).
    status : str
        ``"equal"``, ``"observed larger"`` (these heads see a larger kernel than predicted: add
        heads), ``"observed smaller"`` (fewer than the proven lower bound: a contradiction), or
        ``"unknown"`` (the prediction is only a lower bound, or the spectrum was not kept).
    heads : HeadsKernel or None
        The rank bound of these heads behind ``predicted``.
    """

    predicted: int
    exact: bool
    observed: int | None
    floor: float
    next_relative: float | None
    residual: float | None
    status: str
    heads: HeadsKernel | None = None

    @classmethod
    def of(cls, structure: DependenceStructure, g: GramResult, residual: float | None,
           heads: HeadsKernel | None = None) -> KernelComparison:
        obs = g.kernel_observed
        k = structure.predicted_kernel if heads is None else heads.predicted
        if obs is None:
            status = "unknown"
        elif obs < (k if heads is None else heads.proven):
            status = "observed smaller"
        elif not structure.exact:
            status = "unknown"
        elif obs == k:
            status = "equal"
        else:
            status = "observed larger"
        return cls(k, structure.exact, obs, g.resolution, g.next_relative_eigenvalue, residual, status, heads)

    def sentence(self) -> str:
        pred = f"{self.predicted}" + ("" if self.exact else " (at least: further dependencies not excluded)")
        hk = self.heads
        if hk is not None and hk.finite_heads:
            pred += f" for these H = {hk.heads} heads ({hk.structural} for the head law: {hk.reason()})"
        obs = ("not computed (spectrum not kept)" if self.observed is None else
               f"{self.observed} eigenvalue{'s' if self.observed != 1 else ''} at the rounding floor "
               f"(relative <= {self.floor:.0e})")
        nxt = "" if self.next_relative is None else f"; next eigenvalue {self.next_relative:.3g} relative"
        res = "" if self.residual is None else f"; predicted kernel annihilated to {self.residual:.2g}"
        return f"predicted {pred}, observed {obs}{nxt}{res} [{self.status}]"

    def to_dict(self) -> dict[str, Any]:
        return {"predicted": self.predicted, "exact": self.exact, "observed": self.observed, "floor": self.floor,
                "next_relative": self.next_relative, "residual": self.residual, "status": self.status,
                "head_law": None if self.heads is None else self.heads.structural,
                "heads": None if self.heads is None else self.heads.to_dict(), "sentence": self.sentence()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelComparison:
        """The comparison from its :meth:`to_dict`, ``heads`` through
        :meth:`~ntkcheck.ntk.heads.rank.HeadsKernel.from_dict` (``head_law`` and ``sentence`` are
        derived and not read)."""
        return restore(cls, d)


@dataclass(frozen=True)
class CrosscheckResult:
    """Which statement of seed 003 Prop. 8 applies, and whether the Gram agrees with it.

    Attributes
    ----------
    weak : Decision
        ``decide(samples, property="weak")``.
    gram : GramResult or None
        None when a measure is a non-empirical family (no atoms).
    statement : str
        ``"sufficiency"`` (independent), ``"necessity"`` (dependent with overlap),
        ``"no prediction"`` (dependent without overlap, or inconclusive verdict),
        ``"not applicable"`` (non-compact family).
    overlap : str
        What was found: ``"none"``, ``"1 shared atom"``, ``"10 shared atoms"``, ``"n > d Diracs"``, ...
    prediction : KernelPrediction or None
    kernel_residual : float or None
        :func:`kernel_residual` of the predicted kernel vector.
    agreement : str
        ``"agrees"``, ``"disagrees"``, ``"inconclusive"``, ``"no prediction"``, ``"not applicable"``.
    message : str
        One readable sentence.
    structure : DependenceStructure or None
        The named dependence structures (duplicates, translates, products, Diracs) and the
        kernel dimension they predict.
    kernel : KernelComparison or None
        Predicted and observed kernel dimensions, side by side.
    """

    weak: Any
    gram: GramResult | None
    statement: str
    overlap: str
    prediction: KernelPrediction | None
    kernel_residual: float | None
    agreement: str
    message: str
    non_compact: tuple[int, ...] = field(default=())
    structure: DependenceStructure | None = None
    kernel: KernelComparison | None = None

    # ``if crosscheck(...):`` would be True for a disagreement too: test .agreement
    __bool__ = no_truth_value

    def to_dict(self) -> dict[str, Any]:
        return {
            "weak": self.weak.to_dict(),
            "gram": None if self.gram is None else self.gram.to_dict(),
            "statement": self.statement,
            "overlap": self.overlap,
            "prediction": None if self.prediction is None else self.prediction.to_dict(),
            "kernel_residual": self.kernel_residual,
            "agreement": self.agreement,
            "message": self.message,
            "non_compact": list(self.non_compact),
            "structure": None if self.structure is None else self.structure.to_dict(),
            "kernel": None if self.kernel is None else self.kernel.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CrosscheckResult:
        """The cross-check from its :meth:`to_dict`."""
        from ...independence.results import Decision

        return restore(cls, d, weak=Decision.from_dict)

    def __repr__(self) -> str:
        g = "no Gram" if self.gram is None else f"Gram {self.gram.status} (relative lambda_min {self.gram.relative_lambda_min:.3g})"
        k = "" if self.kernel is None else f"; kernel {self.kernel.sentence()}"
        return (f"CrosscheckResult({self.weak.verdict.value}; {self.statement}; overlap: {self.overlap}; {g}; "
                f"{self.agreement}: {self.message}{k})")


@dataclass(frozen=True)
class _Verdict:
    """What one branch of :func:`~ntkcheck.ntk.prop8.crosscheck.crosscheck` concludes, before the
    kernel comparison has its say (``_write_verdict`` there)."""

    statement: str
    overlap: str
    prediction: KernelPrediction | None
    residual: float | None
    agreement: str
    message: str


def _weak_decision(measures: list[Any], weak: Any) -> Any:
    """The CGF dependence: ``decide(measures, property="weak")``, or ``weak`` when given."""
    from ...independence.decision import decide

    if weak is None:
        weak = decide(measures, property="weak")
    return weak


def _structures_named(st: DependenceStructure) -> str:
    """The first two named structures, as a parenthesis for the messages (``""`` when none)."""
    named = st.lines()
    return (f" ({'; '.join(named[:2])}{'; ...' if len(named) > 2 else ''})" if named else "")


def _sufficiency_verdict(g: GramResult, kc: Any = None) -> _Verdict:
    """Independent CGFs: Prop. 8 predicts an injective NTK for the head law; does the Gram of these
    heads show it? A singular draw is never a contradiction (more heads remove it): it is
    inconclusive, with the reason when the rank bound of these heads explains it."""
    rel = g.relative_lambda_min
    hk = None if kc is None else kc.heads
    if not g.positive and hk is not None and hk.finite_heads:
        return _Verdict("sufficiency", "not needed", None, None, "inconclusive",
                        f"Prop. 8 predicts an injective NTK for the head law, but these heads are too few: "
                        f"{hk.reason()}; use {hk.next_step()}.")
    if g.rank_deficient_by_size:
        return _Verdict("sufficiency", "not needed", None, None, "inconclusive",
                        "Prop. 8 predicts a positive Gram, but H d < M makes the finite-head Gram "
                        "singular by rank: add heads.")
    if g.status == "singular" and g.certified is not None:
        return _Verdict("sufficiency", "not needed", None, None, "no prediction",
                        "independent CGFs => injective NTK for a head law whose support contains an open set "
                        f"(Prop. 8); these heads are degenerate: {g.certified.detail} (proved), which Prop. 8 "
                        "does not exclude for finitely many heads.")
    if g.positive:
        how = (f"certified, {g.certified.how}: lambda_min >= {g.certified.lower_bound:.3g}"
               if g.certified_positive and g.certified
               else "float64 only, not certified")
        return _Verdict("sufficiency", "not needed", None, None, "agrees",
                        f"independent CGFs => injective NTK (Prop. 8); Gram positive ({how}, "
                        f"relative lambda_min {rel:.3g}).")
    if rel < RESOLUTION_EIGH / 1000 and g.status == "below resolution":
        return _Verdict("sufficiency", "not needed", None, None, "inconclusive",
                        f"independent CGFs but the Gram of these {g.heads} heads is singular to working precision "
                        f"(relative lambda_min {rel:.3g}), beyond what their number explains; Prop. 8 is about the "
                        "head law, and more heads or other Q, b scales may separate it from 0.")
    return _Verdict("sufficiency", "not needed", None, None, "inconclusive",
                    f"independent CGFs; the Gram's relative lambda_min {rel:.3g} is below {POSITIVE_REL:g} "
                    "and was not certified: positivity is not claimed.")


def _no_prediction_verdict(g: GramResult) -> _Verdict:
    """Inconclusive CGF verdict: Prop. 8 is silent, the Gram is only reported."""
    return _Verdict("no prediction", "n/a", None, None, "no prediction",
                    f"CGF verdict inconclusive: Prop. 8 makes no prediction; Gram {g.status} "
                    f"(relative lambda_min {g.relative_lambda_min:.3g}).")


def _inputs(samples: Any) -> list[Any]:
    """Laws (:func:`~ntkcheck.cgf.empirical.as_laws`, once), or the measures as given when a
    closed-form family is among them (then there is no Gram)."""
    items = [samples] if isinstance(samples, Family) else samples
    if isinstance(items, (list, tuple)) and any(isinstance(m, Family) and not isinstance(m, Empirical)
                                                for m in items):
        from ...independence.decision import as_measures

        return as_measures(items)
    return as_laws(samples)


def _result_without_gram(weak: Any, verdict: str, measures: list[Any],
                         non_compact: tuple[int, ...]) -> CrosscheckResult | None:
    """The result when no Gram can be compared with the ``verdict`` (``weak.verdict.value``):
    "not applicable" for a non-compact measure (Prop. 8 assumes compact supports) or a
    closed-form family (no atoms to build a Gram on); None when every measure is an
    empirical law."""
    if non_compact:
        return CrosscheckResult(weak, None, "not applicable", "n/a", None, None, "not applicable",
                                f"measures {list(non_compact)} have non-compact support: the NTK equivalence of "
                                "seed 003 Prop. 8 does not apply (theory/ntk-prop8.md); the CGF verdict stands alone",
                                non_compact)
    if not all(isinstance(m, Empirical) for m in measures):
        return CrosscheckResult(weak, None, "sufficiency" if verdict == "independent" else "no prediction", "n/a",
                                None, None, "not applicable",
                                "closed-form compact families have no atoms: pass token samples drawn from "
                                "them to compute a Gram")
    return None


def _gram_of(laws: list[Empirical], heads: Heads, weak: Any, gram_result: GramResult | None, certify: bool,
             progress: bool) -> GramResult:
    """The Gram of ``laws`` under ``heads``, or ``gram_result`` when given."""
    # gram's rank warning (stacklevel=2) names its caller: this function
    if gram_result is not None:
        return gram_result
    # certify only where positivity is the prediction: a singular Gram never certifies
    return gram(laws, heads, certify=certify and weak.independent, progress=progress)


def _compare_kernel(laws: list[Empirical], heads: Heads, st: DependenceStructure, g: GramResult,
                    hk: HeadsKernel | None = None) -> tuple[np.ndarray | None, float | None, KernelComparison]:
    """The kernel predicted by the dependence structure beside the kernel the Gram observes.

    Returns
    -------
    F : (M, H d) float array or None
        The features, built only when the structure has a kernel basis; returned so the
        necessity check need not build them a second time.
    sub_res : float or None
        :func:`subspace_residual` of the predicted kernel.
    KernelComparison
    """
    F: np.ndarray | None = None
    sub_res: float | None = None
    if st.kernel_basis is not None:
        F = _features(laws, heads)
        sub_res = subspace_residual(F, st.kernel_basis, np.sqrt(g.lambda_max))
    hk = heads_kernel(laws, heads, st, gram=g) if hk is None else hk
    return F, sub_res, KernelComparison.of(st, g, sub_res, hk)


def _necessity_verdict(laws: list[Empirical], heads: Heads, weak: Any, st: DependenceStructure, g: GramResult,
                       kc: KernelComparison, F: np.ndarray | None, what: str) -> _Verdict:
    """Dependent CGFs: with overlap (condition (34)) the predicted kernel vector must be
    annihilated by the features; without overlap Prop. 8 predicts nothing.

    ``F`` is reused when :func:`_compare_kernel` built it; ``what`` is
    :func:`_structures_named`.
    """
    rel = g.relative_lambda_min
    pred = _overlap_prediction(laws, weak, st)
    if pred is None:
        injective = (kc.status == "equal" and kc.predicted == 0)
        extra = (f"; the kernel count predicts an injective NTK and the Gram is {g.status}" if injective else "")
        return _Verdict("no prediction", "none", None, None, "no prediction",
                        f"dependent CGFs{what} without overlap (condition (34) fails): Prop. 8 predicts nothing"
                        f"{extra} (relative lambda_min {rel:.3g}).")
    if F is None:
        F = _features(laws, heads)
    res = kernel_residual(laws, heads, pred.p, F, np.sqrt(g.lambda_max))
    label = _overlap_label(pred)
    if res <= KERNEL_RTOL:
        return _Verdict("necessity", label, pred, res, "agrees",
                        f"dependent CGFs{what} with overlap ({label}) => predicted kernel vector p_i = c_i dnu/dmu_i "
                        f"is annihilated (relative residual {res:.2g}); Gram singular.")
    return _Verdict("necessity", label, pred, res, "disagrees",
                    f"dependent CGFs{what} with overlap ({label}) but G[p] != 0 (relative residual {res:.3g} > "
                    f"{KERNEL_RTOL:g}): the predicted kernel vector is not annihilated.")


def _write_verdict(weak: Any, g: GramResult, st: DependenceStructure, kc: KernelComparison,
                   sub_res: float | None, v: _Verdict) -> CrosscheckResult:
    """The :class:`CrosscheckResult` of a branch's verdict ``v``.

    Whatever Prop. 8 says, a Gram that sees fewer kernel dimensions than the structure
    predicts, or does not annihilate the predicted kernel, contradicts the structure: that
    overrules the branch's agreement.
    """
    agreement, message = v.agreement, v.message
    if kc.status == "observed smaller" or (sub_res is not None and sub_res > KERNEL_RTOL):
        agreement = "disagrees"
        message += (" The predicted kernel is not annihilated or not seen: the Gram contradicts the structure "
                    "found.")
    return CrosscheckResult(weak, g, v.statement, v.overlap, v.prediction, v.residual, agreement, message, (),
                            st, kc)


def crosscheck(
    samples: Any,
    heads: Heads,
    *,
    weak: Any = None,
    gram_result: GramResult | None = None,
    structure: DependenceStructure | None = None,
    certify: bool = True,
    progress: bool = False,
    heads_kernel: HeadsKernel | None = None,
    head_law: Any = None,
    law_support: Any = None,
) -> CrosscheckResult:
    r"""Decide weak independence, compute the Gram, and check seed 003 Prop. 8 against it.

    Besides the seed's statement (sufficiency, or necessity under the overlap condition
    (34)), the dependence structure of the samples (:mod:`ntkcheck.ntk.prop8.structure`: duplicates,
    translates, products, Diracs) predicts the exact dimension of the kernel of the NTK
    map; it is compared with the number of Gram eigenvalues at the rounding floor, and the
    predicted kernel is checked to be annihilated by the features (:func:`subspace_residual`).

    Parameters
    ----------
    samples : list of Empirical or (N_i, d) float arrays (or families: then only the verdict is reported)
        Arrays are turned into laws once (:func:`~ntkcheck.cgf.empirical.as_laws`).
    heads : Heads
    weak : Decision, optional
        A precomputed ``decide(samples, property="weak")`` (the screen reuses it).
    gram_result : GramResult, optional
        A precomputed :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` for the same samples and heads.
    structure : DependenceStructure, optional
        A precomputed :func:`~ntkcheck.ntk.prop8.structure.dependence_structure` of the same samples.
    certify : bool
        Passed to :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` when the verdict is independent (Arb
        certificate when float64 cannot establish positivity, small problems only).
    heads_kernel : HeadsKernel, optional
        A precomputed :func:`~ntkcheck.ntk.heads.rank.heads_kernel` of the same heads and Gram.
    head_law : HeadLawBound, optional
        The certificate of the head law's NTK (:func:`~ntkcheck.ntk.heads.law.head_law_bound`): Prop. 8
        is a statement about it, so it is compared too (a positive head law against a proved
        kernel is a contradiction; against independent CGFs, an agreement).
    law_support : HeadLawSupport, optional
        Prop. 8's hypothesis on the head law (:func:`~ntkcheck.ntk.prop8.hypotheses.law_support`):
        where the law's support contains no open set of ``(Q, b)`` the sufficiency half is not
        invoked, the kernel proved for every head of the law is compared instead.

    Returns
    -------
    CrosscheckResult

    References
    ----------
    Seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 5, Prop. 8 and condition (34);
    ``theory/ntk-prop8.md``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkcheck.ntk.gram_matrix.features import init_heads
    >>> z, u, v = np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0])
    >>> S = [np.array([z, u]), np.array([z, v]), np.array([z, u, v, u + v])]
    >>> r = crosscheck(S, init_heads(16, 2))
    >>> r.agreement, r.kernel.predicted, r.kernel.observed
    ('agrees', 1, 1)
    """
    measures = _inputs(samples)
    non_compact = tuple(i for i, m in enumerate(measures) if not m.compact)
    weak = _weak_decision(measures, weak)
    verdict = weak.verdict.value
    no_gram = _result_without_gram(weak, verdict, measures, non_compact)
    if no_gram is not None:
        return no_gram
    laws: list[Empirical] = list(measures)
    heads = _as_heads(heads, laws[0].dim)
    g = _gram_of(laws, heads, weak, gram_result, certify, progress)
    st = structure if structure is not None else dependence_structure(laws, weak=weak)
    F, sub_res, kc = _compare_kernel(laws, heads, st, g, heads_kernel)
    what = _structures_named(st)
    degenerate = law_support is not None and not law_support.open_set
    if verdict == "independent":
        v = (_Verdict("not applicable", "not needed", None, None, *law_support.against(g)) if degenerate
             else _sufficiency_verdict(g, kc))
    elif verdict != "dependent":
        v = _no_prediction_verdict(g)
    else:
        v = _necessity_verdict(laws, heads, weak, st, g, kc, F, what)
    if degenerate and verdict != "independent":  # a kernel count from the structure assumes an open set
        v = _Verdict(v.statement, v.overlap, v.prediction, v.residual, v.agreement,
                     f"{v.message} Head law: {law_support.brief()}.")
    if head_law is not None:
        v = _Verdict(v.statement, v.overlap, v.prediction, v.residual,
                     *head_law.compare(v.statement, v.agreement, v.message, st.predicted_kernel))
    return _write_verdict(weak, g, st, kc, sub_res, v)
