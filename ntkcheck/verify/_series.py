r"""Exact Taylor coefficients of a CGF along a direction: :math:`[t^k]\log E e^{t\langle w, Y\rangle}`.

For an empirical law (or a Dirac) the moment series :math:`g_n = \sum_a m_a z_a^n / n!`
(:math:`z_a = \langle w, x_a\rangle`, exact) and its logarithm by the recurrence
:math:`n f_n = n g_n - \sum_{k<n} k f_k g_{n-k}`; for the families, their closed forms: a Gaussian
:math:`\langle m, w\rangle t + w^T S w\, t^2/2`, a cube :math:`\sum_j \log(\sinh(r w_j t)/(r w_j t))`,
a Laplace law :math:`-\log(1 - s t^2/2)` (:math:`s = w^T S w`), a mixture
:math:`\log\cosh(\langle m, w\rangle t) + s t^2/2`.

Order 0 is :math:`\log 1 = 0` and order 1 the mean, which an affine function absorbs: only the
orders :math:`k \ge 2` say anything about independence modulo affine functions (seed 003 §3.2).

References: seed 003 Prop. 7, 8 and 11; theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import factorial
from typing import Any

from ._common import Unchecked

#: the highest Taylor order re-derived here (each costs O(K^2) exact operations per law)
MAX_ORDER = 256
#: exact operations a block of coefficients may cost: sum over laws and directions of N_i K + K^2
MAX_SERIES_WORK = 5_000_000


def _log_series(g: list[Fraction], K: int) -> list[Fraction]:
    """Coefficients 0..K of log g for a series with g_0 = 1: n f_n = n g_n - sum_k k f_k g_{n-k}."""
    f = [Fraction(0)] * (K + 1)
    for n in range(1, K + 1):
        f[n] = g[n] - sum((k * f[k] * g[n - k] for k in range(1, n)), Fraction(0)) / n
    return f


def dot(u: Sequence[Fraction], w: Sequence[Fraction]) -> Fraction:
    """``<u, w>`` exactly (the lengths are checked by the callers)."""
    return sum((a * b for a, b in zip(u, w, strict=True)), Fraction(0))


def quad(S: Sequence[Sequence[Fraction]], w: Sequence[Fraction]) -> Fraction:
    """``w^T S w`` exactly."""
    return dot([dot(row, w) for row in S], w)


def taylor(law: dict[str, Any], w: Sequence[Fraction], K: int) -> list[Fraction]:
    """:math:`[t^k]\\log E e^{t\\langle w, Y\\rangle}` for ``k = 0..K``, exactly."""
    if K > MAX_ORDER:
        raise Unchecked(f"Taylor order {K} is beyond the {MAX_ORDER} re-derived here")
    k = law["kind"]
    if k in ("empirical", "dirac"):
        pts = law["atoms"] if k == "empirical" else [law["point"]]
        ms = law["masses"] if k == "empirical" else [Fraction(1)]
        z = [dot(x, w) for x in pts]
        g = [sum((m * zi**n for m, zi in zip(ms, z)), Fraction(0)) / factorial(n) for n in range(K + 1)]
        return _log_series(g, K)
    out = [Fraction(0)] * (K + 1)
    if k == "gaussian":
        out[1] = dot(law["mean"], w)
        if K >= 2:
            out[2] = quad(law["cov"], w) / 2
        return out
    if k == "uniform-cube":
        for wj in w:  # log(sinh(x)/x), x = r w_j t: sinh(x)/x = sum x^2m / (2m+1)!
            a = law["radius"] * wj
            g = [a**n / factorial(n + 1) if n % 2 == 0 else Fraction(0) for n in range(K + 1)]
            out = [o + f for o, f in zip(out, _log_series(g, K))]
        return out
    if k == "laplace":  # -log(1 - s t^2 / 2) = sum_m (s/2)^m t^2m / m
        s = quad(law["cov"], w)
        return [(s / 2) ** (n // 2) / (n // 2) if n % 2 == 0 and n > 0 else Fraction(0) for n in range(K + 1)]
    if k == "gaussian-mixture":  # log cosh(mu t) + s t^2 / 2
        mu = dot(law["m"], w)
        out = _log_series([mu**n / factorial(n) if n % 2 == 0 else Fraction(0) for n in range(K + 1)], K)
        if K >= 2:
            out[2] += quad(law["cov"], w) / 2
        return out
    raise Unchecked(f"no exact series for a {k} law")


def block(laws: list[dict[str, Any]], cols: list[tuple[int, int]], dirs: list[list[Fraction]]) -> list[list[Fraction]]:
    """The square block of exact coefficients: row ``i`` (law), column ``(j, k)`` = order ``k`` along ``dirs[j]``."""
    K = max(k for _, k in cols)
    ndirs = len({j for j, _ in cols})
    work = ndirs * sum(len(law.get("atoms") or [0]) * K + K * K for law in laws)
    if work > MAX_SERIES_WORK:
        raise Unchecked(f"the exact coefficients of this minor cost about {work:.3g} rational operations "
                        f"(> {MAX_SERIES_WORK:.3g} re-derived here)")
    coef = {j: [taylor(law, dirs[j], K) for law in laws] for j in {j for j, _ in cols}}
    return [[coef[j][i][k] for j, k in cols] for i in range(len(laws))]
