r"""Ball arithmetic on numpy arrays, for truncated Taylor series and first-order tangents.

Private to :mod:`ntkcheck.convergence.enclosure` (``theory/flow-numerics.md``, "Ball arithmetic").
A :class:`Series` holds coefficients along axis 0, each a ball: midpoints ``mid`` and radii
``rad`` (``rad is None``: plain float64, no enclosure, used to *compute* an approximate solution).

* :class:`Taylor`: coefficient ``k`` of :math:`t^k`, ``k = 0..m``, truncated at ``m``
  (:math:`c_k = \sum_{j\le k} a_j b_{k-j}` for a product, the recurrences of :math:`e^a` and
  :math:`1/b` for the transcendental steps).
* :class:`Dual`: coefficient 0 the value, coefficient ``1 + a`` the derivative along direction
  ``a`` (forward-mode differentiation in ``P`` directions at once: a Jacobian, or the Hessian of the
  loss by differentiating its gradient).

**Enclosure.** Every operation returns balls that contain the exact result of the same operation
on every point of its input balls (inclusion isotonicity), under IEEE double arithmetic rounding to
nearest: a sum of ``n`` products computed in any order (BLAS, ``einsum``) is within
:math:`\gamma_n\sum|a||b|` of the exact one, :math:`\gamma_n = nu/(1-nu)`, :math:`u = 2^{-53}`
(Higham, *Accuracy and Stability*, Lemma 3.1); ``np.exp`` is within ``U_EXP`` relative
(:mod:`ntkcheck.ntk.certificate.rounding`, tested against Arb). A radius is an expression of
nonnegative terms evaluated in floating point; :func:`_up` inflates it by the relative rounding of
that evaluation (at most ``n + 16`` operations deep) and adds an underflow allowance. Constant
operands are float64 arrays, exact as given.

References: S. M. Rump, "Fast and parallel interval arithmetic", BIT 39 (1999) 534-554
(midpoint-radius arithmetic); A. Griewank and A. Walther, *Evaluating Derivatives*, 2nd ed.,
ch. 13 (Taylor propagation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import DomainError
from ...ntk.certificate.rounding import U_EXP

U = 2.0**-53
#: absolute allowance added to every radius: far above 2^-1074 times the operations behind it, and
#: high enough that products of radii stay normal numbers (subnormal arithmetic is ~100x slower)
TINY = 2.0**-600


def _gamma(n: int) -> float:
    r""":math:`\gamma_n = nu/(1 - nu)`."""
    nu = n * U
    if nu >= 0.5:
        raise DomainError(f"a sum of {n} terms is too long for the rounding bound")
    return nu / (1.0 - nu)


def _up(x: np.ndarray, n: int = 0) -> np.ndarray:
    """An upper bound of the exact value of a nonnegative expression computed as ``x`` (``n + 16`` deep)."""
    return x * (1.0 + (n + 16) * 2.0**-52) + TINY


def _align(a: np.ndarray, nd: int) -> np.ndarray:
    """``a`` (coefficients first) with unit axes inserted after axis 0 up to ``1 + nd`` axes."""
    extra = nd - (a.ndim - 1)
    return a.reshape(a.shape[:1] + (1,) * extra + a.shape[1:]) if extra > 0 else a


def _matmul_inner(a: np.ndarray) -> int:
    return int(a.shape[-1])


class Series:
    """Coefficients with ball entries along axis 0 (see the module docstring); subclasses fix the algebra."""

    __slots__ = ("mid", "rad")

    def __init__(self, mid: np.ndarray, rad: np.ndarray | None) -> None:
        self.mid = mid
        self.rad = rad

    # ----------------------------------------------------------------- construction
    @classmethod
    def const(cls, value: Any, rad: Any = None, rigorous: bool = True) -> Series:
        """A constant (one coefficient): ``value`` exact, or the ball ``value +- rad``."""
        m = np.asarray(value, dtype=np.float64)[None]
        if not rigorous:
            return cls(m, None)
        r = np.zeros_like(m) if rad is None else np.broadcast_to(np.asarray(rad, dtype=np.float64)[None], m.shape).copy()
        return cls(m, r)

    def _like(self, mid: np.ndarray, rad: np.ndarray | None) -> Series:
        return type(self)(mid, rad)

    def const_like(self, value: Any, rad: Any = None) -> Series:
        """A constant of this algebra and mode."""
        return type(self).const(value, rad, rigorous=self.rigorous)

    def center(self) -> np.ndarray:
        """The float midpoint of the value (coefficient 0)."""
        return self.mid[0]

    def value_only(self) -> Series:
        """The value without its higher coefficients (a constant)."""
        return self.coefficient(0)

    def concat(self, others: list[Series]) -> Series:
        """This series and ``others`` joined along the last logical axis."""
        parts = [self, *others]
        mid = np.concatenate([p.mid for p in parts], axis=-1)
        rad = None if any(p.rad is None for p in parts) else np.concatenate([p.rad for p in parts], axis=-1)
        return self._like(mid, rad)

    def _coerce(self, other: Any) -> Series:
        if isinstance(other, Series):
            if type(other) is not type(self) and other.order_count > 1 and self.order_count > 1:
                raise TypeError("cannot combine a Taylor series with a tangent bundle")
            return other
        return type(self).const(other, rigorous=self.rad is not None)

    # ----------------------------------------------------------------- shape
    @property
    def order_count(self) -> int:
        return int(self.mid.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.mid.shape[1:])

    @property
    def ndim(self) -> int:
        return self.mid.ndim - 1

    @property
    def rigorous(self) -> bool:
        return self.rad is not None

    def _map(self, fn: Any) -> Series:
        return self._like(fn(self.mid), None if self.rad is None else fn(self.rad))

    def reshape(self, *shape: int) -> Series:
        return self._map(lambda a: a.reshape(a.shape[:1] + tuple(shape)))

    def transpose(self, *axes: int) -> Series:
        ax = (0,) + tuple(a + 1 for a in axes)
        return self._map(lambda a: a.transpose(ax))

    def swap(self, i: int, j: int) -> Series:
        """Swap two logical axes (negative indices count from the end)."""
        i = i % self.ndim + 1
        j = j % self.ndim + 1
        return self._map(lambda a: np.swapaxes(a, i, j))

    def __getitem__(self, idx: Any) -> Series:
        idx = idx if isinstance(idx, tuple) else (idx,)
        return self._map(lambda a: a[(slice(None),) + idx])

    def coefficient(self, k: int) -> Series:
        """Coefficient ``k`` as a constant series (one coefficient)."""
        return self._like(self.mid[k : k + 1], None if self.rad is None else self.rad[k : k + 1])

    # ----------------------------------------------------------------- bounds
    def upper_abs(self) -> np.ndarray:
        """Upper bounds of the absolute values of every coefficient (float mode: ``|mid|``)."""
        if self.rad is None:
            return np.abs(self.mid)
        return _up(np.abs(self.mid) + self.rad)

    # ----------------------------------------------------------------- linear operations
    def __add__(self, other: Any) -> Series:
        return self._addsub(self._coerce(other), 1.0)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Series:
        return self._addsub(self._coerce(other), -1.0)

    def __rsub__(self, other: Any) -> Series:
        return self._coerce(other)._addsub(self, -1.0)

    def __neg__(self) -> Series:
        return self._like(-self.mid, None if self.rad is None else self.rad.copy())

    def _addsub(self, o: Series, sign: float) -> Series:
        nd = max(self.ndim, o.ndim)
        am, bm = _align(self.mid, nd), _align(o.mid, nd)
        c = max(am.shape[0], bm.shape[0])
        shape = np.broadcast_shapes(am.shape[1:], bm.shape[1:])
        mid = np.zeros((c,) + shape)
        mid[: am.shape[0]] += am
        mid[: bm.shape[0]] += sign * bm
        if self.rad is None or o.rad is None:
            return self._like(mid, None)
        rad = np.zeros((c,) + shape)
        rad[: am.shape[0]] += _align(self.rad, nd)
        rad[: bm.shape[0]] += _align(o.rad, nd)
        return self._like(mid, _up(rad + U * np.abs(mid)))

    def scale(self, s: float) -> Series:
        """``s`` times the series, ``s`` an exact float."""
        mid = self.mid * s
        return self._like(mid, None if self.rad is None else _up(abs(s) * self.rad + U * np.abs(mid)))

    def sum(self, axis: int, keepdims: bool = False) -> Series:
        ax = axis % self.ndim + 1
        n = self.mid.shape[ax]
        mid = self.mid.sum(axis=ax, keepdims=keepdims)
        if self.rad is None:
            return self._like(mid, None)
        rad = self.rad.sum(axis=ax, keepdims=keepdims) + _gamma(n) * np.abs(self.mid).sum(axis=ax, keepdims=keepdims)
        return self._like(mid, _up(rad, n))

    # ----------------------------------------------------------------- bilinear operations
    def __mul__(self, other: Any) -> Series:
        return self._bilinear(self._coerce(other), np.multiply, 1)

    __rmul__ = __mul__

    def __matmul__(self, other: Any) -> Series:
        o = self._coerce(other)
        return self._bilinear(o, np.matmul, _matmul_inner(self.mid))

    def __rmatmul__(self, other: Any) -> Series:
        o = self._coerce(other)
        return o._bilinear(self, np.matmul, _matmul_inner(o.mid))

    def __truediv__(self, other: Any) -> Series:
        if isinstance(other, Series):
            return self * other.recip()
        return self * self._coerce(other).recip()

    def _bilinear(self, o: Series, op: Any, inner: int) -> Series:
        nd = max(self.ndim, o.ndim)
        am, bm = _align(self.mid, nd), _align(o.mid, nd)
        ar = None if self.rad is None or o.rad is None else _align(self.rad, nd)
        br = None if ar is None else _align(o.rad, nd)  # type: ignore[arg-type]
        if am.shape[0] == 1 or bm.shape[0] == 1:  # a constant factor: every coefficient times it
            return self._like(*_ball_op(op, am, ar, bm, br, inner))
        return self._product(am, ar, bm, br, op, inner)

    def _product(self, am: np.ndarray, ar: np.ndarray | None, bm: np.ndarray, br: np.ndarray | None, op: Any,
                 inner: int) -> Series:
        raise NotImplementedError


def _ball_op(op: Any, am: np.ndarray, ar: np.ndarray | None, bm: np.ndarray, br: np.ndarray | None,
             inner: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The ball of ``op(a, b)`` for a bilinear ``op`` summing ``inner`` products per entry."""
    mid = op(am, bm)
    if ar is None or br is None:
        return mid, None
    aa, ab = np.abs(am), np.abs(bm)
    g = _gamma(inner + 2) + U
    # |a||b| g + |a| rb + ra (|b| + rb), as two products
    rad = op(aa, br + g * ab) if br.any() else g * op(aa, ab)
    if ar.any():
        rad = rad + op(ar, ab + br)
    return mid, _up(rad, inner)


def _toeplitz(a: np.ndarray) -> np.ndarray:
    """``T[k, j] = a[k - j]`` for ``j <= k``, else 0 (the Cauchy product as a sum over ``j``)."""
    c = a.shape[0]
    out = np.zeros((c, c) + a.shape[1:])
    for k in range(c):
        out[k, : k + 1] = a[k::-1]
    return out


class Taylor(Series):
    """Truncated Taylor series in one variable ``t``: coefficient ``k`` of :math:`t^k`."""

    __slots__ = ()

    def _product(self, am, ar, bm, br, op, inner):  # type: ignore[no-untyped-def]
        c = max(am.shape[0], bm.shape[0])
        am = _pad(am, c)
        bm = _pad(bm, c)
        ta = _toeplitz(am)
        mid = op(ta, bm[None]).sum(axis=1)
        if ar is None or br is None:
            return self._like(mid, None)
        ar, br = _pad(ar, c), _pad(br, c)
        tr = _toeplitz(ar)
        aa, ab = np.abs(ta), np.abs(bm)[None]
        rad = (op(aa, br[None]) + op(tr, ab + br[None])).sum(axis=1) + (_gamma(inner * c + 2) + U) * op(aa, ab).sum(axis=1)
        return self._like(mid, _up(rad, inner * c))

    def exp(self) -> Taylor:
        r""":math:`e^a`: :math:`E_0 = e^{a_0}`, :math:`k E_k = \sum_{j=1}^k j a_j E_{k-j}`."""
        c = self.order_count
        e0m, e0r = _ball_exp(self.mid[0], None if self.rad is None else self.rad[0])
        mids, rads = [e0m], [e0r]
        for k in range(1, c):
            j = np.arange(1, k + 1, dtype=np.float64).reshape((k,) + (1,) * self.ndim)
            am, ar = _ball_scale_int(self.mid[1 : k + 1], None if self.rad is None else self.rad[1 : k + 1], j)
            em = np.stack(mids[::-1])
            er = None if self.rad is None else np.stack(rads[::-1])
            sm, sr = _sumprod(am, ar, em, er)
            mids.append(sm / k)
            rads.append(None if sr is None else _up(sr / k + U * np.abs(sm / k)))
        return Taylor(np.stack(mids), None if self.rad is None else np.stack(rads))

    def recip(self) -> Taylor:
        r""":math:`1/b`: :math:`R_0 = 1/b_0`, :math:`R_k = -R_0\sum_{j=1}^k b_j R_{k-j}`."""
        c = self.order_count
        r0m, r0r = _ball_recip(self.mid[0], None if self.rad is None else self.rad[0])
        mids, rads = [r0m], [r0r]
        for k in range(1, c):
            em = np.stack(mids[::-1])
            er = None if self.rad is None else np.stack(rads[::-1])
            sm, sr = _sumprod(self.mid[1 : k + 1], None if self.rad is None else self.rad[1 : k + 1], em, er)
            pm, pr = _ball_op(np.multiply, -r0m, r0r, sm, sr, 1)
            mids.append(pm)
            rads.append(pr)
        return Taylor(np.stack(mids), None if self.rad is None else np.stack(rads))

    def evaluate(self, t: float) -> Series:
        r"""The ball of :math:`\sum_k a_k t^k` (Horner), ``t`` an exact float."""
        out = self.coefficient(self.order_count - 1)
        for k in range(self.order_count - 2, -1, -1):
            out = out.scale(t) + self.coefficient(k)
        return out


class Dual(Series):
    """Value and first derivatives along ``P`` directions: coefficient 0 the value, ``1 + a`` direction ``a``."""

    __slots__ = ()

    def _product(self, am, ar, bm, br, op, inner):  # type: ignore[no-untyped-def]
        m0, r0 = _ball_op(op, am[:1], None if ar is None else ar[:1], bm, br, inner)
        m1, r1 = _ball_op(op, am[1:], None if ar is None else ar[1:], bm[:1], None if br is None else br[:1], inner)
        shape = np.broadcast_shapes(m0.shape, (1,) + m1.shape[1:])
        mid = np.broadcast_to(m0, (m0.shape[0],) + shape[1:]).copy()
        mid[1:] += m1
        if r0 is None or r1 is None:
            return self._like(mid, None)
        rad = np.broadcast_to(r0, mid.shape).copy()
        rad[1:] += r1 + U * np.abs(mid[1:])
        return self._like(mid, _up(rad))

    def exp(self) -> Dual:
        """:math:`e^a`: value :math:`e^{a_0}`, derivatives :math:`e^{a_0} a_i`."""
        e0m, e0r = _ball_exp(self.mid[0], None if self.rad is None else self.rad[0])
        e0 = Dual(e0m[None], None if e0r is None else e0r[None])
        tang = e0 * Dual(self.mid[1:], None if self.rad is None else self.rad[1:])
        return _stack_dual(e0, tang)

    def recip(self) -> Dual:
        """:math:`1/b`: value :math:`1/b_0`, derivatives :math:`-b_i/b_0^2`."""
        r0m, r0r = _ball_recip(self.mid[0], None if self.rad is None else self.rad[0])
        r0 = Dual(r0m[None], None if r0r is None else r0r[None])
        tang = (r0 * r0) * Dual(-self.mid[1:], None if self.rad is None else self.rad[1:])
        return _stack_dual(r0, tang)


def _stack_dual(v: Dual, t: Dual) -> Dual:
    mid = np.concatenate([np.broadcast_to(v.mid, (1,) + t.mid.shape[1:]), t.mid])
    if v.rad is None or t.rad is None:
        return Dual(mid, None)
    return Dual(mid, np.concatenate([np.broadcast_to(v.rad, (1,) + t.rad.shape[1:]), t.rad]))


def _pad(a: np.ndarray, c: int) -> np.ndarray:
    if a.shape[0] == c:
        return a
    out = np.zeros((c,) + a.shape[1:])
    out[: a.shape[0]] = a
    return out


def _sumprod(am: np.ndarray, ar: np.ndarray | None, bm: np.ndarray, br: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray | None]:
    """The ball of :math:`\\sum_j a_j b_j` over axis 0."""
    n = am.shape[0]
    mid = (am * bm).sum(axis=0)
    if ar is None or br is None:
        return mid, None
    aa, ab = np.abs(am), np.abs(bm)
    rad = (aa * br + ar * (ab + br)).sum(axis=0) + (_gamma(n + 2) + U) * (aa * ab).sum(axis=0)
    return mid, _up(rad, n)


def _ball_scale_int(m: np.ndarray, r: np.ndarray | None, j: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Integer multiples ``j * a`` (``j`` exact small integers)."""
    mid = m * j
    return mid, None if r is None else _up(r * j + U * np.abs(mid))


def _ball_exp(m: np.ndarray, r: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    r""":math:`e^x` for :math:`|x - m| \le r`: within :math:`e^m(e^r - 1) + |e^m - \mathrm{fl}(e^m)|` of ``fl(e^m)``."""
    with np.errstate(over="ignore"):
        mid = np.exp(m)
    if not np.all(np.isfinite(mid)):
        raise DomainError("an exponential overflows float64 in the enclosure (scores above 709)")
    if r is None:
        return mid, None
    em = mid / (1.0 - U_EXP)  # an upper bound of the exact e^m
    with np.errstate(over="ignore"):
        grow = np.expm1(r) * (1.0 + U_EXP) + U_EXP
    rad = _up(em * grow + 2.0**-1022)
    if not np.all(np.isfinite(rad)):
        raise DomainError("the enclosure of an exponential overflows (its argument is too wide)")
    return mid, rad


def _ball_recip(m: np.ndarray, r: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    r""":math:`1/x` for :math:`|x - m| \le r`, ``x`` of one sign: within :math:`r/(|m|(|m| - r))` of :math:`1/m`."""
    if r is None:
        with np.errstate(divide="ignore"):
            return 1.0 / m, None
    am = np.abs(m)
    low = (am - r) * (1.0 - 4.0 * U)
    if not np.all(low > 0):
        raise DomainError("the enclosure of a divisor contains 0 (a softmax normaliser is not enclosed away from 0)")
    mid = 1.0 / m
    rad = _up(r / (am * low * (1.0 - 4.0 * U)) + U * np.abs(mid))
    return mid, rad


def ball_sqrt_upper(x: float) -> float:
    """An upper bound of :math:`\\sqrt{x}` for a float ``x >= 0``."""
    return math.sqrt(x) * (1.0 + 4.0 * U) + TINY


def norm_upper(s: Series, k: int = 0) -> float:
    """An upper bound of the Euclidean norm of coefficient ``k`` (all entries of every ball)."""
    a = s.upper_abs()[k]
    n = a.size
    return ball_sqrt_upper(float(_up(np.array(np.sum(a * a)), n)))
