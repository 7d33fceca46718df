r"""The sums one round of the head-law certificate reads off its heads, each with a proved error.

A round draws ``H`` i.i.d. heads and, through a :class:`Lens` fixed before they are drawn,
accumulates block by block (features never whole)

* the truncated, preconditioned Gram :math:`\tilde G_H = \frac1H\sum_h s_h^2\, T X_{\theta_h} T`, with
  :math:`s_h^2 = \min(1, B/\ell_h)` and :math:`\ell_h \ge \lambda_{\max}(T X_{\theta_h} T)` proved per head,
  so every summand is PSD, below :math:`T X_{\theta_h} T` and of norm at most ``B``
  (``T = I``, ``B = L``: the plain Gram :math:`G_H`, nothing truncated);
* the quadratic form :math:`\bar Z = \frac1H\sum_h v^T X_{\theta_h} v` along a direction ``v``
  (an upper bound of it), and the sums of its betting confidence sequence
  (:class:`~ntkcheck.ntk.heads.tail_bounds.BetSums`, each block at the bet the round fixed before it).

Rounding: the features' entrywise radii (:func:`~ntkcheck.ntk.certificate.rounding.feature_radius`),
the product ``T F`` (:math:`\|T\|_2 \|F - \hat F\|_F + \gamma_M \||T|\|_2 \|\hat F\|_F`), the scaling
by :math:`s_h`, and the rank-k updates (Higham's :math:`\gamma_K` with a Collatz-Wielandt bound of
:math:`\rho(|\hat C||\hat C|^T)`, as in :func:`~ntkcheck.ntk.certificate.rounding.enclosed_gram`).
Derived in ``theory/ntk-head-law.md`` ("The draw's own bounds").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..._validate import SCORE_LIMIT, check_score_range
from ...cgf import Empirical
from ..certificate import rounding as rnd
from ..certificate.routes import certify_gram_enclosure
from ..gram_matrix.features import DEFAULT_CHUNK, Heads, _feature_columns, _groups, init_heads
from .tail_bounds import BetSums

#: feature entries per block of heads (4 MiB: ``F``, ``T F`` and ``|T F|`` stay in cache), and at
#: least 512 columns (the rank-k update then runs near matmul speed)
_BLOCK_ENTRIES = 1 << 19
_MIN_COLUMNS = 512
#: atoms from which the Gram's products run on BLAS's threads
_THREADED_M = 512


@dataclass(frozen=True, eq=False)
class Lens:
    r"""What one round is measured through, fixed before its heads are drawn (from other heads).

    Attributes
    ----------
    T : (M, M) float array or None
        The symmetric preconditioner (None: the identity).
    tau2 : float
        :math:`\ge \|T\|_2^2` (1 for the identity).
    tau_abs : float
        :math:`\ge \||T|\|_2` (1 for the identity).
    B : float
        The range of the truncated summands (``L`` for the identity: nothing is truncated).
    v : (M,) float array or None
        The direction of the upper bound (None: no scalar upper bound this round).
    v2 : float
        :math:`\le |v|^2`.
    Lv : float
        :math:`\ge v^T X_\theta v` for every head (:func:`~ntkcheck.ntk.heads.head_range.direction_bound`).
    zvar : float
        A float estimate of the variance of :math:`v^T X_\theta v` from heads drawn for it alone (it only
        sizes the first bet of the upper bound; nan: none).
    """

    T: np.ndarray | None
    tau2: float
    tau_abs: float
    B: float
    v: np.ndarray | None = None
    v2: float = 0.0
    Lv: float = math.inf
    zvar: float = math.nan


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _rho_abs(S: np.ndarray) -> np.ndarray:
    r"""Per ``d x d`` matrix of the stack ``S`` (k, d, d): an upper bound of :math:`\rho(|S|)`
    (Collatz-Wielandt, :math:`\max_i (|S|y)_i / y_i` for a positive ``y`` from four power steps),
    with the rounding of the products."""
    A = np.abs(S)
    y = np.ones(S.shape[:2])
    for _ in range(4):
        y = np.einsum("kij,kj->ki", A, y)
        y = y / np.maximum(y.max(axis=1, keepdims=True), 1e-300) + 1e-3
    r = np.max(np.einsum("kij,kj->ki", A, y) / y, axis=1)
    return r * (1.0 + rnd.gamma(S.shape[1] + 4))


class RoundSums:
    r"""The sums of one round: the truncated preconditioned Gram of the first ``heads_gram`` heads and
    the quadratic form along ``v`` of all ``heads`` heads, each with a proved error."""

    def __init__(self, laws: Sequence[Empirical], lens: Lens, gram: bool = True) -> None:
        self.laws = list(laws)
        self.lens = lens
        self.M = int(sum(law.n_atoms for law in laws))
        self.d = laws[0].dim
        self._groups = _groups(self.laws, 1)  # rows sqrt(m_ia) phi_ia: one head's W^{1/2} Phi
        self.S = np.zeros((self.M, self.M), order="F") if gram else None
        self.heads = 0  # heads in the form along v
        self.heads_gram = 0
        self.drawn = 0
        self.truncated = 0
        self._p: np.ndarray | None = None
        self._w = np.zeros(self.M)
        self._E2 = 0.0
        self._K = 0
        self._blocks = 0
        self._zy2 = self._zr2 = self._ze2 = 0.0
        self._z1 = self._z2 = 0.0  # sums of per-head upper bounds of Z_h and Z_h^2
        self._R = max(float(np.max(np.abs(law.atoms))) for law in laws) * math.sqrt(self.d) * (1.0 + 1e-10)
        self.z_finite = True
        self.bets = BetSums()  # the confidence sequence of the form (tail_bounds.betting_upper)
        self.bet_lambda = 0.0  # the bet of the next block's heads, fixed before they are drawn
        self.last_scales: np.ndarray | None = None  # s_h of the last block in the Gram (for checks)
        self.seconds_gram = 0.0
        self.seconds_features = 0.0

    def per_block(self, gram: bool = True) -> int:
        """Heads per block: ``F`` of about ``2^19`` entries (cache-resident), at least 512 columns in
        the Gram."""
        k = _BLOCK_ENTRIES // (self.M * self.d)
        return max(1, k, -(-_MIN_COLUMNS // self.d) if gram else 1)

    def _check_scores(self, Q: np.ndarray, b: np.ndarray) -> None:
        """The scores' a-priori bound below :data:`SCORE_LIMIT` (else the InputError that says so)."""
        with np.errstate(over="ignore", invalid="ignore"):
            q = float(np.sqrt(np.max(np.einsum("hij,hij->h", Q, Q))))
            bn = float(np.sqrt(np.max(np.einsum("hi,hi->h", b, b))))
            bound = (q * self._R + bn) * self._R * 1.01
        if not (math.isfinite(bound) and bound <= SCORE_LIMIT):
            check_score_range([law.atoms for law in self.laws], Q, b)

    def add(self, Q: np.ndarray, b: np.ndarray, gram: bool, form: bool = True) -> None:
        """Add a block of heads: their features, (``form``) the form along ``v``, (``gram``) the Gram.

        Below ``M = 512`` the whole block runs on one BLAS thread: its products are thin
        (``M x M`` by ``M x k d``, rank-``k d`` updates of an ``M x M`` Gram) and OpenBLAS's threaded
        kernels were measured 1.5-10x slower on them when the other core is busy."""
        if self.M < _THREADED_M:
            with rnd.serial_blas():
                self._add(Q, b, gram, form)
        else:
            self._add(Q, b, gram, form)

    def _add(self, Q: np.ndarray, b: np.ndarray, gram: bool, form: bool) -> None:
        import time

        t0 = time.perf_counter()
        k, d = Q.shape[0], self.d
        heads = Heads(Q, b)
        self._check_scores(Q, b)
        F = np.empty((self.M, k * d))
        _feature_columns(self._groups, heads, 0, k, F, DEFAULT_CHUNK, _NoBar())
        # entrywise radii for rows sqrt(m/k) phi, times sqrt(k) >= 1: radii of the rows sqrt(m) phi
        er = rnd.feature_radius(self.laws, heads) * math.sqrt(k)
        with np.errstate(over="ignore", invalid="ignore"):
            E2h = d * np.sum(er * er, axis=0) * (1.0 + rnd.gamma(self.M + 4))  # ||F_h - F^_h||_F^2
        bad = ~np.isfinite(E2h)
        if form and self.lens.v is not None:
            self._form(F, E2h, bad)
            self.heads += k
        self.drawn += k
        t1 = time.perf_counter()
        self.seconds_features += t1 - t0
        if gram and self.S is not None:
            self._gram(F, E2h, bad, k)
            self.seconds_gram += time.perf_counter() - t1

    def _form(self, F: np.ndarray, E2h: np.ndarray, bad: np.ndarray) -> None:
        v = self.lens.v
        assert v is not None
        if bad.any():
            self.z_finite = False
            return
        k, d = E2h.size, self.d
        y = (F.T @ v).reshape(k, d)
        Fh = F.reshape(self.M, k, d)
        ff = np.einsum("mki,mki->k", Fh, Fh)
        yy = np.einsum("ki,ki->k", y, y)
        vv = float(v @ v) * (1.0 + rnd.gamma(v.size + 2))
        self._zy2 += float(np.sum(yy))
        # |fl(F^T v) - F^T v| <= gamma_M |F|^T |v|, and || |F|^T |v| || <= ||F||_F |v|
        gM = rnd.gamma(self.M + 2)
        self._zr2 += gM**2 * float(np.sum(ff)) * vv * (1.0 + rnd.gamma(self.M * d + 2))
        self._ze2 += float(np.sum(E2h))
        # per head: |F_h^T v| <= |fl| (1 + gamma) + (gamma_M ||F^_h||_F + E_h) |v|
        zh = (np.sqrt(yy) * (1.0 + rnd.gamma(d + 4)) + (gM * np.sqrt(ff * (1.0 + rnd.gamma(self.M * d + 2)))
                                                        + np.sqrt(E2h)) * math.sqrt(vv)) ** 2 * (1.0 + 1e-10)
        self._z1 += float(np.sum(zh))
        self._z2 += float(np.sum(zh * zh))
        self.bets.add(self.bet_lambda, zh)

    def _gram(self, F: np.ndarray, E2h: np.ndarray, bad: np.ndarray, k: int) -> None:
        lens, M, d = self.lens, self.M, self.d
        if lens.T is None:
            C, s = F, np.where(bad, 0.0, 1.0)
            e = np.where(bad, 0.0, np.sqrt(np.where(bad, 0.0, E2h)))
        else:
            C = lens.T @ F
            Ch = C.reshape(M, k, d)
            S = np.matmul(Ch.transpose(1, 2, 0), Ch.transpose(1, 0, 2))  # (k, d, d): one small product a head
            S = (S + S.transpose(0, 2, 1)) * 0.5  # exactly symmetric, within u |S| of the product
            gF = rnd.gamma(M * d + 2)
            fro2 = np.einsum("mki,mki->k", Ch, Ch) * (1.0 + gF)  # ||fl(T F_h)||_F^2
            ffro2 = np.einsum("mki,mki->k", F.reshape(M, k, d), F.reshape(M, k, d)) * (1.0 + gF)
            gM = rnd.gamma(M + 2)
            lam = _rho_abs(S) * (1.0 + 2.0 * rnd.U) + gM * fro2 * (1.0 + 1e-10)  # >= ||fl(T F_h)||_2^2
            with np.errstate(over="ignore", invalid="ignore"):
                # ||T F_h - fl(T F^_h)||_F <= ||T||_2 ||F_h - F^_h||_F + gamma_M || |T| ||_2 ||F^_h||_F
                ep = math.sqrt(lens.tau2) * np.sqrt(E2h) + gM * lens.tau_abs * np.sqrt(ffro2)
                ell = (np.sqrt(lam) + ep) ** 2 * (1.0 + 1e-10)
                s = np.where(ell > lens.B, np.sqrt(lens.B / ell) * (1.0 - 2.0**-40), 1.0)
            s = np.where(bad | ~np.isfinite(ell), 0.0, s)
            Ch *= s[None, :, None]
            e = np.where(s > 0, s * (np.where(bad, 0.0, ep) + rnd.U * np.sqrt(fro2)), 0.0)
            self.truncated += int(np.sum(s < 1.0))
        if np.any(s == 0.0):
            C.reshape(M, k, d)[:, s == 0.0, :] = 0.0
        # C.T is Fortran-ordered (k d, M): syrk(trans=1) forms C C^T without a copy
        self.S = sla.blas.dsyrk(1.0, C.T, beta=1.0, c=self.S, trans=1, lower=1, overwrite_c=1)
        A = np.abs(C)
        with rnd.serial_blas():
            if self._p is None:
                self._p = rnd._perron_vector(A)
            self._w += A @ (A.T @ self._p)
        self.last_scales = s
        self._E2 += float(np.sum(e * e))
        self._K += k * d
        self._blocks += 1
        self.heads_gram += k

    def gram(self) -> tuple[np.ndarray, float]:
        r""":math:`\tilde G_H` (lower triangle) and a proved bound on :math:`\|\tilde G_H - \mathrm{fl}\|_2`."""
        assert self.S is not None and self._p is not None
        H = self.heads_gram
        rho = float(np.max(self._w / self._p)) * (1.0 + rnd.gamma(self.M + self._K + self._blocks + 2))
        E2 = self._E2 * (1.0 + rnd.gamma(self._K + 4))
        E = math.sqrt(E2)
        err = (rnd.gamma(self._K) * rho + 2.0 * E * math.sqrt(rho) + E2) * (1.0 + 1e-10)
        G = self.S / float(H)
        return G, (err / H + rnd.U * _fro(G)) * (1.0 + 1e-10)

    def form_moments(self) -> tuple[float, float]:
        r"""Upper bounds of :math:`\frac1H\sum_h Z_h` and :math:`\frac1H\sum_h Z_h^2`,
        :math:`Z_h = v^T X_{\theta_h} v` (per-head bounds summed; inf without proved radii)."""
        if not self.z_finite or self.heads == 0:
            return math.inf, math.inf
        g = rnd.gamma(self.heads + 4)
        return self._z1 * (1.0 + g) / self.heads, self._z2 * (1.0 + g) / self.heads

    def form(self) -> float:
        r"""An upper bound of :math:`\bar Z = \frac1H\sum_h v^T X_{\theta_h} v` (inf when a head's features
        have no proved radius)."""
        if not self.z_finite or self.heads == 0:
            return math.inf
        g = rnd.gamma(self.heads * self.d + 4)
        root = (math.sqrt(self._zy2) * (1.0 + g) + math.sqrt(self._zr2)
                + math.sqrt(self._ze2) * math.sqrt(float(self.lens.v @ self.lens.v)))  # type: ignore[union-attr]
        return root * root * (1.0 + 1e-10) / self.heads


def _fro(A: np.ndarray) -> float:
    """Frobenius norm of the symmetric matrix whose lower triangle ``A`` holds (upper part zero)."""
    return math.sqrt(2.0) * float(np.linalg.norm(A)) * (1.0 + 1e-10)


def bottom_bounds(G: np.ndarray, radius: float) -> tuple[float | None, float]:
    r"""Certified bounds ``(c, g)`` with :math:`c \le \lambda_{\min}(G_\star) \le g` for every symmetric
    :math:`G_\star` within ``radius`` (spectral norm) of the matrix whose lower triangle is ``G``.

    ``g``: the Rayleigh quotient of the float bottom eigenvector ``v``, with its rounding
    (:math:`\gamma_{M+2}|v|^T|G||v|`) and ``radius`` added. ``c``: a verified Cholesky
    (:func:`~ntkcheck.ntk.certificate.routes.certify_gram_enclosure`) of :math:`G - sI` at
    :math:`s = (1 - 2^{-7})\hat\lambda` (the diagonal's rounding added to the radius), so that
    :math:`c = s + (\text{its bound})` loses under 1% of :math:`\hat\lambda`; of ``G`` itself if that
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


def draw_block(k: int, count: int, dim: int, *, q_scale: float, b_scale: float, dist: str, seed: int,
               stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Block ``k`` of i.i.d. heads of round ``stream``: :func:`~ntkcheck.ntk.gram_matrix.features.init_heads`
    with a seed derived from ``(seed, stream, k)`` by :class:`numpy.random.SeedSequence`, so blocks
    and rounds are independent and reproducible."""
    ss = np.random.SeedSequence([int(seed), 0x6865616C, int(stream), int(k)])  # "heal": the head-law stream
    s = int.from_bytes(ss.generate_state(2, np.uint32).tobytes(), "little")
    h = init_heads(count, dim, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=s)  # type: ignore[arg-type]
    return h.Q, h.b
