"""The split-region bounds (ntkcheck.convergence.coercivity) against the Jacobian measured in the region.

Every certified quantity of a profile is a bound over the whole region
:math:`\\Omega(r_V, r_q) = \\{|V|_\\rho \\le r_V, |\\psi - \\psi_0|_\\rho \\le r_q\\}`; here it is compared with the
value at many points of the region: random ones (inside and on the boundary) and the end points of a
short hill-climb that pushes each quantity towards its bound. The Jacobian ``B`` (``K = B B^T``) comes
from the model's backward pass (``lipschitz_search._Objective``), which shares no code with the bounds;
the first-order change :math:`L(\\delta) = DB_V(\\theta_0)[\\delta]` from central differences of it
(step ``1e-3`` of a displacement of size ``r``: truncation ~1e-6 r^3 ||D^3 B||, rounding ~1e-13,
both far below the bounds compared).

Mutations caught (the same check run on mutated code): the certified kappa halved, the remainder's
quadratic (Hessian) term dropped.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ntkcheck.convergence.coercivity.split as split_mod
from ntkcheck.convergence import guarantee, spectrum_bound
from ntkcheck.convergence.coercivity.split import _radius_grid
from ntkcheck.convergence.jacobian_bound import fixup_centre
from ntkcheck.convergence.lipschitz_search import _Objective, region_search
from ntkcheck.dynamics import init_params


def _data(d: int, n: int = 3, N: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N, d)) for _ in range(n)]


def _bundled():
    from ntkcheck.io.files import bundled_path, load_samples

    return load_samples(bundled_path("screen_default.npz"))[:4]


CASES = {  # samples, heads, layers, seed of the heads
    "d=2, H=3, L=2": (_data(2), 3, 2, 1),
    "d=3, H=2, L=3": (_data(3, n=2, seed=5), 2, 3, 1),
    "README example (d=3, H=16, L=4)": (_bundled(), 16, 4, 0),
}


def _setup(samples, p, L):
    """The setup as ``certificate_from_spectrum`` builds it (the same calls, looked up where it looks them up, so
    that the ``shared_fixup`` memo, where a test installs it, serves both)."""
    spec = spectrum_bound.certified_spectrum(samples, p, layers=L, T=1.0, loss="readout")
    ctr = fixup_centre(samples, p, layers=L, T=1.0)
    return guarantee.coercivity_setup(samples, p, layers=L, T=1.0, lambda_0=spec.lower, k_ball=spec.kernel,
                                      centre=ctr)


class _Probe:
    """The measured quantities at ``theta_0 + g`` (``g`` a flat displacement)."""

    def __init__(self, samples, p, L):
        self.obj = _Objective(samples, p, L, 1.0, "readout")
        self.nV = p.V.size
        self.B0V = self.obj.B0[:, :self.nV]
        self.K0 = self.B0V @ self.B0V.T

    def project(self, g, rV, rq):
        out = g.copy()
        for sl, r in ((slice(0, self.nV), rV), (slice(self.nV, None), rq)):
            n = math.sqrt(float(out[sl] @ out[sl]) / self.obj.H)
            if n > r:
                out[sl] *= r / n
        return out

    def point(self, rng, rV, rq, boundary):
        g = rng.standard_normal(self.obj.v0.size)
        for sl, r in ((slice(0, self.nV), rV), (slice(self.nV, None), rq)):
            n = math.sqrt(float(g[sl] @ g[sl]) / self.obj.H)
            g[sl] *= r / n * (1.0 if boundary else rng.uniform(0.2, 1.0))
        return g

    def measure(self, g):
        o, nV = self.obj, self.nV
        B = o.B(o.v0 + g)
        t = 1e-3
        lin = ((o.B(o.v0 + t * g) - o.B(o.v0 - t * g)) / (2 * t))[:, :nV]
        BV, BQ = B[:, :nV], B[:, nV:]
        vn = math.sqrt(float(g[:nV] @ g[:nV]) / o.H)
        E = lin @ self.B0V.T
        return {
            "sigma": float(np.linalg.svd(BV, compute_uv=False)[-1]),  # >= certified sigma
            "sigma_lin": float(np.linalg.svd(self.B0V + lin, compute_uv=False)[-1]),  # >= certified linear part
            "lam": float(np.linalg.eigvalsh(self.K0 + E + E.T)[0]),  # >= certified eigenblock bound
            "rho": float(np.linalg.norm(BV - self.B0V - lin, 2)),  # <= certified remainder
            "dev": float(np.linalg.norm(BV - self.B0V, 2)),  # <= c r_V + s r_q + rho
            "kappa": float(np.linalg.norm(BQ, 2)) / vn if vn > 0 else 0.0,  # <= certified kappa
        }


LOWER = ("sigma", "sigma_lin", "lam")


def _certified(setup, rV, rq):
    prof = {k: float(v[0]) for k, v in setup.profile(np.array([rV]), rq).items()}
    prof["dev"] = setup.c_lin * rV + setup.s_lin * rq + prof["rho"]
    prof["lam"] = float(setup.blocks.lam_low(np.array([rV]), rq)[0]) if setup.blocks is not None else -math.inf
    return prof


def _worst(probe, rV, rq, seed, climb=16):
    """Worst value of each quantity over 16 random points and a hill-climb from the worst of them."""
    rng = np.random.default_rng(seed)
    pts = [probe.point(rng, rV, rq, boundary=k % 2 == 0) for k in range(16)]
    vals = [probe.measure(g) for g in pts]
    worst = {}
    for key in vals[0]:
        sign = -1.0 if key in LOWER else 1.0
        k = int(np.argmax([sign * v[key] for v in vals]))
        g, best = pts[k], sign * vals[k][key]
        step = 0.3
        for _ in range(climb):  # random local moves kept when they push the quantity towards its bound
            cand = probe.project(g + step * probe.point(rng, rV, rq, boundary=True), rV, rq)
            f = sign * probe.measure(cand)[key]
            if f > best:
                g, best = cand, f
            else:
                step *= 0.7
        worst[key] = sign * best
    return worst


def _violations(worst, cert):
    bad = [k for k in LOWER if worst[k] < cert[k]]
    return bad + [k for k in ("rho", "dev", "kappa") if worst[k] > cert[k]]


def _radii(setup):
    ell = _radius_grid(setup)
    out = []
    for k in (1, 8, 12):
        rV = float(ell[k])
        out.append((rV, 0.5 * setup.s_lin * rV * rV / setup.sigma0))  # the (Q, b) radius the flow needs, roughly
    return out


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_region_bounds_hold_at_random_and_adversarial_points(name, fallback, monkeypatch):
    """On three regions (small, middle, near the end of the useful range): sigma_min(B_V) >= sigma,
    sigma_min(B_V0 + L) >= the linear part, lambda_min(K_0 + E) >= the eigenblock bound, and
    |B_V - B_V0 - L| <= rho, |B_V - B_V0| <= c r_V + s r_q + rho, |B_psi| / |V| <= kappa at the worst
    point found. The bounds are not vacuous: sigma > 0 on every region. ``fallback``: the routes used
    for large models (term-by-term eta norms, Weyl's linear part), forced by zero size limits. Without them the
    setup is the one the FixUp certificate builds, shared per process with the README model's certificates of
    the other tests (``_memo.share_fixup_certificate``; never with the fallback, which the memo's keys do not
    see)."""
    from _memo import share_fixup_certificate

    from ntkcheck.convergence.coercivity import _hessian, _linear

    if fallback:
        monkeypatch.setattr(_hessian, "MAX_MOTION", 0)
        monkeypatch.setattr(_linear, "MAX_ENTRIES", 0)
    else:
        share_fixup_certificate(monkeypatch)
    samples, H, L, seed = CASES[name]
    p = init_params(samples[0].shape[1], H, seed=seed)
    setup = _setup(samples, p, L)
    assert setup is not None
    assert (setup.linear, setup.quadratic) == (("weyl", "termwise") if fallback else ("eigenblocks", "hessian"))
    probe = _Probe(samples, p, L)
    for i, (rV, rq) in enumerate(_radii(setup)):
        cert = _certified(setup, rV, rq)
        assert cert["sigma"] > 0, (rV, rq, cert)
        worst = _worst(probe, rV, rq, seed=i)
        assert _violations(worst, cert) == [], (rV, rq, worst, cert)
        # the package's own adversary (gradient steps on the extreme singular values) finds nothing beyond
        found = region_search(samples, p, layers=L, radius_V=rV, radius_psi=rq, evaluations=60, seed=i)
        assert found.sigma_min >= cert["sigma"] and found.kappa <= cert["kappa"] and found.deviation_V <= cert["dev"]


def _small_region_worst(smallest=False):
    """The worst values on the small region of the first case (``smallest``: the grid's first radius
    and ``r_q = 0``, where the quadratic term of the remainder dominates the term-by-term part 100 to 1)."""
    samples, H, L, seed = CASES["d=2, H=3, L=2"]
    p = init_params(2, H, seed=seed)
    setup = _setup(samples, p, L)
    rV, rq = (float(_radius_grid(setup)[0]), 0.0) if smallest else _radii(setup)[0]
    return setup, rV, rq, _worst(_Probe(samples, p, L), rV, rq, seed=0)


def test_mutation_kappa_halved_is_caught(monkeypatch):
    """Mutation: the certified kappa halved. On the small region the measured |B_psi| / |V| exceeds
    half the bound (kappa is within a factor 2 of the truth there), so the check above fails."""
    setup, rV, rq, worst = _small_region_worst()
    assert _violations(worst, _certified(setup, rV, rq)) == []
    real = split_mod.region_bound

    def halved(*a, **k):
        rho, kappa, parts = real(*a, **k)
        return rho, kappa / 2.0, parts

    monkeypatch.setattr(split_mod, "region_bound", halved)
    assert "kappa" in _violations(worst, _certified(setup, rV, rq))


def test_mutation_remainder_quadratic_term_dropped_is_caught(monkeypatch):
    """Mutation: the second-order (Hessian-norm) term of the remainder dropped, leaving the term-by-term
    part. On the smallest region the measured remainder |B_V - B_V0 - L| exceeds what is left (by a
    factor ~20), while the unmutated bound holds."""
    setup, rV, rq, worst = _small_region_worst(smallest=True)
    assert _violations(worst, _certified(setup, rV, rq)) == []
    real = split_mod.region_bound

    def dropped(*a, **k):
        rho, kappa, parts = real(*a, **k)
        return rho - parts["quadratic"], kappa, parts

    monkeypatch.setattr(split_mod, "region_bound", dropped)
    assert "rho" in _violations(worst, _certified(setup, rV, rq))
