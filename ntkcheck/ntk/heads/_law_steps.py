r"""Steps of :func:`ntkcheck.ntk.heads.law.head_law_bound`: the tail bounds and their inversion, the
bound ``L`` on one head's Gram, the reduction of Gaussian heads to the span of the atoms, the
rounding terms, and the certified Gram of many heads accumulated block by block.

Every inequality is derived in ``theory/ntk-head-law.md``. Private: the public names live in
:mod:`ntkcheck.ntk.heads.law`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ...cgf import Empirical
from ..certificate import rounding as rnd
from ..certificate.routes import certify_gram_enclosure
from ..gram_matrix.features import DEFAULT_CHUNK, init_heads
from .rank import AtomSpan, _points

#: relative rounding of one drawn head entry: an exact draw rounded to float64, then multiplied by
#: its scale (two roundings of at most 2^-53 each), inflated
U_DRAW = 2.0**-52 * (1.0 + 2.0**-40)
#: relative deflation of a lower bound (inflation of an upper bound) evaluated in float64: each is a
#: short expression of positive terms, whose rounding is far below 1e-12
_SAFE = 1e-12
#: Q entries per block of heads drawn at once (32 MiB)
_BLOCK_ENTRIES = 1 << 22


# ------------------------------------------------------------------------- tail bounds


def bernstein_lower(c: float, L: float, H: int, t: float) -> float:
    r"""The smallest :math:`\lambda \ge 0` with :math:`c < \lambda + \sqrt{2 L \lambda t / H} + L t/(3H)`.

    Bernstein's inequality for the mean of ``H`` i.i.d. variables in ``[0, L]`` with mean
    :math:`\lambda` (second moment at most :math:`L\lambda`): the mean exceeds
    :math:`\lambda + \sqrt{2L\lambda t/H} + Lt/(3H)` with probability at most :math:`e^{-t}`.
    With :math:`x = \sqrt\lambda`, :math:`a = \sqrt{2Lt/H}`, :math:`b = Lt/(3H)`: the root of
    :math:`x^2 + a x + b - c`, written without cancellation; 0 when :math:`c \le b`. ``a`` and ``b``
    are rounded up first (the root decreases in both), then every operation is relative-accurate
    (one subtraction of two floats included), so a deflation by ``1e-12`` makes it a lower bound.
    """
    a = math.sqrt(2.0 * L * t / H) * (1.0 + _SAFE)
    b = L * t / (3.0 * H) * (1.0 + _SAFE)
    if not c > b:
        return 0.0
    x = 2.0 * (c - b) / (a + math.sqrt(a * a + 4.0 * (c - b)))
    return x * x * (1.0 - _SAFE)


def _x_minus_log1p(x: float) -> float:
    r""":math:`x - \log(1 + x)` for :math:`x \ge 0`, accurate to ~1e-13 relative (series near 0)."""
    if x < 1e-3:
        return x * x * (0.5 - x * (1.0 / 3.0 - x * (0.25 - x / 5.0)))
    return x - math.log1p(x)


def chernoff_upper(g: float, L: float, H: int, t: float) -> float:
    r"""The largest :math:`\lambda` with :math:`(H/L)\,(\lambda - g - g\log(\lambda/g)) \le t`.

    Matrix Chernoff, lower tail (Tropp 2012, Thm. 1.1): for ``H`` i.i.d. PSD ``M x M`` summands
    with :math:`\lambda_{\max} \le L` and mean of smallest eigenvalue :math:`\lambda`,
    :math:`P(\lambda_{\min}(G_H) \le g) \le M \exp(-(H/L)(\lambda - g - g\log(\lambda/g)))` for
    :math:`g < \lambda`; ``t`` includes the :math:`\log M`. With :math:`\lambda = g(1 + x)` the left
    side is :math:`(H/L)\,g\,(x - \log(1 + x))`, increasing in :math:`x \ge 0` and evaluated without
    cancellation: bisection in ``x``, the upper end of the bracket returned and inflated.
    """
    s = L * t / H * (1.0 + _SAFE)
    if g <= 0.0:
        return s * (1.0 + _SAFE)
    r = s / g
    lo, hi = 0.0, 2.0 * r + 2.0 * math.sqrt(r) + 1.0
    while _x_minus_log1p(hi) <= r:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _x_minus_log1p(mid) <= r:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return g * (1.0 + hi * (1.0 + 1e-11)) * (1.0 + _SAFE)


def round_delta(delta: float, j: int) -> float:
    r""":math:`\delta_j = \delta / ((j+1)(j+2))`: summed over all rounds, at most :math:`\delta`."""
    return delta / ((j + 1) * (j + 2))


# -------------------------------------------------------------------- the bound L and norms


def _norms_up(X: np.ndarray) -> np.ndarray:
    """Upper bounds of the row norms of ``X``."""
    d = X.shape[1]
    return np.sqrt(np.sum(X * X, axis=1)) * (1.0 + (d + 3) * 2.0**-52)


def sample_radii(laws: Sequence[Empirical]) -> np.ndarray:
    """``R_i``: an upper bound of the largest atom norm of each law."""
    return np.array([float(np.max(_norms_up(law.atoms))) for law in laws])


def head_bound(laws: Sequence[Empirical]) -> float:
    r""":math:`L \ge \lambda_{\max}(X_\theta)` for every head :math:`\theta`:
    :math:`\min(\sum_i R_i^2, \lambda_{\max}(\sum_i Z_i^T Z_i))` (a feature of sample ``i`` is a
    convex combination of its atoms, so :math:`\langle\phi, w\rangle^2 \le \max_z \langle z, w\rangle^2`).
    The second term is certified by a verified Cholesky of :math:`tI - \sum_i Z_i^T Z_i`."""
    L1 = float(np.sum(sample_radii(laws) ** 2)) * (1.0 + 4.0 * 2.0**-52)
    Z = np.concatenate([law.atoms for law in laws])
    K = Z.shape[0]
    C = Z @ Z.T if K <= Z.shape[1] else Z.T @ Z  # same nonzero eigenvalues
    # |fl(C) - C| <= gamma_k |Z||Z|^T entrywise, k the inner dimension; ||.||_2 <= ||.||_F <= gamma_k ||Z||_F^2
    radius = rnd.gamma(min(K, Z.shape[1]) + 2) * float(np.sum(Z * Z)) * (1.0 + 1e-10)
    lam = float(np.linalg.eigvalsh(C)[-1])
    t = lam * (1.0 + 1e-6) + 4.0 * radius + 1e-300
    cert = certify_gram_enclosure(t * np.eye(C.shape[0]) - C, radius)
    return min(L1, t) if cert.positive else L1


# ------------------------------------------------------------- Gaussian heads: the span


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
    zn = _norms_up(pts)
    yn = _norms_up(Y)
    # |y^ - V^T z| <= gamma_d || |V|^T |z| || + e_V |z|
    ey = gd * np.linalg.norm(np.abs(pts) @ absV, axis=1) + eV * zn
    # |z - V y| <= |fl(z - V^ y^)| + gamma_{r+1} || |z| + |V^||y^| || + e_V |y^| + |y^ - y|
    res = pts - Y @ V.T
    gr = rnd.gamma(r + 2)
    ew = (_norms_up(res) + gr * np.linalg.norm(np.abs(pts) + np.abs(Y) @ absV.T, axis=1) + eV * yn + ey)
    disp = (ew + ey) * (1.0 + 1e-10)
    if float(np.max(disp)) > 1e-10 * float(np.max(zn)):
        return None  # the float basis misses the span (nearly dependent atoms): drawing in d dimensions is better
    red = [Empirical(Y[j], law.weights) for law, j in zip(laws, idx, strict=True)]
    if any(a.n_atoms != b.n_atoms for a, b in zip(red, laws, strict=True)):
        return None  # two atoms met after rounding: the reduced data would not be the same laws
    return Reduction(red, r, np.array([float(disp[j].max()) for j in idx]))


# ---------------------------------------------------------------------- rounding terms


def _head_moments(dist: str, dim: int, q_scale: float, b_scale: float) -> tuple[float, float]:
    """:math:`E\\|Q\\|_F^2` and :math:`E\\|b\\|^2` of the head law in ``dim`` dimensions."""
    f = 1.0 if dist == "gaussian" else 1.0 / 3.0
    return f * dim * dim * q_scale**2, f * dim * b_scale**2


def eta_draw(R: np.ndarray, L: float, dist: str, dim: int, q_scale: float, b_scale: float) -> float:
    r"""What rounding the drawn heads to float64 can move :math:`\lambda_{\min}` of the head law's NTK:

    .. math::

        \eta = 2\sqrt{L}\, u'\, \Big(\sum_i R_i^4\,(2R_i^2 E\|Q\|_F^2 + 2E\|b\|^2)\Big)^{1/2},

    from :math:`|\phi(\theta) - \phi(\tilde\theta)| \le u' R_i^2 (R_i\|Q\|_F + |b|)` (the softmax
    covariance has norm at most :math:`R_i^2`) and :math:`\|X_\theta - X_{\tilde\theta}\|_2 \le
    2\sqrt L\,\|W^{1/2}(\Phi_\theta - \Phi_{\tilde\theta})\|_F`, with Jensen over the head law."""
    q2, b2 = _head_moments(dist, dim, q_scale, b_scale)
    s = float(np.sum(R**4 * (2.0 * R**2 * q2 + 2.0 * b2)))
    return 2.0 * math.sqrt(L) * U_DRAW * math.sqrt(s) * (1.0 + 1e-10)


def eta_atoms(eps: np.ndarray, R: np.ndarray, L: float, dim: int, q_scale: float, b_scale: float) -> float:
    r"""What moving the atoms of law ``i`` by at most ``eps[i]`` can move :math:`\lambda_{\min}` of the
    head law's NTK (Gaussian heads in ``dim`` dimensions):

    .. math::

        \eta = 2\sqrt{L}\,\Big(\sum_i \varepsilon_i^2\, 3\,(1 + 4R_i^4 E\|Q\|_F^2 + R_i^2 E\|b\|^2)\Big)^{1/2},

    from :math:`|\partial\phi| \le \varepsilon_i (1 + 2R_i^2\|Q\|_F + R_i|b|)` along the segment."""
    q2, b2 = _head_moments("gaussian", dim, q_scale, b_scale)
    s = float(np.sum(eps**2 * 3.0 * (1.0 + 4.0 * R**4 * q2 + R**2 * b2)))
    return 2.0 * math.sqrt(L) * math.sqrt(s) * (1.0 + 1e-10)


# ----------------------------------------------------------- the certified Gram of many heads


def _fro(A: np.ndarray) -> float:
    """Frobenius norm of the symmetric matrix whose lower triangle ``A`` holds (upper part zero)."""
    return math.sqrt(2.0) * float(np.linalg.norm(A)) * (1.0 + 1e-10)


class Accumulated:
    r"""The unnormalised sum :math:`S = \sum_h X_{\theta_h}` over head blocks, lower triangle, with a
    proved bound ``err`` on :math:`\|S_{\mathrm{exact}} - S\|_2` (block enclosures of
    :func:`~ntkcheck.ntk.certificate.rounding.enclosed_gram` times the block size, plus the rounding of each
    scaling and addition, :math:`u\|\cdot\|_F`)."""

    def __init__(self, M: int) -> None:
        self.S = np.zeros((M, M), order="F")
        self.err = 0.0
        self.heads = 0
        self.why: str | None = None

    def add(self, laws: Sequence[Empirical], Q: np.ndarray, b: np.ndarray, chunk: int = DEFAULT_CHUNK) -> None:
        from ..gram_matrix.features import Heads

        hb = Q.shape[0]
        enc = rnd.enclosed_gram(laws, Heads(Q, b), chunk)
        if enc.why is not None:
            self.why = enc.why
        T = enc.G * float(hb)
        self.S += T
        self.err += hb * enc.radius + rnd.U * (_fro(T) + _fro(self.S)) * (1.0 + 1e-10)
        self.heads += hb

    def gram(self) -> tuple[np.ndarray, float]:
        """:math:`G_H = S / H` (lower triangle) and a proved bound on :math:`\\|G_H - \\mathrm{fl}\\|_2`."""
        G = self.S / float(self.heads)
        return G, (self.err / self.heads + rnd.U * _fro(G)) * (1.0 + 1e-10)


def bottom_bounds(G: np.ndarray, radius: float) -> tuple[float | None, float]:
    r"""Certified bounds ``(c, g)`` with :math:`c \le \lambda_{\min}(G_\star) \le g` for every symmetric
    :math:`G_\star` within ``radius`` (spectral norm) of the matrix whose lower triangle is ``G``.

    ``g``: the Rayleigh quotient of the float bottom eigenvector ``v``, with its rounding
    (:math:`\gamma_{M+2}|v|^T|G||v|`) and ``radius`` added. ``c``: a verified Cholesky
    (:func:`~ntkcheck.ntk.certificate.routes.certify_gram_enclosure`) of :math:`G - sI` at
    :math:`s = (1 - 2^{-7})\hat\lambda` (the diagonal's rounding added to the radius), so that
    :math:`c = s + (	ext{its bound})` loses under 1% of :math:`\hat\lambda`; of ``G`` itself if that
    refuses; None when both refuse."""
    M = G.shape[0]
    G = np.asfortranarray(G)  # BLAS symv reads the lower triangle of a Fortran array
    w, V = sla.eigh(G, lower=True, subset_by_index=[0, 0], check_finite=False)
    v = V[:, 0]
    Gv = sla.blas.dsymv(1.0, G, v, lower=1)
    aGv = sla.blas.dsymv(1.0, np.abs(G), np.abs(v), lower=1)
    q = float(v @ Gv) + rnd.gamma(M + 2) * float(np.abs(v) @ aGv)
    vv = float(v @ v) * (1.0 - rnd.gamma(M + 2))
    g = max(q / vv, 0.0) * (1.0 + 1e-10) + radius * (1.0 + 1e-10)
    lam = float(w[0])
    for s in ((1.0 - 2.0**-7) * lam, 0.0) if lam > 0 else (0.0,):
        A = np.tril(G) + np.tril(G, -1).T  # the symmetric matrix whose lower triangle is G (exact copy)
        A[np.diag_indices(M)] -= s
        rad = (radius + rnd.U * float(np.max(np.abs(np.diag(A))))) * (1.0 + 1e-10)
        cert = certify_gram_enclosure(A, rad)
        if cert.positive and cert.lower_bound is not None:
            return (s + cert.lower_bound) * (1.0 - 2.0**-50), g
    return None, g


def head_blocks(count: int, dim: int) -> int:
    """Heads per drawn block: ``Q`` of at most ``2^22`` entries."""
    return max(1, min(count, _BLOCK_ENTRIES // (dim * dim + dim)))


def draw_block(k: int, count: int, dim: int, *, q_scale: float, b_scale: float, dist: str, seed: int,
               stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Block ``k`` of i.i.d. heads: :func:`~ntkcheck.ntk.gram_matrix.features.init_heads` with a seed derived from
    ``(seed, stream, k)`` by :class:`numpy.random.SeedSequence`, so blocks are independent and
    reproducible (``stream`` 1: the timing probe, whose heads are discarded)."""
    ss = np.random.SeedSequence([int(seed), 0x6865616C, int(stream), int(k)])  # "heal": the head-law stream
    s = int.from_bytes(ss.generate_state(2, np.uint32).tobytes(), "little")
    h = init_heads(count, dim, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=s)  # type: ignore[arg-type]
    return h.Q, h.b
