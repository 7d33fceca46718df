r"""The decision engine: are the CGFs linearly independent modulo affine functions?

Weak independence (seed 003 Def. 6, eq. 32): :math:`\sum_i c_i\Lambda_i \in \mathrm{Aff} \Rightarrow c = 0`.
Strong independence (eq. 33): for some direction ``w``,
:math:`\sum_i c_i\Lambda_i^w \in \mathrm{Aff}(\mathbb R) \Rightarrow c = 0`.

Coefficient form (theory/cgf-independence.md): with :math:`\Lambda_i^w(t) = \sum_k c_{ik} t^k`,
the :math:`\Lambda_i^w` are independent modulo affine functions iff the rows
:math:`(c_{ik})_{k\ge2}` are linearly independent; a truncation ``k = 2..K`` of full row
rank certifies it. A truncation never certifies dependence (distinct laws can share their
first ``K`` cumulants for any fixed ``K``), so every route raises ``K`` until its
certificate holds or the cap ``max_order`` is reached, and dependence needs an exact
proof. Every verdict carries a certificate:

* ``independent``: a square minor with determinant non-zero modulo a prime (exact), a
  rigorous Arb lower bound on its smallest singular value (interval, or float at 53
  bits), the gap condition (Prop. 9) or the Vandermonde condition (Prop. 11/12); for
  the weak property also via strong independence at one direction (Prop. 7);
* ``dependent``: an exact identity :math:`\sum_i c_i\Lambda_i = \langle\alpha, a\rangle + \beta`
  (:mod:`ntkcheck.identities`); for the strong property without a direction, weak
  dependence (Prop. 7, contrapositive) or the structural bound for quadratic CGFs;
* ``inconclusive`` otherwise, with the orders and precisions tried and the evidence
  seen (null vectors of the truncations, the float64 margin): never a guess.

``method="auto"`` runs the exact sufficient conditions, then exact rank mod p with
adaptive ``K`` (every input is rational: floats are dyadic), trying an identity for the
null vectors of each truncation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, nmod_mat

from . import _certify as C
from ._budget import Budget, OutOfTime
from ._certify import qstr
from ._validate import rational_direction as _direction
from .cgf import series_log_mgf_modp
from .conditions import gap_condition, vandermonde_condition
from .errors import DomainError, InputError, PrecisionError
from .families import Empirical, Family, as_laws
from .identities import IdentityProof, prove_dependence

__all__ = [
    "Verdict",
    "Decision",
    "Structural",
    "StrongFromWeak",
    "ViaStrong",
    "Inconclusive",
    "NullVectorEvidence",
    "VerifiedNullVector",
    "TruncationNullSpace",
    "decide",
    "as_measures",
    "DEFAULT_TIMEOUT",
]

_METHODS = ("auto", "exact", "interval", "float")

#: relative size below which a certificate is flagged as resting on rounding-level differences
ROUNDING_LEVEL = 1e-13
_PROPERTIES = ("weak", "strong")

#: seconds a decision may take by default (``timeout=None``: no limit)
DEFAULT_TIMEOUT = 60.0

#: exact null spaces (fmpq) up to this many measures; beyond, mod-p null spaces are lifted
EXACT_NULLSPACE_MAX_N = 24

#: two-precision null vectors (mpmath SVD) are computed as evidence up to this many measures
EVIDENCE_MAX_N = 16

#: largest truncation order and Arb precision accepted (one series or one inversion beyond
#: them would not return within any time budget: the budget is checked between steps)
MAX_ORDER_LIMIT = 20_000
MAX_BITS_LIMIT = 1 << 20

#: the exact route reports the float64 margin up to this many measures (beyond, the Arb
#: coefficients it needs would cost more than the certificate itself)
MARGIN_MAX_N = 32


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


# ---------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Structural:
    """Certificate of strong dependence for quadratic CGFs: along any direction the
    :math:`\\Lambda_i^w` lie in :math:`\\mathrm{span}\\{t^2\\} + \\mathrm{Aff}`, of dimension 1 < n.

    ``direction`` is the direction at which ``Decision.null_vector`` and
    ``Decision.affine`` are given (one example; the dependence holds at every ``w``).
    Exact: :attr:`~ntkcheck.families.Family.quadratic` is a property of the parameters
    (a single distinct atom, a Dirac, a Gaussian, zero covariance), read exactly.
    """

    n: int
    direction: tuple[Fraction, ...] | None = None
    kind: str = "structural"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "direction": None if self.direction is None else [qstr(v) for v in self.direction],
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
            "direction": [qstr(v) for v in self.direction],
            "statement": "strongly independent at this direction, hence weakly independent (seed 003 Prop. 7)",
            "strong": self.strong.to_dict(),
        }


@dataclass(frozen=True)
class NullVectorEvidence:
    """Evidence, not proof: a null vector of the truncated coefficient matrix at two precisions.

    The residual ``|C^T c| / |C|`` (``C`` the column-scaled truncation, orders ``2..K``)
    is at the level of each working precision and the vectors found at both agree. This
    says nothing about orders above ``K``: distinct laws can share their first ``K``
    cumulants. An exact identity would decide it (:mod:`ntkcheck.identities`).

    Attributes
    ----------
    orders : int
        ``K``: the truncation has orders ``2..K``.
    residuals : (float, float)
    prec_bits : (int, int)
    vector : tuple of float
        The null vector at the higher precision (largest entry 1 in absolute value).
    directions : tuple of tuple of Fraction
    """

    orders: int
    residuals: tuple[float, float]
    prec_bits: tuple[int, int]
    vector: tuple[float, ...] = ()
    directions: tuple[tuple[Fraction, ...], ...] = ()
    kind: str = "null-vector-two-precisions"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "orders": f"2..{self.orders}",
            "vector": list(self.vector),
            "directions": [[qstr(v) for v in w] for w in self.directions],
            "residuals": list(self.residuals),
            "prec_bits": list(self.prec_bits),
            "statement": f"evidence, not proof: residual {self.residuals[0]:.1e} at {self.prec_bits[0]} bits and "
            f"{self.residuals[1]:.1e} at {self.prec_bits[1]} bits for orders 2..{self.orders}; higher orders may differ",
        }


#: the former name (the evidence used to be reported as a dependence; it no longer is)
VerifiedNullVector = NullVectorEvidence


@dataclass(frozen=True)
class TruncationNullSpace:
    """Evidence, not proof: exact null vectors of the truncation ``2..K`` with no identity found.

    Attributes
    ----------
    K : int
    basis : tuple of tuple of Fraction
        Primitive integer vectors spanning the null space of the truncation (mod-p
        vectors lifted to rationals when ``n`` is large; at most 8 shown).
    directions : tuple of tuple of Fraction
    """

    K: int
    basis: tuple[tuple[Fraction, ...], ...]
    directions: tuple[tuple[Fraction, ...], ...]
    kind: str = "truncation-null-space"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "K": self.K,
            "basis": [[qstr(v) for v in c] for c in self.basis],
            "directions": [[qstr(v) for v in w] for w in self.directions],
            "statement": f"evidence, not proof: the truncation 2..{self.K} has {len(self.basis)} null vector(s) "
            "(shown), but no exact identity proves any combination affine; higher orders may differ",
        }


@dataclass(frozen=True)
class Inconclusive:
    """What was seen when nothing could be certified.

    Attributes
    ----------
    margin : float or None
        The float64 margin (see :class:`Decision`).
    tried : tuple of str
        Every step, in order.
    suggestion : str
        What would decide it.
    orders : tuple of int
        The truncation orders ``K`` tried.
    bits : tuple of int
        The Arb working precisions tried (interval and float routes).
    evidence : tuple
        :class:`NullVectorEvidence` and/or :class:`TruncationNullSpace` when the
        truncations had null vectors.
    timed_out : bool
        Whether the time budget ran out.
    """

    margin: float | None
    tried: tuple[str, ...]
    suggestion: str
    orders: tuple[int, ...] = ()
    bits: tuple[int, ...] = ()
    evidence: tuple[Any, ...] = ()
    timed_out: bool = False
    kind: str = "none"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "margin": self.margin,
            "tried": list(self.tried),
            "suggestion": self.suggestion,
            "orders": list(self.orders),
            "bits": list(self.bits),
            "evidence": [e.to_dict() for e in self.evidence],
            "timed_out": self.timed_out,
        }


@dataclass(frozen=True)
class Decision:
    """Result of :func:`decide`.

    Attributes
    ----------
    verdict : Verdict
    property : {"weak", "strong"}
    method : str
        What decided it: ``exact`` (mod-p minor), ``interval`` (Arb ladder), ``float``
        (Arb at 53 bits), ``gap-condition``, ``vandermonde``, ``identity``,
        ``structural``; ``none`` for ``inconclusive``.
    precision : str
        ``"exact"`` or the working precision in bits.
    margin : float or None
        Smallest relative singular value of the scaled coefficient matrix seen in the
        float64 screen (``0.0``: below float64 resolution). ``None`` when an exact
        sufficient condition decided before any numerics.
    certificate : object with ``kind`` and ``to_dict()``
    direction : tuple of Fraction or None
        The direction that certifies (strong property), or the one tested.
    null_vector : tuple of Fraction or None
        ``c`` with :math:`\\sum_i c_i\\Lambda_i` affine, when dependent (never set by
        numerical evidence: that is in the certificate of an ``inconclusive``).
    affine : (alpha, beta) or None
        :math:`\\sum_i c_i \\Lambda_i(a) = \\langle\\alpha, a\\rangle + \\beta` (along ``w``: 1-D alpha).
    n, dim : int
    trail : tuple of str
        Every step tried.
    seconds : float
    K : int
        The truncation order of the certificate (orders ``2..K``), or the highest tried.
    notes : tuple of str
    orders : tuple of int
        Every truncation order tried, in order.
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
    orders: tuple[int, ...] = ()

    def __repr__(self) -> str:
        parts = [f"Decision({self.property}: {self.verdict.value}", f"method={self.method}", f"precision={self.precision}"]
        if self.margin is not None:
            parts.append(f"margin={self.margin:.2e}")
        if self.direction is not None:
            parts.append(f"direction={format_vector(self.direction)}")
        if self.null_vector is not None:
            parts.append(f"null_vector={format_vector(self.null_vector)}")
        parts.append(f"K={self.K}")
        parts.append(f"certificate={getattr(self.certificate, 'kind', '?')})")
        return ", ".join(parts)

    @property
    def independent(self) -> bool:
        return self.verdict is Verdict.INDEPENDENT

    @property
    def dependent(self) -> bool:
        return self.verdict is Verdict.DEPENDENT

    @property
    def sentence(self) -> str:
        """The verdict as a sentence; "certified" only for certified verdicts."""
        s = self.verdict.sentence(self.property)
        if self.verdict is Verdict.INCONCLUSIVE:
            cert = self.certificate
            if getattr(cert, "timed_out", False):
                s += " The time budget ran out."
            if getattr(cert, "evidence", ()):
                s += (" The truncated coefficients have a null vector (evidence of dependence, not a proof: "
                      "no exact identity was found).")
        return s

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "property": self.property,
            "method": self.method,
            "precision": self.precision,
            "margin": self.margin,
            "certificate": self.certificate.to_dict() if hasattr(self.certificate, "to_dict") else str(self.certificate),
            "direction": None if self.direction is None else [qstr(v) for v in self.direction],
            "null_vector": None if self.null_vector is None else [qstr(v) for v in self.null_vector],
            "affine": None
            if self.affine is None
            else {"alpha": [qstr(v) for v in self.affine[0]], "beta": qstr(self.affine[1])},
            "n": self.n,
            "dim": self.dim,
            "K": self.K,
            "orders": list(self.orders),
            "trail": list(self.trail),
            "notes": list(self.notes),
            "seconds": self.seconds,
            "sentence": self.sentence,
        }


# ---------------------------------------------------------------------------- inputs


def as_measures(measures: Any) -> list[Family]:
    """Token sets and families as a list of :class:`~ntkcheck.families.Family` of one dimension.

    Token arrays become :class:`~ntkcheck.families.Empirical` laws (validated once by
    :func:`~ntkcheck.families.as_laws`); families, ``Empirical`` laws included, are
    taken as they are.
    """
    if isinstance(measures, Family):
        measures = [measures]
    if isinstance(measures, np.ndarray) and measures.dtype != object:
        if measures.ndim != 3:
            raise InputError(f"measures: expected shape (n, N, d) or a list, got shape {measures.shape}")
        measures = list(measures)
    if isinstance(measures, (str, bytes)):
        raise InputError(f"measures: expected a list of token arrays or families, got the string {measures!r}")
    try:
        items = list(measures)
    except TypeError:
        raise InputError(f"measures: expected a list of token arrays or families, got {type(measures).__name__}") from None
    if not items:
        raise InputError("measures: no measures were given (need at least one)")
    if all(isinstance(m, Empirical) or not isinstance(m, Family) for m in items):
        out: list[Family] = list(as_laws(items))  # one validation; Empirical laws pass through
    else:
        out = [m if isinstance(m, Family) else as_laws([_named(m, i)])[0] for i, m in enumerate(items)]
    dims = [m.dim for m in out]
    for i, dm in enumerate(dims):
        if dm != dims[0]:
            raise InputError(f"sample {i} has dimension {dm}, the others have {dims[0]}")
    return out


def _named(m: Any, i: int) -> Empirical:
    """Token array ``i`` of a list that also holds families, with its own index in the messages."""
    from ._validate import as_token_set

    return Empirical(as_token_set(m, name=f"sample {i}"))


def format_vector(v: Sequence[Any], head: int = 8) -> str:
    """``(v_1, ..., v_k)`` for humans: long vectors show their first entries and their length."""
    items = [qstr(x) for x in v]
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


# ------------------------------------------------------------------ truncation orders


def _default_K(n: int) -> int:
    """First truncation order: ``n + 1`` non-zero columns suffice for generic laws (the
    best-conditioned choice); symmetric laws need about ``2n`` and the ladder gets there."""
    return max(6, n + 2)


def _default_max_order(K0: int, n: int) -> int:
    return max(64, 4 * n + 8, K0)


def _next_K(K: int, shortfall: int, cap: int) -> int | None:
    """The next truncation order, or None at the cap.

    Grows by half (laws sharing cumulants up to order ``m`` need ``K > m``), and at
    least by ``2 * shortfall + 2`` when the matrix had ``shortfall`` fewer non-zero
    columns than rows (odd orders vanish for symmetric laws).
    """
    if K >= cap:
        return None
    nxt = max(K + max(2, K // 2), K + 2 * shortfall + 2)
    if nxt > cap and cap - K < max(2, K // 4):
        return None  # a last step of a few orders would add little
    return min(cap, nxt)


# ------------------------------------------------------------------ coefficient rows


_Cache = dict[tuple[Any, ...], list[Any]]


@dataclass
class _Run:
    ms: list[Family]
    method: str
    K: int
    max_bits: int
    max_order: int = 0
    budget: Budget = field(default_factory=lambda: Budget(None))
    trail: list[str] = field(default_factory=list)
    margin: float | None = None
    notes: list[str] = field(default_factory=list)
    cache: _Cache = field(default_factory=dict)
    orders: list[int] = field(default_factory=list)
    bits: list[int] = field(default_factory=list)
    tried: set[tuple[Any, ...]] = field(default_factory=set)
    null_seen: dict[tuple[Any, ...], tuple[int, list[list[Fraction]]]] = field(default_factory=dict)
    nz_seen: dict[tuple[Any, ...], int | None] = field(default_factory=dict)
    shortfall: int = 0
    precision_exhausted: bool = False

    def __post_init__(self) -> None:
        if not self.max_order:
            self.max_order = _default_max_order(self.K, self.n)

    @property
    def n(self) -> int:
        return len(self.ms)

    def note_order(self, K: int) -> None:
        if K not in self.orders:
            self.orders.append(K)

    def note_bits(self, b: int) -> None:
        if b not in self.bits:
            self.bits.append(b)


def _series(run: _Run, m: Family, w: tuple[Fraction, ...], K: int, kind: str, arg: int) -> list[Any]:
    """Taylor coefficients ``c_0..c_K`` of ``Lambda_m(t w)``: ``kind`` "exact" (fmpq), "ball" (Arb at ``arg``
    bits) or "modp" (reduced mod the prime ``arg``); memoised per decision."""
    key = (id(m), w, K, kind, arg)
    got = run.cache.get(key)
    if got is not None:
        return got
    run.budget.check(f"Taylor coefficients to order {K}")
    if kind == "exact":
        out = m.taylor_1d(list(w), K, exact=True)
    elif kind == "ball":
        out = m.taylor_1d(list(w), K, exact=False, prec=arg)
    elif isinstance(m, Empirical):
        out = series_log_mgf_modp(m.projected(w), m.exact_weights(), K, arg)
    else:
        out = m.taylor_1d_modp(list(w), K, arg)
    run.cache[key] = out
    return out


def _label(di: int, k: int, dirs: Sequence[Any]) -> Any:
    return k if len(dirs) == 1 else (di, k)


def _exact_rows(run: _Run, dirs: Sequence[tuple[Fraction, ...]], K: int) -> tuple[list[list[Any]], list[Any]]:
    """Exact rows, identically zero columns dropped."""
    labels: list[Any] = []
    rows: list[list[Any]] = [[] for _ in run.ms]
    for di, w in enumerate(dirs):
        coeffs = [_series(run, m, w, K, "exact", 0) for m in run.ms]
        for k in range(2, K + 1):
            col = [c[k] for c in coeffs]
            if any(v != 0 for v in col):
                labels.append(_label(di, k, dirs))
                for i, v in enumerate(col):
                    rows[i].append(v)
    return rows, labels


def _exact_rows_all(ms: Sequence[Family], dirs: Sequence[tuple[Fraction, ...]], K: int, cache: _Cache | None = None) -> list[list[Any]]:
    """Exact rows, every order ``2..K`` of every direction (for the exact determinant of a minor)."""
    run = _Run(list(ms), "exact", K, 53, cache=cache if cache is not None else {})
    rows: list[list[Any]] = [[] for _ in ms]
    for w in dirs:
        for i, m in enumerate(ms):
            rows[i].extend(_series(run, m, w, K, "exact", 0)[2:])
    return rows


def _modp_rows(run: _Run, dirs: Sequence[tuple[Fraction, ...]], K: int, p: int) -> tuple[list[list[int]], list[Any], int]:
    """Rows mod ``p`` (every order ``2..K``), their labels, and the number of columns that are zero mod ``p``."""
    labels: list[Any] = []
    rows: list[list[int]] = [[] for _ in run.ms]
    zero = 0
    for di, w in enumerate(dirs):
        coeffs = [_series(run, m, w, K, "modp", p) for m in run.ms]
        for k in range(2, K + 1):
            labels.append(_label(di, k, dirs))
            col = [c[k] for c in coeffs]
            zero += all(v == 0 for v in col)
            for i, v in enumerate(col):
                rows[i].append(v)
    return rows, labels, zero


def _ball_rows(run: _Run, dirs: Sequence[tuple[Fraction, ...]], K: int, prec: int) -> tuple[list[list[arb]], list[Any], int]:
    """Ball rows with the columns that are zero or unresolved dropped, and how many columns are exactly zero."""
    labels: list[Any] = []
    rows: list[list[arb]] = [[] for _ in run.ms]
    exact_zero = 0
    for di, w in enumerate(dirs):
        coeffs = [_series(run, m, w, K, "ball", prec) for m in run.ms]
        for k in range(2, K + 1):
            col = [c[k] for c in coeffs]
            if all(v.is_zero() for v in col):
                exact_zero += 1
            elif not all(v.contains(0) for v in col):
                labels.append(_label(di, k, dirs))
                for i, v in enumerate(col):
                    rows[i].append(v)
    return rows, labels, exact_zero


# ----------------------------------------------------------------------- the routes


def _dirs_key(dirs: Sequence[tuple[Fraction, ...]]) -> tuple[Any, ...]:
    return tuple(dirs)


def _screen(run: _Run, rows: list[list[arb]], scaled: C.Scaled | None = None) -> None:
    if not rows or not rows[0]:
        return
    margin, _ = C.float_screen(scaled if scaled is not None else C.scale_rows(rows))
    run.margin = margin if run.margin is None else min(run.margin, margin)


def _certify(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> tuple[str, str, Any] | None:
    """Try to certify full row rank of the truncation ``2..K`` (stacked over ``dirs``).

    Returns ``(method, precision, certificate)`` or None. Sets ``run.shortfall`` when the
    truncation has fewer non-zero columns than rows (``K`` too low, whatever the precision).
    """
    n = run.n
    run.note_order(K)
    label = f"K={K}" + (f", {len(dirs)} directions" if len(dirs) > 1 else "")
    if run.method in ("auto", "exact"):
        for p in C.PRIMES:
            try:
                rows, labels, zero = _modp_rows(run, dirs, K, p)
            except ZeroDivisionError:
                run.trail.append(f"{label}: the prime {p} divides a denominator; next prime")
                continue
            nz = len(labels) - zero
            if nz < n:
                run.shortfall = max(run.shortfall, n - nz)
                run.trail.append(f"{label}: {nz} non-zero orders for {n} measures")
                return None
            exact_rows = _exact_rows_all(run.ms, dirs, K, run.cache) if n <= 12 else None
            cert = C.modp_full_rank(rows, labels, p, exact_rows, directions=dirs, K=K)
            if cert is not None:
                return "exact", "exact", cert
            run.trail.append(f"{label}: rank mod p below {n}")
            return None
        run.trail.append(f"{label}: every prime divides a denominator; the exact route cannot run")
        return None
    # After a failed attempt, whether to raise the precision or K is chosen by the exact rank
    # mod p (a truncation of rank < n over Q cannot be certified at any precision; one of
    # rank n can, with enough bits); the certificate itself is Arb.
    unset = object()
    guide: Any = unset
    bits = 53 if run.method == "float" else _first_bits(n, run.max_bits)
    top = 53 if run.method == "float" else run.max_bits
    prev: tuple[int, float] | None = None
    first = True
    while True:
        run.budget.check(f"Arb certificate at {bits} bits, {label}")
        rows, labels, zero = _ball_rows(run, dirs, K, bits)
        nz_exact = (K - 1) * len(dirs) - zero
        if nz_exact < n:
            run.shortfall = max(run.shortfall, n - nz_exact)
            run.trail.append(f"{label}: {nz_exact} non-zero orders for {n} measures")
            return None
        run.note_bits(bits)
        est = None
        if len(labels) < n:
            run.trail.append(f"{label}, {bits} bits: orders unresolved at this precision")
        else:
            S = C.scale_rows(rows)
            if run.margin is None:
                _screen(run, rows, S)
            # at the top precision the rigorous inverse is always tried (the precheck only saves time)
            cert, est = C.ball_attempt(rows, labels, bits, directions=dirs, K=K, scaled=S, precheck=bits < top)
            if cert is not None:
                return run.method, f"{bits} bits", cert
            run.trail.append(f"{label}: Arb at {bits} bits not certified")
        if guide is unset:
            guide = _rank_guide(run, dirs, K)
            if guide is False:
                run.trail.append(f"{label}: rank mod p below {n}, no precision can certify this truncation")
                return None
        size = est if est is not None else 2.0 * bits
        if guide is None and prev is not None and size - prev[1] > (bits - prev[0]) / 2:
            # no exact guide: the block's inverse grows with the precision, it looks singular
            run.trail.append(f"{label}: the block looks singular (inverse size 2^{prev[1]:.0f} -> 2^{size:.0f})")
            return None
        prev = (bits, size)
        if bits >= top:
            break
        # the inverse is as large as the precision can show: the first step jumps by 4x
        saturated = size > bits - 16
        bits = min(top, bits * (4 if saturated and first else 2))
        first = False
    if guide is True:
        run.precision_exhausted = True  # full rank over Q, not resolved up to max_bits: more K will not help
    return None


def _first_bits(n: int, max_bits: int) -> int:
    """First Arb precision: 64 bits, or about 2 bits a measure for many measures.

    The coefficient matrices lose about one decimal digit a measure for Vandermonde-like
    families and half that for generic token sets (theory/certificates.md), so lower
    precisions are known to fail there; the ladder doubles from this start.
    """
    b = 64
    while b < 2 * n:
        b *= 2
    return min(b, max_bits)


def _rank_guide(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> bool | None:
    """Whether the truncation has full rank mod a prime (so over Q); None when no prime applies.

    Also records the shortfall of non-zero columns (odd orders of symmetric laws).
    """
    n = run.n
    for p in C.PRIMES:
        try:
            rows, labels, zero = _modp_rows(run, dirs, K, p)
        except ZeroDivisionError:
            continue
        if len(labels) - zero < n:
            run.shortfall = max(run.shortfall, n - (len(labels) - zero))
            return False
        M = nmod_mat(n, len(labels), [v for r in rows for v in r], p)
        return M.rank() == n
    return None


def _margin_at(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> None:
    """The float64 margin of the truncation (informative only; skipped when time is short)."""
    if run.margin is not None or run.n > MARGIN_MAX_N or run.budget.remaining() < 1.0:
        return
    try:
        rows, _, _ = _ball_rows(run, dirs, K, 53)
        _screen(run, rows)
    except OutOfTime:
        return


def _conditions(run: _Run, w: tuple[Fraction, ...]) -> tuple[str, Any] | None:
    """The exact sufficient conditions at ``w`` (``method="auto"`` only)."""
    ms = run.ms
    run.budget.check("sufficient conditions")
    if all(isinstance(m, Empirical) for m in ms):
        g = gap_condition(ms, list(w))
        if g.holds:
            run.trail.append(f"gap condition ({g.side}) holds at w = {format_vector(w)}")
            return "gap-condition", g
        run.trail.append(f"gap condition at w = {format_vector(w)}: {g.reason}")
    v = vandermonde_condition(ms, list(w))
    if v.holds:
        run.trail.append(f"Vandermonde condition (Prop. 11) holds at w = {format_vector(w)}")
        return "vandermonde", v
    return None


# ------------------------------------------------------------------ null vectors


def _primitive(c: Sequence[Fraction]) -> list[Fraction]:
    """``c`` scaled to integers with gcd 1 and a positive first non-zero entry (reads best)."""
    den = 1
    for v in c:
        den = math.lcm(den, v.denominator)
    ints = [int(v * den) for v in c]
    g = 0
    for v in ints:
        g = math.gcd(g, v)
    g = g or 1
    first = next((v for v in ints if v), 1)
    s = -1 if first < 0 else 1
    return [Fraction(s * v // g) for v in ints]


def _ratrec(u: int, p: int) -> Fraction | None:
    """The rational ``a/b`` with ``a = u b mod p`` and ``|a|, b < sqrt(p/2)``, if any (Wang's reconstruction)."""
    bound = math.isqrt(p // 2)
    r0, r1, s0, s1 = p, u % p, 0, 1
    while r1 > bound:
        q = r0 // r1
        r0, r1, s0, s1 = r1, r0 - q * r1, s1, s0 - q * s1
    if s1 == 0 or abs(s1) > bound:
        return None
    f = Fraction(r1, s1)
    return f if (f.numerator - u * f.denominator) % p == 0 else None


def _modp_nullspace(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> list[list[Fraction]] | None:
    """Null vectors mod p of the truncation, lifted to small rationals (None if none lift)."""
    for p in C.PRIMES:
        try:
            rows, _, _ = _modp_rows(run, dirs, K, p)
        except ZeroDivisionError:
            continue
        n, m = run.n, len(rows[0])
        M = nmod_mat(m, n, [rows[i][j] for j in range(m) for i in range(n)], p)  # C^T: c is a right null vector
        X, nullity = M.nullspace()
        if nullity == 0:
            return []
        basis = nmod_mat(nullity, n, [int(X[i, j]) for j in range(nullity) for i in range(n)], p)
        R, _ = basis.rref()
        out = []
        for j in range(nullity):
            vec = [_ratrec(int(R[j, i]), p) for i in range(n)]
            if all(v is not None for v in vec):
                out.append(_primitive([v for v in vec if v is not None]))
        return out
    return None


def _float_nullspace(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> list[list[Fraction]]:
    rows, _, _ = _ball_rows(run, dirs, K, 53)
    if not rows or not rows[0]:
        return [[Fraction(int(i == k)) for i in range(run.n)] for k in range(run.n)]
    A = C.scale_rows(rows).A
    _, s, vt = np.linalg.svd(A.T)
    cands = []
    for k in range(len(s) - 1, -1, -1):
        if s[k] > 1e-8 * s[0]:
            break
        v = vt[k]
        v = v / v[np.argmax(np.abs(v))]
        cands.append([Fraction(float(x)).limit_denominator(10_000) for x in v])
    return cands


def _null_candidates(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> list[list[Fraction]]:
    """Rational candidates for ``c``: the exact null space of the truncation when affordable, else the
    mod-p null space lifted to small rationals, else rationalised float SVD vectors."""
    run.budget.check(f"null space of the truncation K={K}")
    if run.n <= EXACT_NULLSPACE_MAX_N:
        rows, _ = _exact_rows(run, dirs, K)
        if not rows or not rows[0]:
            return [[Fraction(int(i == k)) for i in range(run.n)] for k in range(run.n)]
        return [_primitive(b) for b in C.exact_nullspace(rows)]
    lifted = _modp_nullspace(run, dirs, K)
    if lifted is not None:
        return lifted
    return _float_nullspace(run, dirs, K)


def _prove(run: _Run, dirs: list[tuple[Fraction, ...]], K: int, w: tuple[Fraction, ...] | None) -> IdentityProof | None:
    """Try to prove an identity for the null vectors of the truncation ``2..K`` (each candidate once).

    For many measures, a truncation with fewer non-zero orders than measures (odd orders
    of symmetric laws) has a large null space of no meaning: the attempt waits for a
    ``K`` at which the number of non-zero orders stops growing (or the cap).
    """
    key = _dirs_key(dirs)
    if run.n > EXACT_NULLSPACE_MAX_N:
        nz = _nonzero_orders(run, dirs, K)
        prev = run.nz_seen.get(key)
        run.nz_seen[key] = nz
        if nz is not None and nz < run.n and (prev is None or nz > prev) and K < run.max_order:
            run.trail.append(f"K={K}: {nz} non-zero orders for {run.n} measures; identity attempt deferred")
            return None
    cands = _null_candidates(run, dirs, K)
    run.null_seen[_dirs_key(dirs)] = (K, cands)
    for c in cands:
        if all(v == 0 for v in c):
            continue
        key = (tuple(c), w)
        if key in run.tried:
            continue
        run.tried.add(key)
        run.budget.check("identity attempts")
        p = prove_dependence(run.ms, c, w, budget=run.budget)
        if p is not None:
            return p
        run.trail.append(f"K={K}: no exact identity for c = {format_vector(c)}")
    return None


def _nonzero_orders(run: _Run, dirs: list[tuple[Fraction, ...]], K: int) -> int | None:
    for p in C.PRIMES:
        try:
            _, labels, zero = _modp_rows(run, dirs, K, p)
        except ZeroDivisionError:
            continue
        return len(labels) - zero
    return None


def _arb_mid_mpf(v: arb) -> Any:
    """The midpoint of a ball as an mpmath number, exactly (it is a dyadic rational)."""
    import mpmath

    man, exp = v.mid().man_exp()
    return mpmath.ldexp(mpmath.mpf(int(man)), int(exp))


def _two_precision_null(run: _Run, dirs: list[tuple[Fraction, ...]], bits: int = 128, K: int | None = None) -> tuple[list[float], NullVectorEvidence] | None:
    """Evidence of a null vector: the smallest singular vector of the scaled truncation at two precisions."""
    import mpmath

    K = run.K if K is None else K
    if run.n > 40:
        return None
    vecs, res = [], []
    for prec in (bits, 2 * bits):
        run.budget.check(f"null-vector evidence at {prec} bits")
        rows, _, _ = _ball_rows(run, dirs, K, prec)
        if not rows or not rows[0] or len(rows[0]) < 1:
            return None
        with mpmath.workprec(prec):
            A = mpmath.matrix([[_arb_mid_mpf(v) for v in r] for r in rows])
            for j in range(A.cols):
                colmax = max(abs(A[i, j]) for i in range(A.rows))
                if colmax:
                    for i in range(A.rows):
                        A[i, j] = A[i, j] / colmax
            U, S, V = mpmath.svd_r(A.T)
            c = [V[V.rows - 1, i] for i in range(V.cols)]
            r = mpmath.norm(A.T * mpmath.matrix(c)) / mpmath.norm(A)
            big = max(abs(x) for x in c)
            vecs.append([float(x / big) for x in c])
            res.append(float(r))
    v1, v2 = np.array(vecs[0]), np.array(vecs[1])
    v2 = v2 * (np.sign(v1 @ v2) or 1.0)
    if res[0] < 2.0 ** (-bits + 20) and res[1] < 2.0 ** (-2 * bits + 20) and np.allclose(v1, v2, atol=1e-12):
        vec = [float(x) for x in v2]
        return vec, NullVectorEvidence(K, (res[0], res[1]), (bits, 2 * bits), tuple(vec), tuple(dirs))
    return None


# ----------------------------------------------------------------------- the engine


def _decision(run: _Run, prop: str, verdict: Verdict, method: str, precision: str, cert: Any,
              direction: tuple[Fraction, ...] | None = None, proof: IdentityProof | None = None,
              null: tuple[Any, ...] | None = None, affine: tuple[tuple[Any, ...], Any] | None = None,
              K: int | None = None) -> Decision:
    if proof is not None:
        null = proof.null_vector
        affine = (proof.alpha, proof.beta)
    notes = list(run.notes)
    if verdict is Verdict.INDEPENDENT:
        inner = getattr(cert, "strong", cert)
        sep = getattr(inner, "separation", None)
        if sep is not None and sep < ROUNDING_LEVEL:
            what = "gaps" if inner.kind == "gap-condition" else "lambdas"
            size = f"{sep:.1e}" if sep > 0 else "below 1e-300"
            notes.append(
                f"the {inner.kind} certificate rests on differences of relative size {size} between the {what}, "
                "at or below the rounding level of float64 data: the verdict is exact for the values given, but they "
                "are within rounding of a configuration with repeated values (e.g. a translate computed in float64)"
            )
        elif run.margin is not None and run.margin < ROUNDING_LEVEL and sep is None:
            notes.append(
                f"the float64 margin {run.margin:.1e} is below rounding level: independence is certified for the exact "
                "input values and may not survive perturbations of the inputs of that relative size"
            )
    Kc = getattr(getattr(cert, "strong", cert), "K", 0) or K or (run.orders[-1] if run.orders else run.K)
    return Decision(verdict, prop, method, precision, run.margin, cert, direction, null, affine, run.n,
                    run.ms[0].dim, tuple(run.trail), time.perf_counter() - run.budget.start, Kc, tuple(notes),
                    tuple(run.orders))


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


def _ladder_K(run: _Run) -> Iterator[int]:
    """The truncation orders from ``run.K`` to the cap; each next one depends on the shortfall seen."""
    K: int | None = run.K
    while K is not None:
        run.shortfall = 0
        yield K
        if run.precision_exhausted:
            run.trail.append(f"K={K}: full rank over Q but not certified up to {max(run.bits, default=53)} bits; not raising K")
            return
        K = _next_K(K, run.shortfall, run.max_order)


def _structural(run: _Run, prop: str, dirs: list[tuple[Fraction, ...]], w_given: tuple[Fraction, ...] | None) -> Decision:
    """Strong dependence of quadratic CGFs (n >= 2): an identity if one is found, else the structural bound."""
    w = w_given if w_given is not None else dirs[0]
    K = 2
    coef = [_series(run, m, w, K, "exact", 0)[2] for m in run.ms]  # the t^2 coefficients s_i / 2
    # c_i coef_j - c_j coef_i = 0: a null vector of the single non-affine column
    i = next((k for k, v in enumerate(coef) if v != 0), 0)
    j = 1 if i == 0 else 0
    c = [Fraction(0)] * run.n
    c[i] = Fraction(int(coef[j].p), int(coef[j].q))
    c[j] = -Fraction(int(coef[i].p), int(coef[i].q))
    if all(v == 0 for v in c):
        c[i] = Fraction(1)
    c = _primitive(c)
    alpha = Fraction(0)
    for ci, m in zip(c, run.ms):
        if ci:
            t1 = _series(run, m, w, K, "exact", 0)[1]
            alpha += ci * Fraction(int(t1.p), int(t1.q))
    run.trail.append("every CGF is quadratic: dependent along every direction (structural)")
    return _decision(run, prop, Verdict.DEPENDENT, "structural", "exact", Structural(run.n, w), w, None,
                     tuple(c), ((alpha,), Fraction(0)), K=K)


def _strong_given(run: _Run, w: tuple[Fraction, ...]) -> Decision:
    if run.method == "auto":
        got = _conditions(run, w)
        if got is not None:
            return _decision(run, "strong", Verdict.INDEPENDENT, got[0], "exact", got[1], w)
    for K in _ladder_K(run):
        got2 = _certify(run, [w], K)
        if got2 is not None:
            method, prec, cert = got2
            if method == "exact":
                _margin_at(run, [w], K)
            return _decision(run, "strong", Verdict.INDEPENDENT, method, prec, cert, w)
        proof = _prove(run, [w], K, w)
        if proof is not None:
            run.trail.append(f"identity along w proved (null vector of the truncation K={K})")
            return _decision(run, "strong", Verdict.DEPENDENT, "identity", "exact", proof, w, proof, K=K)
        if run.n >= 2 and all(m.quadratic for m in run.ms):
            return _structural(run, "strong", [w], w)
    return _inconclusive(run, "strong", w, [[w]])


def _strong_search(run: _Run, dirs: list[tuple[Fraction, ...]], seed: int) -> Decision:
    d = run.ms[0].dim
    if run.method == "auto":
        for w in dirs:
            got = _conditions(run, w)
            if got is not None:
                return _decision(run, "strong", Verdict.INDEPENDENT, got[0], "exact", got[1], w)
    sets = _weak_direction_sets(d, dirs, seed)
    quadratic = run.n >= 2 and all(m.quadratic for m in run.ms)
    for K in _ladder_K(run):
        if not quadratic:
            for w in dirs:
                got = _certify(run, [w], K)
                if got is not None:
                    method, prec, cert = got
                    if method == "exact":
                        _margin_at(run, [w], K)
                    return _decision(run, "strong", Verdict.INDEPENDENT, method, prec, cert, w)
        # no direction certified: strong dependence needs a proof for every direction
        for wd in sets:
            proof = _prove(run, wd, K, None)
            if proof is not None:
                run.trail.append("weak dependence proved: strong dependence follows (Prop. 7)")
                return _decision(run, "strong", Verdict.DEPENDENT, "identity", "exact", StrongFromWeak(proof),
                                 None, proof, K=K)
        if quadratic:
            return _structural(run, "strong", dirs, None)
    return _inconclusive(run, "strong", None, [[dirs[0]]] + sets)


def _weak(run: _Run, dirs: list[tuple[Fraction, ...]], seed: int) -> Decision:
    d = run.ms[0].dim
    if run.method == "auto":
        for w in dirs:
            got = _conditions(run, w)
            if got is not None:
                run.trail.append("weak independence from strong independence at w (Prop. 7)")
                return _decision(run, "weak", Verdict.INDEPENDENT, got[0], "exact", ViaStrong(w, got[1]), w)
    sets = _weak_direction_sets(d, dirs, seed)
    for K in _ladder_K(run):
        for w in dirs:
            got = _certify(run, [w], K)
            if got is not None:
                method, prec, cert = got
                if method == "exact":
                    _margin_at(run, [w], K)
                run.trail.append("weak independence from strong independence at w (Prop. 7)")
                return _decision(run, "weak", Verdict.INDEPENDENT, method, prec, ViaStrong(w, cert), w)
        for wd in sets:
            if len(wd) > 1:
                got = _certify(run, wd, K)
                if got is not None:
                    method, prec, cert = got
                    return _decision(run, "weak", Verdict.INDEPENDENT, method, prec, cert, None)
            proof = _prove(run, wd, K, None)
            if proof is not None:
                run.trail.append(f"identity on R^d proved (null space of {len(wd)} stacked directions, K={K})")
                return _decision(run, "weak", Verdict.DEPENDENT, "identity", "exact", proof, None, proof, K=K)
    return _inconclusive(run, "weak", None, sets)


def decide(
    measures: Any,
    property: str = "weak",
    direction: Any = None,
    method: str = "auto",
    *,
    K: int | None = None,
    max_order: int | None = None,
    max_bits: int = 4096,
    n_directions: int = 3,
    seed: int = 0,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> Decision:
    r"""Decide whether the CGFs of ``measures`` are independent modulo affine functions.

    With :math:`\Lambda_i^w(t) = \sum_k c_{ik} t^k`, :math:`c_{ik} = \kappa_k(\langle w, Y_i\rangle)/k!`,
    independence at ``w`` is full row rank of :math:`(c_{ik})_{i \le n,\, k \ge 2}`; a
    truncation ``k = 2..K`` of rank ``n`` certifies it, and the engine raises ``K`` until
    one does (seed 003 Def. 6, Prop. 7, 9, 11; theory/certificates.md).

    Parameters
    ----------
    measures : list of (N_i, d) arrays and/or :class:`~ntkcheck.families.Family`
        Token sets (empirical laws, weights ``1/N_i``, repeated tokens merged) or
        closed-form families.
    property : {"weak", "strong"}
        Seed 003 Def. 6, eq. (32) or (33).
    direction : sequence of d numbers, optional
        For ``strong``: decide at this direction only (read exactly). Without it the
        engine searches ``n_directions`` generic integer directions and reports the one
        that certifies. For ``weak`` it is tried first.
    method : {"auto", "exact", "interval", "float"}
        ``exact``: rank over Q (mod-p minor); ``interval``: Arb precision ladder from 64
        bits to ``max_bits``; ``float``: Arb certification at 53 bits; ``auto``: the
        exact sufficient conditions, then ``exact``. Every route proves dependence only
        by an exact identity.
    K : int, optional
        First truncation order (default ``max(6, n + 2)``).
    max_order : int, optional
        Highest truncation order the ladder may reach (default ``max(64, 4n + 8)``).
    max_bits : int
        Highest Arb working precision (interval route).
    timeout : float or None
        Seconds the decision may take (default 60); ``None``: no limit. Checked between
        steps (orders, precisions, directions, identity attempts, measures); an
        exhausted budget gives ``inconclusive`` with what was tried.

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
    budget = Budget(_check_timeout(timeout))
    if property not in _PROPERTIES:
        raise DomainError(f"property: expected one of {_PROPERTIES}, got {property!r}")
    if method not in _METHODS:
        raise DomainError(f"method: expected one of {_METHODS}, got {method!r}")
    if isinstance(max_bits, bool) or not isinstance(max_bits, (int, np.integer)):
        raise PrecisionError(f"max_bits: expected an integer number of bits, got {max_bits!r}")
    if max_bits < 53:
        raise PrecisionError(f"max_bits={max_bits} is below double precision; use at least 53")
    if max_bits > MAX_BITS_LIMIT:
        raise PrecisionError(f"max_bits={max_bits} is beyond {MAX_BITS_LIMIT} bits; one Arb step there would not "
                             "return within any time budget")
    ms = as_measures(measures)
    n, d = len(ms), ms[0].dim
    K0 = _default_K(n) if K is None else _check_order(K, "K")
    cap = _default_max_order(K0, n) if max_order is None else _check_order(max_order, "max_order")
    if cap < K0:
        raise DomainError(f"max_order={cap} is below the first truncation order K={K0}")
    run = _Run(ms, method, K0, int(max_bits), cap, budget)
    w_given = _direction(direction, d) if direction is not None else None
    dirs = [w_given] if w_given is not None else []
    dirs += [v for v in candidate_directions(d, n_directions, seed) if v not in dirs]
    try:
        if property == "strong":
            if w_given is not None:
                return _strong_given(run, w_given)
            return _strong_search(run, dirs, seed)
        return _weak(run, dirs, seed)
    except OutOfTime as exc:
        run.trail.append(f"time budget of {timeout:g} s exhausted during: {exc.stage}")
        w = w_given if property == "strong" else None
        return _inconclusive(run, property, w, [], timed_out=True)


def _check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)):
        raise DomainError(f"timeout: expected a number of seconds or None, got {timeout!r}")
    t = float(timeout)
    if not (t > 0) or not math.isfinite(t):
        raise DomainError(f"timeout: expected a positive finite number of seconds or None, got {timeout!r}")
    return t


def _check_order(K: Any, name: str) -> int:
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)):
        raise DomainError(f"{name}: expected an integer truncation order, got {K!r}")
    if K < 2:
        raise DomainError(f"{name}={K}: need at least order 2")
    if K > MAX_ORDER_LIMIT:
        raise DomainError(f"{name}={K}: truncation orders above {MAX_ORDER_LIMIT} are not supported")
    return int(K)


def _evidence(run: _Run, sets: list[list[tuple[Fraction, ...]]]) -> tuple[Any, ...]:
    """What the truncations showed: their exact null vectors (no identity found for them) and,
    on the numerical routes, a null vector of the last truncation at two precisions."""
    out: list[Any] = []
    for wd in sets:
        seen = run.null_seen.get(_dirs_key(wd))
        if seen is not None and seen[1]:
            K, basis = seen
            out.append(TruncationNullSpace(K, tuple(tuple(c) for c in basis[:8]), tuple(wd)))
    if run.method in ("interval", "float") and sets and run.n <= EVIDENCE_MAX_N:
        wd = sets[0]
        K = max(run.orders) if run.orders else run.K
        try:
            got = _two_precision_null(run, wd, 64 if run.method == "float" else 128, K)
        except OutOfTime:
            got = None
        if got is not None:
            out.insert(0, got[1])
    return tuple(out)


def _inconclusive(run: _Run, prop: str, w: tuple[Fraction, ...] | None, sets: list[list[tuple[Fraction, ...]]],
                  timed_out: bool = False) -> Decision:
    evidence = () if timed_out else _evidence(run, sets)
    if timed_out:
        hint = (f"the time budget ran out (orders tried: {run.orders}); raise timeout, or lower max_order / "
                "max_bits to fail faster")
    elif run.precision_exhausted:
        top = max(run.bits, default=53)
        more = "method='interval' (more bits)" if run.method == "float" else f"max_bits above {run.max_bits}"
        hint = (f"the truncation has full rank over Q (exact rank mod p) but the Arb balls at {top} bits do not "
                f"resolve it: method='exact' or {more} would certify independence")
    elif evidence:
        hint = (f"the truncations up to order {max(run.orders) if run.orders else run.K} have null vectors but no "
                "exact identity was found: only an exact identity (product identity for token sets, a symbolic "
                "proof for closed forms) can prove dependence; more orders (max_order) or bits can only certify "
                "independence")
    elif run.method == "float":
        hint = "float64 cannot certify at this margin; use method='interval' or 'exact'"
    elif run.method == "interval":
        hint = f"raise max_bits above {run.max_bits} or max_order above {run.max_order}, or use method='exact'"
    else:
        hint = (f"raise max_order above {run.max_order} (more Taylor orders); for the strong property try more "
                "directions (n_directions)")
    cert = Inconclusive(run.margin, tuple(run.trail), hint, tuple(run.orders), tuple(run.bits), evidence, timed_out)
    return _decision(run, prop, Verdict.INCONCLUSIVE, "none", "-", cert, w)

