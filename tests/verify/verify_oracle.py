"""The truth of a certificate file's claims, computed without the verifier's code.

The forgery suite asks this module whether every claim the verifier accepted is true. It reads
the JSON itself and decides each claim by other algorithms than the verifier's:

* independence: the exact rank (sympy) of truncated coefficient matrices whose entries are
  cumulants from the moment recursion ``kappa_n = mu_n - sum_k C(n-1, k-1) kappa_k mu_{n-k}``
  (the verifier takes the logarithm of the moment series instead), Bernoulli numbers for cubes;
  a full rank along one direction proves strong independence there, along several weak;
* dependence: the identity ``sum_i c_i Lambda_i = <alpha, .>`` expanded as Laurent polynomials in
  ``z_j = exp(a_j / D)`` by sympy (exponential polynomials), or summed as sympy expressions
  (closed forms); the structural case by the laws' kinds;
* Gram claims: the Gram built in mpmath at 60 digits and its eigenvalues (``mpmath.eigsy``), a
  singularity checked for the file's heads and for another draw of heads;
* matrix claims: eigenvalues of the exact symmetric part at 50 digits, ranks and quadratic forms
  in sympy rationals.

:func:`truth` answers True, False, or None (undecided: the suite counts it as a failure when the
verifier accepted the claim).
"""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb, lcm
from typing import Any

import mpmath
import numpy as np
import sympy

EXP_POLY = ("empirical", "dirac", "gaussian", "gaussian-mixture")


def _fr(v: Any) -> Fraction:
    return Fraction(v) if isinstance(v, (int, str)) else Fraction(float(v))


def _array(v: dict) -> np.ndarray:
    flat = [Fraction(s) for s in v["exact"]] if "exact" in v else [Fraction(float(x)) for x in v["data"]]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(v["shape"])


def laws_of(rec: dict) -> list[dict]:
    out = []
    for law in rec["inputs"].get("laws", []):
        k = law["kind"]
        if k == "empirical":
            X = _array(law["atoms"])
            out.append({"kind": k, "atoms": [tuple(r) for r in X.tolist()], "masses": [_fr(m) for m in law["masses"]]})
        elif k == "uniform-cube":
            out.append({"kind": k, "radius": _fr(law["radius"]), "dim": int(law["dim"])})
        else:
            out.append({"kind": k, **{key: [_fr(x) for x in v] if key in ("mean", "m", "point") else
                                      [[_fr(x) for x in r] for r in v] for key, v in law.items() if key != "kind"}})
    return out


def _dot(u, w) -> Fraction:
    return sum((Fraction(a) * Fraction(b) for a, b in zip(u, w)), Fraction(0))


def _quad(S, w) -> Fraction:
    return _dot([_dot(r, w) for r in S], w)


# -------------------------------------------------------------------------------- cumulants


def _cumulants_from_moments(mu: list[Fraction], K: int) -> list[Fraction]:
    kap = [Fraction(0)] * (K + 1)
    for n in range(1, K + 1):
        kap[n] = mu[n] - sum((comb(n - 1, k - 1) * kap[k] * mu[n - k] for k in range(1, n)), Fraction(0))
    return kap


def coefficients(law: dict, w: list[Fraction], K: int) -> list[Fraction]:
    """``[t^k] Lambda(t w)`` for ``k = 0..K``: cumulants over ``k!``."""
    k = law["kind"]
    if k in ("empirical", "dirac"):
        pts = law["atoms"] if k == "empirical" else [law["point"]]
        ms = law["masses"] if k == "empirical" else [Fraction(1)]
        z = [_dot(x, w) for x in pts]
        kap = _cumulants_from_moments([sum((m * zi**n for m, zi in zip(ms, z)), Fraction(0)) for n in range(K + 1)], K)
    elif k == "gaussian":
        kap = [Fraction(0), _dot(law["mean"], w), _quad(law["cov"], w)] + [Fraction(0)] * K
    elif k == "uniform-cube":  # log(sinh x / x) = sum_m 2^2m B_2m x^2m / (2m (2m)!)
        kap = [Fraction(0)] * (K + 1)
        for wj in w:
            s = law["radius"] * Fraction(wj)
            for m in range(1, K // 2 + 1):
                B = sympy.bernoulli(2 * m)
                kap[2 * m] += Fraction(int(B.p), int(B.q)) * 4**m * s ** (2 * m) / (2 * m)
    elif k == "laplace":  # MGF 1/(1 - s t^2/2): mu_2m = (2m)! (s/2)^m
        s = _quad(law["cov"], w)
        mu = [Fraction(sympy.factorial(n)) * (s / 2) ** (n // 2) if n % 2 == 0 else Fraction(0) for n in range(K + 1)]
        kap = _cumulants_from_moments(mu, K)
    elif k == "gaussian-mixture":
        u = _dot(law["m"], w)
        kap = _cumulants_from_moments([u**n if n % 2 == 0 else Fraction(0) for n in range(K + 1)], K)
        kap[2] += _quad(law["cov"], w)
    else:
        raise ValueError(k)
    return [kap[n] / Fraction(sympy.factorial(n)) for n in range(K + 1)]


def independent(laws: list[dict], dirs: list[list[Fraction]], K: int) -> bool:
    """Full row rank of the orders 2..K along ``dirs`` (exact, sympy): independence."""
    rows = []
    for law in laws:
        rows.append([c for w in dirs for c in coefficients(law, w, K)[2:]])
    M = sympy.Matrix([[sympy.Rational(v.numerator, v.denominator) for v in r] for r in rows])
    return M.rank() == len(laws)


# -------------------------------------------------------------------------------- identities


def _exp_poly(law: dict, w) -> tuple[list[tuple[tuple, Fraction]], Any]:
    proj = (lambda x: tuple(Fraction(v) for v in x)) if w is None else (lambda x: (_dot(x, w),))
    k = law["kind"]
    if k == "empirical":
        terms = [(proj(x), m) for x, m in zip(law["atoms"], law["masses"])]
    elif k == "dirac":
        terms = [(proj(law["point"]), Fraction(1))]
    elif k == "gaussian":
        terms = [(proj(law["mean"]), Fraction(1))]
    else:
        terms = [(proj(law["m"]), Fraction(1, 2)), (proj([-v for v in law["m"]]), Fraction(1, 2))]
    S = law.get("cov")
    quad = None if S is None else (_quad(S, w) if w is not None else sympy.Matrix(S))
    return terms, quad


def identity_holds(laws: list[dict], c: list[Fraction], alpha: list[Fraction], w) -> bool:
    """``sum_i c_i Lambda_i = <alpha, .>`` on R^d (``w`` None) or along ``t w``, exactly (sympy)."""
    L = lcm(*(v.denominator for v in c))
    k = [int(v * L) for v in c]
    aL = [a * L for a in alpha]
    if all(law["kind"] in EXP_POLY for law in laws):
        forms = [_exp_poly(law, w) for law in laws]
        D = lcm(*(f.denominator for terms, _ in forms for x, _ in terms for f in x), *(a.denominator for a in aL))
        z = sympy.symbols(f"z0:{len(aL)}")

        def mono(x):
            return sympy.Mul(*(zj ** int(xj * D) for zj, xj in zip(z, x)))
        lhs, rhs, quad = sympy.Integer(1), mono(aL), 0
        for ki, (terms, q) in zip(k, forms):
            P = sum(sympy.Rational(m.numerator, m.denominator) * mono(x) for x, m in terms)
            if ki > 0:
                lhs *= P**ki
            elif ki < 0:
                rhs *= P ** (-ki)
            if q is not None:
                quad = quad + ki * q
        quad_zero = quad == 0 if not isinstance(quad, sympy.MatrixBase) else quad.is_zero_matrix
        return bool(quad_zero) and sympy.expand(lhs - rhs) == 0
    a = sympy.symbols(f"a0:{len(alpha) if w is None else len(w)}")
    point = list(a) if w is None else [sympy.Symbol("t") * sympy.Rational(v.numerator, v.denominator) for v in w]
    expr = sum(sympy.Rational(ci.numerator, ci.denominator) * _cgf_sym(law, point) for ci, law in zip(c, laws))
    lin = sum(sympy.Rational(al.numerator, al.denominator) * x for al, x in zip(alpha, point if w is None else
                                                                                 [sympy.Symbol("t")]))
    return sympy.simplify(expr - lin) == 0


def _cgf_sym(law: dict, a: list) -> Any:
    def q(v):
        return sympy.Rational(Fraction(v).numerator, Fraction(v).denominator)
    k = law["kind"]
    if k == "uniform-cube":
        return sum(sympy.log(sympy.sinh(q(law["radius"]) * x) / (q(law["radius"]) * x)) for x in a if x != 0)
    quad = 0 if "cov" not in law else sum(q(s) * a[i] * a[j] for i, r in enumerate(law["cov"]) for j, s in enumerate(r))
    if k == "laplace":
        return -sympy.log(1 - quad / 2)
    if k == "gaussian":
        return sum(q(m) * x for m, x in zip(law["mean"], a)) + quad / 2
    if k == "dirac":
        return sum(q(m) * x for m, x in zip(law["point"], a))
    if k == "gaussian-mixture":
        return sympy.log(sympy.cosh(sum(q(m) * x for m, x in zip(law["m"], a)))) + quad / 2
    if k == "empirical":
        return sympy.log(sum(q(m) * sympy.exp(sum(q(v) * x for v, x in zip(at, a)))
                             for at, m in zip(law["atoms"], law["masses"])))
    raise ValueError(k)


# ------------------------------------------------------------------------------ Gram and matrix


def _mp(v: Fraction) -> mpmath.mpf:
    return mpmath.mpf(v.numerator) / v.denominator


def gram_lambda_min(laws: list[dict], Q: np.ndarray, b: np.ndarray, dps: int = 60) -> mpmath.mpf:
    """lambda_min of ``F F^T`` (rows ``sqrt(m/H) (phi(x; Q_h, b_h))_h``) at ``dps`` digits."""
    H, d = Q.shape[0], Q.shape[1]
    with mpmath.workdps(dps):
        rows = []
        for law in laws:
            X = [[_mp(Fraction(v)) for v in x] for x in law["atoms"]]
            ms = [_mp(m) for m in law["masses"]]
            for j, x in enumerate(X):
                feat = []
                for h in range(H):
                    q = [sum(_mp(Fraction(Q[h][r][s])) * x[s] for s in range(d)) + _mp(Fraction(b[h][r])) for r in range(d)]
                    e = [m * mpmath.exp(sum(qi * yi for qi, yi in zip(q, y))) for m, y in zip(ms, X)]
                    tot = sum(e)
                    feat += [sum(ek * y[r] for ek, y in zip(e, X)) / tot for r in range(d)]
                rows.append([v * mpmath.sqrt(ms[j] / H) for v in feat])
        F = mpmath.matrix(rows)
        return min(mpmath.eigsy(F * F.T, eigvals_only=True))  # no eigenvectors: the same values, ~4x faster


def heads_of(rec: dict) -> tuple[np.ndarray, np.ndarray]:
    h = rec["inputs"]["heads"]
    return _array(h["Q"]), _array(h["b"])


def matrix_lambda_min(A: np.ndarray) -> mpmath.mpf:
    n = A.shape[0]
    with mpmath.workdps(50):
        M = mpmath.matrix([[(_mp(Fraction(float(A[i, j]))) + _mp(Fraction(float(A[j, i])))) / 2 for j in range(n)]
                           for i in range(n)])
        return min(mpmath.eigsy(M, eigvals_only=True))


# ------------------------------------------------------------------------------------ the truth


def _dir(v) -> list[Fraction] | None:
    return None if v is None else [_fr(x) for x in v]


def _strong_direction(claim: dict, cert: dict) -> list[Fraction] | None:
    """The one direction a strong-independence statement names."""
    if claim.get("direction") is not None:
        return _dir(claim["direction"])
    if cert.get("kind") == "gap-condition":
        return _dir(cert["direction"])
    dirs = cert.get("directions") or []
    return _dir(dirs[0]) if len(dirs) == 1 else None


def _weak_directions(claim: dict, cert: dict, d: int) -> list[list[Fraction]]:
    found = [_dir(claim.get("direction")), _dir(cert.get("direction"))]
    for c in (cert, cert.get("strong") if isinstance(cert.get("strong"), dict) else {}):
        found += [_dir(w) for w in c.get("directions") or []] + [_dir(c.get("direction"))]
    axes = [[Fraction(int(i == j)) for j in range(d)] for i in range(d)]
    generic = [[Fraction((j * 7 + i * 3) % 5 + 1) for j in range(d)] for i in range(d * (d + 1) // 2)]
    out = []
    for w in found + axes + generic:
        if w is not None and len(w) == d and any(w) and w not in out:
            out.append(w)
    return out


def _dim(laws: list[dict]) -> int:
    law = laws[0]
    return {"empirical": lambda: len(law["atoms"][0]), "uniform-cube": lambda: law["dim"],
            "laplace": lambda: len(law["cov"])}.get(law["kind"], lambda: len(law.get("mean") or law.get("m")
                                                                              or law.get("point")))()


def _quadratic(laws: list[dict]) -> bool:
    return len(laws) >= 2 and all(law["kind"] in ("dirac", "gaussian") or (law["kind"] == "empirical" and
                                                                             len(law["atoms"]) == 1) for law in laws)


def _dependent(claim: dict, cert: dict, sub: list[dict]) -> bool | None:
    prop, along = claim["property"], _dir(claim.get("direction"))
    if cert["kind"] == "structural":
        return _quadratic(sub) if prop == "strong" else None
    ident = cert["identity"] if cert["kind"] == "weak-dependence" else cert
    c, alpha, w = [_fr(v) for v in ident["null_vector"]], [_fr(v) for v in ident["alpha"]], _dir(ident.get("direction"))
    if len(c) != len(sub) or not any(c) or _fr(ident.get("beta", 0)) != 0:
        return None
    if w is not None and (prop == "weak" or along is None or w != along):
        return None  # an identity along one line does not make this claim true
    return identity_holds(sub, c, alpha, w)


def _random_heads(d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(12345)
    Q = np.round(rng.standard_normal((3, d, d)) * 8) / 8
    b = np.round(rng.standard_normal((3, d)) * 8) / 8
    to = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])
    return to(Q), to(b)


#: lambda_min of a Gram, by (the inputs' JSON, the samples, which heads): mutations of a file share them
_CACHE: dict[tuple, mpmath.mpf] = {}


def _lambda_min(rec: dict, laws: list[dict], T: list[int], other_heads: bool = False) -> mpmath.mpf:
    key = (json.dumps(rec["inputs"], sort_keys=True), tuple(T), other_heads)
    if key not in _CACHE:
        Q, b = heads_of(rec)
        _CACHE[key] = gram_lambda_min([laws[i] for i in T], *(_random_heads(Q.shape[1]) if other_heads else (Q, b)))
    return _CACHE[key]


def _gram(claim: dict, rec: dict, laws: list[dict], scope: list[int]) -> bool | None:
    if claim["kind"] == "gram-lower-bound":
        lm, want = _lambda_min(rec, laws, scope), float(claim["lower_bound"])
        return True if lm > want + 1e-45 else False if lm < want - 1e-45 else None
    if claim["kind"] == "gram-equal-scores":  # singular for these heads
        lms = [_lambda_min(rec, laws, [int(claim["sample"])])]
    else:  # singular for every choice of heads: these, and another draw
        T = [scope[i] for i, v in enumerate(claim["c"]) if _fr(v) != 0]
        lms = [_lambda_min(rec, laws, T), _lambda_min(rec, laws, T, other_heads=True)]
    return True if max(lms) < 1e-40 else False if max(lms) > 1e-30 else None


def _matrix(claim: dict, rec: dict) -> bool | None:
    A = np.asarray(_array(rec["inputs"]["matrix"]), dtype=np.float64)
    n, e = A.shape[0], Fraction(float(rec["inputs"].get("abs_error", 0.0)))
    if claim["kind"] == "matrix-lower-bound":
        lm, want, r = matrix_lambda_min(A), float(claim["lower_bound"]), float(claim.get("radius") or 0.0)
        sure = lm - max(r, n * float(e))
        return True if sure > want + 1e-40 else False if lm - r < want - 1e-40 else None
    M = sympy.Matrix(n, n, lambda i, j: (sympy.Rational(Fraction(float(A[i, j]))) + sympy.Rational(
        Fraction(float(A[j, i])))) / 2)
    if claim["kind"] == "matrix-singular":
        r = sympy.Matrix(n, n, lambda i, j: sympy.Rational(Fraction(float(A[i, j])))).rank()
        return r < n and (claim.get("rank") is None or r == claim["rank"]) and e == 0
    x = sympy.Matrix([sympy.Rational(Fraction(float(v))) for v in claim["vector"]["data"]])
    return bool((x.T * M * x)[0, 0] + sympy.Rational(e) * sum(abs(v) for v in x) ** 2 < 0)


def truth(claim: dict, rec: dict) -> bool | None:
    """Whether the claim (as the verifier states it when it accepts it) is true of the file's inputs."""
    laws = laws_of(rec)
    scope = list(range(len(laws))) if claim.get("samples") is None else [int(i) for i in claim["samples"]]
    kind = claim["kind"]
    if kind.startswith("matrix-"):
        return _matrix(claim, rec)
    if kind.startswith("gram-"):
        return _gram(claim, rec, laws, scope)
    if kind != "cgf":
        return None
    sub, cert = [laws[i] for i in scope], claim["certificate"]
    if claim["verdict"] == "dependent":
        return _dependent(claim, cert, sub)
    K = 2 * len(sub) + 4
    if claim["property"] == "strong":
        w = _strong_direction(claim, cert)
        return None if w is None else independent(sub, [w], K)
    return independent(sub, _weak_directions(claim, cert, _dim(sub)), K)
