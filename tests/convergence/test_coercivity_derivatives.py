"""The derivative pieces of the split-region bound against finite differences of the softmax feature.

An independent readout feature, written here from its definition
:math:`m_{hj}(Z, \\Delta\\psi) = \\sum_k \\pi_k (x_k + Z_k)`,
:math:`\\pi = \\mathrm{softmax}_k(\\langle (Q_h + \\Delta Q)(x_j + Z_j) + b_h + \\Delta b, x_k + Z_k\\rangle + \\log w_k)`
(token field ``Z``, head displacement :math:`\\Delta\\psi`), is differentiated by central differences at two
step sizes. Tolerances: the 4-point second difference has truncation error ~h^2 |D^4 m| and rounding
~1e-16 / h^2; at h = 1e-3 and 2e-3 both are below 1e-6 for features of size ~1, and the two step sizes
agree to that, so 1e-5 absolute is a safe comparison. The 8-point third difference at h = 1e-2 and
2e-2 agrees to ~1e-3 relative (truncation ~h^2); bounds are compared with 1.01 times the larger.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ntkcheck.convergence.coercivity._hessian import (
    _motion_map,
    readout_hessian,
    structured_etas,
    termwise_etas,
)
from ntkcheck.convergence.coercivity._stats import all_stats
from ntkcheck.convergence.coercivity._termwise import d2, d3, field, head, motion, region
from ntkcheck.dynamics import init_params


def _feature(x, w, Q, b, Z, dQ, db):
    """(H, N, d) features of every head and query at tokens x + Z, heads (Q + dQ, b + dB)."""
    X = x + Z
    q = np.einsum("hab,jb->hja", Q + dQ, X) + (b + db)[:, None, :]
    s = np.einsum("hja,ka->hjk", q, X) + np.log(w)[None, None, :]
    s -= s.max(axis=-1, keepdims=True)
    pi = np.exp(s)
    pi /= pi.sum(axis=-1, keepdims=True)
    return pi @ X


def _unpack(u, N, d, H=None):
    """A basis-ordered vector (token field, then (Q, b) rows) as (Z, dQ, db) for one head."""
    Z = u[:N * d].reshape(N, d)
    P = u[N * d:].reshape(d, d + 1)
    return Z, P[:, :d], P[:, d]


def _case(d=2, N=3, H=2, seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((N, d)) for _ in range(2)]
    ws = [np.full(N, 1.0 / N), rng.dirichlet(np.ones(N))]
    p = init_params(d, H, seed=seed + 1)
    stats, _ = all_stats(xs, ws, p.Q, p.b)
    return xs, ws, p, stats


def _readout_fd_hessian(x, w, Q, b, h):
    """(H, d, nv, nv) Hessian of sum_j w_j m_hj by the 4-point central difference (one head moved at a time)."""
    N, d = x.shape
    H = Q.shape[0]
    nv = N * d + d * (d + 1)
    out = np.zeros((H, d, nv, nv))
    E = np.eye(nv) * h

    def f(u):
        Z, dQ, db = _unpack(u, N, d)
        return np.einsum("j,hja->ha", w, _feature(x, w, Q, b, Z, np.broadcast_to(dQ, Q.shape), np.broadcast_to(db, b.shape)))

    for i in range(nv):
        for j in range(i, nv):
            v = (f(E[i] + E[j]) - f(E[i] - E[j]) - f(-E[i] + E[j]) + f(-E[i] - E[j])) / (4 * h * h)
            out[:, :, i, j] = out[:, :, j, i] = v
    return out


def test_readout_hessian_against_finite_differences():
    """readout_hessian (the formula behind the eta norms) equals the finite-difference Hessian of the
    readout feature in (token field, head displacement), at two step sizes (module docstring)."""
    xs, ws, p, stats = _case()
    for x, w, st in zip(xs, ws, stats):
        Hs, nY = readout_hessian(st, p.Q, p.b)
        assert nY == x.size
        f1 = _readout_fd_hessian(x, w, p.Q, p.b, 1e-3)
        f2 = _readout_fd_hessian(x, w, p.Q, p.b, 2e-3)
        np.testing.assert_allclose(f1, f2, atol=1e-5)  # the difference quotient is resolved
        np.testing.assert_allclose(Hs, f1, atol=1e-5)


def test_eta_norms_bound_sampled_bilinear_forms():
    """eta^{VV}_h >= |(v^T W_i^T H_hio W_i v')_{i,o}|, and eta^{Vpsi}_h, eta^{psipsi}_h likewise, for unit
    vectors from random starts improved by alternating power steps, with the Hessians by finite
    differences (h = 1e-3, error < 1e-6); both the structured (flattening) and the term-by-term norms.
    The flattening is within a factor 3 of the best value found."""
    xs, ws, p, stats = _case()
    H = p.heads
    etas = structured_etas(stats, p.Q, p.b)
    loose = termwise_etas(stats)
    assert etas is not None
    Ws = _motion_map(stats)
    hs = [_readout_fd_hessian(x, w, p.Q, p.b, 1e-3) for x, w in zip(xs, ws)]
    nY = [x.size for x in xs]
    rng = np.random.default_rng(0)

    def unit(n):
        a = rng.standard_normal(n)
        return a / np.linalg.norm(a)

    for h in range(H):
        # the three blocks as maps (left, right) -> output vector over (sample, coordinate)
        blocks = [
            [np.einsum("ua,ouv,vb->oab", W, Hh[h][:, :n, :n], W) for Hh, W, n in zip(hs, Ws, nY)],
            [np.einsum("ua,ouv->oav", W, Hh[h][:, :n, n:]) for Hh, W, n in zip(hs, Ws, nY)],
            [Hh[h][:, n:, n:] for Hh, n in zip(hs, nY)],
        ]
        for k, blk in enumerate(blocks):
            A = np.concatenate(blk, axis=0)  # (outputs, left, right)
            best = 0.0
            for _ in range(8):
                a, b = unit(A.shape[1]), unit(A.shape[2])
                for _ in range(30):
                    c = np.einsum("oab,a,b->o", A, a, b)
                    c /= max(np.linalg.norm(c), 1e-300)
                    a = np.einsum("oab,o,b->a", A, c, b)
                    a /= np.linalg.norm(a)
                    b = np.einsum("oab,o,a->b", A, c, a)
                    b /= np.linalg.norm(b)
                best = max(best, float(np.linalg.norm(np.einsum("oab,a,b->o", A, a, b))))
            assert best <= etas[k][h] + 1e-5 and best <= loose[k][h] + 1e-5, (h, k, best, etas, loose)
            assert etas[k][h] <= 3.0 * best + 1e-5, (h, k, etas[k][h], best)


def _fd2(f, a, b, h):
    return (f(h * a + h * b) - f(h * a - h * b) - f(-h * a + h * b) + f(-h * a - h * b)) / (4 * h * h)


def _fd3(f, a, b, c, h):
    tot = 0.0
    for sa in (1, -1):
        for sb in (1, -1):
            for sc in (1, -1):
                tot = tot + sa * sb * sc * f(h * (sa * a + sb * b + sc * c))
    return tot / (8 * h ** 3)


@pytest.mark.parametrize("where", ["centre", "inside a region"])
def test_d2_d3_bound_finite_differences(where):
    """d2 and d3 (the per-score bounds over a region) dominate |D^2 m_hj[e1, e2]|, |D^3 m_hj[e1, e2, e3]|
    measured by finite differences at points of the region: token fields of max-norm 1 (``field``),
    unit head displacements (``head``) and token motions M[V] of a unit |V|_rho (``motion``). The region:
    tokens moved by at most D = 0.05 (arbitrary field), the head by t = 0.05."""
    xs, ws, p, stats = _case(seed=3)
    x, w, st = xs[0], ws[0], stats[0]
    H, N, d = st.m.shape
    D = 0.0 if where == "centre" else 0.05
    t = 0.0 if where == "centre" else 0.05
    reg = region(st, np.array([D]), np.array([D]), np.array([0.0]), t)
    dirs = {"field": field(st, reg, 1.0), "head": head(st, reg, 1.0), "motion": motion(st, reg, 1.0)}
    rng = np.random.default_rng(1)

    def sample(kind):
        if kind == "field":
            Z = rng.standard_normal((N, d))
            return Z / np.linalg.norm(Z, axis=1, keepdims=True), np.zeros((H, d, d)), np.zeros((H, d))
        if kind == "head":
            P = rng.standard_normal((H, d, d + 1))
            P /= np.linalg.norm(P, axis=(1, 2), keepdims=True)
            return np.zeros((N, d)), P[:, :, :d], P[:, :, d]
        V = rng.standard_normal((H, d, d))
        V /= math.sqrt(np.sum(V * V) / H)  # |V|_rho = 1
        return np.einsum("gab,gkb->ka", V, st.m) / H, np.zeros((H, d, d)), np.zeros((H, d))

    for trial in range(6):
        Z0 = rng.standard_normal((N, d))
        Z0 *= D / np.max(np.linalg.norm(Z0, axis=1)) if D > 0 else 0.0
        P0 = rng.standard_normal((H, d, d + 1))
        P0 *= t / np.linalg.norm(P0, axis=(1, 2), keepdims=True) if t > 0 else 0.0
        kinds = [("field", "head", "motion"), ("motion", "motion", "head"), ("head", "head", "field")][trial % 3]
        es = [sample(k) for k in kinds]

        def f(c, es=es, Z0=Z0, P0=P0):
            u = [sum(ci * e[i] for ci, e in zip(c, es)) for i in range(3)]
            return _feature(x, w, p.Q, p.b, Z0 + u[0], P0[:, :, :d] + u[1], P0[:, :, d] + u[2])

        e1, e2, e3 = np.eye(3)
        second = [np.linalg.norm(_fd2(f, e1, e2, hh), axis=-1) for hh in (1e-3, 2e-3)]
        np.testing.assert_allclose(second[0], second[1], rtol=1e-4, atol=1e-6)  # truncation ~h^2
        bound2 = d2(reg, dirs[kinds[0]], dirs[kinds[1]])[0][0]
        assert np.all(second[0] <= bound2 * (1 + 1e-4) + 1e-6), (kinds, second[0], bound2)
        third = [np.linalg.norm(_fd3(f, e1, e2, e3, hh), axis=-1) for hh in (1e-2, 2e-2)]
        np.testing.assert_allclose(third[0], third[1], rtol=0.05, atol=1e-3)
        bound3 = d3(reg, *(dirs[k] for k in kinds))[0][0]
        assert np.all(np.maximum(*third) <= 1.01 * bound3 + 1e-4), (kinds, third, bound3)
