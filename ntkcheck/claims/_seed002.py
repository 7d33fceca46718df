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

from typing import Any

import numpy as np
from hypothesis import strategies as st
from scipy.integrate import solve_ivp
from scipy.special import softmax

from ._core import Check, Claim, Instance

__all__ = ["attention_002", "attention_002_jacobian", "theta_norm", "CLAIMS_002"]


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
    d = draw(st.integers(1, 4))
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
    x = R * x / max(np.linalg.norm(x), 1e-12) * rng.uniform(0, 1)
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
    H = draw(st.integers(1, 3))
    scale = draw(st.sampled_from([0.5, 1.0, 2.0]))
    T = draw(st.sampled_from([0.5, 1.0, 2.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X0 = rng.standard_normal((N, d))
    if draw(st.booleans()):
        # V = scaled identity pushes every token outwards as fast as the bound allows
        Vs = np.stack([np.eye(d) * scale] * H)
    else:
        Vs = rng.standard_normal((H, d, d)) * scale
    Qs = rng.standard_normal((H, d, d)) * scale
    Ks = rng.standard_normal((H, d, d)) * scale
    return {"X0": X0, "Q": Qs, "K": Ks, "V": Vs, "T": T}


def _flow_radius(inst: Instance, n_eval: int = 41) -> tuple[np.ndarray, np.ndarray]:
    X0, Qs, Ks, Vs, T = inst["X0"], inst["Q"], inst["K"], inst["V"], float(inst["T"])
    N, d = X0.shape

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        X = z.reshape(N, d)
        v = np.mean([attention_002(X, X, Q, K, V) for Q, K, V in zip(Qs, Ks, Vs, strict=True)], axis=0)
        return v.reshape(-1)

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


@st.composite
def _convergence_instances(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 2))
    N = draw(st.integers(2, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    samples = [rng.standard_normal((N, 2)) for _ in range(n)]
    return {"samples": samples, "eps": draw(st.sampled_from([1e-3, 1e-2])), "heads": draw(st.integers(4, 8)),
            "seed": draw(st.integers(0, 2**16))}


def _run_convergence(inst: Instance) -> Any:
    import importlib

    dynamics = importlib.import_module("ntkcheck.dynamics")

    cache = inst.setdefault("_cache", {})  # type: ignore[attr-defined]
    if "run" not in cache:
        import warnings

        from ..errors import NtkcheckWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NtkcheckWarning)  # singular NTK: the hypothesis checker says so
            cache["run"] = dynamics.local_convergence(
                inst["samples"], heads=int(inst["heads"]), layers=2, eps=float(inst["eps"]), loss="readout",
                seed=int(inst["seed"]), n_records=8, decades=2.0, progress=False)
    return cache["run"]


def _thm85_hyp(inst: Instance) -> bool:
    r = _run_convergence(inst)
    lam0, lam_max = r.lambda_0, r.lambda_max_0
    if not lam0 > 1e-8 * lam_max:
        return False  # Assumption 7 fails: the NTK at initialisation is singular
    # eq. 30 with the unknown L_K replaced by the measured lower bound: its right side
    # decreases in L_K, so an initial loss above it certainly violates eq. 30
    LK = r.lipschitz_lower
    if np.isfinite(LK) and LK > 0:
        return bool(r.loss_initial <= lam0**4 / (16 * LK * (lam0 + 2 * lam_max * LK)))
    return True


def _thm85_concl(inst: Instance) -> Check:
    r = _run_convergence(inst)
    what = (f"lambda_0 = {r.lambda_0:.4g}, measured rate {r.rate_measured:.4g}; displacement {r.displacement_max:.3g} "
            f"vs bound (L_K -> inf) {r.displacement_bound:.3g}")
    if not r.eq31_holds:
        return Check.failed("eq. 31 violated: " + what)
    if r.displacement_max <= r.displacement_bound * (1 + 1e-9):
        return Check.held(what)
    # above the L_K -> inf bound but the true L_K is unknown: the theorem's bound is larger
    return Check.inconclusive(what)


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
    ),
    Claim(
        id="002.thm8.5",
        seed="002",
        place="Thm. 8.5",
        statement="NTK spectrum in [lambda_0, Lambda] at rho_0 and initial excess loss below eq. 30: gradient flow "
                  "(loss (1/2)|y - mean of mu_T|^2) satisfies L(s) - L* <= e^(-lambda_0 s)(L(0) - L*) (eq. 31) "
                  "and W_2(rho_s, rho_0) <= 2 sqrt(2 Lambda + lambda_0/L_K) (L(0) - L*)^(1/2) / lambda_0.",
        hypothesis=_thm85_hyp,
        conclusion=_thm85_concl,
        instances=_convergence_instances,
        examples=(lambda: {"samples": [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])],
                           "eps": 1e-3, "heads": 6, "seed": 0},),
        requires=("ntkcheck.dynamics",),
        cost=5,
    ),
]
