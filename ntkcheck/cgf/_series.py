r"""Private toolbox of the families: exact parameters, sympy/FLINT/Arb/mpmath conversions, series.

Parameters given as ``Fraction``, ``int`` or decimal ``str`` are exact; a ``float`` is
read as the dyadic rational it is (``0.1`` is not 1/10). The CLI parses decimals
exactly, so ``--radii 1.01`` means 101/100.

Also here: the even series of :math:`\log(\sinh x / x)` and :math:`\log\cosh x`
(exact, Arb, float, mpmath and mod p) shared by the uniform cube and the Gaussian mixture,
and the reduction of rationals modulo a prime.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp
from flint import arb, arb_series, fmpq, fmpq_series

from .._precision import flint_cap, flint_prec, mp_prec
from .._validate import as_arguments
from ..errors import DomainError, InputError, PrecisionError
from . import core as _cgf

# ------------------------------------------------------------------ parameter handling


def _frac(x: Any, name: str) -> Fraction:
    """Exact rational value of a parameter (Fraction, int, decimal str, float, fmpq, sympy Rational)."""
    if isinstance(x, bool):
        raise InputError(f"{name}: expected a number, got the bool {x!r}")
    if isinstance(x, sp.Rational):
        return Fraction(int(x.p), int(x.q))
    try:
        return _cgf.to_fraction(x)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise InputError(
            f"{name}: expected a finite number (Fraction, int, decimal str or float), got {x!r}"
        ) from None


def _float(f: Fraction, name: str) -> float:
    try:
        v = float(f)
    except OverflowError:
        v = float("inf")
    if not np.isfinite(v):
        raise InputError(f"{name}: {f} does not fit in float64")
    return v


def _vector(v: Any, name: str, d: int | None = None) -> tuple[Fraction, ...]:
    if isinstance(v, (str, bytes)) or np.ndim(v) != 1:
        want = f"{d}" if d is not None else "d"
        raise InputError(f"{name}: expected a vector of {want} numbers, got {v!r}")
    out = tuple(_frac(x, f"{name}[{k}]") for k, x in enumerate(v))
    if len(out) == 0:
        raise InputError(f"{name}: is empty; expected at least one coordinate")
    if d is not None and len(out) != d:
        raise InputError(f"{name}: has length {len(out)}, expected {d} (the dimension of the tokens)")
    return out


def _matrix(m: Any, name: str, d: int | None = None) -> tuple[tuple[Fraction, ...], ...]:
    """A symmetric positive semidefinite d x d matrix, exactly (a scalar is read as 1 x 1)."""
    if isinstance(m, (str, bytes)) or np.ndim(m) == 0:
        rows: list[Any] = [[m]]
    elif np.ndim(m) == 2:
        rows = [list(r) for r in m]
    else:
        raise InputError(f"{name}: expected a square matrix (d x d), got {m!r}")
    n = len(rows)
    if n == 0 or any(len(r) != n for r in rows):
        raise InputError(f"{name}: expected a square matrix, got rows of lengths {[len(r) for r in rows]}")
    if d is not None and n != d:
        raise InputError(f"{name}: is {n} x {n}, expected {d} x {d} (the dimension of the tokens)")
    q = tuple(tuple(_frac(x, f"{name}[{i}][{j}]") for j, x in enumerate(r)) for i, r in enumerate(rows))
    for i in range(n):
        for j in range(i + 1, n):
            if q[i][j] != q[j][i]:
                raise DomainError(
                    f"{name}: is not symmetric: entry ({i},{j}) = {q[i][j]} but ({j},{i}) = {q[j][i]}"
                )
    if not _is_psd(q):
        lo = float(np.linalg.eigvalsh(np.array([[float(x) for x in r] for r in q]))[0])
        raise DomainError(
            f"{name}: is not positive semidefinite (smallest eigenvalue ~ {lo:.3g}); a covariance must be"
        )
    return q


def _is_psd(m: Sequence[Sequence[Fraction]]) -> bool:
    """Exact PSD test: symmetric elimination on positive diagonal pivots.

    A symmetric matrix with a positive pivot is PSD iff its Schur complement is; with a
    negative diagonal entry it is not; with a zero diagonal it is PSD iff it is zero.
    """
    a = [list(r) for r in m]
    idx = list(range(len(a)))
    while idx:
        if any(a[i][i] < 0 for i in idx):
            return False
        piv = next((i for i in idx if a[i][i] > 0), None)
        if piv is None:
            return all(a[i][j] == 0 for i in idx for j in idx)
        idx.remove(piv)
        p = a[piv][piv]
        for i in idx:
            if not a[i][piv]:  # nothing to eliminate (a diagonal covariance: every row)
                continue
            f = a[i][piv] / p
            for j in idx:
                a[i][j] -= f * a[piv][j]
    return True


def _fmat(q: Sequence[Sequence[Fraction]], name: str) -> np.ndarray:
    return np.array([[_float(x, name) for x in r] for r in q], dtype=np.float64)


def _sqrt_factor(s: np.ndarray) -> np.ndarray:
    """``L`` with ``L L^T = S`` for a PSD ``S`` (eigen-decomposition: works when singular)."""
    lam, v = np.linalg.eigh(s)
    return v * np.sqrt(np.clip(lam, 0.0, None))[None, :]


def _is_zero(q: Sequence[Sequence[Fraction]]) -> bool:
    return all(x == 0 for r in q for x in r)


def _dot(u: Sequence[Fraction], v: Sequence[Fraction]) -> Fraction:
    return sum((x * y for x, y in zip(u, v, strict=True)), Fraction(0))


def _quad(w: Sequence[Fraction], s: Sequence[Sequence[Fraction]]) -> Fraction:
    return sum((w[i] * s[i][j] * w[j] for i in range(len(w)) for j in range(len(w)) if s[i][j]), Fraction(0))


def _sp(f: Fraction) -> sp.Rational:
    return sp.Rational(f.numerator, f.denominator)


def _fq(f: Fraction) -> fmpq:
    return fmpq(f.numerator, f.denominator)


def _t_fraction(t: Any) -> Fraction:
    """Exact value of an evaluation point (also an ``mpmath.mpf``)."""
    if isinstance(t, mpmath.mpf):
        if not mpmath.isfinite(t):
            raise InputError(f"t: must be finite, got {t}")
        man, exp = int(t.man), int(t.exp)  # mpmath's mantissa is unsigned
        return (-1 if t < 0 else 1) * Fraction(man) * (Fraction(2) ** exp)
    return _frac(t, "t")


def _mp(f: Fraction) -> mpmath.mpf:
    return mpmath.mpf(f.numerator) / f.denominator


def _check_dps(dps: int) -> None:
    if dps < 5:
        raise PrecisionError(f"dps={dps} is too low to mean anything; use at least 5")


def _check_K(K: int) -> None:
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise DomainError(f"K={K!r}: the truncation order must be an integer >= 1")


def _check_N(N: int) -> None:
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
        raise DomainError(f"N={N!r}: need at least one token")


def _symbols(a: Sequence[sp.Symbol], d: int) -> list[sp.Symbol]:
    syms = list(a)
    if len(syms) != d:
        raise InputError(f"a: got {len(syms)} symbols, the tokens have dimension {d}")
    return syms


def _args(a: Any, d: int) -> tuple[np.ndarray, bool]:
    return as_arguments(a, d)


def _finish(out: np.ndarray, single: bool, what: str) -> Any:
    if not np.all(np.isfinite(out)):
        raise InputError(f"{what}: the CGF overflows float64 at these arguments; rescale them")
    return float(out[0]) if single else out


def _quad_form(arr: np.ndarray, s: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.einsum("mi,ij,mj->m", arr, s, arr)


@contextmanager
def _arb_context(prec: int, K: int) -> Iterator[None]:
    """Arb working precision ``prec`` and a series cap of at least ``K + 1`` (restored on exit)."""
    if isinstance(prec, bool) or not isinstance(prec, (int, np.integer)) or prec < 20:
        raise PrecisionError(f"prec={prec!r} bits is too low to mean anything; use at least 20")
    with flint_prec(int(prec), cap=K + 1):
        yield


def _arbq(f: Fraction) -> arb:
    """Ball containing ``f`` at the current Arb precision (exact when dyadic and short)."""
    if f.denominator == 1:
        return arb(f.numerator)
    return arb(f.numerator) / f.denominator


def _fmt(v: Any) -> str:
    if isinstance(v, Fraction):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def _repr(obj: Any, names: Sequence[str]) -> str:
    return f"{type(obj).__name__}(" + ", ".join(f"{n}={_fmt(getattr(obj, n))}" for n in names) + ")"


# --------------------------------------------------- even series log(sinh x / x), log cosh x


def _factorials(n: int) -> list[int]:
    out = [1]
    for k in range(1, n + 1):
        out.append(out[-1] * k)
    return out


@functools.lru_cache(maxsize=16)
def _even_log_series_exact(kind: str, M: int) -> tuple[fmpq, ...]:
    r"""Exact :math:`g_0..g_M` with :math:`\log f(x) = \sum_m g_m x^{2m}`, ``f = sinh x / x`` or ``cosh x``."""
    fac = _factorials(2 * M + 2)
    shift = 1 if kind == "sinhc" else 0
    coeffs = [fmpq(0)] * (2 * M + 1)
    for m in range(M + 1):
        coeffs[2 * m] = fmpq(1, fac[2 * m + shift])
    # FLINT truncates series operations at ctx.cap (default 10 terms), not at the series' prec
    with flint_cap(2 * M + 1):
        c = fmpq_series(coeffs, prec=2 * M + 1).log().coeffs()
    return tuple(fmpq(c[2 * m]) if 2 * m < len(c) else fmpq(0) for m in range(M + 1))


@functools.lru_cache(maxsize=32)
def _even_log_series_arb_cached(kind: str, M: int, prec: int) -> tuple[arb, ...]:
    """:func:`_even_log_series_arb` at ``prec`` bits, memoised (every radius shares it)."""
    with _arb_context(prec, 2 * M + 1):
        return tuple(_even_log_series_arb(kind, M))


def _even_log_series_arb(kind: str, M: int) -> list[arb]:
    """Ball version of :func:`_even_log_series_exact`; call inside :func:`_arb_context`."""
    fac = _factorials(2 * M + 2)
    shift = 1 if kind == "sinhc" else 0
    coeffs = [arb(0)] * (2 * M + 1)
    for m in range(M + 1):
        coeffs[2 * m] = arb(1) / fac[2 * m + shift]
    c = arb_series(coeffs).log().coeffs()
    return [c[2 * m] if 2 * m < len(c) else arb(0) for m in range(M + 1)]


# Taylor coefficients of log(sinh x / x) up to x^40: the series converges for |x| < pi and
# its terms are ~ 1/(m pi^(2m)), below 1e-18 relative at |x| <= 1 from m = 17 on.
_SINHC_FLOAT = np.array([float(g) for g in _even_log_series_exact("sinhc", 20)[1:]][::-1])


def _log_sinhc(x: np.ndarray) -> np.ndarray:
    r""":math:`\log(\sinh x / x)` without overflow or cancellation (0 at 0)."""
    ax = np.abs(x)
    out = np.empty_like(ax)
    small = ax < 1.0
    y = ax[small] ** 2
    acc = np.zeros_like(y)
    for g in _SINHC_FLOAT:
        acc = acc * y + g
    out[small] = acc * y
    xb = ax[~small]
    # log(sinh x / x) = x + log(1 - e^{-2x}) - log(2x): no overflow for x up to 1e308
    out[~small] = xb + np.log1p(-np.exp(-2.0 * xb)) - np.log(2.0 * xb)
    return out


def _log_cosh(x: np.ndarray) -> np.ndarray:
    r""":math:`\log\cosh x` without overflow or cancellation."""
    ax = np.abs(x)
    out = np.empty_like(ax)
    small = ax < 1.0
    # cosh x - 1 = 2 sinh^2(x/2): keeps the x^2/2 digits near 0
    out[small] = np.log1p(2.0 * np.sinh(ax[small] / 2.0) ** 2)
    xb = ax[~small]
    out[~small] = xb + np.log1p(np.exp(-2.0 * xb)) - np.log(2.0)
    return out


def _mp_log_sinhc(x: mpmath.mpf) -> mpmath.mpf:
    if x == 0:
        return mpmath.mpf(0)
    ax = abs(x)
    # sinh(x)/x = 1 + x^2/6 + ...: 2 |log2 x| more bits keep the relative accuracy of the log
    extra = 2 * max(0, -int(mpmath.mag(ax))) + 10
    with mp_prec(mpmath.mp.prec + extra):
        v = mpmath.log(mpmath.sinh(ax) / ax)
    return +v


def _mp_log_cosh(x: mpmath.mpf) -> mpmath.mpf:
    return mpmath.log1p(2 * mpmath.sinh(x / 2) ** 2)


def _reduce_modp(cs: Sequence[Any], p: int) -> list[int]:
    """Rationals (``fmpq`` or ``Fraction``) mod ``p`` with one modular inversion (Montgomery's trick)."""
    nums, dens = [], []
    for c in cs:
        if isinstance(c, Fraction):
            a, b = c.numerator, c.denominator
        else:
            a, b = int(c.p), int(c.q)
        nums.append(a % p)
        dens.append(b % p)
    if any(d == 0 for d in dens):
        raise ZeroDivisionError(f"denominator divisible by the prime {p}")
    prefix, acc = [], 1
    for d in dens:
        prefix.append(acc)
        acc = acc * d % p
    inv = pow(acc, -1, p)
    out = [0] * len(cs)
    for i in range(len(cs) - 1, -1, -1):
        out[i] = nums[i] * prefix[i] % p * inv % p
        inv = inv * dens[i] % p
    return out


def _qp(f: Fraction, p: int) -> int:
    return _cgf._modp(f, p)


@functools.lru_cache(maxsize=16)
def _even_log_series_modp(kind: str, M: int, p: int) -> tuple[int, ...]:
    return tuple(_reduce_modp(_even_log_series_exact(kind, M), p))


def _wstr(w: Sequence[Fraction]) -> str:
    return "(" + ", ".join(str(v) for v in w) + ")"
