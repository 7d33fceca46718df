r"""Token distributions: the derived families of seed 003 section 3.3 and the registry by name.

What lives here: the laws built from other laws (:class:`GaussianConvolution`,
:class:`Translation`, :class:`EmpiricalConvolution`) and :func:`family_from_name`, which
builds any family from its CLI name. The interface is in :mod:`ntkcheck.cgf.base`, the
empirical law in :mod:`ntkcheck.cgf.empirical`, the closed forms in
:mod:`ntkcheck.cgf.compact` and :mod:`ntkcheck.cgf.gaussian`, the shared helpers in
``ntkcheck.cgf._series``.

References: seed 003 Ex. 3-6, Prop. 11-12, Remark 5; theory/seed-examples.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp

from .._precision import mp_dps
from .._validate import rational_direction as _direction
from ..errors import DomainError, InputError
from . import core as _cgf
from ._series import (
    _arb_context,
    _arbq,
    _args,
    _check_dps,
    _check_K,
    _check_N,
    _dot,
    _finish,
    _float,
    _fq,
    _is_zero,
    _mp,
    _qp,
    _quad_form,
    _repr,
    _sp,
    _symbols,
    _t_fraction,
    _vector,
)
from .base import Family, VandermondeForm
from .compact import Dirac, UniformCube
from .empirical import Empirical
from .gaussian import Gaussian, GaussianMixture2, Laplace, _CovMixin

__all__ = [
    "GaussianConvolution",
    "Translation",
    "EmpiricalConvolution",
    "FAMILY_NAMES",
    "family_from_name",
]


def _base_modp(base: Family, wf: Sequence[Fraction], K: int, p: int) -> list[int]:
    """``base``'s coefficients mod ``p``; empirical laws straight from their atoms (no long rationals)."""
    if isinstance(base, Empirical):
        return list(_cgf.series_log_mgf_modp(base.projected(wf), base.exact_weights(), K, p))
    return list(base.taylor_1d_modp(wf, K, p))


def _check_base(base: Any, what: str) -> Family:
    if not isinstance(base, Family):
        raise InputError(f"{what}: base must be a Family, got {type(base).__name__}")
    return base


def _shift_coefficient(c: list[Any], k: int, v: Fraction, exact: bool, prec: int) -> list[Any]:
    out = list(c)
    if k < len(out):
        if exact:
            out[k] = out[k] + _fq(v)
        else:
            with _arb_context(prec, len(out) - 1):
                out[k] = out[k] + _arbq(v)
    return out


@dataclass(frozen=True, repr=False)
class GaussianConvolution(_CovMixin, Family):
    r"""The law of :math:`X + Z`, :math:`X \sim` ``base``, :math:`Z \sim N(0, \Sigma')` independent (seed 003 Prop. 12).

    .. math::

        \Lambda(a) = \Lambda_{\text{base}}(a) + \tfrac12 a^T\Sigma' a.

    Only the :math:`t^2` coefficient changes, so the base's Prop. 11 form survives from
    :math:`m_0 = \max(m_0^{\text{base}}, 2)` (powers :math:`\ge 4`). Not compact unless
    :math:`\Sigma' = 0`.

    Parameters
    ----------
    base : Family
    cov : (d, d) symmetric positive semidefinite matrix, ``d = base.dim``
    """

    base: Family
    cov: tuple[tuple[Fraction, ...], ...]
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_base(self.base, "GaussianConvolution")
        self._set_cov(self.cov, self.base.dim)

    def __repr__(self) -> str:
        return _repr(self, ["base", "cov"])

    @property
    def dim(self) -> int:
        return self.base.dim

    @property
    def compact(self) -> bool:
        return self.base.compact and _is_zero(self.cov)

    @property
    def quadratic(self) -> bool:
        return self.base.quadratic

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        out = np.asarray(self.base.cgf(arr), dtype=np.float64) + _quad_form(arr, self._S) / 2.0
        return _finish(out, single, "GaussianConvolution")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        b = self.base.cgf_1d_mp(tf, wf, dps + 10)
        with mp_dps(dps + 10):
            val = b + _mp(self._s(wf) * tf * tf / 2)
        with mp_dps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return self.base.cgf_sympy(syms) + self._quad_sympy(syms) / 2

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        wf = _direction(w, self.dim)
        return self.base.cgf_1d_sympy(t, wf) + _sp(self._s(wf)) * t**2 / 2

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = self.base.taylor_1d(wf, K, exact=exact, prec=prec)
        return _shift_coefficient(c, 2, self._s(wf) / 2, exact, prec)

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = _base_modp(self.base, wf, K, p)
        if K >= 2:
            c[2] = (c[2] + _qp(self._s(wf) / 2, p)) % p
        return c

    def mgf_radius(self, w: Any) -> float:
        return self.base.mgf_radius(w)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self.base.sample(N, rng) + self._normal(N, rng)

    def vandermonde_form(self, w: Any) -> VandermondeForm | None:
        f = self.base.vandermonde_form(w)
        return None if f is None else VandermondeForm(tag=f.tag, lam=f.lam, m0=max(f.m0, 2))


@dataclass(frozen=True, repr=False)
class Translation(Family):
    r"""The law of :math:`X + v`, :math:`X \sim` ``base``: :math:`\Lambda(a) = \Lambda_{\text{base}}(a) + \langle v, a\rangle`.

    Never independent of its base modulo affine functions (seed 003 Ex. 6); the
    Prop. 11 form (if any) is the base's.

    Parameters
    ----------
    base : Family
    shift : (d,) numbers, ``d = base.dim``
    """

    base: Family
    shift: tuple[Fraction, ...]
    _v: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_base(self.base, "Translation")
        v = _vector(self.shift, "shift", self.base.dim)
        object.__setattr__(self, "shift", v)
        object.__setattr__(self, "_v", np.array([_float(x, "shift") for x in v]))

    def __repr__(self) -> str:
        return _repr(self, ["base", "shift"])

    @property
    def dim(self) -> int:
        return self.base.dim

    @property
    def compact(self) -> bool:
        return self.base.compact

    @property
    def quadratic(self) -> bool:
        return self.base.quadratic

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.asarray(self.base.cgf(arr), dtype=np.float64) + arr @ self._v
        return _finish(out, single, "Translation")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        b = self.base.cgf_1d_mp(tf, wf, dps + 10)
        with mp_dps(dps + 10):
            val = b + _mp(_dot(wf, self.shift) * tf)
        with mp_dps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return self.base.cgf_sympy(syms) + sp.Add(*[_sp(x) * s for x, s in zip(self.shift, syms, strict=True)])

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        wf = _direction(w, self.dim)
        return self.base.cgf_1d_sympy(t, wf) + _sp(_dot(wf, self.shift)) * t

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = self.base.taylor_1d(wf, K, exact=exact, prec=prec)
        return _shift_coefficient(c, 1, _dot(wf, self.shift), exact, prec)

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = _base_modp(self.base, wf, K, p)
        c[1] = (c[1] + _qp(_dot(wf, self.shift), p)) % p
        return c

    def mgf_radius(self, w: Any) -> float:
        return self.base.mgf_radius(w)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self.base.sample(N, rng) + self._v[None, :]

    def vandermonde_form(self, w: Any) -> VandermondeForm | None:
        return self.base.vandermonde_form(w)


@dataclass(frozen=True, eq=False, repr=False)
class EmpiricalConvolution(Family):
    r"""The law of :math:`X + Y`, :math:`X \sim` ``first``, :math:`Y \sim` ``second`` independent.

    .. math:: \Lambda = \Lambda_1 + \Lambda_2

    so :math:`\Lambda - \Lambda_1 - \Lambda_2 = 0`: the three are never weakly
    independent (seed 003 Ex. 6, Remark 5). ``cgf_sympy`` is literally the sum of the two
    expressions so that the identity cancels exactly in sympy.

    Parameters
    ----------
    first, second : Empirical of the same dimension
    """

    first: Empirical
    second: Empirical

    def __post_init__(self) -> None:
        for name in ("first", "second"):
            if not isinstance(getattr(self, name), Empirical):
                raise InputError(
                    f"EmpiricalConvolution: {name} must be an Empirical, got {type(getattr(self, name)).__name__}"
                )
        if self.first.dim != self.second.dim:
            raise InputError(
                f"EmpiricalConvolution: first has dimension {self.first.dim}, second has {self.second.dim}"
            )

    def __repr__(self) -> str:
        return (
            f"EmpiricalConvolution(first=<{self.first.atoms.shape[0]} atoms>, "
            f"second=<{self.second.atoms.shape[0]} atoms>, dim={self.dim})"
        )

    @property
    def dim(self) -> int:
        return self.first.dim

    @property
    def compact(self) -> bool:
        return True

    @property
    def quadratic(self) -> bool:
        return self.first.quadratic and self.second.quadratic

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        out = np.asarray(self.first.cgf(arr)) + np.asarray(self.second.cgf(arr))
        return _finish(out, single, "EmpiricalConvolution")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        with mp_dps(dps + 10):
            val = self.first.cgf_1d_mp(tf, wf, dps + 10) + self.second.cgf_1d_mp(tf, wf, dps + 10)
        with mp_dps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return self.first.cgf_sympy(syms) + self.second.cgf_sympy(syms)

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c1 = self.first.taylor_1d(wf, K, exact=exact, prec=prec)
        c2 = self.second.taylor_1d(wf, K, exact=exact, prec=prec)
        if exact:
            return [x + y for x, y in zip(c1, c2, strict=True)]
        with _arb_context(prec, K):
            return [x + y for x, y in zip(c1, c2, strict=True)]

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        a, b = _base_modp(self.first, wf, K, p), _base_modp(self.second, wf, K, p)
        return [(x + y) % p for x, y in zip(a, b, strict=True)]

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self.first.sample(N, rng) + self.second.sample(N, rng)

    def as_empirical(self, strict: bool = True) -> Empirical:
        r"""The same law as an :class:`Empirical` on the pairwise sums :math:`x_i + y_j`, weights :math:`w_i v_j`.

        The masses are exact rational products. ``strict=True`` (default): the sums are exact,
        so the result is exactly ``first * second`` (its atoms are rational where a sum is not
        a double: :attr:`Empirical.rounded`). ``strict=False``: the sums rounded to float64, a
        different law when one of them rounds (the doubles are then the values given).
        """
        wts = [wi * vj for wi in self.first.weights for vj in self.second.weights]  # exact rationals
        x, y = self.first.atoms, self.second.atoms
        sums = (x[:, None, :] + y[None, :, :]).reshape(-1, self.dim)
        if not strict:
            return Empirical(sums, wts)
        exact = np.array([[a + b for a, b in zip(xi, yj, strict=True)] for xi in self.first.rational_atoms()
                          for yj in self.second.rational_atoms()], dtype=object)
        if not (self.first.rounded or self.second.rounded) and all(
                Fraction(float(v)) == v for v in exact.reshape(-1)):
            return Empirical(sums, wts)  # every sum is a double: keep the float array
        return Empirical(exact, wts)


# ------------------------------------------------------------------------- registry

#: name -> (class, required parameters, optional parameters)
_REGISTRY: dict[str, tuple[type[Family], tuple[str, ...], tuple[str, ...]]] = {
    "empirical": (Empirical, ("atoms",), ("weights",)),
    "dirac": (Dirac, ("point",), ()),
    "uniform-cube": (UniformCube, ("radius", "dim"), ()),
    "laplace": (Laplace, ("cov",), ()),
    "gaussian": (Gaussian, ("mean", "cov"), ()),
    "gaussian-mixture": (GaussianMixture2, ("m", "cov"), ()),
    "gaussian-convolution": (GaussianConvolution, ("base", "cov"), ()),
    "translation": (Translation, ("base", "shift"), ()),
    "empirical-convolution": (EmpiricalConvolution, ("first", "second"), ()),
}

#: The names :func:`family_from_name` accepts.
FAMILY_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def family_from_name(name: str, **params: Any) -> Family:
    """Build a family from its CLI name and keyword parameters.

    ===========================  =========================================================
    name                         parameters
    ===========================  =========================================================
    ``empirical``                ``atoms`` (N, d), optional ``weights`` (N,)
    ``dirac``                    ``point`` (d,)
    ``uniform-cube``             ``radius`` > 0, ``dim`` >= 1
    ``laplace``                  ``cov`` (d, d) PSD
    ``gaussian``                 ``mean`` (d,), ``cov`` (d, d) PSD
    ``gaussian-mixture``         ``m`` (d,), ``cov`` (d, d) PSD
    ``gaussian-convolution``     ``base`` (a Family), ``cov`` (d, d) PSD
    ``translation``              ``base`` (a Family), ``shift`` (d,)
    ``empirical-convolution``    ``first``, ``second`` (Empirical)
    ===========================  =========================================================

    Names are case-insensitive; ``_`` and ``-`` are interchangeable. Numbers may be
    ``Fraction``, ``int``, decimal ``str`` (exact) or ``float`` (its dyadic value).

    Examples
    --------
    >>> family_from_name("uniform-cube", radius="1/2", dim=2)
    UniformCube(radius=1/2, dim=2)
    """
    if not isinstance(name, str):
        raise DomainError(f"family name: expected a string, got {name!r}")
    key = name.strip().lower().replace("_", "-")
    if key not in _REGISTRY:
        raise DomainError(f"unknown family {name!r}; valid names: {', '.join(FAMILY_NAMES)}")
    cls, required, optional = _REGISTRY[key]
    missing = [p for p in required if p not in params]
    extra = [p for p in params if p not in required + optional]
    if missing or extra:
        expected = ", ".join(list(required) + [f"{p} (optional)" for p in optional])
        got = ", ".join(sorted(params)) or "nothing"
        raise InputError(f"family {key!r} takes parameters {expected}; got {got}")
    return cls(**params)
