r"""The kernel vector seed 003 Prop. 8 predicts for dependent CGFs, and how far the features are from annihilating it.

Condition (34): if :math:`\sum_i c_i\Lambda_i = \langle\alpha,a\rangle+\beta` with :math:`c\ne0` and a
non-zero signed measure :math:`\nu \ll \mu_i` for every :math:`c_i\ne0` (with :math:`\nu(\mathbb R^d)=0`
when :math:`\alpha\ne0`), then :math:`p_i = c_i\,(d\nu/d\mu_i)\,e` is in the kernel of the NTK map
(:func:`predicted_kernel_vector`; the derivation is in :mod:`ntkcheck.ntk.prop8.crosscheck`). For
empirical laws: one shared atom ``u`` (:math:`\nu=\delta_u`) when :math:`\alpha=0`, two shared atoms
``u, v`` (:math:`\nu=\delta_u-\delta_v`) otherwise; samples whose tokens are all equal (single Diracs)
need not share the atom, and for them a relation :math:`\sum_i c_i x_i = 0` gives the vector.

:func:`kernel_residual` and :func:`subspace_residual` measure :math:`G[p]` relative to
:math:`\lambda_{\max}`: 0 for an exact kernel vector, below ``KERNEL_RTOL`` when float64 sees it
annihilated.

References: seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 8, condition (34);
``theory/ntk-prop8.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from ..._records import restore
from ...cgf import Empirical, as_laws
from ...errors import InputError
from ..gram_matrix.features import Heads, _as_heads, _features
from .structure import DependenceStructure

__all__ = ["KernelPrediction", "predicted_kernel_vector", "kernel_residual", "subspace_residual", "KERNEL_RTOL"]

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
    :class:`~ntkcheck.ntk.gram_matrix.result.GramResult` of the same ``F``), saving an SVD.
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


def _overlap_label(pred: KernelPrediction) -> str:
    if not pred.nu:
        return "n > d Diracs (sum c_i x_i = 0)"
    return f"{pred.shared} shared atom{'s' if pred.shared != 1 else ''}"


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
