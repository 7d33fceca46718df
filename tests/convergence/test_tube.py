"""The validated tube of the true flow (issue 31 item 3) against an independent integration.

A tiny model (two samples of two tokens in d = 2, two heads, two layers, P = 20 parameters) whose true flow
is integrated independently: DOP853 at rtol 1e-13 on the complex-step field (``_flow_reference.py``; its error,
below 1e-11, is far under the radii tested, 1e-6 and up). The tubes here are deliberately coarse (low order,
short steps, so that the numerical solution's own error is a fair fraction of the proved radius): the true
state stays inside the tube at every node, and each of the two terms of Gronwall's bound is needed: halving
the defect bound, or dropping the one-sided Lipschitz term, puts the true state outside.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _flow_reference import cs_field
from scipy.integrate import solve_ivp

import ntkcheck.convergence.enclosure.tube as tb
from ntkcheck.convergence.enclosure._model import model_of
from ntkcheck.dynamics import init_params

SAMPLES = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
H, D, L = 2, 2, 2


def _problem(eps=0.3):
    from ntkcheck.dynamics._experiment import _from_weighted, _setup

    p = init_params(D, H, seed=0)
    st = _setup(SAMPLES, p, L, 1.0, "readout")
    u = np.array([0.6, -0.8, 0.3, 0.1])
    y = st.z0 + eps * _from_weighted(st, u / np.linalg.norm(u))
    return p, y, model_of(SAMPLES, H, D, y, layers=L, T=1.0, loss="readout")


def _reference(y, theta0, times):
    sol = solve_ivp(lambda t, v: cs_field(SAMPLES, y, v, H, D, L), (0.0, float(times[-1])), theta0,
                    method="DOP853", rtol=1e-13, atol=1e-15, t_eval=times)
    return sol.y.T


def _distances(enc, y, theta0):
    times = np.array(enc.s)
    ref = _reference(y, theta0, times)
    return np.linalg.norm(ref - np.array(enc.states), axis=1) / math.sqrt(H), np.array(enc.radius)


def test_coarse_tube_contains_the_true_flow_and_needs_the_whole_defect(monkeypatch):
    """Second-order Taylor steps of 0.02 over [0, 2]: the true state is inside the tube at every node (the radius
    is at most 3 times the true error early on, so the bound is not vacuous); with the defect bound halved the
    true state leaves the tube (from its first node on: the mutated tube is built over [0, 0.2] only)."""
    p, y, mdl = _problem()
    opts = tb.TubeOptions(order=1, defect=1.0, max_step=0.02)
    enc = tb.enclose(mdl, p.flat(), 2.0, options=opts)
    err, rad = _distances(enc, y, p.flat())
    assert enc.complete and np.all(err <= rad)
    assert err[5] >= rad[5] / 3
    real = tb._defect

    def halved(*a, **k):
        integral, sup, bm, br = real(*a, **k)
        return integral / 2, sup / 2, bm, br

    monkeypatch.setattr(tb, "_defect", halved)
    enc2 = tb.enclose(mdl, p.flat(), 0.2, options=opts)
    err2, rad2 = _distances(enc2, y, p.flat())
    assert enc2.complete and np.any(err2 > rad2)


def _top_direction(y, theta):
    """The eigenvector of the symmetric part of Df with the largest eigenvalue (complex-step field, central
    differences of it at 1e-6)."""
    P = theta.size
    J = np.stack([(cs_field(SAMPLES, y, theta + 1e-6 * e, H, D, L) - cs_field(SAMPLES, y, theta - 1e-6 * e, H, D, L))
                  / 2e-6 for e in np.eye(P)], axis=1)
    w, V = np.linalg.eigh(0.5 * (J + J.T))
    return w[-1], V[:, -1]


def test_tube_from_an_offset_start_needs_the_one_sided_lipschitz_term(monkeypatch):
    """A tube started 1e-6 away from the true initial state, along the direction where the flow's solutions
    separate fastest (largest eigenvalue of sym Df, positive here): the true flow stays inside the tube; with
    the one-sided Lipschitz bound dropped (mu = 0: the radius only adds the defects) it leaves it (from the first
    node on: the mutated tube is built over [0, 0.25] only, about a dozen of its steps)."""
    p, y, mdl = _problem(eps=1.0)
    th0 = p.flat()
    lam, v = _top_direction(y, th0)
    assert lam > 0.05
    off = 1e-6
    start = tb.Start(0.0, th0 + off * v, off * (1.0 + 1e-9))
    opts = tb.TubeOptions(order=8, defect=1e-10)
    enc = tb.enclose(mdl, th0, 2.0, options=opts, start=start)
    err, rad = _distances(enc, y, th0)
    assert enc.complete and np.all(err <= rad)

    def no_mu(*a, **k):
        return 0.0, "mutated"

    monkeypatch.setattr(tb, "_segment_mu", no_mu)
    enc2 = tb.enclose(mdl, th0, 0.25, options=opts, start=start)
    err2, rad2 = _distances(enc2, y, th0)
    assert enc2.complete and np.any(err2 > rad2)


@pytest.mark.parametrize("order", [4, 10])
def test_defect_bound_dominates_the_defect_at_many_points(order):
    """The proved sup of the defect on a step is at least |p'(t) - f(p(t))| at 50 points of the step (the field
    by the complex step, p's derivative exactly)."""
    p, y, mdl = _problem(eps=0.5)
    c = tb.solution_jet(mdl, p.flat(), order)
    h = 0.1
    _, sup, _, _ = tb._defect(mdl, c, h)
    worst = 0.0
    for t in np.linspace(0.0, h, 50):
        pt = np.polynomial.polynomial.polyval(t, c)
        dp = np.polynomial.polynomial.polyval(t, c[1:] * np.arange(1, c.shape[0])[:, None])
        worst = max(worst, float(np.linalg.norm(dp - cs_field(SAMPLES, y, pt, H, D, L))))
    assert worst <= sup


def test_a_tube_whose_growth_overflows_stops_and_says_why():
    """A start whose last one-sided Lipschitz bound is huge (mu = 1e300: exp(mu * span) overflows float64 on every step longer than 1e-9) is no
    error: the tube ends at its start, incomplete, saying it could not be continued (the eps = 0.3 README run
    raised OverflowError there). From FixUp, such a stop is reported as limited by the tube."""
    p, y, mdl = _problem()
    enc = tb.enclose(mdl, p.flat(), 5.0, start=tb.Start(0.0, p.flat(), 0.0, 1e300))
    assert not enc.complete and enc.s == (0.0,) and "could not be continued" in enc.message, enc.message
    assert "overflows" in enc.message


def test_the_tube_loads_back_from_its_dict():
    """``Enclosure.from_dict(e.to_dict())`` equals ``e`` (the nodes' float states aside, which are not
    serialised), also through JSON text. Catches a field dropped from ``to_dict`` (``mu_last`` was)."""
    import json

    from ntkcheck.convergence.enclosure.tube import Enclosure

    e = Enclosure((0.0, 1.5, 3.0), (0.0, 1e-8, 3e-8), (0.3, 0.2), (1e-9, 2e-9), (5e-3, 1e-4, 2e-6), False,
                  "the time budget stopped the tube", 2.5, how=("taylor-model", "cheap"), mu_last=0.25)
    back = Enclosure.from_dict(json.loads(json.dumps(e.to_dict())))
    assert back == e and back.to_dict() == e.to_dict()
