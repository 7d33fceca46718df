r"""Attention heads at FixUp and the NTK feature matrix on distinct atoms.

At FixUp (:math:`V = 0` on every head) only the :math:`V`-derivatives of the attention
survive. A sample is its empirical law :math:`\mu_i = \sum_a m_{ia}\,\delta_{x_{ia}}` over
its distinct atoms (:class:`~ntkcheck.cgf.empirical.Empirical`), and with the feature

.. math::

    \phi_i(x; Q, b) = \nabla\Lambda_i(Qx + b)
        = \sum_a \pi_a\, x_{ia}, \qquad
    \pi_a \propto m_{ia}\exp\langle Qx + b, x_{ia}\rangle

(the softmax-weighted mean of sample :math:`i`'s atoms, scores max-shifted) and :math:`H`
heads :math:`(Q_h, b_h)`, the feature matrix is

.. math::

    F_{(i,a),\,(h,:)} = \sqrt{m_{ia}/H}\; \phi_i(x_{ia}; Q_h, b_h),

of shape ``(M, H d)``, with :math:`F F^T = W^{1/2} K W^{1/2}` the NTK Gram
(:mod:`ntkcheck.ntk.gram_matrix.pipeline`). Here: the heads (:class:`Heads`, :func:`init_heads`) and
the tiled, cache-resident feature builder (:func:`attention_features`).

References: seed 003 section 3.1, Prop. 5; ``theory/ntk-prop8.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ..._progress import progress_bar
from ..._validate import check_score_range, exact_rows, real_values, to_fraction
from ...cgf.empirical import Empirical, as_laws
from ...errors import InputError
from . import _sizes

__all__ = ["Heads", "init_heads", "attention_features"]

#: default workspace of one feature tile, in float64 entries (1 MiB: stays in the L2 cache).
DEFAULT_CHUNK = 1 << 17
#: scores bounded by this in absolute value are exponentiated without the max-shift:
#: exp stays within [1e-87, 1e87], far from overflow and from subnormals.
_EXP_SAFE = 200.0
#: per-sample products are kept at m n k <= 2^18 multiply-adds, where OpenBLAS stays on one
#: thread: tiny threaded products were measured 10-100x slower when the other core is busy.
_SERIAL_GEMM = 1 << 18


# ------------------------------------------------------------------------------- heads


@dataclass(frozen=True, eq=False)
class Heads:
    r"""Attention heads :math:`(Q_h, b_h)_{h < H}` with :math:`V_h = 0` (FixUp).

    Parameters
    ----------
    Q : (H, d, d) array of real numbers
        Query matrices (the key matrix is the identity, seed 003 Remark 1): floats,
        integers, ``Fraction`` or ``np.longdouble``, each read at its exact value.
    b : (H, d) array of real numbers
        Query biases, likewise.

    ``Q`` and ``b`` hold the nearest doubles (the float64 view the features are computed
    from); when a value given is not a double, :attr:`rounded` is True and
    :meth:`rational_Q` / :meth:`rational_b` return the values given (the Arb certificate and
    the exact checks use them; theory/certificates.md). Complex, boolean and string arrays
    are refused.
    """

    Q: np.ndarray
    b: np.ndarray
    _exact: tuple[np.ndarray, np.ndarray] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        Q, Qx = real_values(self.Q, "heads: Q", "query entries")
        b, bx = real_values(self.b, "heads: b", "bias entries")
        if Q.ndim != 3 or Q.shape[1] != Q.shape[2]:
            raise InputError(f"heads: Q must have shape (H, d, d), got {Q.shape}")
        if Q.shape[0] == 0:
            raise InputError("heads: zero heads were given (Q has shape (0, d, d)); need H >= 1")
        if b.shape != Q.shape[:2]:
            raise InputError(f"heads: b must have shape (H, d) = {Q.shape[:2]}, got {b.shape}")
        if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(b))):
            raise InputError("heads: Q or b has a non-finite entry")
        Q = np.array(Q, dtype=np.float64)  # own, contiguous copies
        b = np.array(b, dtype=np.float64)
        Q.setflags(write=False)
        b.setflags(write=False)
        object.__setattr__(self, "Q", Q)
        object.__setattr__(self, "b", b)
        if Qx is not None or bx is not None:
            exact = (Q if Qx is None else Qx, b if bx is None else bx)
            for a in exact:
                a.setflags(write=False)
            object.__setattr__(self, "_exact", exact)

    @property
    def rounded(self) -> bool:
        """True when the float64 ``Q``, ``b`` are not the values given (some entry is not a double)."""
        return self._exact is not None

    def rational_Q(self, h: int) -> list[list[Fraction]]:
        """``Q_h`` at its exact value, as rows of ``Fraction``."""
        src = self.Q if self._exact is None else self._exact[0]
        return [list(r) for r in exact_rows(src[h])]

    def rational_b(self, h: int) -> list[Fraction]:
        """``b_h`` at its exact value, as ``Fraction``."""
        src = self.b if self._exact is None else self._exact[1]
        return list(exact_rows(src[h][None, :])[0])

    @property
    def count(self) -> int:
        """Number of heads ``H``."""
        return int(self.Q.shape[0])

    @property
    def dim(self) -> int:
        """Token dimension ``d``."""
        return int(self.Q.shape[1])

    def scaled(self, s: float) -> Heads:
        """The heads with ``Q`` and ``b`` multiplied by ``s`` (sharper attention for ``s > 1``).

        The products are computed in float64 and the new heads are those doubles, unless these
        heads hold values that are not doubles: then the products are exact.
        """
        if self._exact is None:
            return Heads(self.Q * s, self.b * s)
        f = to_fraction(s)
        Qx, bx = (np.asarray([to_fraction(v) * f for v in a.reshape(-1)], dtype=object).reshape(a.shape)
                  for a in self._exact)
        return Heads(Qx, bx)

    def __repr__(self) -> str:
        r = ", rounded from the values given" if self.rounded else ""
        return (f"Heads(H={self.count}, d={self.dim}, |Q|_max={np.abs(self.Q).max():.3g}, "
                f"|b|_max={np.abs(self.b).max():.3g}{r})")


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
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"heads: seed must be an integer >= 0, got {seed!r}")
    _sizes.require_heads(int(H), int(d))
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
    return _stack([law.atoms for law in laws], [law.masses for law in laws],
                  [len(set(law.weights)) == 1 for law in laws], H)


def _stack(atoms: Sequence[np.ndarray], masses: Sequence[np.ndarray], equal: Sequence[bool], H: int) -> list[_Group]:
    r"""The laws with atoms ``atoms[i]`` and masses ``masses[i]`` (``equal[i]``: all equal) grouped by
    atom count, each group stacked once with its row weights :math:`\sqrt{m_{ia}/H}`."""
    sizes = np.array([x.shape[0] for x in atoms])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    by_len: dict[int, list[int]] = {}
    for i, n in enumerate(sizes.tolist()):
        by_len.setdefault(n, []).append(i)
    out = []
    for idx in by_len.values():
        X = np.stack([atoms[i] for i in idx])
        m = np.stack([masses[i] for i in idx])
        uniform = all(equal[i] for i in idx)
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


#: entries of one column block of F in a Gram accumulated over head blocks (256 MiB).
_GRAM_BLOCK = 1 << 25


def _head_block(M: int, H: int, d: int) -> int:
    """Heads per column block of ``F`` when ``F F^T`` is accumulated block by block: at least 256
    columns (the rank-k update runs at matmul speed), at most ``max(2^25, 256 M)`` entries."""
    return int(min(H, max(-(-256 // d), _GRAM_BLOCK // (M * d), 1)))


def _progress(total: int, progress: bool) -> Any:
    # Unit: one atom and one head (N exponentials); shown when asked, after the first second.
    return progress_bar(total, desc="attention features", unit="atom-head", enabled=bool(progress))


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
        :func:`~ntkcheck.cgf.empirical.as_laws`); rows of ``F`` are the atoms ``(i, a)``, laws
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
    Seed 003 (Training Infinitely Deep and Wide Transformers) section 3.1, Prop. 5;
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
    """:func:`attention_features` on validated laws and heads (the score range is checked here)."""
    check_score_range([law.atoms for law in laws], heads.Q, heads.b)
    return _feature_matrix(_groups(laws, heads.count), heads, _atom_count(laws), chunk, progress)


def _feature_matrix(groups: Sequence[_Group], heads: Heads, M: int, chunk: int, progress: bool) -> np.ndarray:
    """``F`` of the stacked laws ``groups`` (:func:`_stack`), ``M`` rows, whose range is checked."""
    H = heads.count
    F = np.empty((M, H * heads.dim))
    with _progress(M * H, progress) as bar:
        _feature_columns(groups, heads, 0, H, F, chunk, bar)
    return F


def _as_chunk(chunk: Any) -> int:
    if not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise InputError(f"chunk: expected a positive integer, got {chunk!r}")
    return int(chunk)
