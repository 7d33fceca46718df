r"""First-order Taylor models in one variable, and forward-mode tangents over any of these algebras.

Private to :mod:`ntkcheck.convergence.enclosure` (``theory/flow-numerics.md``, "The one-sided Lipschitz
bound along the path"). A :class:`Tm1` is a function of :math:`\sigma \in [-w, w]` enclosed as

.. math::

    x(\sigma) \in a + b\,\sigma + [-r, r]

with float arrays ``a``, ``b`` (exact as stored) and a remainder ``r >= 0``. Unlike a box, which
forgets that every coordinate moves with the same :math:`\sigma`, the model keeps the dependence on
the one parameter to first order: the enclosure of a function of a short path is its tangent line
plus a remainder quadratic in ``w``. Rules (every rounding error is added to ``r``; ``u = 2^-53``):

* product: :math:`ab' + \sigma(ab' + ba')`, remainder
  :math:`w^2|b||b'| + A r' + r(A' + r') + \gamma_n A A'`, :math:`A = |a| + |b|w`;
* :math:`e^x`: with :math:`Y = |b|w + r`, :math:`e^{a+y} = e^a(1 + y + E)`, :math:`|E| \le Y^2e^Y/2`;
* :math:`1/x` (:math:`Y < |a|`): :math:`\frac1a(1 - \frac ya + \frac{(y/a)^2}{1 + y/a})`, the last term at most
  :math:`(Y/|a|)^2/(1 - Y/|a|)`.

:class:`DualOf` carries a value and its derivatives along ``P`` directions, each an element of an
inner algebra (:class:`Tm1` here, for the Hessian of the loss along a step of the path).

References: K. Makino and M. Berz, "Taylor models and other validated functional inclusion methods",
Int. J. Pure Appl. Math. 4 (2003) 379-456.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import DomainError
from ...ntk.certificate.rounding import U_EXP
from ._series import U, _align, _gamma, _up

__all__ = ["DualOf", "Tm1"]


def _al(x: np.ndarray, nd: int) -> np.ndarray:
    """``x`` (no coefficient axis) with leading unit axes up to ``nd`` axes."""
    return x.reshape((1,) * (nd - x.ndim) + x.shape) if x.ndim < nd else x


class Tm1:
    """:math:`a + b\\sigma + [-r, r]`, :math:`\\sigma \\in [-w, w]` (see the module docstring)."""

    __slots__ = ("a", "b", "r", "w")

    def __init__(self, a: np.ndarray, b: np.ndarray, r: np.ndarray, w: float) -> None:
        self.a, self.b, self.r, self.w = a, b, r, w

    # ----------------------------------------------------------------- construction, shape
    def const_like(self, value: Any, rad: Any = None) -> Tm1:
        a = np.asarray(value, dtype=np.float64)
        r = np.zeros_like(a) if rad is None else np.broadcast_to(np.asarray(rad, dtype=np.float64), a.shape).copy()
        return Tm1(a, np.zeros_like(a), r, self.w)

    def _coerce(self, o: Any) -> Tm1:
        return o if isinstance(o, Tm1) else self.const_like(o)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(self.a.shape, self.b.shape, self.r.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    rigorous = True

    def _full(self) -> Tm1:
        s = self.shape
        return Tm1(*(np.broadcast_to(x, s) for x in (self.a, self.b, self.r)), self.w)  # type: ignore[arg-type]

    def _map(self, fn: Any) -> Tm1:
        f = self._full()
        return Tm1(fn(f.a), fn(f.b), fn(f.r), self.w)

    def reshape(self, *shape: int) -> Tm1:
        return self._map(lambda x: x.reshape(shape))

    def transpose(self, *axes: int) -> Tm1:
        return self._map(lambda x: x.transpose(axes))

    def __getitem__(self, idx: Any) -> Tm1:
        return self._map(lambda x: x[idx])

    def center(self) -> np.ndarray:
        return self.a

    def value_only(self) -> Tm1:
        return self

    def concat(self, others: list[Tm1]) -> Tm1:
        parts = [p._full() for p in [self, *others]]
        return Tm1(*(np.concatenate([getattr(p, k) for p in parts], axis=-1) for k in "abr"), self.w)  # type: ignore[arg-type]

    def range_abs(self) -> np.ndarray:
        """Upper bounds of :math:`|x(\\sigma)|` over the domain."""
        return _up(np.abs(self.a) + np.abs(self.b) * self.w + self.r)

    # ----------------------------------------------------------------- linear
    def __add__(self, o: Any) -> Tm1:
        o = self._coerce(o)
        a, b = self.a + o.a, self.b + o.b
        return Tm1(a, b, _up(self.r + o.r + U * (np.abs(a) + np.abs(b) * self.w)), self.w)

    __radd__ = __add__

    def __neg__(self) -> Tm1:
        return Tm1(-self.a, -self.b, self.r, self.w)

    def __sub__(self, o: Any) -> Tm1:
        return self + (-self._coerce(o))

    def __rsub__(self, o: Any) -> Tm1:
        return self._coerce(o) + (-self)

    def scale(self, s: float) -> Tm1:
        a, b = self.a * s, self.b * s
        return Tm1(a, b, _up(abs(s) * self.r + U * (np.abs(a) + np.abs(b) * self.w)), self.w)

    def sum(self, axis: int, keepdims: bool = False) -> Tm1:
        f = self._full()
        n = f.a.shape[axis]
        a, b = f.a.sum(axis=axis, keepdims=keepdims), f.b.sum(axis=axis, keepdims=keepdims)
        spread = (np.abs(f.a) + np.abs(f.b) * self.w).sum(axis=axis, keepdims=keepdims)
        return Tm1(a, b, _up(f.r.sum(axis=axis, keepdims=keepdims) + _gamma(n + 1) * spread, n), self.w)

    # ----------------------------------------------------------------- bilinear
    def _bil(self, o: Tm1, op: Any, inner: int) -> Tm1:
        w = self.w
        a = op(self.a, o.a)
        b = op(self.a, o.b) + op(self.b, o.a)
        A1 = np.abs(self.a) + np.abs(self.b) * w
        A2 = np.abs(o.a) + np.abs(o.b) * w
        g = _gamma(2 * inner + 2) + U
        rem = op(A1, o.r + g * A2) + op(self.r, A2 + o.r)
        if self.b.any() and o.b.any():
            rem = rem + (w * w) * op(np.abs(self.b), np.abs(o.b))
        return Tm1(a, b, _up(rem + U * np.abs(b) * w, 2 * inner), w)

    def __mul__(self, o: Any) -> Tm1:
        return self._bil(self._coerce(o), np.multiply, 1)

    __rmul__ = __mul__

    def __matmul__(self, o: Any) -> Tm1:
        return self._bil(self._coerce(o), np.matmul, self.shape[-1])

    def __rmatmul__(self, o: Any) -> Tm1:
        oo = self._coerce(o)
        return oo._bil(self, np.matmul, oo.shape[-1])

    # ----------------------------------------------------------------- transcendental
    def exp(self) -> Tm1:
        with np.errstate(over="ignore"):
            ea = np.exp(self.a)
        if not np.all(np.isfinite(ea)):
            raise DomainError("an exponential overflows float64 in the Taylor model")
        eu = _up(ea / (1.0 - U_EXP))
        Y = _up(np.abs(self.b) * self.w + self.r)
        with np.errstate(over="ignore"):
            E = Y * Y * np.exp(Y) * 0.5
        b = ea * self.b
        rem = eu * (self.r + E * (1.0 + 4.0 * U)) + (U_EXP * eu * np.abs(self.b) + U * np.abs(b)) * self.w + U_EXP * eu
        rem = _up(rem + 2.0**-1022)
        if not np.all(np.isfinite(rem)):
            raise DomainError("the Taylor model of an exponential is not finite (its argument varies too much)")
        return Tm1(ea, b, rem, self.w)

    def recip(self) -> Tm1:
        aa = np.abs(self.a)
        Y = _up(np.abs(self.b) * self.w + self.r)
        q = Y / (aa * (1.0 - 4.0 * U))
        if not np.all(q < 0.5):
            raise DomainError("a divisor's Taylor model is not enclosed away from 0 (its variation is too large)")
        ra = 1.0 / self.a
        rb = -self.b * (ra * ra)
        inv = _up(1.0 / aa)
        rem = inv * (self.r * inv + q * q / (1.0 - q)) + U * (np.abs(ra) * 3.0 + 4.0 * np.abs(rb) * self.w)
        return Tm1(ra, rb, _up(rem), self.w)


class DualOf:
    """A value ``v`` and its derivatives ``t`` (a leading axis of ``P`` directions, or None: a constant)."""

    __slots__ = ("v", "t")

    def __init__(self, v: Any, t: Any) -> None:
        self.v, self.t = v, t

    @property
    def shape(self) -> tuple[int, ...]:
        return self.v.shape

    @property
    def ndim(self) -> int:
        return self.v.ndim

    rigorous = True

    def const_like(self, value: Any, rad: Any = None) -> DualOf:
        return DualOf(self.v.const_like(value, rad), None)

    def _coerce(self, o: Any) -> DualOf:
        return o if isinstance(o, DualOf) else self.const_like(o)

    def center(self) -> np.ndarray:
        return self.v.center()

    def value_only(self) -> DualOf:
        return DualOf(self.v, None)

    @staticmethod
    def _e(x: Any, nd: int) -> Any:
        """A value ``x`` as ``(1, 1.., *shape)`` with ``1 + nd`` axes (to meet tangents)."""
        return x.reshape(*(1,) * (1 + nd - x.ndim), *x.shape)

    @staticmethod
    def _t(t: Any, nd: int) -> Any:
        """Tangents ``(P, *shape)`` as ``(P, 1.., *shape)`` with ``1 + nd`` axes."""
        extra = nd - (t.ndim - 1)
        return t.reshape(t.shape[0], *(1,) * extra, *t.shape[1:]) if extra > 0 else t

    def reshape(self, *shape: int) -> DualOf:
        t = None if self.t is None else self.t.reshape(self.t.shape[0], *shape)
        return DualOf(self.v.reshape(*shape), t)

    def transpose(self, *axes: int) -> DualOf:
        t = None if self.t is None else self.t.transpose(0, *(a + 1 for a in axes))
        return DualOf(self.v.transpose(*axes), t)

    def __getitem__(self, idx: Any) -> DualOf:
        idx = idx if isinstance(idx, tuple) else (idx,)
        tidx = idx if Ellipsis in idx else (slice(None),) + idx
        return DualOf(self.v[idx], None if self.t is None else self.t[tidx])

    def concat(self, others: list[DualOf]) -> DualOf:
        parts = [self, *others]
        ts = [p.t if p.t is not None else None for p in parts]
        if any(x is None for x in ts):
            raise DomainError("cannot join a constant with a tangent bundle")
        return DualOf(self.v.concat([p.v for p in others]), ts[0].concat(ts[1:]))

    def __add__(self, o: Any) -> DualOf:
        o = self._coerce(o)
        if self.t is None or o.t is None:
            t = self.t if o.t is None else o.t
        else:
            nd = max(self.ndim, o.ndim)
            t = self._t(self.t, nd) + self._t(o.t, nd)
        return DualOf(self.v + o.v, t)

    __radd__ = __add__

    def __neg__(self) -> DualOf:
        return DualOf(-self.v, None if self.t is None else -self.t)

    def __sub__(self, o: Any) -> DualOf:
        return self + (-self._coerce(o))

    def __rsub__(self, o: Any) -> DualOf:
        return self._coerce(o) + (-self)

    def scale(self, s: float) -> DualOf:
        return DualOf(self.v.scale(s), None if self.t is None else self.t.scale(s))

    def sum(self, axis: int, keepdims: bool = False) -> DualOf:
        ta = axis if axis < 0 else axis + 1
        return DualOf(self.v.sum(axis, keepdims), None if self.t is None else self.t.sum(ta, keepdims))

    def _bil(self, o: DualOf, op: Any) -> DualOf:
        v = op(self.v, o.v)
        nd = max(self.ndim, o.ndim)
        terms = []
        if o.t is not None:
            terms.append(op(self._e(self.v, nd), self._t(o.t, nd)))
        if self.t is not None:
            terms.append(op(self._t(self.t, nd), self._e(o.v, nd)))
        t = None if not terms else (terms[0] if len(terms) == 1 else terms[0] + terms[1])
        return DualOf(v, t)

    def __mul__(self, o: Any) -> DualOf:
        return self._bil(self._coerce(o), lambda x, y: x * y)

    __rmul__ = __mul__

    def __matmul__(self, o: Any) -> DualOf:
        return self._bil(self._coerce(o), lambda x, y: x @ y)

    def __rmatmul__(self, o: Any) -> DualOf:
        return self._coerce(o)._bil(self, lambda x, y: x @ y)

    def exp(self) -> DualOf:
        e = self.v.exp()
        return DualOf(e, None if self.t is None else self._e(e, self.ndim) * self.t)

    def recip(self) -> DualOf:
        r = self.v.recip()
        return DualOf(r, None if self.t is None else self._e(-(r * r), self.ndim) * self.t)


_ = _align  # the Series helpers are the reference for the rounding rules used here
