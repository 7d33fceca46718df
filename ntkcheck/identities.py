r"""Exact proofs of dependence: :math:`\sum_i c_i \Lambda_i` is affine.

Two routes, both exact:

* **Product identity** (empirical laws, rational ``c``; MATH.md section 2). With
  ``c = k / L`` for integers ``k``,
  :math:`\prod_{k_i>0} P_i^{k_i} = e^{\langle L\alpha, a\rangle + L\beta} \prod_{k_i<0} P_i^{-k_i}`,
  :math:`P_i(a) = \sum_j w_{ij} e^{\langle a, x_{ij}\rangle}`. Both sides are exponential
  polynomials: compared as maps {exponent vector: coefficient} in rational arithmetic.
  For probability measures :math:`\Lambda_i(0) = 0`, so :math:`\beta = 0`.
* **Symbolic identity** (any family with a sympy CGF): the Hessian (or, along a
  direction, the second derivative) of :math:`\sum_i c_i \Lambda_i` simplifies to zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import lcm
from typing import Any

import numpy as np
import sympy as sp

from .families import Empirical, Family

__all__ = ["IdentityProof", "product_identity", "symbolic_identity", "prove_dependence"]

#: largest exponential polynomial the product identity expands before giving up
MAX_TERMS = 200_000


@dataclass(frozen=True)
class IdentityProof:
    """An exact proof that :math:`\\sum_i c_i \\Lambda_i(a) = \\langle\\alpha, a\\rangle + \\beta`."""

    kind: str  # "product-identity" or "symbolic-identity"
    null_vector: tuple[Fraction, ...]
    alpha: tuple[Fraction, ...]
    beta: Fraction
    direction: tuple[Fraction, ...] | None  # None: on all of R^d (weak); else along this w
    statement: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "null_vector": [str(v) for v in self.null_vector],
            "alpha": [str(v) for v in self.alpha],
            "beta": str(self.beta),
            "direction": None if self.direction is None else [str(v) for v in self.direction],
            "statement": self.statement,
        }


def _integerise(c: Sequence[Fraction]) -> tuple[list[int], int]:
    L = 1
    for v in c:
        L = lcm(L, v.denominator)
    return [int(v * L) for v in c], L


def _exp_polys(measures: Sequence[Empirical], w: Sequence[Fraction] | None) -> tuple[list[dict[tuple[int, ...], Fraction]], Fraction]:
    """Each law as an exponential polynomial {exponent: weight}, exponents as integer tuples on a
    common scale: the exponent ``e`` stands for the frequency ``e * scale`` (exact; integer keys
    hash far faster than tuples of Fractions in high dimension)."""
    if w is None:
        allx = np.concatenate([m.atoms for m in measures])
        mant, expo = np.frexp(allx)
        M = (mant * 2.0**53).astype(np.int64)
        sh = expo.astype(np.int64) - 53
        E = int(sh[M != 0].min()) if np.any(M != 0) else 0
        keys_all = [tuple((int(mk) << int(sk - E)) if mk else 0 for mk, sk in zip(mr, sr)) for mr, sr in zip(M.tolist(), sh.tolist())]
        scale = Fraction(2) ** E
    else:
        projs = [m.projected(w) for m in measures]
        D = 1
        for z in (v for p in projs for v in p):
            D = lcm(D, z.denominator)
        keys_all = [(int(z * D),) for p in projs for z in p]
        scale = Fraction(1, D)
    out, start = [], 0
    for m in measures:
        N = m.atoms.shape[0]
        poly: dict[tuple[int, ...], Fraction] = {}
        for key, wj in zip(keys_all[start:start + N], m.exact_weights()):
            if wj:
                poly[key] = poly.get(key, Fraction(0)) + wj
        out.append(poly)
        start += N
    return out, scale


def _mul(p: dict, q: dict) -> dict:
    out: dict = {}
    for a, u in p.items():
        for b, v in q.items():
            key = tuple(x + y for x, y in zip(a, b))
            out[key] = out.get(key, Fraction(0)) + u * v
    return {k: v for k, v in out.items() if v != 0}


def product_identity(
    measures: Sequence[Empirical], c: Sequence[Fraction], direction: Sequence[Fraction] | None = None
) -> IdentityProof | None:
    """Prove :math:`\\sum c_i \\Lambda_i` affine for empirical laws by the product identity, or None."""
    k, L = _integerise(c)
    if all(v == 0 for v in k):
        return None
    dim = 1 if direction is not None else measures[0].dim
    zero = tuple(0 for _ in range(dim))
    involved = [m for m, ki in zip(measures, k) if ki]
    polys_inv, scale = _exp_polys(involved, direction)
    it = iter(polys_inv)
    polys = [next(it) if ki else None for ki in k]
    size_l = size_r = 1
    for p, ki in zip(polys, k):
        if p is None:
            continue
        if ki > 0:
            size_l *= len(p) ** ki
        else:
            size_r *= len(p) ** (-ki)
    if max(size_l, size_r) > MAX_TERMS:
        return None
    lhs: dict = {zero: Fraction(1)}
    rhs: dict = {zero: Fraction(1)}
    for p, ki in zip(polys, k):
        if p is None:
            continue
        for _ in range(abs(ki)):
            if ki > 0:
                lhs = _mul(lhs, p)
            else:
                rhs = _mul(rhs, p)
    if len(lhs) != len(rhs):
        return None
    shift = tuple(x - y for x, y in zip(min(lhs), min(rhs)))
    shifted = {tuple(x + s for x, s in zip(key, shift)): v for key, v in rhs.items()}
    if shifted != lhs:
        return None
    alpha = tuple(s * scale / L for s in shift)
    if direction is not None:
        where = f"along w = {[str(v) for v in direction]}"
    else:
        where = "on R^d"
    stmt = (
        f"prod over k_i>0 of P_i^k_i = exp(<{[str(s * scale) for s in shift]}, a>) * prod over k_i<0 of P_i^(-k_i), k = {k} "
        f"(exact comparison of {len(lhs)} exponential terms), so sum_i c_i Lambda_i = <alpha, a> {where}, "
        f"c = k / {L}"
    )
    return IdentityProof("product-identity", tuple(c), alpha, Fraction(0), None if direction is None else tuple(direction), stmt)


def _rat(v: Fraction) -> sp.Rational:
    return sp.Rational(v.numerator, v.denominator)


def _is_zero(expr: sp.Expr) -> bool:
    e = sp.expand(expr)
    if e == 0:
        return True
    try:
        if sp.simplify(e) == 0:
            return True
        # hyperbolic closed forms (log cosh, sinh x / x) against log-sum-exps: compare as exponentials
        return bool(sp.simplify(e.rewrite(sp.exp)) == 0)
    except (TypeError, ValueError, NotImplementedError):  # pragma: no cover - sympy internals
        return False


def symbolic_identity(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None = None
) -> IdentityProof | None:
    """Prove :math:`\\sum c_i \\Lambda_i` affine by simplifying its second derivatives to zero, or None."""
    d = measures[0].dim
    if direction is None:
        a = sp.symbols(f"a0:{d}")
        F = sp.Add(*[_rat(ci) * m.cgf_sympy(a) for ci, m in zip(c, measures) if ci != 0])
        for i in range(d):
            for j in range(i, d):
                if not _is_zero(sp.diff(F, a[i], a[j])):
                    return None
        at0 = {s: 0 for s in a}
        alpha = tuple(Fraction(str(sp.nsimplify(sp.diff(F, s).subs(at0)))) for s in a)
        beta = Fraction(str(sp.nsimplify(F.subs(at0))))
        where = "Hessian of sum_i c_i Lambda_i simplifies to 0 on R^d"
    else:
        t = sp.Symbol("t")
        F = sp.Add(*[_rat(ci) * m.cgf_1d_sympy(t, direction) for ci, m in zip(c, measures) if ci != 0])
        if not _is_zero(sp.diff(F, t, 2)):
            return None
        alpha = (Fraction(str(sp.nsimplify(sp.diff(F, t).subs(t, 0)))),)
        beta = Fraction(str(sp.nsimplify(F.subs(t, 0))))
        where = f"d^2/dt^2 sum_i c_i Lambda_i(t w) simplifies to 0, w = {[str(v) for v in direction]}"
    return IdentityProof("symbolic-identity", tuple(c), alpha, beta, None if direction is None else tuple(direction), where)


def numerically_affine(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None = None, dps: int = 40
) -> bool:
    r"""Cheap filter before an exact proof: second differences of :math:`\sum c_i\Lambda_i` vanish at ``dps`` digits.

    Evaluated along ``direction`` (or two fixed generic directions for the weak
    property) at a few points inside every MGF domain. Not a proof: it only saves
    symbolic simplification of candidates that are plainly not null vectors.
    """
    import mpmath

    d = measures[0].dim
    dirs = [list(direction)] if direction is not None else [[Fraction(k % 3 + 1, k + 2) for k in range(d)], [Fraction((-1) ** k * (k + 2), 3) for k in range(d)]]
    with mpmath.workdps(dps + 20):
        for w in dirs:
            R = min(m.mgf_radius(w) for m in measures)
            h = min(mpmath.mpf("0.25"), mpmath.mpf(R) / 4 if R != float("inf") else mpmath.mpf("0.25"))
            for t in (h / 3, -h / 2):
                vals = [mpmath.fsum(mpmath.mpf(ci.numerator) / ci.denominator * m.cgf_1d_mp(t + s * h, w, dps=dps + 20) for ci, m in zip(c, measures) if ci != 0) for s in (-1, 0, 1)]
                second = vals[0] - 2 * vals[1] + vals[2]
                scale = max(abs(v) for v in vals) + 1
                if abs(second) > mpmath.mpf(10) ** (-dps) * scale * 100:
                    return False
    return True


def prove_dependence(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None = None
) -> IdentityProof | None:
    """Try the product identity (all empirical), then the symbolic identity."""
    if not numerically_affine(measures, c, direction):
        return None
    if all(isinstance(m, Empirical) for m in measures):
        p = product_identity(measures, c, direction)  # type: ignore[arg-type]
        if p is not None:
            return p
    return symbolic_identity(measures, c, direction)
