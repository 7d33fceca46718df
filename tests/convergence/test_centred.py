"""The certificate centred at a state with V != 0 (issue 31 item 1) against independent computations.

References (``_flow_reference.py``, no code of the package's model): the Jacobian by the complex step, the
NTK's eigenvalues in mpmath, the loss in mpmath at 50 digits. The region's bounds are held against the
smallest :math:`\\sigma_{\\min}(B)` and the largest :math:`\\|B - B(\\theta^*)\\|` found at random points of the
certified ball and after a hill climb on its sphere (a projected random search, 60 evaluations); the
mutation that drops the Taylor remainder :math:`\\beta(r)` is caught there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _flow_reference import cs_jacobian, mp_eigenvalues, mp_loss, outputs_batch

from ntkcheck.convergence.centred import centred_certificate
from ntkcheck.convergence.enclosure._model import model_of
from ntkcheck.dynamics import init_params

MODELS = {
    "d=2, H=3, L=2": ([np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6], [0.1, 0.9]])], 3, 2),
    "d=3, H=4, L=3": ([np.random.default_rng(4).standard_normal((3, 3)) * 0.8,
                       np.random.default_rng(5).standard_normal((2, 3)) * 0.8], 4, 3),
}


def _case(name, v_scale=0.4, eps=1e-7):
    samples, H, L = MODELS[name]
    d = samples[0].shape[1]
    p = init_params(d, H, seed=2, v_scale=v_scale, q_scale=0.8, b_scale=0.8)
    z0 = outputs_batch(samples, p.flat()[None], H, d, L)[0]
    u = np.random.default_rng(9).standard_normal(z0.shape)
    y = z0 + eps * u / np.linalg.norm(u)
    mdl = model_of(samples, H, d, y, layers=L, T=1.0, loss="readout")
    return samples, p, y, mdl, H, d, L


def _B(samples, theta, H, d, L):
    """``sqrt(H) J`` (readout: unit weights): the NTK is ``H J J^T``, so ``sigma_min`` of this matrix is that of ``B``."""
    return math.sqrt(H) * cs_jacobian(samples, theta, H, d, L)


@pytest.mark.parametrize("name", list(MODELS))
def test_centre_spectrum_and_loss_against_mpmath(name):
    """At a centre with V != 0: lambda_min(K) >= the proved lower bound and lambda_max(K) <= the upper one for the
    NTK ``H J J^T`` of a complex-step Jacobian with mpmath eigenvalues (30 digits; the complex step is exact to
    rounding, so a tolerance of 1e-12 relative covers it), both within 1e-8 relative; the proved loss above
    the exact one (mpmath, 50 digits)."""
    samples, p, y, mdl, H, d, L = _case(name)
    c = centred_certificate(samples, p, mdl, layers=L, T=1.0, loss="readout")
    B = _B(samples, p.flat(), H, d, L)
    ev = mp_eigenvalues(B @ B.T)
    lo, hi = float(ev[0]), float(ev[-1])
    assert c.lambda_min <= lo * (1 + 1e-12) and hi * (1 - 1e-12) <= c.lambda_max
    assert c.lambda_min >= lo * (1 - 1e-8) and c.lambda_max <= hi * (1 + 1e-8)
    assert mp_loss(samples, y, p.flat(), H, d, L) <= c.loss_centre


def _search(samples, p, c, H, d, L, rng, evaluations=60):
    """The smallest sigma_min(B) and largest ||B - B*|| found in the ball D <= r: random points, then a projected
    random search on the sphere."""
    th0 = p.flat()
    B0 = _B(samples, th0, H, d, L)
    r = c.radius * math.sqrt(H)  # Euclidean radius of the particle-metric ball

    def evaluate(th):
        B = _B(samples, th, H, d, L)
        return np.linalg.svd(B, compute_uv=False)[-1], np.linalg.norm(B - B0, 2)

    best_s, best_dev = math.inf, 0.0
    cur = None
    for k in range(evaluations):
        if k < evaluations // 3 or cur is None:
            v = rng.standard_normal(th0.size)
            th = th0 + v / np.linalg.norm(v) * r * rng.uniform(0.5, 1.0)
        else:
            step = cur - th0 + rng.standard_normal(th0.size) * r * 0.3
            th = th0 + step / np.linalg.norm(step) * r
        s, dev = evaluate(th)
        if s < best_s:
            best_s, cur = s, th
        best_dev = max(best_dev, dev)
    return best_s, best_dev


@pytest.mark.parametrize("name", list(MODELS))
def test_region_bounds_hold_where_a_search_looks(name):
    """On the certified ball around a V != 0 centre: sigma_min(B) >= sigma_low and ||B - B(theta*)|| <= beta(r) at
    every point found; dropping the Taylor remainder (sigma_low := sqrt(lambda_min) at the centre, beta := 0) is
    refuted by the same search (a point with sigma_min below sqrt(lambda_min(K(theta*))) and ||B - B*|| > 0)."""
    samples, p, y, mdl, H, d, L = _case(name)
    c = centred_certificate(samples, p, mdl, layers=L, T=1.0, loss="readout")
    assert c.certified
    s_min, dev = _search(samples, p, c, H, d, L, np.random.default_rng(3))
    assert s_min >= c.sigma_low and dev <= c.deviation
    assert s_min < math.sqrt(c.lambda_min) and dev > 0  # the mutation beta = 0 is contradicted
