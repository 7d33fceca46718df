"""Steps of :func:`ntkcheck.ntk.prop8.crosscheck.crosscheck` that need nothing from that module:
the predicted kernel vector's type, the CGF decision, the naming of the structures found,
and the verdicts of the branches that make no use of a predicted kernel vector.

Private: the public names live in :mod:`ntkcheck.ntk.prop8.crosscheck`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..._records import restore
from ..gram_matrix.pipeline import POSITIVE_REL, RESOLUTION_EIGH, GramResult
from .structure import DependenceStructure


@dataclass(frozen=True)
class KernelPrediction:
    r"""A predicted kernel vector :math:`p_i = c_i\,(d\nu/d\mu_i)\,e` of the NTK map.

    Attributes
    ----------
    c : tuple of Fraction or float
        The dependency used (:math:`\sum_i c_i\Lambda_i` affine).
    alpha_zero : bool
    nu : tuple of (atom, mass)
        The signed measure :math:`\nu` on the shared atoms (``()`` when only single
        Diracs carry the dependency).
    p : (M,) float array
        Scalar adjoint on the distinct atoms (laws in order),
        :math:`p_i(x_{ia}) = c_i\,\nu(\{x_{ia}\})/\mu_i(\{x_{ia}\})` (multiply by any unit vector
        ``e`` for the vector-valued :math:`p_i`).
    source : str
        ``"decide null vector"`` or ``"Dirac relation sum c_i x_i = 0"``.
    shared : int
        Number of atoms shared by every sample with :math:`c_i \ne 0` that is not a single Dirac.
    """

    c: tuple[Any, ...]
    alpha_zero: bool
    nu: tuple[tuple[tuple[Any, ...], int], ...]
    p: np.ndarray
    source: str
    shared: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "c": [str(v) for v in self.c],
            "alpha_zero": self.alpha_zero,
            "nu": [{"atom": [float(v) for v in a], "mass": m} for a, m in self.nu],
            "p": [float(v) for v in self.p],
            "source": self.source,
            "shared": self.shared,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelPrediction:
        return restore(cls, d, c=lambda v: tuple(float(x) if ("." in x or "e" in x) else Fraction(x) for x in v),
                       nu=lambda v: tuple((tuple(e["atom"]), e["mass"]) for e in v))


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
