"""Tests of the certified Thm. 8.5 guarantee (ntkcheck.convergence.guarantee, jacobian_bound,
spectrum_bound, lipschitz_search) against computations that share no code with it:

* the readout NTK at FixUp rebuilt in mpmath at two precisions (softmax means from the tokens
  and heads), its eigenvalues by ``mpmath.eigsy``;
* the second derivative of the outputs and the Jacobian by central differences of the public
  ``forward`` at two step sizes;
* the flow itself (the run must obey a certified guarantee).
"""

from __future__ import annotations

import dataclasses
import json
import math

import mpmath
import numpy as np
import pytest

from ntkcheck.cgf import as_laws
from ntkcheck.convergence.guarantee import (
    certificate_from_spectrum,
    certificates_from_spectrum,
    convergence_certificate,
)
from ntkcheck.convergence.jacobian_bound import fixup_centre, jacobian_bound
from ntkcheck.convergence.lipschitz_search import lipschitz_search
from ntkcheck.convergence.spectrum_bound import certified_spectrum
from ntkcheck.dynamics import forward, init_params

SMALL = {
    "d=1, one sample": ([np.array([[0.5], [-1.0], [1.5]])], 1, 1),
    "d=2, two samples, H=2": ([np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])], 2, 1),
    "d=2, two samples, H=1, L=2": ([np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])], 1, 2),
}


def _z(laws, p, layers, T=1.0):
    return np.concatenate([o.mean(axis=0) for o in forward(list(laws), p, layers=layers, T=T)])


def _fd_jacobian(samples, p, layers, h):
    """J = dz/dtheta by central differences of ``forward`` (readout means), (n d, P)."""
    laws = tuple(as_laws(samples))
    v = p.flat()
    cols = [(_z(laws, p.unflat(v + h * e), layers) - _z(laws, p.unflat(v - h * e), layers)) / (2 * h)
            for e in np.eye(v.size)]
    return np.stack(cols, axis=1)


def _fd_hessian(samples, p, layers, h):
    """D^2 z at p by the four-point central difference of ``forward``, (n d, P, P)."""
    laws = tuple(as_laws(samples))
    v = p.flat()
    P = v.size
    E = np.eye(P) * h
    out = np.zeros((_z(laws, p, layers).size, P, P))
    for i in range(P):
        for j in range(i, P):
            f = [_z(laws, p.unflat(v + si * E[i] + sj * E[j]), layers) for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1))]
            out[:, i, j] = out[:, j, i] = (f[0] - f[1] - f[2] + f[3]) / (4 * h * h)
    return out


def _bilinear_norm(Tn, H, iters=300, starts=6, seed=0):
    """sup over |a|_rho = |b|_rho = 1 of |T[a, b]|, T (m, P, P), by alternating power iterations
    (a lower estimate of the norm, from several starts)."""
    rng = np.random.default_rng(seed)
    best = 0.0
    for _ in range(starts):
        a = rng.standard_normal(Tn.shape[1])
        a /= np.linalg.norm(a)
        for _ in range(iters):
            M = np.einsum("mpq,p->mq", Tn, a)  # (m, P): b -> T[a, b]
            U, S, Vt = np.linalg.svd(M, full_matrices=False)
            u, b = U[:, 0], Vt[0]
            a = np.einsum("mpq,m,q->p", Tn, u, b)
            a /= np.linalg.norm(a)
        best = max(best, float(np.linalg.norm(np.einsum("mpq,p,q->m", Tn, a, b))))
    return H * best  # unit Euclidean vectors have rho-norm 1/sqrt(H)


def _readout_evals_mp(samples, Q, b, T, dps):
    """Eigenvalues of T^2 G_r, (G_r)_{ii'} = (1/H) sum_h <phi_bar_ih, phi_bar_i'h>, all in mpmath."""
    with mpmath.workdps(dps):
        H, d = Q.shape[0], Q.shape[1]
        rows = []
        for x in samples:
            X = [[mpmath.mpf(float(v)) for v in row] for row in x]
            feats = []
            for h in range(H):
                Qh = [[mpmath.mpf(float(v)) for v in row] for row in Q[h]]
                bh = [mpmath.mpf(float(v)) for v in b[h]]
                mean = [mpmath.mpf(0)] * d
                for xj in X:
                    q = [sum(Qh[a][e] * xj[e] for e in range(d)) + bh[a] for a in range(d)]
                    w = [mpmath.exp(sum(q[a] * xk[a] for a in range(d))) for xk in X]
                    tot = sum(w)
                    for a in range(d):
                        mean[a] += sum(wk * xk[a] for wk, xk in zip(w, X)) / tot / len(X)
                feats.extend(mean)
            rows.append(feats)
        n = len(rows)
        G = mpmath.matrix(n, n)
        for i in range(n):
            for k in range(n):
                G[i, k] = mpmath.mpf(T) ** 2 * sum(u * v for u, v in zip(rows[i], rows[k])) / H
        ev = mpmath.eigsy(G, eigvals_only=True)
        return sorted(float(e) for e in ev), sorted(ev)


@pytest.mark.parametrize("name", ["two samples", "bundled four"])
def test_spectrum_bounds_against_mpmath_eigenvalues(name):
    """lambda_0 <= lambda_min(K_0) and Lambda >= lambda_max(K_0) (ball Cholesky), compared with the
    mpmath eigenvalues of the readout NTK built from its definition at 30 and 60 digits (which agree
    to 1e-25); the bounds are within 1e-6 relative of them (the gaps tried first are 1e-9)."""
    if name == "two samples":
        samples, p = SMALL["d=2, two samples, H=2"][0], init_params(2, 6, seed=0)
    else:
        from ntkcheck.io.files import bundled_path, load_samples

        samples, p = load_samples(bundled_path("screen_default.npz"))[:4], init_params(3, 16, seed=0)
    lo30, mp30 = _readout_evals_mp(samples, p.Q, p.b, 1.0, 30)
    lo60, mp60 = _readout_evals_mp(samples, p.Q, p.b, 1.0, 60)
    assert max(abs(float(a - b)) for a, b in zip(mp30, mp60)) < 1e-25
    s = certified_spectrum(samples, p, layers=3)
    assert s.proved and s.how == "arb-cholesky"
    assert s.lower <= lo60[0] <= s.lower * (1 + 1e-6)
    assert s.upper >= lo60[-1] >= s.upper * (1 - 1e-6)


@pytest.mark.parametrize("name", list(SMALL))
def test_first_order_bound_against_finite_differences(name):
    """||D^2 z(theta_0)||_rho <= first_order = c/2 + sqrt(c^2/4 + s^2): the second derivative by central
    differences of forward at h = 1e-4 and 2e-4 (agreeing to 1e-5 relative; truncation ~h^2, rounding
    ~1e-16/h^2), its norm by power iterations. The bound is within a factor 1.6 of it, and the
    mutation that drops the V-(Q, b) term s (keeping only c) is caught: the measured norm exceeds it."""
    samples, H, L = SMALL[name]
    p = init_params(samples[0].shape[1], H, seed=3)
    n1 = _bilinear_norm(_fd_hessian(samples, p, L, 1e-4), H)
    n2 = _bilinear_norm(_fd_hessian(samples, p, L, 2e-4), H)
    np.testing.assert_allclose(n1, n2, rtol=1e-5)  # the two step sizes agree: the FD norm is resolved
    ctr = fixup_centre(samples, p, layers=L, T=1.0)
    assert ctr is not None
    assert ctr.first_order >= n1 * (1 - 1e-5)
    assert ctr.first_order <= 1.6 * n1
    assert ctr.c < n1  # mutation: the V-(Q, b) term dropped is refuted by the measurement


def _fd_B(samples, p, layers, h=1e-6):
    return math.sqrt(p.heads) * _fd_jacobian(samples, p, layers, h)


@pytest.mark.parametrize("r", [1e-3, 3e-2])
def test_deviation_and_LK_hold_where_the_search_looks_hardest(r):
    """beta(r) >= ||B(theta) - B(theta_0)|| and L_K >= ||K(theta) - K(theta_0)|| / D on the ball, at the
    point the search found hardest and at random points (B = sqrt(H) dz/dtheta by central differences
    of forward, h = 1e-6: error ~1e-9, far below the margins compared)."""
    samples, _, _ = SMALL["d=2, two samples, H=2"]
    p = init_params(2, 3, seed=1)
    L = 2
    spec = certified_spectrum(samples, p, layers=L)
    ctr = fixup_centre(samples, p, layers=L, T=1.0)

    def prop(t):
        from ntkcheck.convergence.lipschitz import _bound, _check_model

        return _bound(_check_model(samples, p, L, 1.0, "readout"), p, L, 1.0, "readout", t, spec.upper).hessian_bound

    jb = jacobian_bound(ctr, prop, r, spec.upper)
    found = lipschitz_search(samples, p, layers=L, radius=r, evaluations=120)
    rng = np.random.default_rng(0)
    dirs = [found.direction] + [rng.standard_normal(p.size) for _ in range(4)]
    B0 = _fd_B(samples, p, L)
    for g in dirs:
        g = g * (r / math.sqrt(float(g @ g) / p.heads))
        q = p.unflat(p.flat() + g)
        B = _fd_B(samples, q, L)
        assert np.linalg.norm(B - B0, 2) <= jb.deviation
        assert np.linalg.norm(B @ B.T - B0 @ B0.T, 2) / r <= jb.L_K
    # the search's own ratio is below the certified constant too, and not absurdly far from it
    assert found.best_ratio <= jb.L_K


def test_halved_LK_is_refuted_by_a_measured_ratio():
    """Mutation: L_K / 2. On one sample in d = 1 (one head, one layer) the certified constant is within
    a factor 2 of the truth at r = 1e-5: the FD-measured ratio ||K(theta) - K_0|| / D at the search's
    hardest point exceeds half of it, so a halved bound would be refuted."""
    samples, H, L = SMALL["d=1, one sample"]
    p = init_params(1, H, seed=3)
    r = 1e-5
    spec = certified_spectrum(samples, p, layers=L)
    ctr = fixup_centre(samples, p, layers=L, T=1.0)
    jb = jacobian_bound(ctr, lambda t: math.inf, r, spec.upper)
    found = lipschitz_search(samples, p, layers=L, radius=r, evaluations=150)
    B0 = _fd_B(samples, p, L, 1e-7)
    B = _fd_B(samples, p.unflat(p.flat() + found.direction), L, 1e-7)
    measured = np.linalg.norm(B @ B.T - B0 @ B0.T, 2) / r
    assert jb.L_K / 2 < measured <= jb.L_K


@pytest.mark.usefixtures("shared_fixup")  # four certificates of one model: its loss-independent pieces once
def test_certificate_statement_and_threshold():
    """The certificate's own numbers satisfy the statement it certifies (the split-region theorem, the
    route at FixUp with the readout loss): W <= sqrt(2 Loss(0)) / sigma_low, W <= r_V, Psi(W) < r_q,
    sigma_0 - deviation <= sigma_low, rate = 2 sigma_low^2 in [lambda_0, 2 lambda_0] near the centre; the sharpened threshold admits at least what the corrected eq. 30 admits; a far target is
    refused with excess_factor = Loss(0) / threshold."""
    samples, _, _ = SMALL["d=2, two samples, H=2"]
    p = init_params(2, 6, seed=0)
    z0 = np.stack([x.mean(axis=0) for x in samples])
    u = np.array([[0.6, -0.8], [0.0, 0.0]])
    near = convergence_certificate(samples, p, z0 + 1e-5 * u, layers=2)
    far = convergence_certificate(samples, p, z0 + 1e-1 * u, layers=2)
    for c in (near, far):
        assert c.spectrum_proved and c.threshold >= c.threshold_eq30 > 0
    s0 = math.sqrt(near.lambda_0)
    u0 = math.sqrt(2 * near.loss_initial)
    assert near.certified and near.method == "split-region"
    # split region: sigma >= sigma_low > 0 on [0, W] and Sigma(W) = u0, so W <= u0 / sigma_low; the
    # Weyl form of the coercivity is a lower bound of sigma_low; W within r_V, Psi(W) < r_q
    assert 0 < s0 - near.deviation <= near.sigma_low * (1 + 1e-12) and near.sigma_low <= s0
    assert near.displacement_bound <= u0 / near.sigma_low * (1 + 1e-9)
    assert near.displacement_bound <= near.radius
    assert near.split.psi_bound < near.radius_psi
    np.testing.assert_allclose(near.rate_guaranteed, 2 * near.sigma_low ** 2, rtol=1e-9)
    assert near.lambda_0 <= near.rate_guaranteed <= 2 * near.lambda_0 and near.eq31_guaranteed
    assert not far.certified and math.isnan(far.rate_guaranteed)
    np.testing.assert_allclose(far.excess_factor, far.loss_initial / far.threshold, rtol=1e-12)
    # the threshold is the largest Loss(0) admitted: just below it certified, just above not
    for f, ok in ((0.99, True), (1.01, False)):
        c = certificate_from_spectrum(samples, p, layers=2, lambda_min=near.lambda_0, lambda_max=near.lambda_max_0,
                                      loss_initial=f * near.threshold)
        assert c.certified is ok


def test_one_family_gives_the_certificate_of_every_loss():
    """``certificates_from_spectrum`` makes the loss-independent pieces once and serves several initial
    losses (the 002.thm8.5 claim: the threshold at Loss(0) = 0, then a loss below it); each of its
    certificates equals the one-shot ``certificate_from_spectrum`` at that loss, computed from scratch, in
    any order of the losses (a piece that kept state from an earlier loss, e.g. the split region's setup
    made with that loss, would differ), and both sides of the threshold come out as the theorem says."""
    samples, _, _ = SMALL["d=2, two samples, H=2"]
    p = init_params(2, 6, seed=0)
    lam = dict(lambda_min=0.5, lambda_max=1.0)  # float64 values, used only where the spectrum is not proved
    family = certificates_from_spectrum(samples, p, layers=2, **lam)
    t = family(0.0).threshold
    assert t > 0
    losses = (0.99 * t, 0.0, 1.01 * t, 0.3 * t, 0.99 * t)
    got = [family(L0) for L0 in losses]
    for L0, c in zip(losses, got):
        ref = certificate_from_spectrum(samples, p, layers=2, loss_initial=L0, **lam)
        assert c.spectrum_proved  # so the placeholders above are unused
        assert json.dumps(c.to_dict(), sort_keys=True) == json.dumps(ref.to_dict(), sort_keys=True), L0  # NaN == NaN
    assert [c.certified for c in got] == [True, True, False, True, True]
    assert got[0].method == "split-region"


def _flow_json(capsys, args):
    from ntkcheck.cli import main

    code = main(["flow", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.usefixtures("shared_fixup")
def test_readme_example_certified(capsys, monkeypatch):
    """The README example (bundled data, samples 0-3, default heads, default --eps 0.01): the guarantee is
    certified (split region), the guaranteed rate is positive and below the measured one, the
    displacement within W and W within the radius; the JSON is valid against the shipped schema. The
    largest certifiable eps the text reports (0.01103) is refused just above it (--eps 0.0115), by a
    factor below 1.2."""
    import jsonschema

    from ntkcheck.cli._args import load_schema

    code, d = _flow_json(capsys, ["--samples", "0,1,2,3", "--ntk-records", "1"])
    jsonschema.validate(d, load_schema("flow"))
    c = d["certificate"]
    assert code == 0 and c["certified"] and c["spectrum_proved"] and d["guarantee_holds"] is True
    assert c["method"] == "split-region" and c["split"]["certified"]
    assert 0 < c["rate_guaranteed"] <= d["rate_measured"]
    assert d["displacement_max"] <= c["displacement_bound"] <= c["radius"]
    assert c["split"]["psi_bound"] < c["radius_psi"]
    assert 0 < d["lipschitz_lower"] <= c["L_K"]
    # just above the threshold: what is checked is the FixUp certificate's refusal, so the tube from FixUp to
    # the hand-off that follows it is not built (tube=False; tested in tests/convergence/test_from_fixup.py), and
    # the run has two records (the hand-off search, tested in test_handoff.py, checks one centred certificate)
    import functools

    import ntkcheck.convergence.local as local

    monkeypatch.setattr(local, "local_convergence", functools.partial(local.local_convergence, tube=False))
    code, d = _flow_json(capsys, ["--samples", "0,1,2,3", "--eps", "0.0115", "--ntk-records", "1", "--records", "2"])
    assert code == 0 and not d["certificate"]["certified"] and 1 < d["certificate"]["excess_factor"] < 1.2


@pytest.mark.usefixtures("shared_fixup")
def test_contradicted_guarantee_exits_1(capsys, monkeypatch):
    """Mutation of the certificate: a guaranteed rate three times too fast is contradicted by the run
    (the measured loss lies above its envelope), and ``flow`` exits 1; unmutated, 0."""
    import ntkcheck.convergence.guarantee as g

    real = g.certificate_from_spectrum

    def too_fast(*a, **k):
        c = real(*a, **k)
        return dataclasses.replace(c, rate_guaranteed=3 * c.rate_guaranteed)

    args = ["--samples", "0,1,2,3", "--eps", "0.001", "--ntk-records", "1", "--records", "8"]
    code, d = _flow_json(capsys, args)
    assert code == 0 and d["guarantee_holds"] is True
    monkeypatch.setattr(g, "certificate_from_spectrum", too_fast)
    code, d = _flow_json(capsys, args)
    assert code == 1 and d["guarantee_holds"] is False and d["exit_code"] == 1


@pytest.mark.usefixtures("shared_fixup")
def test_loss_at_the_rounding_floor_is_no_violation(capsys):
    """Issue 19 item 6: with --eps 1e-6 --time 1e4 the loss falls from 5e-13 to the float64 floor
    (~5e-32, residuals of one ulp of the outputs) by the first record. No rate is read from records at
    the floor, eq. 31 holds, exit 0, and no divide-by-zero warning; the stalled losses lie below the
    floor the run reports (an independent check: a residual of a few ulps of outputs of size ~2)."""
    from ntkcheck.cli import main

    code = main(["flow", "--eps", "1e-6", "--time", "1e4"])
    out, err = capsys.readouterr()
    assert code == 0 and "FAILS" not in out and "divide" not in err, (out, err)
    code, d = _flow_json(capsys, ["--eps", "1e-6", "--time", "1e4"])
    assert code == 0 and d["eq31_holds"]
    import jsonschema

    from ntkcheck.cli._args import load_schema

    jsonschema.validate(d, load_schema("flow"))  # the NaNs written as null included
    late = np.array(d["flow"]["loss"][1:])
    ulp_residual = 0.5 * 12 * (4 * np.spacing(2.0)) ** 2  # 12 outputs, 4 ulps of 2 each
    assert np.all(late <= max(d["loss_floor_rounding"], ulp_residual))
    # no rate above the floor is NaN, written as null by strict JSON and listed with its value in non_finite
    nan_rate = {"path": "/rate_measured", "value": "nan"} in d.get("non_finite", [])
    assert (d["rate_measured"] is None and nan_rate) or d["rate_measured"] >= d["lambda_0"]


def test_plot_draws_the_guaranteed_envelope_and_radius():
    """``flow --plot``: when the guarantee is certified the loss panel carries the envelope
    exp(-rate s) Loss(0) and the displacement panel the guaranteed radius, with their values."""
    from ntkcheck.cli.flow import _figure
    from ntkcheck.convergence import local_convergence

    samples, _, _ = SMALL["d=2, two samples, H=2"]
    res = local_convergence(samples, heads=3, layers=2, eps=1e-5, loss="readout", n_records=5, track_ntk=1,
                            search_evaluations=10)
    assert res.certificate.certified and res.guarantee_holds is True
    fig = _figure(res)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert any("guaranteed" in t and f"{res.certificate.rate_guaranteed:.3g}" in t for t in labels), labels
    assert "guaranteed radius (certified)" in labels
    radius = [ln for ln in fig.axes[2].get_lines() if ln.get_label() == "guaranteed radius (certified)"][0]
    np.testing.assert_allclose(radius.get_ydata()[0], res.certificate.displacement_bound, rtol=0)


def test_a_certificate_cut_by_the_budget_validates_against_the_schema(capsys, monkeypatch, tmp_path):
    """A FixUp certificate the time budget cut (``_budget.OutOfTime`` in ``certificate_from_spectrum``, as when a
    loaded machine spends ``--max-seconds`` on it) has no radius, deviation, L_K or threshold: ``flow --json``
    writes them as null (listed in ``non_finite``) and the object still validates against the shipped schema,
    which typed them "number" (the README example failed that way under load). Exit 0, "not certified (time
    budget spent)", the reason in ``cut``."""
    import jsonschema

    import ntkcheck.convergence.guarantee as g
    from ntkcheck import _budget
    from ntkcheck.cli._args import load_schema

    def cut(*a, **k):
        raise _budget.OutOfTime("the convergence certificate (test: the budget ran out)")

    monkeypatch.setattr(g, "certificate_from_spectrum", cut)
    samples, _, _ = SMALL["d=2, two samples, H=2"]
    path = tmp_path / "toks.npy"
    np.save(path, np.stack(samples))
    code, d = _flow_json(capsys, [str(path), "--heads", "3", "--layers", "2", "--eps", "1e-3", "--records", "4",
                                  "--ntk-records", "1"])
    c = d["certificate"]
    assert code == 0 and not c["certified"] and "test: the budget ran out" in c["cut"]
    assert c["message"].startswith("not certified (time budget spent)")
    assert c["L_K"] is None and c["threshold"] is None and {"path": "/certificate/L_K", "value": "nan"} in d["non_finite"]
    jsonschema.validate(d, load_schema("flow"))
