r"""Rigorous float64 error bounds for the feature matrix and the Gram product.

Every bound and every assumption is derived in ``theory/certificates.md`` (section "Certified
positivity at scale"). The floating-point model (:math:`u = 2^{-53}`, :math:`\gamma_k`) and the
Cholesky work array with Rump's allowance live in :mod:`ntkcheck.ntk.gram_matrix.cholesky` (the
float spectrum factorises the same array); they are re-exported here, where the certificate's
users find them. Underflow is covered by absolute allowances (``_TINY``, ``ETA``).

* :func:`feature_radius_sq`: :math:`E \ge \|\hat F - F\|_F` for the float64 features (an error
  analysis of the queries, scores, max-shifted exponentials, softmax and means);
* :func:`gram_radius`: the radius :math:`\|\hat G - F F^T\|_2 \le \gamma_K \rho + 2 E \sqrt{\rho} + E^2`
  of the Gram accumulated over head blocks (:mod:`ntkcheck.ntk.gram_matrix.accumulate`), with
  :math:`\rho` bounded by its trace (no work beyond the Gram);
* :func:`enclosed_gram`: both at once, for laws and heads given directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...cgf.empirical import Empirical
from ..gram_matrix.accumulate import accumulate
from ..gram_matrix.cholesky import _SAFE, _TINY, U, gamma
from ..gram_matrix.cholesky import SymmetricWork as SymmetricWork
from ..gram_matrix.cholesky import rump_allowance as rump_allowance
from ..gram_matrix.cholesky import serial_blas as serial_blas
from ..gram_matrix.features import Heads
from ..gram_matrix.problem import GramProblem

#: assumed bound on the relative error of ``np.exp`` on [-800, 201], together with the absolute
#: allowance ``EXP_ABS`` where the result is subnormal or 0. No implementation numpy dispatches
#: to (glibc's libm, numpy's own SIMD kernels) documents or shows an error above a few ulps; the
#: bound is set at 2^-44 (about 256 ulps), two orders of magnitude wider, so the certificates do
#: not hang on the last ulp of a library we do not control. Tested against Arb on this machine
#: (tests/ntk/certificate/test_rounding.py), where the measured error is below 1 ulp.
U_EXP = 2.0**-44
#: absolute error allowed for ``np.exp(y)`` when ``e^y`` is below the smallest normal (2^-1022).
EXP_ABS = 2.0**-1022
#: absolute allowance for one underflowing exponential times a mass (``EXP_ABS`` plus a product).
ETA = 2.0**-1019
#: shifted scores below ``-CUT`` are "tiny": their weights are bounded absolutely (e^-798 < 2^-1150).
CUT = 800.0
#: the score rounding bound up to which the analysis holds (it needs e^delta <= e).
DELTA_MAX = 1.0


def _norm_up(rows: np.ndarray) -> np.ndarray:
    """Upper bounds of the Euclidean norms of ``rows`` (scaled first: no underflow or overflow)."""
    s = np.max(np.abs(rows), axis=-1)
    safe = np.where(s > 0, s, 1.0)
    n = np.linalg.norm(rows / safe[..., None], axis=-1) * s
    return n * (1.0 + gamma(rows.shape[-1] + 3))


# ------------------------------------------------------------------------ feature radius


@dataclass(frozen=True)
class _Laws:
    """Per-law constants of the analysis: atom counts, norms, masses; the law of each row."""

    N: np.ndarray  # (n,) distinct atoms
    R: np.ndarray  # (n,) upper bound of the largest token norm
    X: np.ndarray  # (n,) largest |coordinate|
    mmin: np.ndarray  # (n,) smallest mass (float64)
    law: np.ndarray  # (M,) law index of each row
    scale: np.ndarray  # (M,) upper bound of sqrt(m_r / H) (the exact row weight)


def _law_table(src: Sequence[Empirical] | GramProblem, H: int) -> _Laws:
    """The constants of the laws of ``src`` (a validated problem, or laws)."""
    if isinstance(src, GramProblem):
        atoms, masses = src.atoms, src.masses
    else:
        atoms, masses = tuple(law.atoms for law in src), tuple(law.masses for law in src)
    N = np.array([x.shape[0] for x in atoms])
    first = np.concatenate([[0], np.cumsum(N)[:-1]])  # every law has an atom: reduceat's segments
    rows = np.concatenate(atoms)
    m = np.concatenate(masses)
    R = np.maximum.reduceat(_norm_up(rows), first)  # row by row, as law by law
    X = np.maximum.reduceat(np.max(np.abs(rows), axis=1), first)
    mmin = np.minimum.reduceat(m, first)
    return _Laws(N, R, X, mmin, np.repeat(np.arange(len(atoms)), N), np.sqrt(m / H) * (1.0 + 4.0 * U))


def score_bound(laws: Sequence[Empirical], heads: Heads) -> np.ndarray:
    r"""``(n, H)`` bounds :math:`B_{ih} = (\|Q_h\|_F R_i + \|b_h\|) R_i \ge \langle |Q_h||x| + |b_h|, |y|\rangle`
    over the atoms ``x, y`` of law ``i`` (``R_i`` its largest token norm)."""
    tab = _law_table(laws, heads.count)
    return _score_bound(tab, heads, 0, heads.count)


def _score_bound(tab: _Laws, heads: Heads, h0: int, h1: int) -> np.ndarray:
    q = _norm_up(heads.Q[h0:h1].reshape(h1 - h0, -1))
    bn = _norm_up(heads.b[h0:h1])
    return (q[None, :] * tab.R[:, None] + bn[None, :]) * tab.R[:, None] * _SAFE


def _tau(tab: _Laws, heads: Heads, h0: int, h1: int) -> tuple[np.ndarray, np.ndarray, float]:
    r"""``tau`` (n, c), ``a`` (n,) and the largest score rounding bound, with
    :math:`|\hat F_{r,(h,c)} - F_{r,(h,c)}| \le s_r X_i \tau_{ih} + a_i` for the rows ``r`` of law ``i``.

    Score error :math:`\delta_{ih} = \gamma_{2d+2} B_{ih} + u (1+2u) \min(2 B_{ih}(1+\gamma_{2d+2}), C)`
    (queries, scores, the max-shift of the non-tiny scores) plus underflow;
    :math:`\rho = \mathrm{expm1}(2\delta + 2(u_{\exp} + 8u + \gamma_N) + 2\kappa)`,
    :math:`\kappa = 4 N \eta / m_{\min}`, :math:`\nu = 2.2\,\eta / m_{\min}`;
    :math:`\tau = \rho + \gamma_N (1 + \rho) + (1 + \gamma_N) N \nu`.
    """
    d = heads.dim
    B = _score_bound(tab, heads, h0, h1)
    g2 = gamma(2 * d + 2)
    R = tab.R[:, None]
    delta = (g2 * B + U * (1.0 + 2.0 * U) * np.minimum(2.0 * B * (1.0 + g2), CUT * (1.0 + 2.0 * U))
             + (d + 2) * _TINY * (1.0 + R)) * _SAFE
    gN = gamma(tab.N)[:, None]
    kappa = (4.0 * tab.N * ETA / tab.mmin)[:, None]
    with np.errstate(over="ignore"):
        rho = np.expm1(np.minimum((2.0 * delta + 2.0 * (U_EXP + 8.0 * U + gN) + 2.0 * kappa) * _SAFE, 700.0)) * _SAFE
    nu = (2.2 * ETA / tab.mmin)[:, None]
    tau = (rho + gN * (1.0 + rho) + (1.0 + gN) * tab.N[:, None] * nu) * _SAFE
    a = 4.0 * tab.N * 2.0**-1070 * (1.0 + tab.X)
    return tau, a, float(delta.max()) if delta.size else 0.0


def feature_radius(laws: Sequence[Empirical], heads: Heads, h0: int = 0, h1: int | None = None) -> np.ndarray:
    r"""``(M, h1 - h0)`` entrywise radii: :math:`|\hat F_{r,(h,c)} - F_{r,(h,c)}| \le e_{rh}` for each
    of the ``d`` columns ``c`` of head ``h`` (``inf`` where the score rounding exceeds ``DELTA_MAX``)."""
    h1 = heads.count if h1 is None else h1
    tab = _law_table(laws, heads.count)
    tau, a, _ = _tau(tab, heads, h0, h1)
    tau = np.where(np.isfinite(tau) & (tau < 1.0), tau, np.inf)
    out = tab.scale[:, None] * tab.X[tab.law][:, None] * tau[tab.law] + a[tab.law][:, None]
    return out * _SAFE


def feature_radius_sq(laws: Sequence[Empirical] | GramProblem, heads: Heads,
                      block: int = 1024) -> tuple[np.ndarray, float, float]:
    r"""``(e2, rho, delta)``: per row :math:`e2_r \ge \sum_{h,c} e_{rh}^2` (so
    :math:`\|\hat F - F\|_F^2 \le \sum_r e2_r`), the largest :math:`\tau` and the largest score
    rounding bound. ``laws`` may be the validated problem. Work ``O(n H)``, memory ``O(n block)``."""
    H, d = heads.count, heads.dim
    tab = _law_table(laws, H)
    n = tab.N.shape[0]
    s1, s2 = np.zeros(n), np.zeros(n)
    tmax = dmax = 0.0
    for h0 in range(0, H, block):
        h1 = min(H, h0 + block)
        tau, a, dm = _tau(tab, heads, h0, h1)
        s1 += np.sum(tau * tau, axis=1)
        s2 += np.sum(tau, axis=1)
        tmax, dmax = max(tmax, float(tau.max())), max(dmax, dm)
    law = tab.law
    sx = tab.scale * tab.X[law]
    e2 = d * (sx * sx * s1[law] + 2.0 * sx * a[law] * s2[law] + H * a[law] ** 2)
    return e2 * (1.0 + gamma(H + 8)) * _SAFE, tmax, dmax


# ----------------------------------------------------------------------- Gram enclosure


@dataclass(frozen=True)
class GramRadius:
    r"""A proved bound ``radius`` :math:`\ge \|\hat G - F F^T\|_2` for the Gram accumulated over head
    blocks and the exact features ``F``; ``rounding`` (the product) and ``features`` (the radius of
    ``F``) are its two parts, ``abs_norm`` the bound :math:`\rho \ge \rho(|\hat F||\hat F|^T)` they
    use, ``why`` a reason when no finite radius is proved (then ``radius`` is ``inf``)."""

    radius: float
    rounding: float
    features: float
    abs_norm: float
    why: str | None


@dataclass(frozen=True)
class GramEnclosure:
    r"""``G`` (``M x M``, Fortran order, lower triangle) with :math:`\|G - F F^T\|_2 \le` ``radius``
    (the parts of :class:`GramRadius`), summed over ``blocks`` head blocks."""

    G: np.ndarray
    radius: float
    rounding: float
    features: float
    abs_norm: float
    blocks: int
    why: str | None


def radius_terms(e2: np.ndarray, dmax: float, diag: np.ndarray, K: int) -> GramRadius:
    r"""The radius of a Gram :math:`\hat G = \mathrm{fl}(\sum_c \hat F_c \hat F_c^T)` of ``K`` columns
    from its diagonal ``diag`` and the feature radii ``(e2, dmax)`` of :func:`feature_radius_sq`:

    .. math::

        \|\hat G - F F^T\|_2 \le \gamma_K\,\rho + M K \eta + 2 E \sqrt{\rho} + E^2, \qquad
        \rho = \frac{(1 + \gamma_M) \sum_i \hat g_{ii}}{1 - \gamma_K} + M K \eta
        \;\ge\; \sum_i \|\hat F_i\|^2 \;\ge\; \rho(|\hat F||\hat F|^T) \;\ge\; \|\hat F\|_2^2,

    :math:`E \ge \|\hat F - F\|_F`, ``M`` the rows. Every entry of :math:`\hat G` is one sum of ``K``
    products in some order (each ``syrk`` adds its block's products to the running entry), so
    :math:`|\hat G - \hat F \hat F^T| \le \gamma_K |\hat F||\hat F|^T` entrywise whatever the blocking,
    plus ``K`` underflows of at most :math:`\eta` each (Higham Sec. 3.1). Cauchy-Schwarz gives
    :math:`(|\hat F||\hat F|^T)_{ij} \le \|\hat F_i\|\|\hat F_j\|`, a rank-one nonnegative majorant whose
    spectral radius is :math:`\sum_i \|\hat F_i\|^2`, and the diagonal entry
    :math:`\hat g_{ii} = \mathrm{fl}(\|\hat F_i\|^2)` is within :math:`\gamma_K` of it: the trace of the
    Gram already computed bounds :math:`\rho`, at no cost. ``theory/certificates.md`` ("(b) the product").
    """
    M = diag.shape[0]
    tiny = M * K * _TINY
    rho = (float(np.sum(diag)) * (1.0 + gamma(M)) / (1.0 - gamma(K)) + tiny) * _SAFE
    E = math.sqrt(float(np.sum(e2)) * (1.0 + gamma(M + 2))) * _SAFE
    rounding = (gamma(K) * rho + tiny) * _SAFE
    feats = (2.0 * E * math.sqrt(rho) + E * E) * _SAFE
    radius = (rounding + feats) * _SAFE
    why = None
    if not (dmax <= DELTA_MAX and math.isfinite(radius)):
        why = (f"the proved rounding of the attention scores reaches {dmax:.3g} (> {DELTA_MAX:g}): the float64 "
               "enclosure of the softmax weights says nothing there")
        radius = math.inf
    return GramRadius(radius, rounding, feats, rho, why)


def gram_radius(problem: GramProblem, diag: np.ndarray) -> GramRadius:
    """:func:`radius_terms` for the Gram of ``problem`` whose diagonal is ``diag`` (the feature radii
    by :func:`feature_radius_sq`, ``O(n H)``)."""
    e2, _, dmax = feature_radius_sq(problem, problem.heads)
    return radius_terms(e2, dmax, diag, problem.K)


def enclosed_gram(laws: Sequence[Empirical], heads: Heads, chunk: int, progress: bool = False, *,
                  bound: bool = True) -> GramEnclosure:
    r""":math:`\hat G = \mathrm{fl}(\sum_c \hat F_c \hat F_c^T)` accumulated over head blocks
    (:func:`~ntkcheck.ntk.gram_matrix.accumulate.accumulate`) with, when ``bound``, its proved radius
    (:func:`gram_radius`; else ``inf``), for laws and heads given directly (validated here). Memory: the
    ``8 M^2``-byte Gram plus one block of ``F`` (at most ``8 max(2^25, 256 M)`` bytes)."""
    problem = GramProblem.of(laws, heads, chunk=chunk, progress=progress)
    acc = accumulate(problem)
    if not bound:
        return GramEnclosure(acc.G, math.inf, math.inf, math.inf, math.inf, acc.blocks, "no bound was asked for")
    r = gram_radius(problem, np.diagonal(acc.G).copy())
    return GramEnclosure(acc.G, r.radius, r.rounding, r.features, r.abs_norm, acc.blocks, r.why)


def _perron_vector(A: np.ndarray, iters: int = 4) -> np.ndarray:
    """A positive vector near the Perron vector of ``A A^T`` (``A >= 0``; any positive vector is valid):
    the start of the distributed route's Collatz-Wielandt sums (:mod:`ntkcheck.distributed`)."""
    v = np.ones(A.shape[0])
    for _ in range(iters):
        w = A @ (A.T @ v)
        top = float(w.max())
        if not top > 0:
            return np.ones(A.shape[0])
        v = w / top + 1e-3  # strictly positive, bounded away from 0
    return v
