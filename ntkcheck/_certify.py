"""Certified linear algebra on coefficient matrices (rows: measures, columns: Taylor orders).

* :func:`modp_full_rank` -- full row rank over Q from rank modulo a 62-bit prime
  (FLINT ``nmod_mat``): a minor whose determinant is non-zero mod p is non-zero over Q.
* :func:`ball_full_rank` -- full row rank from Arb balls: the inverse of a square column
  block enclosed by ``arb_mat.inv`` gives :math:`\\sigma_{\\min} \\ge 1/\\|B^{-1}\\|_F`,
  and the smallest singular value of the full matrix is at least that of any block.
* :func:`exact_nullspace` -- a basis of the left null space over Q (FLINT ``fmpq_mat.rref``).
* :func:`float_screen` -- float64 SVD of the column-scaled matrix: the margin only.

MATH.md section 6 has the timings that chose these routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.linalg
from flint import arb, arb_mat, ctx, fmpq, fmpq_mat, nmod_mat

# Two 62-bit primes: a rank drop modulo both is strong evidence of a rank drop over Q.
PRIMES = (4611686018427387847, 4611686018427387817)


@dataclass(frozen=True)
class ExactMinor:
    """Certificate of full row rank: the columns of a square minor and its determinant."""

    columns: tuple[int, ...]
    prime: int
    det_mod_p: int
    det: Fraction | None  # exact determinant of the (row-scaled) minor when cheap

    kind: str = "exact-minor"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "columns": list(self.columns),
            "prime": self.prime,
            "det_mod_p": self.det_mod_p,
            "det": None if self.det is None else _short(self.det),
            "statement": f"the minor on orders {list(self.columns)} has determinant {self.det_mod_p} != 0 mod p={self.prime}, hence != 0 over Q",
        }


@dataclass(frozen=True)
class BallBound:
    """Certificate of full row rank: a rigorous lower bound on a singular value."""

    columns: tuple[int, ...]
    column_scale_log2: tuple[int, ...]
    sigma_min_lower: float
    prec_bits: int

    kind: str = "ball-bound"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "columns": list(self.columns),
            "column_scale_log2": list(self.column_scale_log2),
            "sigma_min_lower": self.sigma_min_lower,
            "prec_bits": self.prec_bits,
            "statement": (
                f"Arb at {self.prec_bits} bits: the column-scaled block on orders {list(self.columns)} "
                f"has sigma_min >= {self.sigma_min_lower:.3e} > 0"
            ),
        }


def _short(q: Fraction, digits: int = 60) -> str:
    s = str(q)
    return s if len(s) <= digits else f"{float(q):.6e} ({len(str(q.numerator))}-digit numerator)"


def _pivots(R: Any, n: int, K: int) -> list[int]:
    """Pivot columns of a matrix in reduced row echelon form with rank ``n``."""
    piv = []
    for i in range(n):
        for j in range(K):
            if int(R[i, j]) != 0:
                piv.append(j)
                break
    return piv


def exact_nullspace(rows: list[list[fmpq]]) -> list[list[Fraction]]:
    """Basis of ``{c : sum_i c_i rows[i] = 0}`` over Q."""
    n, K = len(rows), len(rows[0]) if rows else 0
    if K == 0:
        return [[Fraction(int(i == k)) for i in range(n)] for k in range(n)]
    A = fmpq_mat(K, n, [rows[i][j] for j in range(K) for i in range(n)])
    R, rank = A.rref()
    pivots = []
    for i in range(rank):
        for j in range(n):
            if R[i, j] != 0:
                pivots.append(j)
                break
    free = [j for j in range(n) if j not in pivots]
    basis = []
    for f in free:
        c = [Fraction(0)] * n
        c[f] = Fraction(1)
        for i, pj in enumerate(pivots):
            v = R[i, f]
            c[pj] = -Fraction(int(v.p), int(v.q))
        basis.append(c)
    return basis


def _scale_exponents(mid: np.ndarray) -> np.ndarray:
    mx = np.max(np.abs(mid), axis=0)
    with np.errstate(divide="ignore"):
        e = np.where(mx > 0, -np.round(np.log2(np.where(mx > 0, mx, 1.0))), 0).astype(int)
    return e


def arb_midpoints(rows: list[list[arb]]) -> np.ndarray:
    """Float64 midpoints of a matrix of balls (values below the float range become 0)."""
    return np.array([[float(v.mid()) for v in r] for r in rows], dtype=np.float64)


def float_screen(mid: np.ndarray) -> tuple[float, np.ndarray]:
    """Relative singular values of the column-scaled matrix: (margin, s / s_max)."""
    if mid.size == 0:
        return 0.0, np.zeros(0)
    e = _scale_exponents(mid)
    A = mid * np.exp2(e)[None, :]
    s = scipy.linalg.svdvals(A)
    if s.size == 0 or s[0] == 0:
        return 0.0, s
    rel = s / s[0]
    n = mid.shape[0]
    margin = float(rel[n - 1]) if rel.size >= n else 0.0
    return margin, rel


def choose_columns(mid: np.ndarray) -> list[list[int]]:
    """Candidate column sets for a square block: pivoted QR on the scaled midpoints, then lowest orders."""
    n, K = mid.shape
    e = _scale_exponents(mid)
    A = mid * np.exp2(e)[None, :]
    cands: list[list[int]] = []
    nz = [j for j in range(K) if np.any(A[:, j] != 0)]
    if len(nz) >= n:
        _, _, piv = scipy.linalg.qr(A[:, nz], pivoting=True, mode="economic")
        cands.append(sorted(nz[j] for j in piv[:n]))
        low = nz[:n]
        if low != cands[0]:
            cands.append(low)
    return cands


def ball_full_rank(rows: list[list[arb]], orders: list[int], prec: int) -> BallBound | None:
    """Full row rank certificate from Arb balls at ``prec`` bits, or None when not certified."""
    n = len(rows)
    if n == 0:
        return None
    mid = arb_midpoints(rows)
    e_all = _scale_exponents(mid)
    with ctx.workprec(prec):
        for cols in choose_columns(mid):
            B = arb_mat(n, n, [rows[i][j] * arb(2) ** int(e_all[j]) for i in range(n) for j in cols])
            try:
                Binv = B.inv()
            except ZeroDivisionError:
                continue
            tot = arb(0)
            for i in range(n):
                for j in range(n):
                    u = Binv[i, j].abs_upper()
                    tot += u * u
            if not tot.is_finite():
                continue
            lower = (1 / tot.sqrt()).lower()
            lo = float(lower.mid()) * (1 - 2.0**-50)
            if lo > 0:
                return BallBound(tuple(orders[j] for j in cols), tuple(int(e_all[j]) for j in cols), lo, prec)
    return None


def modp_full_rank(rows: list[list[int]], labels: list[Any], p: int, exact_rows: list[list[fmpq]] | None = None) -> ExactMinor | None:
    """Full row rank certificate from a matrix already reduced modulo the prime ``p``.

    ``rows[i][j]`` is the exact rational entry reduced mod ``p`` (entries of one row may
    share no common scaling: reduction commutes with the field operations, so a minor
    non-zero mod ``p`` is the reduction of a non-zero rational determinant).
    """
    n = len(rows)
    K = len(rows[0]) if rows else 0
    if n == 0 or K < n:
        return None
    M = nmod_mat(n, K, [v for r in rows for v in r], p)
    if M.rank() < n:
        return None
    R, _ = M.rref()
    piv = _pivots(R, n, K)
    detp = int(nmod_mat(n, n, [rows[i][j] for i in range(n) for j in piv], p).det())
    if detp == 0:
        return None
    det = None
    if exact_rows is not None and n <= 12:
        det_q = fmpq_mat(n, n, [exact_rows[i][j] for i in range(n) for j in piv]).det()
        det = Fraction(int(det_q.p), int(det_q.q))
    return ExactMinor(tuple(labels[j] for j in piv), p, detp, det)
