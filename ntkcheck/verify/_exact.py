"""Exact linear algebra over Q and modulo primes, in plain Python (python-flint only to go faster).

Each function answers in rationals or integers, so a "non-singular", a rank or a
"positive semidefinite" here is a proof, not a numerical observation. python-flint, when it is
installed, computes the same exact determinants and ranks in C; without it, pure Python does,
within size limits beyond which the caller says "cannot re-check here".

References: H. Cohen, *A Course in Computational Algebraic Number Theory*, Alg. 2.2.1 (Gaussian
elimination) and 8.2.2 (Miller-Rabin, with the deterministic bases for n < 3.3e24).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from fractions import Fraction
from types import ModuleType

import numpy as np

from ._common import Unchecked

#: primes tried for a determinant modulo p (each below 2^62)
PRIMES = (4611686018427387847, 4611686018427387817, 4611686018427387787)
#: a prime below 2^31: products of two residues fit in int64 (numpy row operations)
P31 = 2147483647
#: the largest matrix whose exact rank or determinant pure Python computes (without python-flint)
MAX_PURE_EXACT = 60
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def flint() -> ModuleType | None:
    """python-flint, or ``None`` when it is not installed (it is optional)."""
    try:
        return importlib.import_module("flint")
    except ImportError:
        return None


def is_prime(p: int) -> bool | None:
    """Whether ``p`` is prime: deterministic Miller-Rabin for ``p < 3.3e24``; ``None`` above."""
    if p < 2:
        return False
    if p >= 3_317_044_064_679_887_385_961_981:
        return None
    for q in _MR_BASES:
        if p % q == 0:
            return p == q
    d, s = p - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _MR_BASES:
        x = pow(a, d, p)
        if x in (1, p - 1):
            continue
        for _ in range(s - 1):
            x = x * x % p
            if x == p - 1:
                break
        else:
            return False
    return True


def reduce_mod(rows: Sequence[Sequence[Fraction]], p: int) -> list[list[int]] | None:
    """The rational matrix modulo ``p``; ``None`` when a denominator is divisible by ``p``."""
    out = []
    for r in rows:
        row = []
        for v in r:
            if v.denominator % p == 0:
                return None
            row.append(v.numerator % p * pow(v.denominator, -1, p) % p)
        out.append(row)
    return out


def det_mod(rows: list[list[int]], p: int) -> int:
    """The determinant of a square matrix of residues modulo the prime ``p``."""
    A = [list(r) for r in rows]
    n, det = len(A), 1
    for c in range(n):
        piv = next((i for i in range(c, n) if A[i][c]), None)
        if piv is None:
            return 0
        if piv != c:
            A[c], A[piv] = A[piv], A[c]
            det = -det
        det = det * A[c][c] % p
        inv = pow(A[c][c], -1, p)
        for i in range(c + 1, n):
            f = A[i][c] * inv % p
            if f:
                A[i] = [(a - f * b) % p for a, b in zip(A[i], A[c])]
    return det % p


def det_exact(rows: Sequence[Sequence[Fraction]]) -> Fraction:
    """The exact determinant over Q (python-flint's ``fmpq_mat``, else Gaussian elimination)."""
    n = len(rows)
    fl = flint()
    if fl is not None:
        d = fl.fmpq_mat([[fl.fmpq(v.numerator, v.denominator) for v in r] for r in rows]).det()
        return Fraction(int(d.p), int(d.q))
    if n > MAX_PURE_EXACT:
        raise Unchecked(f"an exact {n} x {n} determinant needs python-flint here (pure Python: n <= {MAX_PURE_EXACT})")
    A = [list(r) for r in rows]
    det = Fraction(1)
    for c in range(n):
        piv = next((i for i in range(c, n) if A[i][c]), None)
        if piv is None:
            return Fraction(0)
        if piv != c:
            A[c], A[piv] = A[piv], A[c]
            det = -det
        det *= A[c][c]
        for i in range(c + 1, n):
            f = A[i][c] / A[c][c]
            if f:
                A[i] = [a - f * b for a, b in zip(A[i], A[c])]
    return det


def nonsingular(rows: Sequence[Sequence[Fraction]]) -> bool:
    """Whether a square rational matrix is non-singular: a non-zero determinant modulo a prime
    (it is then non-zero over Q), else the exact determinant."""
    for p in PRIMES:
        red = reduce_mod(rows, p)
        if red is not None and det_mod(red, p) != 0:
            return True
    return det_exact(rows) != 0


def rank_mod_p31(M: Sequence[Sequence[int]]) -> int:
    """The rank of an integer matrix modulo ``2^31 - 1``: a lower bound on its rank over Q."""
    A = np.array([[v % P31 for v in r] for r in M], dtype=np.int64).reshape(len(M), -1)
    r = 0
    for c in range(A.shape[1]):
        piv = np.flatnonzero(A[r:, c])
        if piv.size == 0:
            continue
        A[[r, r + piv[0]]] = A[[r + piv[0], r]]
        A[r] = A[r] * pow(int(A[r, c]), -1, P31) % P31
        below = A[r + 1:, c].copy()
        A[r + 1:] = (A[r + 1:] - below[:, None] * A[r]) % P31
        r += 1
        if r == A.shape[0]:
            break
    return r


def rank_exact(M: Sequence[Sequence[int]]) -> int:
    """The rank of an integer matrix over Q (python-flint's ``fmpz_mat``, else Gaussian elimination)."""
    fl = flint()
    if fl is not None:
        return int(fl.fmpz_mat([list(r) for r in M]).rank())
    if len(M) > MAX_PURE_EXACT:
        raise Unchecked(f"an exact rank of a {len(M)} x {len(M)} matrix needs python-flint here "
                        f"(pure Python: n <= {MAX_PURE_EXACT})")
    A = [[Fraction(v) for v in r] for r in M]
    r = 0
    for c in range(len(A[0]) if A else 0):
        piv = next((i for i in range(r, len(A)) if A[i][c]), None)
        if piv is None:
            continue
        A[r], A[piv] = A[piv], A[r]
        for i in range(r + 1, len(A)):
            f = A[i][c] / A[r][c]
            if f:
                A[i] = [a - f * b for a, b in zip(A[i], A[r])]
        r += 1
    return r


def psd(S: Sequence[Sequence[Fraction]]) -> bool:
    """Whether a symmetric rational matrix is positive semidefinite, exactly: symmetric Gaussian
    elimination where a negative pivot refutes it and a zero pivot needs a zero row."""
    A = [list(r) for r in S]
    n = len(A)
    if any(len(r) != n for r in A) or any(A[i][j] != A[j][i] for i in range(n) for j in range(i)):
        return False
    for k in range(n):
        if A[k][k] < 0:
            return False
        if A[k][k] == 0:
            if any(A[k][j] for j in range(k + 1, n)):
                return False
            continue
        for i in range(k + 1, n):
            f = A[i][k] / A[k][k]
            if f:
                for j in range(k + 1, n):
                    A[i][j] -= f * A[k][j]
    return True
