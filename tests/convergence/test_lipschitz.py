"""Tests of ntkcheck.convergence.lipschitz: the certified L_K against measured Lipschitz ratios of the NTK,
the second-derivative bound against finite differences, and the Thm. 8.5 certificate.

The NTK here is rebuilt from a central-difference Jacobian of the public ``forward`` (no
adjoint, no code shared with the bound): K = H J J^T, J = dz/dtheta, z the readout means.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ntkcheck.cgf import as_laws
from ntkcheck.convergence.guarantee import convergence_certificate
from ntkcheck.convergence.lipschitz import lipschitz_bound, readout_ntk_fixup
from ntkcheck.dynamics import AttentionParams, forward, gradient_flow, init_params, ntk_spectrum
from ntkcheck.errors import DomainError, InputError

#: central differences of O(1) outputs with h = 1e-6: truncation ~h^2 = 1e-12, rounding
#: ~1e-16 / h = 1e-10 relative; the compared ratios are O(1e-2..1) and the bound exceeds them
#: by factors of 10 or more, so this error cannot decide a comparison
FD_H = 1e-6


def _outputs(samples, p, layers, T):
    # laws built once per call site (validation would dominate the ~1000 forward passes);
    # the data sets have distinct tokens, so the plain mean over atoms is the readout
    laws = samples if isinstance(samples, tuple) else tuple(as_laws(samples))
    return np.concatenate([o.mean(axis=0) for o in forward(list(laws), p, layers=layers, T=T)])


def _ntk_fd(samples, p, layers, T):
    samples = tuple(as_laws(samples))
    v = p.flat()
    cols = [(_outputs(samples, p.unflat(v + FD_H * e), layers, T) - _outputs(samples, p.unflat(v - FD_H * e), layers, T))
            / (2 * FD_H) for e in np.eye(v.size)]
    J = np.stack(cols, axis=1)
    return p.heads * J @ J.T


def _dist(p, q):
    return math.sqrt(float(np.sum((p.flat() - q.flat()) ** 2)) / p.heads)


def _perturbation(p0, rng, kind):
    """A direction of D-norm 1: Gaussian in every parameter, all on one head, or V only."""
    g = p0.unflat(rng.standard_normal(p0.size))
    if kind == "one head":
        mask = np.zeros(p0.heads)
        mask[rng.integers(p0.heads)] = 1.0
        g = AttentionParams(g.V * mask[:, None, None], g.Q * mask[:, None, None], g.b * mask[:, None])
    elif kind == "V only":
        g = AttentionParams(g.V, 0 * g.Q, 0 * g.b)
    v = g.flat()
    return v / math.sqrt(float(v @ v) / p0.heads)


DATASETS = {
    "two samples d=2": [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])],
    "three ragged d=2": [np.array([[0.5, 0.1], [-1.2, 0.7], [0.2, -0.9]]), np.array([[1.4, -0.3]]),
                         np.array([[-0.6, -1.0], [0.9, 1.1]])],
    "one sample d=3": [np.array([[0.4, -0.2, 1.0], [-1.1, 0.5, 0.3], [0.2, 0.9, -0.7]])],
}


@pytest.mark.parametrize("name", list(DATASETS))
@pytest.mark.parametrize("heads,layers", [(1, 1), (3, 2), (6, 3)])
def test_certified_LK_exceeds_measured_ratios(name, heads, layers):
    """Seed 002 Assumption 7: ||K(theta) - K(theta')|| <= L_K D(theta, theta') on the ball. The
    measured ratios (FD NTK, random perturbations: Gaussian, concentrated on one head, V only;
    pairs around FixUp and pairs of two perturbed points) never exceed the certified bound."""
    samples = DATASETS[name]
    d = samples[0].shape[1]
    p0 = init_params(d, heads, seed=heads + layers)
    T, r = 1.0, 0.05
    bound = lipschitz_bound(samples, p0, layers=layers, T=T, radius=r)
    K0 = _ntk_fd(samples, p0, layers, T)
    rng = np.random.default_rng(heads * 10 + layers)
    worst = 0.0
    for k, kind in enumerate(["gaussian", "one head", "V only", "gaussian"]):
        v = _perturbation(p0, rng, kind) * r * rng.uniform(0.2, 1.0)
        p1 = p0.unflat(p0.flat() + v)
        K1 = _ntk_fd(samples, p1, layers, T)
        worst = max(worst, np.linalg.norm(K1 - K0, 2) / _dist(p1, p0))
        if k == 3:  # a pair of perturbed points, both in the ball
            w = _perturbation(p0, rng, "gaussian") * r * 0.5
            p2 = p0.unflat(p0.flat() + w)
            worst = max(worst, np.linalg.norm(_ntk_fd(samples, p2, layers, T) - K1, 2) / _dist(p2, p1))
    assert worst > 0
    assert worst <= bound.L_K, (worst, bound)


@pytest.mark.parametrize("name", list(DATASETS))
def test_second_derivative_bound_exceeds_second_differences(name):
    """The core of the bound: |D^2 z[a, a]| <= B_2 for |a|_rho = 1 at points of the ball
    (second central differences, step 1e-4: truncation ~1e-8, rounding ~1e-16/1e-8 = 1e-8)."""
    samples = DATASETS[name]
    d = samples[0].shape[1]
    heads, layers, T, r, h = 4, 3, 1.0, 0.2, 1e-4
    p0 = init_params(d, heads, seed=7)
    bound = lipschitz_bound(samples, p0, layers=layers, T=T, radius=r)
    rng = np.random.default_rng(3)
    worst = 0.0
    samples = tuple(as_laws(samples))
    for kind in ["gaussian", "one head", "V only", "gaussian"]:
        centre = p0.flat() + _perturbation(p0, rng, "gaussian") * r * rng.uniform(0, 0.9)
        a = _perturbation(p0, rng, kind)
        f = [_outputs(samples, p0.unflat(centre + t * h * a), layers, T) for t in (-1, 0, 1)]
        worst = max(worst, float(np.linalg.norm((f[0] - 2 * f[1] + f[2]) / h**2)))
    assert 0 < worst <= bound.hessian_bound, (worst, bound.hessian_bound)
    # and the first derivative: |Dz[a]| <= B_1 at FixUp
    a = _perturbation(p0, rng, "V only")
    g = (_outputs(samples, p0.unflat(p0.flat() + 1e-6 * a), layers, T)
         - _outputs(samples, p0.unflat(p0.flat() - 1e-6 * a), layers, T)) / 2e-6
    assert np.linalg.norm(g) <= bound.jacobian_bound


def test_readout_ntk_fixup_is_the_fd_ntk():
    """K_0 = T^2 G_r (x) I_d at FixUp (closed form of the readout NTK, any depth): the FD NTK
    of forward agrees to the FD error (1e-9 relative to lambda_max)."""
    samples = DATASETS["three ragged d=2"]
    p = init_params(2, 5, seed=1)
    ev = np.sort(np.repeat(readout_ntk_fixup(samples, p.Q, p.b, T=1.5), 2))
    np.testing.assert_allclose(np.linalg.eigvalsh(_ntk_fd(samples, p, 3, 1.5)), ev, rtol=0, atol=1e-8 * ev[-1])


def test_certified_flow_obeys_the_guarantee():
    """The certified example of theory/local-convergence.md: 2 samples in d = 2, H = 6 heads
    shared over L = 2 layers, readout loss, targets at eps = 3e-4 (certified: Loss(0) is 0.09 of
    the threshold). The measured flow (solve_ivp DOP853 at rtol 1e-10) obeys the guaranteed
    rate on every record and stays within the guaranteed radius; its asymptotic rate is
    2 lambda_0 within the certified tolerance 2 L_K W (plus 1% for the fit over a finite window)."""
    samples = DATASETS["two samples d=2"]
    p = init_params(2, 6, seed=0)
    z0 = np.stack([x.mean(axis=0) for x in samples])
    rng = np.random.default_rng(1)
    u = rng.standard_normal(z0.shape)
    y = z0 + 3e-4 * u / np.linalg.norm(u)
    cert = convergence_certificate(samples, p, y, layers=2)
    assert cert.certified and cert.excess_factor < 0.1
    s_end = 3 * math.log(10) / (2 * cert.lambda_0)
    fl = gradient_flow(samples, p, y, layers=2, time_end=s_end, loss="readout", n_records=16, track_ntk=False,
                       rtol=1e-10, atol=1e-15, method="DOP853")
    s, L = np.array(fl.s), np.array(fl.loss)
    # integration error ~1e-9 relative on the loss: 1e-6 slack
    assert np.all(L <= np.exp(-cert.rate_guaranteed * s) * L[0] * (1 + 1e-6))
    assert max(fl.displacement) <= cert.displacement_bound
    late = s >= s[-1] / 2
    slope = -np.polyfit(s[late], np.log(L[late]), 1)[0]
    tol = 2 * cert.L_K * cert.displacement_bound + 0.01 * 2 * cert.lambda_0
    assert abs(slope - 2 * cert.lambda_0) <= tol, (slope, 2 * cert.lambda_0, tol)


def test_bad_inputs():
    samples = DATASETS["two samples d=2"]
    p = init_params(2, 3, seed=0)
    with pytest.raises(DomainError, match="shared over depth"):
        lipschitz_bound(samples, init_params(2, 3, layers=2), layers=2, radius=0.1)
    with pytest.raises(DomainError, match="radius"):
        lipschitz_bound(samples, p, layers=2, radius=-1.0)
    with pytest.raises(InputError, match="loss"):
        lipschitz_bound(samples, p, layers=2, radius=0.1, loss="mse")
    with pytest.raises(InputError, match="dimension"):
        lipschitz_bound([np.zeros((2, 3))], p, layers=1, radius=0.1)
    with pytest.raises(InputError, match="AttentionParams"):
        lipschitz_bound(samples, object(), layers=1, radius=0.1)


def test_singular_ntk_is_never_certified():
    """Three single Diracs in d = 1 (n > d, seed 003 Ex. 6): K_0 singular, no certificate."""
    samples = [np.array([[0.5]]), np.array([[1.5]]), np.array([[-1.0]])]
    p = init_params(1, 4, seed=0)
    y = np.array([[0.5], [1.5], [-1.0]]) + 1e-9
    c = convergence_certificate(samples, p, y, layers=1)
    assert not c.certified and c.lambda_0 <= 0
    assert ntk_spectrum(samples, p, layers=1, loss="readout").lambda_min < 1e-12


def test_cli_screen_thm85_rate(tmp_path, capsys):
    """``ntkcheck screen --thm85``: Thm. 8.5's lambda_0 and Lambda (readout loss, heads shared over
    depth T) for the screen's heads equal the extreme eigenvalues of the FD NTK of ``forward``
    (FD error ~1e-9 relative to lambda_max)."""
    from ntkcheck.cli import main

    samples = DATASETS["three ragged d=2"]
    data = tmp_path / "x.npz"
    np.savez(data, **{f"sample_{i}": x for i, x in enumerate(samples)})
    p = init_params(2, 5, seed=2)
    heads = tmp_path / "h.npz"
    np.savez(heads, Q=p.Q, b=p.b)
    assert main(["screen", str(data), "--heads-file", str(heads), "--depth-T", "1.5", "--thm85", "--no-certify",
                 "--json"]) == 3  # not certified (exit status 3)
    out = json.loads(capsys.readouterr().out)["thm85"]
    ev = np.linalg.eigvalsh(_ntk_fd(samples, p, 2, 1.5))
    np.testing.assert_allclose([out["lambda_0"], out["lambda_max_0"]], [ev[0], ev[-1]], rtol=0, atol=1e-8 * ev[-1])
    assert main(["screen", str(data), "--heads-file", str(heads), "--thm85", "--no-certify"]) == 3
    text = capsys.readouterr().out
    assert "Thm. 8.5 rate" in text and "Not the rate of seed 002 Thm. 8.5" in text
