"""The low-temperature experiment (ntkcheck.limits.low_temperature): token concentration on
P#mu_0, against independent computations (the original-frame equation, a hardmax integrator,
quadrature of the closed forms, an optimal assignment), its verdict, bad input, and a mutation
(attention without the temperature beta) that the claim must catch."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from ntkcheck.cli import main
from ntkcheck.errors import DomainError, InputError, NtkcheckError
from ntkcheck.limits import low_temperature as LT
from ntkcheck.limits.rates import run_experiment

CLAIM_ID = "abstracts.low_temperature"


def _tokens(n: int = 40, seed: int = 3, setting: LT.LowTempSetting | None = None) -> np.ndarray:
    return LT.initial_tokens(setting or LT.LowTempSetting(), n, np.random.default_rng(seed))


def test_comoving_system_is_the_original_equation_in_the_comoving_frame():
    """The reduced co-moving integrator (RK45, z2 only, effective temperature beta a e^{-2 lam t})
    against the abstract's equation dx_i/dt = sum_j softmax_j(beta <Q x_i, K x_j>) V x_j integrated
    in the original frame with the full 2x2 matrices (DOP853), mapped by z = expm(-tV) x.
    Both at rtol <= 1e-9 on O(1) states over t <= 1.5 (amplification <= e^1.5): 1e-6 absolute."""
    st = LT.LowTempSetting(lam=1.0, a=1.3)
    Z0 = _tokens(30, setting=st)
    times = [0.5, 1.0, 1.5]
    X = LT.simulate_tokens(Z0, 20.0, st.Q, st.K, st.V, times, rtol=1e-10, atol=1e-12)
    Z = LT.simulate_comoving(Z0[:, 1], 20.0, st, times, rtol=1e-10, atol=1e-12)
    for k, t in enumerate(times):
        zc = LT.comoving(X[k], t, st.V)
        np.testing.assert_allclose(zc[:, 0], Z0[:, 0], rtol=0, atol=1e-12)  # first coordinate carried along
        np.testing.assert_allclose(zc[:, 1], Z[k, 0], rtol=0, atol=1e-6)


def test_closed_form_hardmax_flow_against_an_integrated_hardmax_flow():
    """zero_temperature_flow (closed form) against RK45 on the hardmax field z' = sigma lam
    (y*(z) - z), y* = the token maximising a z y (the top or bottom token), up to a time before any
    token reaches 0 (the field is smooth there); both signs of V's eigenvalue. rtol 1e-11: 1e-8."""
    for sign in (-1, 1):
        st = LT.LowTempSetting(lam=0.8, sign=sign)
        Z0 = _tokens(25, seed=5, setting=st)
        z = Z0[:, 1]
        top, bot = z.max(), z.min()
        gap = np.where(z > 0, top - z, z - bot)
        inner = gap > 0
        # sign -1: the first token reaches 0 at log((|z| + gap)/gap)/lam; stop at 90 % of that
        t_end = 2.0 if sign > 0 else 0.9 * float(np.min(np.log((np.abs(z[inner]) + gap[inner]) / gap[inner]))) / st.lam

        def field(t, y, a=st.a, rate=sign * st.lam):
            target = np.where(y * a > 0, y.max(), y.min())  # argmax_j a z_i z_j
            return rate * (target - y)

        sol = solve_ivp(field, (0, t_end), z, method="RK45", rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(LT.zero_temperature_flow(Z0, t_end, st)[:, 1], sol.y[:, -1], rtol=0, atol=1e-8)


def test_softmax_flow_tends_to_the_closed_form_hardmax_flow_as_beta_grows():
    """The coupling of the proof (Laplace principle + stability): W2 between the softmax flow and the
    closed-form hardmax flow of the same tokens at t = 0.3 (before the collapse) falls with beta, below
    sqrt(log(beta+1)/beta) (constant 1) and at least as fast: measured ~beta^-1.2 (integrator error
    ~1e-6, far below the smallest distance 1.5e-4)."""
    st = LT.LowTempSetting()
    Z0 = _tokens(40, seed=3)
    ref = LT.zero_temperature_flow(Z0, 0.3, st)[:, 1]
    betas = np.array([400.0, 1600.0, 6400.0])
    d = np.array([float(LT.w2_comoving(LT.simulate_comoving(Z0[:, 1], b, st, [0.3])[0, 0], ref)) for b in betas])
    bound = np.sqrt(np.log(betas + 1) / betas)
    assert np.all(d < bound) and np.all(np.diff(d) < 0), d
    slope = np.polyfit(np.log(betas), np.log(d), 1)[0]
    assert slope <= np.polyfit(np.log(betas), np.log(bound), 1)[0], slope


def test_projection_is_the_long_time_limit_of_the_hardmax_flow():
    """P is idempotent and equals the hardmax flow once every token has arrived: sign -1 (onto ker V,
    leaders fixed) exactly after the last arrival time; sign +1 (onto the leaders' lines) up to e^{-lam t}."""
    st = LT.LowTempSetting()
    Z0 = _tokens(50)
    P = LT.projection(Z0, st)
    z = Z0[:, 1]
    inner = (z != z.max()) & (z != z.min())
    assert np.all(P[inner, 1] == 0) and np.all(P[~inner] == Z0[~inner]) and np.all(P[:, 0] == Z0[:, 0])
    gap = np.where(z > 0, z.max() - z, z - z.min())
    t_last = math.log(np.max((gap + np.abs(z))[inner] / gap[inner])) / st.lam  # the last token reaches 0
    np.testing.assert_array_equal(LT.zero_temperature_flow(Z0, t_last * 1.001, st), P)
    np.testing.assert_array_equal(LT.projection(P, st), P)
    plus = LT.LowTempSetting(sign=1)
    Pp = LT.projection(Z0, plus)
    assert set(np.unique(Pp[:, 1])) == {z.max(), z.min()}
    np.testing.assert_allclose(LT.zero_temperature_flow(Z0, 30.0, plus), Pp, rtol=0, atol=3 * math.exp(-30))


def test_zero_temperature_w2_closed_form_against_quadrature_and_quantile_tokens():
    """b e^{-m lam t/2} sqrt(2/((m+1)(m+2))) against (i) quad of int_0^1 (b - b v^{1/m} e^{lam t})_+^2 dv
    (quad's error estimate < 1e-10) and (ii) the 1-D W2 of 10^5 tokens at the quantiles of the initial law
    moved by the closed-form hardmax flow (midpoint rule on a kink: 1e-3 relative)."""
    for m, lam, b, t in [(4.0, 1.0, 1.0, 0.7), (2.0, 0.5, 2.0, 1.3), (1.0, 1.0, 1.0, 0.2)]:
        st = LT.LowTempSetting(lam=lam, b=b, m=m)
        grow = math.exp(lam * t)
        val, err = quad(lambda v, b=b, m=m, grow=grow: max(0.0, b - b * v ** (1 / m) * grow) ** 2, 0, 1,
                        points=[math.exp(-m * lam * t)], epsabs=1e-13)
        assert abs(st.zero_temperature_w2(t) - math.sqrt(val)) <= 1e-8
        n = 100_000
        g = b * ((np.arange(n) + 0.5) / n) ** (1 / m)
        z2 = np.concatenate([[b, -b], b - g, -(b - g)])
        Z = np.column_stack([np.zeros_like(z2), z2])
        flow = LT.zero_temperature_flow(Z, t, st)[:, 1]
        w2 = float(LT.w2_comoving(flow, LT.projection(Z, st)[:, 1]))
        assert abs(w2 - st.zero_temperature_w2(t)) <= 1e-3 * st.zero_temperature_w2(t)


def test_quantile_w2_equals_an_optimal_assignment_in_the_plane():
    """W2 by sorting the second coordinates (1-D quantile coupling) against linear_sum_assignment on
    the 2-D squared distances, for a finite-temperature state of the model (same first coordinates):
    the order argument of the module docstring makes them equal; plus basic W2 identities."""
    st = LT.LowTempSetting()
    Z0 = _tokens(60, seed=11)
    Z = LT.simulate_comoving(Z0[:, 1], 150.0, st, [1.0])[0, 0]
    P = LT.projection(Z0, st)
    w_q = float(LT.w2_comoving(Z, P[:, 1]))
    w_a = LT.wasserstein2(np.column_stack([Z0[:, 0], Z]), P)
    assert w_q > 0.01 and abs(w_q - w_a) <= 1e-12 * w_a
    rng = np.random.default_rng(0)
    A = rng.normal(size=(40, 2))
    assert LT.wasserstein2(A, A[rng.permutation(40)]) == 0.0
    shift = np.array([0.3, -0.4])
    assert abs(LT.wasserstein2(A, A + shift) - 0.5) <= 1e-12  # a translation moves every atom by |shift|


def test_integrator_tolerance_is_far_below_the_measured_errors():
    """The default RK45 tolerances (rtol 1e-6) against rtol 1e-10 on the W2 curve of a small system at
    beta = 300 over the measured time range: relative difference < 1e-3 (the fitted slopes move by less)."""
    st = LT.LowTempSetting()
    Z0 = _tokens(60, seed=2)
    ts = [0.5, 1.25, 2.0, 3.0]
    P2 = LT.projection(Z0, st)[:, 1]
    coarse = LT.w2_comoving(LT.simulate_comoving(Z0[:, 1], 300.0, st, ts)[:, 0], P2[None])
    fine = LT.w2_comoving(LT.simulate_comoving(Z0[:, 1], 300.0, st, ts, rtol=1e-10, atol=1e-13)[:, 0], P2[None])
    np.testing.assert_allclose(coarse, fine, rtol=1e-3)


def test_small_run_is_consistent_with_every_check():
    """Size "small" (5 seeds, 3 betas): every fit consistent, every direct check holds, the W2 slope in
    beta at least as steep as the theorem's, the terminal rate near |lambda_min(V)| = 1, the figure data."""
    exp = run_experiment("low-temperature", size="small", seeds=5, seed=0)
    assert exp.verdict == "consistent", exp.lines()
    assert len(exp.fits) == 4 and all(exp.checks.values()), exp.lines()
    beta_fit, decay_fit, exit_fit, term_fit = exp.fits
    assert beta_fit.variable == "beta" and beta_fit.ci[0] <= beta_fit.theorem_slope
    assert decay_fit.ci[1] < 0
    assert exit_fit.slope < 0  # exp(-lam t_exit) falls: the window grows with beta
    assert 0.75 <= term_fit.slope <= 1.1
    ex = np.asarray(exp.data["exit_times"])
    assert np.all(np.diff(ex, axis=1) > 0)  # per seed, later exits at larger beta
    json.dumps(exp.to_dict())


def test_bad_input_gives_clear_errors():
    with pytest.raises(DomainError, match="lam"):
        LT.LowTempSetting(lam=-1.0)
    with pytest.raises(DomainError, match="sign"):
        LT.LowTempSetting(sign=0)
    with pytest.raises(NtkcheckError, match="n must be an integer"):
        LT.initial_tokens(LT.LowTempSetting(), 2, np.random.default_rng(0))
    st = LT.LowTempSetting()
    with pytest.raises(DomainError, match="beta"):
        LT.simulate_comoving(np.array([[0.1, -0.2]]), 0.0, st, [1.0])
    with pytest.raises(InputError, match="finite"):
        LT.simulate_comoving(np.array([[np.nan, -0.2]]), 1.0, st, [1.0])
    with pytest.raises(InputError, match="times"):
        LT.simulate_comoving(np.array([[0.1, -0.2]]), 1.0, st, [1.0, 0.5])
    with pytest.raises(InputError, match="both signs"):
        LT.projection(np.array([[0.0, 0.1], [0.0, 0.2]]), st)
    with pytest.raises(InputError, match="same number"):
        LT.wasserstein2(np.zeros((3, 2)), np.zeros((4, 2)))
    with pytest.raises(InputError, match="Q must be"):
        LT.simulate_tokens(np.zeros((3, 2)), 1.0, np.eye(3), np.eye(2), np.eye(2), [1.0])
    with pytest.raises(NtkcheckError, match="unknown size"):
        LT.run(size="huge")
    with pytest.raises(NtkcheckError, match="seeds"):
        LT.run(size="small", seeds=1)
    with pytest.raises(DomainError, match="sign = -1"):
        LT.run(size="small", setting=LT.LowTempSetting(sign=1))


def test_mutation_attention_without_temperature_is_caught(monkeypatch, capsys):
    """Softmax with beta fixed at 1 (the temperature dropped): W2 no longer depends on beta, the slopes
    in beta are 0, and `ntkcheck claims --only abstracts.low_temperature` exits 1 naming the claim."""
    real = LT.simulate_comoving

    def no_temperature(Z2, beta, setting, times, **kw):
        return real(Z2, 1.0, setting, times, **kw)

    monkeypatch.setattr(LT, "simulate_comoving", no_temperature)
    code = main(["claims", "--only", CLAIM_ID, "--examples", "20", "--json", "--no-shrink"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["unexpected"] == [CLAIM_ID], out["claims"][0]
    assert out["claims"][0]["refuted"] >= 1
