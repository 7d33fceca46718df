r"""The truncations of the decision: their orders, the state of one run, their coefficient rows and null vectors.

With :math:`\Lambda_i^w(t) = \sum_k c_{ik} t^k`, the rows :math:`(c_{ik})_{k=2..K}` of the
truncation ``2..K`` (theory/cgf-independence.md), exact (fmpq), mod a prime or as Arb
balls, stacked over directions and memoised per decision (:class:`_Run`); the ladder of
orders ``K``; rational candidates for null vectors ``c`` (exact, mod p lifted, float SVD)
and the two-precision null-vector evidence. Private to :mod:`ntkcheck.independence`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, nmod_mat

from .._budget import Budget
from .._precision import mp_prec
from ..cgf import Empirical, Family
from ..cgf.core import series_log_mgf_modp
from . import rank as C
from .results import NullVectorEvidence

#: exact null spaces (fmpq) up to this many measures; beyond, mod-p null spaces are lifted
EXACT_NULLSPACE_MAX_N = 24


# ------------------------------------------------------------------ truncation orders


def _default_K(n: int) -> int:
    """First truncation order: ``n + 1`` non-zero columns suffice for generic laws (the
    best-conditioned choice); symmetric laws need about ``2n`` and the ladder gets there."""
    return max(6, n + 2)


def _default_max_order(K0: int, n: int) -> int:
    return max(64, 4 * n + 8, K0)


def _next_K(K: int, shortfall: int, cap: int) -> int | None:
    """The next truncation order, or None at the cap.

    Grows by half (laws sharing cumulants up to order ``m`` need ``K > m``), and at
    least by ``2 * shortfall + 2`` when the matrix had ``shortfall`` fewer non-zero
    columns than rows (odd orders vanish for symmetric laws).
    """
    if K >= cap:
        return None
    nxt = max(K + max(2, K // 2), K + 2 * shortfall + 2)
    if nxt > cap and cap - K < max(2, K // 4):
        return None  # a last step of a few orders would add little
    return min(cap, nxt)


# ------------------------------------------------------------------ coefficient rows


_Cache = dict[tuple[Any, ...], list[Any]]


@dataclass
class _Run:
    ms: list[Family]
    method: str
    K: int
    max_bits: int
    max_order: int = 0
    budget: Budget = field(default_factory=lambda: Budget(None))
    trail: list[str] = field(default_factory=list)
    margin: float | None = None
    notes: list[str] = field(default_factory=list)
    cache: _Cache = field(default_factory=dict)
    orders: list[int] = field(default_factory=list)
    bits: list[int] = field(default_factory=list)
    tried: set[tuple[Any, ...]] = field(default_factory=set)
    null_seen: dict[tuple[Any, ...], tuple[int, list[list[Fraction]]]] = field(default_factory=dict)
    nz_seen: dict[tuple[Any, ...], int | None] = field(default_factory=dict)
    shortfall: int = 0
    precision_exhausted: bool = False

    def __post_init__(self) -> None:
        if not self.max_order:
            self.max_order = _default_max_order(self.K, self.n)

    @property
    def n(self) -> int:
        return len(self.ms)

    def note_order(self, K: int) -> None:
        if K not in self.orders:
            self.orders.append(K)

    def note_bits(self, b: int) -> None:
        if b not in self.bits:
            self.bits.append(b)


def _series(run: _Run, m: Family, w: tuple[Fraction, ...], K: int, kind: str, arg: int) -> list[Any]:
    """Taylor coefficients ``c_0..c_K`` of ``Lambda_m(t w)``: ``kind`` "exact" (fmpq), "ball" (Arb at ``arg``
    bits) or "modp" (reduced mod the prime ``arg``); memoised per decision."""
    key = (id(m), w, K, kind, arg)
    got = run.cache.get(key)
    if got is not None:
        return got
    run.budget.check(f"Taylor coefficients to order {K}")
    if kind == "exact":
        out = m.taylor_1d(list(w), K, exact=True)
    elif kind == "ball":
        out = m.taylor_1d(list(w), K, exact=False, prec=arg)
    elif isinstance(m, Empirical):
        out = series_log_mgf_modp(m.projected(w), m.exact_weights(), K, arg)
    else:
        out = m.taylor_1d_modp(list(w), K, arg)
    run.cache[key] = out
    return out


def _label(di: int, k: int, dirs: Sequence[Any]) -> Any:
    return k if len(dirs) == 1 else (di, k)


def _exact_rows(run: _Run, dirs: Sequence[tuple[Fraction, ...]], K: int) -> tuple[list[list[Any]], list[Any]]:
    """Exact rows, identically zero columns dropped."""
    labels: list[Any] = []
    rows: list[list[Any]] = [[] for _ in run.ms]
    for di, w in enumerate(dirs):
        coeffs = [_series(run, m, w, K, "exact", 0) for m in run.ms]
        for k in range(2, K + 1):
            col = [c[k] for c in coeffs]
            if any(v != 0 for v in col):
                labels.append(_label(di, k, dirs))
                for i, v in enumerate(col):
                    rows[i].append(v)
    return rows, labels


def _exact_rows_all(ms: Sequence[Family], dirs: Sequence[tuple[Fraction, ...]], K: int, cache: _Cache | None = None) -> list[list[Any]]:
    """Exact rows, every order ``2..K`` of every direction (for the exact determinant of a minor)."""
    run = _Run(list(ms), "exact", K, 53, cache=cache if cache is not None else {})
    rows: list[list[Any]] = [[] for _ in ms]
    for w in dirs:
        for i, m in enumerate(ms):
            rows[i].extend(_series(run, m, w, K, "exact", 0)[2:])
    return rows


def _modp_rows(run: _Run, dirs: Sequence[tuple[Fraction, ...]], K: int, p: int) -> tuple[list[list[int]], list[Any], int]:
    """Rows mod ``p`` (every order ``2..K``), their labels, and the number of columns that are zero mod ``p``."""
    labels: list[Any] = []
    rows: list[list[int]] = [[] for _ in run.ms]
    zero = 0
    for di, w in enumerate(dirs):
        coeffs = [_series(run, m, w, K, "modp", p) for m in run.ms]
        for k in range(2, K + 1):
            labels.append(_label(di, k, dirs))
            col = [c[k] for c in coeffs]
            zero += all(v == 0 for v in col)
            for i, v in enumerate(col):
                rows[i].append(v)
    return rows, labels, zero


def _ball_rows(run: _Run, dirs: Sequence[tuple[Fraction, ...]], K: int, prec: int) -> tuple[list[list[arb]], list[Any], int]:
    """Ball rows with the columns that are zero or unresolved dropped, and how many columns are exactly zero."""
    labels: list[Any] = []
    rows: list[list[arb]] = [[] for _ in run.ms]
    exact_zero = 0
    for di, w in enumerate(dirs):
        coeffs = [_series(run, m, w, K, "ball", prec) for m in run.ms]
        for k in range(2, K + 1):
            col = [c[k] for c in coeffs]
            if all(v.is_zero() for v in col):
                exact_zero += 1
            elif not all(v.contains(0) for v in col):
                labels.append(_label(di, k, dirs))
                for i, v in enumerate(col):
                    rows[i].append(v)
    return rows, labels, exact_zero


# ------------------------------------------------------------------ null vectors


def _primitive(c: Sequence[Fraction]) -> list[Fraction]:
    """``c`` scaled to integers with gcd 1 and a positive first non-zero entry (reads best)."""
    den = 1
    for v in c:
        den = math.lcm(den, v.denominator)
    ints = [int(v * den) for v in c]
    g = 0
    for v in ints:
        g = math.gcd(g, v)
    g = g or 1
    first = next((v for v in ints if v), 1)
    s = -1 if first < 0 else 1
    return [Fraction(s * v // g) for v in ints]


def _ratrec(u: int, p: int) -> Fraction | None:
    """The rational ``a/b`` with ``a = u b mod p`` and ``|a|, b < sqrt(p/2)``, if any (Wang's reconstruction)."""
    bound = math.isqrt(p // 2)
    r0, r1, s0, s1 = p, u % p, 0, 1
    while r1 > bound:
        q = r0 // r1
        r0, r1, s0, s1 = r1, r0 - q * r1, s1, s0 - q * s1
    if s1 == 0 or abs(s1) > bound:
        return None
    f = Fraction(r1, s1)
    return f if (f.numerator - u * f.denominator) % p == 0 else None


def _modp_nullspace(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> list[list[Fraction]] | None:
    """Null vectors mod p of the truncation, lifted to small rationals (None if none lift)."""
    for p in C.PRIMES:
        try:
            rows, _, _ = _modp_rows(run, dirs, K, p)
        except ZeroDivisionError:
            continue
        n, m = run.n, len(rows[0])
        M = nmod_mat(m, n, [rows[i][j] for j in range(m) for i in range(n)], p)  # C^T: c is a right null vector
        X, nullity = M.nullspace()
        if nullity == 0:
            return []
        basis = nmod_mat(nullity, n, [int(X[i, j]) for j in range(nullity) for i in range(n)], p)
        R, _ = basis.rref()
        out = []
        for j in range(nullity):
            vec = [_ratrec(int(R[j, i]), p) for i in range(n)]
            if all(v is not None for v in vec):
                out.append(_primitive([v for v in vec if v is not None]))
        return out
    return None


def _float_nullspace(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> list[list[Fraction]]:
    rows, _, _ = _ball_rows(run, dirs, K, 53)
    if not rows or not rows[0]:
        return [[Fraction(int(i == k)) for i in range(run.n)] for k in range(run.n)]
    A = C.scale_rows(rows).A
    _, s, vt = np.linalg.svd(A.T)
    cands = []
    for k in range(len(s) - 1, -1, -1):
        if s[k] > 1e-8 * s[0]:
            break
        v = vt[k]
        v = v / v[np.argmax(np.abs(v))]
        cands.append([Fraction(float(x)).limit_denominator(10_000) for x in v])
    return cands


def _null_candidates(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> list[list[Fraction]]:
    """Rational candidates for ``c``: the exact null space of the truncation when affordable, else the
    mod-p null space lifted to small rationals, else rationalised float SVD vectors."""
    run.budget.check(f"null space of the truncation K={K}")
    if run.n <= EXACT_NULLSPACE_MAX_N:
        rows, _ = _exact_rows(run, dirs, K)
        if not rows or not rows[0]:
            return [[Fraction(int(i == k)) for i in range(run.n)] for k in range(run.n)]
        return [_primitive(b) for b in C.exact_nullspace(rows)]
    lifted = _modp_nullspace(run, dirs, K)
    if lifted is not None:
        return lifted
    return _float_nullspace(run, dirs, K)


def _nonzero_orders(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> int | None:
    for p in C.PRIMES:
        try:
            _, labels, zero = _modp_rows(run, dirs, K, p)
        except ZeroDivisionError:
            continue
        return len(labels) - zero
    return None


def _arb_mid_mpf(v: arb) -> Any:
    """The midpoint of a ball as an mpmath number, exactly (it is a dyadic rational)."""
    import mpmath

    man, exp = v.mid().man_exp()
    return mpmath.ldexp(mpmath.mpf(int(man)), int(exp))


def _two_precision_null(run: _Run, dirs: list[tuple[Fraction, ...]], bits: int = 128, K: int | None = None) -> tuple[list[float], NullVectorEvidence] | None:
    """Evidence of a null vector: the smallest singular vector of the scaled truncation at two precisions."""
    import mpmath

    K = run.K if K is None else K
    if run.n > 40:
        return None
    vecs, res = [], []
    for prec in (bits, 2 * bits):
        run.budget.check(f"null-vector evidence at {prec} bits")
        rows, _, _ = _ball_rows(run, dirs, K, prec)
        if not rows or not rows[0] or len(rows[0]) < 1:
            return None
        with mp_prec(prec):
            A = mpmath.matrix([[_arb_mid_mpf(v) for v in r] for r in rows])
            for j in range(A.cols):
                colmax = max(abs(A[i, j]) for i in range(A.rows))
                if colmax:
                    for i in range(A.rows):
                        A[i, j] = A[i, j] / colmax
            U, S, V = mpmath.svd_r(A.T)
            c = [V[V.rows - 1, i] for i in range(V.cols)]
            r = mpmath.norm(A.T * mpmath.matrix(c)) / mpmath.norm(A)
            big = max(abs(x) for x in c)
            vecs.append([float(x / big) for x in c])
            res.append(float(r))
    v1, v2 = np.array(vecs[0]), np.array(vecs[1])
    v2 = v2 * (np.sign(v1 @ v2) or 1.0)
    if res[0] < 2.0 ** (-bits + 20) and res[1] < 2.0 ** (-2 * bits + 20) and np.allclose(v1, v2, atol=1e-12):
        vec = [float(x) for x in v2]
        return vec, NullVectorEvidence(K, (res[0], res[1]), (bits, 2 * bits), tuple(vec), tuple(dirs))
    return None
