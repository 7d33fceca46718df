r"""The seed's sufficient conditions for strong independence, as exact checks.

* :func:`gap_condition` -- discrete laws (seed 003 Prop. 9/10, Lemma 3; condition (35)
  was lost in extraction; theory/discrete-gap.md restores a checkable form): project the atoms
  on ``w``; if every sample has at least two distinct projected atoms and the gaps
  :math:`\delta_i` between the two largest (or the two smallest) projected atoms are
  pairwise distinct, then the :math:`\Lambda_i^w` are independent modulo affine
  functions. As :math:`t\to+\infty`,
  :math:`\Lambda_i^w(t) = \text{affine} + m_i e^{-\delta_i t} + o(e^{-\delta_i t})`, and
  the smallest gap among the samples with :math:`c_i \neq 0` cannot be cancelled.
* :func:`vandermonde_condition` -- seed 003 Prop. 11/12: even CGFs
  :math:`\sum_{m\ge m_0} a_m \lambda_i^m t^{2m}` (plus a polynomial of degree
  :math:`< 2m_0`) with common non-zero :math:`a_m` and pairwise distinct non-zero
  :math:`\lambda_i`: the coefficient matrix is a scaled Vandermonde matrix.
* Prop. 7 (strong implies weak) is applied by :func:`ntkcheck.decide.decide`.

All comparisons are exact (rational arithmetic on the exact values of the inputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .._records import restore
from .._validate import as_exact_samples, exact_rows
from ..cgf.core import _project_exact, normalize_weights, to_fraction
from ..errors import InputError
from .rank import qstr

__all__ = ["GapCondition", "gap_condition", "VandermondeCondition", "vandermonde_condition"]


@dataclass(frozen=True)
class GapCondition:
    """Outcome of the discrete gap condition along a direction.

    Attributes
    ----------
    holds : bool
        True when the condition certifies strong independence at ``direction``.
    side : str
        ``"top"`` (largest atoms, t -> +inf) or ``"bottom"`` (smallest, t -> -inf), or
        ``""`` when neither side works.
    gaps : tuple of Fraction
        The gap of each sample on ``side`` (top gaps when the condition fails).
    direction : tuple of Fraction
    reason : str
        Why it fails, when it fails.
    separation : float or None
        When it holds: the smallest difference between two gaps, relative to the
        largest projected atom (``0.0`` below the float range). Near 1e-16 the certificate rests on rounding-level
        differences of the data (a translate computed in float64 is not exactly one).
    """

    holds: bool
    side: str
    gaps: tuple[Fraction | None, ...]
    direction: tuple[Fraction, ...]
    reason: str = ""
    separation: float | None = None
    kind: str = "gap-condition"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "statement": f"Prop. 9: the {self.side} gaps of the projected atoms are pairwise distinct" if self.holds else self.reason,
            "holds": self.holds,
            "side": self.side,
            "separation": self.separation,
            "gaps": [None if g is None else qstr(g) for g in self.gaps],
            "direction": [qstr(v) for v in self.direction],
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GapCondition:
        return restore(cls, d)


def _gaps(projected: list[list[Fraction]], top: bool) -> list[Fraction | None]:
    out: list[Fraction | None] = []
    for z in projected:
        distinct = sorted(set(z), reverse=top)
        out.append(abs(distinct[0] - distinct[1]) if len(distinct) >= 2 else None)
    return out


def gap_condition(samples: Any, direction: Sequence[Any], weights: Sequence[Any] | None = None) -> GapCondition:
    r"""Check the discrete gap condition (seed 003 Prop. 9) along ``direction``.

    Parameters
    ----------
    samples : list of (N_i, d) arrays, or of :class:`~ntkcheck.cgf.empirical.Empirical`
        Token sets (empirical laws; weights do not enter the condition, only the atoms).
    direction : sequence of d numbers
        Read exactly (floats as dyadic rationals).

    Returns
    -------
    GapCondition

    Examples
    --------
    >>> import numpy as np
    >>> gap_condition([np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])], [1]).holds
    True
    """
    from ..cgf import Empirical

    given = list(samples) if isinstance(samples, (list, tuple)) else None
    memo = given if given is not None and given and all(isinstance(m, Empirical) for m in given) else None
    # token arrays at their exact values (a long double or Fraction token is not rounded)
    xs = [m.atoms for m in memo] if memo is not None else as_exact_samples(samples)
    d = xs[0].shape[1]
    w = [to_fraction(v) for v in direction]
    if len(w) != d:
        raise InputError(f"direction: has length {len(w)}, the tokens have dimension {d}")
    if all(v == 0 for v in w):
        raise InputError("direction: has zero length; a direction must be non-zero")
    if weights is not None:
        for i, (x, wi) in enumerate(zip(xs, weights)):
            if wi is not None and np.any(normalize_weights(wi, x.shape[0]) == 0):
                raise InputError(f"sample {i}: zero weights; drop those tokens before checking the gap condition")
    # Empirical laws memoise their projections (the engine asks for the same ones again)
    proj = ([m.projected(w) for m in memo] if memo is not None else
            [_project_exact(x, w) if x.dtype == np.float64 else
             [sum((wk * xk for wk, xk in zip(w, row, strict=True)), Fraction(0)) for row in exact_rows(x)]
             for x in xs])
    wt = tuple(w)
    reasons = []
    for side, top in (("top", True), ("bottom", False)):
        g = _gaps(proj, top)
        if any(gi is None for gi in g):
            i = next(k for k, gi in enumerate(g) if gi is None)
            return GapCondition(False, "", tuple(g), wt, f"sample {i} has a single distinct projected atom: its CGF is affine along w")
        if len(set(g)) == len(g):
            srt = sorted(gi for gi in g if gi is not None)
            scale = max(abs(z) for zs in proj for z in zs) or Fraction(1)
            sep = min((b - a for a, b in zip(srt, srt[1:])), default=srt[0] if srt else Fraction(0))
            return GapCondition(True, side, tuple(g), wt, separation=_small_float(abs(sep / scale)))
        dup = [gi for gi in g if g.count(gi) > 1][0]
        reasons.append(f"{side} gaps not distinct (gap {dup} repeats)")
    return GapCondition(False, "", tuple(_gaps(proj, True)), wt, "; ".join(reasons))


@dataclass(frozen=True)
class VandermondeCondition:
    """Outcome of the Prop. 11/12 check: ``holds`` when the lambdas are distinct and non-zero.

    ``separation`` (when it holds): the smallest difference between two lambdas relative
    to the largest (``0.0`` below the float range); near 1e-16 the certificate rests on
    differences at the rounding level of float data.
    """

    holds: bool
    tag: str
    lambdas: tuple[Fraction, ...]
    m0: int
    reason: str = ""
    separation: float | None = None
    kind: str = "vandermonde"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "statement": f"Prop. 11: Vandermonde in pairwise distinct non-zero lambdas (powers >= {2 * self.m0})" if self.holds else self.reason,
            "holds": self.holds,
            "tag": self.tag,
            "lambdas": [qstr(v) for v in self.lambdas],
            "m0": self.m0,
            "reason": self.reason,
            "separation": self.separation,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VandermondeCondition:
        return restore(cls, d)


def vandermonde_condition(measures: Sequence[Any], direction: Sequence[Any]) -> VandermondeCondition:
    r"""Check seed 003 Prop. 11 (and Prop. 12) for families along ``direction``.

    Each measure must expose ``vandermonde_form(w)`` (see :class:`ntkcheck.cgf.base.Family`);
    the forms must share one tag (the same coefficients :math:`a_m`). The condition holds
    when the :math:`\lambda_i` are pairwise distinct and non-zero.
    """
    forms = []
    for i, m in enumerate(measures):
        f = m.vandermonde_form(direction) if hasattr(m, "vandermonde_form") else None
        if f is None:
            return VandermondeCondition(False, "", (), 0, f"measure {i} ({type(m).__name__}) has no Prop. 11 form")
        forms.append(f)
    tags = {f.tag for f in forms}
    lams = tuple(f.lam for f in forms)
    m0 = max(f.m0 for f in forms)
    if len(tags) > 1:
        return VandermondeCondition(False, "", lams, m0, f"the measures have different coefficient sequences {sorted(tags)}")
    tag = tags.pop()
    if any(v == 0 for v in lams):
        return VandermondeCondition(False, tag, lams, m0, "a lambda is zero")
    if len(set(lams)) < len(lams):
        return VandermondeCondition(False, tag, lams, m0, "the lambdas are not pairwise distinct")
    srt = sorted(lams)
    scale = max(abs(v) for v in lams)
    sep = min((b - a for a, b in zip(srt, srt[1:])), default=scale) / scale
    return VandermondeCondition(True, tag, lams, m0, separation=_small_float(sep))


def _small_float(q: Fraction) -> float:
    """A non-negative rational <= 1 as a float (0.0 when below the float range)."""
    if q.numerator == 0 or q.denominator.bit_length() - q.numerator.bit_length() > 1070:
        return 0.0
    return float(q)
