r"""Identities :math:`\sum_i c_i \Lambda_i = \langle\alpha, \cdot\rangle`, re-expanded exactly with bounded work.

**Product identity** (empirical laws, Diracs, Gaussians, mixtures): with :math:`k = (L/g)\,c`
integer and primitive, :math:`\prod_{k_i>0} P_i^{k_i} = e^{\langle (L/g)\alpha, a\rangle}
\prod_{k_i<0} P_i^{-k_i}` for the exponential polynomials :math:`P_i` of the MGFs (frequencies
exact), and the Gaussian quadratic parts :math:`\sum_i k_i S_i` cancel. A law whose MGF is one
exponential (a Dirac, one atom, a Gaussian's mean) contributes a linear term and is moved into
:math:`\alpha` instead of being raised to the power :math:`k_i`. The powers are taken by repeated
squaring and every product's size is bounded before it is formed, so the work is bounded by the
file, whatever :math:`c` says (:math:`c = (10^9, -10^9)`). Beyond the bound, the identity is
evaluated in balls at two rational points: a value certainly non-zero refutes it; otherwise it is
"unchecked".

**Term identity** (cubes, Laplace laws, Gaussians, mixtures, Diracs): the CGFs as named
closed-form functions (:math:`\log\sinh(x)/x` per coordinate and radius, :math:`-\log(1 - a^T S
a/2)`, :math:`\log\cosh\langle m, a\rangle`, the quadratic part) whose coefficients cancel, and
the linear part equal to :math:`\alpha`. Equal keys are equal functions, so cancellation proves the
identity (the converse is not needed).

On :math:`\mathbb R^d` (``direction`` null) or along :math:`t \mapsto t w`. References: seed 003
Prop. 7 and Ex. 6; theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

from fractions import Fraction
from math import gcd, lcm
from typing import Any

from ._balls import balls
from ._common import Refuted, Unchecked, _q, _vector, short
from ._independence import direction
from ._series import dot, quad

#: work an expansion may cost, in machine words: each product of two exponential polynomials costs
#: (term pairs) x (words of the larger coefficients); about a second of Python here
MAX_WORDS = 5_000_000


class _TooLarge(Exception):
    pass


def parse(cert: dict[str, Any], n: int, d: int | None) -> tuple[list[Fraction], list[Fraction], list[Fraction] | None]:
    """``c`` (``n`` entries, not all zero), ``alpha`` (``d`` entries, or 1 along ``w``), ``w`` or None."""
    c = _vector(cert["null_vector"], n, "the null vector c")
    if not any(c):
        raise Refuted("the null vector c is zero: it proves no dependence")
    if _q(cert.get("beta", 0)) != 0:
        raise Refuted("beta is not 0 (every Lambda_i(0) = log 1 = 0)")
    w = None if cert.get("direction") is None else direction(cert["direction"], d, "the identity's direction")
    alpha = _vector(cert["alpha"], (d if d is not None else len(cert["alpha"])) if w is None else 1, "alpha")
    return c, alpha, w


# ------------------------------------------------------------------------------ product identity


def _exp_poly(law: dict[str, Any], w: list[Fraction] | None) -> tuple[dict[Any, Fraction], list[Fraction]]:
    """The MGF as ``P`` (frequency -> coefficient) times ``exp(quadratic)``, on R^d or along ``w``;
    the quadratic part flattened (``[]`` when there is none)."""
    proj = (lambda x: tuple(x)) if w is None else (lambda x: (dot(x, w),))
    k = law["kind"]
    pts = {"empirical": lambda: zip(law["atoms"], law["masses"]), "dirac": lambda: [(law["point"], Fraction(1))],
           "gaussian": lambda: [(law["mean"], Fraction(1))],
           "gaussian-mixture": lambda: [(law["m"], Fraction(1, 2)), ([-v for v in law["m"]], Fraction(1, 2))]}
    if k not in pts:
        raise Unchecked(f"no exponential-polynomial form for a {k} law")
    P: dict[Any, Fraction] = {}
    for x, m in pts[k]():
        P[proj(x)] = P.get(proj(x), Fraction(0)) + m
    S = law.get("cov")
    flat = [] if S is None else [quad(S, w)] if w is not None else [v for row in S for v in row]
    return {f: m for f, m in P.items() if m}, flat


class _Expander:
    """Products of exponential polynomials with integer coefficients and integer frequencies, under
    a budget of machine words (:data:`MAX_WORDS`) checked before each product is formed."""

    def __init__(self) -> None:
        self.spent = 0

    def mul(self, A: dict[tuple[int, ...], int], B: dict[tuple[int, ...], int]) -> dict[tuple[int, ...], int]:
        words = 1 + (max(abs(v) for v in A.values()).bit_length() + max(abs(v) for v in B.values()).bit_length()) // 64
        self.spent += len(A) * len(B) * words
        if self.spent > MAX_WORDS:
            raise _TooLarge
        out: dict[tuple[int, ...], int] = {}
        for a, x in A.items():
            for b, y in B.items():
                key = tuple(p + q for p, q in zip(a, b))
                out[key] = out.get(key, 0) + x * y
        return {k: v for k, v in out.items() if v}

    def power(self, P: dict[tuple[int, ...], int], k: int, one: dict[tuple[int, ...], int]) -> dict[tuple[int, ...], int]:
        out, base = one, P
        while k:
            if k & 1:
                out = self.mul(out, base)
            k >>= 1
            if k:
                base = self.mul(base, base)
        return out


def _integer_exponents(c: list[Fraction], alpha: list[Fraction]) -> tuple[list[int], list[Fraction]]:
    """``k = (L/g) c`` integer and primitive, and ``(L/g) alpha``."""
    L = lcm(*(v.denominator for v in c))
    k = [int(v * L) for v in c]
    g = gcd(*k)
    return [v // g for v in k], [a * L / g for a in alpha]


def _integer_form(P: dict[Any, Fraction], D: int) -> tuple[dict[tuple[int, ...], int], int]:
    """``P = (1/M) sum_a n_a exp(<f_a / D, .>)`` as integer frequencies ``f_a`` and numerators ``n_a``, and ``M``."""
    M = lcm(*(m.denominator for m in P.values()))
    return {tuple(int(f * D) for f in key): int(m * M) for key, m in P.items()}, M


def _sides(laws: list[dict[str, Any]], k: list[int], target: list[Fraction],
           w: list[Fraction] | None) -> tuple[list[tuple[dict[Any, Fraction], int]], list[Any], list[Fraction]]:
    """The exponential polynomials raised to ``|k_i|`` (``+`` left, ``-`` right), one-exponential laws
    moved into ``target``, and the quadratic (Gaussian) parts, which must cancel."""
    sides: list[tuple[dict[Any, Fraction], int]] = []
    quad_sum: list[Fraction] = []
    for ki, law in zip(k, laws):
        if not ki:
            continue
        P, flat = _exp_poly(law, w)
        quad_sum = [a + ki * q for a, q in zip(quad_sum or [Fraction(0)] * len(flat), flat)] if flat else quad_sum
        if len(P) == 1 and next(iter(P.values())) == 1:  # one exponential: a linear term
            target = [t - ki * x for t, x in zip(target, next(iter(P)), strict=True)]
        else:
            sides.append((P, ki))
    return sides, quad_sum, target


def product_identity(laws: list[dict[str, Any]], c: list[Fraction], alpha: list[Fraction],
                     w: list[Fraction] | None) -> None:
    """Re-expand the product identity exactly, in integers (refuted when the two sides differ):
    ``prod_{k_i > 0} (N_i / M_i)^{k_i} = z^t prod_{k_i < 0} (N_i / M_i)^{-k_i}`` with ``N_i`` integer
    exponential polynomials, compared as ``(prod_- M^|k|) prod_+ N^k = (prod_+ M^k) z^t prod_- N^|k|``."""
    k, target = _integer_exponents(c, alpha)
    sides, quad_sum, target = _sides(laws, k, target, w)
    if any(quad_sum):
        raise Refuted("the quadratic (Gaussian) parts do not cancel")
    D = lcm(1, *(f.denominator for P, _ in sides for key in P for f in key), *(t.denominator for t in target))
    zero = (0,) * len(target)
    try:
        ex = _Expander()
        lhs, rhs = {zero: 1}, {tuple(int(t * D) for t in target): 1}
        scale_l = scale_r = 1
        for P, ki in sides:
            N, M = _integer_form(P, D)
            if (abs(ki) * M.bit_length()) // 64 > MAX_WORDS // 16:
                raise _TooLarge
            power = ex.power(N, abs(ki), {zero: 1})
            if ki > 0:
                lhs, scale_r = ex.mul(lhs, power), scale_r * M**ki
            else:
                rhs, scale_l = ex.mul(rhs, power), scale_l * M ** (-ki)
    except _TooLarge:
        refute_at_points(laws, c, alpha, w)
        raise Unchecked("expanding the identity exceeds this verifier's work bound (exponents "
                        f"{short([abs(v) for v in k])}), and its values at two points do not refute it") from None
    if set(lhs) != set(rhs) or any(lhs[f] * scale_l != rhs[f] * scale_r for f in lhs):
        raise Refuted("the exponential polynomials of the two sides differ")


# ---------------------------------------------------------------------------------- point values


def _points(laws: list[dict[str, Any]], dim: int, w: list[Fraction] | None) -> list[list[Fraction]]:
    """Two rational points, small enough that every Laplace CGF is defined there (a^T S a < 1)."""
    base = [Fraction((-1) ** j * (j % 5 + 1), j % 7 + 2) for j in range(dim)]
    out = []
    for v in ([base, [-x / 3 for x in base]] if w is None else [[Fraction(1, 2) * x for x in w],
                                                                  [Fraction(-1, 3) * x for x in w]]):
        s = max([quad(law["cov"], v) for law in laws if law["kind"] == "laplace"], default=Fraction(0))
        t = Fraction(1) / (1 + s.__ceil__()) if s else Fraction(1)
        out.append([t * x for x in v])
    return out


def _cgf_ball(B: Any, law: dict[str, Any], a: list[Fraction]) -> Any:
    k = law["kind"]
    if k in ("empirical", "dirac"):
        pts = zip(law["atoms"], law["masses"]) if k == "empirical" else [(law["point"], Fraction(1))]
        z = [(dot(x, a), m) for x, m in pts]
        top = max(v for v, _ in z)
        return B.q(top) + B.log(sum((B.q(m) * B.exp(B.q(v - top)) for v, m in z), B.q(0)))
    if k == "uniform-cube":
        out = B.q(0)
        for aj in a:
            x = law["radius"] * aj
            if x:
                X = B.q(abs(x))
                out += B.log((B.exp(X) - B.exp(-X)) / (2 * X))
        return out
    s = quad(law["cov"], a)
    if k == "laplace":
        return -B.log(B.q(1 - s / 2))
    if k == "gaussian":
        return B.q(dot(law["mean"], a) + s / 2)
    if k == "gaussian-mixture":
        u = abs(dot(law["m"], a))
        return B.q(u + s / 2) + B.log((1 + B.exp(B.q(-2 * u))) / 2)
    raise Unchecked(f"no closed form for a {k} law")


def refute_at_points(laws: list[dict[str, Any]], c: list[Fraction], alpha: list[Fraction],
                     w: list[Fraction] | None) -> None:
    """Refute the identity where ``sum_i c_i Lambda_i(a) - <alpha, a>`` is certainly non-zero at a
    point (balls at 128 bits); return when it is not (nothing is proved then)."""
    dim = len(alpha) if w is None else len(w)
    for a in _points(laws, dim, w):
        lin = dot(alpha, a) if w is None else alpha[0] * (a[0] / w[0] if w[0] else next(
            x / y for x, y in zip(a, w) if y))
        with balls(128) as B:
            f = sum((B.q(ci) * _cgf_ball(B, law, a) for ci, law in zip(c, laws) if ci), B.q(0)) - B.q(lin)
            if B.positive(f) or B.positive(-f):
                raise Refuted(f"at a = {short(a)}, sum_i c_i Lambda_i(a) - <alpha, a> is certainly not 0 "
                              f"(|value| >= {abs(B.mid(f)):.3g} up to its ball)")


# ------------------------------------------------------------------------------- term identity


def _terms(law: dict[str, Any], w: list[Fraction] | None) -> tuple[dict[Any, Fraction], list[Fraction] | None]:
    """The CGF as named closed-form functions with coefficients (on R^d, or along ``w``), and its mean."""
    k = law["kind"]
    T: dict[Any, Fraction] = {}

    def add(key: Any, v: Fraction) -> None:
        if v:
            T[key] = T.get(key, Fraction(0)) + v
    if k == "uniform-cube":  # sum_j log(sinh(r a_j) / (r a_j))
        for j in range(law["dim"]):
            a = law["radius"] * (1 if w is None else w[j])
            add(("sinhc", j if w is None else None, abs(a)), Fraction(1) if a else Fraction(0))
        return T, None
    if k == "laplace":  # -log(1 - a^T S a / 2)
        s = law["cov"] if w is None else quad(law["cov"], w)
        if any(v for r in s for v in r) if w is None else s:
            add(("laplace", str(s)), Fraction(1))
        return T, None
    if k not in ("gaussian", "gaussian-mixture", "dirac"):
        raise Unchecked(f"no closed-form terms for a {k} law")
    S = law.get("cov") or []  # a^T S a / 2, or s t^2 / 2 along w
    pieces = [(("q",), quad(S, w))] if w is not None and S else [(("q", i, j), v) for i, r in enumerate(S)
                                                                  for j, v in enumerate(r)]
    for key, v in pieces:
        add(key, v / 2)
    if k == "gaussian-mixture":  # log cosh <m, a>, even in m
        m = law["m"] if w is None else [dot(law["m"], w)]
        sign = next((1 if v > 0 else -1 for v in m if v), 0)
        if sign:
            add(("logcosh", tuple(sign * v for v in m)), Fraction(1))
        return T, [Fraction(0)] * len(m)
    return T, law.get("mean") or law.get("point")


def term_identity(laws: list[dict[str, Any]], c: list[Fraction], alpha: list[Fraction],
                  w: list[Fraction] | None) -> None:
    """The named functions' coefficients cancel and the linear part is ``alpha`` (refuted otherwise)."""
    total: dict[Any, Fraction] = {}
    lin = [Fraction(0)] * len(alpha)
    for ci, law in zip(c, laws, strict=True):
        T, mean = _terms(law, w)
        for key, v in T.items():
            total[key] = total.get(key, Fraction(0)) + ci * v
        if mean is not None:
            m = mean if w is None else [dot(mean, w)]
            lin = [a + ci * b for a, b in zip(lin, m, strict=True)]
    if any(v != 0 for v in total.values()):
        raise Refuted("the closed-form terms do not cancel")
    if lin != list(alpha):
        raise Refuted("the linear part differs from the recorded alpha")
