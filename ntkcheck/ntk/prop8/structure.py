r"""Dependence structures among empirical laws, and the kernel of the NTK Gram they predict.

The CGFs :math:`\Lambda_i` of token samples are dependent modulo affine functions when
:math:`\sum_i c_i\Lambda_i(a) = \langle\alpha, a\rangle` for some :math:`c \ne 0` (seed 003,
Training Infinitely Deep and Wide Transformers, Def. 6 and Ex. 6). The dependency space

.. math::

    D = \{c \in \mathbb R^n : \textstyle\sum_i c_i\Lambda_i \text{ is affine}\}, \qquad
    D_0 = \{c \in D : \alpha(c) = \textstyle\sum_i c_i\, \mathrm{mean}(\mu_i) = 0\}

determines the kernel of the NTK map :math:`G` at FixUp exactly (``theory/ntk-prop8.md``,
"The dimension of the kernel"): with :math:`S(z)` the samples that have the point
:math:`z` as an atom and :math:`D_{S} = D \cap \mathbb R^{S}`,

.. math::

    \ker G \cong \{(n_z)_z : n_z \in D_{S(z)},\ \textstyle\sum_z n_z \in D_0\},\qquad
    \dim\ker G = \sum_z \dim D_{S(z)} - \dim\big((\textstyle\sum_z D_{S(z)} + D_0)/D_0\big),

the kernel vector being :math:`p_i(z) = n_{z,i} / \mu_i(\{z\})`.

The structures that put vectors in :math:`D` (duplicates, translates, products, single
Diracs, each verified exactly) are recognised in :mod:`ntkcheck.ntk.prop8.relations`; this
module adds any further null vector the decision engine certifies and counts the kernel. The span :math:`D'` of
what was found is a subspace of :math:`D`, so the count above with :math:`D'` is a lower
bound on the kernel dimension; it is **exact** when the samples outside a set of pivots of
:math:`D'` are certified weakly independent (then :math:`D = D'`).

References: seed 003 (Training Infinitely Deep and Wide Transformers) Def. 6, Prop. 8, Ex. 6,
Remark 5; ``theory/ntk-prop8.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from flint import fmpq, fmpq_mat

from ..._records import restore
from ...cgf import as_laws
from .exact import _Laws
from .relations import Relation, _find, find_relations  # noqa: F401  (find_relations: doctests)

__all__ = ["DependenceStructure", "dependence_structure", "kernel_dimension"]

#: rounds of "decide on the samples outside the pivots" before the count is left a lower bound
MAX_ROUNDS = 4
#: the kernel basis (M x k floats) is built only up to this many entries
MAX_BASIS_ENTRIES = 1 << 25


# ----------------------------------------------------------------------- rational algebra


def _q(v: Fraction) -> fmpq:
    return fmpq(v.numerator, v.denominator)


def _f(v: fmpq) -> Fraction:
    return Fraction(int(v.p), int(v.q))


def _rref(rows: Sequence[Sequence[Fraction]], ncols: int) -> tuple[list[list[Fraction]], list[int]]:
    """Reduced row echelon form over Q (python-flint): the non-zero rows and their pivot columns."""
    if not rows or ncols == 0:
        return [], []
    m = fmpq_mat(len(rows), ncols, [_q(v) for r in rows for v in r])
    R, rank = m.rref()
    out = [[_f(R[k, j]) for j in range(ncols)] for k in range(rank)]
    pivots = [next(j for j in range(ncols) if out[k][j] != 0) for k in range(rank)]
    return out, pivots


def _nullspace(rows: Sequence[Sequence[Fraction]], ncols: int) -> list[list[Fraction]]:
    """A basis of ``{x in Q^ncols : A x = 0}`` for the matrix with the given rows."""
    R, piv = _rref(rows, ncols)
    free = [j for j in range(ncols) if j not in set(piv)]
    basis = []
    for f in free:
        x = [Fraction(0)] * ncols
        x[f] = Fraction(1)
        for k, p in enumerate(piv):
            x[p] = -R[k][f]
        basis.append(x)
    return basis


# ------------------------------------------------------------------------ kernel dimension


@dataclass(frozen=True)
class _Basis:
    """A basis of D' in reduced echelon form (pivots at the highest sample indices) and the
    linear parts ``alpha`` of its rows."""

    rows: list[list[Fraction]]
    pivots: list[int]
    alphas: list[tuple[Fraction, ...]]


def _basis(L: _Laws, rels: Sequence[Relation]) -> _Basis:
    """Echelon basis of the span of the relations, with the linear parts of its rows.

    ``alpha`` is linear in ``c`` (:math:`\\alpha(c) = \\sum_i c_i\\,\\mathrm{mean}_i`), so the
    echelon form of the augmented rows ``[c | alpha]`` carries each basis row's ``alpha``
    (no pivot can fall in the ``alpha`` columns: a relation ``sum t_k c_k = 0`` forces
    ``sum t_k alpha_k = 0``)."""
    n, d = L.n, L.d
    if not rels:
        return _Basis([], [], [])
    # reversed c columns: the echelon pivots land on the latest samples ("12 is 3" pivots 12)
    R, piv = _rref([list(r.c)[::-1] + list(r.alpha) for r in rels], n + d)
    if piv and piv[-1] >= n:
        raise AssertionError("relations with inconsistent linear parts (a bug: every relation is verified)")
    rows = [r[:n][::-1] for r in R]
    pivots = [n - 1 - p for p in piv]
    return _Basis(rows, pivots, [tuple(r[n:]) for r in R])


def _nullspace_sparse(rows: Sequence[Sequence[Fraction]], ncols: int) -> list[dict[int, Fraction]]:
    """:func:`_nullspace` with each basis vector as ``{index: value}`` (its support is one free
    column and the pivots)."""
    R, piv = _rref(rows, ncols)
    pset = set(piv)
    out = []
    for f in (j for j in range(ncols) if j not in pset):
        x = {f: Fraction(1)}
        for k, p in enumerate(piv):
            if R[k][f] != 0:
                x[p] = -R[k][f]
        out.append(x)
    return out


def _kernel(L: _Laws, B: _Basis, want_basis: bool) -> tuple[int, int, np.ndarray | None]:
    """(kernel dimension, dim D'_0, basis in Gram coordinates or None) for the span of ``B``.

    Points ``z`` shared by the samples ``S(z)`` contribute ``D' cap R^S(z)``; the sum over
    points must land in ``D'_0``. See the module docstring and ``theory/ntk-prop8.md``.
    """
    r = len(B.rows)
    d = L.d
    if r == 0:
        return 0, 0, None
    # D'_0 in D'-coordinates y (c = y B): y A = 0 with A the r x d matrix of the alphas,
    # i.e. Gr y = 0 with Gr a row basis of A^T
    Gr, _ = _rref([[B.alphas[k][j] for k in range(r)] for j in range(d)], r)
    dim_D0 = r - len(Gr)
    supp = sorted({i for row in B.rows for i, v in enumerate(row) if v != 0})
    # the points of the laws in the support, with the (sample, atom) pairs that hold them
    offsets = np.concatenate([[0], np.cumsum([law.n_atoms for law in L.laws])]).astype(int)
    owner = np.concatenate([np.full(L.laws[i].n_atoms, i) for i in supp])
    local = np.concatenate([np.arange(L.laws[i].n_atoms) for i in supp])
    points: dict[Any, list[int]] = {}
    if any(L.laws[i].rounded for i in supp):  # atoms given at non-double values: their exact keys
        for t, z in enumerate(key for i in supp for key in L.laws[i].atom_keys()):
            points.setdefault(z, []).append(t)
    else:  # doubles: equal rows are equal points
        _, inv = np.unique(np.concatenate([L.laws[i].atoms for i in supp]), axis=0, return_inverse=True)
        for t, z in enumerate(inv.reshape(-1).tolist()):
            points.setdefault(z, []).append(t)
    # per signature S: a basis of D' cap R^S, as D'-coordinates y and as vectors n = y B on S
    cache: dict[tuple[int, ...], list[tuple[list[Fraction], dict[int, Fraction]]]] = {}
    columns: list[tuple[list[int], list[Fraction], dict[int, Fraction]]] = []
    for ts in points.values():
        S = tuple(sorted(int(owner[t]) for t in ts))
        got = cache.get(S)
        if got is None:
            Sset = set(S)
            outside = [i for i in supp if i not in Sset]
            ys = (_nullspace([[B.rows[k][i] for k in range(r)] for i in outside], r) if outside
                  else [[Fraction(int(k == t)) for k in range(r)] for t in range(r)])
            got = [(y, {i: sum((y[q] * B.rows[q][i] for q in range(r)), Fraction(0)) for i in S}) for y in ys]
            cache[S] = got
        columns.extend((ts, y, nz) for y, nz in got)
    T = len(columns)
    if T == 0:
        return 0, dim_D0, None
    # the local vectors' coefficients a must satisfy Gr (sum_t a_t y_t) = 0
    null: list[dict[int, Fraction]]
    if Gr:
        C = [[sum((g[k] * y[k] for k in range(r)), Fraction(0)) for _, y, _ in columns] for g in Gr]
        null = _nullspace_sparse(C, T)
    else:
        null = [{t: Fraction(1)} for t in range(T)]
    k = len(null)
    if not want_basis or k == 0 or int(offsets[-1]) * k > MAX_BASIS_ENTRIES:
        return k, dim_D0, None
    basis = np.zeros((int(offsets[-1]), k))
    sqrt_m = {i: np.sqrt(L.laws[i].masses) for i in supp}
    for col, a in enumerate(null):
        for t_col, at in a.items():
            ts, _, nz = columns[t_col]
            for t in ts:
                i, ai = int(owner[t]), int(local[t])
                # Gram coordinates q = W^1/2 p with p_i(z) = n_z,i / mu_i({z})
                basis[offsets[i] + ai, col] += float(at * nz[i]) / sqrt_m[i][ai]
    return k, dim_D0, basis


def kernel_dimension(samples: Any, relations: Sequence[Relation]) -> int:
    r"""The dimension of the NTK kernel predicted by the span of ``relations``.

    .. math::

        \dim\ker G \ge \sum_z \dim D'_{S(z)} - \dim\big((\textstyle\sum_z D'_{S(z)} + D'_0)/D'_0\big),

    with equality when the relations span the whole dependency space (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5], [2.0, 0.0]])
    >>> kernel_dimension([x, x], find_relations([x, x]))    # a duplicate: 3 shared atoms
    3
    """
    L = _Laws(as_laws(samples))
    return _kernel(L, _basis(L, relations), False)[0]


@dataclass(frozen=True)
class DependenceStructure:
    r"""What is known about the dependency space :math:`D` and the kernel it predicts.

    Attributes
    ----------
    relations : tuple of Relation
        Named structures and certified null vectors; they span :math:`D' \subseteq D`.
    rank : int
        :math:`\dim D'`.
    rank_linear_free : int
        :math:`\dim D'_0` (relations with :math:`\alpha = 0`).
    predicted_kernel : int
        The kernel dimension of the NTK map predicted by :math:`D'` (per output
        coordinate: the scalar Gram :math:`W^{1/2}KW^{1/2}`); a lower bound, exact when
        ``exact``.
    exact : bool
        :math:`D' = D` is certified: the samples outside the pivots are weakly independent.
    certificate : str
        How ``exact`` was decided, or why it was not.
    kernel_basis : (M, k) float array or None
        A basis of the predicted kernel in Gram coordinates :math:`q = W^{1/2} p` (rows: the
        distinct atoms in law order); None when ``k = 0`` or too large to store.
    """

    relations: tuple[Relation, ...]
    rank: int
    rank_linear_free: int
    predicted_kernel: int
    exact: bool
    certificate: str
    kernel_basis: np.ndarray | None = field(default=None, repr=False, compare=False)
    decisions: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    dirac_relations: int = 0

    @property
    def predicted_text(self) -> str:
        return f"{self.predicted_kernel}" if self.exact else f">= {self.predicted_kernel}"

    def lines(self) -> list[str]:
        """The structures in words, Diracs grouped on one line."""
        out = [r.sentence for r in self.relations if r.kind not in ("dirac",)]
        dir_ = [r.samples[0] for r in self.relations if r.kind == "dirac"]
        if len(dir_) == 1:
            out.insert(0, next(r.sentence for r in self.relations if r.kind == "dirac"))
        elif dir_:
            k = self.dirac_relations
            rel = (f"{k} independent Dirac relation{'s' if k != 1 else ''} sum_i c_i x_i = 0 among them" if k
                   else "their atoms are linearly independent: no Dirac relation sum_i c_i x_i = 0")
            out.insert(0, f"samples {_fmt_idx(dir_)} are single Diracs (linear CGFs); {rel}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "relations": [r.to_dict() for r in self.relations],
            "rank": self.rank,
            "rank_linear_free": self.rank_linear_free,
            "predicted_kernel": self.predicted_kernel,
            "exact": self.exact,
            "certificate": self.certificate,
            "dirac_relations": self.dirac_relations,
            "sentences": self.lines(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DependenceStructure:
        """The structure from its :meth:`to_dict` (``kernel_basis`` and ``decisions``, never written, are empty)."""
        return restore(cls, d)


def _in_span(B: _Basis, c: Sequence[Fraction], n: int) -> bool:
    R, _ = _rref([*B.rows, list(c)], n)
    return len(R) == len(B.rows)


def dependence_structure(samples: Any, *, weak: Any = None, certify: bool = True,
                         want_basis: bool = True, max_rounds: int = MAX_ROUNDS) -> DependenceStructure:
    r"""Recognise the dependence structure of the samples and count the kernel it predicts.

    Parameters
    ----------
    samples : list of Empirical or token arrays
    weak : Decision, optional
        ``decide(samples, property="weak")`` if already computed: an independent verdict
        settles :math:`D = 0`; a dependent one contributes its null vector.
    certify : bool
        Decide weak independence of the samples outside the pivots of :math:`D'` (at most
        ``max_rounds`` times, each dependent answer adding its null vector) to certify
        :math:`D' = D`.
    want_basis : bool
        Also build a basis of the predicted kernel (Gram coordinates).

    Returns
    -------
    DependenceStructure

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> S = [rng.standard_normal((4, 3)) for _ in range(3)]
    >>> s = dependence_structure([*S, S[1]])
    >>> s.lines(), s.predicted_kernel, s.exact
    (['sample 3 is sample 1 (equal laws)'], 4, True)
    """
    laws = as_laws(samples)
    L = _Laws(laws)
    n = L.n
    rels = list(_find(L))
    decisions: list[Any] = []
    B = _basis(L, rels)
    exact = False
    how = "not certified (certify=False): the count is a lower bound"
    if weak is not None and weak.independent:
        exact = True
        how = "the CGFs are weakly independent (decide): D = 0"
        if rels:
            how += "; inconsistent with the structures found"
            exact = False
    else:
        if weak is not None and weak.dependent and weak.null_vector is not None:
            c = tuple(Fraction(v) for v in weak.null_vector)
            if any(v != 0 for v in c) and not _in_span(B, c, n):
                rels.append(_decide_relation(L, c, weak))
                B = _basis(L, rels)
        if certify:
            from ...independence.decision import decide

            for _ in range(max_rounds):
                rest = [i for i in range(n) if i not in set(B.pivots)]
                if not rest:
                    exact, how = True, "the structures span every combination of the samples' CGFs"
                    break
                dec = decide([laws[i] for i in rest], property="weak")
                decisions.append(dec)
                named = f"samples {_fmt_idx(rest)}" if len(rest) < n else "all samples"
                if dec.independent:
                    exact = True
                    cert = f"decide: {dec.method}, {getattr(dec.certificate, 'kind', dec.certificate)}"
                    how = (f"the CGFs are weakly independent ({cert}): D = 0" if len(rest) == n else
                           f"{named} (outside the pivots of the structures) are weakly independent ({cert}): D = D'")
                    break
                if not dec.dependent or dec.null_vector is None:
                    how = (f"decide was inconclusive on {named}: further dependencies are not excluded, "
                           "the predicted kernel dimension is a lower bound")
                    break
                c = [Fraction(0)] * n
                for i, v in zip(rest, dec.null_vector, strict=True):
                    c[i] = Fraction(v)
                rels.append(_decide_relation(L, tuple(c), dec))
                B = _basis(L, rels)
            else:
                how = f"{max_rounds} rounds of decide still found dependencies: the count is a lower bound"
    k, dim0, basis = _kernel(L, B, want_basis)
    dirac_alphas = [list(r.alpha) for r in rels if r.kind == "dirac"]
    n_dirac_rel = len(dirac_alphas) - len(_rref(dirac_alphas, L.d)[0])
    return DependenceStructure(tuple(rels), len(B.rows), dim0, k, exact, how, basis, tuple(decisions), n_dirac_rel)


def _fmt_idx(idx: Sequence[int]) -> str:
    if len(idx) > 12:
        return "[" + ", ".join(str(i) for i in idx[:10]) + f", ... {idx[-1]}] ({len(idx)} samples)"
    return str(list(idx))


def _decide_relation(L: _Laws, c: tuple[Fraction, ...], dec: Any) -> Relation:
    """A null vector certified by ``decide`` as a relation; ``alpha`` is recomputed exactly as
    :math:`\\sum_i c_i\\,\\mathrm{mean}_i` (the certified identity forces this value)."""
    supp = [i for i, v in enumerate(c) if v != 0]
    cs = ", ".join(f"{c[i]} x sample {i}" for i in supp[:6]) + (" ..." if len(supp) > 6 else "")
    return Relation("decide", tuple(supp), c, L.alpha(c), None,
                    f"sum_i c_i Lambda_i is affine for {cs} (certified by decide: {dec.method}; not a named structure)")
