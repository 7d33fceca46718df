r"""The attention NTK at FixUp initialisation: features, the assembled Gram matrix, its spectrum.

At FixUp (:math:`V = 0` on every head) the flow map is the identity and only the
:math:`V`-derivatives of the attention survive. The NTK acts on
:math:`\bigoplus_i L^2(\mu_i)`, and a sample is its empirical law
:math:`\mu_i = \sum_a m_{ia}\,\delta_{x_{ia}}` over its **distinct atoms** :math:`x_{ia}`
with masses :math:`m_{ia}` (:class:`~ntkcheck.families.Empirical`; a token repeated
``c`` times in a sample of ``N`` tokens is one atom of mass ``c/N``: two copies of a token
are one point of :math:`L^2(\mu_i)`). With the feature

.. math::

    \phi_i(x; Q, b) = \nabla\Lambda_i(Qx + b)
        = \sum_a \pi_a\, x_{ia}, \qquad
    \pi_a \propto m_{ia}\exp\langle Qx + b, x_{ia}\rangle

(the softmax-weighted mean of sample :math:`i`'s atoms, scores max-shifted), rows indexed by
the atoms :math:`(i, a)` with weights :math:`w_{ia} = m_{ia}`, and :math:`H` heads
:math:`(Q_h, b_h)`, the NTK Gram matrix (one copy per output coordinate) is

.. math::

    W^{1/2} K W^{1/2} = F F^T, \qquad
    F_{(i,a),\,(h,:)} = \sqrt{m_{ia}/H}\; \phi_i(x_{ia}; Q_h, b_h),

a matrix of shape ``(M, H d)``, ``M = sum_i (distinct atoms of sample i)``. Its smallest
eigenvalue is the :math:`\lambda_{\min}(\rho)` of the NTK quadratic form restricted to the
finite heads. The token-slot assembly (one row per token, weight ``1/N_i``) is
:math:`P\,F F^T P^T` with ``P`` the isometry that copies an atom's value to its slots
scaled by :math:`1/\sqrt{c}`: the same non-zero spectrum, plus one spurious zero eigenvalue
per repeated copy (the functions that differ between copies of one point are the zero
function of :math:`L^2(\mu_i)`).

Spectrum (measured in ``benchmarks/bench_gram.py``): the SVD of ``F``
resolves relative eigenvalues down to ~1e-28 but is 4-7x slower than ``eigvalsh`` of the
formed ``F F^T``, which cannot resolve relative eigenvalues below ~1e-13. ``method="auto"``
therefore forms ``F F^T`` and calls ``eigvalsh`` (or, when the full spectrum is not wanted,
a Cholesky factorisation plus Lanczos on the inverse for :math:`\lambda_{\min}`, 2-3x
faster again), and falls back to the SVD of ``F`` only when the relative
:math:`\lambda_{\min}` falls below ``1e-10`` (a factor 1000 above the ``eigvalsh``
floor). Positivity is never claimed from a float64 number below ``1e-12`` relative: that
needs ``certify=True`` (Arb ball arithmetic, small problems only).

References: seed 003 section 3.1-3.2, Prop. 5 (positivity of the NTK <=> injectivity of
``G``); ``theory/ntk-prop8.md`` ("The finite-token Gram matrix").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.linalg as sla
from flint import arb, arb_mat, ctx, fmpq
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh
from tqdm.auto import tqdm

from ._validate import check_score_range
from .errors import InputError, NtkcheckWarning, PrecisionError
from .families import Empirical, as_laws

__all__ = [
    "Heads",
    "init_heads",
    "attention_features",
    "GramCertificate",
    "GramResult",
    "gram",
    "gram_matrix_arb",
    "certify_lambda_min",
    "SampleSize",
    "merge_note",
    "RESOLUTION_EIGH",
    "RESOLUTION_SVD",
    "POSITIVE_REL",
]

#: relative lambda_min below which the eigvalsh of the formed Gram is not trusted
#: (its floor is ~1e-13, measured in benchmarks/bench_gram.py; a factor 1000 of margin).
RESOLUTION_EIGH = 1e-10
#: relative lambda_min below which even the SVD of F (errors ~ (eps ||F||)^2) says nothing.
RESOLUTION_SVD = 1e-26
#: relative lambda_min above which float64 alone may report "positive" (the issue's standard).
POSITIVE_REL = 1e-12
#: full spectrum returned up to this many distinct atoms (rows of the Gram).
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
#: certification is attempted only up to this many distinct atoms (Arb, Python-level exps).
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


@dataclass(frozen=True, eq=False)
class _Group:
    r"""Laws with the same number of distinct atoms ``N``, stacked.

    ``X`` (g, N, d) atoms, ``scale`` (g, N) the row weights :math:`\sqrt{m_{ia}/H}`, ``masses``
    (g, N) the masses or None when every law of the group has equal masses (then they
    cancel in the softmax), ``rows`` the (g N,) row indices of the atoms in ``F``.
    """

    X: np.ndarray
    scale: np.ndarray
    masses: np.ndarray | None
    rows: np.ndarray


def _groups(laws: Sequence[Empirical], H: int) -> list[_Group]:
    """Laws grouped by atom count (one stacked product per group), rows in law order."""
    sizes = np.array([law.n_atoms for law in laws])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    by_len: dict[int, list[int]] = {}
    for i, n in enumerate(sizes.tolist()):
        by_len.setdefault(n, []).append(i)
    out = []
    for idx in by_len.values():
        X = np.stack([laws[i].atoms for i in idx])
        m = np.stack([laws[i].masses for i in idx])
        uniform = all(len(set(laws[i].weights)) == 1 for i in idx)
        rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in idx])
        out.append(_Group(X, np.sqrt(m / H), None if uniform else m, rows))
    return out


def _atom_count(laws: Sequence[Empirical]) -> int:
    """``M``: the rows of the Gram, one per distinct atom of each sample."""
    return int(sum(law.n_atoms for law in laws))


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


def _attend(X: np.ndarray, Xa: np.ndarray, Qa: np.ndarray, bound: np.ndarray, scale: np.ndarray,
            masses: np.ndarray | None, out: np.ndarray, chunk: int, bar: Any) -> None:
    r"""Write the scaled features of the laws with atoms ``X`` (g_all, N, d) for ``C`` heads into ``out``.

    ``Xa`` is ``X`` with a column of ones appended (g_all, N, d + 1), ``Qa`` (d + 1, C d) holds
    :math:`Q_h^T` side by side over a last row of biases (so one product gives
    :math:`Q_h x + b_h`), ``bound`` (C,) bounds the scores' :math:`|\langle Q_h x + b_h, y\rangle|`,
    ``scale`` (g_all, N) the row weights :math:`\sqrt{m_{ia}/H}`, ``masses`` (g_all, N) the
    atom masses entering the softmax (None: equal within each law, they cancel), and
    ``out`` is a C-contiguous (g_all N, C d) array, written once.

    Per tile of ``g`` laws and ``c`` heads, all in a workspace of at most ``chunk``
    floats (cache-resident): one product per law each for the queries, the scores and
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
    # A law's query product beyond the one-thread bound (large d) runs threaded anyway: then
    # one 2-D product per tile beats numpy's stacked matmul, one small gemm per law (~2-3x at
    # d = 384, N = 32); below the bound the stacked single-thread products are faster.
    wide = N * (d + 1) * d > _SERIAL_GEMM
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
            if wide:
                A = np.matmul(Xa[t0:t1].reshape(gt * N, d + 1), Qj, out=wa[:gt * N * cj * d].reshape(gt * N, cj * d))
            else:
                A = np.matmul(Xa[t0:t1], Qj, out=wa[:gt * N * cj * d].reshape(gt, N, cj * d))
            A = A.reshape(gt, N * cj, d)  # rows (j, h): the query Q_h x_j + b_h
            S = np.matmul(Xt, A.transpose(0, 2, 1), out=ws[:gt * N * N * cj].reshape(gt, N, N * cj))
            if shift:
                S -= S.max(axis=1, keepdims=True)
            np.exp(S, out=S)  # S[t, k, (j, h)] = exp <Q_h x_tj + b_h, x_tk> (shifted)
            if masses is not None:
                S *= masses[t0:t1, :, None]  # pi_k proportional to m_k exp(score_k)
            s = np.sum(S, axis=1, keepdims=True, out=wn[:gt * N * cj].reshape(gt, 1, N * cj))
            # row weight sqrt(m_j / H) of the column (j, h), over the softmax normaliser
            np.divide(np.repeat(scale[t0:t1], cj, axis=1).reshape(gt, 1, N * cj), s, out=s)
            S *= s
            if cj == C:
                np.matmul(S.transpose(0, 2, 1), Xt, out=out4[t0:t1].reshape(gt, N * C, d))
            else:
                P = np.matmul(S.transpose(0, 2, 1), Xt, out=A)  # the queries are no longer needed
                out4[t0:t1, :, j0:j1] = P.reshape(gt, N, cj, d)
            bar.update(gt * N * cj)


def _feature_columns(groups: list[_Group], heads: Heads, h0: int, h1: int,
                     out: np.ndarray, chunk: int, bar: Any) -> None:
    """Columns ``h0 d : h1 d`` of ``F`` into the C-contiguous (M, (h1 - h0) d) array ``out``."""
    d = heads.dim
    C = h1 - h0
    Qa = np.empty((d + 1, C * d))
    Qa[:d] = heads.Q[h0:h1].reshape(C * d, d).T
    Qa[d] = heads.b[h0:h1].reshape(C * d)
    qnorm = np.linalg.norm(heads.Q[h0:h1].reshape(C, -1), axis=1)  # Frobenius >= operator norm
    bnorm = np.linalg.norm(heads.b[h0:h1], axis=1)
    for grp in groups:
        X, rows = grp.X, grp.rows
        g_all, N, _ = X.shape
        Xa = np.concatenate([X, np.ones((g_all, N, 1))], axis=2)
        R = float(np.sqrt(np.max(np.einsum("gnd,gnd->gn", X, X))))
        bound = (qnorm * R + bnorm) * R  # |<Q x + b, y>| <= (|Q|_F |x| + |b|) |y|
        r0 = int(rows[0])
        if rows[-1] - r0 + 1 == rows.size:  # contiguous rows: write in place
            _attend(X, Xa, Qa, bound, grp.scale, grp.masses, out[r0:r0 + rows.size], chunk, bar)
            continue
        # Interleaved atom counts: go through a buffer of at most ~chunk entries, then scatter.
        gb = max(1, min(g_all, chunk // (N * C * d)))
        buf = np.empty((gb * N, C * d))
        for t0 in range(0, g_all, gb):
            t1 = min(g_all, t0 + gb)
            part = buf[:(t1 - t0) * N]
            ms = None if grp.masses is None else grp.masses[t0:t1]
            _attend(X[t0:t1], Xa[t0:t1], Qa, bound, grp.scale[t0:t1], ms, part, chunk, bar)
            out[rows[t0 * N:t1 * N]] = part


def _progress(total: int, progress: bool) -> Any:
    # Unit: one atom and one head (N exponentials); disabled for short runs and off a terminal.
    return tqdm(total=total, desc="attention features", unit="atom-head", unit_scale=True,
                disable=True if (not progress or total < (1 << 22)) else None)


def attention_features(
    samples: Any, heads: Heads, *, chunk: int = DEFAULT_CHUNK, progress: bool = False
) -> np.ndarray:
    r"""The NTK feature matrix ``F`` with :math:`F F^T = W^{1/2} K W^{1/2}`, on distinct atoms.

    .. math::

        F_{(i,a),\,h d : (h+1) d} = \sqrt{m_{ia}/H}\;\nabla\Lambda_i(Q_h x_{ia} + b_h),
        \qquad \nabla\Lambda_i(y) = \frac{\sum_{a'} m_{ia'} e^{\langle y, x_{ia'}\rangle} x_{ia'}}
                                       {\sum_{a'} m_{ia'} e^{\langle y, x_{ia'}\rangle}},

    one row per distinct atom :math:`x_{ia}` of each law, with its mass :math:`m_{ia}`
    (``1/N_i`` per token, summed over repeats). Computed in cache-resident tiles of ``g``
    laws (of equal atom count ``N``) and ``c`` heads: per law one product each for the
    queries :math:`Q_h x_{ia} + b_h` of all ``c`` heads (``(N, d+1) x (d+1, c d)``, the bias
    as a last row), the scores (``(N, d) x (d, N c)``) and the softmax means
    (``(N c, N) x (N, d)``), written straight into ``F``; the exponentials, the masses and
    the normalisation run in place on the tile. The per-law products are kept small
    enough that OpenBLAS runs them on one thread (tiny threaded products were measured
    10-100x slower when the other core is busy). Exponentials dominate the cost at small
    ``d`` (``M H N`` of them), the products at large ``d``. The scores are max-shifted
    whenever the a-priori bound
    :math:`|\langle Q_h x + b_h, y\rangle| \le (\|Q_h\|_F R + \|b_h\|) R`
    (``R`` the largest token norm) exceeds 200, so no exponential overflows or underflows
    to 0 for the largest term; below that bound the shift, an exact identity, is skipped.

    Parameters
    ----------
    samples : list of Empirical, list of (N_i, d) float arrays, or (n, N, d) array
        The samples' laws (arrays are turned into laws once,
        :func:`~ntkcheck.families.as_laws`); rows of ``F`` are the atoms ``(i, a)``, laws
        in order, each law's atoms in its order (first appearance).
    heads : Heads
        ``H`` heads of dimension ``d``.
    chunk : int
        Workspace bound in float64 entries per tile. Memory: ``F`` itself
        (``8 M H d`` bytes) plus at most ``8 * max(chunk, N_max (N_max + d + 2))`` bytes of
        tile workspace (queries, scores, denominators), plus, only when laws of different
        atom counts are interleaved, a scatter buffer of at most ``8 * max(chunk, N_max H d)``
        bytes, plus the atoms stacked once per count with a column of ones
        (``8 M (2 d + 1)`` bytes) and the stacked heads (``8 (d + 1) H d`` bytes). The
        default, ``2^17`` entries (1 MiB), keeps a tile in the L2 cache.
    progress : bool
        Progress bar over atom-heads (long runs only, and only on a terminal).

    Returns
    -------
    (M, H d) float array
        ``M`` = total number of distinct atoms (summed over samples).

    References
    ----------
    Seed 003 (A Mean-Field Theory of Transformers) section 3.1, Prop. 5;
    ``theory/ntk-prop8.md``.

    Examples
    --------
    >>> import numpy as np
    >>> F = attention_features([np.array([[0.0], [1.0], [1.0]])], init_heads(3, 1))
    >>> F.shape                          # two distinct atoms, masses 1/3 and 2/3
    (2, 3)
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    return _features(laws, heads, _as_chunk(chunk), progress)


def _features(laws: Sequence[Empirical], heads: Heads, chunk: int = DEFAULT_CHUNK, progress: bool = False) -> np.ndarray:
    """:func:`attention_features` on validated laws and heads."""
    check_score_range([law.atoms for law in laws], heads.Q, heads.b)
    M = _atom_count(laws)
    H = heads.count
    F = np.empty((M, H * heads.dim))
    with _progress(M * H, progress) as bar:
        _feature_columns(_groups(laws, H), heads, 0, H, F, chunk, bar)
    return F


def _as_chunk(chunk: Any) -> int:
    if not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise InputError(f"chunk: expected a positive integer, got {chunk!r}")
    return int(chunk)


def _gram_accumulated(laws: Sequence[Empirical], heads: Heads, chunk: int, progress: bool) -> np.ndarray:
    """``F F^T`` summed over head blocks without storing ``F``.

    Memory: ``8 M^2`` bytes for the Gram plus one column block of ``F`` of at most
    ``8 max(2^25, 256 M)`` bytes (at least 256 columns, so the rank-k update runs at
    matmul speed) plus the tile workspace of :func:`attention_features`. The update is
    BLAS ``syrk``, in place (no ``M x M`` temporary), and fills only the **lower
    triangle** of the Fortran-ordered result: every consumer (``eigvalsh``,
    :func:`_extremal_eigh`) reads only that triangle.
    """
    check_score_range([law.atoms for law in laws], heads.Q, heads.b)
    M = _atom_count(laws)
    H, d = heads.count, heads.dim
    c = int(min(H, max(-(-256 // d), _GRAM_BLOCK // (M * d), 1)))
    groups = _groups(laws, H)
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
    r"""The Gram :math:`W^{1/2} K W^{1/2}` on distinct atoms as an Arb ball matrix at ``prec`` bits.

    Atoms, masses and heads are converted exactly (every double is a dyadic rational, the
    masses are exact rationals); the softmax weights
    :math:`\pi_{a'} \propto m_{ia'} e^{\langle Q x_{ia} + b, x_{ia'}\rangle}` are evaluated in
    ball arithmetic with a shift by the float64 row maximum (any shift is exact algebra;
    this one keeps the exponentials bounded). Entry
    :math:`G_{(ia),(i'a')} = \sqrt{m_{ia} m_{i'a'}}\, H^{-1} \sum_h \langle\phi_{ia}^h, \phi_{i'a'}^h\rangle`.
    """
    laws = as_laws(samples)
    return _gram_arb(laws, _as_heads(heads, laws[0].dim), prec)


def _arb_q(q: Any) -> arb:
    """The exact rational ``q`` (Fraction) as a ball at the current precision."""
    return arb(fmpq(q.numerator, q.denominator))


def _gram_arb(laws: Sequence[Empirical], heads: Heads, prec: int) -> arb_mat:
    H, d = heads.count, heads.dim
    old = ctx.prec
    ctx.prec = int(prec)
    try:
        rows: list[list[arb]] = []  # rows of F (without the weight), concatenated over heads
        sw: list[arb] = []
        Qa = [arb_mat([[arb(float(v)) for v in row] for row in heads.Q[h]]) for h in range(H)]
        ba = [[arb(float(v)) for v in heads.b[h]] for h in range(H)]
        for law in laws:
            X = law.atoms
            XA = arb_mat([[arb(float(v)) for v in row] for row in X])
            mass = [_arb_q(q) for q in law.weights]
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
                    e = [mass[k] * (Sc[j, k] - m).exp() for k in range(N)]
                    tot = sum(e, arb(0))
                    for k in range(N):
                        P[j, k] = e[k] / tot
                Phi = P * XA  # (N, d): softmax-weighted means
                for j in range(N):
                    feats[j].extend(Phi[j, k] for k in range(d))
            rows.extend(feats)
            sw.extend([(mass[j] / H).sqrt() for j in range(N)])
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

    The Gram is assembled on distinct atoms (:func:`gram_matrix_arb`). Doubles the
    precision from ``start_bits`` up to ``max_bits`` until ``arb_mat.inv`` certifies that
    the ball Gram is invertible; then :math:`\lambda_{\min} \ge 1/\|G^{-1}\|_F` (valid
    because the exact Gram is :math:`F F^T \succeq 0`). A singular Gram is never
    certified: its ball always contains singular matrices.
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    return _certify(laws, heads, max_bits=max_bits, start_bits=start_bits)


def _certify(laws: Sequence[Empirical], heads: Heads, *, max_bits: int = 2048, start_bits: int = 128) -> GramCertificate:
    M = _atom_count(laws)
    if M > MAX_CERTIFY_TOKENS:
        raise PrecisionError(
            f"certify: {M} distinct atoms; the Arb certification is limited to {MAX_CERTIFY_TOKENS} "
            "(it evaluates every softmax weight in ball arithmetic)"
        )
    if max_bits < 53:
        raise PrecisionError(f"certify: max_bits={max_bits} is below double precision (53)")
    bits = min(start_bits, max_bits)
    last = ""
    while True:
        G = _gram_arb(laws, heads, bits)
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
class SampleSize:
    """How one sample entered the Gram: ``tokens`` given, ``atoms`` distinct, and the
    ``max_multiplicity`` (largest number of tokens merged into one atom)."""

    tokens: int
    atoms: int
    max_multiplicity: int

    @classmethod
    def of(cls, law: Empirical) -> SampleSize:
        return cls(int(law.n_tokens), law.n_atoms, law.max_multiplicity)

    def to_dict(self) -> dict[str, int]:
        return {"tokens": self.tokens, "atoms": self.atoms, "max_multiplicity": self.max_multiplicity}


def merge_note(sizes: Sequence[SampleSize]) -> str | None:
    """One sentence naming the samples whose repeated tokens were merged, or None."""
    merged = [i for i, s in enumerate(sizes) if s.atoms < s.tokens]
    if not merged:
        return None
    shown = ", ".join(f"{i} ({sizes[i].tokens} tokens on {sizes[i].atoms} atoms, largest multiplicity "
                      f"{sizes[i].max_multiplicity})" for i in merged[:4])
    more = f" and {len(merged) - 4} more" if len(merged) > 4 else ""
    return (f"repeated tokens merged into atoms with their masses (the NTK acts on L^2(mu_i), where copies of a "
            f"token are one point): sample{'s' if len(merged) > 1 else ''} {shown}{more}")


@dataclass(frozen=True)
class GramResult:
    r"""Spectrum summary of the NTK Gram :math:`W^{1/2} K W^{1/2} = F F^T` on distinct atoms.

    Attributes
    ----------
    lambda_min, lambda_max : float
        Extreme eigenvalues (float64; ``lambda_min`` is clipped at 0, rounding can make it
        slightly negative).
    condition : float
        ``lambda_max / lambda_min`` (``inf`` when ``lambda_min == 0``).
    atoms : int
        ``M``, the size of the Gram: distinct atoms summed over the samples.
    tokens : int
        Tokens given (``>= atoms``; repeats inside a sample are merged).
    heads, dim : int
        ``H``, ``d``.
    eigenvalues : tuple of float or None
        All ``M`` eigenvalues, ascending, when ``M <= 4096``.
    rank_deficient_by_size : bool
        ``H d < M``: singular by rank, says nothing about the data.
    method : str
        ``"eigvalsh"``, ``"cholesky-lanczos"`` or ``"svd"``: the route that gave the numbers.
    resolution : float
        Relative eigenvalue below which that route cannot tell an eigenvalue from 0 (the
        rounding floor).
    status : str
        ``"positive"`` (relative ``lambda_min`` above ``1e-12``, or certified),
        ``"singular by size"``, ``"below resolution"`` (singular to working precision),
        ``"small"`` (between the resolution and ``1e-12``: not claimed positive).
    certified : GramCertificate or None
    samples : tuple of SampleSize
        Per sample: tokens, distinct atoms, largest multiplicity.
    """

    lambda_min: float
    lambda_max: float
    condition: float
    atoms: int
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
    samples: tuple[SampleSize, ...] = field(default=())

    @property
    def relative_lambda_min(self) -> float:
        return self.lambda_min / self.lambda_max if self.lambda_max > 0 else 0.0

    @property
    def positive(self) -> bool:
        """True only when positivity is established (float64 above 1e-12 relative, or certified)."""
        return self.status == "positive"

    @property
    def certified_positive(self) -> bool:
        """True when a rigorous lower bound (Arb) proves ``lambda_min > 0``."""
        return self.certified is not None and self.certified.positive

    def status_text(self) -> str:
        """The status in words, saying whether positivity is certified or only seen in float64."""
        if self.certified_positive:
            assert self.certified is not None
            return (f"positive, certified: lambda_min >= {self.certified.lower_bound:.4g} "
                    f"(Arb, {self.certified.bits} bits)")
        if self.status == "positive":
            return (f"positive in float64 (relative lambda_min {self.relative_lambda_min:.3g} > {POSITIVE_REL:g}); "
                    "not certified")
        return self.status

    @property
    def floor(self) -> float:
        """The rounding floor ``resolution * lambda_max``: eigenvalues at or below it are zero
        to working precision."""
        return self.resolution * self.lambda_max

    @property
    def kernel_observed(self) -> int | None:
        """Number of eigenvalues at the rounding floor (the observed kernel dimension); None
        when the spectrum was not kept (``M > 4096``) and ``lambda_min`` is at the floor."""
        if self.eigenvalues is None:
            return 0 if self.lambda_min > self.floor else None
        return int(sum(1 for v in self.eigenvalues if v <= self.floor))

    @property
    def next_relative_eigenvalue(self) -> float | None:
        """The smallest eigenvalue above the floor, relative to ``lambda_max`` (the gap that
        separates the observed kernel from the rest), or None."""
        if self.lambda_max <= 0:
            return None
        if self.eigenvalues is None:
            return self.relative_lambda_min if self.lambda_min > self.floor else None
        above = [v for v in self.eigenvalues if v > self.floor]
        return min(above) / self.lambda_max if above else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "lambda_min": self.lambda_min,
            "lambda_max": self.lambda_max,
            "relative_lambda_min": self.relative_lambda_min,
            "condition": self.condition if math.isfinite(self.condition) else "inf",
            "atoms": self.atoms,
            "tokens": self.tokens,
            "heads": self.heads,
            "dim": self.dim,
            "rank_deficient_by_size": self.rank_deficient_by_size,
            "method": self.method,
            "resolution": self.resolution,
            "status": self.status,
            "certified": None if self.certified is None else self.certified.to_dict(),
            "status_text": self.status_text(),
            "kernel_observed": self.kernel_observed,
            "floor": self.floor,
            "next_relative_eigenvalue": self.next_relative_eigenvalue,
            "samples": [s.to_dict() for s in self.samples],
            "eigenvalues": None if self.eigenvalues is None else list(self.eigenvalues),
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        s = (f"GramResult({self.status}: lambda_min={self.lambda_min:.4g}, lambda_max={self.lambda_max:.4g}, "
             f"relative={self.relative_lambda_min:.3g}, M={self.atoms} atoms ({self.tokens} tokens), H={self.heads}, "
             f"d={self.dim}, {self.method}")
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
    r"""Spectrum of the attention NTK Gram at FixUp on the samples' distinct atoms.

    .. math::

        W^{1/2} K W^{1/2} = F F^T, \qquad
        K_{(ia),(i'a')} = \frac1H \sum_h \langle \phi_i(x_{ia}; Q_h, b_h), \phi_{i'}(x_{i'a'}; Q_h, b_h)\rangle,
        \quad W = \mathrm{diag}(m_{ia}),

    the matrix of the NTK quadratic form on :math:`\bigoplus_i L^2(\mu_i)` (one row per
    distinct atom :math:`x_{ia}` with its mass :math:`m_{ia}`; :func:`attention_features`).

    Parameters
    ----------
    samples : list of Empirical, list of (N_i, d) float arrays, or (n, N, d) array
        Arrays are turned into laws once (:func:`~ntkcheck.families.as_laws`): repeated
        tokens of a sample become one atom with their summed mass.
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
        fallback's ``8 M H d`` if it is needed and fits in 4 GiB). ``M`` counts distinct
        atoms.

    Returns
    -------
    GramResult

    Warns
    -----
    NtkcheckWarning
        When ``H d < M``: the Gram is singular by rank, which is not a verdict about the data.

    References
    ----------
    Seed 003 (A Mean-Field Theory of Transformers) section 3.1-3.2, Prop. 5;
    ``theory/ntk-prop8.md``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.standard_normal((3, 2)) for _ in range(3)]
    >>> X[0][2] = X[0][0]                     # a repeated token: one atom of mass 2/3
    >>> r = gram(X, init_heads(18, 2, seed=0))
    >>> r.status, r.atoms, r.tokens
    ('positive', 8, 9)
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    if method not in ("auto", "svd", "eigh"):
        raise InputError(f"method: expected 'auto', 'svd' or 'eigh', got {method!r}")
    chunk = _as_chunk(chunk)
    sizes = tuple(SampleSize.of(law) for law in laws)
    M = _atom_count(laws)
    H, d = heads.count, heads.dim
    by_size = H * d < M
    notes: list[str] = []
    if (merged := merge_note(sizes)) is not None:
        notes.append(merged)
    if by_size:
        warnings.warn(
            f"H d = {H}*{d} = {H * d} < M = {M} distinct atoms: the Gram has rank at most {H * d} and is "
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
            F = _features(laws, heads, chunk, progress)
        s = sla.svdvals(F, check_finite=False)
        ev = np.zeros(M)
        ev[M - s.shape[0]:] = np.sort(s) ** 2  # min(M, Hd) singular values; the rest are exact zeros
        return ev

    if method == "svd":
        eig = run_svd()
        used, resolution = "svd", RESOLUTION_SVD
    else:
        if want_all:
            F = _features(laws, heads, chunk, progress)
            G = _gram_lower(F)
        else:
            G = _gram_accumulated(laws, heads, chunk, progress)
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
            cert = _certify(laws, heads, max_bits=max_bits)
            if cert.positive:
                status = "positive"
                notes.append("positivity certified in Arb ball arithmetic")
            else:
                notes.append("certification inconclusive: positivity is not claimed")
        else:
            notes.append(f"certification skipped: M = {M} distinct atoms > {MAX_CERTIFY_TOKENS}")
    eigenvalues = tuple(float(max(v, 0.0)) for v in eig) if (eig is not None and want_all) else None
    return GramResult(
        lambda_min=lmin,
        lambda_max=float(lmax),
        condition=(lmax / lmin) if lmin > 0 else math.inf,
        atoms=M,
        tokens=int(sum(s.tokens for s in sizes)),
        heads=H,
        dim=d,
        eigenvalues=eigenvalues,
        rank_deficient_by_size=by_size,
        method=used,
        resolution=resolution,
        status=status,
        certified=cert,
        notes=tuple(notes),
        samples=sizes,
    )
