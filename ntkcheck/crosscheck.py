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
  the table row "``n > d`` single Diracs" of MATH.md section 3, where the kernel vector comes
  from :math:`\sum_i c_i x_i = 0`.
* **Without overlap** the seed makes no prediction; the cross-check says so.

Atom equality is exact (float64 bit patterns after ``-0.0 -> 0.0``).

References: seed 003 Prop. 5, Prop. 8, condition (34); MATH.md section 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from ._validate import as_samples
from .cgf import to_fraction
from .errors import InputError
from .families import Empirical
from .gram import (
    POSITIVE_REL,
    RESOLUTION_EIGH,
    GramResult,
    Heads,
    _as_heads,
    attention_features,
    gram,
)

__all__ = ["KernelPrediction", "CrosscheckResult", "predicted_kernel_vector", "kernel_residual", "crosscheck",
           "KERNEL_RTOL"]

#: relative residual ||F^T u|| / (||F||_2 ||u||) below which a predicted kernel vector counts as
#: annihilated: float64 rounding of the features (a few ulps times sqrt(M H d)) with margin.
KERNEL_RTOL = 1e-10


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
        Scalar adjoint on the token slots, :math:`c_i\,\nu(\{x_{ij}\})/\mu_i(\{x_{ij}\})`
        (multiply by any unit vector ``e`` for the vector-valued :math:`p_i`).
    source : str
        ``"decide null vector"`` or ``"Dirac relation sum c_i x_i = 0"``.
    """

    c: tuple[Any, ...]
    alpha_zero: bool
    nu: tuple[tuple[tuple[float, ...], int], ...]
    p: np.ndarray
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "c": [str(v) for v in self.c],
            "alpha_zero": self.alpha_zero,
            "nu": [{"atom": list(a), "mass": m} for a, m in self.nu],
            "p": [float(v) for v in self.p],
            "source": self.source,
        }


def _key(row: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) + 0.0 for v in row)  # +0.0 maps -0.0 to 0.0


def _is_zero(v: Any) -> bool:
    if isinstance(v, Fraction | int):
        return v == 0
    return abs(float(v)) <= 1e-12


def predicted_kernel_vector(samples: Any, c: Any, alpha: Any) -> KernelPrediction | None:
    r"""The kernel vector of condition (34) for a dependency ``c`` with linear part ``alpha``.

    Returns None when the overlap condition fails (no prediction).

    Parameters
    ----------
    samples : list of (N_i, d) float arrays
    c : sequence of n numbers, not all zero
        :math:`\sum_i c_i\Lambda_i(a) = \langle\alpha, a\rangle + \beta`.
    alpha : sequence of d numbers
    """
    S = as_samples(samples)
    c = tuple(c)
    if len(c) != len(S):
        raise InputError(f"null vector: has {len(c)} entries for {len(S)} samples")
    alpha_zero = all(_is_zero(a) for a in alpha)
    support = [i for i, ci in enumerate(c) if not _is_zero(ci)]
    if not support:
        return None
    diracs = [i for i in support if np.all(S[i] == S[i][0])]
    rich = [i for i in support if i not in diracs]
    shared: list[tuple[float, ...]] = []
    if rich:
        common = None
        for i in rich:
            atoms = {_key(r) for r in S[i]}
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
    for i, X in enumerate(S):
        N = X.shape[0]
        ci = float(c[i])
        if i not in support:
            p_parts.append(np.zeros(N))
        elif i in diracs:
            p_parts.append(np.full(N, ci * dirac_mass))  # mu_i({x_i}) = 1
        else:
            keys = [_key(r) for r in X]
            counts: dict[tuple[float, ...], int] = {}
            for k in keys:
                counts[k] = counts.get(k, 0) + 1
            # p_i(x) = c_i nu({x}) / mu_i({x}), mu_i({x}) = (multiplicity of x) / N
            p_parts.append(np.array([ci * nu_map.get(k, 0) * N / counts[k] for k in keys]))
    p = np.concatenate(p_parts)
    if not np.any(p):
        return None
    return KernelPrediction(c, alpha_zero, tuple(nu), p, "decide null vector")


def _dirac_relation(samples: list[np.ndarray]) -> tuple[Fraction, ...] | None:
    """A c supported on the single-Dirac samples with sum c_i x_i = 0 (exact), if any."""
    idx = [i for i, X in enumerate(samples) if np.all(X == X[0])]
    if len(idx) < 2:
        return None
    d = samples[0].shape[1]
    A = sp.Matrix(d, len(idx), lambda k, r: sp.Rational(to_fraction(float(samples[idx[r]][0, k]))))
    basis = A.nullspace()  # d x n_dirac with rational entries: sympy is instant at this size
    if not basis:
        return None
    col = [Fraction(int(v.p), int(v.q)) for v in basis[0]]
    c = [Fraction(0)] * len(samples)
    for r, i in enumerate(idx):
        c[i] = col[r]
    return tuple(c)


def kernel_residual(samples: Any, heads: Heads, p: Any, F: np.ndarray | None = None) -> float:
    r"""Relative size of :math:`G[p]` over all heads.

    .. math::

        G[p](Q_h, b_h) = \sum_{i,j} w_{ij}\, p_i(x_{ij})\, \phi_i(x_{ij}; Q_h, b_h)^T
                       = \sqrt H\, (F^T u)_h, \qquad u = W^{1/2} p,

    returned as :math:`\|F^T u\| / (\|F\|_2 \|u\|)`, the square root of the Rayleigh
    quotient of :math:`u` relative to :math:`\lambda_{\max}` (0 for an exact kernel vector).
    """
    S = as_samples(samples)
    heads = _as_heads(heads, S[0].shape[1])
    if F is None:
        F = attention_features(S, heads)
    w = np.concatenate([np.full(X.shape[0], 1.0 / X.shape[0]) for X in S])
    u = np.sqrt(w) * np.asarray(p, dtype=np.float64)
    nu_ = np.linalg.norm(u)
    if nu_ == 0:
        raise InputError("kernel_residual: p is zero on every token slot")
    fn = np.linalg.norm(F, 2)
    if fn == 0:
        return 0.0  # every feature vanishes (all tokens at the origin): G is the zero map
    return float(np.linalg.norm(F.T @ u) / (fn * nu_))


@dataclass(frozen=True)
class CrosscheckResult:
    """Which statement of seed 003 Prop. 8 applies, and whether the Gram agrees with it.

    Attributes
    ----------
    weak : Decision
        ``decide(samples, property="weak")``.
    gram : GramResult or None
        None when a measure is a non-empirical family (no token slots).
    statement : str
        ``"sufficiency"`` (independent), ``"necessity"`` (dependent with overlap),
        ``"no prediction"`` (dependent without overlap, or inconclusive verdict),
        ``"not applicable"`` (non-compact family).
    overlap : str
        What was found: ``"none"``, ``"1 shared atom"``, ``"2 shared atoms"``, ``"n > d Diracs"``, ...
    prediction : KernelPrediction or None
    kernel_residual : float or None
        :func:`kernel_residual` of the predicted kernel vector.
    agreement : str
        ``"agrees"``, ``"disagrees"``, ``"inconclusive"``, ``"no prediction"``, ``"not applicable"``.
    message : str
        One readable sentence.
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
        }

    def __repr__(self) -> str:
        g = "no Gram" if self.gram is None else f"Gram {self.gram.status} (relative lambda_min {self.gram.relative_lambda_min:.3g})"
        return (f"CrosscheckResult({self.weak.verdict.value}; {self.statement}; overlap: {self.overlap}; {g}; "
                f"{self.agreement}: {self.message})")


def _overlap_label(pred: KernelPrediction) -> str:
    if not pred.nu:
        return "n > d Diracs (sum c_i x_i = 0)"
    return f"{len(pred.nu)} shared atom{'s' if len(pred.nu) > 1 else ''}"


def crosscheck(
    samples: Any,
    heads: Heads,
    *,
    weak: Any = None,
    gram_result: GramResult | None = None,
    certify: bool = True,
    progress: bool = False,
) -> CrosscheckResult:
    r"""Decide weak independence, compute the Gram, and check seed 003 Prop. 8 against it.

    Parameters
    ----------
    samples : list of (N_i, d) float arrays (or families: then only the verdict is reported)
    heads : Heads
    weak : Decision, optional
        A precomputed ``decide(samples, property="weak")`` (the screen reuses it).
    gram_result : GramResult, optional
        A precomputed :func:`~ntkcheck.gram.gram` for the same samples and heads.
    certify : bool
        Passed to :func:`~ntkcheck.gram.gram` when the verdict is independent (Arb
        certificate when float64 cannot establish positivity, small problems only).

    Returns
    -------
    CrosscheckResult

    Examples
    --------
    >>> import numpy as np
    >>> from ntkcheck.gram import init_heads
    >>> z, u, v = np.zeros(2), np.array([1.0, 0.0]), np.array([0.0, 1.0])
    >>> S = [np.array([z, u]), np.array([z, v]), np.array([z, u, v, u + v])]
    >>> crosscheck(S, init_heads(16, 2)).agreement
    'agrees'
    """
    from .decide import as_measures, decide

    measures = as_measures(samples)
    non_compact = tuple(i for i, m in enumerate(measures) if not m.compact)
    if weak is None:
        weak = decide(measures, property="weak")
    verdict = weak.verdict.value
    if non_compact:
        return CrosscheckResult(weak, None, "not applicable", "n/a", None, None, "not applicable",
                                f"measures {list(non_compact)} have non-compact support: the NTK equivalence of "
                                "seed 003 Prop. 8 does not apply (MATH.md section 3); the CGF verdict stands alone",
                                non_compact)
    if not all(isinstance(m, Empirical) for m in measures):
        return CrosscheckResult(weak, None, "sufficiency" if verdict == "independent" else "no prediction", "n/a",
                                None, None, "not applicable",
                                "closed-form compact families have no token slots: pass token samples drawn from "
                                "them to compute a Gram")
    S = [m.atoms for m in measures]
    heads = _as_heads(heads, S[0].shape[1])
    # certify only where positivity is the prediction: a singular Gram never certifies
    g = gram_result if gram_result is not None else gram(S, heads, certify=certify and weak.independent,
                                                         progress=progress)
    rel = g.relative_lambda_min
    if verdict == "independent":
        if g.rank_deficient_by_size:
            return CrosscheckResult(weak, g, "sufficiency", "not needed", None, None, "inconclusive",
                                    "Prop. 8 predicts a positive Gram, but H d < M makes the finite-head Gram "
                                    "singular by rank: add heads")
        if g.positive:
            how = "certified in Arb" if (g.certified is not None and g.certified.positive) else "float64"
            return CrosscheckResult(weak, g, "sufficiency", "not needed", None, None, "agrees",
                                    f"independent CGFs => injective NTK (Prop. 8); Gram positive ({how}, "
                                    f"relative lambda_min {rel:.3g})")
        if rel < RESOLUTION_EIGH / 1000 and g.status == "below resolution":
            return CrosscheckResult(weak, g, "sufficiency", "not needed", None, None, "disagrees",
                                    f"independent CGFs but the Gram is singular to working precision (relative "
                                    f"lambda_min {rel:.3g}); with finitely many heads Prop. 8 does not strictly "
                                    "apply: add heads or raise the Q, b scales")
        return CrosscheckResult(weak, g, "sufficiency", "not needed", None, None, "inconclusive",
                                f"independent CGFs; the Gram's relative lambda_min {rel:.3g} is below {POSITIVE_REL:g} "
                                "and was not certified: positivity is not claimed")
    if verdict != "dependent":
        return CrosscheckResult(weak, g, "no prediction", "n/a", None, None, "no prediction",
                                f"CGF verdict inconclusive: Prop. 8 makes no prediction; Gram {g.status} "
                                f"(relative lambda_min {rel:.3g})")
    alpha = weak.affine[0] if weak.affine is not None else (1,)
    pred = predicted_kernel_vector(S, weak.null_vector, alpha)
    if pred is None:
        c2 = _dirac_relation(S)
        if c2 is not None:
            pred = predicted_kernel_vector(S, c2, (0,) * S[0].shape[1])
            if pred is not None:
                pred = KernelPrediction(pred.c, True, pred.nu, pred.p, "Dirac relation sum c_i x_i = 0")
    if pred is None:
        return CrosscheckResult(weak, g, "no prediction", "none", None, None, "no prediction",
                                "dependent CGFs without overlap (condition (34) fails): Prop. 8 predicts nothing; "
                                f"Gram {g.status} (relative lambda_min {rel:.3g})")
    res = kernel_residual(S, heads, pred.p)
    label = _overlap_label(pred)
    if res <= KERNEL_RTOL:
        return CrosscheckResult(weak, g, "necessity", label, pred, res, "agrees",
                                f"dependent CGFs with overlap ({label}) => predicted kernel vector p_i = c_i dnu/dmu_i "
                                f"is annihilated (relative residual {res:.2g}); Gram singular")
    return CrosscheckResult(weak, g, "necessity", label, pred, res, "disagrees",
                            f"dependent CGFs with overlap ({label}) but G[p] != 0 (relative residual {res:.3g} > "
                            f"{KERNEL_RTOL:g}): the predicted kernel vector is not annihilated")

