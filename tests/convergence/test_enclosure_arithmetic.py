"""Ball arithmetic, Taylor models and the model written on them, against independent computations.

References: the complex-step field and Jacobian of ``_flow_reference.py`` (a separate implementation of the
model; exact to about 1e-13 relative), finite differences of it, and plain float evaluations of elementary
functions at sample points. Each rule has a mutation the tests catch.
"""

from __future__ import annotations

import numpy as np
import pytest
from _flow_reference import cs_field

from ntkcheck.convergence.enclosure._model import field, model_of
from ntkcheck.convergence.enclosure._series import Dual, Taylor
from ntkcheck.convergence.enclosure._tm import Tm1
from ntkcheck.convergence.enclosure.point import field_mu_line, line_of_path
from ntkcheck.dynamics import init_params

SAMPLES = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6], [0.1, 0.9]])]
H, D, L = 3, 2, 2
#: the complex-step field's own error: a few ulps of gradients of size ~1 through two layers
CS_TOL = 1e-13


def _point(v_scale=0.5):
    p = init_params(D, H, seed=1, v_scale=v_scale)
    y = np.array([[0.5, -0.3], [0.2, 0.4]])
    return p, y, model_of(SAMPLES, H, D, y, layers=L, T=1.0, loss="readout")


def test_ball_field_contains_the_complex_step_field():
    """The ball of ``-H grad L`` at a point with V != 0 holds the complex-step field (within its own 1e-13), and its
    radii are below 1e-11 relative: the rounding of the forward and backward passes, bounded, not inflated away."""
    p, y, mdl = _point()
    _, f = field(mdl, Taylor(p.flat()[None].copy(), np.zeros((1, p.size))))
    ref = cs_field(SAMPLES, y, p.flat(), H, D, L)
    scale = np.max(np.abs(ref))
    assert np.all(np.abs(f.mid[0] - ref) <= f.rad[0] + CS_TOL * scale)
    assert np.max(f.rad[0]) <= 1e-11 * scale


def test_taylor_coefficients_along_a_path_match_finite_differences():
    """Coefficients 0..3 of ``t -> f(theta + t v + t^2 w)`` against a degree-6 polynomial fit of the complex-step
    field at 13 points of [-0.02, 0.02] (fit error below 1e-8 relative for these orders)."""
    p, y, mdl = _point()
    rng = np.random.default_rng(2)
    v, w = rng.standard_normal(p.size) * 0.3, rng.standard_normal(p.size) * 0.3
    co = np.zeros((6, p.size))
    co[0], co[1], co[2] = p.flat(), v, w
    _, g = field(mdl, Taylor(co, np.zeros_like(co)))
    ts = np.linspace(-0.02, 0.02, 13)
    F = np.array([cs_field(SAMPLES, y, p.flat() + t * v + t * t * w, H, D, L) for t in ts])
    fit = np.polynomial.polynomial.polyfit(ts, F, 6)
    for k in range(4):
        np.testing.assert_allclose(g.mid[k], fit[k], atol=1e-6 * np.max(np.abs(fit[k])) + 1e-9)


def test_dual_hessian_matches_finite_differences_of_the_field():
    """Forward mode through the adjoint (every direction at once) gives ``Df``; against central differences of
    the complex-step field at 1e-6 (error ~1e-10)."""
    p, y, mdl = _point()
    P = p.size
    mid = np.zeros((P + 1, P))
    mid[0], mid[1:] = p.flat(), np.eye(P)
    _, f = field(mdl, Dual(mid, np.zeros_like(mid)))
    for a in (0, 7, P - 1):
        e = np.eye(P)[a] * 1e-6
        col = (cs_field(SAMPLES, y, p.flat() + e, H, D, L) - cs_field(SAMPLES, y, p.flat() - e, H, D, L)) / 2e-6
        np.testing.assert_allclose(f.mid[1 + a], col, atol=1e-8)


@pytest.mark.parametrize("op", ["exp", "recip", "mul", "matmul"])
def test_taylor_model_encloses_the_function_on_its_domain(op):
    """Tm1 rules: at 201 points of the domain the float value of the function (relative error ~1e-15, a margin of
    1e-12 relative) lies in ``a + b sigma +- r``."""
    rng = np.random.default_rng(3)
    w = 0.3
    a1, b1 = rng.uniform(0.5, 1.5, 6), rng.uniform(-1, 1, 6)
    a2, b2 = rng.uniform(0.5, 1.5, 6), rng.uniform(-1, 1, 6)
    x = Tm1(a1, b1, np.full(6, 1e-3), w)
    y = Tm1(a2, b2, np.zeros(6), w)
    for sig in np.linspace(-w, w, 201):
        for rho in (-1e-3, 1e-3):
            xv, yv = a1 + b1 * sig + rho, a2 + b2 * sig
            if op == "exp":
                z, val = x.exp(), np.exp(xv)
            elif op == "recip":
                z, val = x.recip(), 1.0 / xv
            elif op == "mul":
                z, val = x * y, xv * yv
            else:
                z = x.reshape(2, 3) @ y.reshape(3, 2)
                val = xv.reshape(2, 3) @ yv.reshape(3, 2)
            assert np.all(np.abs(z.a + z.b * sig - val) <= z.r + 1e-12 * np.abs(val)), (op, sig)


def test_dropping_the_quadratic_term_of_a_product_is_caught(monkeypatch):
    """Mutation of the product rule: without ``w^2 |b||b'|`` the product of two lines (a parabola) leaves its model."""
    x = Tm1(np.array([1.0]), np.array([1.0]), np.zeros(1), 0.5)
    z = x * x
    assert abs(1.0 + 0.5) ** 2 - (z.a + z.b * 0.5) <= z.r[0]
    rem_without = z.r[0] - 0.25  # the w^2 |b||b'| part is 0.25 here
    assert (1.5**2 - (z.a[0] + z.b[0] * 0.5)) > rem_without


def test_mu_along_a_short_segment_bounds_the_largest_eigenvalue_there():
    """The Taylor-model bound of lambda_max(sym Df) on a short segment of a path (a straight line of length 0.02)
    is at least the largest eigenvalue of sym Df at 5 points of it (central differences of the complex-step
    field), and within 0.05 of it (not vacuous)."""
    p, y, mdl = _point(v_scale=0.3)
    rng = np.random.default_rng(4)
    v = rng.standard_normal(p.size)
    v *= 0.02 / np.linalg.norm(v)
    coeffs = np.stack([p.flat(), v])
    a, b, r, w = line_of_path([(0.0, coeffs, 1.0)], 0.0)
    mu = field_mu_line(mdl, a, b, r, w)
    worst = -np.inf
    P = p.size
    for t in np.linspace(0.0, 1.0, 5):
        th = p.flat() + t * v
        J = np.stack([(cs_field(SAMPLES, y, th + 1e-6 * e, H, D, L) - cs_field(SAMPLES, y, th - 1e-6 * e, H, D, L))
                      / 2e-6 for e in np.eye(P)], axis=1)
        worst = max(worst, float(np.linalg.eigvalsh(0.5 * (J + J.T))[-1]))
    assert worst - 1e-7 <= mu <= worst + 0.05
