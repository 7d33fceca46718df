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

from ._validate import as_samples
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
#: default number of float64 entries in the score block of one chunk (32 MiB).
DEFAULT_CHUNK = 1 << 22
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


def _slots(samples: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Row offsets of each sample in ``F`` and the slot weights ``1/N_i``."""
    sizes = np.array([s.shape[0] for s in samples])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    w = np.repeat(1.0 / sizes, sizes)
    return offsets, w


def _feature_blocks(samples: list[np.ndarray], heads: Heads, chunk: int, progress: bool):
    """Yield ``(h0, h1, block)`` with ``block`` the columns ``h0*d:h1*d`` of ``F`` (shape (M, (h1-h0) d)).

    Samples of equal length are batched; per block the workspace is a few arrays of
    ``g * c * N^2`` floats with ``g * c * N^2 <= chunk`` (``g`` samples, ``c`` heads).
    """
    H, d = heads.count, heads.dim
    offsets, w = _slots(samples)
    M = int(offsets[-1])
    scale = np.sqrt(w / H)
    by_len: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        by_len.setdefault(s.shape[0], []).append(i)
    # Heads per column block: bound the score workspace of the largest sample group.
    nmax = max(by_len)
    per_head = max(nmax * nmax, 1)
    c = int(max(1, min(H, chunk // per_head)))
    QT = np.ascontiguousarray(np.transpose(heads.Q, (0, 2, 1)))
    starts = range(0, H, c)
    bar = tqdm(starts, desc="attention features", unit="chunk", disable=not progress or len(starts) < 2)
    for h0 in bar:
        h1 = min(H, h0 + c)
        block = np.empty((M, (h1 - h0) * d))
        q = QT[h0:h1]  # (c, d, d)
        bb = heads.b[h0:h1][:, None, :]  # (c, 1, d)
        for N, idx in by_len.items():
            g_max = max(1, chunk // max((h1 - h0) * N * N, 1))
            for k0 in range(0, len(idx), g_max):
                sub = idx[k0:k0 + g_max]
                X = np.stack([samples[i] for i in sub])[:, None]  # (g, 1, N, d)
                A = X @ q + bb  # queries Q x + b: (g, c, N, d)
                S = A @ np.swapaxes(X, -1, -2)  # scores <Qx+b, y>: (g, c, N, N)
                S -= S.max(axis=-1, keepdims=True)  # max-shift: exp never overflows
                np.exp(S, out=S)
                S /= S.sum(axis=-1, keepdims=True)
                phi = S @ X  # (g, c, N, d)
                for t, i in enumerate(sub):
                    r0, r1 = offsets[i], offsets[i + 1]
                    block[r0:r1] = np.transpose(phi[t], (1, 0, 2)).reshape(N, -1)
        block *= scale[:, None]
        yield h0, h1, block


def attention_features(
    samples: Any, heads: Heads, *, chunk: int = DEFAULT_CHUNK, progress: bool = False
) -> np.ndarray:
    r"""The NTK feature matrix ``F`` with :math:`F F^T = W^{1/2} K W^{1/2}`.

    .. math::

        F_{(i,j),\,h d : (h+1) d} = \sqrt{w_{ij}/H}\;\nabla\Lambda_i(Q_h x_{ij} + b_h),
        \qquad w_{ij} = 1/N_i .

    Parameters
    ----------
    samples : list of (N_i, d) float arrays, or (n, N, d) array
        Token sets; rows of ``F`` are the slots ``(i, j)`` in sample order.
    heads : Heads
        ``H`` heads of dimension ``d``.
    chunk : int
        Maximum number of score entries held at once. Memory: ``F`` itself
        (``8 M H d`` bytes) plus a workspace of at most ``~ 4 * 8 * max(chunk, N_max^2)`` bytes
        (128 MiB at the default), independent of ``H``.
    progress : bool
        Progress bar over head chunks (only when there is more than one).

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
    if not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise InputError(f"chunk: expected a positive integer, got {chunk!r}")
    M = sum(s.shape[0] for s in S)
    F = np.empty((M, heads.count * heads.dim))
    d = heads.dim
    for h0, h1, block in _feature_blocks(S, heads, int(chunk), progress):
        F[:, h0 * d:h1 * d] = block
    return F


def _gram_accumulated(S: list[np.ndarray], heads: Heads, chunk: int, progress: bool) -> np.ndarray:
    """``F F^T`` summed over head chunks without storing ``F`` (memory ``8 M^2`` bytes + workspace)."""
    M = sum(s.shape[0] for s in S)
    G = np.zeros((M, M))
    for _, _, block in _feature_blocks(S, heads, chunk, progress):
        G += block @ block.T
    return G


# ---------------------------------------------------------------------------- spectrum


def _extremal_eigh(G: np.ndarray) -> tuple[float, float] | None:
    """(lambda_min, lambda_max) by Cholesky + Lanczos on ``G^{-1}``; None when G is not
    numerically positive definite (then the caller uses the full eigvalsh)."""
    try:
        c = sla.cho_factor(G, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    n = G.shape[0]
    op = LinearOperator((n, n), matvec=lambda v: sla.cho_solve(c, v, check_finite=False), dtype=np.float64)
    try:
        mu = eigsh(op, k=1, which="LA", tol=1e-12, return_eigenvectors=False)[0]
        lmax = eigsh(G, k=1, which="LA", tol=1e-12, return_eigenvectors=False)[0]
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
        Workspace bound of :func:`attention_features`. Peak memory of ``"auto"``:
        ``8 M (H d + M)`` bytes for ``M <= 4096``, ``8 M^2`` bytes above (plus the SVD
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
            G = F @ F.T
        else:
            G = _gram_accumulated(S, heads, chunk, progress)
        ext = None if (want_all or by_size) else _extremal_eigh(G)
        if ext is not None:
            lmin, lmax = ext
            used, resolution = "cholesky-lanczos", RESOLUTION_EIGH
        else:
            eig = np.linalg.eigvalsh(G)
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
