r"""Rigorous float64 error bounds for the feature matrix and the Gram product.

Every bound and every assumption is derived in ``theory/certificates.md`` (section "Certified
positivity at scale"). The floating-point model (:math:`u = 2^{-53}`, :math:`\gamma_k`) and the
Cholesky work array with Rump's allowance live in :mod:`ntkcheck.ntk.gram_matrix.cholesky` (the
float spectrum factorises the same array); they are re-exported here, where the certificate's
users find them. Underflow is covered by absolute allowances (``_TINY``, ``ETA``).

* :func:`feature_radius_sq`: :math:`E \ge \|\hat F - F\|_F` for the float64 features (an error
  analysis of the queries, scores, max-shifted exponentials, softmax and means);
* :func:`enclosure`: the radius :math:`\|\hat G - F F^T\|_2 \le \gamma_K \rho + 2 E \sqrt{\rho} + E^2`
  of the Gram accumulated over head blocks (:mod:`ntkcheck.ntk.gram_matrix.accumulate`);
* :func:`enclosed_gram`: both at once, for laws and heads given directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...cgf.empirical import Empirical
from ..gram_matrix.accumulate import AccumulatedGram, accumulate
from ..gram_matrix.accumulate import _perron_vector as _perron_vector  # noqa: F401  (distributed/ uses it)
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
    R = np.array([float(np.max(_norm_up(x))) for x in atoms])
    X = np.array([float(np.max(np.abs(x))) for x in atoms])
    mmin = np.array([float(np.min(m)) for m in masses])
    m = np.concatenate(masses)
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
class GramEnclosure:
    r"""``G`` (``M x M``, Fortran order, lower triangle) with :math:`\|G - F F^T\|_2 \le` ``radius``
    for the exact features ``F``; ``rounding`` (product) and ``features`` (radius of ``F``) are
    its two parts, ``abs_norm`` the bound on :math:`\rho(|\hat F||\hat F|^T)`, ``blocks`` the
    number of head blocks, ``why`` a reason when no finite radius is proved."""

    G: np.ndarray
    radius: float
    rounding: float
    features: float
    abs_norm: float
    blocks: int
    why: str | None



def enclosure(problem: GramProblem, acc: AccumulatedGram) -> GramEnclosure:
    r"""The proved radius of the Gram accumulated over head blocks (:mod:`ntkcheck.ntk.gram_matrix.accumulate`)

    .. math::

        \|\hat G - F F^T\|_2 \le \gamma_K\,\rho + 2 E \sqrt{\rho} + E^2, \qquad
        \rho \ge \rho(|\hat F||\hat F|^T) \ge \|\hat F\|_2^2,\quad E \ge \|\hat F - F\|_F,

    ``K = H d``: every entry of :math:`\hat G` is one sum of ``K`` products evaluated in some order
    (each ``syrk`` adds its block's products to the running entry), so Higham's
    :math:`\gamma_K` bound holds whatever the blocking. :math:`\rho` by Collatz-Wielandt,
    :math:`\max_i (\sum_c |\hat F_c| |\hat F_c|^T v)_i / v_i` from the sums of the pass. ``E`` from
    :func:`feature_radius_sq` (``O(n H)``). A pass made without the bound gives the radius ``inf``
    and ``why`` says so.
    """
    if acc.abs_sums is None or acc.perron is None:
        return GramEnclosure(acc.G, math.inf, math.inf, math.inf, math.inf, acc.blocks, "no bound was asked for")
    M, K = problem.M, problem.K
    e2, _, dmax = feature_radius_sq(problem, problem.heads)
    # w: sums of nonnegative products (length M, then the block's columns, then the blocks)
    rho = float(np.max(acc.abs_sums / acc.perron)) * (1.0 + gamma(M + K + acc.blocks + 2)) * _SAFE
    E = math.sqrt(float(np.sum(e2)) * (1.0 + gamma(M + 2))) * _SAFE
    rounding = gamma(K) * rho * _SAFE
    feats = (2.0 * E * math.sqrt(rho) + E * E) * _SAFE
    radius = (rounding + feats) * _SAFE
    why = None
    if not (dmax <= DELTA_MAX and math.isfinite(radius)):
        why = (f"the proved rounding of the attention scores reaches {dmax:.3g} (> {DELTA_MAX:g}): the float64 "
               "enclosure of the softmax weights says nothing there")
        radius = math.inf
    return GramEnclosure(acc.G, radius, rounding, feats, rho, acc.blocks, why)


def enclosed_gram(laws: Sequence[Empirical], heads: Heads, chunk: int, progress: bool = False, *,
                  bound: bool = True) -> GramEnclosure:
    r""":math:`\hat G = \mathrm{fl}(\sum_c \hat F_c \hat F_c^T)` accumulated over head blocks
    (:func:`~ntkcheck.ntk.gram_matrix.accumulate.accumulate`) with, when ``bound``, its proved radius
    (:func:`enclosure`), for laws and heads given directly (validated here). Memory: the
    ``8 M^2``-byte Gram plus one block of ``F`` (at most ``8 max(2^25, 256 M)`` bytes)."""
    problem = GramProblem.of(laws, heads, chunk=chunk, progress=progress)
    return enclosure(problem, accumulate(problem, bound=bound))
