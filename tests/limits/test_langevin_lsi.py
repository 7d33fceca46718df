"""Mean-field Langevin where Assumption 6 is proved (seed 002 Thm. 8.3, eq. 28): the query-scale
model of ntkcheck.limits._langevin_lsi.

Each piece against an independent computation: the softmax moments against finite differences
and direct sums, the rigorous constants against dense evaluation far into the tails, the Gibbs
fixed point against a trapezoid quadrature with its own fixed-point iteration, the free-energy
identity against the definitions, the histogram estimator against exact gaps of Gaussian laws,
the particles against the Ornstein-Uhlenbeck recursion and against a finite-volume solution of
the nonlinear Fokker-Planck equation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import lln_tolerance
from scipy.optimize import brentq

from ntkcheck.errors import NtkcheckError
from ntkcheck.limits import _langevin_lsi as S

P = S.default_scale_problem()


def _direct_m(x, a):
    """m(a) by two nested loops over queries and keys (no vectorisation, no max-shift needed at |a| <= 5)."""
    tot = 0.0
    for xi in x:
        w = [math.exp(a * xi * xk) for xk in x]
        tot += sum(wk * xk for wk, xk in zip(w, x)) / sum(w)
    return tot / len(x)


def test_softmax_moments_against_direct_sums_and_finite_differences():
    """m against nested loops (1e-13: rounding); m' and m'' against central differences of m and m'
    (h = 1e-4: truncation h^2 |m'''| ~ 1e-7, rounding eps / h ~ 1e-12): 1e-6 absolute."""
    a = np.linspace(-5.0, 5.0, 41)
    m, dm, d2m = S.softmax_moments(P.tokens, a)
    np.testing.assert_allclose(m, [_direct_m(P.tokens, t) for t in a], rtol=0, atol=1e-13)
    h = 1e-4
    mp, dmp, _ = S.softmax_moments(P.tokens, a + h)
    mm, dmm, _ = S.softmax_moments(P.tokens, a - h)
    np.testing.assert_allclose(dm, (mp - mm) / (2 * h), atol=1e-6)
    np.testing.assert_allclose(d2m, (dmp - dmm) / (2 * h), atol=1e-6)


def test_cumulant_bounds_behind_the_constants():
    """The inequalities lsi_constants uses, on random laws on an interval of length w = 1:
    |kappa_2| <= w^2/4, |kappa_4| <= w^4/4; a law with mass 1 - eps on one atom has
    |kappa_2| <= eps w^2 and |kappa_3| <= 6 eps w^3."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(2, 7))
        x = rng.uniform(0.0, 1.0, n)
        x[0], x[1] = 0.0, 1.0  # span the interval
        p = rng.dirichlet(np.full(n, rng.choice([0.1, 1.0])))
        mu = p @ x
        c2, c3, c4 = (p @ (x - mu) ** k for k in (2, 3, 4))
        assert c2 <= 0.25 + 1e-15 and abs(c4 - 3 * c2**2) <= 0.25 + 1e-15
        eps = 1.0 - p.max()
        assert c2 <= eps + 1e-15 and abs(c3) <= 6 * eps + 1e-15


def test_lsi_constants_enclose_a_dense_evaluation_far_into_the_tails():
    """m(R) inside m_range and sup |m''| <= m2_sup, checked on 150000 points out to |a| = 2000
    (beyond the A of the proof); the bounds are also sharp (within 10 % of the dense values)."""
    c = S.lsi_constants(P)
    a = np.concatenate([np.linspace(-30, 30, 100001), np.linspace(-2000, 2000, 50001)])
    m, _, d2m = S.softmax_moments(P.tokens, a)
    assert c.m_range[0] <= m.min() and m.max() <= c.m_range[1]
    assert np.abs(d2m).max() <= c.m2_sup <= 1.1 * np.abs(d2m).max()
    assert (c.m_range[1] - c.m_range[0]) <= 1.01 * (m.max() - m.min())


@pytest.mark.parametrize("lam", [1.0, 2.0])
def test_bakry_emery_and_holley_stroock_inputs_hold_for_every_admissible_g(lam):
    """U_g = g v m + lam a^2 / 2 has U_g'' >= kappa and osc(g v m) <= omega for |g| <= G, and G
    bounds |xbar - y| for every law (xbar = xbar0 + v E m, E m in the range of m)."""
    prob = S.default_scale_problem(lam)
    c = S.lsi_constants(prob)
    a = np.linspace(-40, 40, 40001)
    m, _, d2m = S.softmax_moments(prob.tokens, a)
    for g in np.linspace(-c.G, c.G, 9):
        assert np.min(g * prob.value * d2m + lam) >= c.kappa - 1e-12
        osc = np.ptp(g * prob.value * m)
        assert osc <= c.omega + 1e-12
    xbar = prob.tokens.mean() + prob.value * np.array([m.min(), m.max()])
    assert np.max(np.abs(xbar - prob.target)) <= c.G + 1e-12
    # the rate eq. 28 then gives, with both constants
    assert c.rate(4.0) == pytest.approx(2 * max(c.kappa, lam * math.exp(-c.omega / 4.0)), rel=1e-14)


def _grid_gibbs(prob, beta, L=None, n=200001):
    """Gibbs fixed point by the trapezoid rule on a uniform grid and Brent's method on g (another
    quadrature and its own root solve): the density, xbar*, F(rho*)."""
    sig = math.sqrt(beta / prob.lam)
    L = L or 20 * sig + 5
    a = np.linspace(-L, L, n)
    da = a[1] - a[0]
    m = S.softmax_moments(prob.tokens, a)[0]

    def dens(g):
        U = g * prob.value * m + 0.5 * prob.lam * a * a
        w = np.exp(-(U - U.min()) / beta)
        return w / (w.sum() * da)

    def res(g):
        return g - (prob.tokens.mean() + prob.value * (dens(g) * m).sum() * da - prob.target)

    g = brentq(res, -10, 10, xtol=1e-15)
    rho = dens(g)
    xbar = prob.tokens.mean() + prob.value * (rho * m).sum() * da
    F = 0.5 * (xbar - prob.target) ** 2 + 0.5 * prob.lam * (rho * a * a).sum() * da \
        + beta * np.sum(np.where(rho > 0, rho * np.log(np.where(rho > 0, rho, 1.0)), 0.0)) * da
    return a, rho, xbar, F


@pytest.mark.parametrize("beta", [0.25, 1.0, 4.0])
def test_gibbs_scale_against_a_trapezoid_quadrature(beta):
    """Hermite quadrature + Brent against the trapezoid rule on 2e5 points (error ~1e-10 for these
    analytic, Gaussian-decaying integrands): mean output and free energy within 1e-9 plus twice
    the reported error (two Hermite resolutions; 2.5e-7 at beta = 4, where the Gibbs law is widest)."""
    g = S.gibbs_scale(P, beta)
    _, _, xbar, F = _grid_gibbs(P, beta)
    assert g.mean_output == pytest.approx(xbar, abs=1e-9 + 2 * g.error)
    assert g.free_energy == pytest.approx(F, abs=1e-9 + 2 * g.error)
    assert g.error < 1e-6


def _gap_of_density(prob, beta, a, rho, rho_star, xbar_star):
    """F(rho) - F(rho*) from the definitions (L_lambda + beta Ent on the grid) and the identity's
    right-hand side 1/2 (xbar - xbar*)^2 + beta KL(rho | rho*)."""
    da = a[1] - a[0]
    m = S.softmax_moments(prob.tokens, a)[0]

    def F(r):
        xb = prob.tokens.mean() + prob.value * (r * m).sum() * da
        ent = np.sum(np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)) * da
        return 0.5 * (xb - prob.target) ** 2 + 0.5 * prob.lam * (r * a * a).sum() * da + beta * ent

    xb = prob.tokens.mean() + prob.value * (rho * m).sum() * da
    pos = (rho > 0) & (rho_star > 0)  # both underflow far out, where rho log(rho / rho*) ~ 0
    kl = np.sum(rho[pos] * (np.log(rho[pos]) - np.log(rho_star[pos]))) * da
    return F(rho) - F(rho_star), 0.5 * (xb - xbar_star) ** 2 + beta * kl


@pytest.mark.parametrize("mu, s", [(2.5, 0.3), (0.5, 1.0), (-1.0, 0.2)])
def test_free_energy_identity(mu, s):
    """F_beta(rho) - F_beta(rho*) = 1/2 (xbar - xbar*)^2 + beta KL(rho | rho*) for the square loss
    (theory/limits-langevin.md): both sides from the definitions on one grid, to 1e-9."""
    beta = 1.0
    a, rho_star, xbar_star, _ = _grid_gibbs(P, beta, L=25.0, n=50001)
    rho = np.exp(-0.5 * ((a - mu) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    lhs, rhs = _gap_of_density(P, beta, a, rho, rho_star, xbar_star)
    assert lhs == pytest.approx(rhs, abs=1e-9) and lhs > 0


def _estimate(beta, samples):
    gib = S.gibbs_scale(P, beta)
    edges = S._edges(P, beta, (2.5, 0.3))
    masses = S.bin_masses(P, gib, edges)
    table = S._table(P, 30.0)
    return S.free_energy_gaps(P, samples, gib, edges, masses, table), masses


@pytest.mark.parametrize("beta", [0.25, 4.0])
def test_histogram_estimator_against_exact_gaps(beta):
    """Samples of N(mu, s^2) (m = 10000, 10 repetitions): the mean estimate matches the exact gap
    of the Gaussian (grid quadrature of the identity) within 6 standard errors plus 2 % (binning:
    the bin is a tenth of the Gibbs scale); samples of rho* itself (inverse CDF on the grid): the
    Miller-Madow estimate is centred at 0 within 6 standard errors."""
    rng = np.random.default_rng(5)
    a, rho_star, xbar_star, _ = _grid_gibbs(P, beta, L=30.0, n=30001)
    mu, s = 1.0, 0.6
    rho = np.exp(-0.5 * ((a - mu) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    exact = _gap_of_density(P, beta, a, rho, rho_star, xbar_star)[1]
    est, _ = _estimate(beta, rng.normal(mu, s, (10, 10000)))
    assert abs(est.mean() - exact) <= lln_tolerance(est.std(ddof=1), est.size) + 0.02 * exact
    cdf = np.cumsum(rho_star) * (a[1] - a[0])
    star = np.interp(rng.uniform(0, cdf[-1], (10, 10000)), cdf, a)
    est0, _ = _estimate(beta, star)
    assert abs(est0.mean()) <= lln_tolerance(est0.std(ddof=1), est0.size)


def test_particles_are_ornstein_uhlenbeck_when_the_value_is_zero():
    """v = 0: Psi = 0 and each head is Euler-Maruyama for da = -lam a ds + sqrt(2 beta) dW, whose
    law is Gaussian with mean (1 - lam h)^n a0 and variance sum 2 beta h (1 - lam h)^(2k): the
    sample mean and second moment of 40000 heads within 6 standard errors."""
    prob = S.ScaleProblem(P.tokens, value=0.0, target=1.0, lam=2.0)
    table = S._table(prob, 30.0)
    h, n, beta = 0.02, 30, 0.5
    _, heads = S.simulate_scale(prob, np.full((1, 40000), 1.5), beta=np.array([beta]), step=h, steps=n,
                                record_every=n, rng=np.random.default_rng(1), table=table)
    a = heads[-1, 0]
    mean = 1.5 * (1 - 2.0 * h) ** n
    var = sum(2 * beta * h * (1 - 2.0 * h) ** (2 * k) for k in range(n))
    assert abs(a.mean() - mean) <= lln_tolerance(math.sqrt(var), a.size)
    assert abs(a.var() - var) <= lln_tolerance(math.sqrt(2) * var, a.size)


def _fokker_planck(prob, beta, rho0, a, s_end):
    """The nonlinear Fokker-Planck equation d rho/ds = d/da (rho dU_g/da) + beta d^2 rho/da^2,
    g = xbar(rho) - y, by finite volumes with the Scharfetter-Gummel flux (exact discrete Gibbs
    equilibrium, positive) and explicit Euler steps of 0.4 da^2 / beta (stable below 0.5)."""
    da = a[1] - a[0]
    m = S.softmax_moments(prob.tokens, a)[0]
    dt = 0.4 * da * da / beta
    steps = int(math.ceil(s_end / dt))
    dt = s_end / steps
    rho = rho0.copy()

    def B(z):
        out = np.ones_like(z)
        nz = np.abs(z) > 1e-12
        out[nz] = z[nz] / np.expm1(z[nz])
        return out

    for _ in range(steps):
        g = prob.tokens.mean() + prob.value * (rho * m).sum() * da - prob.target
        z = np.diff(g * prob.value * m + 0.5 * prob.lam * a * a) / beta
        J = (beta / da) * (B(z) * rho[:-1] - B(-z) * rho[1:])
        div = np.zeros_like(rho)
        div[:-1] += J
        div[1:] -= J
        rho = rho - dt * div / da
    return rho


def test_particles_follow_the_fokker_planck_equation():
    """beta = 1: the particle estimate of F(rho_s) - F(rho*) (4 x 10000 heads, h = 0.005) against the
    gap of the Fokker-Planck solution (grid of 0.02) at s = 0.5 and 1: within 6 standard errors plus
    3 % (Euler-Maruyama bias O(lam h), binning)."""
    beta, s_end = 1.0, (0.5, 1.0)
    a, rho_star, xbar_star, _ = _grid_gibbs(P, beta, L=10.0, n=1001)
    rho0 = np.exp(-0.5 * ((a - 2.5) / 0.3) ** 2)
    rho0 /= rho0.sum() * (a[1] - a[0])
    table = S._table(P, 30.0)
    rng = np.random.default_rng(2)
    times, heads = S.simulate_scale(P, rng.normal(2.5, 0.3, (4, 10000)), beta=np.full(4, beta), step=0.005,
                                    steps=200, record_every=100, rng=rng, table=table)
    gib = S.gibbs_scale(P, beta)
    edges = S._edges(P, beta, (2.5, 0.3))
    masses = S.bin_masses(P, gib, edges)
    est = S.free_energy_gaps(P, heads, gib, edges, masses, table)  # (T, 4)
    prev, rho = 0.0, rho0
    for s in s_end:
        rho = _fokker_planck(P, beta, rho, a, s - prev)
        prev = s
        exact = _gap_of_density(P, beta, a, rho, rho_star, xbar_star)[1]
        k = int(np.argmin(np.abs(times - s)))
        assert abs(est[k].mean() - exact) <= lln_tolerance(est[k].std(ddof=1), 4) + 0.03 * exact, (s, est[k], exact)


def test_bad_input():
    with pytest.raises(NtkcheckError, match="distinct"):
        S.ScaleProblem(np.array([0.1, 0.1, 0.5]))
    with pytest.raises(NtkcheckError, match="lam"):
        S.ScaleProblem(P.tokens, lam=0.0)
    with pytest.raises(NtkcheckError, match="beta"):
        S.gibbs_scale(P, 0.0)
