r"""The CGF claims: independence from an exact minor or the gap condition, dependence from an identity.

Independence (seed 003 Prop. 8's coefficient form): the exact Taylor coefficients
:math:`[t^k]\log E e^{t\langle w, Y_i\rangle}` of every law on the certificate's columns form a
non-singular square block (determinant modulo a prime, else over Q), or the projected atoms
satisfy the gap condition. Dependence: the identity :math:`\sum_i c_i \Lambda_i = \langle\alpha,
\cdot\rangle` re-expanded exactly, as exponential polynomials or closed-form terms; quadratic
CGFs for the structural case. Every atom enters at the exact value written in the file.

References: seed 003 Prop. 7 and 8; theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import factorial, lcm
from typing import Any

from flint import fmpq, fmpq_mat, nmod_mat

from ._common import Refuted, Unchecked, _q

#: terms an expanded exponential polynomial may have
MAX_TERMS = 200_000
PRIMES = (4611686018427387847, 4611686018427387817, 4611686018427387787)



def _log_series(g: list[Fraction], K: int) -> list[Fraction]:
    """Coefficients 0..K of log g for a series with g_0 = 1: n f_n = n g_n - sum_k k f_k g_{n-k}."""
    f = [Fraction(0)] * (K + 1)
    for n in range(1, K + 1):
        f[n] = g[n] - sum((k * f[k] * g[n - k] for k in range(1, n)), Fraction(0)) / n
    return f


def _dot(u: Sequence[Fraction], w: Sequence[Fraction]) -> Fraction:
    return sum((a * b for a, b in zip(u, w)), Fraction(0))


def _quad(S: list[list[Fraction]], w: Sequence[Fraction]) -> Fraction:
    return _dot([_dot(row, w) for row in S], w)


def taylor(law: dict[str, Any], w: Sequence[Fraction], K: int) -> list[Fraction]:
    """:math:`[t^k]\\log E e^{t\\langle w, Y\\rangle}` for ``k = 0..K``, exactly."""
    k = law["kind"]
    if k in ("empirical", "dirac"):
        pts = law["atoms"] if k == "empirical" else [law["point"]]
        ms = law["masses"] if k == "empirical" else [Fraction(1)]
        z = [_dot(x, w) for x in pts]
        g = [sum((m * zi**n for m, zi in zip(ms, z)), Fraction(0)) / factorial(n) for n in range(K + 1)]
        return _log_series(g, K)
    out = [Fraction(0)] * (K + 1)
    if k == "gaussian":
        out[1] = _dot(law["mean"], w)
        if K >= 2:
            out[2] = _quad(law["cov"], w) / 2
        return out
    if k == "uniform-cube":
        for wj in w:  # log(sinh(x)/x), x = r w_j t: sinh(x)/x = sum x^2m / (2m+1)!
            a = law["radius"] * wj
            g = [a**n / factorial(n + 1) if n % 2 == 0 else Fraction(0) for n in range(K + 1)]
            out = [o + f for o, f in zip(out, _log_series(g, K))]
        return out
    if k == "laplace":  # -log(1 - s t^2 / 2) = sum_m (s/2)^m t^2m / m
        s = _quad(law["cov"], w)
        return [(s / 2) ** (n // 2) / (n // 2) if n % 2 == 0 and n > 0 else Fraction(0) for n in range(K + 1)]
    if k == "gaussian-mixture":  # log cosh(mu t) + s t^2 / 2
        mu = _dot(law["m"], w)
        out = _log_series([mu**n / factorial(n) if n % 2 == 0 else Fraction(0) for n in range(K + 1)], K)
        if K >= 2:
            out[2] += _quad(law["cov"], w) / 2
        return out
    raise Unchecked(f"no exact series for a {k} law")


def _nonsingular(rows: list[list[Fraction]], primes: Sequence[int]) -> bool:
    """Whether the square rational matrix is non-singular: det mod a prime, else over Q."""
    for p in primes:
        try:
            red = [[(v.numerator % p) * pow(v.denominator, -1, p) % p for v in r] for r in rows]
        except ValueError:  # a denominator divisible by p
            continue
        if nmod_mat(red, p).det() != 0:
            return True
    return fmpq_mat([[fmpq(v.numerator, v.denominator) for v in r] for r in rows]).det() != 0


def _columns(cert: dict[str, Any], direction: Any) -> tuple[list[Any], list[list[Fraction]]]:
    dirs = [[_q(v) for v in w] for w in (cert.get("directions") or [])] or [[_q(v) for v in direction]]
    cols = [tuple(c) if isinstance(c, list) else (0, c) for c in cert["columns"]]
    return cols, dirs


def _block(laws: list[dict[str, Any]], cols: list[Any], dirs: list[list[Fraction]]) -> list[list[Fraction]]:
    K = max(k for _, k in cols)
    coef = {j: [taylor(law, dirs[j], K) for law in laws] for j in {j for j, _ in cols}}
    return [[coef[j][i][k] for j, k in cols] for i in range(len(laws))]


def _gap_ok(laws: list[dict[str, Any]], cert: dict[str, Any]) -> None:
    if any(law["kind"] != "empirical" for law in laws):
        raise Unchecked("the gap condition is for empirical laws")
    w = [_q(v) for v in cert["direction"]]
    top = cert["side"] == "top"
    gaps = []
    for law in laws:
        z = sorted({_dot(x, w) for x in law["atoms"]}, reverse=top)
        if len(z) < 2:
            raise Refuted("a sample has fewer than two distinct projected atoms")
        gaps.append(abs(z[0] - z[1]))
    if len(set(gaps)) != len(gaps):
        raise Refuted("two samples have the same gap: the gap condition fails")
    if [str(g) for g in gaps] != [str(_q(g)) for g in cert["gaps"]]:
        raise Refuted("the recorded gaps differ from the recomputed ones")


def _independent(laws: list[dict[str, Any]], cert: dict[str, Any], direction: Any) -> str:
    kind = cert["kind"]
    if kind == "prop7-strong-implies-weak":
        return _independent(laws, cert["strong"], cert["direction"]) + "; weak by Prop. 7"
    if kind == "gap-condition":
        _gap_ok(laws, cert)
        return "gap condition recomputed exactly"
    if kind == "vandermonde":
        m0, n = int(cert["m0"]), len(laws)
        cert = {"columns": [2 * m for m in range(m0, m0 + n)]}
    if kind not in ("exact-minor", "ball-bound", "vandermonde"):
        raise Unchecked(f"no standalone check for a {kind} certificate")
    if direction is None and not cert.get("directions"):
        raise Refuted("the certificate names no direction")
    cols, dirs = _columns(cert, direction)
    if len(cols) != len(laws):
        raise Refuted(f"the minor has {len(cols)} columns for {len(laws)} laws")
    B = _block(laws, cols, dirs)
    primes = [int(cert["prime"])] if "prime" in cert else []
    if not _nonsingular(B, [*primes, *PRIMES]):  # (a ball bound's sigma_min > 0 is this, proved exactly)
        raise Refuted("the minor is singular")
    return f"{len(cols)} x {len(cols)} minor of exact coefficients non-singular"


# ---------------------------------------------------------------------- dependence


def _exp_poly(law: dict[str, Any], w: Any) -> tuple[dict[Any, Fraction], Any]:
    """The MGF as ``P`` (frequency -> coefficient) times ``exp(quadratic)``, on R^d or along ``w``."""
    proj = (lambda x: tuple(x)) if w is None else (lambda x: (_dot(x, w),))
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
    return P, None if S is None else (_quad(S, w) if w is not None else S)


def _mul(A: dict[Any, Fraction], B: dict[Any, Fraction]) -> dict[Any, Fraction]:
    out: dict[Any, Fraction] = {}
    for a, x in A.items():
        for b, y in B.items():
            key = tuple(p + q for p, q in zip(a, b))
            out[key] = out.get(key, Fraction(0)) + x * y
    if len(out) > MAX_TERMS:
        raise Unchecked(f"the expansion exceeds {MAX_TERMS} terms")
    return {k: v for k, v in out.items() if v != 0}


def _product_identity(laws: list[dict[str, Any]], c: list[Fraction], alpha: list[Fraction], w: Any) -> None:
    L = 1
    for v in c:
        L = lcm(L, v.denominator)
    k = [int(v * L) for v in c]
    forms = [_exp_poly(law, w) for law in laws]
    dim = 1 if w is not None else len(alpha)
    left: dict[Any, Fraction] = {(Fraction(0),) * dim: Fraction(1)}
    right: dict[Any, Fraction] = {tuple(L * a for a in alpha): Fraction(1)}
    quad: list[Fraction] = []  # sum_i k_i Q_i, flattened
    for ki, (P, Q) in zip(k, forms):
        for _ in range(abs(ki)):
            left, right = (_mul(left, P), right) if ki > 0 else (left, _mul(right, P))
        if Q is not None:
            flat = [Q] if w is not None else [v for row in Q for v in row]
            quad = [a + ki * q for a, q in zip(quad or [Fraction(0)] * len(flat), flat)]
    if left != right:
        raise Refuted("the exponential polynomials of the two sides differ")
    if any(quad):
        raise Refuted("the quadratic (Gaussian) parts do not cancel")


def _terms(law: dict[str, Any], w: Any) -> tuple[dict[Any, Fraction], Any]:
    """The CGF as named closed-form functions with coefficients (on R^d, or along ``w``), and its mean."""
    k = law["kind"]
    T: dict[Any, Fraction] = {}

    def add(key: Any, v: Fraction) -> None:
        if v:
            T[key] = T.get(key, Fraction(0)) + v
    if k == "uniform-cube":  # sum_j log(sinh(r a_j) / (r a_j))
        for j in range(int(law["dim"])):
            a = law["radius"] * (1 if w is None else w[j])
            add(("sinhc", j if w is None else None, abs(a)), Fraction(1) if a else Fraction(0))
        return T, None
    if k == "laplace":  # -log(1 - a^T S a / 2)
        s = law["cov"] if w is None else _quad(law["cov"], w)
        if any(v for r in s for v in r) if w is None else s:
            add(("laplace", str(s)), Fraction(1))
        return T, None
    if k not in ("gaussian", "gaussian-mixture", "dirac"):
        raise Unchecked(f"no closed-form terms for a {k} law")
    S = law.get("cov") or []  # a^T S a / 2, or s t^2 / 2 along w
    quad = [(("q",), _quad(S, w))] if w is not None and S else [(("q", i, j), v) for i, r in enumerate(S)
                                                                 for j, v in enumerate(r)]
    for key, v in quad:
        add(key, v / 2)
    if k == "gaussian-mixture":  # log cosh <m, a>, even in m
        m = law["m"] if w is None else [_dot(law["m"], w)]
        sign = next((1 if v > 0 else -1 for v in m if v), 0)
        if sign:
            add(("logcosh", tuple(sign * v for v in m)), Fraction(1))
        return T, [Fraction(0)] * len(law["m"])
    return T, law.get("mean") or law.get("point")


def _term_identity(laws: list[dict[str, Any]], c: list[Fraction], alpha: list[Fraction], w: Any) -> None:
    total: dict[Any, Fraction] = {}
    lin = [Fraction(0)] * len(alpha)
    for ci, law in zip(c, laws):
        T, mean = _terms(law, w)
        for key, v in T.items():
            total[key] = total.get(key, Fraction(0)) + ci * v
        if mean is not None:
            m = mean if w is None else [_dot(mean, w)]
            lin = [a + ci * b for a, b in zip(lin, m)]
    if any(v != 0 for v in total.values()):
        raise Refuted("the closed-form terms do not cancel")
    if lin != list(alpha):
        raise Refuted("the linear part differs from the recorded alpha")


def _dependent(laws: list[dict[str, Any]], cert: dict[str, Any], direction: Any) -> str:
    kind = cert["kind"]
    if kind == "weak-dependence":
        return _dependent(laws, cert["identity"], None) + "; strong by Prop. 7"
    if kind == "structural":
        quad = all(law["kind"] in ("dirac", "gaussian") or (law["kind"] == "empirical" and len(law["atoms"]) == 1)
                   for law in laws)
        if not (quad and len(laws) >= 2):
            raise Refuted("not every CGF is quadratic (or fewer than two laws)")
        return "every CGF is a polynomial of degree <= 2"
    c = [_q(v) for v in cert["null_vector"]]
    alpha = [_q(v) for v in cert["alpha"]]
    if not any(c) or _q(cert.get("beta", 0)) != 0:
        raise Refuted("the null vector is zero, or beta is not 0 (every Lambda_i(0) = 0)")
    w = None if cert.get("direction") is None else [_q(v) for v in cert["direction"]]
    if kind == "product-identity":
        _product_identity(laws, c, alpha, w)
    elif kind == "term-identity":
        _term_identity(laws, c, alpha, w)
    else:
        raise Unchecked(f"no standalone check for a {kind} (sympy) identity")
    return f"{kind} re-expanded exactly"


