r"""A useful rate: when a certified positive NTK Gram is still too close to singular to train on.

A rigorous lower bound :math:`\lambda_{\min} \ge \ell > 0` proves injectivity for the numbers
given, but not that gradient flow gets anywhere. Near FixUp initialisation the linearised
residual decays like :math:`e^{-\lambda_{\min} s}` along the slowest eigenvector of the Gram,
while the fastest direction sets the step size: gradient descent is stable only for steps
below :math:`2/\lambda_{\max}`, so the slowest direction needs about
:math:`\lambda_{\max}/(2\lambda_{\min})` steps per e-fold. At a relative
:math:`\lambda_{\min}/\lambda_{\max} = 10^{-12}` that is :math:`5\cdot 10^{11}` steps.

Below that level the value also stops belonging to the data. :math:`\lambda_{\min} =
\sigma_{\min}(F)^2`, and a perturbation of the tokens of relative size :math:`\delta` moves
:math:`\sigma_{\min}(F)` by about :math:`\delta\,\|F\|_2`, so it can create or destroy a relative
:math:`\lambda_{\min}` of order :math:`\delta^2`: a product triple whose ``u + v`` was rounded
in float64 leaves about :math:`10^{-32}`, in float32 :math:`10^{-18}` to :math:`6\cdot 10^{-18}`
(measured), and :math:`10^{-12}` is what a perturbation of relative size :math:`10^{-6}` reaches. It is also the level under which ntkcheck never calls a float64
spectrum positive (``POSITIVE_REL``: ``eigvalsh`` of the formed Gram resolves about
:math:`10^{-13}`). :data:`DEFAULT_MIN_RELATIVE_LAMBDA` is therefore :math:`10^{-12}`.

A Gram certified positive whose certified bound is below that fraction of
:math:`\lambda_{\max}` (:func:`useful_rate`) is reported apart, with the near-dependency named
(:func:`slow_mode`: the samples that carry the slowest eigenvector).

References: seed 003 Prop. 5, 8 (positivity and injectivity); seed 002 Thm. 8.5, eq. 31 (the
rate :math:`e^{-\lambda_0 s}`); ``theory/certificates.md`` ("A useful rate").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla

from ... import _budget
from ...cgf.empirical import Empirical
from ...errors import InputError
from ..gram_matrix.features import Heads, _atom_count, _features

__all__ = ["DEFAULT_MIN_RELATIVE_LAMBDA", "SlowMode", "check_min_relative_lambda", "certified_relative",
           "useful_rate", "slow_mode"]

#: the smallest certified lambda_min / lambda_max called a useful rate (the module docstring says why)
DEFAULT_MIN_RELATIVE_LAMBDA = 1e-12
#: a sample is named in the near-dependency when it carries at least this share of the slowest mode
SHARE = 0.01
#: the slowest mode is computed (an SVD of F) up to this many distinct atoms
MAX_SLOW_MODE_ATOMS = 4096


def check_min_relative_lambda(value: Any) -> float:
    """``value`` as a float in ``[0, 1)``, or :class:`~ntkcheck.errors.InputError` (0 turns the gate off)."""
    if isinstance(value, bool):
        raise InputError(f"min_relative_lambda: expected a number in [0, 1), got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"min_relative_lambda: expected a number in [0, 1), got {value!r}") from None
    if not (math.isfinite(v) and 0.0 <= v < 1.0):
        raise InputError(f"min_relative_lambda: expected a number in [0, 1), got {value!r}")
    return v


def certified_relative(g: Any) -> float | None:
    """The certified lower bound on ``lambda_min`` divided by the float64 ``lambda_max`` of the
    :class:`~ntkcheck.ntk.gram_matrix.result.GramResult` ``g``; None when nothing is certified."""
    c = getattr(g, "certified", None)
    if c is None or not c.positive or not g.lambda_max > 0:
        return None
    return float(c.lower_bound) / float(g.lambda_max)


def useful_rate(g: Any, min_relative_lambda: float = DEFAULT_MIN_RELATIVE_LAMBDA) -> bool | None:
    """Whether the certified ``lambda_min`` of ``g`` is at least ``min_relative_lambda`` times
    ``lambda_max``; None when ``g`` is not certified positive (the question does not arise)."""
    rel = certified_relative(g)
    if rel is None:
        return None
    return rel >= min_relative_lambda


@dataclass(frozen=True)
class SlowMode:
    r"""Where the slowest eigenvector ``v`` of the Gram :math:`F F^T` lives (float64 evidence).

    ``relative`` is :math:`\sigma_{\min}(F)^2/\sigma_{\max}(F)^2` from the SVD of ``F``; ``shares``
    the share of :math:`\|v\|^2` on each sample's atoms (entry ``(i, a)`` of ``v`` is a function
    value at atom :math:`x_{ia}` times :math:`\sqrt{m_{ia}}`, so the share is the
    :math:`L^2(\mu_i)` mass); ``samples`` those with at least :data:`SHARE` of it, largest first.
    By seed 003 Prop. 8 a kernel vector of a dependency :math:`\sum_i c_i\Lambda_i` = affine is
    :math:`p_i = c_i\,d\nu/d\mu_i`: it lives on the samples with :math:`c_i \ne 0`, so a
    near-kernel shows which samples are nearly dependent. Evidence, not a certificate.
    """

    relative: float
    shares: tuple[float, ...]
    samples: tuple[int, ...]

    @property
    def covered(self) -> float:
        """The share of the slowest mode on :attr:`samples`."""
        return float(sum(self.shares[i] for i in self.samples))

    def sentence(self) -> str:
        """The near-dependency in words."""
        return (f"the slowest eigenvector of the Gram lives on samples {list(self.samples)} "
                f"({100 * self.covered:.4g}% of its weight; float64 evidence)")

    def to_dict(self) -> dict[str, Any]:
        return {"relative": self.relative, "shares": list(self.shares), "samples": list(self.samples),
                "sentence": self.sentence()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SlowMode:
        return cls(float(d["relative"]), tuple(float(s) for s in d["shares"]), tuple(int(i) for i in d["samples"]))


def slow_mode(laws: Sequence[Empirical], heads: Heads) -> SlowMode | None:
    """The :class:`SlowMode` of the Gram of ``laws`` on ``heads`` (one SVD of ``F``, ``O(M^2 H d)``),
    or None above :data:`MAX_SLOW_MODE_ATOMS` distinct atoms, when ``H d < M`` or when the SVD would not
    fit in the time budget (:mod:`ntkcheck._budget`).

    The left singular vector of the smallest singular value is accurate to about
    :math:`u\\,\\sigma_{\\max}/\\mathrm{gap}` even when :math:`\\sigma_{\\min}` itself is at the rounding
    floor, as long as the next singular value is well separated (a single near-dependency)."""
    M = _atom_count(laws)
    if M > MAX_SLOW_MODE_ATOMS or heads.count * heads.dim < M:
        return None
    if not _budget.fits(lambda: _budget.dense_seconds(4.0 * M * M * heads.count * heads.dim, _budget.SVD)):
        return None  # the SVD would not fit in the time budget: the near-dependency is not named
    F = _features(laws, heads)
    try:  # an optional diagnosis: abandoned at the deadline rather than run past it
        with _budget.scope(stoppable=True):
            U, s, _ = _budget.run(lambda: sla.svd(F, full_matrices=False, check_finite=False), "the SVD of F")
    except _budget.OutOfTime:
        return None
    v = U[:, int(np.argmin(s))]
    edges = np.cumsum([0] + [law.n_atoms for law in laws])
    shares = tuple(float(np.sum(v[edges[i]:edges[i + 1]] ** 2)) for i in range(len(laws)))
    order = sorted(range(len(laws)), key=lambda i: -shares[i])
    named = tuple(sorted(i for i in order if shares[i] >= SHARE))
    smax = float(s.max())
    rel = float(s.min() / smax) ** 2 if smax > 0 else 0.0
    return SlowMode(rel, shares, named)


def rounding_notes(notes: Sequence[str]) -> tuple[str, ...]:
    """The notes of :func:`~ntkcheck.independence.decision.decide` that say a certificate rests on
    differences at the rounding level of float64 data."""
    return tuple(n for n in notes if "rounding level" in n)


def near_dependency(slow: SlowMode | None, notes: Sequence[str]) -> dict[str, Any]:
    """What names a near-dependency, as values: the samples of the slowest mode, the mode, and
    the rounding-level notes of the decisions."""
    return {"samples": None if slow is None else list(slow.samples),
            "slow_mode": None if slow is None else slow.to_dict(), "rounding_notes": list(rounding_notes(notes))}


def below_rate_sentences(g: Any, min_relative_lambda: float, slow: SlowMode | None,
                         notes: Sequence[str]) -> tuple[str, str]:
    """The training and next-step sentences of a screening whose Gram ``g`` is certified positive
    below ``min_relative_lambda``: the rate, why it is useless, the near-dependency by name."""
    c = g.certified
    rel = certified_relative(g) or 0.0
    steps = 1.0 / (2.0 * rel) if rel > 0 else math.inf
    where = ("the slowest eigenvector was not computed (more than "
             f"{MAX_SLOW_MODE_ATOMS} atoms)" if slow is None else slow.sentence())
    why = ("; decide certifies the CGFs independent only through differences at the rounding level of "
           "float64 data (note below)" if rounding_notes(notes) else "")
    meaning = (f"Training: the Gram is certified positive (lambda_min >= {c.lower_bound:.3g}, {c.how}) but only "
               f"{rel:.2g} of lambda_max, below the useful rate {min_relative_lambda:g}: the residual decays along "
               f"the slowest direction like exp(-lambda_min s), about {steps:.1g} gradient steps of the largest "
               "stable size per e-fold, which no training reaches, and a perturbation of the data of relative size "
               f"{math.sqrt(rel):.0e} can change it. The data are near a dependency: {where}{why}.")
    named = "the samples named above" if slow is None or not slow.samples else f"samples {list(slow.samples)}"
    nxt = (f"Next: treat {named} as dependent (values computed in floating point, such as a sum u+v rounded, "
           "sit within rounding of an exact dependency): remove one of them or recompute it exactly, and rerun; "
           "to accept this rate, lower --min-relative-lambda (min_relative_lambda=).")
    return meaning, nxt
