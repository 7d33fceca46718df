r"""The single-layer mean-field attention model of seed 002 section 8.2, its risk and its Gibbs state.

Private to :mod:`ntkcheck.limits.langevin` (which documents the experiment). Setting of
"A Mean-Field Theory of Transformers" (seed 002) Prop. 8.2: a fixed context measure
:math:`\mu_0 = \frac1N\sum_i\delta_{x_i}` on :math:`\mathbb R^d`, heads
:math:`\theta = (Q, K, V)\in\mathbb R^{3d^2}`, the attention of seed 002 eq. 3 / eq. 8

.. math::

    A(x, \mu_0, \theta) = \sum_k \mathrm{softmax}_k\big(\langle Qx, Kx_k\rangle/\sqrt d\big)\, V x_k ,

the head feature :math:`\Psi(\theta) = \int A(x, \mu_0, \theta)\,d\mu_0(x)` and the terminal
feature :math:`\bar x(\rho) = \bar x_0 + \int\Psi\,d\rho`, affine in the head measure
:math:`\rho`. The risk is :math:`\mathcal L(\rho) = \mathbb E_y\,\ell(\bar x(\rho), y)` over a
finite set of targets with a convex readout loss :math:`\ell` (``"square"``:
:math:`\frac12|z-y|^2`; ``"logcosh"``: :math:`\sum_a\log\cosh(z_a-y_a)`), and
:math:`\mathcal L_\lambda = \mathcal L + \frac\lambda2\int|\theta|^2d\rho` (Assumption 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import logsumexp

from .._validate import as_token_set
from ..errors import DomainError, InputError

LOSSES = ("square", "logcosh")


@dataclass(frozen=True)
class LangevinProblem:
    r"""One single-layer training problem: context tokens, targets, loss, weight decay.

    Attributes
    ----------
    tokens : ndarray, shape (N, d)
        Atoms of the fixed context measure :math:`\mu_0` (uniform weights).
    targets : ndarray, shape (M, d)
        The targets :math:`y` (uniform weights): :math:`\mathcal L = \frac1M\sum_y\ell(\bar x, y)`.
    lam : float
        Weight decay :math:`\lambda > 0` of Assumption 4 (:math:`\frac\lambda2\int|\theta|^2d\rho`).
    loss : {"square", "logcosh"}
        The convex readout loss of Assumption 5.
    """

    tokens: np.ndarray
    targets: np.ndarray
    lam: float = 1.0
    loss: str = "square"

    def __post_init__(self) -> None:
        X = as_token_set(self.tokens, "tokens")
        Y = as_token_set(self.targets, "targets", dim=X.shape[1])
        if self.loss not in LOSSES:
            raise DomainError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if not (isinstance(self.lam, (int, float)) and math.isfinite(self.lam) and self.lam > 0):
            raise DomainError(f"weight decay lam must be a positive finite number, got {self.lam!r}")
        object.__setattr__(self, "tokens", X)
        object.__setattr__(self, "targets", Y)
        object.__setattr__(self, "lam", float(self.lam))

    @property
    def d(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def p(self) -> int:
        """Dimension of one head, :math:`3d^2`."""
        return 3 * self.d**2

    @property
    def xbar0(self) -> np.ndarray:
        return self.tokens.mean(axis=0)


def as_particles(theta: Any, d: int, name: str = "particles") -> np.ndarray:
    """``theta`` as a finite float array of shape ``(m, 3, d, d)`` (``[:, 0] = Q``, ``K``, ``V``)."""
    arr = np.asarray(theta, dtype=float)
    if arr.ndim != 4 or arr.shape[1:] != (3, d, d) or arr.shape[0] < 1:
        raise InputError(f"{name}: expected heads of shape (m, 3, {d}, {d}) (Q, K, V per head), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name}: non-finite head parameters")
    return arr


def as_weights(weights: Any, m: int) -> np.ndarray:
    """Probability weights of ``m`` heads (None: uniform ``1/m``)."""
    if weights is None:
        return np.full(m, 1.0 / m)
    w = np.asarray(weights, dtype=float)
    if w.shape != (m,) or not np.all(np.isfinite(w)) or np.any(w < 0) or abs(w.sum() - 1.0) > 1e-9:
        raise InputError(f"weights: expected {m} non-negative weights summing to 1, got shape {w.shape}")
    return w


def _softmax_last(s: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (max-shifted). Reductions over a short last axis are slow in
    numpy, so the row maximum is an elementwise maximum over the columns and the row sum a GEMV."""
    n = s.shape[-1]
    if n <= 32:
        top = s[..., 0].copy()
        for k in range(1, n):
            np.maximum(top, s[..., k], out=top)
    else:
        top = s.max(axis=-1)
    e = np.exp(s - top[..., None])
    return e / (e @ np.ones(n))[..., None]


def _outer(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``P[(a, c), (i, k)] = q_ia k_kc``, shape ``(d^2, Nq Nk)``."""
    return np.einsum("ia,kc->acik", queries, keys).reshape(queries.shape[1] * keys.shape[1], -1)


def _scores(queries: np.ndarray, keys: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``s[j, i, k] = <Q_j q_i, K_j k_k> / sqrt(d) = sum_ac M_jac q_ia k_kc`` with ``M_j = Q_j^T K_j / sqrt(d)``:
    one GEMM ``(m, d^2) x (d^2, Nq Nk)``."""
    m, d = theta.shape[0], keys.shape[1]
    M = np.einsum("jba,jbc->jac", theta[:, 0], theta[:, 1]) / math.sqrt(d)
    return (M.reshape(m, d * d) @ _outer(queries, keys)).reshape(m, queries.shape[0], keys.shape[0])


def _values(keys: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``VX[j, a, k] = (V_j x_k)_a``, shape ``(m, d, N)``."""
    m, d = theta.shape[0], keys.shape[1]
    return (theta[:, 2].reshape(m * d, d) @ keys.T).reshape(m, d, keys.shape[0])


def attention(queries: np.ndarray, keys: np.ndarray, theta: np.ndarray) -> np.ndarray:
    r""":math:`A(q, \mu, \theta_j)` for every head ``j`` and query ``q``, against the uniform law of ``keys``.

    Returns shape ``(m, Nq, d)``.
    """
    pi = _softmax_last(_scores(queries, keys, theta))  # (m, Nq, Nk)
    return np.einsum("jik,jak->jia", pi, _values(keys, theta))


def _forward(tokens: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """``Psi`` of every head and what its vector-Jacobian product needs."""
    pi = _softmax_last(_scores(tokens, tokens, theta))  # (m, N, N)
    pbar = pi.mean(axis=1)  # (m, N)
    VX = _values(tokens, theta)
    psi = np.einsum("jak,jk->ja", VX, pbar)
    return psi, (VX, pi, pbar)


def _vjp(tokens: np.ndarray, theta: np.ndarray, cache: tuple[np.ndarray, ...], g: np.ndarray) -> np.ndarray:
    X = tokens
    N, d = X.shape
    VX, pi, pbar = cache
    m = pi.shape[0]
    gj = np.broadcast_to(np.asarray(g, dtype=float), (m, d))
    u = np.einsum("jak,ja->jk", VX, gj)  # (m, N): <g, V x_k>
    G = pi * (u[:, None, :] - np.einsum("jik,jk->ji", pi, u)[:, :, None]) / N  # d/ds_ik
    dM = (G.reshape(m, N * N) @ _outer(X, X).T).reshape(m, d, d)  # sum_ik G_ik x_i x_k^T
    c = 1.0 / math.sqrt(d)
    out = np.empty((m, 3, d, d))
    out[:, 0] = c * np.einsum("jbc,jac->jba", theta[:, 1], dM)  # dQ = K dM^T / sqrt d
    out[:, 1] = c * np.einsum("jba,jac->jbc", theta[:, 0], dM)  # dK = Q dM / sqrt d
    out[:, 2] = gj[:, :, None] * (pbar @ X)[:, None, :]  # dV = g (pbar X)^T
    return out


def head_features(tokens: np.ndarray, theta: np.ndarray) -> np.ndarray:
    r""":math:`\Psi(\theta_j) = \frac1N\sum_i A(x_i, \mu_0, \theta_j)`, shape ``(m, d)`` (seed 002 proof of Prop. 8.2)."""
    return _forward(tokens, theta)[0]


def head_features_vjp(tokens: np.ndarray, theta: np.ndarray, g: np.ndarray) -> np.ndarray:
    r"""Gradient in :math:`\theta_j` of :math:`\langle g, \Psi(\theta_j)\rangle` for every head, shape ``(m, 3, d, d)``;
    ``g`` of shape ``(d,)`` (one for all heads) or ``(m, d)`` (one per head).

    With :math:`s_{ik} = \langle Qx_i, Kx_k\rangle/\sqrt d`, :math:`\pi = \mathrm{softmax}_k s`,
    :math:`u_k = \langle g, Vx_k\rangle` and :math:`G_{ik} = \frac1N\pi_{ik}(u_k - \sum_l\pi_{il}u_l)`:
    :math:`\partial_V = g\,(\bar\pi X)^\top`, :math:`\partial_Q = K X^\top G^\top X/\sqrt d`,
    :math:`\partial_K = Q X^\top G X/\sqrt d`.
    """
    return _vjp(tokens, theta, _forward(tokens, theta)[1], g)


def readout(problem: LangevinProblem, theta: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    r"""The terminal feature :math:`\bar x(\rho) = \bar x_0 + \sum_j w_j\Psi(\theta_j)` of the head measure
    :math:`\rho = \sum_j w_j\delta_{\theta_j}`, shape ``(d,)``."""
    w = as_weights(weights, theta.shape[0])
    return problem.xbar0 + w @ head_features(problem.tokens, theta)


def loss_value(problem: LangevinProblem, z: np.ndarray) -> float:
    r""":math:`\frac1M\sum_y\ell(z, y)`."""
    r = z[None, :] - problem.targets
    if problem.loss == "square":
        return float(0.5 * np.mean(np.sum(r * r, axis=1)))
    a = np.abs(r)  # log cosh r = |r| + log(1 + e^{-2|r|}) - log 2, stable
    return float(np.mean(np.sum(a + np.log1p(np.exp(-2 * a)) - math.log(2.0), axis=1)))


def loss_grad(problem: LangevinProblem, z: np.ndarray) -> np.ndarray:
    r""":math:`\frac1M\sum_y\nabla_z\ell(z, y)`, shape ``(d,)``."""
    r = z[None, :] - problem.targets
    return (r if problem.loss == "square" else np.tanh(r)).mean(axis=0)


def risk(problem: LangevinProblem, theta: np.ndarray, weights: np.ndarray | None = None) -> float:
    r"""The single-layer risk :math:`\mathcal L(\rho) = \mathbb E_y\,\ell(\bar x(\rho), y)` (seed 002 Prop. 8.2)."""
    return loss_value(problem, readout(problem, theta, weights))


def interpolation_risks(problem: LangevinProblem, theta0: Any, theta1: Any, s: Any,
                        w0: Any = None, w1: Any = None) -> np.ndarray:
    r""":math:`\mathcal L((1-s)\rho_0 + s\rho_1)` on a grid of ``s`` in [0, 1], the mixtures written as one
    weighted particle set (weights :math:`(1-s)w_0` and :math:`s w_1`)."""
    t0 = as_particles(theta0, problem.d, "theta0")
    t1 = as_particles(theta1, problem.d, "theta1")
    a0, a1 = as_weights(w0, t0.shape[0]), as_weights(w1, t1.shape[0])
    ss = np.asarray(s, dtype=float).reshape(-1)
    if ss.size == 0 or not np.all(np.isfinite(ss)) or np.any(ss < 0) or np.any(ss > 1):
        raise InputError(f"s: expected interpolation parameters in [0, 1], got {ss.tolist()}")
    both = np.concatenate([t0, t1])
    return np.array([risk(problem, both, np.concatenate([(1 - si) * a0, si * a1])) for si in ss])


# ----------------------------------------------------------------------------- Prop. 8.2


@dataclass(frozen=True)
class Convexity:
    r"""The risk along :math:`(1-s)\rho_0 + s\rho_1` and what it shows (seed 002 Prop. 8.2).

    Attributes
    ----------
    s, risks : ndarray
        The grid and :math:`\mathcal L` on it.
    min_second_difference : float
        :math:`\min_k R(s_{k-1}) - 2R(s_k) + R(s_{k+1})` (uniform grid).
    quadratic_residual : float or None
        Square loss only: :math:`\max_k|R(s_k) - P(s_k)|` with :math:`P` the parabola through
        :math:`s = 0, \frac12, 1` (the risk is then exactly quadratic in ``s``); None otherwise.
    curvature : float or None
        Square loss only: :math:`\frac12|\bar x(\rho_1) - \bar x(\rho_0)|^2`, the leading coefficient
        the affine readout predicts, computed from the two endpoints alone.
    tolerance : float
        Rounding allowance: ``1e-11 max(1, max |R|)`` (float64 sums of O(m) terms, ~1e-14 relative).
    convex, quadratic : bool
    """

    s: np.ndarray
    risks: np.ndarray
    min_second_difference: float
    quadratic_residual: float | None
    curvature: float | None
    tolerance: float
    convex: bool
    quadratic: bool

    @property
    def holds(self) -> bool:
        return self.convex and self.quadratic


def convexity_along_interpolation(problem: LangevinProblem, theta0: Any, theta1: Any, *, w0: Any = None,
                                  w1: Any = None, grid: int = 21) -> Convexity:
    r"""Seed 002 Prop. 8.2 on one pair of head measures: second differences of
    :math:`s\mapsto\mathcal L((1-s)\rho_0 + s\rho_1)` on a uniform grid of ``grid`` points are
    :math:`\ge0`; for the square loss the risk is exactly the quadratic
    :math:`\frac12|\bar x_s - y|^2` with :math:`\bar x_s` affine, so it must equal the parabola
    through three of its values, with leading coefficient :math:`\frac12|\bar x(\rho_1)-\bar x(\rho_0)|^2`.
    """
    if int(grid) != grid or grid < 5 or grid % 2 == 0:
        raise InputError(f"grid: expected an odd number of points >= 5 (it must contain s = 1/2), got {grid!r}")
    s = np.linspace(0.0, 1.0, int(grid))
    R = interpolation_risks(problem, theta0, theta1, s, w0, w1)
    tol = 1e-11 * max(1.0, float(np.max(np.abs(R))))
    d2 = R[:-2] - 2 * R[1:-1] + R[2:]
    resid = curv = None
    quadratic = True
    if problem.loss == "square":
        r0, rh, r1 = R[0], R[len(s) // 2], R[-1]
        a = 2 * r0 - 4 * rh + 2 * r1  # P(s) = r0 + b s + a s^2 through (0, r0), (1/2, rh), (1, r1)
        b = r1 - r0 - a
        resid = float(np.max(np.abs(R - (r0 + b * s + a * s * s))))
        t0 = as_particles(theta0, problem.d, "theta0")
        t1 = as_particles(theta1, problem.d, "theta1")
        dx = readout(problem, t1, w1) - readout(problem, t0, w0)
        curv = float(0.5 * dx @ dx)
        quadratic = resid <= tol and abs(a - curv) <= tol
    return Convexity(s, R, float(d2.min()), resid, curv, tol, bool(d2.min() >= -tol), bool(quadratic))


def _random_pair(problem: LangevinProblem, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    d = problem.d
    m0, m1 = (int(v) for v in rng.integers(1, 8, size=2))
    t0 = rng.normal(0.0, rng.choice([0.5, 1.0, 2.0]), (m0, 3, d, d))
    t1 = rng.normal(rng.normal(0.0, 1.0), rng.choice([0.5, 1.0, 2.0]), (m1, 3, d, d))
    return t0, t1, rng.dirichlet(np.ones(m0)), rng.dirichlet(np.ones(m1))


# ----------------------------------------------------------------------------- the Gibbs state (d = 1)


def _m_of_t(tokens: np.ndarray, t: np.ndarray) -> np.ndarray:
    r"""For ``d = 1``: :math:`m(t) = \frac1N\sum_i\sum_k\mathrm{softmax}_k(t x_i x_k)\,x_k`, so that
    :math:`\Psi(q, k, v) = v\,m(qk)`."""
    x = tokens[:, 0]
    t = np.asarray(t, dtype=float)
    s = t[..., None, None] * x[:, None] * x[None, :]
    return (_softmax_last(s) @ x).mean(axis=-1)


@dataclass(frozen=True)
class GibbsState:
    r"""The stationary state :math:`\rho^\star_\beta` of Thm. 8.3 (``d = 1``), its observables, and their error.

    Attributes
    ----------
    beta : float
        Temperature (seed 002 convention: noise :math:`\sqrt{2\beta}\,dW`, :math:`\mathcal F_\beta = \mathcal L_\lambda + \beta\,\mathrm{Ent}`).
    g : float
        The fixed point :math:`g = \mathbb E_y\ell'(\bar x(\rho^\star), y)`; :math:`\rho^\star\propto\exp(-(g\Psi + \frac\lambda2|\theta|^2)/\beta)`.
    mean_output : float
        :math:`\bar x(\rho^\star)`.
    second_moment : float
        :math:`\int|\theta|^2d\rho^\star`.
    risk, risk_lambda : float
        :math:`\mathcal L(\rho^\star)` and :math:`\mathcal L_\lambda(\rho^\star)`.
    error : float
        Largest change of the observables between two quadrature resolutions.
    """

    beta: float
    g: float
    mean_output: float
    second_moment: float
    risk: float
    risk_lambda: float
    error: float


def _gibbs_moments(tokens: np.ndarray, lam: float, beta: float, g: float, n: int) -> tuple[float, float]:
    """``E[m^2]`` and ``E[q^2 + k^2]`` under the (q, k) marginal of the Gibbs measure of ``g``
    (the ``v`` integral done exactly), by tensor Gauss-Hermite quadrature with ``n`` nodes per axis."""
    z, wz = np.polynomial.hermite_e.hermegauss(n)  # weight exp(-z^2/2)
    sig = math.sqrt(beta / lam)
    q = sig * z
    m = _m_of_t(tokens, np.outer(q, q))  # (n, n): t = q k
    logw = np.log(wz)[:, None] + np.log(wz)[None, :] + g * g * m * m / (2 * lam * beta)
    w = np.exp(logw - logsumexp(logw))
    qk2 = q[:, None] ** 2 + q[None, :] ** 2
    return float(np.sum(w * m * m)), float(np.sum(w * qk2))


def _gibbs_at(problem: LangevinProblem, beta: float, n: int) -> tuple[float, float, float, float, float]:
    lam, X = problem.lam, problem.tokens
    c = float(problem.xbar0[0])

    def residual(g: float) -> float:
        m2, _ = _gibbs_moments(X, lam, beta, g, n)
        z = c - g * m2 / lam
        return g - float(loss_grad(problem, np.array([z]))[0])

    span = 1.0 + float(np.max(np.abs(problem.targets - c)))
    g = brentq(residual, -span, span, xtol=1e-14, rtol=1e-13)
    m2, qk2 = _gibbs_moments(X, lam, beta, g, n)
    xbar = c - g * m2 / lam
    second = qk2 + beta / lam + g * g * m2 / lam**2
    L = loss_value(problem, np.array([xbar]))
    return g, xbar, second, L, L + 0.5 * lam * second


def gibbs_state(problem: LangevinProblem, beta: float, *, nodes: int = 24) -> GibbsState:
    r"""The Gibbs fixed point of seed 002 Thm. 8.3 for ``d = 1``, by quadrature.

    For ``d = 1``, :math:`\Psi(q, k, v) = v\,m(qk)` and :math:`\frac{\delta\mathcal L}{\delta\rho}(\theta) = g\,\Psi(\theta)`
    with the scalar :math:`g = \mathbb E_y\ell'(\bar x(\rho), y)`. The Gibbs measure
    :math:`\propto\exp(-(g v m(qk) + \frac\lambda2(q^2+k^2+v^2))/\beta)` is Gaussian in ``v``
    (mean :math:`-g m/\lambda`, variance :math:`\beta/\lambda`); integrating ``v`` out leaves the
    :math:`(q, k)` density :math:`\propto e^{-\lambda(q^2+k^2)/2\beta}\,e^{g^2m(qk)^2/2\lambda\beta}`,
    integrated by tensor Gauss-Hermite quadrature. The fixed point in ``g`` is solved by
    Brent's method. ``error`` compares ``nodes`` with ``3 nodes / 2`` nodes per axis.
    """
    if problem.d != 1:
        raise DomainError(f"gibbs_state: the quadrature reference is for d = 1 (heads (q, k, v)), got d = {problem.d}")
    if not (math.isfinite(beta) and beta > 0):
        raise DomainError(f"gibbs_state: the temperature beta must be positive, got {beta!r}")
    a = _gibbs_at(problem, beta, nodes)
    b = _gibbs_at(problem, beta, (3 * nodes) // 2)
    err = max(abs(u - v) for u, v in zip(a[1:], b[1:], strict=True))
    return GibbsState(beta, *b, error=float(err))


@dataclass(frozen=True)
class ZeroTemperature:
    r"""The minimum of :math:`\mathcal L_\lambda` over :math:`\mathcal P(\Theta)` (``d = 1``, square loss).

    ``theta`` is a minimising head: :math:`\delta_\theta` is a global minimiser, certified
    (``certified``) by the first-order condition of the convex problem: :math:`\theta` minimises
    :math:`g\Psi + \frac\lambda2|\theta|^2` over all of :math:`\Theta` (checked on a fine grid of
    :math:`t = qk` to within ``gap``).
    """

    value: float
    theta: tuple[float, float, float]
    certified: bool
    gap: float


def zero_temperature_minimum(problem: LangevinProblem, *, t_max: float = 20.0, grid: int = 4001) -> ZeroTemperature:
    r""":math:`\min_\rho\mathcal L_\lambda(\rho)`, the :math:`\beta\to0` limit of Thm. 8.3 (``d = 1``, square loss).

    Over Diracs: for :math:`t = qk` the cheapest head has :math:`|q| = |k| = \sqrt{|t|}` and the
    optimal :math:`v = -c\,m/(\lambda + m^2)` (:math:`c = \bar x_0 - \bar y`), leaving the 1-D problem
    :math:`\min_t \frac12 c^2\lambda/(\lambda + m(t)^2) + \lambda|t|` (+ the targets' variance).
    """
    if problem.d != 1 or problem.loss != "square":
        raise DomainError("zero_temperature_minimum: implemented for d = 1 and the square loss")
    lam, X = problem.lam, problem.tokens
    ybar = float(problem.targets.mean())
    c = float(problem.xbar0[0]) - ybar
    var = float(0.5 * np.mean((problem.targets[:, 0] - ybar) ** 2))

    def f(t: float) -> float:
        m = float(_m_of_t(X, np.array(t)))
        return 0.5 * c * c * lam / (lam + m * m) + lam * abs(t)

    ts = np.linspace(-t_max, t_max, grid)
    ms = _m_of_t(X, ts)
    fs = 0.5 * c * c * lam / (lam + ms * ms) + lam * np.abs(ts)
    i = int(np.argmin(fs))
    lo, hi = ts[max(i - 1, 0)], ts[min(i + 1, grid - 1)]
    t = float(minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13}).x) if hi > lo else float(ts[i])
    if f(0.0) <= f(t):
        t = 0.0
    m = float(_m_of_t(X, np.array(t)))
    v = -c * m / (lam + m * m)
    q = math.copysign(math.sqrt(abs(t)), 1.0)
    k = math.copysign(math.sqrt(abs(t)), t)
    value = f(t) + var
    g = c + v * m
    # first-order certificate: min over theta of g v m(qk) + lam/2 |theta|^2 = min_t lam|t| - g^2 m(t)^2/(2 lam)
    u_star = g * v * m + 0.5 * lam * (q * q + k * k + v * v)
    u_min = float(np.min(lam * np.abs(ts) - g * g * ms * ms / (2 * lam)))
    gap = u_star - u_min
    return ZeroTemperature(float(value), (q, k, v), bool(gap <= 1e-6 * max(1.0, abs(u_star))), float(gap))
