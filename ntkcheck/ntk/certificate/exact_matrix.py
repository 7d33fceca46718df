r"""Exact facts about a float64 matrix: its integers, rank, determinant, leading minors, quadratic forms.

Every double is an integer times a power of two, :math:`a = m\,2^{k}` with :math:`|m| < 2^{53}`,
so :math:`2^s A` is an integer matrix for ``s`` large enough; :func:`exact_integers` builds it
with integer shifts of the mantissas (never ``math.ldexp`` on a float: ``2^s a`` overflows a double
when the entries span more than 1024 binary orders, as ``diag(1e-300, 1e10)`` does), dropping the
common trailing zeros, so an integer-valued matrix keeps small integers. On it, FLINT gives the
exact rank (:func:`exact_rank`, after a rank modulo a 62-bit prime that proves full rank at once:
``rank_p <= rank_Q``), the determinant and the leading principal minors (Sylvester's criterion,
:func:`exact_inertia`).

A fraction-free elimination grows its entries to about ``n`` times their bit size; the cost of
the exact rank of a rank-deficient matrix was measured at 5 s for ``n = 200`` and 19 s for
``n = 300`` (140-bit entries, 2 shared cores), memory ``0.3 n^3 b / 8`` bytes for ``b``-bit entries
(:func:`rank_cost`): it is estimated before it starts and skipped, with the reason, when it
does not fit the memory (:mod:`ntkcheck._memory`) or the time left (:mod:`ntkcheck._budget`).

:func:`negative_form` proves :math:`x^T A x + e \|x\|_1^2 < 0` in floating point with a rounding
bound (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Sec. 3.1: a dot
product of length ``k`` has error at most :math:`\gamma_k |x|^T|y|`, plus an underflow allowance
per product), in ``O(n^2)`` time and no copy of the matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from flint import fmpz_mat, nmod_mat

from ... import _budget
from ..._memory import available_memory, format_bytes

__all__ = ["exact_integers", "integer_bits", "rank_cost", "exact_rank", "exact_inertia", "Inertia",
           "negative_form", "negative_form_exact", "fraction_down", "MAX_EXACT_RANK", "MAX_EXACT_MINORS"]

U = 2.0**-53
#: the exact rank is tried up to this many rows (its cost grows like n^4 b)
MAX_EXACT_RANK = 400
#: leading principal minors (Sylvester) up to this many rows: n determinants
MAX_EXACT_MINORS = 64
#: a 62-bit prime: the rank modulo it proves full rank over Q at once
_PRIME = (1 << 62) - 57
#: seconds of the exact rank of a rank-deficient n = 200 matrix of 140-bit integers (measured 5 s)
_RANK_SECONDS_200 = 5.0


def _parts(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer mantissas ``m`` (``|m| < 2^53``, odd or 0) and exponents ``k`` with ``A = m 2^k`` exactly."""
    f, e = np.frexp(A)  # A = f 2^e, 0.5 <= |f| < 1 (subnormals included)
    m = np.ldexp(f, 53).astype(np.int64)  # exact: f has 53 significant bits
    e = e.astype(np.int64) - 53
    nz = m != 0
    tz = np.zeros_like(m)
    low = np.bitwise_and(np.abs(m), -np.abs(m))  # the lowest set bit, a power of two
    tz[nz] = np.round(np.log2(low[nz].astype(np.float64))).astype(np.int64)
    return np.where(nz, m >> tz, 0), np.where(nz, e + tz, 0)


def integer_bits(A: np.ndarray) -> int:
    """The bit size of the largest entry of :func:`exact_integers` ``(A)`` (without building it)."""
    m, k = _parts(A)
    nz = m != 0
    if not nz.any():
        return 1
    return int((k[nz] - k[nz].min()).max()) + 53


def exact_integers(A: np.ndarray) -> tuple[fmpz_mat, int]:
    r"""``(M, s)`` with ``M = 2^s A`` an exact integer matrix (``s`` may be negative).

    Examples
    --------
    >>> M, s = exact_integers(np.array([[1e-300, 0.0], [0.0, 1e10]]))
    >>> M.rank(), s > 1000
    (2, True)
    """
    A = np.atleast_2d(np.asarray(A, dtype=np.float64))
    m, k = _parts(A)
    nz = m != 0
    s = 0 if not nz.any() else -int(k[nz].min())
    shifts = np.where(nz, k + s, 0)
    rows = [[int(v) << int(t) for v, t in zip(mr, tr)] for mr, tr in zip(m.tolist(), shifts.tolist())]
    return fmpz_mat(rows), s


def rank_cost(n: int, bits: int) -> tuple[float, float]:
    """Worst-case ``(seconds, bytes)`` of :func:`exact_rank` on an ``n x n`` matrix of ``bits``-bit
    integers (a rank-deficient one: a full-rank one ends after the rank modulo a prime)."""
    seconds = _RANK_SECONDS_200 * (n / 200.0) ** 4 * (bits / 140.0)
    nbytes = 0.3 * n**3 * bits / 8 + n * n * (bits / 8 + 100)
    return seconds, nbytes


def rank_fits(seconds: float, nbytes: float, skipped: list[str], what: str = "") -> bool:
    """Whether an exact rank estimated at ``seconds`` and ``nbytes`` fits the memory available and the
    time budget left; if not, the sentence naming the skipped step (``what``: e.g. its integer size)
    is appended to ``skipped``."""
    avail = available_memory()
    if nbytes > avail:
        skipped.append(f"exact rank: it would need about {format_bytes(nbytes)} of memory{what}, more than the "
                       f"{format_bytes(avail)} available")
        return False
    if not _budget.fits(seconds):
        skipped.append(f"exact rank: estimated at {seconds:.0f} s{what}, more than the "
                       f"{_budget.current().remaining():.0f} s left of the time budget")
        return False
    return True


def exact_rank(M: fmpz_mat) -> int:
    """The rank of the integer matrix ``M`` over Q: modulo a prime first (full rank there is full rank
    over Q), FLINT's exact rank otherwise."""
    if min(M.nrows(), M.ncols()) == 0:
        return 0
    full = min(M.nrows(), M.ncols())
    if nmod_mat(M, _PRIME).rank() == full:
        return full
    return int(M.rank())


@dataclass(frozen=True)
class Inertia:
    """What :func:`exact_inertia` proved about the exact symmetric integer matrix ``M``.

    ``kind`` is ``"positive"`` (every leading principal minor > 0: Sylvester), ``"singular"``
    (``det = 0``), ``"negative-eigenvalue"`` (``det < 0``: an odd number of negative eigenvalues, or
    ``det > 0`` with a leading minor <= 0: at least two); ``lower`` is a rational lower bound on
    :math:`\\lambda_{\\min}(M)` when positive: :math:`\\det M / (\\operatorname{tr} M)^{n-1}` (the
    other ``n - 1`` eigenvalues are each at most the trace)."""

    kind: str
    lower: Fraction | None
    detail: str


def exact_inertia(M: fmpz_mat) -> Inertia:
    """Sylvester's criterion on the exact symmetric integer matrix ``M`` (``n <= MAX_EXACT_MINORS``)."""
    n = M.nrows()
    det = int(M.det())
    if det == 0:
        return Inertia("singular", None, "the exact determinant is 0")
    if det < 0:
        return Inertia("negative-eigenvalue", None, "the exact determinant is negative: an odd number of "
                       "negative eigenvalues")
    for k in range(1, n):
        minor = int(fmpz_mat([[M[i, j] for j in range(k)] for i in range(k)]).det())
        if minor <= 0:
            return Inertia("negative-eigenvalue", None, f"the exact determinant is positive but the leading "
                           f"{k} x {k} minor is {'0' if minor == 0 else 'negative'}: not positive definite "
                           "(Sylvester), so at least two eigenvalues are negative")
    tr = sum(int(M[i, i]) for i in range(n))
    return Inertia("positive", Fraction(det, tr ** (n - 1)), "every leading principal minor is positive "
                   "(Sylvester's criterion, exact integers), and lambda_min >= det / tr^(n-1)")


def fraction_down(q: Fraction, exponent: int = 0) -> float:
    """The largest double at most ``q 2^exponent`` (0.0 when it is below the smallest positive double)."""
    v = q * (Fraction(2) ** exponent)
    try:
        f = float(v)
    except OverflowError:
        return float(np.finfo(np.float64).max) if v > 0 else -math.inf
    if Fraction(f) > v:
        f = float(np.nextafter(f, -np.inf))
    return f


def _gamma(k: int) -> float:
    return k * U / (1 - k * U) * (1 + 1e-10)


def negative_form(A: np.ndarray, e: float, x: np.ndarray) -> bool:
    r"""Whether :math:`x^T A x + e \|x\|_1^2 < 0` is proved: then :math:`x^T S x < 0` for every ``S``
    with :math:`|S_{ij} - A_{ij}| \le e` (``A`` any float64 matrix with entries below :math:`2^{400}` in
    absolute value, as :func:`~ntkcheck.ntk.certificate.matrix_input.prepare` scales it; ``x`` a float
    vector of norm at most 1).

    ``q = fl(x^T (A x))`` has :math:`|q - x^T A x| \le \gamma_{n+1} |x|^T |A| |x| + (n^2 + n)\eta`
    (:math:`\eta = 2^{-1074}` per product that may underflow); the bound and :math:`e\|x\|_1^2` are
    evaluated as sums of nonnegative terms and inflated by their own :math:`\gamma`.

    Examples
    --------
    >>> negative_form(np.array([[0.5, 0.0], [0.0, -0.5]]), 0.0, np.array([0.0, 1.0]))
    True
    >>> negative_form(np.array([[0.5, 0.0], [0.0, -0.5]]), 0.5, np.array([0.0, 1.0]))
    False
    """
    n = A.shape[0]
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        q = float(x @ (A @ x))
        ax = np.abs(x)
        bound = float(ax @ (np.abs(A) @ ax)) * (1 + _gamma(n + 2)) * _gamma(n + 1)
        l1 = float(ax.sum()) * (1 + _gamma(n + 1))
        tail = (bound + e * l1 * l1 * (1 + 4 * U) + (n * n + n + 2) * 2.0**-1074) * (1 + 4 * U)
    return bool(math.isfinite(q) and math.isfinite(tail) and q < 0 and tail < -q)


def negative_form_exact(A: np.ndarray, e: float, x: np.ndarray) -> bool:
    r"""Whether :math:`x^T A x + e\|x\|_1^2 < 0` exactly (integers over common powers of two): the
    fallback of :func:`negative_form` when the margin is below its rounding bound (``O(n^2)`` big-integer
    products; for ``n <= MAX_EXACT_RANK``).

    Examples
    --------
    >>> eps = 2.0**-50
    >>> negative_form_exact(np.array([[1.0, 1.0], [1.0, 1.0 - eps]]), 0.0, np.array([1.0, -1.0]))
    True
    """
    Ai, s = exact_integers(A)
    xi, t = exact_integers(np.asarray(x, dtype=np.float64).reshape(-1, 1))
    q = int((xi.transpose() * Ai * xi)[0, 0])  # = 2^(s + 2t) x^T A x
    l1 = sum(abs(int(v)) for v in xi.entries())  # = 2^t ||x||_1
    return Fraction(q) / Fraction(2) ** (s + 2 * t) + Fraction(e) * Fraction(l1 * l1) / Fraction(2) ** (2 * t) < 0
