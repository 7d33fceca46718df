r"""Closed-form families with compact support: :class:`Dirac` and :class:`UniformCube`.

References: seed 003 Ex. 3, Ex. 6, Prop. 11; theory/seed-examples.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp
from flint import arb, fmpq

from .._precision import mp_dps
from .._validate import rational_direction as _direction
from ..errors import DomainError, InputError
from ._series import (
    _arb_context,
    _arbq,
    _args,
    _check_dps,
    _check_K,
    _check_N,
    _dot,
    _even_log_series_arb_cached,
    _even_log_series_exact,
    _even_log_series_modp,
    _finish,
    _float,
    _fq,
    _frac,
    _log_sinhc,
    _mp,
    _mp_log_sinhc,
    _qp,
    _repr,
    _sp,
    _symbols,
    _t_fraction,
    _vector,
    _wstr,
)
from .base import Family, VandermondeForm

__all__ = [
    "Dirac",
    "UniformCube",
]


@dataclass(frozen=True, repr=False)
class Dirac(Family):
    r"""Point mass :math:`\delta_x`: :math:`\Lambda(a) = \langle x, a\rangle` (linear).

    Single Diracs are never independent modulo affine functions (seed 003 Ex. 6).

    Parameters
    ----------
    point : (d,) numbers (exact rationals)
    """

    point: tuple[Fraction, ...]
    _x: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        p = _vector(self.point, "point")
        object.__setattr__(self, "point", p)
        object.__setattr__(self, "_x", np.array([_float(v, "point") for v in p]))

    def __repr__(self) -> str:
        return _repr(self, ["point"])

    @property
    def dim(self) -> int:
        return len(self.point)

    @property
    def compact(self) -> bool:
        return True

    @property
    def quadratic(self) -> bool:
        return True

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr @ self._x
        return _finish(out, single, "Dirac")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        z = _dot(_direction(w, self.dim), self.point) * _t_fraction(t)
        with mp_dps(dps):
            return _mp(z)

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return sp.Add(*[_sp(x) * s for x, s in zip(self.point, syms, strict=True)])

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        z = _dot(_direction(w, self.dim), self.point)
        if exact:
            return [fmpq(0), _fq(z)] + [fmpq(0)] * (K - 1)
        with _arb_context(prec, K):
            return [arb(0), _arbq(z)] + [arb(0)] * (K - 1)

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        return [0, _qp(_dot(_direction(w, self.dim), self.point), p)] + [0] * (K - 1)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return np.tile(self._x, (int(N), 1))


@dataclass(frozen=True, repr=False, init=False)
class UniformCube(Family):
    r"""Uniform law on the cube :math:`[-r, r]^d` (seed 003 Ex. 3).

    .. math::

        \Lambda(a) = \sum_{k=1}^d \log\frac{\sinh(r a_k)}{r a_k}, \qquad
        \Lambda^w(t) = \sum_{m\ge1} g_m \Big(\sum_k w_k^{2m}\Big) r^{2m} t^{2m},

    :math:`g_m = 2^{2m} B_{2m} / (2m (2m)!)` (all non-zero): the Prop. 11 form with
    :math:`\lambda = r^2`. Distinct radii give strongly independent CGFs.

    Parameters
    ----------
    radius : positive number (exact rational)
    dim : int >= 1
    """

    radius: Fraction
    _d: int
    _r: float = field(repr=False, compare=False)

    # explicit __init__: ``dim`` is the abstract property of Family, it cannot also be a field
    def __init__(self, radius: Any, dim: int) -> None:
        r = _frac(radius, "radius")
        if r <= 0:
            raise DomainError(f"radius: must be positive, got {r} (radius 0 is Dirac([0, ...]))")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise DomainError(f"dim: must be an integer >= 1, got {dim!r}")
        object.__setattr__(self, "radius", r)
        object.__setattr__(self, "_d", int(dim))
        object.__setattr__(self, "_r", _float(r, "radius"))

    def __repr__(self) -> str:
        return _repr(self, ["radius", "dim"])

    @property
    def dim(self) -> int:
        return self._d

    @property
    def compact(self) -> bool:
        return True

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            x = self._r * arr
        if not np.all(np.isfinite(x)):
            raise InputError("UniformCube: r * a overflows float64; rescale the arguments")
        return _finish(_log_sinhc(x).sum(axis=1), single, "UniformCube")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        with mp_dps(dps + 10):
            val = mpmath.fsum(_mp_log_sinhc(_mp(self.radius * wk * tf)) for wk in wf)
        with mp_dps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        r = _sp(self.radius)
        return sp.Add(*[sp.log(sp.sinh(r * s) / (r * s)) for s in _symbols(a, self.dim)])

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        # coordinates with w_k = 0 contribute log(1) = 0; substituting them would give 0/0
        r = _sp(self.radius)
        wf = _direction(w, self.dim)
        return sp.Add(*[sp.log(sp.sinh(r * _sp(wk) * t) / (r * _sp(wk) * t)) for wk in wf if wk != 0])

    def _scale(self, wf: Sequence[Fraction], m: int) -> Fraction:
        return self.radius ** (2 * m) * sum((wk ** (2 * m) for wk in wf), Fraction(0))

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        M = K // 2
        if exact:
            # r^{2m} sum_k w_k^{2m} by running products in FLINT rationals (one product per
            # order: the powers of a long rational are the cost, not the series)
            g = _even_log_series_exact("sinhc", M)
            out = [fmpq(0)] * (K + 1)
            r2, w2 = _fq(self.radius) ** 2, [_fq(wk) ** 2 for wk in wf]
            pr, pw = fmpq(1), [fmpq(1)] * len(w2)
            for m in range(1, M + 1):
                pr *= r2
                pw = [a * b for a, b in zip(pw, w2, strict=True)]
                out[2 * m] = g[m] * pr * sum(pw, fmpq(0))
            return out
        with _arb_context(prec, 2 * M + 1):
            ga = _even_log_series_arb_cached("sinhc", M, int(prec))
            outa = [arb(0)] * (K + 1)
            r2a, w2a = _arbq(self.radius) ** 2, [_arbq(wk) ** 2 for wk in wf]
            pra, pwa = arb(1), [arb(1)] * len(w2a)
            for m in range(1, M + 1):
                pra *= r2a
                pwa = [a * b for a, b in zip(pwa, w2a, strict=True)]
                outa[2 * m] = ga[m] * pra * sum(pwa, arb(0))
            return outa

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        M = K // 2
        g = _even_log_series_modp("sinhc", M, p)
        r2, w2 = _qp(self.radius**2, p), [_qp(wk * wk, p) for wk in wf]
        out = [0] * (K + 1)
        pr, pw = 1, [1] * len(w2)
        for m in range(1, M + 1):
            pr = pr * r2 % p
            pw = [a * b % p for a, b in zip(pw, w2, strict=True)]
            out[2 * m] = g[m] * pr % p * (sum(pw) % p) % p
        return out

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return rng.uniform(-self._r, self._r, size=(int(N), self.dim))

    def vandermonde_form(self, w: Any) -> VandermondeForm:
        wf = _direction(w, self.dim)
        return VandermondeForm(tag=f"uniform-cube:{_wstr(wf)}", lam=self.radius**2, m0=1)
