r"""Token distributions: empirical token sets and the closed-form families of seed 003 section 3.3.

Every family is a frozen dataclass implementing :class:`Family`: its CGF
:math:`\Lambda(a) = \log E e^{\langle a, Y\rangle}` in float64 (multivariate, batched),
along a direction in mpmath and in sympy, its exact or ball Taylor coefficients along a
direction, the domain of its MGF, whether its support is compact, and sampling.

Parameters given as ``Fraction``, ``int`` or decimal ``str`` are exact; a ``float`` is
read as the dyadic rational it is (``0.1`` is not 1/10). The CLI parses decimals
exactly, so ``--radii 1.01`` means 101/100.

References: seed 003 Ex. 3-6, Prop. 11-12, Remark 5; MATH.md section 4.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp
from flint import arb, fmpq

from . import cgf as _cgf
from ._validate import as_token_set
from .errors import DomainError, InputError

__all__ = ["Family", "Empirical", "VandermondeForm"]


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
        wv = np.asarray([float(v) for v in w])
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
        syms = sp.symbols(f"a0:{self.dim}")
        wq = [sp.Rational(_cgf.to_fraction(v).numerator, _cgf.to_fraction(v).denominator) for v in w]
        return self.cgf_sympy(syms).subs({s: wk * t for s, wk in zip(syms, wq)})

    @abstractmethod
    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        """Taylor coefficients ``c_0..c_K`` of :math:`\\Lambda^w(t)` (``c_k = kappa_k / k!``).

        ``exact=True``: FLINT ``fmpq`` (exact for the parameters as given).
        ``exact=False``: Arb balls at ``prec`` bits, rigorous enclosures.
        """

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


def _direction(w: Any, d: int) -> list[Fraction]:
    try:
        wf = [_cgf.to_fraction(v) for v in (w.reshape(-1) if isinstance(w, np.ndarray) else w)]
    except (TypeError, ValueError) as exc:
        raise InputError(f"direction: expected {d} numbers, got {w!r} ({exc})") from None
    if len(wf) != d:
        raise InputError(f"direction: has length {len(wf)}, the tokens have dimension {d}")
    if all(v == 0 for v in wf):
        raise InputError("direction: has zero length; a direction must be non-zero")
    return wf


@dataclass(frozen=True, eq=False)
class Empirical(Family):
    r"""Empirical law :math:`\mu = \sum_j w_j \delta_{x_j}` of a token set.

    Parameters
    ----------
    atoms : (N, d) float array
    weights : (N,) float array, optional (default ``1/N``)
    """

    atoms: np.ndarray
    weights: np.ndarray | None = None
    _w: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        x = as_token_set(self.atoms, "atoms")
        object.__setattr__(self, "atoms", x)
        object.__setattr__(self, "_w", _cgf.normalize_weights(self.weights, x.shape[0]))

    @property
    def dim(self) -> int:
        return int(self.atoms.shape[1])

    @property
    def compact(self) -> bool:
        return True

    @property
    def quadratic(self) -> bool:
        # one distinct atom: the CGF is linear
        return bool(np.all(self.atoms == self.atoms[0]))

    def cgf(self, a: Any) -> Any:
        return _cgf.log_mgf(self.atoms, a, self.weights)

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        wf = _direction(w, self.dim)
        with mpmath.workdps(dps + 10):
            tt = mpmath.mpf(t) if not isinstance(t, Fraction) else mpmath.mpf(t.numerator) / t.denominator
            z = [mpmath.fsum(mpmath.mpf(float(xk)) * (mpmath.mpf(wk.numerator) / wk.denominator) for xk, wk in zip(row, wf)) for row in self.atoms]
            s = [tt * zj for zj in z]
            m = max(s)
            tot = mpmath.fsum(mpmath.mpf(float(wj)) * mpmath.exp(sj - m) for wj, sj in zip(self._w, s))
            val = m + mpmath.log(tot)
        with mpmath.workdps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        terms = []
        wts = [sp.Rational(1, self.atoms.shape[0])] * self.atoms.shape[0] if self.weights is None else [sp.Rational(_cgf.to_fraction(float(v)).numerator, _cgf.to_fraction(float(v)).denominator) for v in self._w]
        for wj, row in zip(wts, self.atoms):
            score = sp.Add(*[sp.Rational(_cgf.to_fraction(float(xk)).numerator, _cgf.to_fraction(float(xk)).denominator) * ak for xk, ak in zip(row, a)])
            terms.append(wj * sp.exp(score))
        return sp.log(sp.Add(*terms))

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        wf = _direction(w, self.dim)
        z = _cgf._project_exact(self.atoms, wf)
        wts = None if self.weights is None else list(self._w)
        if exact:
            return _cgf.series_log_mgf_exact(z, wts, K)
        return _cgf.series_log_mgf_arb(z, wts, K, prec)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        if N < 1:
            raise DomainError(f"N={N}: need at least one token")
        idx = rng.choice(self.atoms.shape[0], size=N, p=self._w)
        return self.atoms[idx].copy()


# keep the imported names referenced (used by subclasses defined below)
_ = (arb, fmpq)
