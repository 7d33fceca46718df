r"""The attention NTK at FixUp initialisation: features, the assembled Gram matrix, its spectrum.

At FixUp (:math:`V = 0` on every head) the flow map is the identity and only the
:math:`V`-derivatives of the attention survive. With the feature

.. math::

    \phi_i(x; Q, b) = \nabla\Lambda_i(Qx + b)
        = \sum_k \pi_k\, x_{ik}, \qquad
    \pi_k \propto \exp\langle Qx + b, x_{ik}\rangle

(the softmax-weighted mean of sample :math:`i`'s tokens, scores max-shifted), token slots
:math:`(i, j)` with weights :math:`w_{ij} = 1/N_i`, and :math:`H` heads
:math:`(Q_h, b_h)`, the NTK Gram matrix (one copy per output coordinate) is

.. math::

    W^{1/2} K W^{1/2} = F F^T, \qquad
    F_{(i,j),\,(h,:)} = \sqrt{w_{ij}/H}\; \phi_i(x_{ij}; Q_h, b_h),

a matrix of shape ``(M, H d)``, ``M = sum_i N_i``. Its smallest eigenvalue is the
:math:`\lambda_{\min}(\rho)` of the NTK quadratic form restricted to the finite heads.

Spectrum (measured in ``benchmarks/bench_gram.py``, MATH.md section 6): the SVD of ``F``
resolves relative eigenvalues down to ~1e-28 but is 4-7x slower than ``eigvalsh`` of the
formed ``F F^T``, which cannot resolve relative eigenvalues below ~1e-13. ``method="auto"``
therefore forms ``F F^T`` and calls ``eigvalsh`` (or, when the full spectrum is not wanted,
a Cholesky factorisation plus Lanczos on the inverse for :math:`\lambda_{\min}`, 2-3x
faster again), and falls back to the SVD of ``F`` only when the relative
:math:`\lambda_{\min}` falls below ``1e-10`` (a factor 1000 above the ``eigvalsh``
floor). Positivity is never claimed from a float64 number below ``1e-12`` relative: that
needs ``certify=True`` (Arb ball arithmetic, small problems only).

References: seed 003 section 3.1-3.2, Prop. 5 (positivity of the NTK <=> injectivity of
``G``); MATH.md section 3 ("Finite tokens, finite heads").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.linalg as sla
from flint import arb, arb_mat, ctx
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh
from tqdm.auto import tqdm

from ._validate import as_samples, check_score_range
from .errors import InputError, NtkcheckWarning, PrecisionError

__all__ = [
    "Heads",
    "init_heads",
    "attention_features",
    "GramCertificate",
    "GramResult",
    "gram",
    "gram_matrix_arb",
    "certify_lambda_min",
    "RESOLUTION_EIGH",
    "RESOLUTION_SVD",
    "POSITIVE_REL",
]

#: relative lambda_min below which the eigvalsh of the formed Gram is not trusted
#: (its floor is ~1e-13, MATH.md section 6; a factor 1000 of margin).
RESOLUTION_EIGH = 1e-10
#: relative lambda_min below which even the SVD of F (errors ~ (eps ||F||)^2) says nothing.
RESOLUTION_SVD = 1e-26
#: relative lambda_min above which float64 alone may report "positive" (the issue's standard).
POSITIVE_REL = 1e-12
#: full spectrum returned up to this many token slots.
MAX_EIGENVALUES = 4096
#: default workspace of one feature tile, in float64 entries (1 MiB: stays in the L2 cache).
DEFAULT_CHUNK = 1 << 17
#: scores bounded by this in absolute value are exponentiated without the max-shift:
#: exp stays within [1e-87, 1e87], far from overflow and from subnormals.
_EXP_SAFE = 200.0
#: per-sample products are kept at m n k <= 2^18 multiply-adds, where OpenBLAS stays on one
#: thread: tiny threaded products were measured 10-100x slower when the other core is busy.
_SERIAL_GEMM = 1 << 18
#: entries of one column block of F in the accumulated Gram (256 MiB).
_GRAM_BLOCK = 1 << 25
#: the SVD fallback is attempted only if F fits in this many bytes.
SVD_MEMORY_LIMIT = 4 << 30
#: certification is attempted only up to this many token slots (Arb, Python-level exps).
MAX_CERTIFY_TOKENS = 256


# ------------------------------------------------------------------------------- heads


@dataclass(frozen=True, eq=False)
class Heads:
    r"""Attention heads :math:`(Q_h, b_h)_{h < H}` with :math:`V_h = 0` (FixUp).

    Parameters
    ----------
    Q : (H, d, d) float array
        Query matrices (the key matrix is the identity, seed 003 Remark 1).
    b : (H, d) float array
        Query biases.
    """

    Q: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        try:
            Q = np.array(self.Q, dtype=np.float64)
            b = np.array(self.b, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"heads: Q and b must be numeric arrays ({exc})") from None
        if Q.ndim != 3 or Q.shape[1] != Q.shape[2]:
            raise InputError(f"heads: Q must have shape (H, d, d), got {Q.shape}")
        if Q.shape[0] == 0:
            raise InputError("heads: zero heads were given (Q has shape (0, d, d)); need H >= 1")
        if b.shape != Q.shape[:2]:
            raise InputError(f"heads: b must have shape (H, d) = {Q.shape[:2]}, got {b.shape}")
        if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(b))):
            raise InputError("heads: Q or b has a non-finite entry")
        Q.setflags(write=False)
        b.setflags(write=False)
        object.__setattr__(self, "Q", Q)
        object.__setattr__(self, "b", b)

    @property
    def count(self) -> int:
        """Number of heads ``H``."""
        return int(self.Q.shape[0])

    @property
    def dim(self) -> int:
        """Token dimension ``d``."""
        return int(self.Q.shape[1])

    def scaled(self, s: float) -> Heads:
        """The heads with ``Q`` and ``b`` multiplied by ``s`` (sharper attention for ``s > 1``)."""
        return Heads(self.Q * s, self.b * s)

    def __repr__(self) -> str:
        return f"Heads(H={self.count}, d={self.dim}, |Q|_max={np.abs(self.Q).max():.3g}, |b|_max={np.abs(self.b).max():.3g})"


def init_heads(
    H: int,
    d: int,
    *,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    dist: Literal["gaussian", "uniform"] = "gaussian",
    seed: int = 0,
) -> Heads:
    r"""Draw ``H`` heads i.i.d. from an initialisation law.

    ``dist="gaussian"``: entries of ``Q`` are :math:`N(0, q^2)`, of ``b`` :math:`N(0, b^2)`.
    ``dist="uniform"``: entries uniform on :math:`[-q, q]` and :math:`[-b, b]` (a box).
    Both laws have a density on all of :math:`(Q, b)`-space (``uniform``: on an open box),
    as seed 003 Prop. 8 requires of the support of :math:`\rho`.

    Examples
    --------
    >>> init_heads(4, 2, seed=1).Q.shape
    (4, 2, 2)
    """
    if not isinstance(H, (int, np.integer)) or H < 1:
        raise InputError(f"heads: H must be a positive integer, got {H!r}")
    if not isinstance(d, (int, np.integer)) or d < 1:
        raise InputError(f"heads: d must be a positive integer, got {d!r}")
    for name, v in (("q_scale", q_scale), ("b_scale", b_scale)):
        if not (np.isfinite(v) and v >= 0):
            raise InputError(f"heads: {name} must be a finite number >= 0, got {v!r}")
    rng = np.random.default_rng(seed)
    if dist == "gaussian":
        Q = rng.standard_normal((H, d, d)) * q_scale
        b = rng.standard_normal((H, d)) * b_scale
    elif dist == "uniform":
        Q = rng.uniform(-1.0, 1.0, (H, d, d)) * q_scale
        b = rng.uniform(-1.0, 1.0, (H, d)) * b_scale
    else:
        raise InputError(f"heads: dist must be 'gaussian' or 'uniform', got {dist!r}")
    return Heads(Q, b)


def _as_heads(heads: Any, d: int) -> Heads:
    if not isinstance(heads, Heads):
        if isinstance(heads, tuple) and len(heads) == 2:
            heads = Heads(*heads)
        else:
            raise InputError(f"heads: expected a Heads object or a tuple (Q, b), got {type(heads).__name__}")
    if heads.dim != d:
        raise InputError(f"heads: have dimension {heads.dim}, the tokens have dimension {d}")
    return heads


# ---------------------------------------------------------------------------- features


def _length_groups(samples: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Samples of equal length stacked: ``(X, rows)`` with ``X`` of shape (g, N, d) and ``rows``
    the (g N,) row indices of their slots in ``F`` (sample order)."""
    sizes = np.array([s.shape[0] for s in samples])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    by_len: dict[int, list[int]] = {}
    for i, n in enumerate(sizes.tolist()):
        by_len.setdefault(n, []).append(i)
    groups = []
    for idx in by_len.values():
        X = np.stack([samples[i] for i in idx])
        rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in idx])
        groups.append((X, rows))
    return groups


def _tile_shape(N: int, d: int, width: int, g_all: int, chunk: int) -> tuple[int, int]:
    """Heads ``c`` and samples ``g`` of one tile.

    Workspace ``g N c (N + d + 2) <= chunk`` floats (when one sample and one head fit), and
    each per-sample product (queries ``N x (d+1)`` by ``(d+1) x c d``, scores ``N x d`` by
    ``d x N c``, means ``N c x N`` by ``N x d``) at most ``_SERIAL_GEMM`` multiply-adds.
    """
    per_head = N * (N + d + 2)
    c = max(1, min(width, chunk // per_head, _SERIAL_GEMM // max(N * d * max(d + 1, N), 1)))
    g = max(1, min(g_all, chunk // (per_head * c)))
    return c, g


def _attend(X: np.ndarray, Xa: np.ndarray, Qa: np.ndarray, bound: np.ndarray, scale: float,
            out: np.ndarray, chunk: int, bar: Any) -> None:
    r"""Write the scaled features of the samples ``X`` (g_all, N, d) for ``C`` heads into ``out``.

    ``Xa`` is ``X`` with a column of ones appended (g_all, N, d + 1), ``Qa`` (d + 1, C d) holds
    :math:`Q_h^T` side by side over a last row of biases (so one product gives
    :math:`Q_h x + b_h`), ``bound`` (C,) bounds the scores' :math:`|\langle Q_h x + b_h, y\rangle|`,
    and ``out`` is a C-contiguous (g_all N, C d) array, written once.

    Per tile of ``g`` samples and ``c`` heads, all in a workspace of at most ``chunk``
    floats (cache-resident): one product per sample each for the queries, the scores and
    the softmax means, the exponentials and the normalisation in place.
    """
    g_all, N, d = X.shape
    C = Qa.shape[1] // d
    c, g = _tile_shape(N, d, C, g_all, chunk)
    out4 = out.reshape(g_all, N, C, d)
    # flat workspaces; partial tiles use a contiguous prefix of each
    wa = np.empty(g * N * c * d)
    ws = np.empty(g * N * N * c)
    wn = np.empty(g * N * c)
    for j0 in range(0, C, c):
        j1 = min(C, j0 + c)
        cj = j1 - j0
        Qj = Qa if cj == C else np.ascontiguousarray(Qa[:, j0 * d:j1 * d])
        # Below _EXP_SAFE every exponential is a normal float and the max-shift (an exact
        # identity) can be skipped; above it, shift, so that exp never overflows.
        shift = float(bound[j0:j1].max()) > _EXP_SAFE
        for t0 in range(0, g_all, g):
            t1 = min(g_all, t0 + g)
            gt = t1 - t0
            Xt = X[t0:t1]
            A = np.matmul(Xa[t0:t1], Qj, out=wa[:gt * N * cj * d].reshape(gt, N, cj * d))
            A = A.reshape(gt, N * cj, d)  # rows (j, h): the query Q_h x_j + b_h
            S = np.matmul(Xt, A.transpose(0, 2, 1), out=ws[:gt * N * N * cj].reshape(gt, N, N * cj))
            if shift:
                S -= S.max(axis=1, keepdims=True)
            np.exp(S, out=S)  # S[t, k, (j, h)] = exp <Q_h x_tj + b_h, x_tk> (shifted)
            s = np.sum(S, axis=1, keepdims=True, out=wn[:gt * N * cj].reshape(gt, 1, N * cj))
            np.divide(scale, s, out=s)
            S *= s  # softmax weights times sqrt(w / H)
            if cj == C:
                np.matmul(S.transpose(0, 2, 1), Xt, out=out4[t0:t1].reshape(gt, N * C, d))
            else:
                P = np.matmul(S.transpose(0, 2, 1), Xt, out=A)  # the queries are no longer needed
                out4[t0:t1, :, j0:j1] = P.reshape(gt, N, cj, d)
            bar.update(gt * N * cj)


def _feature_columns(groups: list[tuple[np.ndarray, np.ndarray]], heads: Heads, h0: int, h1: int,
                     out: np.ndarray, chunk: int, bar: Any) -> None:
    """Columns ``h0 d : h1 d`` of ``F`` into the C-contiguous (M, (h1 - h0) d) array ``out``."""
    H, d = heads.count, heads.dim
    C = h1 - h0
    Qa = np.empty((d + 1, C * d))
    Qa[:d] = heads.Q[h0:h1].reshape(C * d, d).T
    Qa[d] = heads.b[h0:h1].reshape(C * d)
    qnorm = np.linalg.norm(heads.Q[h0:h1].reshape(C, -1), axis=1)  # Frobenius >= operator norm
    bnorm = np.linalg.norm(heads.b[h0:h1], axis=1)
    for X, rows in groups:
        g_all, N, _ = X.shape
        Xa = np.concatenate([X, np.ones((g_all, N, 1))], axis=2)
        R = float(np.sqrt(np.max(np.einsum("gnd,gnd->gn", X, X))))
        bound = (qnorm * R + bnorm) * R  # |<Q x + b, y>| <= (|Q|_F |x| + |b|) |y|
        scale = math.sqrt(1.0 / (N * H))
        r0 = int(rows[0])
        if rows[-1] - r0 + 1 == rows.size:  # contiguous slots: write in place
            _attend(X, Xa, Qa, bound, scale, out[r0:r0 + rows.size], chunk, bar)
            continue
        # Interleaved lengths: go through a buffer of at most ~chunk entries, then scatter.
        gb = max(1, min(g_all, chunk // (N * C * d)))
        buf = np.empty((gb * N, C * d))
        for t0 in range(0, g_all, gb):
            t1 = min(g_all, t0 + gb)
            part = buf[:(t1 - t0) * N]
            _attend(X[t0:t1], Xa[t0:t1], Qa, bound, scale, part, chunk, bar)
            out[rows[t0 * N:t1 * N]] = part


def _progress(total: int, progress: bool) -> Any:
    # Unit: one slot and one head (N exponentials); disabled for short runs and off a terminal.
    return tqdm(total=total, desc="attention features", unit="slot-head", unit_scale=True,
                disable=True if (not progress or total < (1 << 22)) else None)


def attention_features(
    samples: Any, heads: Heads, *, chunk: int = DEFAULT_CHUNK, progress: bool = False
) -> np.ndarray:
    r"""The NTK feature matrix ``F`` with :math:`F F^T = W^{1/2} K W^{1/2}`.

    .. math::

        F_{(i,j),\,h d : (h+1) d} = \sqrt{w_{ij}/H}\;\nabla\Lambda_i(Q_h x_{ij} + b_h),
        \qquad w_{ij} = 1/N_i .

    Computed in cache-resident tiles of ``g`` samples (of equal length ``N``) and ``c``
    heads: per sample one product each for the queries :math:`Q_h x_{ij} + b_h` of all
    ``c`` heads (``(N, d+1) x (d+1, c d)``, the bias as a last row), the scores
    (``(N, d) x (d, N c)``) and the softmax means (``(N c, N) x (N, d)``), written straight
    into ``F``; the exponentials and the normalisation run in place on the tile. The
    per-sample products are kept small enough that OpenBLAS runs them on one thread (tiny
    threaded products were measured 10-100x slower when the other core is busy).
    Exponentials dominate the cost at small ``d`` (``M H N`` of them, MATH.md section 6),
    the products at large ``d``. The scores are max-shifted whenever the a-priori bound
    :math:`|\langle Q_h x + b_h, y\rangle| \le (\|Q_h\|_F R + \|b_h\|) R`
    (``R`` the largest token norm) exceeds 200, so no exponential overflows or underflows
    to 0 for the largest term; below that bound the shift, an exact identity, is skipped.

    Parameters
    ----------
    samples : list of (N_i, d) float arrays, or (n, N, d) array
        Token sets; rows of ``F`` are the slots ``(i, j)`` in sample order.
    heads : Heads
        ``H`` heads of dimension ``d``.
    chunk : int
        Workspace bound in float64 entries per tile. Memory: ``F`` itself
        (``8 M H d`` bytes) plus at most ``8 * max(chunk, N_max (N_max + d + 2))`` bytes of
        tile workspace (queries, scores, denominators), plus, only when samples of different
        lengths are interleaved, a scatter buffer of at most ``8 * max(chunk, N_max H d)``
        bytes, plus the inputs stacked once per length with a column of ones
        (``8 M (2 d + 1)`` bytes) and the stacked heads (``8 (d + 1) H d`` bytes). The
        default, ``2^17`` entries (1 MiB), keeps a tile in the L2 cache.
    progress : bool
        Progress bar over slot-heads (long runs only, and only on a terminal).

    Returns
    -------
    (M, H d) float array

    Examples
    --------
    >>> import numpy as np
    >>> F = attention_features([np.array([[0.0], [1.0]])], init_heads(3, 1))
    >>> F.shape
    (2, 3)
    """
    S = as_samples(samples)
    heads = _as_heads(heads, S[0].shape[1])
    check_score_range(S, heads.Q, heads.b)
    chunk = _as_chunk(chunk)
    M = sum(s.shape[0] for s in S)
    H = heads.count
    F = np.empty((M, H * heads.dim))
    with _progress(M * H, progress) as bar:
        _feature_columns(_length_groups(S), heads, 0, H, F, chunk, bar)
    return F


def _as_chunk(chunk: Any) -> int:
    if not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise InputError(f"chunk: expected a positive integer, got {chunk!r}")
    return int(chunk)


def _gram_accumulated(S: list[np.ndarray], heads: Heads, chunk: int, progress: bool) -> np.ndarray:
    """``F F^T`` summed over head blocks without storing ``F``.

    Memory: ``8 M^2`` bytes for the Gram plus one column block of ``F`` of at most
    ``8 max(2^25, 256 M)`` bytes (at least 256 columns, so the rank-k update runs at
    matmul speed) plus the tile workspace of :func:`attention_features`. The update is
    BLAS ``syrk``, in place (no ``M x M`` temporary), and fills only the **lower
    triangle** of the Fortran-ordered result: every consumer (``eigvalsh``,
    :func:`_extremal_eigh`) reads only that triangle.
    """
    check_score_range(S, heads.Q, heads.b)
    M = sum(s.shape[0] for s in S)
    H, d = heads.count, heads.dim
    c = int(min(H, max(-(-256 // d), _GRAM_BLOCK // (M * d), 1)))
    groups = _length_groups(S)
    G = np.zeros((M, M), order="F")
    block = np.empty((M, c * d))
    with _progress(M * H, progress) as bar:
        for h0 in range(0, H, c):
            h1 = min(H, h0 + c)
            B = block if h1 - h0 == c else np.empty((M, (h1 - h0) * d))
            _feature_columns(groups, heads, h0, h1, B, chunk, bar)
            # B.T is Fortran-ordered (k, M): syrk(trans=1) forms B B^T without copying B.
            G = sla.blas.dsyrk(1.0, B.T, beta=1.0, c=G, trans=1, lower=1, overwrite_c=1)
    return G


def _gram_lower(F: np.ndarray) -> np.ndarray:
    """``F F^T`` by BLAS ``syrk``: half the work of ``F @ F.T``; lower triangle only (Fortran order)."""
    return sla.blas.dsyrk(1.0, np.ascontiguousarray(F).T, trans=1, lower=1)


# ---------------------------------------------------------------------------- spectrum


def _extremal_eigh(G: np.ndarray) -> tuple[float, float] | None:
    """(lambda_min, lambda_max) by Cholesky + Lanczos on ``G^{-1}``; None when G is not
    numerically positive definite (then the caller uses the full eigvalsh).

    Only the lower triangle of ``G`` is read (as :func:`_gram_accumulated` fills it)."""
    if not G.flags.f_contiguous:
        G = np.asfortranarray(G)  # BLAS symv below takes it as is, without a copy per product
    try:
        c = sla.cho_factor(G, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    n = G.shape[0]
    op = LinearOperator((n, n), matvec=lambda v: sla.cho_solve(c, v, check_finite=False), dtype=np.float64)
    try:
        mu = eigsh(op, k=1, which="LA", tol=1e-12, return_eigenvectors=False)[0]
        lop = LinearOperator((n, n), matvec=lambda v: sla.blas.dsymv(1.0, G, np.ravel(v), lower=1), dtype=np.float64)
        lmax = eigsh(lop, k=1, which="LA", tol=1e-12, return_eigenvectors=False)[0]
    except (ArpackError, ArpackNoConvergence):
        return None
    if not (mu > 0 and lmax > 0):
        return None
    return float(1.0 / mu), float(lmax)


# ------------------------------------------------------------------------ certification


@dataclass(frozen=True)
class GramCertificate:
    r"""Result of the Arb certification of :math:`\lambda_{\min}(F F^T) > 0`.

    ``kind="arb-inverse-frobenius"``: the Gram was built in ball arithmetic from the
    exact token and head values, ``arb_mat.inv`` succeeded (so every matrix in the ball,
    in particular the exact Gram, is invertible), and since the exact Gram is
    :math:`F F^T \succeq 0`, :math:`\lambda_{\min} = 1/\|G^{-1}\|_2 \ge 1/\|G^{-1}\|_F`,
    bounded below rigorously by ``lower_bound``. ``kind="inconclusive"``: no precision up
    to ``max_bits`` separated the Gram from singular matrices (as it must be when the
    Gram is singular); ``lower_bound`` is None.
    """

    kind: str
    lower_bound: float | None
    bits: int
    detail: str

    @property
    def positive(self) -> bool:
        return self.lower_bound is not None and self.lower_bound > 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "lower_bound": self.lower_bound, "bits": self.bits, "detail": self.detail}

    def __repr__(self) -> str:
        if self.positive:
            return f"GramCertificate(lambda_min >= {self.lower_bound:.6g}, {self.kind}, {self.bits} bits)"
        return f"GramCertificate(inconclusive at {self.bits} bits: {self.detail})"


def gram_matrix_arb(samples: Any, heads: Heads, prec: int) -> arb_mat:
    r"""The Gram :math:`W^{1/2} K W^{1/2}` as an Arb ball matrix at ``prec`` bits.

    Tokens and heads are converted exactly (every double is a dyadic rational); the
    softmax weights are evaluated in ball arithmetic with a shift by the float64 row
    maximum (any shift is exact algebra; this one keeps the exponentials bounded).
    Entry :math:`G_{(ij),(i'j')} = \sqrt{w_{ij} w_{i'j'}}\, H^{-1} \sum_h \langle\phi_{ij}^h, \phi_{i'j'}^h\rangle`.
    """
    S = as_samples(samples)
    heads = _as_heads(heads, S[0].shape[1])
    H, d = heads.count, heads.dim
    old = ctx.prec
    ctx.prec = int(prec)
    try:
        rows: list[list[arb]] = []  # rows of F (without the weight), concatenated over heads
        sw: list[arb] = []
        Xa = [arb_mat([[arb(float(v)) for v in row] for row in X]) for X in S]
        Qa = [arb_mat([[arb(float(v)) for v in row] for row in heads.Q[h]]) for h in range(H)]
        ba = [[arb(float(v)) for v in heads.b[h]] for h in range(H)]
        for X, XA in zip(S, Xa, strict=True):
            N = X.shape[0]
            feats: list[list[arb]] = [[] for _ in range(N)]
            XT = XA.transpose()
            for h in range(H):
                A = XA * Qa[h].transpose()  # rows: Q x_j (exact inputs, ball products)
                A = arb_mat([[A[j, k] + ba[h][k] for k in range(d)] for j in range(N)])
                Sc = A * XT  # scores <Q x_j + b, x_k>
                shift = (X @ heads.Q[h].T + heads.b[h]) @ X.T
                P = arb_mat(N, N)
                for j in range(N):
                    m = arb(float(shift[j].max()))
                    e = [(Sc[j, k] - m).exp() for k in range(N)]
                    tot = sum(e, arb(0))
                    for k in range(N):
                        P[j, k] = e[k] / tot
                Phi = P * XA  # (N, d): softmax-weighted means
                for j in range(N):
                    feats[j].extend(Phi[j, k] for k in range(d))
            rows.extend(feats)
            sw.extend([(arb(1) / (N * H)).sqrt()] * N)
        M = len(rows)
        Fm = arb_mat([[sw[r] * v for v in rows[r]] for r in range(M)])
        return Fm * Fm.transpose()
    finally:
        ctx.prec = old


def _arb_upper(x: arb) -> float:
    """A float that is >= every point of the ball ``x`` (rounded outward)."""
    return float(np.nextafter(float(x.mid()) + float(x.rad()), np.inf)) * (1 + 2**-50)


def certify_lambda_min(samples: Any, heads: Heads, *, max_bits: int = 2048, start_bits: int = 128) -> GramCertificate:
    r"""Rigorous lower bound on :math:`\lambda_{\min}(W^{1/2} K W^{1/2})` in Arb, or inconclusive.

    Doubles the precision from ``start_bits`` up to ``max_bits`` until ``arb_mat.inv``
    certifies that the ball Gram is invertible; then
    :math:`\lambda_{\min} \ge 1/\|G^{-1}\|_F` (valid because the exact Gram is
    :math:`F F^T \succeq 0`). A singular Gram is never certified: its ball always
    contains singular matrices (MATH.md section 6).
    """
    S = as_samples(samples)
    M = sum(s.shape[0] for s in S)
    if M > MAX_CERTIFY_TOKENS:
        raise PrecisionError(
            f"certify: {M} token slots; the Arb certification is limited to {MAX_CERTIFY_TOKENS} "
            "(it evaluates every softmax weight in ball arithmetic)"
        )
    if max_bits < 53:
        raise PrecisionError(f"certify: max_bits={max_bits} is below double precision (53)")
    bits = min(start_bits, max_bits)
    last = ""
    while True:
        G = gram_matrix_arb(S, heads, bits)
        old = ctx.prec
        ctx.prec = bits
        try:
            Ginv = G.inv()
            fro2 = sum((Ginv[r, c] ** 2 for r in range(M) for c in range(M)), arb(0))
            ub = _arb_upper(fro2.sqrt())
        except ZeroDivisionError:
            last = f"arb_mat.inv could not separate the Gram from singular matrices at {bits} bits"
            ub = None
        finally:
            ctx.prec = old
        if ub is not None and math.isfinite(ub) and ub > 0:
            lb = float(np.nextafter(1.0 / ub, 0.0))
            return GramCertificate("arb-inverse-frobenius", lb, bits,
                                   f"lambda_min >= 1/||G^-1||_F with G^-1 enclosed at {bits} bits")
        if bits >= max_bits:
            return GramCertificate("inconclusive", None, bits, last or "the inverse ball was unbounded")
        bits = min(2 * bits, max_bits)


# ------------------------------------------------------------------------------ result


@dataclass(frozen=True)
class GramResult:
    r"""Spectrum summary of the NTK Gram :math:`W^{1/2} K W^{1/2} = F F^T`.

    Attributes
    ----------
    lambda_min, lambda_max : float
        Extreme eigenvalues (float64; ``lambda_min`` is clipped at 0, rounding can make it
        slightly negative).
    condition : float
        ``lambda_max / lambda_min`` (``inf`` when ``lambda_min == 0``).
    tokens, heads, dim : int
        ``M``, ``H``, ``d``.
    eigenvalues : tuple of float or None
        All ``M`` eigenvalues, ascending, when ``M <= 4096``.
    rank_deficient_by_size : bool
        ``H d < M``: singular by rank, says nothing about the data.
    method : str
        ``"eigvalsh"``, ``"cholesky-lanczos"`` or ``"svd"``: the route that gave the numbers.
    resolution : float
        Relative eigenvalue below which that route cannot tell ``lambda_min`` from 0.
    status : str
        ``"positive"`` (relative ``lambda_min`` above ``1e-12``, or certified),
        ``"singular by size"``, ``"below resolution"`` (singular to working precision),
        ``"small"`` (between the resolution and ``1e-12``: not claimed positive).
    certified : GramCertificate or None
    """

    lambda_min: float
    lambda_max: float
    condition: float
    tokens: int
    heads: int
    dim: int
    eigenvalues: tuple[float, ...] | None
    rank_deficient_by_size: bool
    method: str
    resolution: float
    status: str
    certified: GramCertificate | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def relative_lambda_min(self) -> float:
        return self.lambda_min / self.lambda_max if self.lambda_max > 0 else 0.0

    @property
    def positive(self) -> bool:
        """True only when positivity is established (float64 above 1e-12 relative, or certified)."""
        return self.status == "positive"

    def to_dict(self) -> dict[str, Any]:
        return {
            "lambda_min": self.lambda_min,
            "lambda_max": self.lambda_max,
            "relative_lambda_min": self.relative_lambda_min,
            "condition": self.condition if math.isfinite(self.condition) else "inf",
            "tokens": self.tokens,
            "heads": self.heads,
            "dim": self.dim,
            "rank_deficient_by_size": self.rank_deficient_by_size,
            "method": self.method,
            "resolution": self.resolution,
            "status": self.status,
            "certified": None if self.certified is None else self.certified.to_dict(),
            "eigenvalues": None if self.eigenvalues is None else list(self.eigenvalues),
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        s = (f"GramResult({self.status}: lambda_min={self.lambda_min:.4g}, lambda_max={self.lambda_max:.4g}, "
             f"relative={self.relative_lambda_min:.3g}, M={self.tokens}, H={self.heads}, d={self.dim}, {self.method}")
        if self.certified is not None:
            s += f", {self.certified!r}"
        return s + ")"


def gram(
    samples: Any,
    heads: Heads,
    *,
    certify: bool = False,
    method: Literal["auto", "svd", "eigh"] = "auto",
    progress: bool = False,
    chunk: int = DEFAULT_CHUNK,
    max_bits: int = 2048,
) -> GramResult:
    r"""Spectrum of the attention NTK Gram at FixUp for the given heads.

    Parameters
    ----------
    samples : list of (N_i, d) float arrays
    heads : Heads
    certify : bool
        When float64 cannot establish positivity (relative ``lambda_min < 1e-12``) and
        ``M <= 256``, certify it in Arb (:func:`certify_lambda_min`); positivity is never
        claimed without that.
    method : {"auto", "svd", "eigh"}
        ``"auto"``: ``eigvalsh`` of ``F F^T`` (``M <= 4096``) or Cholesky + Lanczos
        (larger ``M``, ``F`` accumulated over head chunks and never stored), with the SVD
        of ``F`` as fallback below relative ``1e-10``; ``"svd"``: always ``svdvals(F)``;
        ``"eigh"``: never the SVD.
    chunk : int
        Tile workspace bound of :func:`attention_features` (float64 entries). Peak memory
        of ``"auto"``: ``8 M (H d + M)`` bytes for ``M <= 4096`` (``F`` and ``F F^T``), plus
        ``eigvalsh``'s copy; above, ``16 M^2`` bytes (the Gram and its Cholesky factor) plus
        one column block of ``F`` of at most ``8 max(2^25, 256 M)`` bytes (plus the SVD
        fallback's ``8 M H d`` if it is needed and fits in 4 GiB).

    Returns
    -------
    GramResult

    Warns
    -----
    NtkcheckWarning
        When ``H d < M``: the Gram is singular by rank, which is not a verdict about the data.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> r = gram([rng.standard_normal((3, 2)) for _ in range(3)], init_heads(18, 2, seed=0))
    >>> r.status
    'positive'
    """
    S = as_samples(samples)
    heads = _as_heads(heads, S[0].shape[1])
    if method not in ("auto", "svd", "eigh"):
        raise InputError(f"method: expected 'auto', 'svd' or 'eigh', got {method!r}")
    M = sum(s.shape[0] for s in S)
    H, d = heads.count, heads.dim
    by_size = H * d < M
    notes: list[str] = []
    if by_size:
        warnings.warn(
            f"H d = {H}*{d} = {H * d} < M = {M} token slots: the Gram has rank at most {H * d} and is "
            "singular by rank; this is not a verdict about the data (use at least "
            f"{math.ceil(M / d)} heads)",
            NtkcheckWarning,
            stacklevel=2,
        )
        notes.append(f"singular by rank: H d = {H * d} < M = {M}")
    want_all = M <= MAX_EIGENVALUES
    eig: np.ndarray | None = None
    F: np.ndarray | None = None
    svd_fits = 8 * M * H * d <= SVD_MEMORY_LIMIT

    def run_svd() -> np.ndarray:
        nonlocal F
        if F is None:
            F = attention_features(S, heads, chunk=chunk, progress=progress)
        s = sla.svdvals(F, check_finite=False)
        ev = np.zeros(M)
        ev[M - s.shape[0]:] = np.sort(s) ** 2  # min(M, Hd) singular values; the rest are exact zeros
        return ev

    if method == "svd":
        eig = run_svd()
        used, resolution = "svd", RESOLUTION_SVD
    else:
        if want_all:
            F = attention_features(S, heads, chunk=chunk, progress=progress)
            G = _gram_lower(F)
        else:
            G = _gram_accumulated(S, heads, chunk, progress)
        ext = None if (want_all or by_size) else _extremal_eigh(G)
        if ext is not None:
            lmin, lmax = ext
            used, resolution = "cholesky-lanczos", RESOLUTION_EIGH
        else:
            eig = np.linalg.eigvalsh(G, UPLO="L")  # G holds its lower triangle only
            used, resolution = "eigvalsh", RESOLUTION_EIGH
            lmin, lmax = float(eig[0]), float(eig[-1])
        del G
        if method == "auto" and not by_size and lmax > 0 and lmin / lmax < RESOLUTION_EIGH:
            if svd_fits:
                eig = run_svd()
                used, resolution = "svd", RESOLUTION_SVD
                notes.append("eigvalsh could not resolve lambda_min (relative < 1e-10): recomputed from the SVD of F")
            else:
                notes.append("lambda_min below the eigvalsh resolution and F too large for the SVD fallback")
    if eig is not None:
        lmin, lmax = float(eig[0]), float(eig[-1])
    lmin = max(lmin, 0.0)
    rel = lmin / lmax if lmax > 0 else 0.0
    if by_size:
        status = "singular by size"
    elif rel > POSITIVE_REL:
        status = "positive"
    elif rel < resolution:
        status = "below resolution"
    else:
        status = "small"
    cert: GramCertificate | None = None
    if certify and not by_size and status != "positive":
        if M <= MAX_CERTIFY_TOKENS:
            cert = certify_lambda_min(S, heads, max_bits=max_bits)
            if cert.positive:
                status = "positive"
                notes.append("positivity certified in Arb ball arithmetic")
            else:
                notes.append("certification inconclusive: positivity is not claimed")
        else:
            notes.append(f"certification skipped: M = {M} > {MAX_CERTIFY_TOKENS}")
    eigenvalues = tuple(float(max(v, 0.0)) for v in eig) if (eig is not None and want_all) else None
    return GramResult(
        lambda_min=lmin,
        lambda_max=float(lmax),
        condition=(lmax / lmin) if lmin > 0 else math.inf,
        tokens=M,
        heads=H,
        dim=d,
        eigenvalues=eigenvalues,
        rank_deficient_by_size=by_size,
        method=used,
        resolution=resolution,
        status=status,
        certified=cert,
        notes=tuple(notes),
    )
