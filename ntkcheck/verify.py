r"""Re-check an ntkcheck certificate file, with numpy, mpmath and python-flint only.

``ntkcheck decide | gram | screen | certify ... --certificate-out FILE.json`` writes the inputs
of each claim (token laws with exact masses, heads, a matrix and its error bound) and what its
proof used. This module re-derives every claim from those inputs with its own code: it imports
nothing of the package and runs on its own (``python verify.py FILE.json``, or
``python -m ntkcheck.verify FILE.json``).

Exit status: 0 every claim re-proved; 1 a claim or its recorded proof fails, or the inputs do not
match their recorded digest (a tampered file); 3 a claim could not be re-checked here (too large,
a sympy identity, nothing certified), none refuted; 2 the file is unreadable.

How each claim is re-proved: theory/certificates.md, "Re-checkable certificates".

References: S. M. Rump, "Verification of positive definiteness", BIT 46 (2006) 433-452;
N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm. 10.3.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import textwrap
import threading
from collections.abc import Sequence
from fractions import Fraction
from math import factorial, lcm
from pathlib import Path
from typing import Any

import numpy as np
from flint import arb, arb_mat, ctx, fmpq, fmpq_mat, fmpz_mat, nmod_mat

__all__ = ["verify_file", "verify_record", "FORMAT", "digest"]

FORMAT = "ntkcheck-certificate/1"
U = 2.0**-53
#: distinct atoms (or matrix rows) up to which the ball LDL^T route is run
MAX_BALL_ROWS = 256
#: ball operations the Arb enclosure of F may cost: H sum_i (N_i d^2 + N_i^2 (d + 1)) (about 10 s here)
MAX_ARB_OPS = 50_000_000
#: terms an expanded exponential polynomial may have
MAX_TERMS = 200_000
PRIMES = (4611686018427387847, 4611686018427387817, 4611686018427387787)
_SAFE = 1.0 + 1e-10

#: FLINT's precision is process-global: held with the package's lock when it is loaded here
_OWN_LOCK = threading.RLock()


@contextlib.contextmanager
def _workprec(bits: int) -> Any:
    """One FLINT precision region under ``ntkcheck._precision.PRECISION_LOCK`` when the package is
    loaded in this process (looked up in ``sys.modules``, never imported), else this module's lock."""
    pkg = sys.modules.get("ntkcheck._precision")
    with (_OWN_LOCK if pkg is None else pkg.PRECISION_LOCK), ctx.workprec(bits):
        yield


class Refuted(Exception):
    """The claim does not hold, or its proof does not."""


class Unchecked(Exception):
    """The claim could not be re-checked here."""


# ------------------------------------------------------------------------------ reading


def digest(inputs: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the inputs: their canonical JSON, then each array's name, dtype, shape and bytes."""
    h = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _arrays(rec: dict[str, Any], base: Path) -> dict[str, np.ndarray]:
    if not rec.get("arrays"):
        return {}
    with np.load(base / rec["arrays"], allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _array(v: Any, arrays: dict[str, np.ndarray]) -> np.ndarray:
    if isinstance(v, dict) and "npz" in v:
        return np.asarray(arrays[v["npz"]], dtype=np.float64)
    return np.asarray(v["data"], dtype=np.float64).reshape(v["shape"])


def _q(v: Any) -> Fraction:
    return Fraction(v) if isinstance(v, (int, str)) else Fraction(float(v))


def _laws(inputs: dict[str, Any], arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Every law as ``{"kind", ...}`` with exact rationals (atoms of floats read exactly)."""
    out = []
    for law in inputs["laws"]:
        k = law["kind"]
        if k == "empirical":
            X = _array(law["atoms"], arrays)
            out.append({"kind": k, "X": X, "atoms": [tuple(Fraction(float(v)) for v in r) for r in X],
                        "masses": [_q(m) for m in law["masses"]]})
        else:
            out.append({"kind": k, **{key: _rat(v) for key, v in law.items() if key != "kind"}})
    return out


def _rat(v: Any) -> Any:  # a family's JSON parameters, exactly (an integer ``dim`` stays one)
    if isinstance(v, list):
        return [_rat(x) for x in v]
    return v if isinstance(v, int) and not isinstance(v, bool) else _q(v)


# ---------------------------------------------------------------- CGF coefficients


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


# ------------------------------------------------------------------- Gram and matrices


def _features_arb(laws: list[dict[str, Any]], Q: np.ndarray, b: np.ndarray) -> arb_mat:
    """``F`` (rows ``sqrt(m/H) phi(x; Q_h, b_h)``, softmax weights ``m_k exp<Q x + b, x_k>``) in Arb."""
    H, d = Q.shape[0], Q.shape[1]
    rows: list[list[arb]] = []
    for law in laws:
        X = law["X"]
        N = X.shape[0]
        XA = arb_mat(X.tolist())
        mass = [arb(fmpq(m.numerator, m.denominator)) for m in law["masses"]]
        feats: list[list[arb]] = [[] for _ in range(N)]
        for h in range(H):
            A = XA * arb_mat(Q[h].T.tolist())
            S = arb_mat([[A[j, k] + arb(float(b[h, k])) for k in range(d)] for j in range(N)]) * XA.transpose()
            P = arb_mat(N, N)
            for j in range(N):
                top = arb(max(float(S[j, k].mid()) for k in range(N)))  # any shift is exact algebra
                e = [mass[k] * (S[j, k] - top).exp() for k in range(N)]
                tot = sum(e, arb(0))
                for k in range(N):
                    P[j, k] = e[k] / tot
            Phi = P * XA
            for j in range(N):
                feats[j].extend(Phi[j, c] for c in range(d))
        rows.extend([v * (mass[j] / H).sqrt() for v in feats[j]] for j in range(N))
    return arb_mat(rows)


def _up(x: arb) -> float:
    """A float above every point of the ball ``x``."""
    return float(np.nextafter(abs(float(x.mid())) + float(x.rad()), np.inf)) * (1 + 2**-40)


def _gamma(k: int) -> float:
    return k * U / (1 - k * U) * _SAFE


def _cholesky_bound(C: np.ndarray, radius: float, want: float, shifts: Sequence[float]) -> float | None:
    """A lower bound on lambda_min of every symmetric matrix within ``radius`` (2-norm) of ``C``:
    ``t - s - u max d - radius`` when the float64 Cholesky of fl(C - tI) (diagonal ``d``) runs to
    completion (``s`` Rump's allowance), for the recorded shifts, else for one chosen here."""
    n = C.shape[0]
    g = _gamma(n + 1)

    def allowance(d: np.ndarray) -> float:
        return (g / (1 - g) * float(np.sum(d)) * (1 + _gamma(n)) + 4 * n * (2 * (n + 1) + float(d.max())) * 2.0**-1000
                + U * float(d.max())) * _SAFE
    d0 = np.diagonal(C) - want
    own = [(want + radius + allowance(d0)) * (1 + 1e-6)] if np.all(d0 > 0) else []
    for t in list(shifts) or own:
        d = np.diagonal(C) - t
        A = np.array(C, dtype=np.float64)
        A[np.diag_indices(n)] = d
        try:
            np.linalg.cholesky(A) if np.all(d > 0) else None
        except np.linalg.LinAlgError:
            continue
        lb = float(np.nextafter((t - allowance(d) - radius * _SAFE) * (1 - 4 * U), -np.inf)) if np.all(d > 0) else -1
        if lb >= want:
            return lb
    if shifts:
        raise Refuted(f"the recorded shift {list(shifts)} does not prove lambda_min >= {want:.6g}")
    return None


def _ball_pd(G: arb_mat, block: int = 32) -> bool:
    """Whether every symmetric matrix in the ball ``G`` is positive definite: the pivots of a
    scalar LDL^T of each leading block are positive balls, and the Schur complement
    ``C - B A^-1 B^T`` (enclosed by ``arb_mat.solve``) is checked the same way. python-flint 0.9
    does not wrap Arb's ``arb_mat_cho``; mpmath's ``iv.cholesky`` compares with a tolerance."""
    n = G.nrows()
    while n:
        k = min(block, n)
        D: list[arb] = []
        L = [[arb(0)] * k for _ in range(k)]
        for j in range(k):
            s = G[j, j] - sum((L[j][m] ** 2 * D[m] for m in range(j)), arb(0))
            if not s > 0:
                return False
            D.append(s)
            for i in range(j + 1, k):
                L[i][j] = (G[i, j] - sum((L[i][m] * L[j][m] * D[m] for m in range(j)), arb(0))) / s
        if k == n:
            return True
        A = arb_mat([[G[i, j] for j in range(k)] for i in range(k)])
        B = arb_mat([[G[i, j] for j in range(k)] for i in range(k, n)])
        C = arb_mat([[G[i, j] for j in range(k, n)] for i in range(k, n)])
        try:
            G = C - B * A.solve(B.transpose())
        except ZeroDivisionError:
            return False
        n -= k
    return True


def _lower_bound(ball: Any, want: float, shifts: Sequence[Any], high: Any) -> str:
    """Prove lambda_min >= ``want``: the Cholesky route on the midpoints, then ``high(bits)``."""
    n = ball.nrows()
    C = np.array([[float(ball[i, j].mid()) for j in range(n)] for i in range(n)])
    C = (C + C.T) / 2
    R = np.array([[_up(ball[i, j] - arb(C[i, j])) for j in range(n)] for i in range(n)])
    radius = float(np.sqrt(np.sum(R * R))) * (1 + 1e-8)  # ||G - C||_F, C after its own rounding
    lb = _cholesky_bound(C, radius, want, [float(t) for t in shifts])
    if lb is not None:
        return f"float64 Cholesky with Rump's criterion: lambda_min >= {lb:.6g} >= the claimed {want:.6g}"
    if n > MAX_BALL_ROWS:
        raise Unchecked(f"below float64 resolution and {n} > {MAX_BALL_ROWS} rows for the ball LDL^T route")
    for bits in (128, 256, 512, 1024):
        with _workprec(bits):
            G = high(bits)
            S = arb_mat([[G[i, j] - (arb(want) if i == j else 0) for j in range(n)] for i in range(n)])
            if _ball_pd(S):
                return f"ball LDL^T of G - {want:.6g} I at {bits} bits: every pivot positive"
    raise Refuted(f"lambda_min >= {want:.6g} is not reproduced (Cholesky and ball LDL^T up to 1024 bits)")


def _gram(laws: list[dict[str, Any]], claim: dict[str, Any], Q: np.ndarray, b: np.ndarray) -> str:
    if any(law["kind"] != "empirical" for law in laws) or not float(claim["lower_bound"]) > 0:
        raise Refuted("a Gram claim needs empirical laws and a positive lower bound")
    if (cost := sum(Q.shape[0] * (N * Q.shape[1] ** 2 + N * N * (Q.shape[1] + 1)) for N in (law["X"].shape[0] for law in laws))) > MAX_ARB_OPS:
        raise Unchecked(f"the Arb enclosure of F needs {cost:.3g} ball operations (> {MAX_ARB_OPS:.3g})")

    def gram_at(bits: int) -> arb_mat:
        with _workprec(bits):
            F = _features_arb(laws, Q, b)
            return F * F.transpose()
    return _lower_bound(gram_at(128), float(claim["lower_bound"]), claim.get("shifts", []), gram_at)


def _gram_singular(laws: list[dict[str, Any]], claim: dict[str, Any]) -> str:
    c = [_q(v) for v in claim["c"]]
    alpha = [_q(v) for v in claim["alpha"]]
    _product_identity(laws, c, alpha, None)
    nu = {tuple(_q(v) for v in e["atom"]): _q(e["mass"]) for e in claim["nu"]}
    if not any(nu.values()) or (any(alpha) and sum(nu.values()) != 0):
        raise Refuted("nu is zero, or has non-zero total mass while alpha != 0")
    for ci, law in zip(c, laws):
        if ci and not set(nu) <= set(law["atoms"]):
            raise Refuted("nu charges an atom that a sample of the dependency does not have")
    return "identity re-expanded; nu on shared atoms: p_i = c_i dnu/dmu_i is a kernel vector (Prop. 8)"


def _matrix(inputs: dict[str, Any], arrays: dict[str, np.ndarray], claim: dict[str, Any]) -> str:
    A = _array(inputs["matrix"], arrays)
    e = float(inputs.get("abs_error", 0.0))
    n = A.shape[0]
    if not (A.ndim == 2 and A.shape == (n, n) and np.all(np.isfinite(A)) and e >= 0):
        raise Refuted("the matrix is not square and finite, or the error bound is negative")
    if float(np.abs(A - A.T).max()) > 2 * e:
        raise Refuted("no symmetric matrix lies within the error bound of the recorded matrix")
    kind = claim["kind"]
    if kind == "matrix-singular":
        if e != 0 or n == 0:
            raise Refuted("singularity is proved only for the exact matrix (abs_error 0)")
        ex = np.frexp(A[A != 0])[1]  # A 2^s is an integer matrix for s >= 53 - (smallest exponent)
        s = 0 if ex.size == 0 else max(0, 53 - int(ex.min()))
        r = fmpz_mat([[int(Fraction(float(v)) * 2**s) for v in row] for row in A]).rank()
        if r >= n:
            raise Refuted(f"the exact matrix has full rank {n}")
        return f"exact rank {r} < {n}"
    if kind == "matrix-indefinite":
        x = [Fraction(float(v)) for v in _array(claim["vector"], arrays)]
        q = sum((x[i] * Fraction(float(A[i, j])) * x[j] for i in range(n) for j in range(n)), Fraction(0))
        if not q + Fraction(e) * sum(abs(v) for v in x) ** 2 < 0:
            raise Refuted("x^T A x + e ||x||_1^2 is not negative")
        return "x^T S x < 0 for every S in the ball, exactly"
    def high(bits: int) -> arb_mat:  # the symmetric part, exact, widened by e entrywise
        with _workprec(bits):
            return arb_mat([[(arb(A[i, j]) + arb(A[j, i])) / 2 + arb(0, e) for j in range(n)] for i in range(n)])
    return _lower_bound(high(128), float(claim["lower_bound"]), claim.get("shifts", []), high)


# ------------------------------------------------------------------------ the file


def _check(claim: dict[str, Any], laws: list[dict[str, Any]], inputs: dict[str, Any],
           arrays: dict[str, np.ndarray]) -> str:
    kind = claim["kind"]
    sub = laws if claim.get("samples") is None else [laws[i] for i in claim["samples"]]
    if kind == "cgf":
        if claim["verdict"] == "independent":
            return _independent(sub, claim["certificate"], claim.get("direction"))
        if claim["verdict"] == "dependent":
            return _dependent(sub, claim["certificate"], claim.get("direction"))
    if kind == "gram-lower-bound":
        heads = inputs["heads"]
        return _gram(sub, claim, _array(heads["Q"], arrays), _array(heads["b"], arrays))
    if kind == "gram-singular":
        return _gram_singular(sub, claim)
    if kind.startswith("matrix-"):
        return _matrix(inputs, arrays, claim)
    raise Unchecked(claim.get("reason") or f"nothing to verify ({kind}, {claim.get('verdict')})")


def verify_record(rec: dict[str, Any], base: Path = Path(".")) -> tuple[int, list[tuple[str, str, str]]]:
    """Re-check every claim of a certificate record: ``(exit status, [(claim, status, why)])``."""
    if rec.get("format") != FORMAT:
        raise ValueError(f"not an {FORMAT} file (format {rec.get('format')!r})")
    arrays = _arrays(rec, base)
    inputs = rec["inputs"]
    if digest(inputs, arrays) != rec.get("digest"):
        return 1, [("inputs", "refuted", "the inputs do not match the digest recorded with them")]
    laws = _laws(inputs, arrays) if "laws" in inputs else []
    out = []
    for claim in rec["claims"]:
        try:
            out.append((claim["id"], "verified", _check(claim, laws, inputs, arrays)))
        except (Refuted, Unchecked) as exc:
            out.append((claim["id"], "refuted" if isinstance(exc, Refuted) else "unchecked", str(exc)))
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:  # a malformed claim
            out.append((str(claim.get("id")), "refuted", f"malformed claim ({type(exc).__name__}: {exc})"))
    status = {s for _, s, _ in out}
    return (1 if "refuted" in status else 3 if "unchecked" in status or not out else 0), out


def verify_file(path: str | Path) -> tuple[int, list[tuple[str, str, str]]]:
    """:func:`verify_record` of a certificate file (its ``.npz`` companion is read beside it)."""
    p = Path(path)
    return verify_record(json.loads(p.read_text(encoding="utf-8")), p.parent)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m ntkcheck.verify FILE.json  (exit 0 verified, 1 refuted, 3 unchecked, 2 unreadable)")
        return 0 if args in (["-h"], ["--help"]) else 2
    try:
        code, rows = verify_file(args[0])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"ntkcheck.verify: {args[0]}: unreadable certificate ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    for cid, status, why in rows:
        print(textwrap.fill(f"{cid}: {status} -- {why}", 100, subsequent_indent="    "))
    print({0: "every claim verified", 1: "REFUTED", 3: "some claims not re-checked, none refuted"}[code])
    return code


if __name__ == "__main__":
    sys.exit(main())
