"""Shared tolerances and reference computations for the tests.

Tolerances are stated with their reason; use these names rather than bare numbers.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

#: float64 evaluations of the same closed form by two routes: a few ulps times the
#: condition of log-sum-exp (O(1) for the sizes tested).
RTOL_FLOAT = 1e-12

#: float64 against an mpmath evaluation at 50 digits: float64 rounding only.
RTOL_FLOAT_VS_MP = 1e-12


def lln_tolerance(std: float, n_samples: int, z: float = 6.0) -> float:
    """Half-width of a law-of-large-numbers check: ``z`` standard errors (6 sigma: a
    false failure has probability below 1e-8 for a fixed seed, which is fixed anyway)."""
    return z * std / np.sqrt(n_samples)


def arb_contains_exact(ball, q) -> bool:
    """Whether the Arb ball ``ball`` contains the rational ``q`` (Fraction or fmpq), decided
    exactly from the ball's dyadic midpoint and radius (no rounding of ``q`` into a ball)."""
    from fractions import Fraction

    def dyadic(x) -> Fraction:
        man, exp = x.man_exp()
        return Fraction(int(man)) * Fraction(2) ** int(exp)

    qf = q if isinstance(q, Fraction) else Fraction(int(q.p), int(q.q))
    return abs(dyadic(ball.mid()) - qf) <= dyadic(ball.rad())


def fd_derivatives(f, h: float) -> list[float]:
    """Derivatives 1..4 of ``f`` at 0 by central differences (orders h^4, h^4, h^2, h^2)."""
    f2p, f1p, f0, f1m, f2m = (f(2 * h), f(h), f(0.0), f(-h), f(-2 * h))
    d1 = (-f2p + 8 * f1p - 8 * f1m + f2m) / (12 * h)
    d2 = (-f2p + 16 * f1p - 30 * f0 + 16 * f1m - f2m) / (12 * h**2)
    d3 = (f2p - 2 * f1p + 2 * f1m - f2m) / (2 * h**3)
    d4 = (f2p - 4 * f1p + 6 * f0 - 4 * f1m + f2m) / h**4
    return [d1, d2, d3, d4]


# ----------------------------------------------------------------------------------------
# Independent references for the decision engine (tests/independence/test_soundness.py).
#
# Everything below is written from the definitions (theory/cgf-independence.md) with Python
# Fractions and mpmath, from the atoms and masses of each law. It must not call
# ntkcheck: a verdict of the engine is re-verified here, not re-derived by the engine.

#: a dependence identity sum_i c_i Lambda_i(a) = <alpha, a> + beta is checked at 50 digits;
#: a true identity leaves rounding only (~1e-50 relative), a wrong one leaves the size of
#: the CGFs at O(1) scores (>= 1e-30 for the small dyadic data of the suite).
IDENTITY_DPS = 50
RTOL_IDENTITY = 1e-40


class RefEmpirical:
    """An empirical law as exact data: ``{atom (tuple of Fraction): mass (Fraction)}``.

    Built from raw token rows and weights by :func:`ref_empirical` (repeats merged, zero
    masses dropped, masses normalised exactly), independently of ``ntkcheck.cgf.empirical``.
    """

    def __init__(self, atoms: dict, dim: int) -> None:
        self.atoms = dict(atoms)
        self.dim = dim

    def __repr__(self) -> str:
        items = ", ".join(f"{[str(v) for v in x]}: {m}" for x, m in self.atoms.items())
        return f"RefEmpirical({{{items}}})"


class RefCube:
    """The uniform law on ``[-r, r]^d`` as exact data (seed 003 Ex. 3)."""

    def __init__(self, radius, dim: int) -> None:
        from fractions import Fraction

        self.radius = Fraction(radius)
        self.dim = dim

    def __repr__(self) -> str:
        return f"RefCube(radius={self.radius}, dim={self.dim})"


def exact(x):
    """The exact rational value of a float, int, str or Fraction (floats are dyadic)."""
    from fractions import Fraction

    if isinstance(x, Fraction):
        return x
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, str):
        return Fraction(x)
    return Fraction(float(x))


def ref_empirical(tokens, weights=None) -> RefEmpirical:
    """The law ``sum_j w_j delta(x_j)`` of a token sample, merged and normalised exactly: the tokens'
    float64 values, the weights' values as :func:`exact` reads them (:func:`ref_law` on those)."""
    w = None if weights is None else [exact(v) for v in weights]
    return ref_law(np.asarray(tokens, dtype=np.float64), w)


def ref_convolution(p: RefEmpirical, q: RefEmpirical) -> RefEmpirical:
    """The law of ``X + Y`` for independent ``X ~ p``, ``Y ~ q``."""
    from fractions import Fraction

    atoms: dict = {}
    for x, u in p.atoms.items():
        for y, v in q.atoms.items():
            s = tuple(a + b for a, b in zip(x, y))
            atoms[s] = atoms.get(s, Fraction(0)) + u * v
    return RefEmpirical(atoms, p.dim)


def ref_mean(law) -> tuple:
    """The mean of a law, exactly (the gradient of its CGF at 0)."""
    from fractions import Fraction

    if isinstance(law, RefCube):
        return tuple(Fraction(0) for _ in range(law.dim))
    return tuple(sum((m * x[k] for x, m in law.atoms.items()), Fraction(0)) for k in range(law.dim))


def _log_series(g: list) -> list:
    """Coefficients f_0..f_K of log(g(t)) for a power series with g_0 = 1: from f' g = g'."""
    from fractions import Fraction

    assert g[0] == 1
    f = [Fraction(0)] * len(g)
    for k in range(1, len(g)):
        acc = sum((j * f[j] * g[k - j] for j in range(1, k)), Fraction(0))
        f[k] = g[k] - acc / k
    return f


def ref_taylor_1d(law, w, K: int) -> list:
    """Taylor coefficients ``c_0..c_K`` of ``t -> Lambda(t w)`` as Fractions (``c_k = kappa_k / k!``).

    Empirical: ``log sum_j m_j exp(z_j t)``, ``z_j = <w, x_j>``, by exact power series.
    Uniform cube: ``sum_k log(sinh(r w_k t) / (r w_k t))`` from the series of
    ``sinh(x)/x = sum_m x^(2m) / (2m+1)!``.
    """
    from fractions import Fraction
    from math import factorial

    w = [exact(v) for v in w]
    if isinstance(law, RefCube):
        g = [Fraction(0)] * (K + 1)
        for m in range(0, K // 2 + 1):
            g[2 * m] = Fraction(1, factorial(2 * m + 1))
        h = _log_series(g)
        return [h[k] * law.radius**k * sum((wk**k for wk in w), Fraction(0)) if k % 2 == 0 and k > 0 else Fraction(0)
                for k in range(K + 1)]
    zs = [(sum((wk * xk for wk, xk in zip(w, x)), Fraction(0)), m) for x, m in law.atoms.items()]
    g = [sum((m * z**k for z, m in zs), Fraction(0)) / factorial(k) for k in range(K + 1)]
    return _log_series(g)


def ref_rows(laws, directions, K: int) -> tuple[list, list]:
    """The coefficient matrix of orders 2..K stacked over ``directions``: (rows, labels).

    ``labels[j]`` is the order ``k`` for one direction, else ``(direction index, k)``.
    """
    rows: list = [[] for _ in laws]
    labels: list = []
    for di, w in enumerate(directions):
        coeffs = [ref_taylor_1d(m, w, K) for m in laws]
        for k in range(2, K + 1):
            labels.append(k if len(directions) == 1 else (di, k))
            for i, c in enumerate(coeffs):
                rows[i].append(c[k])
    return rows, labels


def exact_rank(rows: list) -> int:
    """Rank over Q of a matrix of Fractions (Gaussian elimination, exact)."""
    from fractions import Fraction

    A = [[Fraction(v) for v in r] for r in rows]
    rank, ncols = 0, len(A[0]) if A else 0
    for j in range(ncols):
        piv = next((i for i in range(rank, len(A)) if A[i][j] != 0), None)
        if piv is None:
            continue
        A[rank], A[piv] = A[piv], A[rank]
        for i in range(len(A)):
            if i != rank and A[i][j] != 0:
                f = A[i][j] / A[rank][j]
                A[i] = [a - f * b for a, b in zip(A[i], A[rank])]
        rank += 1
    return rank


def exact_det(square: list):
    """Determinant over Q of a square matrix of Fractions (elimination, exact)."""
    from fractions import Fraction

    A = [[Fraction(v) for v in r] for r in square]
    n, det = len(A), Fraction(1)
    for j in range(n):
        piv = next((i for i in range(j, n) if A[i][j] != 0), None)
        if piv is None:
            return Fraction(0)
        if piv != j:
            A[j], A[piv] = A[piv], A[j]
            det = -det
        det *= A[j][j]
        for i in range(j + 1, n):
            f = A[i][j] / A[j][j]
            if f:
                A[i] = [a - f * b for a, b in zip(A[i], A[j])]
    return det


def ref_projected(law: RefEmpirical, w) -> list:
    """The distinct projected atoms ``<w, x_j>`` of an empirical law, exactly, sorted."""
    from fractions import Fraction

    w = [exact(v) for v in w]
    return sorted({sum((wk * xk for wk, xk in zip(w, x)), Fraction(0)) for x in law.atoms})


def ref_gap(law: RefEmpirical, w, top: bool):
    """Gap between the two largest (``top``) or two smallest projected atoms, or None."""
    z = ref_projected(law, w)
    if len(z) < 2:
        return None
    return z[-1] - z[-2] if top else z[1] - z[0]


def ref_cgf_mp(law, a):
    """``Lambda(a)`` at the working mpmath precision, from the exact data.

    Empirical: log-sum-exp with the max shift. Cube: the closed form.
    """
    import mpmath

    a = [exact(v) for v in a]

    def mp(q):
        return mpmath.mpf(q.numerator) / q.denominator

    if isinstance(law, RefCube):
        tot = mpmath.mpf(0)
        for ak in a:
            if ak != 0:
                x = mp(law.radius * ak)
                tot += mpmath.log(mpmath.sinh(x) / x)
        return tot
    scores = [(mp(sum((ak * xk for ak, xk in zip(a, x)), exact(0))), mp(m)) for x, m in law.atoms.items()]
    top = max(s for s, _ in scores)
    return top + mpmath.log(mpmath.fsum(m * mpmath.exp(s - top) for s, m in scores))


def identity_residual(laws, c, alpha, beta, points) -> float:
    """Largest relative residual of ``sum_i c_i Lambda_i(a) - <alpha, a> - beta`` over ``points``.

    Computed at :data:`IDENTITY_DPS` digits from the exact data; the scale is
    ``sum_i |c_i Lambda_i(a)| + |<alpha, a>| + |beta|``.
    """
    import mpmath

    def mp(q):
        q = exact(q)
        return mpmath.mpf(q.numerator) / q.denominator

    worst = mpmath.mpf(0)
    with mpmath.workdps(IDENTITY_DPS):
        for a in points:
            terms = [mp(ci) * ref_cgf_mp(m, a) for ci, m in zip(c, laws) if exact(ci) != 0]
            lin = mpmath.fsum(mp(al) * mp(ak) for al, ak in zip(alpha, a)) + mp(beta)
            res = abs(mpmath.fsum(terms) - lin)
            scale = mpmath.fsum(abs(t) for t in terms) + abs(lin)
            if res > 0:
                worst = max(worst, res / scale)
    return float(worst)


def positive_definite(M: list) -> bool:
    """Whether a symmetric matrix of Fractions is positive definite (exact LDL^T: all pivots > 0)."""
    from fractions import Fraction

    A = [[Fraction(v) for v in r] for r in M]
    n = len(A)
    for j in range(n):
        if A[j][j] <= 0:
            return False
        for i in range(j + 1, n):
            f = A[i][j] / A[j][j]
            if f:
                A[i] = [a - f * b for a, b in zip(A[i], A[j])]
    return True


def sigma_min_exceeds(square: list, bound) -> bool:
    """Whether the smallest singular value of a square Fraction matrix ``B`` exceeds ``bound``:
    ``B^T B - bound^2 I`` positive definite, decided exactly."""
    b2 = exact(bound) ** 2
    n = len(square)
    G = [[sum((square[k][i] * square[k][j] for k in range(n)), exact(0)) - (b2 if i == j else 0) for j in range(n)]
         for i in range(n)]
    return positive_definite(G)


# ----------------------------------------------------------------------------------------
# Exact inputs (issue 19): laws and Gram matrices from the values given, never through float64.


def exact_value(x):
    """The exact rational value of an int, Fraction, decimal string or float of any width
    (``np.longdouble`` included), written here without ntkcheck."""
    from fractions import Fraction

    if isinstance(x, Fraction):
        return x
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, str):
        return Fraction(x)
    return Fraction(*x.as_integer_ratio())


def ref_law(tokens, weights=None) -> RefEmpirical:
    """:func:`ref_empirical` for tokens given at any exact values (Fraction, big ints, long doubles)."""
    from fractions import Fraction

    rows = [tuple(exact_value(v) for v in row) for row in tokens]
    w = [Fraction(1)] * len(rows) if weights is None else [exact_value(v) for v in weights]
    tot = sum(w, Fraction(0))
    atoms: dict = {}
    for x, wj in zip(rows, w):
        if wj != 0:
            atoms[x] = atoms.get(x, Fraction(0)) + wj / tot
    return RefEmpirical(atoms, len(rows[0]))


def ref_gram_eigenvalues(laws, Q, b, dps: int) -> list:
    """Eigenvalues of the NTK Gram ``F F^T`` on distinct atoms, from the definitions, at ``dps`` digits.

    ``F[(i, x), h] = sqrt(m_x / H) sum_k pi_k x_k`` with ``pi_k ∝ m_k exp(<Q_h x + b_h, x_k>)``
    over the atoms of law ``i`` (theory/ntk-prop8.md); ``Q`` (H x d x d) and ``b`` (H x d)
    nested sequences of exact values. Uses mpmath only (no ntkcheck)."""
    import mpmath

    H = len(Q)
    with mpmath.workdps(dps):
        def mp(q):
            q = exact_value(q)
            return mpmath.mpf(q.numerator) / q.denominator

        Qm = [[[mp(v) for v in row] for row in Qh] for Qh in Q]
        bm = [[mp(v) for v in bh] for bh in b]
        rows = []
        for law in laws:
            pts = [([mp(v) for v in x], mp(m)) for x, m in law.atoms.items()]
            for x, mx in pts:
                row = []
                for h in range(H):
                    q = [mpmath.fsum(Qm[h][r][c] * x[c] for c in range(len(x))) + bm[h][r] for r in range(len(x))]
                    s = [mpmath.fsum(qr * yr for qr, yr in zip(q, y)) for y, _ in pts]
                    top = max(s)
                    e = [my * mpmath.exp(sk - top) for (_, my), sk in zip(pts, s)]
                    Z = mpmath.fsum(e)
                    row.extend(mpmath.fsum(ek * y[c] for ek, (y, _) in zip(e, pts)) / Z for c in range(len(x)))
                rows.append([mpmath.sqrt(mx / H) * v for v in row])
        F = mpmath.matrix(rows)
        return sorted(mpmath.eigsy(F * F.T, eigvals_only=True))


def ref_features(samples, Q, b, dps: int) -> list:
    """The entries of ``F`` (rows: distinct atoms of each law, columns: heads x coordinates) at
    ``dps`` digits from exact values, as :func:`ref_gram_eigenvalues` builds them (no ntkcheck)."""
    import mpmath

    H = len(Q)
    with mpmath.workdps(dps):
        def mp(q):
            q = exact_value(q)
            return mpmath.mpf(q.numerator) / q.denominator

        out = []
        for s in samples:
            law = ref_law(s)
            pts = [([mp(v) for v in x], mp(m)) for x, m in law.atoms.items()]
            d = len(pts[0][0])
            for x, m in pts:
                for h in range(H):
                    q = [mpmath.fsum(mp(Q[h][r][c]) * x[c] for c in range(d)) + mp(b[h][r]) for r in range(d)]
                    e = [my * mpmath.exp(mpmath.fsum(a * c for a, c in zip(q, y))) for y, my in pts]
                    Z = mpmath.fsum(e)
                    w = mpmath.sqrt(m / H)
                    out.extend(w * mpmath.fsum(ek * y[c] for ek, (y, _) in zip(e, pts)) / Z for c in range(d))
        return out


# Reference for the head law's NTK in d = 1 (tests/ntk/heads/test_law.py), from the definition
# (theory/ntk-head-law.md): K_rho[(i,a),(j,b)] = sqrt(m_ia m_jb) E[phi_ia(q, b) phi_jb(q, b)] with
# (q, b) ~ N(0, s_q^2) x N(0, s_b^2), phi the softmax mean of the sample's atoms with scores
# (q x + b) z + log m_z. Written with numpy and scipy only: it must not call ntkcheck.


def head_law_kernel_1d(samples, masses, q_scale, b_scale, nq, nb):
    """``K_rho`` by a tensor Gauss-Hermite rule with ``nq`` nodes in ``q`` and ``nb`` in ``b``."""
    from scipy.special import logsumexp, roots_hermite

    xq, wq = roots_hermite(nq)
    xb, wb = roots_hermite(nb)
    q, b = np.sqrt(2.0) * q_scale * xq, np.sqrt(2.0) * b_scale * xb
    W = np.outer(wq, wb) / np.pi  # E f(q, b) = sum W f(sqrt 2 s_q x, sqrt 2 s_b y) / pi
    feats, roots = [], []
    for X, m in zip(samples, masses, strict=True):
        X, m = np.asarray(X, dtype=float), np.asarray(m, dtype=float)
        for a, xa in enumerate(X):
            s = (q[:, None, None] * xa + b[None, :, None]) * X[None, None, :] + np.log(m)
            feats.append(np.exp(s - logsumexp(s, axis=2, keepdims=True)) @ X)
            roots.append(np.sqrt(m[a]))
    Fe = np.array(feats)
    return np.einsum("ikl,jkl,kl->ij", Fe, Fe, W) * np.outer(roots, roots)


def head_law_lambda_min_1d(samples, masses, q_scale, b_scale, nq=100, nb=2000):
    """(lambda_min of K_rho, an error estimate): the rule with twice the nodes in each variable, and the
    spectral norm of its difference with the coarser rule (Weyl: the eigenvalues move by at most
    that much; a Gauss-Hermite rule converging geometrically has its error below the difference)."""
    K1 = head_law_kernel_1d(samples, masses, q_scale, b_scale, nq, nb)
    K2 = head_law_kernel_1d(samples, masses, q_scale, b_scale, 2 * nq, 2 * nb)
    lam = float(np.linalg.eigvalsh((K2 + K2.T) / 2)[0])
    return lam, float(np.linalg.norm(K2 - K1, 2)) + 1e-15


# ------------------------------------------------------------ the Prop. 8 table (tests/ntk/prop8, tests/ntk/heads)

Z, U, V = np.zeros(2), np.array([1.0, 0.25]), np.array([-0.5, 1.0])
E1 = np.array([1.0, 0.0])
_rng = np.random.default_rng(3)
_X = np.array([[0.0, 0.0], [1.0, 0.5], [0.25, 1.0]])

# The table of theory/ntk-prop8.md (seed 003 Prop. 8), every row:
# (samples, weak verdict, overlap, Gram outcome, structures by name, kernel dimension)
TABLE = {
    "product, shared atom 0": ([np.array([Z, U]), np.array([Z, V]), np.array([Z, U, V, U + V])],
                               "dependent", "1 shared atom", "singular",
                               ["sample 2 is the law of X+Y, X ~ sample 0, Y ~ sample 1 independent"], 1),
    "product, translated apart": ([np.array([Z, U]) + [3, 0.5], np.array([Z, V]) + [-2, 1.5],
                                   np.array([Z, U, V, U + V]) + [0.5, -3]], "dependent", "none", "positive",
                                  ["sample 2 is the law of X+Y, X ~ sample 0, Y ~ sample 1 independent, "
                                   "translated by (-0.5, -5)"], 0),
    "translate, disjoint": ([_X, _X + [5.0, 4.0]], "dependent", "none", "positive",
                            ["sample 1 is sample 0 translated by (5, 4)"], 0),
    "{0,e1,2e1} and translate by e1": ([np.array([Z, E1, 2 * E1]), np.array([E1, 2 * E1, 3 * E1])],
                                       "dependent", "2 shared atoms", "singular",
                                       ["sample 1 is sample 0 translated by (1, 0)"], 1),
    "3 single Diracs, d=2": ([np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([[1.0, 2.0]])],
                             "dependent", "n > d Diracs (sum c_i x_i = 0)", "singular",
                             ["samples [0, 1, 2] are single Diracs (linear CGFs); 1 independent Dirac relation "
                              "sum_i c_i x_i = 0 among them"], 1),
    "3 random samples of 3 tokens": ([_rng.standard_normal((3, 2)) for _ in range(3)],
                                     "independent", "not needed", "positive", [], 0),
}

#: relative eigenvalue at or below which the reference counts a kernel direction: exact
#: zeros come out of an SVD near (eps ||F||)^2 ~ 1e-32 relative, genuine eigenvalues of
#: these small problems are above 1e-12 (ntkcheck.ntk.gram_matrix.pipeline uses the same floor, RESOLUTION_SVD)
FLOOR = 1e-26


def _reference_kernel(laws, heads):
    """Eigenvalues at the floor of the atom Gram assembled from the definition, independent of
    ntkcheck.ntk.gram_matrix.pipeline: per atom and head, sqrt(m_a / H) softmax_k(<Q x_a + b, x_k> + log m_k) @ X,
    then the singular values of that matrix."""
    H = heads.count
    rows = []
    for law in laws:
        X, m = law.atoms, law.masses
        for a, x in enumerate(X):
            rows.append(np.concatenate([softmax(X @ (heads.Q[h] @ x + heads.b[h]) + np.log(m)) @ X
                                        for h in range(H)]) * np.sqrt(m[a] / H))
    s = np.linalg.svd(np.array(rows), compute_uv=False)
    ev = np.zeros(len(rows))
    ev[:s.size] = s**2
    return int(np.sum(ev <= FLOOR * ev.max()))
