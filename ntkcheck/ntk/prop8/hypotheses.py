r"""Seed 003 Prop. 8's hypothesis on the head law, checked before it is invoked.

Prop. 8 (weakly independent CGFs :math:`\Rightarrow` injective NTK map :math:`G`) needs a head
law :math:`\rho` whose support contains a non-empty open set of :math:`(Q, b)`: its proof
continues :math:`G[p]` analytically from that open set to all of :math:`(Q, b)`-space. A law
with ``b = 0`` (``--b-scale 0``), ``Q = 0`` (``--q-scale 0``), a uniform law with a zero scale,
or the finitely many heads of a heads file has no such open set, and the proposition says
nothing about it. :func:`law_support` states which case applies; where the law pins ``Q`` or
``b`` to zero, :class:`LawKernel` proves a kernel of :math:`K_\rho` from the data alone.

**Constant-feature classes** (``theory/ntk-prop8.md``, "Head laws without an open set").
Let every head of the law satisfy a constraint :math:`C`. Group the rows (sample ``i``, atom
``a``) into classes whose rows have the same feature :math:`\phi_{ia}(Q, b) = \nabla\Lambda_i(Qx_{ia} + b)`
at every :math:`(Q, b)` satisfying :math:`C`; call a class constant when that feature is one
vector :math:`f_c` for all of them. Then every signed measure :math:`\nu` on the rows with

* zero total mass inside each class (``sum_{r in c} nu_r = 0``), or
* total masses :math:`t_c` on the constant classes with :math:`\sum_c t_c f_c = 0` (and none elsewhere)

gives :math:`G[p](Q, b) = \sum_r \nu_r \phi_r(Q, b)^T e = 0` for every head of the law
(:math:`p_r = \nu_r / m_r`), so :math:`\kappa_\rho(p) = 0` and :math:`\lambda_{\min}(K_\rho) = 0`,
whatever :math:`\rho` puts on the heads that satisfy :math:`C`. The kernel contains a space of dimension
:math:`\sum_c (|c| - 1) + \#\{\text{constant classes}\} - \mathrm{rank}(f_c)`. The classes used:

* ``b = 0``: an atom at the origin has query :math:`Q\cdot 0 + 0 = 0` for every ``Q``: its
  feature is :math:`\nabla\Lambda_i(0)`, the mean of sample ``i`` (a constant class of one row);
* ``Q = 0``: every atom of sample ``i`` has the feature :math:`\nabla\Lambda_i(b)` (one class per sample);
* ``Q = 0`` and ``b = 0``: every feature is the sample's mean (constant classes).

The means are exact rationals (the atoms and masses as given), the relations among them an
exact null space: the proof is exact. Where no class gives a vector the injectivity of the
head law's NTK is **not decided** by Prop. 8 (the head-law bound of
:mod:`ntkcheck.ntk.heads.law` may still bound it, with its probability).

References: seed 003 (Training Infinitely Deep and Wide Transformers) Prop. 5, Prop. 8;
``theory/ntk-prop8.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from ..._records import restore
from ..._text import exact_vector
from ..._validate import exact_rows
from ...cgf import Empirical
from ..gram_matrix.features import Heads
from .structure import _nullspace

__all__ = ["LawKernel", "HeadLawSupport", "law_support", "constant_feature_kernel"]


@dataclass(frozen=True)
class LawKernel:
    r"""A kernel of :math:`K_\rho` proved for every head that satisfies ``constraint``.

    Attributes
    ----------
    constraint : str
        ``"b = 0"``, ``"Q = 0"`` or ``"Q = 0, b = 0"``: what every head of the law satisfies.
    classes : tuple of (int, tuple of int)
        The constant-feature classes with more than one row or a constant feature: (sample,
        its atoms in the class).
    constant : tuple of bool
        Whether each class's feature is one vector (the sample's mean).
    relations : tuple of tuple of Fraction
        A basis of the total masses :math:`t` on the constant classes with :math:`\sum_c t_c f_c = 0`
        (one entry per constant class, in order).
    dimension : int
        :math:`\sum_c (|c| - 1) + \dim(\text{relations})`: the kernel of :math:`K_\rho` has at
        least this dimension (per output coordinate).
    """

    constraint: str
    classes: tuple[tuple[int, tuple[int, ...]], ...]
    constant: tuple[bool, ...]
    relations: tuple[tuple[Fraction, ...], ...]
    dimension: int

    def sentence(self) -> str:
        """The proof in words (what has the same feature, and the kernel it gives)."""
        k = self.dimension
        if self.constraint == "b = 0":
            at0 = [f"sample {i} atom {a[0]}" for (i, a), c in zip(self.classes, self.constant, strict=True) if c]
            rel = self.relations[0] if self.relations else ()
            return (f"with b = 0 every head gives an atom at x = 0 the query 0, so its feature is its sample's mean "
                    f"whatever Q ({', '.join(at0[:4])}{', ...' if len(at0) > 4 else ''}); these means satisfy "
                    f"{len(self.relations)} exact linear relation(s) (the first: masses {exact_vector(rel)} on those "
                    f"atoms), so the NTK has a kernel of dimension >= {k} for every head of this law (exact rational "
                    "arithmetic)")
        if self.constraint == "Q = 0":
            return (f"with Q = 0 every head gives all atoms of a sample the same query b, so they share the feature "
                    f"grad Lambda_i(b): any adjoint with zero mass on each sample is annihilated, a kernel of "
                    f"dimension >= {k} for every head of this law")
        return (f"with Q = 0 and b = 0 every feature is its sample's mean: the NTK has a kernel of dimension >= {k} "
                "for every head of this law (exact rational arithmetic)")

    def short(self) -> str:
        """The proof in a few words (for the head-law line of a report)."""
        return (f"{self.constraint} on every head: rows with the same feature at every head give a kernel of "
                f"dimension >= {self.dimension}, in exact arithmetic")

    def gram_vectors(self, laws: Sequence[Empirical], limit: int = 64) -> np.ndarray:
        r"""Up to ``limit`` kernel vectors in Gram coordinates, :math:`q_r = \nu_r/\sqrt{m_r}`, as the
        columns of an ``(M, k)`` float array (rows: the atoms of the laws in order)."""
        offs = np.concatenate([[0], np.cumsum([law.n_atoms for law in laws])]).astype(int)
        w = np.concatenate([law.masses for law in laws])
        cols: list[np.ndarray] = []
        for i, atoms in self.classes:  # zero total mass inside a class
            for a in atoms[1:]:
                v = np.zeros(offs[-1])
                v[offs[i] + atoms[0]] = 1.0
                v[offs[i] + a] = -1.0
                cols.append(v)
        const = [(i, atoms[0]) for (i, atoms), c in zip(self.classes, self.constant, strict=True) if c]
        for t in self.relations:  # total masses on the constant classes, on one row each
            v = np.zeros(offs[-1])
            for (i, a), tc in zip(const, t, strict=True):
                v[offs[i] + a] = float(tc)
            cols.append(v)
        cols = cols[:limit]
        if not cols:
            return np.zeros((offs[-1], 0))
        return np.stack(cols, axis=1) / np.sqrt(w)[:, None]

    def to_dict(self) -> dict[str, Any]:
        return {"constraint": self.constraint, "classes": [{"sample": i, "atoms": list(a)} for i, a in self.classes],
                "constant": list(self.constant), "relations": [[str(v) for v in r] for r in self.relations],
                "dimension": self.dimension, "sentence": self.sentence()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LawKernel:
        """The kernel from its :meth:`to_dict` (``sentence`` is derived and not read)."""
        return restore(cls, d, classes=lambda v: tuple((int(c["sample"]), tuple(c["atoms"])) for c in v),
                       relations=lambda v: tuple(tuple(Fraction(x) for x in r) for r in v))


@dataclass(frozen=True)
class HeadLawSupport:
    """Whether the head law meets Prop. 8's hypothesis, and the kernel proved where it does not.

    Attributes
    ----------
    law : str
        The law in words (``"gaussian, q_scale 1, b_scale 0"``, ``"the 12 heads given"``).
    open_set : bool
        The support of the law contains a non-empty open set of ``(Q, b)`` (a density on all
        of ``(Q, b)``-space, or on an open box): Prop. 8 applies.
    why : str
        Why it does not (``""`` when it does).
    given : bool
        The law is the finitely many heads given: its NTK is their Gram.
    kernel : LawKernel or None
        A kernel of the law's NTK proved from the data (None: none found).
    """

    law: str
    open_set: bool
    why: str = ""
    given: bool = False
    kernel: LawKernel | None = None
    zero_q: bool = False
    zero_b: bool = False

    def for_laws(self, laws: Sequence[Empirical]) -> HeadLawSupport:
        """The same law for other samples (a subset): its kernel recomputed for them."""
        if self.open_set:
            return self
        return replace(self, kernel=constant_feature_kernel(laws, zero_q=self.zero_q, zero_b=self.zero_b))

    def against(self, g: Any) -> tuple[str, str]:
        """The cross-check's ``(agreement, message)`` for weakly independent CGFs under a law without
        an open set (Prop. 8 is not invoked): a proved kernel agrees with a Gram that is not certified
        positive (the drawn heads satisfy the same constraint) and contradicts one that is."""
        said = f"weakly independent CGFs, but {self.brief()}; the Gram of these heads is {g.status_text()}"
        if not self.singular:
            return "no prediction", said + "."
        if g.certified_positive:
            return "disagrees", said + ", which contradicts the kernel proved."
        return "agrees", said + ", as the kernel proved says."

    @property
    def singular(self) -> bool:
        """The law's NTK is proved singular (for every head of the law)."""
        return self.kernel is not None and self.kernel.dimension > 0

    def sentence(self) -> str:
        """One sentence for the report: Prop. 8 applies, or why not and what is proved instead."""
        if self.open_set:
            return f"{self.law}: a density on (Q, b), seed 003 Prop. 8 applies"
        head = f"{self.law}: {self.why}, so seed 003 Prop. 8 does not apply"
        if self.singular:
            assert self.kernel is not None
            return f"{head}; singular for every head of this law, proved: {self.kernel.sentence()}"
        if self.given:
            return f"{head}; the NTK of these heads is their Gram"
        return f"{head}; the injectivity of this head law's NTK is not decided"

    def brief(self) -> str:
        """:meth:`sentence` in a few words (for the cross-check's message)."""
        if self.open_set:
            return "seed 003 Prop. 8 applies (a density on (Q, b))"
        head = f"seed 003 Prop. 8 does not apply ({self.why})"
        if self.singular:
            assert self.kernel is not None
            return f"{head}; the law's NTK is proved singular ({self.kernel.short()})"
        if self.given:
            return f"{head}; the NTK of these heads is their Gram"
        return f"{head}; the injectivity of the law's NTK is not decided"

    def to_dict(self) -> dict[str, Any]:
        return {"law": self.law, "open_set": self.open_set, "why": self.why, "given": self.given,
                "zero_q": self.zero_q, "zero_b": self.zero_b,
                "kernel": None if self.kernel is None else self.kernel.to_dict(), "singular": self.singular,
                "sentence": self.sentence()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeadLawSupport:
        """The record from its :meth:`to_dict` (``singular`` and ``sentence`` are derived and not read)."""
        return restore(cls, d, kernel=lambda k: None if k is None else LawKernel.from_dict(k))


def _mean(law: Empirical) -> tuple[Fraction, ...]:
    """The exact mean of a law (its atoms as given, its exact masses)."""
    rows = law.rational_atoms()
    return tuple(sum((m * x[k] for m, x in zip(law.weights, rows, strict=True)), Fraction(0))
                 for k in range(law.dim))


def constant_feature_kernel(laws: Sequence[Empirical], *, zero_q: bool, zero_b: bool) -> LawKernel | None:
    r"""The kernel of :math:`K_\rho` for a law whose heads all have ``Q = 0`` (``zero_q``) and/or ``b = 0``
    (``zero_b``), from the constant-feature classes (module docstring); None when neither holds.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkcheck.cgf import as_laws
    >>> laws = as_laws([np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [2.0, 0.0]])])
    >>> k = constant_feature_kernel(laws, zero_q=False, zero_b=True)
    >>> k.dimension, [str(v) for v in k.relations[0]]
    (1, ['-2', '1'])
    """
    if not (zero_q or zero_b):
        return None
    classes: list[tuple[int, tuple[int, ...]]] = []
    constant: list[bool] = []
    for i, law in enumerate(laws):
        if zero_q:  # one class per sample; constant (the mean) when b = 0 too
            classes.append((i, tuple(range(law.n_atoms))))
            constant.append(zero_b)
            continue
        rows = law.rational_atoms() if law.rounded else exact_rows(law.atoms)
        at0 = [a for a, x in enumerate(rows) if all(v == 0 for v in x)]
        if at0:  # b = 0: the atom at the origin (one per sample: atoms are distinct) has the mean
            classes.append((i, (at0[0],)))
            constant.append(True)
    means = [_mean(laws[i]) for (i, _), c in zip(classes, constant, strict=True) if c]
    d = laws[0].dim
    relations = _nullspace([[m[k] for m in means] for k in range(d)], len(means)) if means else []
    dim = sum(len(a) - 1 for _, a in classes) + len(relations)
    return LawKernel("Q = 0, b = 0" if zero_q and zero_b else "Q = 0" if zero_q else "b = 0", tuple(classes),
                     tuple(constant), tuple(tuple(r) for r in relations), dim)


def _all_zero(view: np.ndarray, exact: Any, count: int) -> bool:
    """Every entry of every head zero, exactly: a non-zero double is a non-zero value; when every
    double is zero, the values given are read (a long double 1e-400 has the double 0)."""
    if np.any(view != 0):
        return False
    return all(v == 0 for h in range(count) for v in np.asarray(exact(h), dtype=object).reshape(-1))


def law_support(laws: Sequence[Empirical], *, q_scale: float = 1.0, b_scale: float = 1.0, dist: str = "gaussian",
                heads: Heads | None = None) -> HeadLawSupport:
    """Check Prop. 8's hypothesis on the head law of a screening, and prove its kernel where it fails.

    Parameters
    ----------
    laws : list of Empirical
    q_scale, b_scale, dist
        The law heads are drawn from (:func:`~ntkcheck.ntk.gram_matrix.features.init_heads`): Gaussian
        entries have a density on all of ``(Q, b)``-space and uniform ones on an open box, when both
        scales are positive; a zero scale pins ``Q`` or ``b`` to zero.
    heads : Heads, optional
        Explicit heads: the law is those ``H`` heads (no open set); they are checked exactly for
        ``Q = 0`` or ``b = 0`` on every head.

    Returns
    -------
    HeadLawSupport
    """
    if heads is not None:
        zq = _all_zero(heads.Q, heads.rational_Q, heads.count)
        zb = _all_zero(heads.b, heads.rational_b, heads.count)
        return HeadLawSupport(f"the {heads.count} heads given", False,
                              "the heads given are finitely many (an atomic law), no open set of (Q, b)", True,
                              constant_feature_kernel(laws, zero_q=zq, zero_b=zb), zq, zb)
    zq, zb = float(q_scale) == 0.0, float(b_scale) == 0.0
    law = f"{dist}, q_scale {q_scale:g}, b_scale {b_scale:g}"
    if not (zq or zb):
        return HeadLawSupport(law, True)
    pinned = "Q = 0 and b = 0" if zq and zb else "Q = 0" if zq else "b = 0"
    return HeadLawSupport(law, False, f"{pinned} on every head (a zero scale), no open set of (Q, b)", False,
                          constant_feature_kernel(laws, zero_q=zq, zero_b=zb), zq, zb)
