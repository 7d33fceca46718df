"""Mean-field Langevin for one attention layer (seed 002 Prop. 8.2, Thm. 8.3): ntkcheck.limits.langevin."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from helpers import lln_tolerance
from scipy.optimize import minimize

import ntkcheck.limits._langevin_model as M
from ntkcheck.claims._seed002 import attention_002
from ntkcheck.cli import main
from ntkcheck.errors import NtkcheckError
from ntkcheck.limits import langevin as L
from ntkcheck.limits.rates import run_experiment


def _problem(d=2, N=4, M_=2, loss="square", lam=1.0, seed=0):
    rng = np.random.default_rng(seed)
    return L.LangevinProblem(rng.standard_normal((N, d)), 2.0 * rng.standard_normal((M_, d)), lam, loss)


# ----------------------------------------------------------------------------- the model


@pytest.mark.parametrize("d", [1, 2, 3])
def test_attention_matches_the_seed_002_attention_of_the_claims(d):
    """Batched heads against the per-head eq. 3 / eq. 8 attention written independently for the
    seed 002 claims (scipy softmax, one head at a time): float64 rounding only (RTOL 1e-12)."""
    rng = np.random.default_rng(d)
    X = rng.standard_normal((5, d))
    th = rng.standard_normal((4, 3, d, d))
    A = L.attention(X, X, th)
    for j in range(4):
        ref = attention_002(X, X, th[j, 0], th[j, 1], th[j, 2])
        np.testing.assert_allclose(A[j], ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(L.head_features(X, th), A.mean(axis=1), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("d", [1, 2])
def test_vjp_against_central_differences(d):
    """grad_theta <g, Psi(theta)> against central differences, h = 1e-6: truncation O(h^2) ~ 1e-12,
    rounding O(eps / h) ~ 1e-10; tolerance 1e-7 absolute on O(1) entries."""
    rng = np.random.default_rng(10 + d)
    X = rng.standard_normal((4, d))
    th = rng.standard_normal((3, 3, d, d))
    g = rng.standard_normal((3, d))  # one g per head
    G = L.head_features_vjp(X, th, g)
    h = 1e-6
    fd = np.zeros_like(th)
    for idx in np.ndindex(th.shape[1:]):
        e = np.zeros_like(th)
        e[(slice(None), *idx)] = h
        fd[(slice(None), *idx)] = np.sum((L.head_features(X, th + e) - L.head_features(X, th - e)) * g, axis=1) / (2 * h)
    np.testing.assert_allclose(G, fd, atol=1e-7)


def test_drift_is_m_times_the_particle_gradient_of_the_regularised_risk():
    """The mean-field drift grad (dL_lambda/drho)(theta_j) equals m times the partial derivative of
    L_lambda(rho^m) in theta_j (first variation vs particle gradient), checked by central differences
    of the risk function (a different code path: readout + loss value). Tolerance 1e-6 relative."""
    P = _problem(d=2, loss="logcosh")
    rng = np.random.default_rng(3)
    m = 4
    th = rng.standard_normal((m, 3, 2, 2))
    drift, xbar = L.mean_field_drift(P, th[None])
    np.testing.assert_allclose(xbar[0], M.readout(P, th), rtol=1e-13)

    def Llam(t):
        return M.risk(P, t) + 0.5 * P.lam * np.sum(t * t) / m

    h = 1e-6
    fd = np.zeros_like(th)
    for idx in np.ndindex(th.shape):
        e = np.zeros_like(th)
        e[idx] = h
        fd[idx] = m * (Llam(th + e) - Llam(th - e)) / (2 * h)
    np.testing.assert_allclose(drift[0], fd, rtol=1e-6, atol=1e-8)


def test_euler_maruyama_on_a_pure_ornstein_uhlenbeck_problem():
    """Context tokens at 0 make Psi = 0: each coordinate is Euler-Maruyama for dtheta = -lam theta ds
    + sqrt(2 beta) dW, whose law is Gaussian with the closed-form recursion
    mean_n = (1 - lam h)^n mean_0, var_{n+1} = (1 - lam h)^2 var_n + 2 beta h.
    beta = 0: exact to rounding. beta > 0: the mean of |theta|^2 over m p coordinates within 6 sigma."""
    P = L.LangevinProblem(np.zeros((3, 1)), np.array([[1.0]]), lam=2.0)
    rng = np.random.default_rng(0)
    th0 = np.full((4000, 3, 1, 1), 0.7)
    h, n = 0.05, 40
    path = L.simulate(P, th0, beta=0.0, step=h, steps=n, rng=rng)
    np.testing.assert_allclose(path.final[0, 0], th0 * (1 - 2.0 * h) ** n, rtol=1e-12)
    beta = 0.3
    path = L.simulate(P, th0, beta=beta, step=h, steps=n, rng=rng)
    a = (1 - 2.0 * h) ** 2
    var = sum(2 * beta * h * a**k for k in range(n))
    mean = 0.7 * (1 - 2.0 * h) ** n
    expect = mean**2 + var  # E theta^2 per coordinate
    x2 = path.final[0, 0].reshape(-1) ** 2
    assert abs(x2.mean() - expect) <= lln_tolerance(math.sqrt(2 * var**2 + 4 * mean**2 * var), x2.size)
    # the stationary EM variance beta / (lam (1 - lam h / 2)): the bias the experiment allows for
    assert var == pytest.approx(beta / (2.0 * (1 - 2.0 * h / 2)) * (1 - a**n), rel=1e-12)


# ----------------------------------------------------------------------------- Prop. 8.2


@pytest.mark.parametrize("loss", ["square", "logcosh"])
def test_mixture_at_one_half_is_the_union_of_two_equal_particle_sets(loss):
    """(rho_0 + rho_1) / 2 of two uniform sets of equal size is the uniform law of their union."""
    P = _problem(loss=loss)
    rng = np.random.default_rng(1)
    t0, t1 = rng.standard_normal((2, 5, 3, 2, 2))
    R = L.interpolation_risks(P, t0, t1, [0.5])[0]
    assert R == pytest.approx(M.risk(P, np.concatenate([t0, t1])), rel=1e-13)


def test_square_risk_is_the_parabola_of_an_affine_readout():
    """Square loss: R(s) = 1/2 mean_y |xbar_0 + s (xbar_1 - xbar_0) - y|^2, compared with the closed
    form from the two endpoint readouts (a different route than the mixture of particles)."""
    P = _problem(d=2, M_=3)
    rng = np.random.default_rng(2)
    t0, t1 = rng.standard_normal((4, 3, 2, 2)), 2 + rng.standard_normal((2, 3, 2, 2))
    c = L.convexity_along_interpolation(P, t0, t1, grid=11)
    x0, x1 = M.readout(P, t0), M.readout(P, t1)
    closed = [0.5 * np.mean(np.sum((x0 + s * (x1 - x0) - P.targets) ** 2, axis=1)) for s in c.s]
    np.testing.assert_allclose(c.risks, closed, rtol=1e-12)
    assert c.holds and c.curvature == pytest.approx(0.5 * np.sum((x1 - x0) ** 2), rel=1e-12)


def _two_layer_readout(problem, theta, weights=None):
    """The tokens moved by one attention step, then attended again (seed 002 section 8.3: two layers)."""
    w = M.as_weights(weights, theta.shape[0])
    X1 = problem.tokens + np.einsum("j,jia->ia", w, L.attention(problem.tokens, problem.tokens, theta))
    return (X1 + np.einsum("j,jia->ia", w, L.attention(X1, X1, theta))).mean(axis=0)


def test_a_readout_through_two_layers_is_not_convex(monkeypatch):
    """The check can fail: with the attention evaluated against the moved tokens (two layers, the
    case seed 002 section 8.3 excludes) the risk along an interpolation is never a parabola and,
    for some of these pairs with a far target, not convex."""
    monkeypatch.setattr(M, "readout", _two_layer_readout)
    P = L.LangevinProblem(np.array([[-1.0], [0.5], [2.0]]), np.array([[-6.0]]))
    rng = np.random.default_rng(4)
    found = False
    for _ in range(20):
        c = L.convexity_along_interpolation(P, rng.normal(0, 1.5, (2, 3, 1, 1)), rng.normal(1, 1.5, (2, 3, 1, 1)))
        assert not c.quadratic
        found |= not c.convex
    assert found


# ----------------------------------------------------------------------------- the references


def test_gibbs_state_against_a_three_dimensional_quadrature():
    """The Gibbs fixed point integrates v out analytically; here the same measure
    exp(-(g v m(qk) + lam/2 |theta|^2) / beta) is integrated over (q, k, v) by a plain tensor
    Gauss-Hermite rule (no Gaussian v integral), at the reference's g: the fixed-point equation
    g = xbar - y and the moments agree to 1e-9 (the 3-D rule converges spectrally; 60 nodes)."""
    P = L.default_problem()
    beta = 0.1
    ref = L.gibbs_state(P, beta)
    z, w = np.polynomial.hermite_e.hermegauss(60)
    sig = math.sqrt(beta / P.lam)
    q = sig * z
    mq = M._m_of_t(P.tokens, np.multiply.outer(q, q))  # (q, k)
    logw = (np.log(w)[:, None, None] + np.log(w)[None, :, None] + np.log(w)[None, None, :]
            - ref.g * q[None, None, :] * mq[:, :, None] / beta)
    W = np.exp(logw - logw.max())
    W /= W.sum()
    psi = q[None, None, :] * mq[:, :, None]
    sq = q[:, None, None] ** 2 + q[None, :, None] ** 2 + q[None, None, :] ** 2
    xbar = P.xbar0[0] + np.sum(W * psi)
    assert xbar == pytest.approx(ref.mean_output, abs=1e-9)
    assert ref.g == pytest.approx(xbar - P.targets.mean(), abs=1e-9)
    assert np.sum(W * sq) == pytest.approx(ref.second_moment, abs=1e-9)
    assert ref.error < 1e-6


def test_zero_temperature_minimum_against_direct_minimisation_and_laplace():
    """min L_lambda over Diracs by Nelder-Mead from many starts (an independent optimiser) matches
    the 1-D reduction; and (L_lambda(rho*_beta) - min) / beta -> p/2 = 1.5 (first-order Laplace
    expansion around a non-degenerate minimiser) at beta = 1e-3, within 1 %."""
    P = L.default_problem()
    zt = L.zero_temperature_minimum(P)
    assert zt.certified

    def f(x):
        th = x.reshape(1, 3, 1, 1)
        return M.risk(P, th) + 0.5 * P.lam * float(x @ x)

    rng = np.random.default_rng(0)
    best = min(minimize(f, rng.normal(0, 1, 3), method="Nelder-Mead",
                        options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 4000}).fun for _ in range(8))
    assert best == pytest.approx(zt.value, abs=1e-9)
    g = L.gibbs_state(P, 1e-3)
    assert (g.risk_lambda - zt.value) / 1e-3 == pytest.approx(P.p / 2, rel=0.01)


# ----------------------------------------------------------------------------- the experiment


def test_small_experiment_is_consistent_with_every_check():
    """Size small, 5 seeds: every fit consistent, every direct check holds (the temperature-free
    reading of eq. 28 refuted among them), data complete."""
    res = run_experiment("langevin", size="small", seeds=5)
    assert res.verdict == "consistent", res.lines()
    assert all(res.checks.values()) and len(res.checks) == 5
    conv, beta, *free = res.fits
    assert conv.scale == "semilog" and conv.theorem_slope is None and conv.ci[1] < 0
    assert beta.variable == "1/beta" and len(beta.xs) >= 3 and beta.seeds >= 5
    # one free-energy fit per temperature, against the proved rate (a decay rate, stated)
    assert len(free) == 3 and all(f.theorem_slope < 0 and "proved" in f.theorem for f in free)
    # the contraction rate does not scale with the temperature (see theory/limits-langevin.md)
    rates = list(res.data["contraction_rates"].values())
    assert max(rates) / min(rates) < 1.5
    json.dumps(res.to_dict())


def test_bad_input_is_a_clear_error():
    with pytest.raises(NtkcheckError, match="loss"):
        L.LangevinProblem(np.ones((2, 1)), np.ones((1, 1)), loss="hinge")
    with pytest.raises(NtkcheckError, match="weight decay"):
        L.LangevinProblem(np.ones((2, 1)), np.ones((1, 1)), lam=0.0)
    with pytest.raises(NtkcheckError, match="non-finite"):
        L.LangevinProblem(np.array([[np.nan]]), np.ones((1, 1)))
    with pytest.raises(NtkcheckError, match="dimension"):
        L.LangevinProblem(np.ones((2, 2)), np.ones((1, 1)))
    P = L.default_problem()
    with pytest.raises(NtkcheckError, match="shape"):
        L.simulate(P, np.zeros((4, 3, 2, 2)), beta=0.1, step=0.01, steps=2, rng=np.random.default_rng(0))
    with pytest.raises(NtkcheckError, match="step"):
        L.simulate(P, np.zeros((4, 3, 1, 1)), beta=0.1, step=1.5, steps=2, rng=np.random.default_rng(0))
    with pytest.raises(NtkcheckError, match="beta"):
        L.simulate(P, np.zeros((4, 3, 1, 1)), beta=-1.0, step=0.1, steps=2, rng=np.random.default_rng(0))
    with pytest.raises(NtkcheckError, match="one per batch"):
        L.simulate(P, np.zeros((3, 2, 4, 3, 1, 1)), beta=[0.1, 0.2], step=0.1, steps=2, rng=np.random.default_rng(0))
    with pytest.raises(NtkcheckError, match="odd"):
        L.convexity_along_interpolation(P, np.zeros((1, 3, 1, 1)), np.zeros((1, 3, 1, 1)), grid=10)
    with pytest.raises(NtkcheckError, match="weights"):
        L.interpolation_risks(P, np.zeros((2, 3, 1, 1)), np.zeros((1, 3, 1, 1)), [0.5], w0=[0.2, 0.2])
    with pytest.raises(NtkcheckError, match="d = 1"):
        L.gibbs_state(_problem(d=2), 0.1)
    with pytest.raises(NtkcheckError, match="unknown size"):
        L.run(size="huge")


# ----------------------------------------------------------------------------- mutations


def _caught(cid, capsys, examples):
    code = main(["claims", "--only", cid, "--examples", str(examples), "--json", "--no-shrink"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["unexpected"] == [cid], out["claims"][0]
    return out["claims"][0]


def test_mutation_langevin_step_without_noise_is_caught(monkeypatch, capsys):
    """Without the sqrt(2 beta h) xi term the two runs still merge (the drift contracts) but onto
    the zero-temperature state, not the Gibbs fixed point: the stationary check fails."""
    monkeypatch.setattr(sys.modules["ntkcheck.limits.langevin"], "langevin_step",
                        lambda theta, drift, beta, step, xi: theta - step * drift)
    rep = _caught("002.thm8.3", capsys, examples=10)
    assert "Gibbs fixed point" in rep["detail"]


def test_half_the_temperature_is_caught_twice(monkeypatch):
    """Noise sqrt(beta h) xi instead of sqrt(2 beta h) xi (the temperature halved): the coupled runs
    still merge and the beta -> 0 slope stays -1, but E|theta|^2 misses the Gibbs value by ~p beta / 4,
    and on the query-scale model the free-energy gap to the Gibbs state of beta stalls (it tends to
    the gap of the state at beta / 2): at beta = 4 it decays slower than the proved rate."""
    monkeypatch.setattr(L, "langevin_step",
                        lambda theta, drift, beta, step, xi: theta - step * drift + np.sqrt(np.asarray(beta) * step) * xi)
    res = L.run(size="small")
    assert res.verdict == "inconsistent"
    failed = [k for k, v in res.checks.items() if not v]
    assert len(failed) == 1 and "Gibbs fixed point" in failed[0]
    assert res.fits[-1].verdict == "inconsistent" and "slower" in res.fits[-1].reason


def test_mutation_two_layer_readout_is_caught(monkeypatch, capsys):
    """A readout that moves the tokens and attends again (non-affine in rho) breaks Prop. 8.2."""
    monkeypatch.setattr(M, "readout", _two_layer_readout)
    _caught("002.prop8.2", capsys, examples=10)
