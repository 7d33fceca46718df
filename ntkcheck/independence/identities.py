r"""Exact proofs of dependence: :math:`\sum_i c_i \Lambda_i` is affine.

Three routes, tried in this order, all exact:

* **Product identity** (empirical laws, convolutions of empirical laws, Diracs, Gaussians,
  two-point mixtures, and their translates and Gaussian convolutions: every law whose MGF
  is an exponential polynomial times a Gaussian factor,
  :math:`e^{\Lambda(a)} = P(a)\, e^{a^T Q a / 2}`, :math:`P(a) = \sum_v p_v e^{\langle v, a\rangle}`).
  With ``c = k / L`` for integers ``k``,
  :math:`\sum_i c_i \Lambda_i = \langle\alpha, a\rangle + \beta` holds iff
  :math:`\sum_i k_i Q_i = 0` and
  :math:`\prod_{k_i>0} P_i^{k_i} = e^{\langle L\alpha, a\rangle} \prod_{k_i<0} P_i^{-k_i}`.
  Both sides are exponential polynomials, compared as finite tables
  {frequency: coefficient} in integer and rational arithmetic (exponentials with distinct
  frequencies are linearly independent; a non-zero quadratic form cannot be matched by
  exponential polynomials, which grow at most exponentially). For probability measures
  :math:`\Lambda_i(0) = 0`, so :math:`\beta = 0`. This route is complete for these laws:
  when the tables differ, the combination is not affine, and no other route is tried.
* **Term identity** (closed forms): every CGF written as a sum of named functions
  (``log(sinh(<v, a>)/<v, a>)`` of a uniform cube, ``-log(1 - a^T S a / 2)`` of a Laplace
  law, the log of an exponential polynomial with a fixed atom at 0) plus a linear and a
  quadratic part; if the coefficients of every named function and of the quadratic part
  cancel, the combination is affine. A formal cancellation, hence a proof.
* **Symbolic identity** (sympy, last resort): the Hessian (or the second derivative
  along a direction) of :math:`\sum_i c_i \Lambda_i` simplifies to zero. Only for small
  expressions, and bounded in time (an alarm in the main thread; elsewhere only
  expansion, no ``simplify``).

References: seed 003 Ex. 6 and Remark 5 (the dependent examples), theory/cgf-independence.md.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from math import comb, lcm
from typing import Any

import sympy as sp

from .._budget import UNLIMITED, Budget
from .._precision import mp_dps
from .._records import restore
from ..cgf import (
    Empirical,
    EmpiricalConvolution,
    Family,
    GaussianConvolution,
    Laplace,
    Translation,
    UniformCube,
)
from .exp_gauss import Mat, Vec, _add_mat, _mul, _pow, _zero, exp_gauss_form
from .rank import qstr

__all__ = [
    "IdentityProof",
    "product_identity",
    "product_identity_decides",
    "term_identity",
    "symbolic_identity",
    "numerically_affine",
    "prove_dependence",
]

#: largest exponential polynomial the product identity expands before giving up
MAX_TERMS = 200_000

#: seconds sympy may spend on one candidate (and never more than the decision's budget)
SYMPY_SECONDS = 10.0

#: sympy is not asked about laws with more atoms than this (log-sum-exps of many terms
#: are what makes ``simplify`` run for minutes)
SYMPY_MAX_ATOMS = 4


@dataclass(frozen=True)
class IdentityProof:
    """An exact proof that :math:`\\sum_i c_i \\Lambda_i(a) = \\langle\\alpha, a\\rangle + \\beta`.

    Attributes
    ----------
    kind : str
        ``"product-identity"``, ``"term-identity"`` or ``"symbolic-identity"``.
    null_vector : tuple of Fraction
        ``c``.
    alpha : tuple of Fraction
        On :math:`\\mathbb R^d` (``direction is None``): ``d`` entries,
        :math:`\\alpha = \\sum_i c_i\\, \\mathrm{mean}(\\mu_i)`; along ``w``: one entry,
        :math:`\\langle w, \\alpha\\rangle`.
    beta : Fraction
        Always 0 for probability measures.
    direction : tuple of Fraction or None
        ``None``: an identity on all of :math:`\\mathbb R^d`; else along ``t -> t w``.
    statement : str
    """

    kind: str
    null_vector: tuple[Fraction, ...]
    alpha: tuple[Fraction, ...]
    beta: Fraction
    direction: tuple[Fraction, ...] | None
    statement: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "null_vector": [qstr(v) for v in self.null_vector],
            "alpha": [qstr(v) for v in self.alpha],
            "beta": qstr(self.beta),
            "direction": None if self.direction is None else [qstr(v) for v in self.direction],
            "statement": self.statement,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> IdentityProof:
        return restore(cls, d)


def _integerise(c: Sequence[Fraction]) -> tuple[list[int], int]:
    L = 1
    for v in c:
        L = lcm(L, Fraction(v).denominator)
    return [int(Fraction(v) * L) for v in c], L


def _where(direction: Sequence[Fraction] | None) -> str:
    return "on R^d" if direction is None else f"along w = {[qstr(v) for v in direction]}"


# ------------------------------------------------------------ exponential-polynomial forms


def _as_integer_keys(polys: list[dict[Vec, Fraction]]) -> tuple[list[dict[tuple[int, ...], Fraction]], Fraction]:
    """Frequencies on one common scale ``1/D`` as integer tuples (integer keys hash and add fast)."""
    D = 1
    for p in polys:
        for v in p:
            for x in v:
                D = lcm(D, x.denominator)
    out = [{tuple(int(x * D) for x in v): c for v, c in p.items()} for p in polys]
    return out, Fraction(1, D)


def _multiset_bound(size: int, k: int) -> int:
    """How many distinct frequencies ``P^k`` can have when ``P`` has ``size`` terms."""
    return comb(size + k - 1, k)


def product_identity(
    measures: Sequence[Family],
    c: Sequence[Fraction],
    direction: Sequence[Fraction] | None = None,
    *,
    budget: Budget = UNLIMITED,
) -> IdentityProof | None:
    """Prove :math:`\\sum c_i \\Lambda_i` affine by the product identity, or None.

    Every measure with ``c_i != 0`` must have an :func:`exp_gauss_form` (else None). None
    also when the identity is false, or when an expansion would exceed :data:`MAX_TERMS`
    terms (use :func:`product_identity_decides` to tell the two apart).
    """
    return _product(measures, c, direction, budget)[0]


def product_identity_decides(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None = None,
    *, budget: Budget = UNLIMITED,
) -> bool:
    """Whether :func:`product_identity` settles ``c`` either way (all forms exist, sizes within the cap)."""
    return _product(measures, c, direction, budget)[1]


def _product(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None, budget: Budget
) -> tuple[IdentityProof | None, bool]:
    k, L = _integerise(c)
    if all(v == 0 for v in k):
        return None, True
    forms = []
    for m, ki in zip(measures, k):
        f = exp_gauss_form(m, direction) if ki else None
        if ki and f is None:
            return None, False
        forms.append(f)
    # the Gaussian factors must cancel exactly
    dim = 1 if direction is not None else measures[0].dim
    Q = _zero(dim)
    for f, ki in zip(forms, k):
        if f is not None and f.quad is not _zero(dim):  # adding the shared zero matrix changes nothing
            Q = tuple(tuple(x + ki * y for x, y in zip(r, s)) for r, s in zip(Q, f.quad))
    if Q is not _zero(dim) and any(x != 0 for r in Q for x in r):
        return None, True
    involved = [f.atoms for f in forms if f is not None]
    ints, scale = _as_integer_keys(involved)
    it = iter(ints)
    polys = [next(it) if f is not None else None for f in forms]
    size_l = size_r = 1
    for p, ki in zip(polys, k):
        if p is None:
            continue
        if ki > 0:
            size_l *= _multiset_bound(len(p), ki)
        else:
            size_r *= _multiset_bound(len(p), -ki)
    if max(size_l, size_r) > MAX_TERMS:
        return None, False
    zero = tuple(0 for _ in range(dim))
    lhs: dict = {zero: Fraction(1)}
    rhs: dict = {zero: Fraction(1)}
    for p, ki in zip(polys, k):
        if p is None:
            continue
        power = _pow(p, abs(ki), budget)
        if ki > 0:
            lhs = _mul(lhs, power, budget)
        else:
            rhs = _mul(rhs, power, budget)
    if len(lhs) != len(rhs):
        return None, True
    shift = tuple(x - y for x, y in zip(min(lhs), min(rhs)))
    shifted = {tuple(x + s for x, s in zip(key, shift)): v for key, v in rhs.items()}
    if shifted != lhs:
        return None, True
    alpha = tuple(s * scale / L for s in shift)
    stmt = (
        f"prod over k_i>0 of P_i^k_i = exp(<{[qstr(s * scale) for s in shift]}, a>) * prod over k_i<0 of P_i^(-k_i), "
        f"k = {k}, Gaussian factors cancel (exact comparison of {len(lhs)} exponential terms), so "
        f"sum_i c_i Lambda_i = <alpha, a> {_where(direction)}, c = k / {L}"
    )
    proof = IdentityProof("product-identity", tuple(Fraction(v) for v in c), alpha, Fraction(0),
                          None if direction is None else tuple(direction), stmt)
    return proof, True


# ------------------------------------------------------------------------ term identity


@dataclass(frozen=True)
class _Terms:
    linear: Vec
    quad: Mat
    funcs: dict[tuple[Any, ...], Fraction]


def _canon_sign(v: Vec) -> Vec:
    first = next((x for x in v if x != 0), Fraction(0))
    return tuple(-x for x in v) if first < 0 else v


def _terms(m: Family, w: Sequence[Fraction] | None) -> _Terms | None:
    """``Lambda`` of ``m`` (along ``w``) as linear + quadratic + named functions, or None."""
    d = 1 if w is not None else m.dim
    f = exp_gauss_form(m, w)
    if f is not None:
        v0 = min(f.atoms)
        rest = frozenset((tuple(x - y for x, y in zip(v, v0)), p) for v, p in f.atoms.items())
        funcs = {} if len(rest) == 1 else {("lse", rest): Fraction(1)}
        return _Terms(v0, f.quad, funcs)
    if isinstance(m, UniformCube):
        funcs = {}
        if w is None:
            for k in range(d):
                v = tuple(m.radius if i == k else Fraction(0) for i in range(d))
                key = ("sinhc", _canon_sign(v))
                funcs[key] = funcs.get(key, Fraction(0)) + 1
        else:
            for wk in w:
                if wk != 0:
                    key = ("sinhc", (abs(m.radius * wk),))
                    funcs[key] = funcs.get(key, Fraction(0)) + 1
        return _Terms(tuple(Fraction(0) for _ in range(d)), _zero(d), funcs)
    if isinstance(m, Laplace):
        if w is None:
            return _Terms(tuple(Fraction(0) for _ in range(d)), _zero(d), {("laplace", m.cov): Fraction(1)})
        s = sum((w[i] * m.cov[i][j] * w[j] for i in range(len(w)) for j in range(len(w))), Fraction(0))
        funcs = {} if s == 0 else {("laplace", ((s,),)): Fraction(1)}
        return _Terms((Fraction(0),), _zero(1), funcs)
    if isinstance(m, Translation):
        b = _terms(m.base, w)
        if b is None:
            return None
        sh = tuple(m.shift) if w is None else (sum((x * y for x, y in zip(w, m.shift)), Fraction(0)),)
        return _Terms(tuple(x + y for x, y in zip(b.linear, sh)), b.quad, b.funcs)
    if isinstance(m, GaussianConvolution):
        b = _terms(m.base, w)
        if b is None:
            return None
        cov = tuple(tuple(r) for r in m.cov)
        q = cov if w is None else ((sum((w[i] * cov[i][j] * w[j] for i in range(len(w)) for j in range(len(w))), Fraction(0)),),)
        return _Terms(b.linear, _add_mat(b.quad, q), b.funcs)
    return None


def term_identity(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None = None
) -> IdentityProof | None:
    """Prove :math:`\\sum c_i \\Lambda_i` affine by formal cancellation of named functions, or None."""
    return _term(measures, c, direction)[0]


def _term(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None
) -> tuple[IdentityProof | None, bool]:
    """The term identity, and whether its answer is final.

    Final when no involved law has a log-sum-exp term of several atoms: the remaining
    named functions :math:`\\log(\\sinh(\\rho t)/(\\rho t))` (log singularities at
    :math:`i\\pi k/\\rho`, the nearest at :math:`i\\pi/\\rho` belongs to the largest
    :math:`\\rho` alone) and :math:`-\\log(1 - s t^2/2)` (singular at the real
    :math:`\\pm\\sqrt{2/s}`) are linearly independent modulo quadratics along a generic
    direction, so a combination is affine only if they cancel formally.
    """
    w = None if direction is None else [Fraction(v) for v in direction]
    terms = []
    for m, ci in zip(measures, c):
        if ci == 0:
            continue
        t = _terms(m, w)
        if t is None:
            return None, False
        terms.append((Fraction(ci), t))
    if not terms:
        return None, True
    final = not any(key[0] == "lse" for _, t in terms for key in t.funcs)
    d = len(terms[0][1].linear)
    funcs: dict[tuple[Any, ...], Fraction] = {}
    Q = _zero(d)
    for ci, t in terms:
        for key, v in t.funcs.items():
            funcs[key] = funcs.get(key, Fraction(0)) + ci * v
        if t.quad is not _zero(d):  # adding the shared zero matrix changes nothing
            Q = tuple(tuple(x + ci * y for x, y in zip(r, s)) for r, s in zip(Q, t.quad))
    if any(v != 0 for v in funcs.values()) or (Q is not _zero(d) and any(x != 0 for r in Q for x in r)):
        return None, final
    # alpha must be the combination of the means: the exp-polynomial terms carry the rest
    alpha_t = _alpha_from_taylor(measures, c, w)
    stmt = (
        f"the named functions of sum_i c_i Lambda_i ({len({k for _, t in terms for k in t.funcs})} of them: "
        "log sinh(x)/x, -log(1 - s/2), log-sum-exps with an atom at 0) and its quadratic part cancel exactly, "
        f"so sum_i c_i Lambda_i is affine {_where(direction)}"
    )
    proof = IdentityProof("term-identity", tuple(Fraction(v) for v in c), alpha_t, Fraction(0),
                          None if w is None else tuple(w), stmt)
    return proof, True


def _alpha_from_taylor(measures: Sequence[Family], c: Sequence[Fraction], w: Sequence[Fraction] | None) -> Vec:
    """:math:`\\alpha = \\sum_i c_i \\nabla\\Lambda_i(0)` from exact first Taylor coefficients."""
    d = measures[0].dim
    dirs = [list(w)] if w is not None else [[Fraction(int(i == k)) for i in range(d)] for k in range(d)]
    out = []
    for u in dirs:
        tot = Fraction(0)
        for m, ci in zip(measures, c):
            if ci:
                t1 = m.taylor_1d(u, 1, exact=True)[1]
                tot += Fraction(ci) * Fraction(int(t1.p), int(t1.q))
        out.append(tot)
    return tuple(out)


# ---------------------------------------------------------------------- symbolic identity


class _SympyTimeout(Exception):  # noqa: N818 (internal signal)
    pass


@contextmanager
def _alarm(seconds: float) -> Iterator[bool]:
    """Interrupt the body after ``seconds`` (yields True), or yield False when no alarm can be set.

    An interval timer and SIGALRM work only in the main thread, and only if no other
    timer is running; the previous handler is restored on exit.
    """
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )
    if not usable or seconds <= 0:
        yield False
        return

    def _raise(signum: int, frame: Any) -> None:
        raise _SympyTimeout

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _rat(v: Fraction) -> sp.Rational:
    return sp.Rational(v.numerator, v.denominator)


def _is_zero(expr: sp.Expr, deep: bool) -> bool:
    e = sp.expand(expr)
    if e == 0:
        return True
    if not deep:
        return False
    if sp.simplify(e) == 0:
        return True
    # hyperbolic closed forms (log cosh, sinh x / x) against log-sum-exps: compare as exponentials
    return bool(sp.simplify(e.rewrite(sp.exp)) == 0)


def _n_atoms(m: Family) -> int:
    if isinstance(m, Empirical):
        return m.n_atoms
    if isinstance(m, EmpiricalConvolution):
        return m.first.n_atoms * m.second.n_atoms
    base = getattr(m, "base", None)
    return _n_atoms(base) if isinstance(base, Family) else 1


def symbolic_identity(
    measures: Sequence[Family],
    c: Sequence[Fraction],
    direction: Sequence[Fraction] | None = None,
    *,
    budget: Budget = UNLIMITED,
    seconds: float = SYMPY_SECONDS,
) -> IdentityProof | None:
    """Prove :math:`\\sum c_i \\Lambda_i` affine by simplifying its second derivatives to zero, or None.

    Bounded: laws with more than :data:`SYMPY_MAX_ATOMS` atoms are not tried; ``simplify``
    runs under an alarm of ``min(seconds, budget left)`` in the main thread (elsewhere
    only ``expand`` is tried). A timeout gives None.
    """
    involved = [m for m, ci in zip(measures, c) if ci != 0]
    if any(_n_atoms(m) > SYMPY_MAX_ATOMS for m in involved):
        return None
    d = measures[0].dim
    limit = min(seconds, budget.remaining())
    try:
        with _alarm(limit) as guarded:
            if direction is None:
                a = sp.symbols(f"a0:{d}")
                F = sp.Add(*[_rat(Fraction(ci)) * m.cgf_sympy(a) for ci, m in zip(c, measures) if ci != 0])
                for i in range(d):
                    for j in range(i, d):
                        if not _is_zero(sp.diff(F, a[i], a[j]), guarded):
                            return None
                where = "Hessian of sum_i c_i Lambda_i simplifies to 0 on R^d"
            else:
                t = sp.Symbol("t")
                F = sp.Add(*[_rat(Fraction(ci)) * m.cgf_1d_sympy(t, direction) for ci, m in zip(c, measures) if ci != 0])
                if not _is_zero(sp.diff(F, t, 2), guarded):
                    return None
                where = f"d^2/dt^2 sum_i c_i Lambda_i(t w) simplifies to 0, w = {[qstr(v) for v in direction]}"
    except _SympyTimeout:
        return None
    except (TypeError, ValueError, NotImplementedError, ZeroDivisionError, RecursionError, AttributeError):
        return None  # sympy internals: no proof, never a crash
    w = None if direction is None else [Fraction(v) for v in direction]
    alpha = _alpha_from_taylor(measures, c, w)
    return IdentityProof("symbolic-identity", tuple(Fraction(v) for v in c), alpha, Fraction(0),
                         None if w is None else tuple(w), where)


# ------------------------------------------------------------------------- the filter


def numerically_affine(
    measures: Sequence[Family], c: Sequence[Fraction], direction: Sequence[Fraction] | None = None, dps: int = 40,
    *, budget: Budget = UNLIMITED,
) -> bool:
    r"""Cheap filter before an exact proof: second differences of :math:`\sum c_i\Lambda_i` vanish at ``dps`` digits.

    Evaluated along ``direction`` (or two fixed generic directions for the weak
    property) at a few points inside every MGF domain, with the step scaled to the
    spread of the laws (so that the curvature is visible whatever the scale of the
    tokens). Not a proof: it only saves exact work on candidates that are plainly not
    null vectors.
    """
    import mpmath

    d = measures[0].dim
    dirs = [list(direction)] if direction is not None else [[Fraction(k % 3 + 1, k + 2) for k in range(d)], [Fraction((-1) ** k * (k + 2), 3) for k in range(d)]]
    with mp_dps(dps + 20):
        for w in dirs:
            budget.check("numerical filter of a candidate null vector")
            R = min(m.mgf_radius(w) for m in measures)
            spread = max((_spread(m, w) for m in measures), default=0) or 1
            h = mpmath.mpf(1) / (4 * mpmath.mpf(spread))
            if R != float("inf"):
                h = min(h, mpmath.mpf(R) / 4)
            for t in (h / 3, -h / 2):
                terms = [[mpmath.mpf(ci.numerator) / ci.denominator * m.cgf_1d_mp(t + s * h, w, dps=dps + 20)
                          for ci, m in zip(c, measures) if ci != 0] for s in (-1, 0, 1)]
                vals = [mpmath.fsum(ts) for ts in terms]
                second = vals[0] - 2 * vals[1] + vals[2]
                # rounding is relative to the terms summed, not to their (cancelling) sum
                scale = max(mpmath.fsum(abs(x) for x in ts) for ts in terms) + h * h
                if abs(second) > mpmath.mpf(10) ** (-dps) * scale * 100:
                    return False
    return True


def _spread(m: Family, w: Sequence[Fraction]) -> float:
    """A rough scale of ``<w, Y>`` (1 when unknown): the range of the projected atoms."""
    f = exp_gauss_form(m, w)
    if f is None:
        return 1.0
    zs = [v[0] for v in f.atoms]
    rng = max(zs) - min(zs)
    q = f.quad[0][0]
    out = 0.0
    if rng:
        out = 2.0 ** _clip_log2(rng)
    if q:
        out = max(out, 2.0 ** (_clip_log2(q) / 2))
    return out or 1.0


def _clip_log2(q: Fraction) -> int:
    """``~log2 |q|`` clipped to the float range."""
    e = abs(q.numerator).bit_length() - q.denominator.bit_length()
    return max(-1000, min(1000, e))


def prove_dependence(
    measures: Sequence[Family],
    c: Sequence[Fraction],
    direction: Sequence[Fraction] | None = None,
    *,
    budget: Budget = UNLIMITED,
) -> IdentityProof | None:
    """Prove :math:`\\sum_i c_i\\Lambda_i` affine (on R^d, or along ``direction``), or None.

    The product identity first: for laws that have an :func:`exp_gauss_form` it decides
    the question exactly, and nothing else is tried. Then the term identity, then sympy
    (bounded). Raises :class:`~ntkcheck._budget.OutOfTime` when ``budget`` runs out.
    """
    c = [Fraction(v) for v in c]
    if all(v == 0 for v in c):
        return None
    if not numerically_affine(measures, c, direction, budget=budget):
        return None
    budget.check("product identity")
    proof, decided = _product(measures, c, direction, budget)
    if proof is not None or decided:
        return proof
    budget.check("term identity")
    proof, decided = _term(measures, c, direction)
    if proof is not None or decided:
        return proof
    budget.check("symbolic identity")
    return symbolic_identity(measures, c, direction, budget=budget)

