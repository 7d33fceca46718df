r"""The interface of a token distribution: :class:`Family` and the Prop. 11 form :class:`VandermondeForm`.

Every family is a frozen dataclass implementing :class:`Family`: its CGF
:math:`\Lambda(a) = \log E e^{\langle a, Y\rangle}` in float64 (multivariate, batched),
along a direction in mpmath and in sympy, its exact or ball Taylor coefficients along a
direction, the domain of its MGF, whether its support is compact, and sampling.

References: seed 003 Prop. 8, Prop. 11; theory/cgf-independence.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp

from .._validate import rational_direction as _direction
from ._series import _reduce_modp

__all__ = [
    "Family",
    "VandermondeForm",
]


@dataclass(frozen=True)
class VandermondeForm:
    r"""The form of seed 003 Prop. 11 along a direction.

    :math:`\Lambda^w(t) = q(t) + \sum_{m \ge m_0} a_m \lambda^m t^{2m}` with ``q`` a polynomial
    of degree ``< 2 m0`` and coefficients :math:`a_m \ne 0` that depend only on ``tag``
    (the same for every member of the family along the same direction).
    """

    tag: str
    lam: Fraction
    m0: int


class Family(ABC):
    """A token distribution on :math:`\\mathbb R^d` with a computable CGF.

    Subclasses are frozen dataclasses. Directions ``w`` are sequences of numbers
    (rationals are kept exact); they are not normalised (the properties do not depend on
    the length of ``w``).
    """

    @property
    @abstractmethod
    def dim(self) -> int:
        """Dimension ``d`` of the tokens."""

    @property
    @abstractmethod
    def compact(self) -> bool:
        """Whether the support is compact (seed 003 Prop. 8 needs it)."""

    @property
    def quadratic(self) -> bool:
        """Whether the CGF is a polynomial of degree <= 2 (Dirac, Gaussian)."""
        return False

    @abstractmethod
    def cgf(self, a: Any) -> Any:
        """:math:`\\Lambda(a)` for ``a`` of shape (d,) (float) or (m, d) (array (m,))."""

    def cgf_1d(self, t: Any, w: Any) -> Any:
        """:math:`\\Lambda^w(t) = \\Lambda(t w)` for scalar or array ``t``."""
        # through _direction: decimal strings / Fractions accepted, length and zero checked
        wv = np.asarray([float(v) for v in _direction(w, self.dim)])
        tt = np.asarray(t, dtype=np.float64)
        out = self.cgf(tt.reshape(-1, 1) * wv[None, :])
        return out.reshape(tt.shape) if tt.ndim else float(np.asarray(out).reshape(-1)[0])

    @abstractmethod
    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        """:math:`\\Lambda^w(t)` in mpmath at ``dps`` digits."""

    @abstractmethod
    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        """:math:`\\Lambda(a)` as a sympy expression in the symbols ``a`` (length d)."""

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        """:math:`\\Lambda^w(t)` as a sympy expression in ``t``."""
        wf = _direction(w, self.dim)
        syms = sp.symbols(f"a0:{self.dim}")
        wq = [sp.Rational(v.numerator, v.denominator) for v in wf]
        return self.cgf_sympy(syms).subs({s: wk * t for s, wk in zip(syms, wq, strict=True)})

    @abstractmethod
    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        """Taylor coefficients ``c_0..c_K`` of :math:`\\Lambda^w(t)` (``c_k = kappa_k / k!``).

        ``exact=True``: FLINT ``fmpq`` (exact for the parameters as given).
        ``exact=False``: Arb balls at ``prec`` bits, rigorous enclosures.
        """

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        """The exact coefficients ``c_0..c_K`` of :math:`\\Lambda^w` reduced modulo the prime ``p``.

        Raises ZeroDivisionError when ``p`` divides a denominator (take another prime).
        The default reduces :meth:`taylor_1d`; closed forms override it with running
        products mod ``p`` (no long rationals).
        """
        return _reduce_modp(self.taylor_1d(w, K, exact=True), p)

    def cumulants_1d(self, w: Any, K: int) -> list[Fraction]:
        """Exact cumulants :math:`\\kappa_1..\\kappa_K` of :math:`\\langle w, Y\\rangle`."""
        c = self.taylor_1d(w, K, exact=True)
        out, fact = [], 1
        for k in range(1, K + 1):
            fact *= k
            out.append(Fraction(int(c[k].p), int(c[k].q)) * fact)
        return out

    def mgf_radius(self, w: Any) -> float:
        """Radius ``R`` with the MGF of :math:`\\langle w, Y\\rangle` finite for ``|t| < R`` (inf if entire)."""
        return float("inf")

    @abstractmethod
    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        """``N`` i.i.d. tokens, shape (N, d)."""

    def vandermonde_form(self, w: Any) -> VandermondeForm | None:
        """The Prop. 11 form along ``w``, or None when the family does not have one."""
        return None

