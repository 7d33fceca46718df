r"""The laws with memoised exact views, shared by :mod:`ntkcheck.ntk.prop8.relations` and
:mod:`ntkcheck.ntk.prop8.structure`: lex-sorted atoms, rational atoms and exact means (float64
atoms taken as the rationals they are).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ...cgf import Empirical

# ---------------------------------------------------------------- exact views of the laws


def _lex_order(X: np.ndarray) -> np.ndarray:
    """Row order of ``X`` sorted lexicographically (first coordinate most significant). Lex
    order on R^d is compatible with addition, so translates and sums keep it."""
    return np.lexsort(X.T[::-1])


def _exact_mean(law: Empirical) -> tuple[Fraction, ...]:
    r""":math:`\sum_a m_a x_a` exactly: each double is ``M 2^e`` with an integer ``M`` (``frexp``),
    so a coordinate is an integer combination of shifted mantissas over a common
    denominator, summed in Python integers (a law given at non-double values: in ``Fraction``)."""
    if law.rounded:
        return tuple(sum((w * x[k] for w, x in zip(law.weights, law.rational_atoms(), strict=True)), Fraction(0))
                     for k in range(law.dim))
    mant, ex = np.frexp(law.atoms)
    M = (mant * 2.0**53).astype(np.int64)  # exact: |mant| in [0.5, 1)
    ex = ex.astype(np.int64) - 53
    den = 1
    for w in law.weights:
        den = den * w.denominator // math.gcd(den, w.denominator)
    W = [w.numerator * (den // w.denominator) for w in law.weights]
    out = []
    for k in range(law.dim):
        col_m, col_e = M[:, k].tolist(), ex[:, k].tolist()
        E = min(col_e)
        num = sum(wa * (ma << (ea - E)) for wa, ma, ea in zip(W, col_m, col_e, strict=True))
        out.append(Fraction(num, den) * (Fraction(2) ** E))
    return tuple(out)


@dataclass(eq=False)
class _Laws:
    """The laws with memoised exact views (lex-sorted atoms, rational atoms and means)."""

    laws: list[Empirical]
    _sorted: dict[int, tuple[np.ndarray, tuple[Fraction, ...]]] = field(default_factory=dict)
    _fr: dict[int, list[tuple[Fraction, ...]]] = field(default_factory=dict)
    _mean: dict[int, tuple[Fraction, ...]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.laws)

    @property
    def d(self) -> int:
        return self.laws[0].dim

    def sorted(self, i: int) -> tuple[np.ndarray, tuple[Fraction, ...]]:
        """Atoms in lex order and their exact masses in the same order (the float64 atoms; the order
        of the exact atoms when the law's values are not doubles: then use :meth:`sorted_exact`)."""
        got = self._sorted.get(i)
        if got is None:
            law = self.laws[i]
            if law.rounded:
                fr = self.fractions(i)
                o = np.array(sorted(range(law.n_atoms), key=lambda a: fr[a]), dtype=np.intp)
            else:
                o = _lex_order(law.atoms)
            got = (law.atoms[o], tuple(law.weights[int(k)] for k in o))
            self._sorted[i] = got
        return got

    def sorted_exact(self, i: int) -> list[tuple[Fraction, ...]]:
        """The exact atoms in lex order (the order of :meth:`sorted`)."""
        return sorted(self.fractions(i))

    def fractions(self, i: int) -> list[tuple[Fraction, ...]]:
        """The atoms at their exact values (``Fraction`` tuples), in the law's order."""
        got = self._fr.get(i)
        if got is None:
            got = list(self.laws[i].rational_atoms())
            self._fr[i] = got
        return got

    def mean(self, i: int) -> tuple[Fraction, ...]:
        """The exact mean :math:`\\sum_a m_a x_a` (rational; integer arithmetic per coordinate)."""
        got = self._mean.get(i)
        if got is None:
            got = _exact_mean(self.laws[i])
            self._mean[i] = got
        return got

    def alpha(self, c: Sequence[Fraction]) -> tuple[Fraction, ...]:
        r"""The linear part of :math:`\sum_i c_i\Lambda_i`: :math:`\alpha = \sum_i c_i\,\mathrm{mean}_i`
        (the gradient at 0; exact)."""
        acc = [Fraction(0)] * self.d
        for i, ci in enumerate(c):
            if ci != 0:
                m = self.mean(i)
                for k in range(self.d):
                    acc[k] += ci * m[k]
        return tuple(acc)
