r"""Certified linear algebra on coefficient matrices (rows: measures, columns: Taylor orders).

* :func:`modp_full_rank` -- full row rank over Q from rank modulo a 62-bit prime
  (FLINT ``nmod_mat``): a minor whose determinant is non-zero mod p is non-zero over Q.
* :func:`ball_full_rank` -- full row rank from Arb balls: the inverse of a square column
  block enclosed by ``arb_mat.inv`` gives :math:`\sigma_{\min} \ge 1/\|B^{-1}\|_F`,
  and the smallest singular value of the full matrix is at least that of any block.
* :func:`exact_nullspace` -- a basis of the left null space over Q (FLINT ``fmpq_mat.rref``).
* :func:`scale_rows` and :func:`float_screen` -- power-of-two scaling read from the
  balls' exponents (never through float64, so orders whose coefficients exceed the
  float range are fine), then a float64 SVD of the scaled matrix: the margin only.

Scaling. The coefficient of order ``k`` grows like :math:`R^k` (``R`` the support radius
along the direction), so a high order overflows float64 long before it means anything.
Every column ``j`` is multiplied by :math:`2^{c_j}` and, when samples differ in scale by
more than :data:`ROW_SPREAD_LOG2` binary orders, every row ``i`` by :math:`2^{r_i}` with
:math:`r_i \le 0`. Both are exact and leave the rank unchanged; with :math:`r_i \le 0`,
:math:`\sigma_{\min}(B D_c) \ge \sigma_{\min}(D_r B D_c)` (as
:math:`\sigma_{\min}(D_r^{-1}) = 2^{-\max_i r_i} \ge 1`), so a bound stated for the fully
scaled block also holds for the column-scaled one.

The timings that chose these routes are in ``theory/certificates.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.linalg
from flint import arb, arb_mat, fmpq, fmpq_mat, nmod_mat

from .._budget import Budget
from .._precision import flint_prec
from .._records import fraction_or_text, restore
from ._arb_cost import check_arb_inverse

__all__ = [
    "PRIMES",
    "ExactMinor",
    "BallBound",
    "Scaled",
    "scale_rows",
    "float_screen",
    "choose_columns",
    "ball_full_rank",
    "ball_attempt",
    "bits_for",
    "modp_full_rank",
    "exact_nullspace",
    "qstr",
]

# Two 62-bit primes: a rank drop modulo both is strong evidence of a rank drop over Q.
PRIMES = (4611686018427387847, 4611686018427387817)

#: rows are scaled too when their largest entries differ by more than 2^ROW_SPREAD_LOG2
ROW_SPREAD_LOG2 = 30

#: scaled entries below 2^-FLUSH_LOG2 are flushed to 0 in the float64 view (not in the balls):
#: float64 cannot resolve them against the column maximum, and their products would be
#: subnormal numbers, which slow LAPACK down a hundredfold
FLUSH_LOG2 = 200

#: blocks from this size on are prechecked by an approximate solve before the rigorous inverse
PRECHECK_MIN_N = 24


def _dirs_out(directions: Sequence[Sequence[Fraction]]) -> list[list[str]]:
    return [[qstr(v) for v in w] for w in directions]


def _cols_out(columns: Sequence[Any]) -> list[Any]:
    return [list(c) if isinstance(c, tuple) else c for c in columns]


def _cols_in(columns: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(tuple(c) if isinstance(c, list) else c for c in columns)


@dataclass(frozen=True)
class ExactMinor:
    """Certificate of full row rank: a square minor non-singular modulo a prime.

    Attributes
    ----------
    columns : tuple
        The minor's columns: Taylor orders ``k`` (one direction) or pairs
        ``(direction index, k)`` into ``directions`` (stacked directions, weak property).
        Rows are all the measures, in the order given.
    prime : int
        The prime ``p``; every entry is the exact rational coefficient
        :math:`c_{ik} = \\kappa_k(\\langle w, Y_i\\rangle)/k!` reduced mod ``p``.
    det_mod_p : int
        The minor's determinant mod ``p`` (non-zero).
    det : Fraction or None
        The exact determinant of the minor of the coefficients :math:`c_{ik}` (``n <= 12``).
    directions : tuple of tuple of Fraction
        The directions ``w`` of the coefficient matrix (one for the strong property).
    K : int
        Highest Taylor order of the truncation (the matrix has orders ``2..K``).
    """

    columns: tuple[Any, ...]
    prime: int
    det_mod_p: int
    det: Fraction | None  # exact determinant of the minor when cheap
    directions: tuple[tuple[Fraction, ...], ...] = ()
    K: int = 0

    kind: str = "exact-minor"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "columns": _cols_out(self.columns),
            "directions": _dirs_out(self.directions),
            "K": self.K,
            "prime": self.prime,
            "det_mod_p": self.det_mod_p,
            "det": None if self.det is None else _short(self.det),
            "statement": f"the minor on orders {_cols_out(self.columns)} of the truncation 2..{self.K} has determinant "
            f"{self.det_mod_p} != 0 mod p={self.prime}, hence != 0 over Q",
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExactMinor:
        return restore(cls, d, columns=_cols_in, det=fraction_or_text)


@dataclass(frozen=True)
class BallBound:
    """Certificate of full row rank: a rigorous lower bound on a singular value.

    Attributes
    ----------
    columns : tuple
        The square block's columns (orders, or ``(direction index, order)`` pairs).
    column_scale_log2 : tuple of int
        Column ``j`` of the block is multiplied by ``2**column_scale_log2[j]``.
    sigma_min_lower : float
        A lower bound, rounded down, on the smallest singular value of the block scaled
        by rows and columns, hence (rows scaled by ``2**r``, ``r <= 0``) also of the
        block scaled by columns only. May underflow to ``0.0`` for extreme data; then
        ``sigma_min_lower_log2`` carries it.
    prec_bits : int
        Arb working precision of the coefficients and of the inversion.
    row_scale_log2 : tuple of int
        Row ``i`` multiplied by ``2**row_scale_log2[i]`` (all ``<= 0``; zeros unless the
        samples differ in scale by more than ``2**ROW_SPREAD_LOG2``).
    sigma_min_lower_log2 : float
        ``log2`` of the bound (finite even when the float bound underflows).
    directions : tuple of tuple of Fraction
    K : int
        Highest Taylor order of the truncation.
    """

    columns: tuple[Any, ...]
    column_scale_log2: tuple[int, ...]
    sigma_min_lower: float
    prec_bits: int
    row_scale_log2: tuple[int, ...] = ()
    sigma_min_lower_log2: float = float("-inf")
    directions: tuple[tuple[Fraction, ...], ...] = ()
    K: int = 0

    kind: str = "ball-bound"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "columns": _cols_out(self.columns),
            "directions": _dirs_out(self.directions),
            "K": self.K,
            "column_scale_log2": list(self.column_scale_log2),
            "row_scale_log2": list(self.row_scale_log2),
            "sigma_min_lower": self.sigma_min_lower,
            "sigma_min_lower_log2": self.sigma_min_lower_log2,
            "prec_bits": self.prec_bits,
            "statement": (
                f"Arb at {self.prec_bits} bits: the scaled block on orders {_cols_out(self.columns)} of the truncation "
                f"2..{self.K} has sigma_min >= 2^{self.sigma_min_lower_log2:.1f} > 0"
            ),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BallBound:
        return restore(cls, d, columns=_cols_in)


def _short(q: Fraction, digits: int = 60) -> str:
    s = qstr(q, digits)
    return s


def qstr(q: Any, digits: int = 4000) -> str:
    """``str`` of an exact rational, or ``~1e<k> (<m>-digit numerator)`` when longer than ``digits``.

    Python refuses to print integers of more than 4300 digits; exact data (a radius
    ``1 + 10**-5000``) can have such coefficients.
    """
    if not isinstance(q, Fraction):
        if isinstance(q, fmpq):
            q = Fraction(int(q.p), int(q.q))
        else:
            return str(q)
    num, den = abs(q.numerator), q.denominator
    if max(num.bit_length(), den.bit_length()) * 0.30103 < digits - 2:
        return str(q)
    log10 = (num.bit_length() - den.bit_length()) * math.log10(2)
    sign = "-" if q < 0 else ""
    return f"{sign}~1e{log10:.0f} ({int(num.bit_length() * 0.30103) + 1}-digit numerator)"


# ------------------------------------------------------------------------ scaling


@dataclass(frozen=True)
class Scaled:
    """Float64 view of a matrix of balls after exact power-of-two scaling.

    Attributes
    ----------
    A : (n, K) float array
        Midpoints of :math:`2^{r_i} C_{ij} 2^{c_j}`: every non-zero column has its
        largest entry in ``[1/2, 1)``; entries far below underflow to ``0``.
    row_exp, col_exp : int arrays
        ``r`` (all ``<= 0``) and ``c``.
    nonzero : (n, K) bool array
        Whether the ball's midpoint is non-zero.
    mag_log2 : (n, K) int array
        ``log2`` of the scaled midpoints' magnitudes, rounded up (also for the flushed ones).
    """

    A: np.ndarray
    row_exp: np.ndarray
    col_exp: np.ndarray
    nonzero: np.ndarray
    mag_log2: np.ndarray | None = None


def _parts(rows: list[list[arb]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Midpoints as ``F * 2^E`` with ``|F|`` in ``[1/2, 1)``, from the balls' own exponents."""
    n = len(rows)
    K = len(rows[0]) if n else 0
    with np.errstate(over="ignore"):
        fast = np.array([[float(v.mid()) for v in r] for r in rows], dtype=np.float64).reshape(n, K)
    F, E = np.frexp(fast)
    E = E.astype(np.int64)
    bad = ~np.isfinite(fast) | ((fast == 0) | (np.abs(fast) < 2.0**-1000))
    nonzero = fast != 0
    for i, j in zip(*np.nonzero(bad)):
        m = rows[i][j].mid()
        if m.is_zero():
            F[i, j], E[i, j], nonzero[i, j] = 0.0, 0, False
            continue
        man, ex = _top_bits(m)
        f, e = math.frexp(float(man))
        F[i, j], E[i, j], nonzero[i, j] = f, e + ex, True
    return F, E, nonzero


def _max_masked(E: np.ndarray, mask: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    low = np.iinfo(np.int64).min // 4
    M = np.where(mask, E, low).max(axis=axis)
    return M, mask.any(axis=axis)


def scale_rows(rows: list[list[arb]]) -> Scaled:
    """Exact power-of-two row and column scaling of a matrix of balls, and its float64 midpoints."""
    F, E, nz = _parts(rows)
    n, K = F.shape
    r = np.zeros(n, dtype=np.int64)
    colmax, colnz = _max_masked(E, nz, 0)
    c = np.where(colnz, -colmax, 0)
    if n and K:
        rowmax, rownz = _max_masked(E + c[None, :], nz, 1)
        spread = (rowmax[rownz].max() - rowmax[rownz].min()) if rownz.any() else 0
        if spread > ROW_SPREAD_LOG2:
            for _ in range(3):  # alternate: rows to max 1, then columns to max 1
                rowmax, rownz = _max_masked(E + c[None, :], nz, 1)
                r = np.where(rownz, -rowmax, 0)
                r = r - r.max()  # r <= 0: a bound for the scaled block holds for the column-scaled one
                colmax, colnz = _max_masked(E + r[:, None], nz, 0)
                c = np.where(colnz, -colmax, 0)
    tot = E + r[:, None] + c[None, :]
    # entries below 2^-FLUSH_LOG2 of their column's largest are 0 for float64 purposes
    # (subnormal numbers would slow LAPACK down a hundredfold)
    keep = nz & (tot > -FLUSH_LOG2)
    A = np.where(keep, np.ldexp(F, np.clip(tot, -FLUSH_LOG2, 64).astype(np.int32)), 0.0)
    return Scaled(A, r, c, nz, np.where(nz, tot, np.iinfo(np.int64).min // 4))


def float_screen(mid: np.ndarray | Scaled) -> tuple[float, np.ndarray]:
    """Relative singular values of the scaled matrix: (margin, s / s_max).

    ``mid`` is a :class:`Scaled` (from :func:`scale_rows`) or a float array (columns are
    then scaled by powers of two here; non-finite entries count as zero).
    """
    if isinstance(mid, Scaled):
        A = mid.A
    else:
        A = np.where(np.isfinite(mid), mid, 0.0)
        mx = np.max(np.abs(A), axis=0) if A.size else np.zeros(0)
        e = np.where(mx > 0, -np.floor(np.log2(np.where(mx > 0, mx, 1.0))), 0)
        A = A * np.exp2(e)[None, :]
    if A.size == 0:
        return 0.0, np.zeros(0)
    s = scipy.linalg.svdvals(A)
    if s.size == 0 or s[0] == 0:
        return 0.0, s
    rel = s / s[0]
    n = A.shape[0]
    margin = float(rel[n - 1]) if rel.size >= n else 0.0
    return margin, rel


def choose_columns(A: np.ndarray, labels: Sequence[Any] | None = None) -> list[list[int]]:
    """Candidate column sets for a square block of the scaled matrix ``A``.

    The lowest orders first (the Vandermonde-like block; with stacked directions the
    lowest orders across directions), then the pivoted-QR choice if it differs.
    """
    return list(_column_candidates(A, labels))


def _column_candidates(A: np.ndarray, labels: Sequence[Any] | None = None) -> Iterator[list[int]]:
    """:func:`choose_columns` lazily: the pivoted QR runs only if the first block fails."""
    n, K = A.shape
    nz = [j for j in range(K) if np.any(A[:, j] != 0)]
    if len(nz) < n:
        return
    if labels is not None and any(isinstance(lb, tuple) for lb in labels):
        low = sorted(sorted(nz, key=lambda j: (labels[j][1], labels[j][0]))[:n])
    else:
        low = nz[:n]
    yield low
    _, _, piv = scipy.linalg.qr(A[:, nz], pivoting=True, mode="economic")
    qr = sorted(nz[j] for j in piv[:n])
    if qr != low:
        yield qr


def _top_bits(m: arb) -> tuple[int, int]:
    """An exact non-zero dyadic ``m`` as ``man * 2**ex`` with ``man`` truncated to 60 bits (rounded towards 0)."""
    man, ex = m.man_exp()
    man, ex = int(man), int(ex)
    bl = abs(man).bit_length()
    if bl > 60:
        sign = -1 if man < 0 else 1
        man = sign * (abs(man) >> (bl - 60))
        ex += bl - 60
    return man, ex


def _pow2(k: int) -> arb:
    return arb(2) ** int(k)


def ball_attempt(
    rows: list[list[arb]],
    labels: Sequence[Any],
    prec: int,
    *,
    directions: Sequence[tuple[Fraction, ...]] = (),
    K: int = 0,
    scaled: Scaled | None = None,
    precheck: bool = True,
    budget: Budget | None = None,
) -> tuple[BallBound | None, float | None]:
    """Try to certify full row rank from Arb balls at ``prec`` bits.

    Returns ``(certificate or None, estimate)``; on failure ``estimate`` is ``log2`` of
    the size of an approximate solution of the first candidate block for a fixed +-1
    right-hand side (its inverse norm at this precision, not rigorous: it only guides the
    precision ladder, :func:`bits_for`). With ``precheck`` (blocks of at least
    :data:`PRECHECK_MIN_N` rows) the rigorous inverse is skipped when that size and Arb's
    loss exceed the accuracy of the entries. With a ``budget``, each
    block's inversion is first estimated (:func:`~ntkcheck.independence._arb_cost.check_arb_inverse`)
    and :class:`~ntkcheck._budget.OutOfTime` raised when it would not fit in the time left.
    """
    n = len(rows)
    if n == 0:
        return None, None
    S = scaled if scaled is not None else scale_rows(rows)
    estimate = None
    with flint_prec(prec):
        rs = [_pow2(v) for v in S.row_exp]
        for cols in _column_candidates(S.A, labels):
            check_arb_inverse(n, prec, budget)  # FLINT cannot be interrupted: never start what cannot finish
            cs = [_pow2(S.col_exp[j]) for j in cols]
            B = arb_mat(n, n, [rows[i][j] * rs[i] * cs[a] for i in range(n) for a, j in enumerate(cols)])
            if precheck and n >= PRECHECK_MIN_N:
                # an approximate solve costs a fraction of the rigorous inverse: skip the inverse
                # when the block's inverse is too large for the entries' accuracy and Arb's loss
                size = _inverse_size_log2(B)
                acc = _accuracy_log2(rows, cols, S)
                if estimate is None:
                    estimate = size
                if size is None or size + _slack(size, n) > acc:
                    if size is None or size > acc + 32:
                        break  # far beyond this precision: another column choice will not rescue it
                    continue
            try:
                Binv = B.inv()
            except ZeroDivisionError:
                if estimate is None:
                    estimate = _inverse_size_log2(B)
                continue
            tot = arb(0)
            for e in Binv.entries():
                u = e.abs_upper()
                tot += u * u
            if not tot.is_finite():
                continue
            lower = (1 / tot.sqrt()).lower()
            if not (lower > 0):
                continue
            man, ex = _top_bits(lower.mid())
            lo_log2 = math.log2(man) + ex - 2.0**-40  # rounded down
            lo = math.ldexp(float(man), ex) * (1 - 2.0**-50) if ex > -1100 else 0.0
            return (
                BallBound(
                    tuple(labels[j] for j in cols), tuple(int(S.col_exp[j]) for j in cols), lo, prec,
                    tuple(int(v) for v in S.row_exp), lo_log2, tuple(tuple(w) for w in directions), K,
                ),
                None,
            )
    return None, estimate


#: Arb's loss in ``arb_mat.inv`` (a preconditioned solve), as a fraction of log2 ||B^-1||: measured on
#: the uniform-cube Vandermonde blocks, n = 256 needs 101 < loss <= 229 bits at ||B^-1|| ~ 2^893, n = 128
#: at most 51 bits at 2^435 (benchmarks/bench_decide.py)
ARB_LOSS = 0.2
#: bits lost building the coefficient balls before the block is formed (measured 26-37)
SERIES_LOSS = 48


def _slack(size: float, n: int) -> float:
    """Bits beyond ``log2 ||B^-1||`` that ``arb_mat.inv`` needs to certify ``B`` (a guide, measured)."""
    return max(math.log2(max(n, 2)) + 8.0, ARB_LOSS * size)


def bits_for(size: float, n: int) -> int:
    """The working precision expected to certify an ``n x n`` block whose inverse has size
    ``2^size``: the size, Arb's loss (:func:`_slack`) and the coefficients' own loss, rounded up to 64."""
    return 64 * math.ceil((size + _slack(size, n) + SERIES_LOSS) / 64)


def _rhs(n: int) -> list[int]:
    """A fixed +-1 right-hand side: its solution has size ``||B^-1||_2`` to within a few bits for
    every block (the all-ones vector is special for Vandermonde-like blocks: 2^194 against 2^479 at
    n = 128), so the estimate predicts the precision the block needs."""
    return [1 if v else -1 for v in np.random.default_rng(12345).integers(0, 2, n)]


def _inverse_size_log2(B: arb_mat) -> float | None:
    """``log2 max |x|`` for the approximate solution of ``mid(B) x = b``, ``b`` a fixed +-1 vector
    (:func:`_rhs`; a guide, not a bound)."""
    n = B.nrows()
    try:
        x = B.mid().solve(arb_mat(n, 1, _rhs(n)), algorithm="approx")
    except (ZeroDivisionError, ValueError):
        return None
    best = None
    for i in range(n):
        m = x[i, 0].mid()
        if m.is_zero() or not m.is_finite():
            continue
        man, ex = m.man_exp()
        v = int(man).bit_length() + int(ex)
        best = v if best is None else max(best, v)
    return None if best is None else float(best)


def _accuracy_log2(rows: list[list[arb]], cols: Sequence[int], S: Scaled) -> float:
    """Absolute accuracy (bits) of the scaled block: relative accuracy of each ball plus
    ``-log2`` of its scaled size (every scaled entry is at most 1)."""
    worst = float("inf")
    for j in cols:
        rel = np.array([rows[i][j].rel_accuracy_bits() for i in range(len(rows))], dtype=np.float64)
        mag = S.mag_log2[:, j].astype(np.float64) if S.mag_log2 is not None else np.zeros(len(rows))
        acc = np.where(S.nonzero[:, j], rel - mag, np.inf)
        worst = min(worst, float(acc.min()))
    return worst


def ball_full_rank(rows: list[list[arb]], orders: list[Any], prec: int, **kw: Any) -> BallBound | None:
    """Full row rank certificate from Arb balls at ``prec`` bits, or None when not certified."""
    return ball_attempt(rows, orders, prec, **kw)[0]


def _pivots(R: Any, n: int, K: int) -> list[int]:
    """Pivot columns of a matrix in reduced row echelon form with rank ``n``."""
    piv = []
    for i in range(n):
        for j in range(K):
            if int(R[i, j]) != 0:
                piv.append(j)
                break
    return piv


def modp_full_rank(
    rows: list[list[int]],
    labels: list[Any],
    p: int,
    exact_rows: list[list[fmpq]] | None = None,
    *,
    directions: Sequence[tuple[Fraction, ...]] = (),
    K: int = 0,
) -> ExactMinor | None:
    """Full row rank certificate from a matrix already reduced modulo the prime ``p``.

    ``rows[i][j]`` is the exact rational entry reduced mod ``p`` (entries of one row may
    share no common scaling: reduction commutes with the field operations, so a minor
    non-zero mod ``p`` is the reduction of a non-zero rational determinant).
    """
    n = len(rows)
    Kc = len(rows[0]) if rows else 0
    if n == 0 or Kc < n:
        return None
    M = nmod_mat(n, Kc, [v for r in rows for v in r], p)
    if M.rank() < n:
        return None
    R, _ = M.rref()
    piv = _pivots(R, n, Kc)
    detp = int(nmod_mat(n, n, [rows[i][j] for i in range(n) for j in piv], p).det())
    if detp == 0:
        return None
    det = None
    if exact_rows is not None and n <= 12:
        det_q = fmpq_mat(n, n, [exact_rows[i][j] for i in range(n) for j in piv]).det()
        det = Fraction(int(det_q.p), int(det_q.q))
    return ExactMinor(tuple(labels[j] for j in piv), p, detp, det, tuple(tuple(w) for w in directions), K)


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
