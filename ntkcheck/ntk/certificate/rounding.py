r"""Rigorous float64 error bounds for the feature matrix, the Gram product and a Cholesky test.

Private helpers of :func:`ntkcheck.ntk.certificate.routes.certify_positive`; every bound and every
assumption is derived in ``theory/certificates.md`` (section "Certified positivity at
scale"). Model: IEEE binary64, round to nearest, :math:`u = 2^{-53}`,
:math:`\gamma_k = k u / (1 - k u)`; a dot product of length ``k`` evaluated in any order
(BLAS, blocked, with or without FMA) has error at most :math:`\gamma_k \sum |a_i b_i|`
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Sec. 3.1).
Underflow is covered by absolute allowances (``_TINY``, ``ETA``).

Memory follows the atoms: :func:`enclosed_gram` accumulates :math:`\mathrm{fl}(F F^T)` over
head blocks (``F`` is never whole) together with its proved radius, and
:class:`SymmetricWork` runs every Cholesky factorisation in the one ``M x M`` array (the
strict upper triangle keeps a copy of the Gram, the diagonal is saved apart).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
from threadpoolctl import threadpool_limits

from ... import _budget
from ..._validate import check_score_range
from ...cgf.empirical import Empirical
from ..gram_matrix.features import (
    Heads,
    _atom_count,
    _feature_columns,
    _groups,
    _head_block,
    _progress,
)

U = 2.0**-53
#: assumed bound on the relative error of ``np.exp`` on [-800, 201], together with the absolute
#: allowance ``EXP_ABS`` where the result is subnormal or 0. No implementation numpy dispatches
#: to (glibc's libm, numpy's own SIMD kernels) documents or shows an error above a few ulps; the
#: bound is set at 2^-44 (about 256 ulps), two orders of magnitude wider, so the certificates do
#: not hang on the last ulp of a library we do not control. Tested against Arb on this machine
#: (tests/ntk/certificate/test_routes.py), where the measured error is below 1 ulp.
U_EXP = 2.0**-44
#: absolute error allowed for ``np.exp(y)`` when ``e^y`` is below the smallest normal (2^-1022).
EXP_ABS = 2.0**-1022
#: absolute allowance for one underflowing exponential times a mass (``EXP_ABS`` plus a product).
ETA = 2.0**-1019
#: shifted scores below ``-CUT`` are "tiny": their weights are bounded absolutely (e^-798 < 2^-1150).
CUT = 800.0
#: the score rounding bound up to which the analysis holds (it needs e^delta <= e).
DELTA_MAX = 1.0
#: absolute allowance for underflow per computed quantity (far above the subnormal spacing
#: 2^-1074 times the at most ~10^4 operations that feed one entry).
_TINY = 2.0**-1000
#: relative inflation applied to every bound evaluated in floating point (each bound is
#: a short expression of positive terms: its own rounding is below 1e-14 relative).
_SAFE = 1.0 + 1e-10


@contextlib.contextmanager
def serial_blas() -> Iterator[None]:
    """One BLAS thread inside: matrix-vector products and triangular solves are memory-bound, and
    OpenBLAS's threaded level-2 kernels were measured 10-30x slower than one thread when the other
    core is busy (``dsymv`` of order 1024: 36 ms against 1.3 ms), for little gain on an idle one;
    its threaded ``dpotrf`` 10x slower there (order 2048: 1.98 s against 0.19 s), for a gain below
    2x on an idle machine. Process-wide while it lasts (threadpoolctl), like any BLAS thread setting."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield



def gamma(k: Any) -> Any:
    """:math:`\\gamma_k = k u / (1 - k u)`, inflated by ``_SAFE`` (``k`` an int or an int array)."""
    if isinstance(k, np.ndarray):
        ku = k.astype(np.float64) * U
        return np.where(ku < 0.5, ku / np.maximum(1.0 - ku, 0.5), np.inf) * _SAFE
    ku = k * U
    if ku >= 0.5:
        return math.inf
    return ku / (1.0 - ku) * _SAFE


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


def _law_table(laws: Sequence[Empirical], H: int) -> _Laws:
    N = np.array([law.n_atoms for law in laws])
    R = np.array([float(np.max(_norm_up(law.atoms))) for law in laws])
    X = np.array([float(np.max(np.abs(law.atoms))) for law in laws])
    mmin = np.array([float(np.min(law.masses)) for law in laws])
    m = np.concatenate([law.masses for law in laws])
    return _Laws(N, R, X, mmin, np.repeat(np.arange(len(laws)), N), np.sqrt(m / H) * (1.0 + 4.0 * U))


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


def feature_radius_sq(laws: Sequence[Empirical], heads: Heads, block: int = 1024) -> tuple[np.ndarray, float, float]:
    r"""``(e2, rho, delta)``: per row :math:`e2_r \ge \sum_{h,c} e_{rh}^2` (so
    :math:`\|\hat F - F\|_F^2 \le \sum_r e2_r`), the largest :math:`\tau` and the largest score
    rounding bound. Work ``O(n H)``, memory ``O(n block)``."""
    H, d = heads.count, heads.dim
    tab = _law_table(laws, H)
    n = len(laws)
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


def _perron_vector(A: np.ndarray, iters: int = 4) -> np.ndarray:
    """A positive vector near the Perron vector of ``A A^T`` (``A >= 0``); any positive vector is valid."""
    v = np.ones(A.shape[0])
    for _ in range(iters):
        w = A @ (A.T @ v)
        top = float(w.max())
        if not top > 0:
            return np.ones(A.shape[0])
        v = w / top + 1e-3  # strictly positive, bounded away from 0
    return v


def enclosed_gram(laws: Sequence[Empirical], heads: Heads, chunk: int, progress: bool = False, *,
                  bound: bool = True) -> GramEnclosure:
    r""":math:`\hat G = \mathrm{fl}(\sum_c \hat F_c \hat F_c^T)` accumulated over head blocks by BLAS
    ``syrk`` in place, with (``bound``) a proved radius

    .. math::

        \|\hat G - F F^T\|_2 \le \gamma_K\,\rho + 2 E \sqrt{\rho} + E^2, \qquad
        \rho \ge \rho(|\hat F||\hat F|^T) \ge \|\hat F\|_2^2,\quad E \ge \|\hat F - F\|_F,

    ``K = H d``: every entry of :math:`\hat G` is one sum of ``K`` products evaluated in some order
    (each ``syrk`` adds its block's products to the running entry), so Higham's
    :math:`\gamma_K` bound holds whatever the blocking. :math:`\rho` by Collatz-Wielandt,
    :math:`\max_i (\sum_c |\hat F_c| |\hat F_c|^T v)_i / v_i`, accumulated block by block with ``v``
    from power steps on the first block. ``E`` from :func:`feature_radius_sq`.

    This is the one pass over the heads of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`: the float64
    Gram and, with ``bound``, the certificate's error terms (``4 M k`` flops a block of ``k``
    columns against the ``syrk``'s ``M^2 k``, and ``O(n H)`` for the feature radii). Without
    ``bound`` the radius is ``inf`` and ``why`` says so. BLAS ``syrk`` is the product: it
    computes one triangle, half the flops of a GEMM (numpy's ``F @ F.T`` dispatches to it too);
    a GEMM on the lower block triangle was measured slower per flop here
    (``benchmarks/bench_gram.py``). Memory: the ``8 M^2``-byte Gram plus one block of ``F``
    (at most ``8 max(2^25, 256 M)`` bytes).
    """
    check_score_range([law.atoms for law in laws], heads.Q, heads.b)
    M = _atom_count(laws)
    H, d = heads.count, heads.dim
    K = H * d
    e2, _, dmax = feature_radius_sq(laws, heads) if bound else (np.zeros(0), 0.0, 0.0)
    c = _head_block(M, H, d)
    groups = _groups(laws, H)
    G = np.zeros((M, M), order="F")
    block = np.empty((M, c * d))
    v: np.ndarray | None = None
    w = np.zeros(M)
    nblocks = 0
    with _progress(M * H, progress) as bar:
        if bound:
            bar.set_description("certified Gram (features, syrk, |F| bound)")
        bar.set_postfix_str(f"G {8 * M * M / 1e9:.2f} GB + F block {8 * M * c * d / 1e9:.2f} GB")
        for h0 in range(0, H, c):
            h1 = min(H, h0 + c)
            B = block if h1 - h0 == c else np.empty((M, (h1 - h0) * d))
            _feature_columns(groups, heads, h0, h1, B, chunk, bar)
            # B.T is Fortran-ordered (k, M): syrk(trans=1) forms B B^T without copying B.
            G = sla.blas.dsyrk(1.0, B.T, beta=1.0, c=G, trans=1, lower=1, overwrite_c=1)
            nblocks += 1
            if bound:
                np.abs(B, out=B)
                with serial_blas():  # two matrix-vector products: memory-bound
                    if v is None:
                        v = _perron_vector(B)
                    w += B @ (B.T @ v)
    if not bound:
        return GramEnclosure(G, math.inf, math.inf, math.inf, math.inf, nblocks, "no bound was asked for")
    assert v is not None
    # w: sums of nonnegative products (length M, then the block's columns, then the blocks)
    rho = float(np.max(w / v)) * (1.0 + gamma(M + K + nblocks + 2)) * _SAFE
    E = math.sqrt(float(np.sum(e2)) * (1.0 + gamma(M + 2))) * _SAFE
    rounding = gamma(K) * rho * _SAFE
    feats = (2.0 * E * math.sqrt(rho) + E * E) * _SAFE
    radius = (rounding + feats) * _SAFE
    why = None
    if not (dmax <= DELTA_MAX and math.isfinite(radius)):
        why = (f"the proved rounding of the attention scores reaches {dmax:.3g} (> {DELTA_MAX:g}): the float64 "
               "enclosure of the softmax weights says nothing there")
        radius = math.inf
    return GramEnclosure(G, radius, rounding, feats, rho, nblocks, why)


# --------------------------------------------------------------------- Cholesky in place


def rump_allowance(diag: np.ndarray) -> float:
    r"""``s`` with :math:`\lambda_{\min}(A) > -s` when the float64 Cholesky of ``A`` (diagonal ``diag``)
    runs to completion: :math:`\frac{\gamma_{n+1}}{1-\gamma_{n+1}} \operatorname{tr} A` plus an
    underflow allowance (Demmel's backward error, Higham Thm. 10.3; Rump, BIT 46 (2006))."""
    n = diag.shape[0]
    g = gamma(n + 1)
    alpha = g / (1.0 - g)
    trace = float(np.sum(diag)) * (1.0 + gamma(n))
    under = 4.0 * n * (2.0 * (n + 1) + float(diag.max())) * _TINY
    return (alpha * trace + under) * _SAFE


class SymmetricWork:
    r"""Repeated Cholesky factorisations of :math:`\hat G - tI` in one ``M x M`` array.

    The array ``A`` (Fortran order) arrives with :math:`\hat G` in its lower triangle; the strict
    lower triangle is copied once into the strict upper one and the diagonal saved. LAPACK
    ``dpotrf`` (lower) overwrites only the lower triangle, so :math:`\hat G` is restored from the
    upper copy before each new shift: the Gram, the factor and the copy share ``8 M^2`` bytes.
    In every state :meth:`matvec` multiplies by :math:`\hat G` (the upper copy and the saved
    diagonal) and, after a successful factorisation, :meth:`inverse` by
    :math:`(\hat G - tI)^{-1}`: the Lanczos steps of :mod:`ntkcheck.ntk.gram_matrix.extremal` run on the
    same array.
    """

    def __init__(self, A: np.ndarray, bs: int = 512) -> None:
        if not (A.flags.f_contiguous and A.dtype == np.float64):
            A = np.asfortranarray(A, dtype=np.float64)
        self.A = A
        self.n = A.shape[0]
        self.bs = bs
        self.diag = np.diagonal(A).copy()
        self._copy(lower_to_upper=True)
        self.factored = False
        self.ok = False  # the last factorisation ran to completion: the factor is in the lower triangle
        self.shift = 0.0
        self.factorizations = 0

    def _copy(self, lower_to_upper: bool) -> None:
        A, n = self.A, self.n
        for j0 in range(0, n, self.bs):
            j1 = min(n, j0 + self.bs)
            D = A[j0:j1, j0:j1]
            iu = np.triu_indices(j1 - j0, 1)
            if lower_to_upper:
                A[j0:j1, j1:] = A[j1:, j0:j1].T
                D[iu] = D.T[iu]
            else:
                A[j1:, j0:j1] = A[j0:j1, j1:].T
                D.T[iu] = D[iu]

    def restore(self) -> None:
        r""":math:`\hat G` back in the lower triangle and on the diagonal (after a factorisation)."""
        if self.factored:
            self._copy(lower_to_upper=False)
            self.A[np.arange(self.n), np.arange(self.n)] = self.diag
            self.factored = self.ok = False

    def factor(self, t: float) -> float | None:
        r"""Cholesky of :math:`\mathrm{fl}(\hat G - tI)` in place; on success return Rump's ``s``
        (:math:`\lambda_{\min}(\hat G) \ge t - s - u \max_i |a_{ii}|`, the shift's rounding included),
        on failure None."""
        if self.factored:
            self._copy(lower_to_upper=False)
        A = self.A
        diag = self.diag - t  # rounded once: |fl(g - t) - (g - t)| <= u |fl(g - t)|
        A[np.arange(self.n), np.arange(self.n)] = diag
        self.factored, self.ok, self.shift = True, False, float(t)
        self.factorizations += 1
        if not np.all(diag > 0):
            return None
        # under a time budget: not started when it would not fit, abandoned at the deadline (ntkcheck._budget)
        _budget.require(lambda: _budget.dense_seconds(self.n**3 / 3, _budget.CHOLESKY), f"a Cholesky of order {self.n}")
        with serial_blas():  # OpenBLAS's threaded dpotrf: 10x slower with the other core busy (see serial_blas)
            c, info = _budget.run(lambda: sla.lapack.dpotrf(A, lower=1, clean=0, overwrite_a=1),
                                  f"a Cholesky of order {self.n}")
        if not np.shares_memory(c, A):  # not in place (should not happen for a Fortran float64 array)
            A[...] = np.tril(c) + np.triu(A, 1)
        if info != 0:
            return None
        self.ok = True
        return (rump_allowance(diag) + U * float(diag.max())) * _SAFE

    def matvec(self, v: np.ndarray) -> np.ndarray:
        r""":math:`\hat G v` from the strict upper copy and the saved diagonal (BLAS ``dsymv``, any state)."""
        _budget.checkpoint("Lanczos on the Gram")  # each product of an ARPACK iteration
        v = np.ravel(v)
        y = sla.blas.dsymv(1.0, self.A, v, lower=0)
        y += (self.diag - np.diagonal(self.A)) * v
        return y

    def inverse(self, v: np.ndarray) -> np.ndarray:
        r""":math:`(\hat G - tI)^{-1} v` by two triangular solves with the factor (BLAS ``dtrsv``: measured
        twice as fast here as LAPACK ``dpotrs`` on one vector)."""
        if not self.ok:
            raise np.linalg.LinAlgError("no Cholesky factor: the last factorisation failed or none ran")
        _budget.checkpoint("Lanczos on the inverse of the Gram")
        y = sla.blas.dtrsv(self.A, np.ravel(v), lower=1, trans=0)
        return sla.blas.dtrsv(self.A, y, lower=1, trans=1, overwrite_x=1)

    def solve(self, b: np.ndarray) -> np.ndarray:
        """``(L L^T)^{-1} b`` with the factor in the lower triangle (LAPACK ``dpotrs``)."""
        x, info = sla.lapack.dpotrs(self.A, b, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotrs failed (info={info})")
        return x

    def abs_norm(self) -> float:
        r"""A bound on :math:`\| |\hat G| \|_2` for a computed Gram :math:`\hat G = \mathrm{fl}(\hat F \hat F^T)`:
        :math:`|\hat g_{ij}| \le (1 + 3\gamma_K) \sqrt{\hat g_{ii} \hat g_{jj}}` (each entry a sum of products
        within :math:`\gamma_K` of the exact one, ``K < 2^32``), so the trace times ``1 + 1e-6``."""
        return float(np.sum(np.abs(self.diag))) * (1.0 + 1e-6) * _SAFE
