r"""Closed-form families with a covariance: :class:`Laplace`, :class:`Gaussian`, :class:`GaussianMixture2`.

The covariance parameter (exact symmetric PSD matrix, float copy, square-root factor) is
handled by the shared mixin ``_CovMixin``.

References: seed 003 Ex. 4-6, Prop. 11; theory/seed-examples.md.
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
    _fmat,
    _fq,
    _is_zero,
    _log_cosh,
    _matrix,
    _mp,
    _mp_log_cosh,
    _qp,
    _quad,
    _quad_form,
    _repr,
    _sp,
    _sqrt_factor,
    _symbols,
    _t_fraction,
    _vector,
)
from .base import Family, VandermondeForm

__all__ = [
    "Laplace",
    "Gaussian",
    "GaussianMixture2",
]


class _CovMixin:
    """Shared handling of a covariance parameter ``cov`` (exact tuple, float copy, factor)."""

    cov: tuple[tuple[Fraction, ...], ...]
    _S: np.ndarray
    _L: np.ndarray

    def _set_cov(self, cov: Any, d: int | None) -> None:
        q = _matrix(cov, "cov", d)
        s = _fmat(q, "cov")
        object.__setattr__(self, "cov", q)
        object.__setattr__(self, "_S", s)
        object.__setattr__(self, "_L", _sqrt_factor(s))

    def _s(self, wf: Sequence[Fraction]) -> Fraction:
        return _quad(wf, self.cov)

    def _normal(self, N: int, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((int(N), self._S.shape[0])) @ self._L.T

    def _quad_sympy(self, syms: Sequence[sp.Symbol]) -> sp.Expr:
        n = len(syms)
        return sp.Add(*[_sp(self.cov[i][j]) * syms[i] * syms[j] for i in range(n) for j in range(n)])


@dataclass(frozen=True, repr=False)
class Laplace(_CovMixin, Family):
    r"""Symmetric multivariate Laplace law with covariance :math:`\Sigma` (seed 003 Ex. 4).

    :math:`Y = \sqrt{E} Z`, :math:`E \sim \mathrm{Exp}(1)`, :math:`Z \sim N(0, \Sigma)`:

    .. math::

        \Lambda(a) = -\log\Big(1 - \tfrac12 a^T\Sigma a\Big) \quad (a^T\Sigma a < 2), \qquad
        \Lambda^w(t) = \sum_{m\ge1} \frac{s^m}{m 2^m} t^{2m}, \quad s = w^T\Sigma w,

    finite for :math:`|t| < \sqrt{2/s}`. Prop. 11 form with :math:`\lambda = s`.
    The support is not compact (unless :math:`\Sigma = 0`).

    Parameters
    ----------
    cov : (d, d) symmetric positive semidefinite matrix (exact rationals)
    """

    cov: tuple[tuple[Fraction, ...], ...]
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._set_cov(self.cov, None)

    def __repr__(self) -> str:
        return _repr(self, ["cov"])

    @property
    def dim(self) -> int:
        return len(self.cov)

    @property
    def compact(self) -> bool:
        return _is_zero(self.cov)

    @property
    def quadratic(self) -> bool:
        return _is_zero(self.cov)

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        q = _quad_form(arr, self._S)
        if not np.all(q < 2.0):
            i = int(np.argmax(np.where(np.isfinite(q), q, np.inf)))
            raise DomainError(
                f"Laplace: a^T Sigma a = {q[i]:.6g} >= 2 at a = {arr[i].tolist()}; "
                "the MGF is finite only for a^T Sigma a < 2"
            )
        return _finish(-np.log1p(-q / 2.0), single, "Laplace")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        u = self._s(wf) * tf * tf / 2
        if u >= 1:
            raise DomainError(
                f"Laplace: t = {float(tf):.6g} is outside the MGF domain |t| < {self.mgf_radius(wf):.6g}"
            )
        with mp_dps(dps + 10):
            val = -mpmath.log1p(-_mp(u))
        with mp_dps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return -sp.log(1 - self._quad_sympy(syms) / 2)

    def _coef(self, s: Fraction, m: int) -> Fraction:
        return s**m / (m * 2**m)

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        s = self._s(_direction(w, self.dim))
        if exact:
            out = [fmpq(0)] * (K + 1)
            half, pw = _fq(s) / 2, fmpq(1)
            for m in range(1, K // 2 + 1):
                pw *= half  # (s/2)^m / m, by running products
                out[2 * m] = pw / m
            return out
        with _arb_context(prec, K):
            outa = [arb(0)] * (K + 1)
            halfa, pwa = _arbq(s) / 2, arb(1)
            for m in range(1, K // 2 + 1):
                pwa *= halfa
                outa[2 * m] = pwa / m
            return outa

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        half = _qp(self._s(_direction(w, self.dim)) / 2, p)
        out = [0] * (K + 1)
        pw = 1
        for m in range(1, K // 2 + 1):
            pw = pw * half % p
            out[2 * m] = pw * pow(m, -1, p) % p
        return out

    def mgf_radius(self, w: Any) -> float:
        s = self._s(_direction(w, self.dim))
        return float("inf") if s == 0 else float(Fraction(2) / s) ** 0.5

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        e = rng.exponential(size=int(N))
        return np.sqrt(e)[:, None] * self._normal(N, rng)

    def vandermonde_form(self, w: Any) -> VandermondeForm:
        return VandermondeForm(tag="laplace", lam=self._s(_direction(w, self.dim)), m0=1)


@dataclass(frozen=True, repr=False)
class Gaussian(_CovMixin, Family):
    r"""Gaussian :math:`N(m, \Sigma)`: :math:`\Lambda(a) = \langle m, a\rangle + \tfrac12 a^T\Sigma a`.

    Quadratic CGF, so modulo affine functions only :math:`\Sigma` counts: Gaussians
    sharing :math:`\Sigma` are never independent, and ``n > d(d+1)/2`` of them never are
    (seed 003 Ex. 6). Not compact (unless :math:`\Sigma = 0`).

    Parameters
    ----------
    mean : (d,) numbers
    cov : (d, d) symmetric positive semidefinite matrix
    """

    mean: tuple[Fraction, ...]
    cov: tuple[tuple[Fraction, ...], ...]
    _m: np.ndarray = field(init=False, repr=False, compare=False)
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = _vector(self.mean, "mean")
        object.__setattr__(self, "mean", m)
        object.__setattr__(self, "_m", np.array([_float(v, "mean") for v in m]))
        self._set_cov(self.cov, len(m))

    def __repr__(self) -> str:
        return _repr(self, ["mean", "cov"])

    @property
    def dim(self) -> int:
        return len(self.mean)

    @property
    def compact(self) -> bool:
        return _is_zero(self.cov)

    @property
    def quadratic(self) -> bool:
        return True

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr @ self._m + _quad_form(arr, self._S) / 2.0
        return _finish(out, single, "Gaussian")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        val = _dot(wf, self.mean) * tf + self._s(wf) * tf * tf / 2
        with mp_dps(dps):
            return _mp(val)

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return sp.Add(*[_sp(x) * s for x, s in zip(self.mean, syms, strict=True)]) + self._quad_sympy(syms) / 2

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = [Fraction(0), _dot(wf, self.mean), self._s(wf) / 2] + [Fraction(0)] * max(0, K - 2)
        c = c[: K + 1]
        if exact:
            return [_fq(v) for v in c]
        with _arb_context(prec, K):
            return [_arbq(v) for v in c]

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = [0, _qp(_dot(wf, self.mean), p), _qp(self._s(wf) / 2, p)] + [0] * max(0, K - 2)
        return c[: K + 1]

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self._m[None, :] + self._normal(N, rng)


@dataclass(frozen=True, repr=False)
class GaussianMixture2(_CovMixin, Family):
    r"""Symmetric Gaussian mixture :math:`\tfrac12 N(m, \Sigma) + \tfrac12 N(-m, \Sigma)` (seed 003 Ex. 5).

    .. math::

        \Lambda(a) = \log\cosh\langle m, a\rangle + \tfrac12 a^T\Sigma a, \qquad
        \Lambda^w(t) = \tfrac{s}{2} t^2 + \sum_{m\ge1} h_m \mu^{2m} t^{2m},

    :math:`\mu = \langle w, m\rangle`, :math:`s = w^T\Sigma w`, :math:`h_m` the (non-zero)
    Taylor coefficients of :math:`\log\cosh`. Prop. 11 form with :math:`\lambda = \mu^2`
    from :math:`m_0 = 2` (the :math:`t^2` coefficient mixes in :math:`s`).

    Parameters
    ----------
    m : (d,) numbers, the mean of the first component
    cov : (d, d) symmetric positive semidefinite matrix
    """

    m: tuple[Fraction, ...]
    cov: tuple[tuple[Fraction, ...], ...]
    _m: np.ndarray = field(init=False, repr=False, compare=False)
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mv = _vector(self.m, "m")
        object.__setattr__(self, "m", mv)
        object.__setattr__(self, "_m", np.array([_float(v, "m") for v in mv]))
        self._set_cov(self.cov, len(mv))

    def __repr__(self) -> str:
        return _repr(self, ["m", "cov"])

    @property
    def dim(self) -> int:
        return len(self.m)

    @property
    def compact(self) -> bool:
        # Sigma = 0: the two-point law on {m, -m}
        return _is_zero(self.cov)

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            z = arr @ self._m
        if not np.all(np.isfinite(z)):
            raise InputError("GaussianMixture2: <m, a> overflows float64; rescale the arguments")
        return _finish(_log_cosh(z) + _quad_form(arr, self._S) / 2.0, single, "GaussianMixture2")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        with mp_dps(dps + 10):
            val = _mp_log_cosh(_mp(_dot(wf, self.m) * tf)) + _mp(self._s(wf) * tf * tf / 2)
        with mp_dps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        z = sp.Add(*[_sp(x) * s for x, s in zip(self.m, syms, strict=True)])
        return sp.log(sp.cosh(z)) + self._quad_sympy(syms) / 2

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        mu, s = _dot(wf, self.m), self._s(wf)
        M = K // 2
        if exact:
            h = _even_log_series_exact("cosh", M)
            out = [fmpq(0)] * (K + 1)
            mu2, pw = _fq(mu) ** 2, fmpq(1)
            for k in range(1, M + 1):
                pw *= mu2
                out[2 * k] = h[k] * pw
            if K >= 2:
                out[2] += _fq(s / 2)
            return out
        with _arb_context(prec, 2 * M + 1):
            ha = _even_log_series_arb_cached("cosh", M, int(prec))
            outa = [arb(0)] * (K + 1)
            mu2a, pwa = _arbq(mu) ** 2, arb(1)
            for k in range(1, M + 1):
                pwa *= mu2a
                outa[2 * k] = ha[k] * pwa
            if K >= 2:
                outa[2] += _arbq(s / 2)
            return outa

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        mu, s2 = _dot(wf, self.m), self._s(wf)
        M = K // 2
        h = _even_log_series_modp("cosh", M, p)
        mu2, pw = _qp(mu * mu, p), 1
        out = [0] * (K + 1)
        for k in range(1, M + 1):
            pw = pw * mu2 % p
            out[2 * k] = h[k] * pw % p
        if K >= 2:
            out[2] = (out[2] + _qp(s2 / 2, p)) % p
        return out

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        sign = rng.integers(0, 2, size=int(N)) * 2.0 - 1.0
        return sign[:, None] * self._m[None, :] + self._normal(N, rng)

    def vandermonde_form(self, w: Any) -> VandermondeForm:
        mu = _dot(_direction(w, self.dim), self.m)
        return VandermondeForm(tag="mixture", lam=mu * mu, m0=2)
