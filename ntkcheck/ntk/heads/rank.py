r"""The rank of the NTK Gram of ``H`` heads: the span of the atoms, saturated heads, the heads needed.

Each head's feature of an atom of sample :math:`i` is a convex combination of sample
:math:`i`'s atoms, :math:`\phi_i(x; Q, b) = \sum_a \pi_a x_{ia}`. With ``r`` the dimension of
the linear span of all atoms and ``A`` the dimension of the sum over the samples of the
direction spaces :math:`V_i = \mathrm{span}\{x_{ia} - x_{i0}\}` of their affine hulls, the
feature matrix ``F`` (``M x H d``) of any ``H`` heads has

.. math::

    \operatorname{rank} F \le \min\big(M - k,\; r + (H - 1) A\big),

``k`` the dimension of the kernel predicted by the dependence structure
(:mod:`ntkcheck.ntk.prop8.structure`): a head adds at most ``A`` new dimensions to the span of the
Gram's columns, because the component of :math:`\sum_{ia} q_{ia}\sqrt{m_{ia}}\phi^h_{ia}`
outside :math:`\sum_i V_i` is :math:`\sum_i (\sum_a q_{ia}\sqrt{m_{ia}})\, x_{i0}` whatever the
head (``theory/ntk-head-law.md``, "The rank of the Gram of H heads"). Its kernel therefore has
dimension at least :math:`\max(k, M - r - (H-1)A)`: the prediction :class:`HeadsKernel`
puts beside the eigenvalues observed at the rounding floor. Heads whose softmax is one-hot
to float64 precision (:class:`Saturation`) make the computed Gram lose more rank: their
features are atoms, and the rows that select the same atoms in every head are equal.

``r`` and ``A`` are ranks of the float64 atoms read as the rationals they are: modulo a
prime (a lower bound), certified exact when that equals the size of the matrix or an
exact fraction-free elimination confirms it (:func:`atom_span`).

References: seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 5, Prop. 8;
``theory/ntk-head-law.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import fmpz_mat, nmod_mat

from ... import _budget
from ..._records import restore
from ...cgf import Empirical, as_laws
from ..gram_matrix.features import Heads, _as_heads

__all__ = ["AtomSpan", "atom_span", "default_head_count", "Saturation", "saturation", "HeadsKernel",
           "heads_kernel", "DEFAULT_MARGIN"]

#: a 31-bit prime: residues and their products fit in uint64. The rank modulo p is at most the
#: rank over Q (a minor that is non-zero modulo p is a non-zero integer).
_P = 2147483647
#: the exact (fraction-free) rank confirms a rank drop modulo p up to this many entries
_EXACT_ENTRIES = 1 << 15
#: a head is saturated at an atom when the softmax weights other than the largest sum to at most
#: this fraction of it: the feature is that atom to within 2^-60 relative (float64 sees no difference)
SATURATED = 2.0**-60
#: the saturation check computes the scores of every atom and head up to this many multiply-adds
_SATURATION_WORK = 1 << 31
#: default head count: rank room of DEFAULT_MARGIN times the number of rows (H d >= 4 M before the span)
DEFAULT_MARGIN = 4


# --------------------------------------------------------------------- exact ranks of atoms


def _scale_exponent(A: np.ndarray) -> int:
    """``E`` such that every entry of ``A`` times ``2^-E`` is an integer (every double is
    ``m 2^(e - 53)`` with an integer ``m``)."""
    nz = A[A != 0]
    if nz.size == 0:
        return 0
    return int(np.frexp(nz)[1].min()) - 53


def _residues(A: np.ndarray, E: int) -> np.ndarray:
    """``A 2^-E`` modulo ``_P``, entrywise (uint64), exactly."""
    mant, ex = np.frexp(A)
    m = (mant * 2.0**53).astype(np.int64)  # exact: |mant| in [0.5, 1) or 0
    shift = np.where(m != 0, ex.astype(np.int64) - 53 - E, 0)
    out = (np.abs(m).astype(np.uint64) % np.uint64(_P))
    pw = np.ones_like(out)
    for s in np.unique(shift).tolist():
        pw[shift == s] = pow(2, int(s), _P)
    out = (out * pw) % np.uint64(_P)
    return np.where(m < 0, (np.uint64(_P) - out) % np.uint64(_P), out)


def _integers(A: np.ndarray, E: int) -> list[list[int]]:
    """``A 2^-E`` as exact Python integers."""
    mant, ex = np.frexp(A)
    m = (mant * 2.0**53).astype(np.int64)
    shift = ex.astype(np.int64) - 53 - E
    return [[0 if mi == 0 else (mi << si) if mi > 0 else -((-mi) << si) for mi, si in zip(mr, sr, strict=True)]
            for mr, sr in zip(m.tolist(), shift.tolist(), strict=True)]


def _rank(A: np.ndarray, E: int) -> tuple[int, int, str]:
    """(rank, certified upper bound on the rank, how) of the rational matrix ``A``."""
    rows, cols = A.shape
    full = min(rows, cols)
    if full == 0:
        return 0, 0, "empty"
    res = _residues(A, E)
    rp = nmod_mat(rows, cols, res.ravel().tolist(), _P).rank()
    if rp == full:
        return rp, rp, f"rank {rp} modulo the prime {_P} equals the size: exact"
    if rows * cols <= _EXACT_ENTRIES:
        rq = fmpz_mat(_integers(A, E)).rank()
        return rq, rq, "fraction-free elimination over the integers: exact"
    return rp, full, (f"rank {rp} modulo {_P} (a lower bound); the exact elimination is limited to "
                      f"{_EXACT_ENTRIES} entries: not certified")


@dataclass(frozen=True)
class AtomSpan:
    r"""The span of the atoms: ``rank`` :math:`r = \dim\mathrm{span}\{x_{ia}\}`, ``directions``
    :math:`A = \dim \sum_i \mathrm{span}\{x_{ia} - x_{i0}\}` (both over all samples).

    ``rank_upper`` and ``directions_upper`` are certified upper bounds (equal to the values when
    ``exact``); ``points`` counts the distinct points of ``R^d`` among the atoms, ``dim`` is ``d``.
    """

    rank: int
    directions: int
    rank_upper: int
    directions_upper: int
    points: int
    dim: int
    how: str

    @property
    def exact(self) -> bool:
        return self.rank == self.rank_upper and self.directions == self.directions_upper

    def rank_bound(self, heads: int, *, certified: bool = False) -> int:
        """:math:`r + (H - 1) A`, the largest rank of the feature matrix of ``H`` heads (with the
        certified upper bounds of ``r`` and ``A`` when ``certified``)."""
        if certified:
            return self.rank_upper + (heads - 1) * self.directions_upper
        return self.rank + (heads - 1) * self.directions

    def heads_for(self, rows: int) -> int | None:
        """The fewest heads with :meth:`rank_bound` at least ``rows`` (None: no number of heads)."""
        if self.rank >= rows:
            return 1
        if self.directions == 0:
            return None
        return 1 + math.ceil((rows - self.rank) / self.directions)

    def sentence(self) -> str:
        return (f"the atoms span {self.rank} dimensions, {self.directions} of them spanned by differences of atoms "
                f"of one sample" + ("" if self.exact else " (ranks modulo a prime: not certified)"))

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "directions": self.directions, "rank_upper": self.rank_upper,
                "directions_upper": self.directions_upper, "points": self.points, "dim": self.dim,
                "exact": self.exact, "how": self.how}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AtomSpan:
        """The span from its :meth:`to_dict` (``exact`` is derived and not read)."""
        return restore(cls, d)


def _points(laws: Sequence[Empirical]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct points among all atoms, and for each law the index of each atom's point."""
    allx = np.concatenate([law.atoms for law in laws])
    pts, inv = np.unique(allx, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    offs = np.cumsum([0] + [law.n_atoms for law in laws])
    return pts, [inv[offs[i]:offs[i + 1]] for i in range(len(laws))]


def atom_span(samples: Any) -> AtomSpan:
    r"""The dimensions ``r`` and ``A`` of the rank bound :math:`r + (H-1)A` of ``H`` heads.

    The atoms are read as the rationals they are (every double times a common power of two is an
    integer); the rank modulo a 31-bit prime is a lower bound on the rank over Q, certified exact
    when it equals the size of the matrix, else by fraction-free elimination (small matrices).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])   # a plane off the origin
    >>> s = atom_span([x])
    >>> s.rank, s.directions, s.rank_bound(2), s.exact
    (3, 2, 5, True)
    """
    laws = as_laws(samples)
    pts, idx = _points(laws)
    E = _scale_exponent(pts)
    r, r_up, how_r = _rank(pts, E)
    if not any(j.size > 1 for j in idx):
        a, a_up, how_a = 0, 0, "no sample has two atoms"
    elif r == r_up == pts.shape[0]:
        a = a_up = int(pts.shape[0]) - _components(idx, int(pts.shape[0]))
        how_a = ("the points are linearly independent: the differences have the rank of the incidence matrix "
                 "of the samples, points minus connected components")
    else:
        a, a_up, how_a = _direction_rank(pts, idx, E)
    how = f"span: {how_r}; directions: {how_a}"
    return AtomSpan(r, a, r_up, a_up, int(pts.shape[0]), laws[0].dim, how)


def _components(idx: list[np.ndarray], points: int) -> int:
    """Connected components of the points, two points joined when some sample has both."""
    parent = list(range(points))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for j in idx:
        root = find(int(j[0]))
        for a in j[1:].tolist():
            ra = find(a)
            if ra != root:
                parent[ra] = root
    return len({find(a) for a in range(points)})


def _direction_rank(pts: np.ndarray, idx: list[np.ndarray], E: int) -> tuple[int, int, str]:
    """(rank, certified upper bound, how) of the within-sample differences ``x_ia - x_i0``, as exact
    rationals: from the residues and integers of the points, never from rounded float64 differences."""
    res = _residues(pts, E)
    rows_p = [(res[j[1:]].astype(np.int64) - res[j[:1]].astype(np.int64)) % _P for j in idx if j.size > 1]
    Rp = np.concatenate(rows_p).astype(np.uint64)
    nrows, cols = Rp.shape
    full = min(nrows, cols)
    rp = nmod_mat(nrows, cols, Rp.ravel().tolist(), _P).rank()
    if rp == full:
        return rp, rp, f"rank {rp} modulo the prime {_P} equals the size: exact"
    if nrows * cols <= _EXACT_ENTRIES:
        ints = _integers(pts, E)
        rows = [[ints[a][k] - ints[j[0]][k] for k in range(cols)] for j in idx if j.size > 1 for a in j[1:].tolist()]
        rq = fmpz_mat(rows).rank()
        return rq, rq, "fraction-free elimination over the integers: exact"
    return rp, full, (f"rank {rp} modulo {_P} (a lower bound); the exact elimination is limited to "
                      f"{_EXACT_ENTRIES} entries: not certified")


def default_head_count(M: int, d: int, span: AtomSpan | None = None, *, margin: int = DEFAULT_MARGIN) -> int:
    r"""Heads enough for rank room ``margin`` times the ``M`` rows of the Gram.

    With the span of the atoms (:func:`atom_span`): the fewest ``H`` with
    :math:`r + (H - 1) A \ge` ``margin`` ``M`` (one head when :math:`A = 0`: single Diracs, whose
    features do not depend on the head). Without it: ``ceil(margin M / d)`` (``H d >= margin M``,
    the bound when the atoms span everything).

    Examples
    --------
    >>> default_head_count(40, 384), default_head_count(40, 384, AtomSpan(32, 31, 32, 31, 36, 384, ""))
    (1, 6)
    """
    if span is None:
        return max(1, math.ceil(margin * M / d))
    return max(1, span.heads_for(margin * M) or 1)


# ------------------------------------------------------------------------ saturated heads


@dataclass(frozen=True)
class Saturation:
    r"""Heads whose softmax is one-hot to float64 precision, and the rank they leave the Gram.

    In head ``h`` the atom :math:`x_{ia}` is *saturated* when the softmax weights other than the
    largest sum to at most ``SATURATED`` (``2^-60``) times it: the feature is then the selected
    atom :math:`z_h(i, a)` to within :math:`2 R_i\,2^{-60}`. A row saturated in every head is,
    to that accuracy, :math:`\sqrt{m_{ia}/H}\,(z_1(i,a), \dots, z_H(i,a))`, so the saturated rows
    have rank at most that of their 0/1 selection matrix (one column per head and point). With
    ``F~`` the features with those rows snapped,

    .. math::

        \operatorname{rank} \tilde F \le \mathrm{pattern\_rank} + (M - \mathrm{saturated}),
        \qquad \|F - \tilde F\|_2 \le \mathrm{perturbation},

    so at least ``M - rank_bound`` singular values of ``F`` are at most ``perturbation``.

    Attributes
    ----------
    heads, rows : int
        ``H`` and ``M``.
    saturated : int
        Rows saturated in every head.
    patterns : int
        Distinct selection tuples among them.
    pattern_rank : int
        Upper bound on the rank of their selection matrix (its exact rank when ``exact``).
    perturbation : float
        Upper bound on :math:`\|F - \tilde F\|_F`.
    smallest_gap : float
        The smallest gap between the largest and the next score (log-masses included) over
        the saturated atom-heads (``inf`` when none).
    """

    heads: int
    rows: int
    saturated: int
    patterns: int
    pattern_rank: int
    exact: bool
    perturbation: float
    smallest_gap: float

    @property
    def rank_bound(self) -> int:
        return self.pattern_rank + (self.rows - self.saturated)

    def sentence(self) -> str:
        return (f"the softmax is one-hot to float64 precision in every head at {self.saturated} of {self.rows} atoms "
                f"(score gaps >= {self.smallest_gap:.3g}), which select {self.patterns} distinct atom patterns: "
                f"rank <= {self.rank_bound}")

    def to_dict(self) -> dict[str, Any]:
        return {"heads": self.heads, "rows": self.rows, "saturated": self.saturated, "patterns": self.patterns,
                "pattern_rank": self.pattern_rank, "exact": self.exact, "rank_bound": self.rank_bound,
                "perturbation": self.perturbation,
                "smallest_gap": self.smallest_gap if math.isfinite(self.smallest_gap) else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Saturation:
        """The saturation from its :meth:`to_dict`: a null ``smallest_gap`` is ``inf`` (no saturated
        atom-head with a second atom), the only value :meth:`to_dict` writes as null."""
        return restore(cls, d, smallest_gap=lambda v: math.inf if v is None else float(v))


def _pattern_rank(patterns: np.ndarray, points: int) -> tuple[int, bool]:
    """(upper bound on the rank, exact?) of the 0/1 matrix with a one at ``(h, patterns[row, h])``."""
    u, H = patterns.shape
    if u == 0:
        return 0, True
    if u * H * points > _EXACT_ENTRIES:
        return u, False
    rows = [[0] * (H * points) for _ in range(u)]
    for t, pat in enumerate(patterns.tolist()):
        for h, z in enumerate(pat):
            rows[t][h * points + z] = 1
    return int(fmpz_mat(rows).rank()), True


def saturation(samples: Any, heads: Heads) -> Saturation | None:
    r"""Which atoms every head sees through a one-hot softmax (:class:`Saturation`); None when the
    scores of every atom and head would cost more than ``2^31`` multiply-adds.

    Scores :math:`\langle Q_h x_{ia} + b_h, x_{ia'}\rangle + \log m_{ia'}` in float64 (their rounding,
    ``~ u |Q| R^2``, is far below the gaps that matter: a saturated atom-head has a gap of at
    least :math:`60 \log 2 \approx 41.6`).
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    H, d = heads.count, heads.dim
    M = sum(law.n_atoms for law in laws)
    if M * H * d * (d + max(law.n_atoms for law in laws)) > _SATURATION_WORK:
        return None
    pts, idx = _points(laws)
    sel = np.empty((M, H), dtype=np.int64)
    sat = np.ones(M, dtype=bool)
    pert2, gap = 0.0, math.inf
    hb = max(1, (1 << 22) // (d * d + 1))
    off = 0
    for law, ids in zip(laws, idx, strict=True):
        X, N = law.atoms, law.n_atoms
        logm, m = np.log(law.masses), law.masses
        R = float(np.sqrt(np.max(np.sum(X * X, axis=1))))
        for h0 in range(0, H, hb):
            _budget.checkpoint("the saturation bound of the heads")
            h1 = min(H, h0 + hb)
            A = np.einsum("hij,nj->hni", heads.Q[h0:h1], X) + heads.b[h0:h1, None, :]
            S = A @ X.T + logm  # (c, N, N): scores of the atom n (query) against every atom
            top = S.argmax(axis=2)
            smax = np.take_along_axis(S, top[..., None], axis=2)
            Ex = np.exp(S - smax)
            np.put_along_axis(Ex, top[..., None], 0.0, axis=2)
            w = Ex.sum(axis=2)  # the other weights, relative to the largest
            ok = w <= SATURATED
            sat[off:off + N] &= ok.all(axis=0)
            sel[off:off + N, h0:h1] = ids[top].T
            pert2 += float(np.sum(np.where(ok, (m[None, :] / H) * (2.0 * R * w) ** 2, 0.0)))
            if N > 1 and ok.any():
                second = np.sort(S, axis=2)[..., -2]
                gap = min(gap, float(np.min(np.where(ok, smax[..., 0] - second, np.inf))))
        off += N
    patterns = np.unique(sel[sat], axis=0) if sat.any() else np.zeros((0, H), dtype=np.int64)
    prank, exact = _pattern_rank(patterns, int(pts.shape[0]))
    # 2 R w bounds |phi - z*| (the other weights move the mean by at most the diameter): summed, inflated
    return Saturation(H, M, int(sat.sum()), int(patterns.shape[0]), prank, exact,
                      math.sqrt(pert2) * (1.0 + 1e-6), gap)


# ------------------------------------------------------------------ the predicted kernel


@dataclass(frozen=True)
class HeadsKernel:
    r"""The kernel dimension of the Gram of ``H`` heads, predicted before looking at its spectrum.

    .. math::

        \mathrm{predicted} = \max\big(k,\; M - (r + (H-1)A),\; M - \mathrm{saturation\ bound}\big),
        \qquad \mathrm{proven} = \max\big(k,\; M - (r^+ + (H-1)A^+)\big),

    ``k`` the kernel of the head law predicted by the dependence structure, ``r^+, A^+`` the
    certified upper bounds of :class:`AtomSpan`. ``proven`` holds for every draw of ``H``
    heads (a Gram showing fewer zero eigenvalues contradicts a theorem); ``predicted`` is what
    heads in general position give (``theory/ntk-head-law.md``).

    Attributes
    ----------
    heads, atoms : int
        ``H`` and ``M``.
    structural : int
        ``k`` (:attr:`~ntkcheck.ntk.prop8.structure.DependenceStructure.predicted_kernel`).
    structural_exact : bool
        Whether ``k`` is exact (:attr:`~ntkcheck.ntk.prop8.structure.DependenceStructure.exact`) rather than
        a lower bound.
    span : AtomSpan
    saturation : Saturation or None
        Attached when it explains more zero eigenvalues than the span (and its perturbation is
        far below the Gram's rounding floor).
    """

    heads: int
    atoms: int
    structural: int
    structural_exact: bool
    span: AtomSpan
    saturation: Saturation | None = None

    @property
    def span_bound(self) -> int:
        return self.span.rank_bound(self.heads)

    @property
    def predicted(self) -> int:
        out = max(self.structural, self.atoms - self.span_bound)
        if self.saturation is not None:
            out = max(out, self.atoms - self.saturation.rank_bound)
        return out

    @property
    def proven(self) -> int:
        return max(self.structural, self.atoms - self.span.rank_bound(self.heads, certified=True))

    @property
    def finite_heads(self) -> bool:
        """The ``H``-head Gram is predicted to lose more rank than the head law's kernel ``k``."""
        return self.predicted > self.structural

    @property
    def heads_needed(self) -> int | None:
        """The fewest heads whose rank bound leaves room for the ``M - k`` rows outside the head
        law's kernel (None: no number of heads, only when ``A = 0`` and ``r < M - k``)."""
        return self.span.heads_for(self.atoms - self.structural)

    def reason(self) -> str:
        """Why the ``H``-head Gram loses rank, in words ('' when it is not predicted to)."""
        parts = []
        if self.atoms - self.span_bound > self.structural:
            parts.append(f"with H = {self.heads} the Gram has rank at most r + (H - 1) A = {self.span_bound} < "
                         f"M = {self.atoms} ({self.span.sentence()})")
        sat = self.saturation
        if sat is not None and self.atoms - sat.rank_bound > max(self.structural, self.atoms - self.span_bound):
            parts.append(sat.sentence())
        return "; ".join(parts)

    def next_step(self) -> str:
        """How many heads remove the finite-head kernel, in words."""
        need = self.heads_needed
        if self.saturation is not None and self.atoms - self.saturation.rank_bound > self.structural:
            return ("more heads, or smaller --q-scale/--b-scale so that the softmax is not one-hot"
                    + (f" (at least {need} heads for the rank bound)" if need and need > self.heads else ""))
        if need is None:
            return "no number of heads (every sample is a single point: the features do not depend on the head)"
        return f"at least {need} heads (r + (H - 1) A >= M - k = {self.atoms - self.structural})"

    def to_dict(self) -> dict[str, Any]:
        return {"heads": self.heads, "atoms": self.atoms, "predicted": self.predicted, "proven": self.proven,
                "structural": self.structural, "structural_exact": self.structural_exact,
                "span_bound": self.span_bound, "heads_needed": self.heads_needed, "span": self.span.to_dict(),
                "saturation": None if self.saturation is None else self.saturation.to_dict(),
                "reason": self.reason()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeadsKernel:
        """The prediction from its :meth:`to_dict` (``predicted``, ``proven``, ``span_bound``,
        ``heads_needed`` and ``reason`` are derived from the fields and not read)."""
        return restore(cls, d)


def heads_kernel(samples: Any, heads: Heads, structure: Any, *, gram: Any = None,
                 span: AtomSpan | None = None) -> HeadsKernel:
    """:class:`HeadsKernel` of these heads (``structure`` None: no kernel known for the head law,
    ``k = 0``): the span bound always; the saturation bound too when
    ``gram`` (a :class:`~ntkcheck.ntk.gram_matrix.result.GramResult` of the same heads) observes more zero
    eigenvalues than the span predicts, the check is affordable, and snapping the saturated rows
    moves ``F`` by far less than the square root of the Gram's rounding floor.

    Examples
    --------
    >>> from ntkcheck.ntk import dependence_structure, init_heads
    >>> rng = np.random.default_rng(0)
    >>> S = [rng.standard_normal((4, 3)) for _ in range(3)]          # M = 12 atoms in d = 3
    >>> hk = heads_kernel(S, init_heads(2, 3), dependence_structure(S))
    >>> hk.span_bound, hk.predicted, hk.heads_needed
    (6, 6, 4)
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    span = atom_span(laws) if span is None else span
    M = sum(law.n_atoms for law in laws)
    k, exact = (0, False) if structure is None else (int(structure.predicted_kernel), bool(structure.exact))
    hk = HeadsKernel(heads.count, M, k, exact, span)
    obs = None if gram is None else gram.kernel_observed
    if obs is None or obs <= hk.predicted:
        return hk
    try:  # a refinement of the prediction: left out when a time budget runs out (ntkcheck._budget)
        with _budget.scope(stoppable=True):
            sat = saturation(laws, heads)
    except _budget.OutOfTime:
        return hk
    if sat is None or M - sat.rank_bound <= hk.predicted:
        return hk
    # the snapped rows' lost rank shows at the floor only if the snapping moves F far less than it
    if sat.perturbation**2 > 1e-3 * gram.floor:
        return hk
    return HeadsKernel(hk.heads, M, hk.structural, hk.structural_exact, span, sat)
