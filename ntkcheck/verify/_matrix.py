r"""Lower bounds on the smallest eigenvalue of a ball of symmetric matrices, and a user's matrix.

:func:`lower_bound` proves :math:`\lambda_{\min} \ge \ell` for every symmetric matrix within a
2-norm radius of a float64 centre ``C``: the float64 Cholesky of :math:`\mathrm{fl}(C - tI)` with
Rump's criterion and Weyl's inequality, at the recorded shift ``t`` or one chosen here; below
float64's resolution, a ball :math:`LDL^T` of :math:`G - \ell I` at 128 to 1024 bits.

The claims of ``ntkcheck certify`` (:func:`check_bound`, :func:`check_singular`,
:func:`check_indefinite`) are about the matrix ``A`` of the file and its entrywise error ``e``: a
symmetric ``S`` with :math:`|S_{ij} - A_{ij}| \le e` is within ``e`` of the exact symmetric part
:math:`M = (A + A^T)/2` entrywise, hence within :math:`n e` in the 2-norm. A bound is re-proved
for every matrix within :math:`\max(r, n e)` of ``M`` (``r`` the recorded radius: a radius the
file states is a radius the verifier proves); a rank is compared with the exact rank; an
indefiniteness vector is checked in integers.

References: S. M. Rump, "Verification of positive definiteness", BIT 46 (2006) 433-452;
N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm. 10.3.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ._balls import balls, speed
from ._common import Checked, Refuted, Unchecked, _floats, _integer, _q
from ._exact import rank_exact, rank_mod_p31

U = 2.0**-53
#: distinct atoms (or matrix rows) up to which the ball LDL^T route is run (python-flint; mpmath: /3)
MAX_BALL_ROWS = 256
_SAFE = 1.0 + 1e-10


def _gamma(k: int) -> float:
    return k * U / (1 - k * U) * _SAFE


def cholesky_bound(C: np.ndarray, radius: float, want: float, shifts: Sequence[float]) -> float | None:
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
        if not (math.isfinite(t) and np.all(d > 0) and np.all(np.isfinite(d))):
            continue
        A = np.array(C, dtype=np.float64)
        A[np.diag_indices(n)] = d
        try:
            np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            continue
        lb = float(np.nextafter((t - allowance(d) - radius * _SAFE) * (1 - 4 * U), -np.inf))
        if lb >= want:
            return lb
    if shifts:
        raise Refuted(f"the recorded shift {list(shifts)} does not prove lambda_min >= {want:.6g}")
    return None


def lower_bound(C: np.ndarray, radius: float, want: float, shifts: Sequence[Any],
                high: Callable[[Any], list[list[Any]]], extra: float = 0.0) -> str:
    """Prove lambda_min >= ``want`` for every symmetric matrix within ``radius`` of ``C``: the
    Cholesky route, then a ball LDL^T of ``high(B) - (want + extra) I`` (``high`` builds the ball
    matrix in the backend ``B``; ``extra`` is the part of ``radius`` that ball does not hold)."""
    n = C.shape[0]
    lb = cholesky_bound(C, radius, want, [float(_q(t)) for t in shifts])
    if lb is not None:
        return f"float64 Cholesky with Rump's criterion and Weyl's inequality: lambda_min >= {lb:.6g}"
    limit = int(MAX_BALL_ROWS / speed() ** (1 / 3))
    if n > limit:
        raise Unchecked(f"below float64 resolution and {n} > {limit} rows for the ball LDL^T route here")
    for bits in (128, 256, 512, 1024):
        with balls(bits) as B:
            G = high(B)
            top = B.q(Fraction(want) + Fraction(extra))
            if B.pd([[G[i][j] - (top if i == j else 0) for j in range(n)] for i in range(n)]):
                return f"ball LDL^T of G - {want + extra:.6g} I at {bits} bits: every pivot certainly positive"
    raise Refuted(f"lambda_min >= {want:.6g} is not reproduced (Cholesky and ball LDL^T up to 1024 bits)")


def _symmetric(inputs: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """``A``, the float64 centre ``C = fl((A + A^T)/2)``, and a float above ``||M - C||_F`` (``M`` exact)."""
    A, e = inputs.matrix, inputs.abs_error
    if A is None:
        raise Refuted("the file has no matrix")
    with np.errstate(over="ignore", invalid="ignore"):
        D = np.abs(A - A.T)  # correctly rounded: fl(|a - b|) > 2e only if |a - b| > 2e
        edge = (D == 2 * e) | ~np.isfinite(D)
        if np.any((D > 2 * e) & ~edge) or any(abs(Fraction(float(A[i, j])) - Fraction(float(A[j, i]))) > 2 * Fraction(e)
                                              for i, j in zip(*np.nonzero(edge))):
            raise Refuted("no symmetric matrix lies within the error bound of the recorded matrix")
        C = (A + A.T) / 2
        if not np.all(np.isfinite(C)):  # (1e308 + 1e308) / 2 overflows; the halves do not
            C = A / 2 + A.T / 2
    off = 0.0
    for i, j in zip(*np.nonzero(A != A.T)):
        err = abs((Fraction(float(A[i, j])) + Fraction(float(A[j, i]))) / 2 - Fraction(float(C[i, j])))
        off += float(err) ** 2
    return A, C, math.sqrt(off) * (1 + 1e-6) + (5e-324 if off else 0.0)


def check_bound(claim: dict[str, Any], inputs: Any, scope: Any) -> Checked:
    """``lambda_min(S) >= l`` for every symmetric ``S`` within ``e`` entrywise (and within the
    recorded 2-norm radius ``r``) of the matrix."""
    A, C, off = _symmetric(inputs)
    n, e = A.shape[0], inputs.abs_error
    want = float(_q(claim["lower_bound"]))
    r = float(_q(claim.get("radius") or 0.0))
    if not want > 0 or r < 0:
        raise Refuted("a matrix bound is a positive lower bound on lambda_min, with a radius >= 0")
    R = max(r, n * e * (1 + 2**-40))

    def high(B: Any) -> list[list[Any]]:  # the exact symmetric part M
        return [[(B.q(float(A[i, j])) + B.q(float(A[j, i]))) / 2 for j in range(n)] for i in range(n)]
    shifts = claim.get("shifts") or []
    how = lower_bound(C, off + R, want, shifts, high, extra=R)
    where = (f"every symmetric S within {e:g} of the matrix entry by entry" if e else "the matrix as given")
    wider = f" and within 2-norm {r:.3g} of its symmetric part" if r > n * e * (1 + 1e-6) else ""
    return Checked(f"lambda_min(S) >= {want:.6g} > 0 for {where}{wider}: positive definite", how)


def _integer_matrix(A: np.ndarray) -> list[list[int]]:
    """``A 2^s`` as exact integers (``s`` the largest power of two among the denominators)."""
    Fr = [[Fraction(float(v)) for v in row] for row in A]
    s = max((v.denominator.bit_length() - 1 for row in Fr for v in row), default=0)
    return [[v.numerator << (s - (v.denominator.bit_length() - 1)) for v in row] for row in Fr]


def check_singular(claim: dict[str, Any], inputs: Any, scope: Any) -> Checked:
    """The exact rank of the matrix (its float64 values taken exactly) is below ``n`` and equal to the
    recorded rank."""
    A, _, _ = _symmetric(inputs)
    n = A.shape[0]
    if inputs.abs_error != 0:
        raise Refuted("singularity is proved only for the exact matrix (abs_error 0)")
    M = _integer_matrix(A)
    recorded = None if claim.get("rank") is None else _integer(claim["rank"], "rank", 0)
    low = rank_mod_p31(M)
    if low == n:
        raise Refuted(f"the matrix has full rank {n} (its rank modulo 2^31 - 1, a lower bound over Q)")
    if recorded is not None and low > recorded:
        raise Refuted(f"the rank is at least {low} (modulo 2^31 - 1), the file records {recorded}")
    r = rank_exact(M)
    if r >= n:
        raise Refuted(f"the exact matrix has full rank {n}")
    if recorded is not None and r != recorded:
        raise Refuted(f"the exact rank is {r}, the file records {recorded}")
    return Checked(f"the matrix as given (its float64 values taken exactly) has rank {r} < {n}: singular",
                   "exact rank over Q")


def check_indefinite(claim: dict[str, Any], inputs: Any, scope: Any) -> Checked:
    """``x^T A x + e ||x||_1^2 < 0`` in exact integers: ``x^T S x < 0`` for every ``S`` of the ball."""
    A, _, _ = _symmetric(inputs)
    n, e = A.shape[0], inputs.abs_error
    x = _floats(claim["vector"], {})
    if x.shape != (n,) or not np.all(np.isfinite(x)) or not np.any(x):
        raise Refuted(f"the vector must have {n} finite entries, not all zero")
    xs = _integer_matrix(x[None, :])[0]
    sx = max(Fraction(float(v)).denominator.bit_length() - 1 for v in x)
    Ai = _integer_matrix(A)
    sa = max(Fraction(float(v)).denominator.bit_length() - 1 for v in A.reshape(-1))
    xo = np.array(xs, dtype=object)
    q = Fraction(int(xo @ (np.array(Ai, dtype=object) @ xo)), 2 ** (2 * sx + sa))
    if not q + Fraction(e) * sum(abs(Fraction(float(v))) for v in x) ** 2 < 0:
        raise Refuted("x^T A x + e ||x||_1^2 is not negative")
    where = f"every symmetric S within {e:g} of the matrix entry by entry" if e else "the matrix as given"
    return Checked(f"x^T S x < 0 for {where} (x the recorded vector): not positive semidefinite",
                   "x^T A x + e ||x||_1^2 < 0 in exact integers")
