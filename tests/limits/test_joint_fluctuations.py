"""Joint (N, H) fluctuations around the doubly mean-field limit (seed 002 section 10):
ntkcheck.limits.joint_fluctuations.

The head weights against their closed-form mean and variance, the batched moment series against
the softmax of chaos_tokens, the token systems against DOP853 on a field written out here, the
quadrature limit against two resolutions and against a large-N Monte Carlo, the additive fit on
surfaces whose parameters are known, the Gaussianity test's calibration (false rejections of
Gaussian samples, power against non-Gaussian ones), the small run, and the claim catching a head
average without its 1/H.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import lln_tolerance
from scipy import stats
from scipy.integrate import solve_ivp

from ntkcheck.cli import main
from ntkcheck.errors import NtkcheckError
from ntkcheck.limits import _chaos_tokens_ref as R
from ntkcheck.limits import joint_fluctuations as J
from ntkcheck.limits.rates import run_experiment

LAW = J.HEAD_LAW


def test_head_weights_mean_and_variance():
    """W_k = (1/H) sum_{k_r = k} v_r: mean vbar/m and variance ((vbar^2 + s^2/3)/m - vbar^2/m^2)/H,
    Monte Carlo over 40000 draws at H = 16, within 6 standard errors."""
    m, H = LAW.atoms, 16
    W = J.head_weights(LAW, H, 40000, np.random.default_rng(0))
    var = ((LAW.value**2 + LAW.spread**2 / 3) / m - LAW.value**2 / m**2) / H
    for k in range(m):
        assert abs(W[:, k].mean() - LAW.value / m) <= lln_tolerance(math.sqrt(var), len(W))
        assert abs(W[:, k].var() - var) <= lln_tolerance(var * math.sqrt(2.5), len(W))
    np.testing.assert_allclose(J.head_weights(LAW, None, 2, np.random.default_rng(0)), LAW.value / m, rtol=0)


def test_moment_series_against_the_softmax():
    """Batched series means against chaos_tokens' softmax route on weighted laws: 1e-13 (rounding:
    A <= 3 here, e^(2A) ulps)."""
    rng = np.random.default_rng(1)
    X, Y = rng.uniform(-1, 1.5, (3, 7)), rng.uniform(-1, 1.5, (3, 9))
    w, W = rng.dirichlet(np.ones(9), 3), rng.normal(size=(3, LAW.atoms))
    ref = sum(W[:, k:k + 1] * R.field_direct(X, Y, np.log(w), np.array([a]), np.ones(1))
              for k, a in enumerate(LAW.scores))
    np.testing.assert_allclose(J.velocity(X, Y, w, W, LAW), ref, rtol=0, atol=1e-13)


def test_token_system_against_dop853():
    """The mean token of a 6-token system with given weights against DOP853 on the field written out
    here (seed 002 eqs. 8, 10): 10 RK4 steps on [0, 2] are accurate to 1e-6."""
    rng = np.random.default_rng(2)
    X0 = J.LOC + rng.uniform(-1, 1, 6)
    W = J.head_weights(LAW, 8, 1, rng)[0]

    def field(t, x):
        out = np.zeros_like(x)
        for k, a in enumerate(LAW.scores):
            e = np.exp(a * np.outer(x, x))
            out += W[k] * (e @ x) / e.sum(axis=1)
        return out

    sol = solve_ivp(field, (0, J.T), X0, method="DOP853", rtol=1e-12, atol=1e-12)
    got = J.token_means(X0[None], W[None], LAW, 10)[0]
    assert got == pytest.approx(sol.y[:, -1].mean(), abs=1e-6)


def test_quadrature_limit_against_monte_carlo():
    """The doubly mean-field limit (24 vs 48 Gauss-Legendre nodes agree to 1e-7) against the mean token
    of 20 systems of 2000 tokens at the exact head average: within 6 standard errors plus the O(1/N)
    bias bound 1e-3."""
    W = J.head_weights(LAW, None, 1, np.random.default_rng(0))
    a, b = J.limit_means(W, LAW, 10, 24)[0], J.limit_means(W, LAW, 10, 48)[0]
    assert abs(a - b) < 1e-7
    rng = np.random.default_rng(3)
    X0 = J.LOC + rng.uniform(-1, 1, (20, 2000))
    mc = J.token_means(X0, np.repeat(W, 20, axis=0), LAW, 10)
    assert abs(mc.mean() - a) <= lln_tolerance(mc.std(ddof=1), len(mc)) + 1e-3


def test_additive_fit_recovers_known_surfaces():
    """Exact surfaces a N^-alpha + b H^-beta (+ c/(NH)) are recovered to 1e-6; with 20 % log-noise the
    exponents within 0.15."""
    Ns, Hs = (16, 32, 64, 128), (4, 16, 64, 256)
    iN, iH = J._design(Ns, Hs)
    for c in (0.0, 0.05):
        with np.errstate(divide="ignore"):
            mse = 0.03 * iN**1.1 + 0.01 * iH**0.9 + c * iN * iH
        mse[-1, -1] = np.nan
        p, res = J.additive_fit(mse, Ns, Hs, interaction=c > 0)
        np.testing.assert_allclose(p[:4], [0.03, 1.1, 0.01, 0.9], rtol=1e-6)
        assert res < 1e-8 and (c == 0 or p[4] == pytest.approx(c, rel=1e-6))
    noisy = mse * np.exp(0.2 * np.random.default_rng(4).standard_normal(mse.shape))
    p, _ = J.additive_fit(noisy, Ns, Hs)
    assert abs(p[1] - 1.1) < 0.15 and abs(p[3] - 0.9) < 0.15


def test_gaussian_check_calibration():
    """The Gaussianity check on samples of the experiment's default size (200) at the per-test level 1/300:
    exact Gaussian samples rejected in at most 1 % of 1500 trials (99 % Clopper-Pearson bound; the
    level is 0.33 %); uniform samples (the law of a bug that freezes the dynamics' CLT) rejected in
    at least 90 %, skewed ones (centred exponential) in at least 99 %."""
    rng = np.random.default_rng(5)
    trials, lev = 1500, J.LEVEL / 3

    def rejections(draw):
        return sum(not J.gaussian_check(draw(), lev)[0] for _ in range(trials))

    g = rejections(lambda: rng.standard_normal(200))
    u = rejections(lambda: rng.uniform(-1, 1, 200))
    e = rejections(lambda: rng.exponential(1, 200) - 1)
    assert stats.beta.ppf(0.99, g + 1, trials - g) <= 0.01, g
    assert stats.beta.ppf(0.01, u, trials - u + 1) >= 0.90, u
    assert stats.beta.ppf(0.01, e, trials - e + 1) >= 0.99, e


def test_small_experiment():
    """Size small, 5 seeds: both edge fits consistent with the CLT scaling, the Gaussianity checks
    hold, the joint exponents' intervals are reported."""
    res = run_experiment("joint-fluctuations", size="small", seeds=5)
    assert res.verdict == "consistent", res.lines()
    assert [f.variable for f in res.fits] == ["N", "H"] and len(res.checks) == 3
    j = res.data["joint"]
    assert j["alpha"][1] < j["alpha"][0] < j["alpha"][2] and j["beta"][1] < j["beta"][0] < j["beta"][2]
    json.dumps(res.to_dict())


def test_bad_input():
    with pytest.raises(NtkcheckError, match="unknown size"):
        J.run(size="huge")
    with pytest.raises(NtkcheckError, match="2 seeds"):
        J.run(size="small", seeds=1)


def test_mutation_head_sum_without_one_over_h_is_caught(monkeypatch, capsys):
    """A head "average" without the 1/H grows with H: the error at N = inf no longer decays in H."""
    real = J.head_weights
    monkeypatch.setattr(J, "head_weights", lambda law, H, count, rng: real(law, H, count, rng) * (H or 1))
    code = main(["claims", "--only", "002.sec10.joint_fluctuations", "--examples", "4", "--json", "--no-shrink"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["unexpected"] == ["002.sec10.joint_fluctuations"], out["claims"][0]
