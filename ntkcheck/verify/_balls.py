r"""Ball (interval) arithmetic for the verifier: Arb via python-flint when it is installed, else mpmath.

Every quantity that is not a rational (an exponential, a square root, a Gram built from softmax
weights) is enclosed in a ball that provably contains it; a comparison is "certainly" true or it
is not claimed. The same code runs on either backend (:func:`balls` yields one bound to a
working precision): python-flint's Arb is about 25 times faster, so the size limits of the
claims that use balls are smaller without it. Without either library those claims are
"unchecked: cannot re-check here", never refuted.

Positive definiteness of a ball of symmetric matrices is proved by an :math:`LDL^T`
factorisation whose pivots are certainly positive balls (in blocks with Arb's enclosed solve for
the Schur complement under python-flint; scalar under mpmath).

References: F. Johansson, "Arb: efficient arbitrary-precision midpoint-radius interval
arithmetic", IEEE Trans. Comput. 66 (2017); theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from ._common import Unchecked
from ._exact import flint
from ._precision import _interval_context, _workprec


class _Arb:
    """Balls of python-flint (under the one FLINT precision region)."""

    name = "python-flint (Arb)"
    speed = 1.0

    def __init__(self, fl: Any) -> None:
        self.fl = fl

    def q(self, v: Any) -> Any:
        if isinstance(v, Fraction):
            return self.fl.arb(self.fl.fmpq(v.numerator, v.denominator))
        return self.fl.arb(int(v) if isinstance(v, int) else float(v))

    def exp(self, x: Any) -> Any:
        return x.exp()

    def log(self, x: Any) -> Any:
        return x.log()

    def sqrt(self, x: Any) -> Any:
        return x.sqrt()

    def positive(self, x: Any) -> bool:
        return bool(x > 0)

    def mid(self, x: Any) -> float:
        return float(x.mid())

    def upper_abs(self, x: Any) -> float:
        """A float above ``|y|`` for every ``y`` in the ball."""
        return float(np.nextafter(abs(float(x.mid())) + float(x.rad()), np.inf)) * (1 + 2**-40)

    def matmul(self, A: list[list[Any]], B: list[list[Any]]) -> list[list[Any]]:
        M = self.fl.arb_mat(A) * self.fl.arb_mat(B)
        return [[M[i, j] for j in range(M.ncols())] for i in range(M.nrows())]

    def pd(self, G: list[list[Any]], block: int = 32) -> bool:
        """Every symmetric matrix in the ball ``G`` is positive definite: a scalar LDL^T of each
        leading block with positive pivots, the Schur complement by ``arb_mat.solve``."""
        arb, arb_mat = self.fl.arb, self.fl.arb_mat
        M = arb_mat(G)
        n = M.nrows()
        while n:
            k = min(block, n)
            if not _ldl_positive([[M[i, j] for j in range(k)] for i in range(k)], arb(0), self.positive):
                return False
            if k == n:
                return True
            A = arb_mat([[M[i, j] for j in range(k)] for i in range(k)])
            B = arb_mat([[M[i, j] for j in range(k)] for i in range(k, n)])
            C = arb_mat([[M[i, j] for j in range(k, n)] for i in range(k, n)])
            try:
                M = C - B * A.solve(B.transpose())
            except ZeroDivisionError:
                return False
            n -= k
        return True


class _Mpmath:
    """Intervals of mpmath, in a private context (no process-global precision is touched)."""

    name = "mpmath (intervals)"
    speed = 25.0

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self._libmp = importlib.import_module("mpmath.libmp")

    def q(self, v: Any) -> Any:
        if isinstance(v, Fraction):
            return self.ctx.mpf(v.numerator) / self.ctx.mpf(v.denominator)
        return self.ctx.mpf(int(v) if isinstance(v, int) else float(v))

    def exp(self, x: Any) -> Any:
        return self.ctx.exp(x)

    def log(self, x: Any) -> Any:
        return self.ctx.log(x)

    def sqrt(self, x: Any) -> Any:
        return self.ctx.sqrt(x)

    def positive(self, x: Any) -> bool:
        return (x > 0) is True

    def mid(self, x: Any) -> float:
        lo, hi = x._mpi_
        return (self._libmp.to_float(lo) + self._libmp.to_float(hi)) / 2

    def upper_abs(self, x: Any) -> float:
        lo, hi = x._mpi_
        lib = self._libmp
        return max(lib.to_float(lib.mpf_neg(lo), rnd=lib.round_ceiling), lib.to_float(hi, rnd=lib.round_ceiling))

    def matmul(self, A: list[list[Any]], B: list[list[Any]]) -> list[list[Any]]:
        cols = list(zip(*B))
        zero = self.ctx.mpf(0)
        return [[sum((a * b for a, b in zip(row, col)), zero) for col in cols] for row in A]

    def pd(self, G: list[list[Any]]) -> bool:
        return _ldl_positive(G, self.ctx.mpf(0), self.positive)


def _ldl_positive(G: list[list[Any]], zero: Any, positive: Any) -> bool:
    """A scalar LDL^T of the ball ``G`` whose every pivot is a certainly positive ball."""
    k = len(G)
    D: list[Any] = []
    L = [[zero] * k for _ in range(k)]
    for j in range(k):
        s = G[j][j] - sum((L[j][m] ** 2 * D[m] for m in range(j)), zero)
        if not positive(s):
            return False
        D.append(s)
        for i in range(j + 1, k):
            L[i][j] = (G[i][j] - sum((L[i][m] * L[j][m] * D[m] for m in range(j)), zero)) / s
    return True


def available() -> str | None:
    """The ball backend this process would use, or ``None`` when neither library is installed."""
    if flint() is not None:
        return _Arb.name
    try:
        importlib.import_module("mpmath")
    except ImportError:
        return None
    return _Mpmath.name


def speed() -> float:
    """How many times slower than Arb the available backend is (limits are divided by it)."""
    return 1.0 if flint() is not None else _Mpmath.speed


@contextlib.contextmanager
def balls(bits: int) -> Iterator[Any]:
    """Ball arithmetic at ``bits`` of working precision: Arb if python-flint is installed, else
    mpmath's intervals; "unchecked" when neither is."""
    fl = flint()
    if fl is not None:
        with _workprec(bits):
            yield _Arb(fl)
        return
    try:
        ctx = _interval_context(bits)
    except ImportError:
        raise Unchecked("cannot re-check here: this claim needs ball arithmetic, and neither python-flint nor "
                        "mpmath is installed") from None
    yield _Mpmath(ctx)
