r"""Certifying full row rank of one truncation ``2..K``: exact rank mod p, the Arb precision ladder.

A truncation of rank ``n`` certifies independence at its directions (seed 003 Def. 6;
theory/certificates.md): a minor with determinant non-zero modulo a prime (exact) or a
rigorous Arb bound on its smallest singular value (interval, float at 53 bits); the
float64 margin is recorded on the way. Private to :mod:`ntkcheck.independence`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from flint import arb, nmod_mat

from .._budget import OutOfTime
from .._memory import available_memory, format_bytes, require_memory
from . import rank as C
from ._rows import _ball_rows, _exact_rows_all, _modp_rows, _Run

#: the exact route reports the float64 margin up to this many measures (beyond, the Arb
#: coefficients it needs would cost more than the certificate itself)
MARGIN_MAX_N = 32


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
    predicted = False  # the precision was chosen from the approximate inverse's size (rank.bits_for)
    while True:
        run.budget.check(f"Arb certificate at {bits} bits, {label}")
        if not _rows_fit(run, dirs, K, bits, first=not run.bits):  # refused before any Arb step, else stop
            return None
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
            # at the top precision, and at a precision predicted from the last estimate, the rigorous
            # inverse is tried at once (the precheck only saves time)
            cert, est = C.ball_attempt(rows, labels, bits, directions=dirs, K=K, scaled=S,
                                       precheck=bits < top and not predicted, budget=run.budget)
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
        # the approximate inverse is as large as the entries' accuracy can show: its size says only
        # "more", double; else it predicts the precision that certifies (rank.bits_for)
        saturated = size > bits - C.SERIES_LOSS
        predicted = not saturated
        bits = min(top, bits * 2 if saturated else max(bits + 64, C.bits_for(size, n)))
    if guide is True:
        run.precision_exhausted = True  # full rank over Q, not resolved up to max_bits: more K will not help
    return None


#: bytes of one Arb ball beyond its midpoint's bits (the arb_t, the Python object, its list slot)
BALL_OVERHEAD = 120


def _rows_fit(run: _Run, dirs: list[tuple[Fraction, ...]], K: int, bits: int, *, first: bool) -> bool:
    """Whether the ``n x (K - 1)`` ball coefficients at ``bits`` fit in the available memory.

    Before any Arb step of the decision this is a refusal (:class:`~ntkcheck._memory.MemoryLimitError`:
    lower the number of samples, or use the exact route); later it ends the ladder with a note.
    """
    need = run.n * (K - 1) * len(dirs) * (bits // 8 + BALL_OVERHEAD)
    if need <= available_memory():
        return True
    if first:
        require_memory(need, f"the Arb coefficients of {run.n} measures to order {K} at {bits} bits",
                       "the number of samples, or use method='exact'")
    run.trail.append(f"K={K}: {bits} bits would need about {format_bytes(need)} of memory, more than available; "
                     "not tried")
    return False


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
