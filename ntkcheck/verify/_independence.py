r"""Certificates of independence, re-derived: a non-singular minor, the gap condition, Vandermonde.

A square block of exact Taylor coefficients :math:`[t^k]\Lambda_i(t w_j)` of orders
:math:`k \ge 2` is non-singular only if no :math:`c \ne 0` makes :math:`\sum_i c_i \Lambda_i`
affine along those directions: one direction proves **strong** independence there, several
directions prove **weak** independence (an affine function on :math:`\mathbb R^d` is affine on
every line; the converse fails, so several directions never prove strong). The gap condition
(seed 003 Prop. 9) and the Vandermonde condition (Prop. 11) prove strong independence at their
one direction; by Prop. 7 every certificate of strong independence also proves weak.

Every recorded number is compared with what is recomputed: the minor's determinant modulo the
recorded prime (and the prime is prime), its exact determinant, a ball bound's
:math:`\sigma_{\min}` of the scaled block, the gaps and the lambdas and their separations.

References: seed 003 Prop. 7, 9, 11; theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from ._balls import balls
from ._common import Refuted, Unchecked, _integer, _q, _vector, short
from ._exact import det_exact, det_mod, is_prime, nonsingular, reduce_mod
from ._series import block, dot, taylor

#: kinds that prove strong independence at one direction (and weak by Prop. 7)
STRONG_KINDS = ("gap-condition", "vandermonde", "exact-minor", "ball-bound")
#: largest |log2| of a ball bound's row or column scale
MAX_SCALE_LOG2 = 1 << 16


def direction(v: Any, d: int | None, what: str) -> list[Fraction]:
    """A direction: ``d`` rationals, not all zero."""
    w = _vector(v, d, what)
    if not any(w):
        raise Refuted(f"{what} is the zero vector")
    return w


def _separation_ok(recorded: Any, values: list[Fraction], scale: Fraction) -> bool:
    """A recorded separation (a float summary) against the exact one: the smallest difference of
    the sorted values relative to ``scale`` (``0.0`` accepted below float's range)."""
    if recorded is None:
        return True
    srt = sorted(values)
    sep = min((b - a for a, b in zip(srt, srt[1:])), default=srt[0] if srt else Fraction(0))
    exact = abs(sep / scale)
    got = float(_q(recorded))
    return abs(got - float(exact)) <= 1e-12 * float(exact) or (got == 0.0 and exact < Fraction(1, 2**1000))


def _gap(laws: list[dict[str, Any]], cert: dict[str, Any], w: list[Fraction]) -> str:
    """Seed 003 Prop. 9: the top (or bottom) gaps of the projected atoms, pairwise distinct."""
    if any(law["kind"] != "empirical" for law in laws):
        raise Refuted("the gap condition is about empirical laws (atoms)")
    if cert.get("holds") is not True or cert.get("side") not in ("top", "bottom"):
        raise Refuted("the certificate does not say that the gap condition holds on a side 'top' or 'bottom'")
    top = cert["side"] == "top"
    proj = [[dot(x, w) for x in law["atoms"]] for law in laws]
    gaps = []
    for i, z in enumerate(proj):
        zs = sorted(set(z), reverse=top)
        if len(zs) < 2:
            raise Refuted(f"sample {i} has fewer than two distinct projected atoms")
        gaps.append(abs(zs[0] - zs[1]))
    if _vector(cert["gaps"], len(laws), "the recorded gaps") != gaps:
        raise Refuted("the recorded gaps differ from the recomputed ones")
    if len(set(gaps)) != len(gaps):
        raise Refuted("two samples have the same gap: the gap condition fails")
    scale = max(abs(v) for z in proj for v in z) or Fraction(1)
    if not _separation_ok(cert.get("separation"), gaps, scale):
        raise Refuted("the recorded separation of the gaps differs from the recomputed one")
    return f"the {cert['side']} gaps of the projected atoms recomputed exactly and pairwise distinct (Prop. 9)"


def _vandermonde(laws: list[dict[str, Any]], cert: dict[str, Any], w: list[Fraction]) -> str:
    """Seed 003 Prop. 11: order ``2m`` coefficients ``a_m lambda_i^m`` with a common ``a_m != 0`` for
    ``m = m0 .. m0 + n - 1`` and pairwise distinct non-zero lambdas: a non-singular Vandermonde."""
    n = len(laws)
    m0 = _integer(cert["m0"], "m0", 1)
    lam = _vector(cert["lambdas"], n, "the recorded lambdas")
    if cert.get("holds") is not True:
        raise Refuted("the certificate does not say that the Vandermonde condition holds")
    if any(v == 0 for v in lam) or len(set(lam)) != n:
        raise Refuted("the lambdas are not pairwise distinct and non-zero")
    K = 2 * (m0 + n - 1)
    coef = [taylor(law, w, K) for law in laws]
    for m in range(m0, m0 + n):
        a = coef[0][2 * m] / lam[0] ** m
        if a == 0 or any(coef[i][2 * m] != a * lam[i] ** m for i in range(n)):
            raise Refuted(f"the order-{2 * m} coefficients are not a common a_m != 0 times lambda_i^{m}")
    if not _separation_ok(cert.get("separation"), lam, max(abs(v) for v in lam)):
        raise Refuted("the recorded separation of the lambdas differs from the recomputed one")
    return (f"the coefficients of orders {2 * m0}..{K} recomputed exactly: a_m lambda_i^m with the recorded "
            "lambdas, pairwise distinct and non-zero, so a Vandermonde minor is non-singular (Prop. 11)")


def _columns(cert: dict[str, Any], ndirs: int, n: int) -> list[tuple[int, int]]:
    """The minor's columns as ``(direction index, order)``; orders ``k >= 2`` only, distinct, ``n`` of them."""
    if not isinstance(cert["columns"], list):
        raise ValueError("columns must be a list")
    cols = []
    for c in cert["columns"]:
        j, k = (0, c) if not isinstance(c, list) else (c[0], c[1]) if len(c) == 2 else (None, None)
        j, k = _integer(j, "a column's direction index"), _integer(k, "a column's Taylor order")
        if k < 2:
            raise Refuted(f"a column has Taylor order {k}: only orders k >= 2 count (order 1, the mean, is "
                          "absorbed by the affine part; order 0 is log 1 = 0)")
        if not 0 <= j < ndirs:
            raise Refuted(f"a column names direction {j} of {ndirs}")
        cols.append((j, k))
    if len(cols) != n or len(set(cols)) != n:
        raise Refuted(f"the minor has {len(cols)} columns ({len(set(cols))} distinct) for {n} laws")
    K = cert.get("K")
    if K is not None and _integer(K, "K") < max(k for _, k in cols):
        raise Refuted(f"the minor uses order {max(k for _, k in cols)} beyond its truncation K = {K}")
    return cols


def _abbreviated(q: Fraction) -> str:
    """The writer's short form of a long rational: ``~1e<k> (<m>-digit numerator)``."""
    num, den = abs(q.numerator), q.denominator
    log10 = (num.bit_length() - den.bit_length()) * math.log10(2)
    return f"{'-' if q < 0 else ''}~1e{log10:.0f} ({int(num.bit_length() * 0.30103) + 1}-digit numerator)"


def _exact_minor_fields(B: list[list[Fraction]], cert: dict[str, Any]) -> str:
    """The recorded prime is prime, the determinant modulo it is the recorded non-zero residue,
    and the recorded exact determinant (when written) is the determinant."""
    p = _integer(cert["prime"], "prime", 2)
    if is_prime(p) is not True:
        raise Refuted(f"the recorded modulus {p} is not a prime this verifier can prove prime")
    red = reduce_mod(B, p)
    if red is None:
        raise Refuted(f"a coefficient has a denominator divisible by p = {p}: no determinant modulo p")
    got = det_mod(red, p)
    if got == 0 or got != _integer(cert["det_mod_p"], "det_mod_p"):
        raise Refuted(f"the determinant modulo p is {got}, the file records {cert['det_mod_p']}")
    if cert.get("det") is not None:
        det = det_exact(B)
        if cert["det"] not in (str(det), _abbreviated(det)):
            raise Refuted("the recorded exact determinant differs from the recomputed one")
    return f"det = {got} != 0 mod the prime p = {p}, hence != 0 over Q"


def _sigma(B: list[list[Fraction]], cert: dict[str, Any]) -> str:
    """A ball bound's ``sigma_min(R B C) >= s``: ``(RBC)^T (RBC) - s^2 I`` positive definite in balls."""
    n = len(B)
    cs = [_integer(v, "column_scale_log2") for v in cert["column_scale_log2"]]
    rs = [_integer(v, "row_scale_log2") for v in cert.get("row_scale_log2") or [0] * n]
    if len(cs) != n or len(rs) != n:
        raise Refuted(f"the ball bound has {len(rs)} row and {len(cs)} column scales for a {n} x {n} block")
    if max(map(abs, cs + rs)) > MAX_SCALE_LOG2:
        raise Unchecked(f"a scale 2^k with |k| > {MAX_SCALE_LOG2} is beyond what is re-derived here")
    s, L = float(cert["sigma_min_lower"]), float(cert.get("sigma_min_lower_log2", float("-inf")))
    if not (s > 0 or L > -math.inf) or s < 0 or math.isnan(L) or math.isinf(s) or L == math.inf:
        raise Refuted("the ball bound records no positive lower bound on sigma_min")
    M = [[B[i][j] * Fraction(2) ** (rs[i] + cs[j]) for j in range(n)] for i in range(n)]
    for bits in (128, 256, 512, 1024):
        with balls(bits) as Bx:
            A = [[Bx.q(v) for v in row] for row in M]
            G = Bx.matmul([list(c) for c in zip(*A)], A)
            targets = ([Bx.q(s) ** 2] if s > 0 else []) + ([Bx.exp(Bx.q(2 * L) * Bx.log(Bx.q(2)))] if L > -math.inf
                                                             else [])
            if all(Bx.pd([[G[i][j] - (t if i == j else 0) for j in range(n)] for i in range(n)]) for t in targets):
                return f"sigma_min of the scaled block >= the recorded lower bound (balls at {bits} bits)"
    raise Refuted("the recorded lower bound on sigma_min of the scaled block is not reproduced (balls to 1024 bits)")


def _minor(laws: list[dict[str, Any]], cert: dict[str, Any], dirs: list[list[Fraction]]) -> str:
    cols = _columns(cert, len(dirs), len(laws))
    B = block(laws, cols, dirs)
    orders = sorted({k for _, k in cols})
    what = f"the {len(cols)} x {len(cols)} minor of exact Taylor coefficients (orders {short(orders, 8)})"
    if cert["kind"] == "exact-minor":
        return f"{what}: {_exact_minor_fields(B, cert)}"
    if not nonsingular(B):
        raise Refuted("the minor is singular")
    return f"{what} is non-singular (det != 0 exactly); {_sigma(B, cert)}"


def _minor_directions(cert: dict[str, Any], w: list[Fraction] | None, d: int | None) -> list[list[Fraction]]:
    raw = cert.get("directions") or []
    dirs = [direction(v, d, "a direction of the minor") for v in raw]
    if not dirs:
        if w is None:
            raise Refuted("the certificate names no direction")
        dirs = [w]
    return dirs


def strong(laws: list[dict[str, Any]], cert: dict[str, Any], w: list[Fraction] | None,
           d: int | None) -> tuple[list[Fraction], str]:
    """Re-prove strong independence at one direction: ``(w, how)``. ``w`` is the direction the
    context names (the claim's, or Prop. 7's wrapper's); the certificate's must agree with it."""
    kind = cert["kind"]
    if kind == "gap-condition":
        own = direction(cert["direction"], d, "the gap condition's direction")
        if w is not None and own != w:
            raise Refuted("the gap condition's direction differs from the claim's")
        return own, _gap(laws, cert, own)
    if kind == "vandermonde":
        if w is None:
            raise Refuted("the Vandermonde certificate names no direction")
        return w, _vandermonde(laws, cert, w)
    dirs = _minor_directions(cert, w, d)
    used = sorted({j for j, _ in _columns(cert, len(dirs), len(laws))})
    if len(used) != 1:
        raise Refuted(f"a minor over {len(used)} directions proves weak independence, not strong independence "
                      "(which needs one direction)")
    if w is not None and dirs[used[0]] != w:
        raise Refuted("the minor's direction differs from the claim's")
    return dirs[used[0]], _minor(laws, cert, dirs)


def weak(laws: list[dict[str, Any]], cert: dict[str, Any], w: list[Fraction] | None, d: int | None) -> str:
    """Re-prove weak independence: a minor over one or more directions, or strong independence at a
    direction and Prop. 7 (the ``prop7-strong-implies-weak`` wrapper, or a strong certificate itself)."""
    kind = cert["kind"]
    if kind == "prop7-strong-implies-weak":
        own = direction(cert["direction"], d, "Prop. 7's direction")
        if w is not None and own != w:
            raise Refuted("Prop. 7's direction differs from the claim's")
        inner = cert["strong"]
        if not isinstance(inner, dict) or inner.get("kind") not in STRONG_KINDS:
            raise Refuted("Prop. 7 needs a certificate of strong independence inside")
        at, how = strong(laws, inner, own, d)
        return f"strong independence at w = {short(at)}: {how}; weak by Prop. 7"
    if kind in ("gap-condition", "vandermonde"):
        at, how = strong(laws, cert, w, d)
        return f"strong independence at w = {short(at)}: {how}; weak by Prop. 7"
    dirs = _minor_directions(cert, w, d)
    n_used = len({j for j, _ in _columns(cert, len(dirs), len(laws))})
    return f"{_minor(laws, cert, dirs)}, along {n_used} direction(s)"
