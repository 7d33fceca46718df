"""Convergence from FixUp (issue 31 item 3): the tube to the hand-off, then the certificate covering its radius.

A small model (20 parameters) at eps = 0.3 is beyond its FixUp certificate; its true flow is integrated
independently (DOP853 at rtol 1e-13 on the complex-step field). The statement from FixUp holds for it: inside
the tube at every node, within the tube's radius of the hand-off state at s_k, and under the guaranteed
envelope after s_k. The mutation that takes the hand-off radius without the tube (start radius 0) is refuted:
the true state at s_k is not the tube's state.
"""

from __future__ import annotations

import math

import numpy as np
from _flow_reference import cs_field, loss_batch
from scipy.integrate import solve_ivp

SAMPLES = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
H, D, L = 2, 2, 2


def test_flow_from_fixup_converges_as_proved(beyond_fixup):
    """The run of ``ntkcheck flow`` on these samples (``conftest.beyond_fixup``: the command's result object, once
    per process; the same as ``local_convergence(SAMPLES, heads=2, layers=2, eps=0.3, loss="readout",
    n_records=11, time_end=120.0, track_ntk=1)``)."""
    res = beyond_fixup.result
    assert res.heads == H and res.layers == L and res.eps == 0.3 and res.time_end == 120.0
    assert not res.certificate.certified and res.handoff.found
    fx = res.from_fixup
    assert fx.certified, fx.message
    tube, c = fx.tube, fx.certificate
    times = np.array(tube.s)
    later = fx.s_k + np.linspace(0.0, 60.0, 13)
    sol = solve_ivp(lambda t, v: cs_field(SAMPLES, res.targets, v, H, D, L), (0.0, float(later[-1])),
                    res.flow.states[0], method="DOP853", rtol=1e-13, atol=1e-15, dense_output=True)
    ref = sol.sol(times).T
    err = np.linalg.norm(ref - np.array(tube.states), axis=1) / math.sqrt(H)
    assert np.all(err <= np.array(tube.radius))
    q_k = tube.states[-1]
    d_k = float(np.linalg.norm(sol.sol(fx.s_k) - q_k)) / math.sqrt(H)
    assert 0 < d_k <= fx.radius  # covered by the tube's radius, not by 0 (the mutation start_radius = 0)
    assert c.start_radius >= fx.radius
    after = sol.sol(later).T
    Ls = loss_batch(SAMPLES, res.targets, after, H, D, L)
    ref_floor = 0.5 * c.lambda_max * (after.shape[1] / H) * (1e-12 * np.max(np.abs(after))) ** 2
    assert np.all(Ls <= np.exp(-c.rate * (later - fx.s_k)) * c.start_loss * (1 + 1e-9) + ref_floor)
    dist = np.linalg.norm(after - q_k, axis=1) / math.sqrt(H)
    assert np.all(dist <= c.displacement_bound)
