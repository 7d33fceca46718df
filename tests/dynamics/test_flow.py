"""Tests of the gradient flow machinery (issue 11): atoms with masses in the model, the NTK
on L^2(mu_i), the exponential integrator, the stopping rules, and the ``flow`` CLI.

Independent references used here: a token-level attention model written with loops in
this file (no masses, no padding, no shared code with ``ntkcheck.dynamics._attention``), finite
differences of it, mpmath for the phi functions, the closed-form solution of a linear
flow, and scipy's DOP853 as a second integrator.
"""

from __future__ import annotations

import json
import math

import mpmath
import numpy as np
import pytest

from ntkcheck.cgf import Empirical
from ntkcheck.cli import main
from ntkcheck.convergence import local_convergence
from ntkcheck.dynamics import (
    FlowStatus,
    _attention,
    _integrate,
    flow_time,
    forward,
    gradient_flow,
    init_params,
    kernel_plateau,
    loss_and_grad,
    ntk_spectrum,
    overlap_example,
)
from ntkcheck.errors import DomainError, InputError

#: two float64 routes through the same arithmetic (atoms with log-masses vs summed copies,
#: GEMM vs loops): rounding of O(1) quantities over a few layers.
RTOL_ROUTES = 1e-12
#: central differences with h = 1e-5 on O(1) losses: truncation ~1e-10, rounding ~1e-11.
RTOL_FD = 1e-6
FD_STEP = 1e-5


# ----------------------------------------------------------------------------- reference model


def _softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max())
    return e / e.sum()


def ref_forward(X: np.ndarray, V, Q, b, layers: int, T: float = 1.0) -> np.ndarray:
    """Token-level model of theory/ntk-prop8.md ("The model and FixUp initialisation") with loops: every token, every head, every layer."""
    H = Q.shape[0]
    X = np.array(X, dtype=np.float64)
    for _ in range(layers):
        out = np.zeros_like(X)
        for j in range(X.shape[0]):
            for h in range(H):
                p = _softmax(X @ (Q[h] @ X[j] + b[h]))
                out[j] += V[h] @ (p @ X)
        X = X + (T / (layers * H)) * out
    return X


def ref_loss(samples, params, targets, layers, T=1.0, loss="tokens") -> float:
    """(1/2n) sum_i (1/N_i) sum_j |x_T - y|^2 (tokens) or (1/2) sum_i |mean x_T - y_i|^2."""
    n = len(samples)
    tot = 0.0
    for i, x in enumerate(samples):
        out = ref_forward(x, params.V, params.Q, params.b, layers, T)
        if loss == "tokens":
            tot += 0.5 * np.sum((out - targets[i]) ** 2) / (n * len(x))
        else:
            tot += 0.5 * np.sum((out.mean(axis=0) - targets[i]) ** 2)
    return float(tot)


def ref_features(x: np.ndarray, Q, b) -> np.ndarray:
    """phi(x_j; Q_h, b_h) for every token, (N, H, d), by loops."""
    N, H = x.shape[0], Q.shape[0]
    out = np.zeros((N, H, x.shape[1]))
    for j in range(N):
        for h in range(H):
            out[j, h] = _softmax(x @ (Q[h] @ x[j] + b[h])) @ x
    return out


def _with_copies(seed: int = 0, d: int = 2):
    """Three samples; sample 0 repeats a token twice, sample 2 repeats one token."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, d))
    s0 = np.stack([a[0], a[1], a[0], a[2], a[0]])
    s1 = rng.standard_normal((3, d))
    c = rng.standard_normal((2, d))
    s2 = np.stack([c[0], c[1], c[1]])
    return [s0, s1, s2]


# ----------------------------------------------------------------------------- atoms with masses


def test_log_mass_softmax_is_the_token_softmax():
    """softmax_a(<q, x_a> + log m_a) over distinct atoms == softmax_j(<q, x_j>) summed over copies."""
    samples = _with_copies(1, d=3)
    p = init_params(3, 3, v_scale=1.0, q_scale=1.5, seed=4)
    got = forward(samples, p, layers=3, T=1.3)
    for g, x in zip(got, samples):
        ref = ref_forward(x, p.V, p.Q, p.b, 3, 1.3)
        np.testing.assert_allclose(g, ref, rtol=RTOL_ROUTES, atol=RTOL_ROUTES)
    # copies end where their atom ends
    np.testing.assert_array_equal(got[0][0], got[0][2])


def test_empirical_laws_and_arrays_give_the_same_model():
    samples = _with_copies(2)
    laws = [Empirical(x) for x in samples]
    p = init_params(2, 2, v_scale=0.7, seed=1)
    by_law = forward(laws, p, layers=2)
    by_array = forward(samples, p, layers=2)
    for law, x, got, ref in zip(laws, samples, by_law, by_array):
        assert got.shape == (law.n_atoms, 2)  # an Empirical's tokens are its atoms
        idx = [int(np.flatnonzero((law.atoms == row).all(axis=1))[0]) for row in x]
        np.testing.assert_allclose(got[idx], ref, rtol=RTOL_ROUTES, atol=RTOL_ROUTES)


@pytest.mark.parametrize("loss", ["tokens", "readout"])
def test_gradient_with_copies_matches_finite_differences_of_the_token_model(loss):
    """The atom model's loss is the token-level loss (targets that differ on copies included:
    the floor) and its gradient is the derivative of the loop reference."""
    samples = _with_copies(3)
    p = init_params(2, 2, v_scale=0.8, seed=2)
    rng = np.random.default_rng(5)
    tg = ([x + 0.3 * rng.standard_normal(x.shape) for x in samples] if loss == "tokens"
          else rng.standard_normal((3, 2)))
    val, g = loss_and_grad(samples, p, tg, layers=2, loss=loss)
    assert val == pytest.approx(ref_loss(samples, p, tg, 2, loss=loss), rel=RTOL_ROUTES)
    v = p.flat()
    fd = np.array([(ref_loss(samples, p.unflat(v + FD_STEP * e), tg, 2, loss=loss)
                    - ref_loss(samples, p.unflat(v - FD_STEP * e), tg, 2, loss=loss)) / (2 * FD_STEP)
                   for e in np.eye(v.size)])
    assert np.max(np.abs(g.flat() - fd)) <= RTOL_FD * np.max(np.abs(fd))


def test_targets_that_differ_on_copies_leave_a_loss_floor():
    """Copies of a token have equal outputs: the spread of their targets is out of reach."""
    x = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    samples = [x, np.array([[0.5, 0.5], [-1.0, 0.2]])]
    y = [x.copy(), samples[1].copy()]
    y[0][0] += [0.2, 0.0]
    y[0][1] -= [0.2, 0.0]  # mean of the copies' targets is the token itself
    floor = 0.5 * (2 * 0.2**2) / (2 * 3)  # (1/2n)(1/N_0) sum |y_j - mean|^2
    p = init_params(2, 4, seed=0)
    fl = gradient_flow(samples, p, y, layers=2, time_end=1.0, n_records=3, track_ntk=False)
    assert fl.loss_floor == pytest.approx(floor, rel=1e-14)
    assert fl.loss[0] == pytest.approx(floor, rel=1e-12)  # the outputs already are the atom targets
    assert "loss_floor" in fl.message


# ----------------------------------------------------------------------------- the NTK on L^2(mu_i)


def test_fixup_ntk_is_the_distinct_atom_gram_with_masses():
    """K = (T^2/n) G (x) I_d, G the Gram of sqrt(m_a / H) phi over the distinct atoms, with no
    zero eigenvalue from the copies; its spectrum is the non-zero spectrum of the token-slot
    Gram (F_tok^T F_tok = F_atom^T F_atom exactly, copies carrying 1/N each)."""
    samples = _with_copies(4)
    n, T, H, d = len(samples), 1.4, 6, 2
    p = init_params(d, H, q_scale=2.0, b_scale=2.0, seed=3)
    rows_atom, rows_tok = [], []
    for x in samples:
        law = Empirical(x)
        first = [int(np.flatnonzero((x == a).all(axis=1))[0]) for a in law.atoms]
        fa = ref_features(x, p.Q, p.b)[first].reshape(law.n_atoms, -1)  # softmax over the tokens
        rows_atom.append(np.sqrt(law.masses / H)[:, None] * fa)
        rows_tok.append(np.sqrt(1.0 / (len(x) * H)) * ref_features(x, p.Q, p.b).reshape(len(x), -1))
    Fa, Ft = np.concatenate(rows_atom), np.concatenate(rows_tok)
    ref = np.sort(np.repeat(T**2 / n * np.linalg.eigvalsh(Fa @ Fa.T), d))
    got = np.array(ntk_spectrum(samples, p, layers=3, T=T).eigenvalues)
    # two float64 routes to the same Gram: rounding relative to lambda_max
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * ref[-1])
    assert got[0] > 1e-6 * got[-1]  # positive: the copies add no kernel
    tok = np.sort(np.linalg.eigvalsh(Ft @ Ft.T))[::-1][: Fa.shape[0]]
    np.testing.assert_allclose(np.sort(tok), np.linalg.eigvalsh(Fa @ Fa.T), rtol=0, atol=1e-12 * tok[0])
    n_tok, n_atom = Ft.shape[0], Fa.shape[0]
    assert np.sum(np.linalg.eigvalsh(Ft @ Ft.T) < 1e-12 * tok[0]) == n_tok - n_atom


@pytest.mark.parametrize("loss", ["tokens", "readout"])
def test_dense_ntk_away_from_fixup_matches_finite_difference_jacobians(loss):
    """K = m W^{1/2} J J^T W^{1/2} over V, Q, b (V != 0, so all parts count; the V part is
    assembled by the kernel trick): non-zero spectrum against FD Jacobians of the loop
    reference on the tokens (copies have equal rows, which changes only the zeros)."""
    samples = _with_copies(6)
    n, layers, T = len(samples), 2, 1.2
    p = init_params(2, 2, v_scale=1.0, seed=7)
    v = p.flat()

    def outs(vec):
        q = p.unflat(vec)
        z = [ref_forward(x, q.V, q.Q, q.b, layers, T) for x in samples]
        if loss == "readout":
            return np.concatenate([o.mean(axis=0) for o in z])
        return np.concatenate([(o / np.sqrt(n * len(o))).ravel() for o in z])  # W^{1/2} z

    J = np.stack([(outs(v + FD_STEP * e) - outs(v - FD_STEP * e)) / (2 * FD_STEP) for e in np.eye(v.size)], axis=1)
    ref = np.sort(np.linalg.eigvalsh(p.heads * (J @ J.T)))[::-1]
    got = np.sort(ntk_spectrum(samples, p, layers=layers, T=T, loss=loss).eigenvalues)[::-1]
    # factors agree to the FD error (~1e-9 relative)
    np.testing.assert_allclose(got, ref[: got.size], rtol=0, atol=1e-7 * ref[0])
    assert np.all(ref[got.size:] < 1e-7 * ref[0])


def test_dense_ntk_over_the_memory_budget_is_refused(monkeypatch):
    samples = _with_copies(6)
    p = init_params(2, 2, v_scale=1.0, seed=7)
    monkeypatch.setattr(_attention, "NTK_MEMORY", 64)
    with pytest.raises(DomainError, match="GiB"):
        ntk_spectrum(samples, p, layers=2)


# ----------------------------------------------------------------------------- phi functions


def test_phi_functions_against_mpmath():
    z = np.array([0.0, -1e-9, -1e-3, -0.5, -0.999, -1.0, -3.7, -40.0, -1e6])
    for k in range(1, 5):
        got = _attention.phi(k, z)
        for zi, gi in zip(z, got):
            with mpmath.workdps(80):  # the closed form cancels ~30 digits at z = -1e6, k = 4
                zm = mpmath.mpf(float(zi))
                ref = (1 / mpmath.factorial(k) if zi == 0 else
                       (mpmath.exp(zm) - sum(zm**j / mpmath.factorial(j) for j in range(k))) / zm**k)
            # series below |z| = 1 and the recurrence above: a few ulps times k (cancellation)
            assert abs(gi - float(ref)) <= 1e-14 * abs(float(ref)), (k, zi, gi, ref)


# ----------------------------------------------------------------------------- the integrator


class _Lin:
    """A dense linear part for the integrator tests."""

    @staticmethod
    def of(B: np.ndarray) -> _attention._Linear:
        ev, U = np.linalg.eigh(B @ B.T)
        return _attention._Linear(ev, U, 1, Bd=B)


def _recorder(times, budget=None, target=None):
    return _integrate._Recorder(np.asarray(times, dtype=float), budget, target, lambda s, v: None)


def test_exponential_integrator_is_exact_on_the_linearised_flow():
    """theta' = -B^T (B theta - y): the solution is theta* + exp(-s B^T B)(theta_0 - theta*) on
    the range, constant on the kernel. Stiff (cond ~1e4) and still exact to rounding in a few steps."""
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    B = (U * np.sqrt(np.array([1e-3, 1e-2, 0.1, 1.0, 1.0]))) @ rng.standard_normal((5, 8))
    y = rng.standard_normal(5)
    th0 = rng.standard_normal(8)

    def field(th):
        r = B @ th - y
        return 0.5 * float(r @ r), -B.T @ r

    lin = _Lin.of(B)
    run = _integrate.exponential(field, th0, 1e4, lin, _recorder([0.0, 1e2, 1e4]), rtol=1e-10, atol=1e-14)
    ev, W = np.linalg.eigh(B.T @ B)
    th_star = np.linalg.lstsq(B, y, rcond=None)[0]
    scale = max(np.abs(th_star).max(), np.abs(th0).max())
    for s, th in zip(run.s, run.states):
        exact = th_star + W @ (np.exp(-s * ev) * (W.T @ (th0 - th_star)))
        # rounding of both formulas: eigenvalue errors ~eps lambda_max amplified by s, times |theta|
        np.testing.assert_allclose(th, exact, rtol=0, atol=1e4 * 1e-13 * scale)
    assert abs(run.s[-1] - 1e4) < 1e-9 and run.status is FlowStatus.COMPLETED
    # the step grows by the controller's maximal factor 5 from 1 / lambda_max: ~10 steps to
    # s = 1e4, where an explicit method would need lambda_max s / 2 ~ 2e4
    assert run.steps <= 15


def test_exponential_integrator_agrees_with_dop853_on_a_nonlinear_flow():
    """theta' = -B^T (B theta - y) + N(theta) with a smooth N the linear part does not know."""
    rng = np.random.default_rng(1)
    B = rng.standard_normal((4, 6)) * np.array([[3.0], [1.0], [0.3], [0.1]])
    y = rng.standard_normal(4)
    C = 0.05 * rng.standard_normal((6, 6))

    def field(th):
        r = B @ th - y
        return 0.5 * float(r @ r), -B.T @ r + np.tanh(C @ th)

    th0 = rng.standard_normal(6)
    times = np.linspace(0.0, 30.0, 7)
    run = _integrate.exponential(field, th0, 30.0, _Lin.of(B), _recorder(times), rtol=1e-8, atol=1e-12)
    ref = _integrate.ode_solver(field, th0, 30.0, _recorder(times), method="DOP853", rtol=1e-12, atol=1e-14)
    # the difference is the exponential integrator's global error: 3e-7 seen on |theta| ~ 2.4
    np.testing.assert_allclose(np.array(run.states), np.array(ref.states), rtol=0, atol=1e-5)


def test_flow_integrators_agree_on_the_model():
    """The exponential integrator, DOP853 and small-step gradient descent on one model run."""
    samples = _with_copies(7)
    p = init_params(2, 4, q_scale=2.0, b_scale=2.0, seed=1)
    rng = np.random.default_rng(2)
    y = rng.standard_normal((3, 2)) * 0.1 + np.array([x.mean(axis=0) for x in samples])
    kw = dict(layers=2, time_end=3.0, loss="readout", n_records=4, track_ntk=False)
    a = gradient_flow(samples, p, y, rtol=1e-9, atol=1e-14, **kw)
    b = gradient_flow(samples, p, y, method="DOP853", rtol=1e-11, atol=1e-14, **kw)
    c = gradient_flow(samples, p, y, step=5e-3, **kw)
    assert a.method.startswith("exponential") and b.method == "solve_ivp:DOP853"
    # two tight integrators: agreement to ~1e-8 relative, asserted at 1e-6
    np.testing.assert_allclose(a.loss, b.loss, rtol=1e-6)
    # explicit Euler in s: global error O(step lambda_max) ~ 1e-3 relative
    np.testing.assert_allclose(c.loss, b.loss, rtol=2e-2)
    assert a.loss[-1] < 0.8 * a.loss[0]


# ----------------------------------------------------------------------------- stopping rules


def test_flow_time_is_finite_for_singular_spectra():
    ft = flow_time([0.0, 1e-19, 3e-5, 0.2, 1.0], decades=4)
    assert ft.singular and ft.kernel_dim == 2 and ft.rate == 3e-5
    assert ft.time == pytest.approx(4 * math.log(10) / (2 * 3e-5))
    # every eigenvalue below the resolution: the floor sets the rate
    ft = flow_time([1e-30, 1e-25, 1.0])
    assert ft.rate == 1.0 and ft.singular  # the only resolved eigenvalue
    ft = flow_time([1e-12, 1e-9, 1.0])
    assert ft.rate == pytest.approx(1e-8)  # floor RATE_FLOOR_REL * lambda_max
    with pytest.raises(DomainError):
        flow_time([0.0, 0.0])


def test_budget_and_target_loss_stop_the_flow():
    samples = _with_copies(8)
    p = init_params(2, 4, seed=2)
    y = [x + 0.1 for x in samples]
    kw = dict(layers=2, time_end=1e6, n_records=5, track_ntk=False)
    fl = gradient_flow(samples, p, y, time_budget=0.05, **kw)
    assert fl.status is FlowStatus.TIME_BUDGET and fl.s[-1] < 1e6
    assert fl.time_requested == 1e6 and "wall-clock" in fl.message
    target = 0.5 * fl.loss[0]
    fl = gradient_flow(samples, p, y, loss_target=target, **kw)
    assert fl.status is FlowStatus.TARGET_LOSS and fl.loss[-1] <= target
    gd = gradient_flow(samples, p, y, loss_target=target, step=0.5, **kw)
    assert gd.status is FlowStatus.TARGET_LOSS and gd.loss[-1] <= target * (1 + 1e-12)
    rk = gradient_flow(samples, p, y, method="RK45", time_budget=0.05, **kw)
    assert rk.status is FlowStatus.TIME_BUDGET and rk.s[-1] < 1e6


def test_singular_local_convergence_ends():
    """Duplicated samples make the NTK singular: the default flow time comes from the slowest
    resolved mode instead of 1 / lambda_0 ~ 1e300."""
    rng = np.random.default_rng(3)
    base = [rng.standard_normal((3, 2)) for _ in range(2)]
    samples = base + [base[0].copy()]
    with pytest.warns(Warning, match="singular"):
        r = local_convergence(samples, heads=4, layers=1, loss="readout", n_records=4, track_ntk=False,
                              time_budget=20.0)
    assert r.lambda_0 < 1e-10 * r.lambda_max_0
    assert np.isfinite(r.time_end) and r.time_end < 1e6


def test_ntk_records_skip_when_over_budget(monkeypatch):
    samples = _with_copies(9)
    p = init_params(2, 3, seed=0)
    y = [x + 0.05 for x in samples]
    monkeypatch.setattr(_attention, "NTK_MEMORY", 64)
    fl = gradient_flow(samples, p, y, layers=2, time_end=0.5, n_records=3, track_ntk=True)
    assert np.isfinite(fl.lambda_min[0])  # FixUp: from the features, no dense Jacobian
    assert np.all(np.isnan(fl.lambda_min[1:])) and "not recorded" in fl.message


# ----------------------------------------------------------------------------- kernel plateau


def test_kernel_plateau_with_computed_kernel_direction():
    """The overlap example with every token given twice (the same laws): the kernel of K_0 is
    found from the spectrum, and that part of the loss plateaus."""
    samples, _ = overlap_example()
    samples = [np.concatenate([x, x]) for x in samples]
    r = kernel_plateau(samples=samples, heads=8, decades=2.0, n_records=6)
    assert r.kernel_source == "computed" and r.kernel_dim == 2
    assert r.kernel_loss_ratio > 0.99 and r.range_loss_ratio < 0.05


def test_kernel_plateau_refuses_a_positive_ntk():
    rng = np.random.default_rng(0)
    with pytest.raises(DomainError, match="no kernel"):
        kernel_plateau(samples=[rng.standard_normal((3, 2)) for _ in range(2)], heads=8, n_records=3)


# ----------------------------------------------------------------------------- CLI


def _save(tmp_path, samples, name="toks.npz"):
    path = tmp_path / name
    np.savez(path, **{f"sample_{i}": x for i, x in enumerate(samples)})
    return path


def test_cli_flow_singular_kernel_says_which_option(tmp_path, capsys):
    samples, _ = overlap_example()
    path = _save(tmp_path, samples)
    rc = main(["flow", str(path), "--loss", "tokens", "--heads", "4", "--layers", "1", "--records", "4",
               "--max-seconds", "20"])
    out, err = capsys.readouterr()
    assert rc == 0
    # one note, said once (wrapped to 100 columns since issue 25), naming the option
    note = " ".join(err.split())
    assert note.count("the NTK at FixUp is singular") == 1 and "--experiment plateau" in note
    assert all(len(ln) <= 100 for ln in err.splitlines())
    assert ".py:" not in err and "Warning:" not in err  # no raw Python warning
    assert "singular" in out and "no theorem rate" in out
    # a duplicated sample (readout loss): the same one-line note, a finite flow time
    rng = np.random.default_rng(4)
    base = [rng.standard_normal((3, 2)) for _ in range(3)]
    path = _save(tmp_path, base + [base[1].copy()], "dup.npz")
    rc = main(["flow", str(path), "--heads", "4", "--layers", "1", "--records", "4", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and " ".join(err.split()).count("--experiment plateau") == 1
    res = json.loads(out)
    assert res["flow"]["status"] == "completed" and res["time_end"] < 1e6


def test_cli_flow_budget_message(tmp_path, capsys):
    rng = np.random.default_rng(1)
    path = _save(tmp_path, [rng.standard_normal((3, 2)) for _ in range(3)])
    rc = main(["flow", str(path), "--heads", "4", "--layers", "2", "--records", "3", "--time", "1e7",
               "--max-seconds", "0.05"])
    assert rc == 0
    assert "by --max-seconds" in capsys.readouterr().out


def test_cli_flow_plateau(tmp_path, capsys):
    png = tmp_path / "plateau.png"
    rc = main(["flow", "--experiment", "plateau", "--heads", "8", "--records", "5", "--json", "--plot", str(png)])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernel_dim"] == 2 and out["kernel_source"] == "given" and out["kernel_loss_ratio"] > 0.99
    assert png.stat().st_size > 1000
    rng = np.random.default_rng(2)
    path = _save(tmp_path, [rng.standard_normal((3, 2)) for _ in range(2)], "pos.npz")
    rc = main(["flow", str(path), "--experiment", "plateau", "--heads", "8"])
    assert rc == 2
    assert "no kernel" in capsys.readouterr().err


def test_cli_flow_bad_options(capsys):
    assert main(["flow", "--experiment", "plateau", "--mix", "1.5"]) == 2
    assert "--mix" in capsys.readouterr().err
    assert main(["flow", "--method", "Euler", "--time", "0.1", "--heads", "2", "--layers", "1"]) == 2
    assert "method" in capsys.readouterr().err


def test_input_errors_of_the_flow():
    samples = _with_copies(0)
    p = init_params(2, 2)
    y = [x for x in samples]
    with pytest.raises(DomainError, match="time_budget"):
        gradient_flow(samples, p, y, layers=1, time_end=1.0, time_budget=-1.0)
    with pytest.raises(DomainError, match="loss_target"):
        gradient_flow(samples, p, y, layers=1, time_end=1.0, loss_target=float("nan"))
    with pytest.raises(InputError, match="target 0"):
        gradient_flow(samples, p, [np.zeros((2, 2))] + y[1:], layers=1, time_end=1.0)
