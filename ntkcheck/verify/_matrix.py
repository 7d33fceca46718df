r"""Lower bounds on the smallest eigenvalue of a ball of symmetric matrices, and a user's matrix.

:func:`_lower_bound` proves :math:`\lambda_{\min} \ge \ell` for every symmetric matrix in a ball:
the float64 Cholesky of :math:`\mathrm{fl}(C - tI)` (``C`` the midpoints) with Rump's criterion and
Weyl's inequality for the radius, at the recorded shift ``t`` or one chosen here; below float64's
resolution, a ball :math:`LDL^T` of :math:`G - \ell I` at 128 to 1024 bits. :func:`_matrix`
re-checks the claims of ``ntkcheck certify`` (a bound, an exact rank, a negative quadratic form).

References: S. M. Rump, "Verification of positive definiteness", BIT 46 (2006) 433-452;
N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm. 10.3.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, arb_mat, fmpz_mat

from ._common import Refuted, Unchecked, _floats
from ._precision import _workprec

U = 2.0**-53
#: distinct atoms (or matrix rows) up to which the ball LDL^T route is run
MAX_BALL_ROWS = 256
_SAFE = 1.0 + 1e-10


def _up(x: arb) -> float:
    """A float above every point of the ball ``x``."""
    return float(np.nextafter(abs(float(x.mid())) + float(x.rad()), np.inf)) * (1 + 2**-40)


def _gamma(k: int) -> float:
    return k * U / (1 - k * U) * _SAFE


def _cholesky_bound(C: np.ndarray, radius: float, want: float, shifts: Sequence[float]) -> float | None:
    """A lower bound on lambda_min of every symmetric matrix within ``radius`` (2-norm) of ``C``:
    ``t - s - u max d - radius`` when the float64 Cholesky of fl(C - tI) (diagonal ``d``) runs to
    completion (``s`` Rump's allowance), for the recorded shifts, else for one chosen here."""
    n = C.shape[0]
    g = _gamma(n + 1)

    def allowance(d: np.ndarray) -> float:
        return (g / (1 - g) * float(np.sum(d)) * (1 + _gamma(n)) + 4 * n * (2 * (n + 1) + float(d.max())) * 2.0**-1000
                + U * float(d.max())) * _SAFE
    d0 = np.diagonal(C) - want
    own = [(want + radius + allowance(d0)) * (1 + 1e-6)] if np.all(d0 > 0) else []
    for t in list(shifts) or own:
        d = np.diagonal(C) - t
        A = np.array(C, dtype=np.float64)
        A[np.diag_indices(n)] = d
        try:
            np.linalg.cholesky(A) if np.all(d > 0) else None
        except np.linalg.LinAlgError:
            continue
        lb = float(np.nextafter((t - allowance(d) - radius * _SAFE) * (1 - 4 * U), -np.inf)) if np.all(d > 0) else -1
        if lb >= want:
            return lb
    if shifts:
        raise Refuted(f"the recorded shift {list(shifts)} does not prove lambda_min >= {want:.6g}")
    return None


def _ball_pd(G: arb_mat, block: int = 32) -> bool:
    """Whether every symmetric matrix in the ball ``G`` is positive definite: the pivots of a
    scalar LDL^T of each leading block are positive balls, and the Schur complement
    ``C - B A^-1 B^T`` (enclosed by ``arb_mat.solve``) is checked the same way. python-flint 0.9
    does not wrap Arb's ``arb_mat_cho``; mpmath's ``iv.cholesky`` compares with a tolerance."""
    n = G.nrows()
    while n:
        k = min(block, n)
        D: list[arb] = []
        L = [[arb(0)] * k for _ in range(k)]
        for j in range(k):
            s = G[j, j] - sum((L[j][m] ** 2 * D[m] for m in range(j)), arb(0))
            if not s > 0:
                return False
            D.append(s)
            for i in range(j + 1, k):
                L[i][j] = (G[i, j] - sum((L[i][m] * L[j][m] * D[m] for m in range(j)), arb(0))) / s
        if k == n:
            return True
        A = arb_mat([[G[i, j] for j in range(k)] for i in range(k)])
        B = arb_mat([[G[i, j] for j in range(k)] for i in range(k, n)])
        C = arb_mat([[G[i, j] for j in range(k, n)] for i in range(k, n)])
        try:
            G = C - B * A.solve(B.transpose())
        except ZeroDivisionError:
            return False
        n -= k
    return True


def _lower_bound(ball: arb_mat, want: float, shifts: Sequence[Any], high: Callable[[int], arb_mat]) -> str:
    """Prove lambda_min >= ``want``: the Cholesky route on the midpoints, then ``high(bits)``."""
    n = ball.nrows()
    C = np.array([[float(ball[i, j].mid()) for j in range(n)] for i in range(n)])
    C = (C + C.T) / 2
    R = np.array([[_up(ball[i, j] - arb(C[i, j])) for j in range(n)] for i in range(n)])
    radius = float(np.sqrt(np.sum(R * R))) * (1 + 1e-8)  # ||G - C||_F, C after its own rounding
    lb = _cholesky_bound(C, radius, want, [float(t) for t in shifts])
    if lb is not None:
        return f"float64 Cholesky with Rump's criterion: lambda_min >= {lb:.6g} >= the claimed {want:.6g}"
    if n > MAX_BALL_ROWS:
        raise Unchecked(f"below float64 resolution and {n} > {MAX_BALL_ROWS} rows for the ball LDL^T route")
    for bits in (128, 256, 512, 1024):
        with _workprec(bits):
            G = high(bits)
            S = arb_mat([[G[i, j] - (arb(want) if i == j else 0) for j in range(n)] for i in range(n)])
            if _ball_pd(S):
                return f"ball LDL^T of G - {want:.6g} I at {bits} bits: every pivot positive"
    raise Refuted(f"lambda_min >= {want:.6g} is not reproduced (Cholesky and ball LDL^T up to 1024 bits)")


def _matrix(inputs: dict[str, Any], arrays: dict[str, np.ndarray], claim: dict[str, Any]) -> str:
    A = _floats(inputs["matrix"], arrays)
    e = float(inputs.get("abs_error", 0.0))
    n = A.shape[0]
    if not (A.ndim == 2 and A.shape == (n, n) and np.all(np.isfinite(A)) and e >= 0):
        raise Refuted("the matrix is not square and finite, or the error bound is negative")
    if float(np.abs(A - A.T).max()) > 2 * e:
        raise Refuted("no symmetric matrix lies within the error bound of the recorded matrix")
    kind = claim["kind"]
    if kind == "matrix-singular":
        if e != 0 or n == 0:
            raise Refuted("singularity is proved only for the exact matrix (abs_error 0)")
        ex = np.frexp(A[A != 0])[1]  # A 2^s is an integer matrix for s >= 53 - (smallest exponent)
        s = 0 if ex.size == 0 else max(0, 53 - int(ex.min()))
        r = fmpz_mat([[int(Fraction(float(v)) * 2**s) for v in row] for row in A]).rank()
        if r >= n:
            raise Refuted(f"the exact matrix has full rank {n}")
        return f"exact rank {r} < {n}"
    if kind == "matrix-indefinite":
        x = [Fraction(float(v)) for v in _floats(claim["vector"], arrays)]
        q = sum((x[i] * Fraction(float(A[i, j])) * x[j] for i in range(n) for j in range(n)), Fraction(0))
        if not q + Fraction(e) * sum(abs(v) for v in x) ** 2 < 0:
            raise Refuted("x^T A x + e ||x||_1^2 is not negative")
        return "x^T S x < 0 for every S in the ball, exactly"

    def high(bits: int) -> arb_mat:  # the symmetric part, exact, widened by e entrywise
        with _workprec(bits):
            return arb_mat([[(arb(A[i, j]) + arb(A[j, i])) / 2 + arb(0, e) for j in range(n)] for i in range(n)])
    return _lower_bound(high(128), float(claim["lower_bound"]), claim.get("shifts", []), high)

