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
  (:mod:`ntkcheck.independence.identities`); for the strong property without a direction, weak
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
from fractions import Fraction
from typing import Any

import numpy as np

from .._budget import Budget, OutOfTime, current
from .._validate import rational_direction as _direction
from ..cgf import Empirical, Family, as_laws
from ..errors import DomainError, InputError, PrecisionError
from ._full_rank import _certify, _margin_at
from ._rows import (
    EXACT_NULLSPACE_MAX_N,
    _default_K,
    _default_max_order,
    _next_K,
    _nonzero_orders,
    _null_candidates,
    _primitive,
    _Run,
    _series,
    _two_precision_null,
)
from .conditions import gap_condition, vandermonde_condition
from .identities import IdentityProof, prove_dependence
from .results import (
    Decision,
    Inconclusive,
    StrongFromWeak,
    Structural,
    TruncationNullSpace,
    Verdict,
    ViaStrong,
    format_vector,
)

__all__ = [
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

#: two-precision null vectors (mpmath SVD) are computed as evidence up to this many measures
EVIDENCE_MAX_N = 16

#: largest truncation order and Arb precision accepted (one series or one inversion beyond
#: them would not return within any time budget: the budget is checked between steps)
MAX_ORDER_LIMIT = 20_000
MAX_BITS_LIMIT = 1 << 20


# ---------------------------------------------------------------------------- inputs


def as_measures(measures: Any) -> list[Family]:
    """Token sets and families as a list of :class:`~ntkcheck.cgf.base.Family` of one dimension.

    Token arrays become :class:`~ntkcheck.cgf.empirical.Empirical` laws (validated once by
    :func:`~ntkcheck.cgf.empirical.as_laws`); families, ``Empirical`` laws included, are
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
    try:
        return Empirical(m)
    except InputError as exc:
        msg = str(exc)
        raise InputError(f"sample {i}" + msg[len("atoms"):] if msg.startswith("atoms") else f"sample {i}: {msg}") from None


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


# ----------------------------------------------------------------------- the routes


def _dirs_key(dirs: Sequence[tuple[Fraction, ...]]) -> tuple[Any, ...]:
    return tuple(dirs)


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
            return _dependent_along(run, w, proof, K)
        if run.n >= 2 and all(m.quadratic for m in run.ms):
            return _structural(run, "strong", [w], w)
    return _inconclusive(run, "strong", w, [[w]])


def _dependent_along(run: _Run, w: tuple[Fraction, ...], along: IdentityProof, K: int) -> Decision:
    """An identity along the given ``w`` proves dependence on that line only. Strong independence
    (eq. 33) asks for SOME direction where the CGFs are independent, so one dependent direction
    decides nothing about it: strong dependence needs every direction, i.e. weak dependence (Prop. 7,
    contrapositive) or the structural bound. Tried here; otherwise the verdict is inconclusive,
    with the identity along ``w`` as its evidence."""
    if run.n >= 2 and all(m.quadratic for m in run.ms):
        return _structural(run, "strong", [w], w)
    for wd in _weak_direction_sets(run.ms[0].dim, [w], 0):
        proof = _prove(run, wd, K, None)
        if proof is not None:
            run.trail.append("weak dependence proved: dependent along every direction (Prop. 7)")
            return _decision(run, "strong", Verdict.DEPENDENT, "identity", "exact", StrongFromWeak(proof), w, proof,
                             K=K)
    run.trail.append("dependent along w only (no identity on R^d): strong independence is not decided by w")
    hint = ("along this w the CGFs are dependent (an exact identity, in the evidence), but strong independence asks "
            "for some direction where they are independent: decide without a direction to search others")
    cert = Inconclusive(run.margin, tuple(run.trail), hint, tuple(run.orders), tuple(run.bits), (along,))
    return _decision(run, "strong", Verdict.INCONCLUSIVE, "none", "-", cert, w)


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
    measures : list of (N_i, d) arrays and/or :class:`~ntkcheck.cgf.base.Family`
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
    n_directions, seed : int
        How many generic integer directions the search tries (``1 .. 1000``, at most the
        ``19^d - 1`` with entries in ``-9..9``) and the seed that draws them (``>= 0``).
    timeout : float or None
        Seconds the decision may take (default 60; never past the budget of an enclosing ``screen``,
        ``gram``, claim run or sweep); ``None``: no limit. Checked between
        steps (orders, precisions, directions, identity attempts, measures), and an Arb
        inversion that could not finish in the time left is not started (its cost is
        estimated first); an exhausted budget gives ``inconclusive`` with what was tried.

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
    budget = current(Budget(_check_timeout(timeout)))  # inside screen, gram, ...: never past their budget
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
    _check_search(n_directions, seed, d)
    dirs = [w_given] if w_given is not None else []
    dirs += [v for v in candidate_directions(d, n_directions, seed) if v not in dirs]
    try:
        if property == "strong":
            if w_given is not None:
                return _strong_given(run, w_given)
            return _strong_search(run, dirs, seed)
        return _weak(run, dirs, seed)
    except OutOfTime as exc:
        run.trail.append(f"time budget of {budget.seconds:.3g} s exhausted during: {exc.stage}")
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


#: most directions searched (each costs one truncation per order; 19^d - 1 integer directions exist)
MAX_DIRECTIONS = 1000


def _check_search(n_directions: Any, seed: Any, d: int) -> None:
    """``n_directions`` in ``1 .. min(MAX_DIRECTIONS, 19^d - 1)`` (any positive count in d = 1, which
    has one direction) and ``seed >= 0``, both integers."""
    top = min(MAX_DIRECTIONS, 19 ** min(d, 4) - 1)
    integer = not isinstance(n_directions, bool) and isinstance(n_directions, (int, np.integer))
    if not (integer and n_directions >= 1 and (d == 1 or n_directions <= top)):
        raise DomainError(f"n_directions: expected an integer in 1..{top} (generic integer directions with entries "
                          f"in -9..9 in d = {d}), got {n_directions!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DomainError(f"seed: expected an integer >= 0, got {seed!r}")


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
