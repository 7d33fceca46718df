r"""Seed 002 (mean-field theory of transformers): Lemma 3.1, Lemma 3.2, Thm. 8.5.

Seed 002 uses the standard attention of its eq. 3 / eq. 8,

.. math::

    A(x, \mu, \theta) = \int K_\mu(x, y) V y \, d\mu(y), \qquad
    K_\mu(x, y) = \frac{\exp(\langle Qx, Ky\rangle / \sqrt d)}
                       {\int \exp(\langle Qx, Ky'\rangle / \sqrt d)\, d\mu(y')},

with :math:`\theta = (Q, K, V)` and Assumption 1 :math:`\|\theta\| \le D_\Theta`. The seed
does not fix the norm; every reading (Euclidean norm of :math:`\theta \in \mathbb R^p`,
Frobenius norms, operator norms) bounds each operator norm, so the checks use the
smallest admissible :math:`D_\Theta = \max(\|Q\|_2, \|K\|_2, \|V\|_2)`: a bound that holds
with it holds with all of them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st
from scipy.integrate import solve_ivp
from scipy.special import softmax

from ._core import Check, Claim, Instance

__all__ = ["attention_002", "attention_002_jacobian", "theta_norm", "fixup_readout_ntk", "flow_field_002", "CLAIMS_002"]


def attention_002(x: np.ndarray, Y: np.ndarray, Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    r"""Seed 002 eq. 8 attention of query tokens ``x`` against the empirical law of ``Y``.

    Parameters
    ----------
    x : (d,) or (m, d) array
    Y : (N, d) array, the atoms of :math:`\mu` (uniform weights)
    Q, K, V : (d, d) arrays

    Returns
    -------
    (d,) or (m, d) array: :math:`A(x, \mu, \theta)`
    """
    xs = np.atleast_2d(x)
    d = Y.shape[1]
    scores = (xs @ Q.T) @ (Y @ K.T).T / np.sqrt(d)  # (m, N)
    pi = softmax(scores, axis=1)  # max-shifted
    out = pi @ Y @ V.T
    return out[0] if np.ndim(x) == 1 else out


def attention_002_jacobian(x: np.ndarray, Y: np.ndarray, Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    r""":math:`\nabla_x A = V \,\mathrm{Cov}_\pi(Y)\, K^\top Q / \sqrt d` (``pi`` the softmax weights), shape (d, d)."""
    d = Y.shape[1]
    pi = softmax((Q @ x) @ (Y @ K.T).T / np.sqrt(d))
    m = pi @ Y
    C = (Y - m).T @ ((Y - m) * pi[:, None])
    return V @ C @ K.T @ Q / np.sqrt(d)


def theta_norm(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> float:
    """The smallest :math:`D_\\Theta` any reading of Assumption 1 allows: the largest operator norm."""
    return float(max(np.linalg.norm(Q, 2), np.linalg.norm(K, 2), np.linalg.norm(V, 2)))


# ----------------------------------------------------------------------------- instances


@st.composite
def _attention_instances(draw: Any) -> dict[str, Any]:
    # any dimension the lemma covers (the temperature 1/sqrt(d) matters from d = 5 on: a
    # missing temperature multiplies the Lipschitz constant by sqrt(d) > 2, the seed's slack)
    d = draw(st.integers(1, 6))
    N = draw(st.integers(1, 6))
    scale = draw(st.sampled_from([0.1, 0.5, 1.0, 2.0, 4.0]))
    R = draw(st.sampled_from([0.5, 1.0, 2.0, 5.0]))
    structure = draw(st.sampled_from(["random", "aligned", "sphere"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if structure == "aligned":
        # near-extremal: two antipodal atoms on the sphere, rank-one heads along them
        # (the variance along u is R^2, the largest a law on B_R can have)
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        Y = np.stack([R * u, -R * u] + [R * s * u for s in rng.uniform(-1, 1, max(0, N - 2))])
        P = np.outer(u, u) * scale
        Q, K, V = P.copy(), P.copy(), P.copy()
    else:
        Y = rng.standard_normal((N, d))
        norms = np.linalg.norm(Y, axis=1, keepdims=True)
        Y = R * Y / np.maximum(norms, 1e-12) * (1.0 if structure == "sphere" else rng.uniform(0, 1, (N, 1)))
        Q, K, V = (rng.standard_normal((d, d)) * scale for _ in range(3))
    x = rng.standard_normal(d)
    # x = 0 with antipodal atoms is the extremal point of (ii) (uniform attention, variance R^2)
    x = R * x / max(np.linalg.norm(x), 1e-12) * (0.0 if draw(st.booleans()) else rng.uniform(0, 1))
    x2 = rng.standard_normal(d)
    x2 = R * x2 / max(np.linalg.norm(x2), 1e-12) * rng.uniform(0, 1)
    return {"x": x, "x2": x2, "Y": Y, "Q": Q, "K": K, "V": V}


def _radius(inst: Instance) -> float:
    return float(max(np.linalg.norm(inst["Y"], axis=1).max(), np.linalg.norm(inst["x"]), np.linalg.norm(inst["x2"])))


def _in_ball(inst: Instance) -> bool:
    return bool(np.all(np.isfinite(inst["Y"])) and inst["Y"].shape[0] >= 1)


# ----------------------------------------------------------------------------- Lemma 3.1


def _bound_i(inst: Instance) -> Check:
    R = _radius(inst)
    D = theta_norm(inst["Q"], inst["K"], inst["V"])
    A = attention_002(inst["x"], inst["Y"], inst["Q"], inst["K"], inst["V"])
    val = float(np.linalg.norm(A))
    # relative slack of a few ulps: the bound can be attained (antipodal atoms, x = 0)
    return Check.of(val <= D * R * (1 + 1e-12) + 1e-300, f"|A| = {val:.6g}, D R = {D * R:.6g}, ratio {val / max(D * R, 1e-300):.4f}")


def _lipschitz_ii(inst: Instance) -> Check:
    Y, Q, K, V = inst["Y"], inst["Q"], inst["K"], inst["V"]
    d = Y.shape[1]
    R = _radius(inst)
    D = theta_norm(Q, K, V)
    C1 = 2 * D**3 * R**2 / np.sqrt(d)
    # three independent lower bounds on the Lipschitz constant on B_R: a difference
    # quotient of the pair, and the central-difference Jacobian at both points
    # (h = 1e-6 R: truncation O(h^2), rounding O(eps/h), both far below the 1e-6 slack)
    x, x2 = inst["x"], inst["x2"]
    dist = float(np.linalg.norm(x - x2))
    q = float(np.linalg.norm(attention_002(x, Y, Q, K, V) - attention_002(x2, Y, Q, K, V))) / dist if dist > 1e-9 else 0.0
    h = 1e-6 * max(R, 1e-3)
    jn = 0.0
    for p in (x, x2):
        J = np.stack([(attention_002(p + h * e, Y, Q, K, V) - attention_002(p - h * e, Y, Q, K, V)) / (2 * h)
                      for e in np.eye(d)], axis=1)
        jn = max(jn, float(np.linalg.norm(J, 2)))
    lip = max(q, jn)
    return Check.of(lip <= C1 * (1 + 1e-6) + 1e-12,
                    f"Lipschitz >= {lip:.6g}, 2 D^3 R^2/sqrt(d) = {C1:.6g}, ratio {lip / max(C1, 1e-300):.4f}")


def _seed_case_31() -> dict[str, Any]:
    # d = 1, two antipodal tokens: the variance R^2 is the largest possible on B_R
    one = np.eye(1)
    return {"x": np.zeros(1), "x2": np.full(1, 0.5), "Y": np.array([[1.0], [-1.0]]), "Q": one, "K": one, "V": one}


# ----------------------------------------------------------------------------- Lemma 3.2


@st.composite
def _flow_instances(draw: Any) -> dict[str, Any]:
    d = draw(st.integers(1, 3))
    N = draw(st.integers(2, 5))
    H = draw(st.integers(1, 4))
    scale = draw(st.sampled_from([0.5, 1.0, 2.0]))
    T = draw(st.sampled_from([0.5, 1.0, 2.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X0 = rng.standard_normal((N, d))
    if draw(st.booleans()):
        # tokens clustered far from the origin: the mean field s m(x) ~ s x is the extremal
        # outward push, R(t) ~ R0 e^(D t)
        c = rng.standard_normal(d)
        X0 = 4.0 * c / np.linalg.norm(c) + 0.1 * X0
    if draw(st.booleans()):
        # V = scaled identity pushes every token outwards as fast as the bound allows
        Vs = np.stack([np.eye(d) * scale] * H)
    else:
        Vs = rng.standard_normal((H, d, d)) * scale
    Qs = rng.standard_normal((H, d, d)) * scale
    Ks = rng.standard_normal((H, d, d)) * scale
    if draw(st.booleans()):
        # D_Theta attained by V alone (Q, K of operator norm <= |V|): the bound is tightest
        for A in (Qs, Ks):
            A *= scale / np.maximum(np.linalg.norm(A, ord=2, axis=(1, 2)), 1e-12)[:, None, None]
    return {"X0": X0, "Q": Qs, "K": Ks, "V": Vs, "T": T}


def flow_field_002(X: np.ndarray, Qs: np.ndarray, Ks: np.ndarray, Vs: np.ndarray) -> np.ndarray:
    r"""The multi-head field of seed 002 eq. 12 (``F = 0``) on the tokens ``X`` (N, d):
    :math:`\frac1H\sum_h A(x_j, \mu, \theta_h)` with :math:`\mu` the empirical law of ``X``."""
    return np.mean([attention_002(X, X, Q, K, V) for Q, K, V in zip(Qs, Ks, Vs, strict=True)], axis=0)


def _flow_radius(inst: Instance, n_eval: int = 41) -> tuple[np.ndarray, np.ndarray]:
    X0, Qs, Ks, Vs, T = inst["X0"], inst["Q"], inst["K"], inst["V"], float(inst["T"])
    N, d = X0.shape

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        return flow_field_002(z.reshape(N, d), Qs, Ks, Vs).reshape(-1)

    ts = np.linspace(0.0, T, n_eval)
    sol = solve_ivp(rhs, (0.0, T), X0.reshape(-1), t_eval=ts, rtol=1e-10, atol=1e-12, method="DOP853")
    Xs = sol.y.T.reshape(len(ts), N, d)
    return ts, np.linalg.norm(Xs, axis=2).max(axis=1)


def _confinement(inst: Instance) -> Check:
    D = max(theta_norm(Q, K, V) for Q, K, V in zip(inst["Q"], inst["K"], inst["V"], strict=True))
    ts, Rt = _flow_radius(inst)
    R0 = Rt[0]
    # C = D_Theta: Lemma 3.1(i) gives |V_rho(x)| <= D R(t) (attention only, F = 0)
    bound = R0 * np.exp(D * ts) + (np.exp(D * ts) - 1)
    # solver tolerance 1e-10 relative: allow 1e-8 relative slack
    ratio = float(np.max(Rt / bound))
    return Check.of(ratio <= 1 + 1e-8, f"max_t R(t) / (R0 e^(Ct) + e^(Ct) - 1) = {ratio:.4f} with C = D = {D:.4g}")


def _seed_case_32() -> dict[str, Any]:
    one = np.eye(2)[None]
    return {"X0": np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.5]]), "Q": one, "K": one, "V": one, "T": 1.0}


# ----------------------------------------------------------------------------- Thm. 8.5


def fixup_readout_ntk(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray, T: float) -> np.ndarray:
    r"""Eigenvalues of the readout NTK at FixUp from the definition (heads shared over depth).

    Independent of :mod:`ntkcheck.dynamics.model` and :mod:`ntkcheck.ntk.gram_matrix.pipeline`: the softmax means
    :math:`\bar\phi_{ih} = \frac1{N_i}\sum_j \sum_k \mathrm{softmax}_k(\langle Q_h x_{ij} + b_h, x_{ik}\rangle) x_{ik}`
    by :func:`scipy.special.softmax`, and :math:`K_0 = T^2 (\frac1H\sum_h \bar\phi_h\bar\phi_h^\top)\otimes I_d`
    (at ``V = 0`` the tokens do not move and only ``V`` acts: ``dz_i/dV_h = (T/H) d bar phi_ih``, mobility ``H``).
    Returns the ``n`` eigenvalues (each of multiplicity ``d``), ascending.
    """
    H = Q.shape[0]
    Phi = np.zeros((len(samples), H * samples[0].shape[1]))
    for i, x in enumerate(samples):
        for h in range(H):
            pi = softmax((x @ Q[h].T + b[h]) @ x.T, axis=1)  # (N, N): query j, context k
            Phi[i, h * x.shape[1]:(h + 1) * x.shape[1]] = (pi @ x).mean(axis=0)
    return np.linalg.eigvalsh(T**2 * (Phi @ Phi.T) / H)


@st.composite
def _convergence_instances(draw: Any) -> dict[str, Any]:
    # the whole hypothesis of the (corrected) theorem on this model: any token sets (single
    # tokens included), any head count and depth, an initial loss anywhere up to the
    # certified threshold, the residual along the slowest NTK mode (the tightest case for
    # the rate) or in a random direction
    d = draw(st.integers(1, 2))
    n = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.5, 1.0, 1.5]))
    samples = [rng.standard_normal((N, d)) * scale for N in sizes]
    return {"samples": samples, "heads": draw(st.integers(1, 8)), "layers": draw(st.integers(1, 3)),
            "T": draw(st.sampled_from([0.5, 1.0, 2.0])), "q_scale": draw(st.sampled_from([0.5, 1.0, 2.0])),
            "fraction": draw(st.sampled_from([1e-4, 1e-2, 0.1, 0.3, 0.6, 0.9, 0.999])),
            "direction": draw(st.sampled_from(["slowest", "random"])), "seed": draw(st.integers(0, 2**16))}


def _thm85_setup(inst: Instance) -> dict[str, Any]:
    """Heads, the independent K_0 spectrum, the certified L_K, and targets at the drawn fraction
    of the corrected eq. 30 threshold (cached on the instance)."""
    import importlib

    cache = inst.setdefault("_cache", {})  # type: ignore[attr-defined]
    if "setup" in cache:
        return cache["setup"]
    dynamics = importlib.import_module("ntkcheck.dynamics.model")
    lipschitz = importlib.import_module("ntkcheck.convergence.guarantee")
    samples = [np.asarray(x, dtype=np.float64) for x in inst["samples"]]
    d, T, L = samples[0].shape[1], float(inst["T"]), int(inst["layers"])
    p0 = dynamics.init_params(d, int(inst["heads"]), q_scale=float(inst["q_scale"]), b_scale=1.0, seed=int(inst["seed"]))
    ev = fixup_readout_ntk(samples, p0.Q, p0.b, T)
    z0 = np.stack([x.mean(axis=0) for x in samples])  # FixUp: the outputs are the input means, exactly
    # the proved spectrum, the scan and the split region's setup do not depend on Loss(0): made once
    certificate = lipschitz.certificates_from_spectrum(samples, p0, layers=L, T=T, loss="readout",
                                                       lambda_min=float(ev[0]), lambda_max=float(ev[-1]))
    cert = certificate(0.0)
    out: dict[str, Any] = {"samples": samples, "params": p0, "z0": z0, "evals": ev, "cert": None}
    if cert.lambda_0 > 0:
        # Loss(0) = fraction * threshold; the threshold does not depend on Loss(0)
        L0 = float(inst["fraction"]) * cert.threshold
        rng = np.random.default_rng(int(inst["seed"]) + 7)
        if inst["direction"] == "slowest":
            Phi_dir = _slowest_direction(samples, p0, T)
            u = np.outer(Phi_dir, rng.standard_normal(d)).reshape(-1)
        else:
            u = rng.standard_normal(z0.size)
        u /= np.linalg.norm(u)
        y = z0 + math.sqrt(2.0 * L0) * u.reshape(z0.shape)
        out["targets"] = y
        out["cert"] = certificate(L0)
    cache["setup"] = out
    return out


def _slowest_direction(samples: list[np.ndarray], p0: Any, T: float) -> np.ndarray:
    """Unit eigenvector (over samples) of the smallest eigenvalue of T^2 G_r (definition as above)."""
    H = p0.Q.shape[0]
    d = samples[0].shape[1]
    Phi = np.zeros((len(samples), H * d))
    for i, x in enumerate(samples):
        for h in range(H):
            Phi[i, h * d:(h + 1) * d] = (softmax((x @ p0.Q[h].T + p0.b[h]) @ x.T, axis=1) @ x).mean(axis=0)
    return np.linalg.eigh(Phi @ Phi.T)[1][:, 0]


def _thm85_hyp(inst: Instance) -> bool:
    # the corrected eq. 30 with the certified L_K (ntkcheck.convergence.lipschitz) and K_0 from the definition
    cert = _thm85_setup(inst)["cert"]
    return bool(cert is not None and cert.certified)


#: integrator tolerances of the check (the module's default integrator, rtol / atol on the
#: parameters); the loss values then carry relative errors ~1e-8, far inside RTOL_LOSS
_FLOW_RTOL, _FLOW_ATOL = 1e-9, 1e-15
#: wall-clock cap of one run (seconds): a run stopped early is checked on the records it reached
_FLOW_BUDGET = 20.0
#: slack on "Loss(s) <= exp(-rate s) Loss(0)" for the integration error (relative)
RTOL_LOSS = 1e-6


def _thm85_concl(inst: Instance) -> Check:
    import importlib

    dynamics = importlib.import_module("ntkcheck.dynamics.flow")
    st_ = _thm85_setup(inst)
    cert = st_["cert"]
    lam0, rate_g, W = cert.lambda_0, cert.rate_guaranteed, cert.displacement_bound
    time_end = 2.5 * math.log(10.0) / (2.0 * lam0)  # 2.5 decades of the slowest linearised mode
    flow = dynamics.gradient_flow(st_["samples"], st_["params"], st_["targets"], layers=int(inst["layers"]),
                                  T=float(inst["T"]), loss="readout", time_end=time_end, n_records=10,
                                  track_ntk=False, rtol=_FLOW_RTOL, atol=_FLOW_ATOL, progress=False,
                                  time_budget=_FLOW_BUDGET)
    s = np.array(flow.s)
    Ls = np.array(flow.loss)
    L0 = cert.loss_initial
    # rounding of the outputs z (O(1) numbers through L Euler layers) and of the targets:
    # an absolute error delta per residual, i.e. |r| delta + delta^2 on the loss
    z0 = st_["z0"]
    delta = 64 * np.finfo(float).eps * (1.0 + float(np.abs(z0).max())) * math.sqrt(z0.size)
    slack = np.sqrt(2.0 * Ls) * delta + delta**2
    # the flow's own loss at s = 0 must be the constructed Loss(0) (targets built right)
    if not abs(Ls[0] - L0) <= 1e-9 * L0 + slack[0]:
        return Check.failed(f"flow reports Loss(0) = {Ls[0]:.6e}, the targets give {L0:.6e}")
    ratio_g = float(np.max((Ls - slack) / (L0 * np.exp(-rate_g * s))))
    ratio_31 = float(np.max((Ls - slack) / (L0 * np.exp(-lam0 * s))))
    disp = np.array(flow.displacement)
    p_end = flow.final_params
    # the recorded displacement, recomputed from the final parameters (particle distance D)
    d_end = math.sqrt(float(np.sum((p_end.flat() - st_["params"].flat()) ** 2)) / st_["params"].heads)
    rate_seen = float(-np.log(Ls[-1] / Ls[0]) / s[-1])
    what = (f"lambda_0 = {lam0:.4g}, certified L_K <= {cert.L_K:.4g}, Loss(0)/threshold = {cert.excess_factor:.3g}; "
            f"guaranteed rate {rate_g:.4g}, measured {rate_seen:.4g} (max L(s)/(e^(-rate s) L(0)) = {ratio_g:.4f}); "
            f"displacement {disp.max():.3g} vs bound {W:.3g}")
    if ratio_31 > 1 + RTOL_LOSS:
        return Check.failed("eq. 31 violated: " + what)
    if ratio_g > 1 + RTOL_LOSS:
        return Check.failed("guaranteed rate 2 (lambda_0 - L_K W) violated: " + what)
    if not abs(disp[-1] - d_end) <= 1e-9 * max(d_end, 1e-300) + 1e-300:
        return Check.failed(f"recorded displacement {disp[-1]:.6e} != |theta_s - theta_0|_rho = {d_end:.6e}: " + what)
    if disp.max() > W * (1 + RTOL_LOSS):
        return Check.failed("displacement above the corrected bound 2 sqrt(2 Lambda + lambda_0) Loss(0)^(1/2) / lambda_0: "
                            + what)
    return Check.held(what)


def _thm85_pin(samples: list[list[list[float]]], heads: int, layers: int, fraction: float, direction: str) -> Any:
    return lambda: {"samples": [np.asarray(x, dtype=np.float64) for x in samples], "heads": heads, "layers": layers,
                    "T": 1.0, "q_scale": 1.0, "fraction": fraction, "direction": direction, "seed": 0}


CLAIMS_002: list[Claim] = [
    Claim(
        id="002.lemma3.1.i",
        seed="002",
        place="Lemma 3.1 (i)",
        statement="For mu supported in B_R, x in B_R and ||theta|| <= D: |A(x, mu, theta)| <= D R "
                  "(standard Q, K, V softmax attention of seed 002 eq. 3/8).",
        hypothesis=_in_ball,
        conclusion=_bound_i,
        instances=_attention_instances,
        examples=(_seed_case_31,),
        min_held=10,
    ),
    Claim(
        id="002.lemma3.1.ii",
        seed="002",
        place="Lemma 3.1 (ii)",
        statement="For mu supported in B_R: x -> A(x, mu, theta) is C_1-Lipschitz on B_R with "
                  "C_1 = 2 D^3 R^2 / sqrt(d).",
        hypothesis=_in_ball,
        conclusion=_lipschitz_ii,
        instances=_attention_instances,
        examples=(_seed_case_31,),
        min_held=10,
    ),
    Claim(
        id="002.lemma3.2",
        seed="002",
        place="Lemma 3.2",
        statement="Tokens moved by the frozen multi-head attention field (eq. 12, F = 0) from supp mu_0 in B_R0 "
                  "stay in B_R(t), R(t) = R0 e^(C t) + (e^(C t) - 1), with C = D_Theta.",
        hypothesis=lambda inst: True,
        conclusion=_confinement,
        instances=_flow_instances,
        examples=(_seed_case_32,),
        cost=2,
        min_held=5,
    ),
    Claim(
        id="002.thm8.5",
        seed="002",
        place="Thm. 8.5 (corrected constants)",
        statement="Heads shared over depth, readout loss (1/2) sum_i |y_i - mean(mu_T^i)|^2, spec(K_0) in "
                  "[lambda_0, Lambda], L_K a certified Lipschitz constant of K on the ball D <= lambda_0/(2 L_K), "
                  "and Loss(0) <= lambda_0^4 / (16 L_K^2 (2 Lambda + lambda_0)) (corrected eq. 30): gradient flow "
                  "satisfies Loss(s) <= e^(-2 (lambda_0 - L_K W) s) Loss(0) <= e^(-lambda_0 s) Loss(0) (eq. 31) and "
                  "D(theta_s, theta_0) <= W = 2 sqrt(2 Lambda + lambda_0) Loss(0)^(1/2) / lambda_0.",
        hypothesis=_thm85_hyp,
        conclusion=_thm85_concl,
        instances=_convergence_instances,
        examples=(
            # residual along the slowest mode, Loss(0) at 1e-4 of the threshold (W at 1% of the
            # proof's ball): the guaranteed rate is within 1% of 2 lambda_0, so a flow slower
            # than that is caught here
            _thm85_pin([[[0.3, -1.1], [1.7, 0.2]], [[1.2, 1.3], [-0.8, -0.6]]], 6, 2, 1e-4, "slowest"),
            # one sample: K_0 = lambda_0 I, the displacement reaches 0.41 of its bound
            _thm85_pin([[[0.3, -1.1], [1.7, 0.2], [-0.4, 0.9]]], 8, 2, 0.5, "random"),
        ),
        requires=("ntkcheck.dynamics.model", "ntkcheck.dynamics.flow", "ntkcheck.convergence.lipschitz"),
        cost=4,
        min_held=4,
    ),
]
