"""Tests of the depth-heads experiment (abstract "Uniform Scaling Limits in AdamW-Trained Transformers").

Independent references used here: AdamW iterates in closed form (constant gradient) and by
hand in scalar Python arithmetic (quadratic); central finite differences of the loss (the
particle gradients and the adjoints at the input and at an inner layer); the explicit
``H``-head model of ``ntkcheck.dynamics.model`` (a separate implementation: atoms with
masses, heads folded into GEMM rows) for the multinomial reduction of ``H`` i.i.d. heads;
and the limit ODE and its continuous adjoint integrated by scipy's DOP853 with a velocity
field written with loops in this file and its Jacobian by finite differences.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import softmax

from ntkcheck.cli import main
from ntkcheck.dynamics.model import AttentionParams, forward, loss_and_grad
from ntkcheck.errors import DomainError, InputError, NtkcheckError
from ntkcheck.limits import depth_heads as dh
from ntkcheck.limits._adamw import AdamW, AdamWState, adamw_step

#: AdamW by two float64 routes (vectorised vs scalar Python / closed form): a few ulps per step.
RTOL_ADAM = 1e-13
#: central differences with h = 1e-6 on O(0.1) losses: truncation ~1e-12, rounding ~1e-10.
ATOL_FD = 1e-8
#: two float64 implementations of the same model (different summation orders) over <= 6 layers.
RTOL_ROUTES = 1e-11


def _small(L: int = 5, H: int = 7, seed: int = 0):
    law = dh.default_law()
    pb = dh.default_problem()
    theta = law.at(np.arange(L) / L)[None]
    W = dh.sample_weights(L, H, law.atoms, np.random.default_rng(seed))[None]
    return law, pb, theta, W


# ----------------------------------------------------------------------------- AdamW


def test_adamw_constant_gradient_matches_closed_form():
    """With a constant gradient g, m_hat = g and v_hat = g^2 at every step, so
    theta_t = a theta_{t-1} - c with a = 1 - lr lambda, c = lr g / (|g| + eps):
    theta_t = a^t theta_0 - c (1 - a^t) / (1 - a)."""
    opt = AdamW(lr=0.1, betas=(0.8, 0.95), eps=0.3, weight_decay=0.2)
    g = np.array([0.7, -2.0, 0.0])
    th0 = np.array([1.0, -0.5, 2.0])
    st = AdamWState.start(th0)
    a, c = 1 - opt.lr * opt.weight_decay, opt.lr * g / (np.abs(g) + opt.eps)
    for t in range(1, 8):
        st = adamw_step(st, g, opt)
        np.testing.assert_allclose(st.theta, a**t * th0 - c * (1 - a**t) / (1 - a), rtol=RTOL_ADAM, atol=1e-15)
    assert st.step == 7


def test_adamw_quadratic_two_steps_by_hand():
    """f(theta) = theta^2 / 2 (gradient theta), two steps computed in scalar Python."""
    lr, b1, b2, eps, lam = 0.05, 0.9, 0.999, 1e-3, 0.01
    th = 1.5
    m = v = 0.0
    for t in (1, 2):
        g = th
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        th = th - lr * ((m / (1 - b1**t)) / (math.sqrt(v / (1 - b2**t)) + eps) + lam * th)
    st = AdamWState.start(np.array([1.5]))
    opt = AdamW(lr=lr, betas=(b1, b2), eps=eps, weight_decay=lam)
    for _ in range(2):
        st = adamw_step(st, st.theta, opt)
    assert st.theta[0] == pytest.approx(th, rel=RTOL_ADAM)
    # step 1 is lr (sign + decay) up to eps: theta_1 = 1.5 - 0.05 (1.5 / 1.501 + 0.015)
    assert adamw_step(AdamWState.start(np.array([1.5])), np.array([1.5]), opt).theta[0] == pytest.approx(
        1.5 - 0.05 * (1.5 / 1.501 + 0.015), rel=RTOL_ADAM)


@pytest.mark.parametrize("kw", [{"lr": 0.0}, {"betas": (1.0, 0.9)}, {"eps": 0.0}, {"weight_decay": -1.0},
                                {"lr": float("nan")}])
def test_adamw_rejects_bad_hyperparameters(kw):
    with pytest.raises(DomainError):
        AdamW(**kw)


def test_adamw_rejects_mismatched_gradient():
    with pytest.raises(DomainError, match="gradient of shape"):
        adamw_step(AdamWState.start(np.zeros(3)), np.zeros(4), AdamW())


# ----------------------------------------------------------------------------- gradient and adjoint


def test_particle_gradient_and_adjoints_match_finite_differences():
    """dLoss/dtheta_lk = tau W_lk g_lk, dLoss/dx^0 = p^0 / (n N) and, for an inner layer l,
    dLoss/dx^l = p^l / (n N) (the tail of the network started at x^l), by central differences."""
    _, pb, theta, W = _small()
    L = theta.shape[1]
    n, N, _ = pb.X.shape
    traj, g = dh.forward_backward(theta, W, pb, 1.0 / L)

    def loss(th=theta, prob=pb, w=W):
        return dh.forward_backward(th, w, prob, 1.0 / L)[0].loss[0]

    h = 1e-6
    rng = np.random.default_rng(3)
    for _ in range(12):
        idx = (0, int(rng.integers(L)), int(rng.integers(theta.shape[2])), int(rng.integers(theta.shape[3])))
        tp, tm = theta.copy(), theta.copy()
        tp[idx] += h
        tm[idx] -= h
        fd = (loss(th=tp) - loss(th=tm)) / (2 * h)
        assert fd == pytest.approx(g[idx] * W[0, idx[1], idx[2]] / L, abs=ATOL_FD)
    for layer in (0, 2):
        tail = theta[:, layer:]
        X = traj.x[0, layer]
        for i, s, e in [(0, 1, 0), (1, 3, 1), (1, 0, 0)]:
            Xp, Xm = X.copy(), X.copy()
            Xp[i, s, e] += h
            Xm[i, s, e] -= h
            lp = dh.forward_backward(tail, W[:, layer:], dh.Problem(Xp, pb.Y, pb.probes), 1.0 / L)[0].loss[0]
            lm = dh.forward_backward(tail, W[:, layer:], dh.Problem(Xm, pb.Y, pb.probes), 1.0 / L)[0].loss[0]
            assert (lp - lm) / (2 * h) == pytest.approx(traj.p[0, layer, i, s, e] / (n * N), abs=ATOL_FD)


def test_multinomial_reduction_equals_explicit_H_head_model():
    """H i.i.d. heads drawn from K atoms == K heads weighted by counts / H: hidden states,
    loss and gradients (L H grad of each head == the particle gradient of its atom) against
    the explicit H-head model of ntkcheck.dynamics.model, then two AdamW steps of both."""
    law = dh.default_law()
    pb = dh.default_problem()
    L, H, K, d = 4, 6, law.atoms, law.dim
    rng = np.random.default_rng(11)
    atom = rng.integers(K, size=(L, H))
    W = np.stack([np.bincount(atom[j], minlength=K) / H for j in range(L)])[None]
    opt = AdamW(lr=0.05)
    st_red = AdamWState.start(law.at(np.arange(L) / L)[None])
    st_exp = AdamWState.start(st_red.theta[0][np.arange(L)[:, None], atom])  # (L, H, P)
    for _ in range(3):
        traj, g = dh.forward_backward(st_red.theta, W, pb, 1.0 / L)
        V, Q, b = dh.unpack(st_exp.theta, d)
        params = AttentionParams(V, Q, b)
        val, grad = loss_and_grad(list(pb.X), params, list(pb.Y), layers=L, T=1.0)
        out = forward(list(pb.X), params, layers=L, T=1.0)
        np.testing.assert_allclose(np.stack(out), traj.x[0, -1], rtol=RTOL_ROUTES, atol=1e-13)
        assert val == pytest.approx(traj.loss[0], rel=RTOL_ROUTES)
        g_exp = L * H * dh.pack(grad.V, grad.Q, grad.b)
        np.testing.assert_allclose(g_exp, g[0][np.arange(L)[:, None], atom], rtol=1e-9, atol=1e-13)
        st_red = adamw_step(st_red, g, opt)
        st_exp = adamw_step(st_exp, g_exp, opt)
    np.testing.assert_allclose(st_exp.theta, st_red.theta[0][np.arange(L)[:, None], atom], rtol=1e-9, atol=1e-12)


def test_bad_shapes_and_depths_are_refused():
    law, pb, theta, W = _small()
    with pytest.raises(DomainError, match="divide"):  # 5 layers against a grid of 4
        dh.errors_against(dh.train(theta, W, pb, 0, AdamW()), dh.reference(law, pb, 0, AdamW(), 8))
    with pytest.raises(InputError, match="expected theta"):
        dh.forward_backward(theta, W[:, :3], pb, 0.2)
    with pytest.raises(InputError, match="expected theta"):
        dh.forward_backward(theta[..., :5], W, pb, 0.2)


# ----------------------------------------------------------------------------- the reference


def _velocity(t: float, X: np.ndarray, law: dh.HeadLaw, Q_: np.ndarray | None = None) -> np.ndarray:
    """The rho-averaged attention field at depth t, a loop over the atoms: queries Q_ (default X)
    against the keys X of one sample."""
    V, Q, b = dh.unpack(law.at(np.array([t]))[0], law.dim)
    Q_ = X if Q_ is None else Q_
    F = np.zeros_like(Q_)
    for k in range(law.atoms):
        w = softmax((Q_ @ Q[k].T + b[k]) @ X.T, axis=1)
        F += (w @ X) @ V[k].T / law.atoms
    return F


def test_reference_matches_dop853_and_its_error_estimate_is_honest():
    """At training step 0 the limit is the ODE x' = F_t(x; mu_t) (rho-average of the heads) and
    its adjoint p' = -(dF/dx)^T p, p(1) = x(1) - y (density): DOP853 at rtol 1e-10 with the
    Jacobian by central differences. The reference (Euler + Richardson) agrees within its own
    error estimate (measured: 7e-6 and 9e-6 against the estimate 1.3e-4), and that estimate
    is small."""
    law = dh.default_law()
    pb = dh.default_problem(probes=2)
    ref = dh.reference(law, pb, 0, AdamW(), 128)
    assert ref.error < 1e-3
    n, N, d = pb.X.shape
    R = pb.probes.shape[1]
    ts = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    jgrid = np.round(ts * ref.grid).astype(int)
    for i in range(n):

        def fwd(t, z):
            Z = z.reshape(N + R, d)
            return np.concatenate([_velocity(t, Z[:N], law), _velocity(t, Z[:N], law, Z[N:])]).ravel()

        sol = solve_ivp(fwd, (0, 1), np.concatenate([pb.X[i], pb.probes[i]]).ravel(), method="DOP853",
                        rtol=1e-10, atol=1e-12, t_eval=ts)
        Z = sol.y.T.reshape(len(ts), N + R, d)
        assert np.max(np.abs(Z[:, :N] - ref.x[0, jgrid, i])) <= ref.error
        assert np.max(np.abs(Z[:, N:] - ref.probes[0, jgrid, i])) <= ref.error
        if i:
            continue  # the adjoint of sample 0 (samples do not interact)

        def bwd(t, z):
            X, p = z[: N * d].reshape(N, d), z[N * d :]
            h = 1e-6
            J = np.empty((N * d, N * d))
            for c in range(N * d):
                Xp, Xm = X.ravel().copy(), X.ravel().copy()
                Xp[c] += h
                Xm[c] -= h
                J[:, c] = (_velocity(t, Xp.reshape(N, d), law) - _velocity(t, Xm.reshape(N, d), law)).ravel() / (2 * h)
            return np.concatenate([_velocity(t, X, law).ravel(), -J.T @ p])

        x1 = Z[-1, :N]
        sol = solve_ivp(bwd, (1, 0), np.concatenate([x1.ravel(), (x1 - pb.Y[i]).ravel()]), method="DOP853",
                        rtol=1e-10, atol=1e-12, t_eval=ts[::-1])
        P = sol.y.T[:, N * d :].reshape(len(ts), N, d)[::-1]
        assert np.max(np.abs(P - ref.p[0, jgrid, i])) <= ref.error


def test_reference_rejects_bad_resolution():
    law, pb = dh.default_law(), dh.default_problem()
    for bad in (6, 10, 12.5):
        with pytest.raises(DomainError, match="multiple of 4"):
            dh.reference(law, pb, 1, AdamW(), bad)


# ----------------------------------------------------------------------------- the experiment


def test_run_small_is_consistent_with_the_theorem():
    """At size small (5 seeds): both rates consistent, errors well above the reference error,
    L-slope near the Euler order -1 and H-slope near -1/2 (the head-sampling fluctuation)."""
    res = dh.run(size="small", seeds=5, seed=0)
    assert res.verdict == "consistent", res.lines()
    fL, fH = res.fits
    assert (fL.variable, fH.variable) == ("L", "H") and fL.seeds == fH.seeds == 5
    assert len(fL.xs) >= 3 and len(fH.xs) >= 3
    assert -1.2 < fL.slope < -0.9 and -0.8 < fH.slope < -0.3
    assert np.min(fL.errors) > 10 * fL.reference_error
    d = json.loads(json.dumps(res.to_dict()))
    assert set(d["data"]["curves"]) >= {"L=4", "L=64,H=1"}


def test_run_rejects_bad_input():
    with pytest.raises(NtkcheckError, match="unknown size"):
        dh.run(size="huge")
    with pytest.raises(NtkcheckError, match="at least 2 seeds"):
        dh.run(size="small", seeds=1)
    with pytest.raises(NtkcheckError, match="steps"):
        dh.run(size="small", steps=-1)
    with pytest.raises(DomainError, match="positive integers"):
        dh.sample_weights(4, 0, 8, np.random.default_rng(0))
    with pytest.raises(DomainError, match="dim >= 2"):
        dh.default_law(dim=1)
    with pytest.raises(DomainError, match="probes >= 1"):
        dh.default_problem(probes=0)
    pb = dh.default_problem()
    with pytest.raises(InputError, match="targets"):
        dh.Problem(pb.X, pb.Y[:, :2], pb.probes)
    with pytest.raises(InputError, match="non-finite"):
        dh.Problem(pb.X * np.nan, pb.Y, pb.probes)


def test_mutation_head_sum_without_1_over_H_is_caught(monkeypatch, capsys):
    """Summing the heads (weights counts instead of counts / H) breaks the limit: the
    claim fails (``ntkcheck claims`` exits 1 and names it)."""
    monkeypatch.setattr(dh, "head_weights", lambda counts, heads: counts)
    cid = "abstracts.adamw_scaling_limits"
    code = main(["claims", "--only", cid, "--examples", "8", "--json", "--no-shrink"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["unexpected"] == [cid], out["claims"][0]
