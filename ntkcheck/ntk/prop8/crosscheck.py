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
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from ..._records import restore
from ...cgf import Empirical, Family, as_laws
from ...errors import InputError
from ...independence.results import no_truth_value
from ..gram_matrix.features import Heads, _as_heads, _features
from ..gram_matrix.pipeline import GramResult, gram
from ..heads.rank import HeadsKernel, heads_kernel
from ._steps import (
    KernelPrediction,
    _no_prediction_verdict,
    _structures_named,
    _sufficiency_verdict,
    _Verdict,
    _weak_decision,
)
from .structure import DependenceStructure, dependence_structure

__all__ = ["KernelPrediction", "KernelComparison", "CrosscheckResult", "predicted_kernel_vector", "kernel_residual",
           "subspace_residual", "crosscheck", "KERNEL_RTOL"]

#: relative residual ||F^T u|| / (||F||_2 ||u||) below which a predicted kernel vector counts as
#: annihilated: float64 rounding of the features (a few ulps times sqrt(M H d)) with margin.
KERNEL_RTOL = 1e-10


def _is_zero(v: Any) -> bool:
    if isinstance(v, Fraction | int):
        return v == 0
    return abs(float(v)) <= 1e-12


def predicted_kernel_vector(samples: Any, c: Any, alpha: Any) -> KernelPrediction | None:
    r"""The kernel vector of condition (34) for a dependency ``c`` with linear part ``alpha``.

    Returns None when the overlap condition fails (no prediction).

    Parameters
    ----------
    samples : list of Empirical or (N_i, d) float arrays
    c : sequence of n numbers, not all zero
        :math:`\sum_i c_i\Lambda_i(a) = \langle\alpha, a\rangle + \beta`.
    alpha : sequence of d numbers

    Returns
    -------
    KernelPrediction or None
        ``p`` on the distinct atoms: :math:`p_i(x) = c_i\,\nu(\{x\})/\mu_i(\{x\})`.
    """
    return _predicted(as_laws(samples), c, alpha)


def _predicted(laws: list[Empirical], c: Any, alpha: Any) -> KernelPrediction | None:
    c = tuple(c)
    if len(c) != len(laws):
        raise InputError(f"null vector: has {len(c)} entries for {len(laws)} samples")
    alpha_zero = all(_is_zero(a) for a in alpha)
    support = [i for i, ci in enumerate(c) if not _is_zero(ci)]
    if not support:
        return None
    diracs = [i for i in support if laws[i].n_atoms == 1]
    rich = [i for i in support if i not in diracs]
    shared: list[tuple[Any, ...]] = []
    if rich:
        common = None
        for i in rich:
            atoms = set(laws[i].atom_keys())  # exact: values given as non-doubles keep their exact keys
            common = atoms if common is None else common & atoms
        shared = sorted(common or ())
    nu: list[tuple[tuple[float, ...], int]]
    if alpha_zero:
        if rich and not shared:
            return None
        nu = [(shared[0], 1)] if rich else []
        dirac_mass = 1  # nu_i of total mass nu(R^d) = 1 at the Dirac's own atom
    else:
        if len(shared) < 2 or not rich:
            return None
        nu = [(shared[0], 1), (shared[1], -1)]
        dirac_mass = 0
    nu_map = dict(nu)
    p_parts = []
    for i, law in enumerate(laws):
        m = law.n_atoms
        ci = float(c[i])
        if i not in support:
            p_parts.append(np.zeros(m))
        elif i in diracs:
            p_parts.append(np.full(m, ci * dirac_mass))  # mu_i({x_i}) = 1
        else:
            # p_i(x) = c_i nu({x}) / mu_i({x}), mu_i({x}) the atom's mass
            p_parts.append(np.array([ci * nu_map.get(r, 0) / mu for r, mu in zip(law.atom_keys(), law.masses,
                                                                                  strict=True)]))
    p = np.concatenate(p_parts)
    if not np.any(p):
        return None
    return KernelPrediction(c, alpha_zero, tuple(nu), p, "decide null vector", len(shared))


def _dirac_relation(laws: list[Empirical]) -> tuple[Fraction, ...] | None:
    """A c supported on the single-Dirac samples with sum c_i x_i = 0 (exact), if any."""
    idx = [i for i, law in enumerate(laws) if law.n_atoms == 1]
    if len(idx) < 2:
        return None
    d = laws[0].dim
    A = sp.Matrix(d, len(idx), lambda k, r: sp.Rational(laws[idx[r]].rational_atoms()[0][k]))
    basis = A.nullspace()  # d x n_dirac with rational entries: sympy is instant at this size
    if not basis:
        return None
    col = [Fraction(int(v.p), int(v.q)) for v in basis[0]]
    c = [Fraction(0)] * len(laws)
    for r, i in enumerate(idx):
        c[i] = col[r]
    return tuple(c)


def kernel_residual(samples: Any, heads: Heads, p: Any, F: np.ndarray | None = None,
                    norm: float | None = None) -> float:
    r"""Relative size of :math:`G[p]` over all heads, for ``p`` on the distinct atoms.

    .. math::

        G[p](Q_h, b_h) = \sum_{i,a} m_{ia}\, p_i(x_{ia})\, \phi_i(x_{ia}; Q_h, b_h)^T
                       = \sqrt H\, (F^T u)_h, \qquad u = W^{1/2} p,

    returned as :math:`\|F^T u\| / (\|F\|_2 \|u\|)`, the square root of the Rayleigh
    quotient of :math:`u` relative to :math:`\lambda_{\max}` (0 for an exact kernel vector).
    ``norm``, when given, is :math:`\|F\|_2 = \sqrt{\lambda_{\max}}` (from a
    :class:`~ntkcheck.ntk.gram_matrix.pipeline.GramResult` of the same ``F``), saving an SVD.
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    if F is None:
        F = _features(laws, heads)
    w = np.concatenate([law.masses for law in laws])
    pv = np.asarray(p, dtype=np.float64).reshape(-1)
    if pv.shape[0] != w.shape[0]:
        raise InputError(f"kernel_residual: p has {pv.shape[0]} entries, the samples have {w.shape[0]} distinct atoms")
    u = np.sqrt(w) * pv
    nu_ = np.linalg.norm(u)
    if nu_ == 0:
        raise InputError("kernel_residual: p is zero on every atom")
    fn = np.linalg.norm(F, 2) if norm is None else norm
    if fn == 0:
        return 0.0  # every feature vanishes (all tokens at the origin): G is the zero map
    return float(np.linalg.norm(F.T @ u) / (fn * nu_))


def subspace_residual(F: np.ndarray, basis: np.ndarray, norm: float | None = None) -> float:
    r"""Largest relative residual over a subspace in Gram coordinates:
    :math:`\max_{q \in \mathrm{span}(B)} \|F^T q\| / (\|F\|_2 \|q\|) = \|F^T U\|_2 / \|F\|_2`
    with ``U`` an orthonormal basis of the span of ``basis`` (M, k); ``norm`` as in
    :func:`kernel_residual`."""
    fn = np.linalg.norm(F, 2) if norm is None else norm
    if fn == 0 or basis.shape[1] == 0:
        return 0.0
    U, _ = np.linalg.qr(basis)
    return float(np.linalg.norm(F.T @ U, 2) / fn)


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
        Eigenvalues at or below ``floor`` (:attr:`~ntkcheck.ntk.gram_matrix.pipeline.GramResult.kernel_observed`).
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


def _overlap_label(pred: KernelPrediction) -> str:
    if not pred.nu:
        return "n > d Diracs (sum c_i x_i = 0)"
    return f"{pred.shared} shared atom{'s' if pred.shared != 1 else ''}"


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
    # kept in this module, not in _crosscheck_steps: gram's rank warning (stacklevel=2) names its caller
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


def _overlap_prediction(laws: list[Empirical], weak: Any, st: DependenceStructure) -> KernelPrediction | None:
    """The condition-(34) kernel vector: from the decide null vector, else from the first
    structure that has overlap, else from a Dirac relation."""
    if weak.null_vector is not None:
        alpha = weak.affine[0] if weak.affine is not None else (1,)
        pred = _predicted(laws, weak.null_vector, alpha)
        if pred is not None:
            return pred
    for r in st.relations:
        if r.kind in ("dirac",):
            continue
        pred = _predicted(laws, r.c, r.alpha)
        if pred is not None:
            return KernelPrediction(pred.c, pred.alpha_zero, pred.nu, pred.p, f"{r.kind}: {r.sentence}", pred.shared)
    c2 = _dirac_relation(laws)
    if c2 is not None:
        pred = _predicted(laws, c2, (0,) * laws[0].dim)
        if pred is not None:
            return KernelPrediction(pred.c, True, pred.nu, pred.p, "Dirac relation sum c_i x_i = 0", pred.shared)
    return None
