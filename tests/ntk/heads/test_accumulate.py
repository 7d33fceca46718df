"""Tests of ntkcheck.ntk.heads.accumulate: the certified sums of one round.

The reference computes every head's features from the definition in mpmath at 40 digits, then the
preconditioned Gram, each head's lambda_max(T X T) and the quadratic form along v; the float sums must
enclose them within their proved radii (the radii are compared with the actual errors, not with
themselves), the truncation must respect the range B, and the bottom bounds must bracket the
reference's lambda_min.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from ntkcheck.cgf import as_laws
from ntkcheck.ntk.heads.accumulate import Lens, RoundSums, bottom_bounds, draw_block

DPS = 40


def _features_mp(law, Q, b):
    """sqrt(m_a) phi_a(Q, b) of one law at DPS digits, from the definition."""
    X = [[mpmath.mpf(float(v)) for v in row] for row in law.atoms]
    m = [mpmath.mpf(float(w)) for w in law.masses]
    d = len(X[0])
    out = []
    for a, xa in enumerate(X):
        q = [sum(mpmath.mpf(float(Q[i, j])) * xa[j] for j in range(d)) + mpmath.mpf(float(b[i])) for i in range(d)]
        s = [sum(q[i] * xb[i] for i in range(d)) for xb in X]
        top = max(s)
        w = [m[k] * mpmath.exp(s[k] - top) for k in range(len(X))]
        Z = sum(w)
        out.append([mpmath.sqrt(m[a]) * sum(w[k] * X[k][i] for k in range(len(X))) / Z for i in range(d)])
    return out


def _case():
    rng = np.random.default_rng(7)
    laws = as_laws([rng.standard_normal((3, 2)), rng.standard_normal((2, 2)), rng.standard_normal((3, 2))])
    M = sum(law.n_atoms for law in laws)
    A = rng.standard_normal((M, M))
    T = A @ A.T / M + np.eye(M)
    T = (T + T.T) / 2
    return laws, M, T


def _reference(laws, M, T, Q, b, v):
    """Per head the exact (DPS digits) T F_h as an mpmath matrix, lambda_max(T X_h T) and v^T X_h v."""
    with mpmath.workdps(DPS):
        Tm = mpmath.matrix(T.tolist())
        vm = mpmath.matrix(v.tolist())
        out = []
        for h in range(Q.shape[0]):
            F = mpmath.matrix([row for law in laws for row in _features_mp(law, Q[h], b[h])])
            C = Tm * F
            ell = max(mpmath.eigsy(C.T * C)[0])
            y = F.T * vm
            out.append((C, ell, sum(y[i] ** 2 for i in range(y.rows))))
        return out


def test_round_sums_enclose_the_exact_preconditioned_gram_and_form():
    """Against mpmath: ||G~_float - G~_exact||_2 <= the proved radius (G~ with the code's own scales s_h,
    each exact s_h^2 lambda_max(T X_h T) <= B, no head truncated whose lambda_max is below B / 2), and
    the form's mean and mean square are upper bounds within 1e-9 relative of the exact ones."""
    laws, M, T = _case()
    d = 2
    Q, b = draw_block(0, 16, d, q_scale=1.5, b_scale=1.0, dist="gaussian", seed=3)
    v = np.linspace(1.0, -0.5, M)
    ref = _reference(laws, M, T, Q, b, v)
    ells = sorted(float(r[1]) for r in ref)
    B = ells[len(ells) // 2]  # half the heads are truncated
    tau = float(np.linalg.norm(T, 2)) * 1.001
    lens = Lens(T, tau * tau, float(np.linalg.norm(np.abs(T), 2)) * 1.001, B, v, float(v @ v) * (1 - 1e-12), 1e9)
    sums = RoundSums(laws, lens)
    sums.add(Q, b, gram=True)
    s = sums.last_scales
    assert s is not None and sums.truncated >= 1
    with mpmath.workdps(DPS):
        Gx = mpmath.zeros(M, M)
        for h, (C, ell, _) in enumerate(ref):
            assert float(s[h]) ** 2 * ell <= B * (1 + 1e-30)  # the range holds for the exact head
            if ell < B / 2:
                assert s[h] == 1.0  # the proved lambda_max bound is not absurdly loose
            Gx += (mpmath.mpf(float(s[h])) ** 2) * (C * C.T)
        Gx /= len(ref)
        G, radius = sums.gram()
        Gf = np.tril(G) + np.tril(G, -1).T
        D = np.array((mpmath.matrix(Gf.tolist()) - Gx).tolist(), dtype=float)
    err = float(np.linalg.norm(D, 2))
    assert err <= radius, (err, radius)
    assert radius < 1e-10 * float(np.linalg.norm(Gf, 2))  # a useful radius
    z, w = sums.form_moments()
    zr = float(sum(r[2] for r in ref) / len(ref))
    wr = float(sum(r[2] ** 2 for r in ref) / len(ref))
    assert zr <= z <= zr * (1 + 1e-9) and wr <= w <= wr * (1 + 1e-9)


def test_identity_lens_truncates_nothing_and_bottom_bounds_bracket():
    """With the identity lens nothing is truncated (every head's lambda_max is below L), and the certified
    (c, g) bracket lambda_min of the exact Gram (mpmath eigenvalues at 40 digits)."""
    laws, M, _ = _case()
    Q, b = draw_block(1, 40, 2, q_scale=1.0, b_scale=1.0, dist="gaussian", seed=4)
    sums = RoundSums(laws, Lens(None, 1.0, 1.0, 1e300))
    sums.add(Q, b, gram=True)
    assert sums.truncated == 0 and np.all(sums.last_scales == 1.0)
    G, radius = sums.gram()
    c, g = bottom_bounds(G, radius)
    with mpmath.workdps(DPS):
        Fx = [mpmath.matrix([row for law in laws for row in _features_mp(law, Q[h], b[h])]) for h in range(40)]
        Gx = sum((F * F.T for F in Fx), mpmath.zeros(M, M)) / 40
        lam = min(mpmath.eigsy(Gx)[0])
    assert c is not None and c <= float(lam) <= g
    assert math.isclose(c, float(lam), rel_tol=0.02)
