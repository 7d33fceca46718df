r"""Gaussian heads see only the span of the atoms: the laws in coordinates of an orthonormal basis of
that span, with a rigorous bound on how far the rounding of the basis moves each atom.

For ``x, z`` in the range of ``V`` (orthonormal columns, ``d x r``),
:math:`\langle Qx + b, z\rangle = \langle (V^TQV) y + V^Tb, y'\rangle` with ``y = V^T x``, and for Gaussian
``(Q, b)`` with i.i.d. entries, :math:`(V^TQV, V^Tb)` is Gaussian with the same entry laws in ``r``
dimensions: a head costs ``r^2`` draws instead of ``d^2`` (``theory/ntk-head-law.md``, "Gaussian heads
see only the span of the atoms").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...cgf import Empirical
from ..certificate import rounding as rnd
from .head_range import norms_up
from .rank import AtomSpan, _points


@dataclass(frozen=True, eq=False)
class Reduction:
    """The atoms in coordinates of their span (``r`` of them) and how far the reduced data is,
    in an exact isometry, from the given one: per law, ``eps[i]`` bounds the displacement of any
    of its atoms."""

    laws: list[Empirical]
    dim: int
    eps: np.ndarray


def reduce_to_span(laws: Sequence[Empirical], span: AtomSpan) -> Reduction | None:
    r"""The laws in ``r`` coordinates of the span of their atoms, for Gaussian heads; None when the
    span is the whole space, not certified, the float basis is too far from orthonormal, or the
    displacement is above ``1e-10`` of the largest atom norm (nearly dependent atoms).

    With :math:`\hat V` (``d x r``) the top right singular vectors of the points and
    :math:`V = \hat V(\hat V^T\hat V)^{-1/2}` its exact polar factor
    (:math:`\|\hat V - V\|_2 \le \|\hat V^T \hat V - I\|_2 = e_V`), the computed coordinates
    :math:`\hat y = \mathrm{fl}(\hat V^T z)` correspond to the points :math:`V\hat y`, at distance at most
    :math:`|z - V V^T z| + |\hat y - V^T z|` from :math:`z`, both bounded rigorously below.
    For Gaussian :math:`(Q, b)` in ``d`` dimensions, :math:`(V^T Q V, V^T b)` is Gaussian with the same
    entry laws in ``r`` dimensions, so the head law's NTK of :math:`V\hat y` is that of :math:`\hat y`
    with ``r``-dimensional heads (``theory/ntk-head-law.md``, "Gaussian heads see only the span").
    """
    if not span.exact or span.rank >= span.dim or span.rank == 0:
        return None
    pts, idx = _points(laws)
    d, r = pts.shape[1], span.rank
    _, _, Vt = np.linalg.svd(pts, full_matrices=False)
    V = np.ascontiguousarray(Vt[:r].T)
    gd = rnd.gamma(d + 2)
    absV = np.abs(V)
    eV = float(np.linalg.norm(V.T @ V - np.eye(r)) + gd * np.linalg.norm(absV.T @ absV)) * (1.0 + 1e-10)
    if eV > 1e-8:
        return None
    Y = pts @ V
    zn = norms_up(pts)
    yn = norms_up(Y)
    # |y^ - V^T z| <= gamma_d || |V|^T |z| || + e_V |z|
    ey = gd * np.linalg.norm(np.abs(pts) @ absV, axis=1) + eV * zn
    # |z - V y| <= |fl(z - V^ y^)| + gamma_{r+1} || |z| + |V^||y^| || + e_V |y^| + |y^ - y|
    res = pts - Y @ V.T
    gr = rnd.gamma(r + 2)
    ew = (norms_up(res) + gr * np.linalg.norm(np.abs(pts) + np.abs(Y) @ absV.T, axis=1) + eV * yn + ey)
    disp = (ew + ey) * (1.0 + 1e-10)
    if float(np.max(disp)) > 1e-10 * float(np.max(zn)):
        return None  # the float basis misses the span (nearly dependent atoms): drawing in d dimensions is better
    red = [Empirical(Y[j], law.weights) for law, j in zip(laws, idx, strict=True)]
    if any(a.n_atoms != b.n_atoms for a, b in zip(red, laws, strict=True)):
        return None  # two atoms met after rounding: the reduced data would not be the same laws
    return Reduction(red, r, np.array([float(disp[j].max()) for j in idx]))
