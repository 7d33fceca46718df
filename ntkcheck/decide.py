r"""The decision engine: are the CGFs linearly independent modulo affine functions?

Weak independence (seed 003 Def. 6, eq. 32): :math:`\sum_i c_i\Lambda_i \in \mathrm{Aff} \Rightarrow c = 0`.
Strong independence (eq. 33): for some direction ``w``,
:math:`\sum_i c_i\Lambda_i^w \in \mathrm{Aff}(\mathbb R) \Rightarrow c = 0`.

Coefficient form (MATH.md section 2): with :math:`\Lambda_i^w(t) = \sum_k c_{ik} t^k`, the
:math:`\Lambda_i^w` are independent modulo affine functions iff the rows
:math:`(c_{ik})_{k\ge2}` are linearly independent; a truncation ``k = 2..K`` of full row
rank certifies it. Every verdict carries a certificate:

* ``independent``: a square minor with determinant non-zero modulo a prime (exact), a
  rigorous Arb lower bound on its smallest singular value (interval), the gap condition
  (Prop. 9) or the Vandermonde condition (Prop. 11/12); for the weak property also via
  strong independence at one direction (Prop. 7);
* ``dependent``: a null vector ``c`` with the affine part ``(alpha, beta)`` and an exact
  identity (product identity or symbolic), or a null vector verified at two precisions;
  for the strong property without a direction, weak dependence (Prop. 7, contrapositive)
  or the structural bound for quadratic CGFs;
* ``inconclusive`` otherwise, with the margin seen and what was tried.

``method="auto"`` runs the exact sufficient conditions, a float64 screen, exact rational
rank (every input here is rational: floats are dyadic), then an Arb precision ladder.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb

from . import _certify as C
from ._validate import as_token_set
from ._validate import rational_direction as _direction
from .conditions import gap_condition, vandermonde_condition
from .errors import DomainError, InputError, PrecisionError
from .families import Empirical, Family
from .identities import IdentityProof, prove_dependence

__all__ = ["Verdict", "Decision", "Structural", "Inconclusive", "VerifiedNullVector", "decide", "as_measures"]

_METHODS = ("auto", "exact", "interval", "float")

#: relative size below which a certificate is flagged as resting on rounding-level differences
ROUNDING_LEVEL = 1e-13
_PROPERTIES = ("weak", "strong")


class Verdict(StrEnum):
    """The answer, read as a sentence by :meth:`sentence`."""

    INDEPENDENT = "independent"
    DEPENDENT = "dependent"
    INCONCLUSIVE = "inconclusive"

    def sentence(self, prop: str) -> str:
        if self is Verdict.INDEPENDENT:
            return f"The CGFs are {prop}ly independent modulo affine functions (certified)."
        if self is Verdict.DEPENDENT:
            return "A non-zero combination of the CGFs is affine (certified)."
        return "Neither independence nor dependence could be certified."


@dataclass(frozen=True)
class Structural:
    """Certificate of strong dependence for quadratic CGFs: along any direction the
    :math:`\\Lambda_i^w` lie in :math:`\\mathrm{span}\\{t^2\\} + \\mathrm{Aff}`, of dimension 1 < n."""

    n: int
    kind: str = "structural"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "statement": f"every CGF is a polynomial of degree <= 2, so along every direction w the {self.n} functions "
            "Lambda_i^w lie in span{t^2} modulo affine functions (dimension 1): dependent for every w",
        }


@dataclass(frozen=True)
class StrongFromWeak:
    """Certificate: weak dependence implies strong dependence (seed 003 Prop. 7, contrapositive)."""

    weak: IdentityProof
    kind: str = "weak-dependence"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "statement": "sum_i c_i Lambda_i is affine on R^d, hence along every direction (Prop. 7 contrapositive)",
            "identity": self.weak.to_dict(),
        }


@dataclass(frozen=True)
class ViaStrong:
    """Certificate of weak independence from strong independence at one direction (Prop. 7)."""

    direction: tuple[Fraction, ...]
    strong: Any
    kind: str = "prop7-strong-implies-weak"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "direction": [str(v) for v in self.direction],
            "statement": "strongly independent at this direction, hence weakly independent (seed 003 Prop. 7)",
            "strong": self.strong.to_dict(),
        }


@dataclass(frozen=True)
class VerifiedNullVector:
    """A null vector of the truncated coefficient matrix verified at two working precisions.

    Not an exact identity: the residual ``|C^T c| / |C|`` is at the level of each working
    precision, and the vectors found at both agree.
    """

    orders: int
    residuals: tuple[float, float]
    prec_bits: tuple[int, int]
    kind: str = "null-vector-two-precisions"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "orders": f"2..{self.orders}",
            "residuals": list(self.residuals),
            "prec_bits": list(self.prec_bits),
            "statement": f"residual {self.residuals[0]:.1e} at {self.prec_bits[0]} bits and {self.residuals[1]:.1e} at "
            f"{self.prec_bits[1]} bits for orders 2..{self.orders}: dependent to working precision, not proved exactly",
        }


@dataclass(frozen=True)
class Inconclusive:
    """What was seen when nothing could be certified."""

    margin: float | None
    tried: tuple[str, ...]
    suggestion: str
    kind: str = "none"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "margin": self.margin, "tried": list(self.tried), "suggestion": self.suggestion}


@dataclass(frozen=True)
class Decision:
    """Result of :func:`decide`.

    Attributes
    ----------
    verdict : Verdict
    property : {"weak", "strong"}
    method : str
        The engine that produced the certificate (``exact``, ``interval``, ``float``,
        ``gap-condition``, ``vandermonde``, ``identity``, ``structural``, or ``none``).
    precision : str
        ``"exact"`` or the working precision in bits.
    margin : float or None
        Smallest relative singular value of the column-scaled coefficient matrix seen in
        the float64 screen (``0.0``: below float64 resolution).
    certificate : object with ``kind`` and ``to_dict()``
    direction : tuple of Fraction or None
        The direction that certifies (strong property), or the one tested.
    null_vector : tuple of Fraction or None
        ``c`` with :math:`\\sum_i c_i\\Lambda_i` affine, when dependent.
    affine : (alpha, beta) or None
        :math:`\\sum_i c_i \\Lambda_i(a) = \\langle\\alpha, a\\rangle + \\beta` (along ``w``: 1-D alpha).
    """

    verdict: Verdict
    property: str
    method: str
    precision: str
    margin: float | None
    certificate: Any
    direction: tuple[Fraction, ...] | None
    null_vector: tuple[Any, ...] | None
    affine: tuple[tuple[Any, ...], Any] | None
    n: int
    dim: int
    trail: tuple[str, ...] = ()
    seconds: float = 0.0
    K: int = 0
    notes: tuple[str, ...] = ()

    def __repr__(self) -> str:
        parts = [f"Decision({self.property}: {self.verdict.value}", f"method={self.method}", f"precision={self.precision}"]
        if self.margin is not None:
            parts.append(f"margin={self.margin:.2e}")
        if self.direction is not None:
            parts.append(f"direction={format_vector(self.direction)}")
        if self.null_vector is not None:
            parts.append(f"null_vector={format_vector(self.null_vector)}")
        parts.append(f"certificate={getattr(self.certificate, 'kind', '?')})")
        return ", ".join(parts)

    @property
    def independent(self) -> bool:
        return self.verdict is Verdict.INDEPENDENT

    @property
    def dependent(self) -> bool:
        return self.verdict is Verdict.DEPENDENT

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "property": self.property,
            "method": self.method,
            "precision": self.precision,
            "margin": self.margin,
            "certificate": self.certificate.to_dict() if hasattr(self.certificate, "to_dict") else str(self.certificate),
            "direction": None if self.direction is None else [str(v) for v in self.direction],
            "null_vector": None if self.null_vector is None else [str(v) for v in self.null_vector],
            "affine": None
            if self.affine is None
            else {"alpha": [str(v) for v in self.affine[0]], "beta": str(self.affine[1])},
            "n": self.n,
            "dim": self.dim,
            "K": self.K,
            "trail": list(self.trail),
            "notes": list(self.notes),
            "seconds": self.seconds,
            "sentence": self.verdict.sentence(self.property),
        }


# ---------------------------------------------------------------------------- inputs


def as_measures(measures: Any) -> list[Family]:
    """Token sets and families as a list of :class:`~ntkcheck.families.Family` of one dimension."""
    if isinstance(measures, Family):
        measures = [measures]
    if isinstance(measures, np.ndarray) and measures.dtype != object:
        if measures.ndim != 3:
            raise InputError(f"measures: expected shape (n, N, d) or a list, got shape {measures.shape}")
        measures = list(measures)
    try:
        items = list(measures)
    except TypeError:
        raise InputError(f"measures: expected a list of token arrays or families, got {type(measures).__name__}") from None
    if not items:
        raise InputError("measures: no measures were given (need at least one)")
    out: list[Family] = []
    for i, m in enumerate(items):
        out.append(m if isinstance(m, Family) else Empirical(as_token_set(m, name=f"sample {i}")))
    dims = [m.dim for m in out]
    for i, dm in enumerate(dims):
        if dm != dims[0]:
            raise InputError(f"sample {i} has dimension {dm}, the others have {dims[0]}")
    return out


def format_vector(v: Sequence[Any], head: int = 8) -> str:
    """``(v_1, ..., v_k)`` for humans: long vectors show their first entries and their length."""
    items = [str(x) for x in v]
    if len(items) <= head:
        return "(" + ", ".join(items) + ")"
    return "(" + ", ".join(items[: head - 1]) + f", ..., {items[-1]}) [{len(items)} entries]"


def candidate_directions(d: int, count: int, seed: int = 0) -> list[tuple[Fraction, ...]]:
    """Deterministic generic integer directions (entries in [-9, 9]) for the search."""
    rng = np.random.default_rng(seed)
    out: list[tuple[Fraction, ...]] = []
    if d == 1:
        return [(Fraction(1),)]
    while len(out) < count:
        v = rng.integers(-9, 10, size=d)
        if np.any(v != 0):
            t = tuple(Fraction(int(x)) for x in v)
            if t not in out:
                out.append(t)
    return out


# ------------------------------------------------------------------ coefficient rows


def _default_K(n: int) -> int:
    return max(6, 2 * n + 2)


_Cache = dict[tuple[Any, ...], list[Any]]


def _series(m: Family, w: tuple[Fraction, ...], K: int, kind: str, arg: int, cache: _Cache | None) -> list[Any]:
    """Taylor coefficients of ``Lambda_m(t w)``: ``kind`` "exact" (fmpq), "ball" (Arb at ``arg``
    bits) or "modp" (reduced mod the prime ``arg``); memoised per decision."""
    key = (id(m), w, K, kind, arg)
    if cache is not None and key in cache:
        return cache[key]
    if kind == "exact":
        out = m.taylor_1d(list(w), K, exact=True)
    elif kind == "ball":
        out = m.taylor_1d(list(w), K, exact=False, prec=arg)
    elif isinstance(m, Empirical):
        from .cgf import series_log_mgf_modp

        out = series_log_mgf_modp(m.projected(w), m.exact_weights(), K, arg)
    else:
        from .cgf import _modp

        out = [_modp(Fraction(int(c.p), int(c.q)), arg) for c in _series(m, w, K, "exact", 0, cache)]
    if cache is not None:
        cache[key] = out
    return out


def _exact_rows(ms: Sequence[Family], dirs: Sequence[tuple[Fraction, ...]], K: int, cache: _Cache | None = None) -> tuple[list[list[Any]], list[Any]]:
    labels: list[Any] = []
    rows: list[list[Any]] = [[] for _ in ms]
    for di, w in enumerate(dirs):
        coeffs = [_series(m, w, K, "exact", 0, cache) for m in ms]
        for k in range(2, K + 1):
            col = [c[k] for c in coeffs]
            if any(v != 0 for v in col):
                labels.append(k if len(dirs) == 1 else (di, k))
                for i, v in enumerate(col):
                    rows[i].append(v)
    return rows, labels


def _exact_rows_all(ms: Sequence[Family], dirs: Sequence[tuple[Fraction, ...]], K: int, cache: _Cache | None = None) -> list[list[Any]]:
    rows: list[list[Any]] = [[] for _ in ms]
    for w in dirs:
        for i, m in enumerate(ms):
            rows[i].extend(_series(m, w, K, "exact", 0, cache)[2:])
    return rows


def _modp_rows(ms: Sequence[Family], dirs: Sequence[tuple[Fraction, ...]], K: int, p: int, cache: _Cache | None = None) -> tuple[list[list[int]], list[Any]]:
    labels: list[Any] = []
    rows: list[list[int]] = [[] for _ in ms]
    for di, w in enumerate(dirs):
        coeffs = [_series(m, w, K, "modp", p, cache) for m in ms]
        for k in range(2, K + 1):
            labels.append(k if len(dirs) == 1 else (di, k))
            for i, c in enumerate(coeffs):
                rows[i].append(c[k])
    return rows, labels


def _ball_rows(ms: Sequence[Family], dirs: Sequence[tuple[Fraction, ...]], K: int, prec: int, cache: _Cache | None = None) -> tuple[list[list[arb]], list[Any]]:
    labels: list[Any] = []
    rows: list[list[arb]] = [[] for _ in ms]
    for di, w in enumerate(dirs):
        coeffs = [_series(m, w, K, "ball", prec, cache) for m in ms]
        for k in range(2, K + 1):
            col = [c[k] for c in coeffs]
            if not all(v.contains(0) for v in col):  # drop columns that are zero or unresolved
                labels.append(k if len(dirs) == 1 else (di, k))
                for i, v in enumerate(col):
                    rows[i].append(v)
    return rows, labels


# ----------------------------------------------------------------------- the engine


@dataclass
class _Run:
    ms: list[Family]
    method: str
    K: int
    max_bits: int
    trail: list[str] = field(default_factory=list)
    margin: float | None = None
    notes: list[str] = field(default_factory=list)
    cache: _Cache = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ms)


def _ladder(max_bits: int, start: int = 64) -> list[int]:
    out, b = [], start
    while b <= max_bits:
        out.append(b)
        b *= 2
    if not out or out[-1] != max_bits:
        out.append(max_bits)
    return out


def _certify_independent(run: _Run, dirs: list[tuple[Fraction, ...]]) -> tuple[str, str, Any] | None:
    """Try to certify full row rank of the (stacked) coefficient matrix. Returns (method, precision, cert)."""
    n = run.n
    # float64 screen (Arb at 53 bits gives the midpoints; no certificate from it here)
    rows53, labels53 = _ball_rows(run.ms, dirs, run.K, 53, run.cache)
    mid = C.arb_midpoints(rows53) if rows53 and rows53[0] else np.zeros((n, 0))
    margin, _ = C.float_screen(mid)
    run.margin = margin if run.margin is None else min(run.margin, margin)
    run.trail.append(f"float64 screen: margin {margin:.2e}")
    if run.method == "float":
        cert = C.ball_full_rank(rows53, labels53, 53) if rows53 and rows53[0] else None
        if cert is not None:
            return "float", "53 bits", cert
        run.trail.append("Arb at 53 bits: not certified")
        return None
    if run.method in ("auto", "exact"):
        for p in C.PRIMES:
            try:
                rows, labels = _modp_rows(run.ms, dirs, run.K, p, run.cache)
            except ZeroDivisionError:
                continue  # p divides a denominator of the input: try the other prime
            exact_rows = _exact_rows_all(run.ms, dirs, run.K, run.cache) if n <= 12 else None
            cert = C.modp_full_rank(rows, labels, p, exact_rows)
            if cert is not None:
                return "exact", "exact", cert
        run.trail.append("exact rank mod p: deficient")
        return None  # rank deficient modulo two primes: no precision ladder can certify full rank
    for bits in _ladder(run.max_bits):
        rows, labels = _ball_rows(run.ms, dirs, run.K, bits, run.cache)
        if not rows or not rows[0]:
            continue
        cert = C.ball_full_rank(rows, labels, bits)
        if cert is not None:
            return "interval", f"{bits} bits", cert
        run.trail.append(f"Arb at {bits} bits: not certified")
    return None


def _null_candidates(run: _Run, dirs: list[tuple[Fraction, ...]]) -> list[list[Fraction]]:
    """Rational candidates for c: exact null space when affordable, else rationalised float SVD vectors."""
    if run.method in ("auto", "exact") or run.n <= 24:
        rows, _ = _exact_rows(run.ms, dirs, run.K, run.cache)
        if not rows or not rows[0]:
            return [[Fraction(int(i == k)) for i in range(run.n)] for k in range(run.n)]
        basis = C.exact_nullspace(rows)
        out = []
        for b in basis:
            # make the vector primitive: integer entries with gcd 1 read best
            den = 1
            for v in b:
                den = math.lcm(den, v.denominator)
            ints = [int(v * den) for v in b]
            g = 0
            for v in ints:
                g = math.gcd(g, v)
            out.append([Fraction(v, g or 1) for v in ints])
        return out
    rows, _ = _ball_rows(run.ms, dirs, run.K, 53, run.cache)
    mid = C.arb_midpoints(rows)
    if mid.size == 0:
        return [[Fraction(int(i == k)) for i in range(run.n)] for k in range(run.n)]
    e = C._scale_exponents(mid)
    A = mid * np.exp2(e)[None, :]
    _, s, vt = np.linalg.svd(A.T)
    cands = []
    for k in range(len(s) - 1, -1, -1):
        if s[k] > 1e-8 * s[0]:
            break
        v = vt[k]
        v = v / v[np.argmax(np.abs(v))]
        cands.append([Fraction(float(x)).limit_denominator(10_000) for x in v])
    return cands


def _arb_mid_mpf(v: arb) -> Any:
    """The midpoint of a ball as an mpmath number, exactly (it is a dyadic rational)."""
    import mpmath

    man, exp = v.mid().man_exp()
    return mpmath.ldexp(mpmath.mpf(int(man)), int(exp))


def _two_precision_null(run: _Run, dirs: list[tuple[Fraction, ...]], bits: int = 128) -> tuple[list[float], VerifiedNullVector] | None:
    import mpmath

    if run.n > 40:
        return None
    vecs, res = [], []
    for prec in (bits, 2 * bits):
        rows, _ = _ball_rows(run.ms, dirs, run.K, prec, run.cache)
        if not rows or not rows[0]:
            return None
        with mpmath.workprec(prec):
            A = mpmath.matrix([[_arb_mid_mpf(v) for v in r] for r in rows])
            colmax = [max(abs(A[i, j]) for i in range(A.rows)) for j in range(A.cols)]
            for j in range(A.cols):
                for i in range(A.rows):
                    A[i, j] = A[i, j] / colmax[j]
            U, S, V = mpmath.svd_r(A.T)
            c = [U[0, 0] * 0 + V[V.rows - 1, i] for i in range(V.cols)]
            r = mpmath.norm(A.T * mpmath.matrix(c)) / mpmath.norm(A)
            vecs.append([float(x) for x in c])
            res.append(float(r))
    v1, v2 = np.array(vecs[0]), np.array(vecs[1])
    v2 = v2 * np.sign(v1 @ v2)
    if res[0] < 2.0 ** (-bits + 20) and res[1] < 2.0 ** (-2 * bits + 20) and np.allclose(v1, v2, atol=1e-12):
        return vecs[1], VerifiedNullVector(run.K, (res[0], res[1]), (bits, 2 * bits))
    return None


def _prove(run: _Run, dirs: list[tuple[Fraction, ...]], w: tuple[Fraction, ...] | None) -> IdentityProof | None:
    for c in _null_candidates(run, dirs):
        if all(v == 0 for v in c):
            continue
        p = prove_dependence(run.ms, c, w)
        if p is not None:
            return p
    return None


def _decision(run: _Run, prop: str, verdict: Verdict, method: str, precision: str, cert: Any, t0: float,
              direction: tuple[Fraction, ...] | None = None, proof: IdentityProof | None = None,
              null: tuple[Any, ...] | None = None) -> Decision:
    affine = None
    if proof is not None:
        null = proof.null_vector
        affine = (proof.alpha, proof.beta)
    notes = list(run.notes)
    if verdict is Verdict.INDEPENDENT:
        sep = getattr(cert, "separation", None) or getattr(getattr(cert, "strong", None), "separation", None)
        if sep is not None and sep < ROUNDING_LEVEL:
            notes.append(
                f"the gap certificate rests on differences of relative size {sep:.1e}, at the rounding level of the "
                "data: the verdict is exact for the floats given, but they are within rounding of a configuration "
                "with repeated gaps (e.g. a translate computed in float64)"
            )
        elif run.margin is not None and run.margin < ROUNDING_LEVEL and sep is None:
            notes.append(
                f"the float64 margin {run.margin:.1e} is below rounding level: independence is certified for the exact "
                "input values and may not survive perturbations of the inputs of that relative size"
            )
    return Decision(verdict, prop, method, precision, run.margin, cert, direction, null, affine, run.n,
                    run.ms[0].dim, tuple(run.trail), time.perf_counter() - t0, run.K, tuple(notes))


def _strong_at(run: _Run, w: tuple[Fraction, ...], t0: float, prove: bool) -> Decision | None:
    """Strong independence at ``w``: a Decision when certified either way, else None."""
    ms = run.ms
    if run.method == "auto":
        if run.margin is None:  # the margin is reported even when an exact condition decides
            r53, _ = _ball_rows(ms, [w], run.K, 53, run.cache)
            if r53 and r53[0]:
                run.margin = C.float_screen(C.arb_midpoints(r53))[0]
        if all(isinstance(m, Empirical) for m in ms):
            g = gap_condition(ms, list(w))
            if g.holds:
                run.trail.append(f"gap condition ({g.side}) holds at w")
                return _decision(run, "strong", Verdict.INDEPENDENT, "gap-condition", "exact", g, t0, w)
            run.trail.append(f"gap condition at w: {g.reason}")
        v = vandermonde_condition(ms, list(w))
        if v.holds:
            run.trail.append("Vandermonde condition (Prop. 11) holds at w")
            return _decision(run, "strong", Verdict.INDEPENDENT, "vandermonde", "exact", v, t0, w)
    got = _certify_independent(run, [w])
    if got is not None:
        method, prec, cert = got
        return _decision(run, "strong", Verdict.INDEPENDENT, method, prec, cert, t0, w)
    if prove:
        proof = _prove(run, [w], w)
        if proof is not None:
            run.trail.append("identity along w proved")
            return _decision(run, "strong", Verdict.DEPENDENT, "identity", "exact", proof, t0, w, proof)
        if run.method in ("interval", "float"):
            got2 = _two_precision_null(run, [w])
            if got2 is not None:
                vec, cert = got2
                return _decision(run, "strong", Verdict.DEPENDENT, "interval", f"{cert.prec_bits[1]} bits", cert, t0, w,
                                 null=tuple(vec))
    return None


#: most directions stacked for the weak property (a unisolvent set for degree-2 forms needs d(d+1)/2)
MAX_WEAK_DIRECTIONS = 64


def _weak_direction_sets(d: int, base: list[tuple[Fraction, ...]], seed: int) -> list[list[tuple[Fraction, ...]]]:
    """Direction sets to stack for the weak property, cheapest first.

    The searched directions usually suffice: their common null space is the space of
    true relations for generic data, and an identity then proves each relation on all of
    R^d. Only if that fails, a larger set (axes plus generic directions, up to
    ``d(d+1)/2 + 2`` and at most :data:`MAX_WEAK_DIRECTIONS`) is stacked.
    """
    need = min(d * (d + 1) // 2 + 2, MAX_WEAK_DIRECTIONS)
    axes = [tuple(Fraction(int(i == k)) for i in range(d)) for k in range(d)]
    full = list(base) + [e for e in axes if e not in base]
    if len(full) < need:
        full += [v for v in candidate_directions(d, need + len(full), seed + 1) if v not in full][: need - len(full)]
    full = full[:max(need, len(base))]
    return [list(base), full] if len(full) > len(base) else [list(base)]


def decide(
    measures: Any,
    property: str = "weak",
    direction: Any = None,
    method: str = "auto",
    *,
    K: int | None = None,
    max_bits: int = 4096,
    n_directions: int = 3,
    seed: int = 0,
) -> Decision:
    r"""Decide whether the CGFs of ``measures`` are independent modulo affine functions.

    Parameters
    ----------
    measures : list of (N_i, d) arrays and/or :class:`~ntkcheck.families.Family`
        Token sets (empirical laws, weights ``1/N_i``) or closed-form families.
    property : {"weak", "strong"}
        Seed 003 Def. 6, eq. (32) or (33).
    direction : sequence of d numbers, optional
        For ``strong``: decide at this direction only (read exactly). Without it the
        engine searches ``n_directions`` generic integer directions and reports the one
        that certifies. For ``weak`` it is tried first.
    method : {"auto", "exact", "interval", "float"}
        ``exact``: rank over Q (mod-p minor); ``interval``: Arb precision ladder from 64
        bits to ``max_bits``; ``float``: float64 screen with Arb certification at 53 bits;
        ``auto``: sufficient conditions, float screen, exact, then the ladder.
    K : int, optional
        Highest Taylor order used (default ``max(6, 2n + 2)``: symmetric laws have
        vanishing odd orders, MATH.md section 6).

    Returns
    -------
    Decision
        Verdict with its certificate; ``inconclusive`` (never a guess) otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> decide([x, x + 1.0]).verdict.value     # a translate: dependent (seed 003 Ex. 6)
    'dependent'
    """
    t0 = time.perf_counter()
    if property not in _PROPERTIES:
        raise DomainError(f"property: expected one of {_PROPERTIES}, got {property!r}")
    if method not in _METHODS:
        raise DomainError(f"method: expected one of {_METHODS}, got {method!r}")
    if max_bits < 53:
        raise PrecisionError(f"max_bits={max_bits} is below double precision; use at least 53")
    ms = as_measures(measures)
    n, d = len(ms), ms[0].dim
    if K is None:
        K = _default_K(n)
    if K < 2:
        raise DomainError(f"K={K}: need at least order 2")
    for i, m in enumerate(ms):
        if not m.compact and not np.isfinite(m.mgf_radius([1] * d)):
            pass  # entire CGFs (Gaussian-type) are fine; Laplace has a finite radius and is fine too
        _ = i
    run = _Run(ms, method, K, max_bits)
    w_given = _direction(direction, d) if direction is not None else None
    dirs = [w_given] if w_given is not None else []
    dirs += [v for v in candidate_directions(d, n_directions, seed) if v not in dirs]

    if property == "strong":
        if w_given is not None:
            dec = _strong_at(run, w_given, t0, prove=True)
            if dec is not None:
                return dec
            return _inconclusive(run, "strong", t0, w_given)
        for w in dirs:
            dec = _strong_at(run, w, t0, prove=False)
            if dec is not None:
                return dec
        # no direction certified: strong dependence needs a proof for every direction
        weak_proof = None
        for wd in _weak_direction_sets(d, dirs, seed):
            weak_proof = _prove(run, wd, None)
            if weak_proof is not None:
                break
        if weak_proof is not None:
            run.trail.append("weak dependence proved: strong dependence follows (Prop. 7)")
            return _decision(run, "strong", Verdict.DEPENDENT, "identity", "exact", StrongFromWeak(weak_proof), t0,
                             None, weak_proof)
        if n >= 2 and all(m.quadratic for m in ms):
            c = _null_candidates(run, [dirs[0]])
            return _decision(run, "strong", Verdict.DEPENDENT, "structural", "exact", Structural(n), t0, dirs[0],
                             null=tuple(c[0]) if c else None)
        return _inconclusive(run, "strong", t0, None)

    # weak property: strong at one direction suffices (Prop. 7)
    for w in dirs:
        dec = _strong_at(run, w, t0, prove=False)
        if dec is not None and dec.verdict is Verdict.INDEPENDENT:
            run.trail.append("weak independence from strong independence at w (Prop. 7)")
            return _decision(run, "weak", Verdict.INDEPENDENT, dec.method, dec.precision, ViaStrong(w, dec.certificate),
                             t0, w)
    sets = _weak_direction_sets(d, dirs, seed)
    for wd in sets:
        got = _certify_independent(run, wd)
        if got is not None:
            method_used, prec, cert = got
            return _decision(run, "weak", Verdict.INDEPENDENT, method_used, prec, cert, t0, None)
        proof = _prove(run, wd, None)
        if proof is not None:
            run.trail.append(f"identity on R^d proved (null space of {len(wd)} stacked directions)")
            return _decision(run, "weak", Verdict.DEPENDENT, "identity", "exact", proof, t0, None, proof)
    wd = sets[-1]
    if method in ("interval", "float"):
        got2 = _two_precision_null(run, wd)
        if got2 is not None:
            vec, cert2 = got2
            return _decision(run, "weak", Verdict.DEPENDENT, "interval", f"{cert2.prec_bits[1]} bits", cert2, t0, None,
                             null=tuple(vec))
    return _inconclusive(run, "weak", t0, None)


def _inconclusive(run: _Run, prop: str, t0: float, w: tuple[Fraction, ...] | None) -> Decision:
    if run.method == "float":
        hint = "float64 cannot certify at this margin; use method='interval' or 'exact'"
    elif run.method == "interval":
        hint = f"raise max_bits above {run.max_bits}, or use method='exact'"
    else:
        hint = "raise K (more Taylor orders) or max_bits; for the strong property try more directions (n_directions)"
    cert = Inconclusive(run.margin, tuple(run.trail), hint)
    return _decision(run, prop, Verdict.INCONCLUSIVE, "none", "-", cert, t0, w)
