r"""Mean-field Langevin for one attention layer: seed 002 Prop. 8.2 and Thm. 8.3, measured.

"A Mean-Field Theory of Transformers" (seed 002) section 8.2: with the context measure
:math:`\mu_0` frozen, the terminal feature :math:`\bar x(\rho) = \bar x_0 + \int\Psi\,d\rho` is
affine in the head measure :math:`\rho`, so the risk :math:`\mathcal L(\rho) = \mathbb E_y\ell(\bar x(\rho), y)`
is convex along linear interpolations :math:`(1-s)\rho_0 + s\rho_1` (Prop. 8.2); with weight decay
and entropy, :math:`\mathcal F_\beta = \mathcal L_\lambda + \beta\,\mathrm{Ent}` has one minimiser, the
Gibbs fixed point :math:`\rho^\star_\beta\propto\exp(-\frac1\beta\frac{\delta\mathcal L_\lambda}{\delta\rho}(\cdot;\rho^\star_\beta))`,
and the mean-field Langevin flow converges to it exponentially (Thm. 8.3, eq. 28).

Conventions (the seed's, eq. 14, 15, 26 and Assumption 4): :math:`\beta` is the **temperature**
(the noise intensity), :math:`\lambda` the weight decay in
:math:`\mathcal L_\lambda = \mathcal L + \frac\lambda2\int|\theta|^2d\rho`, and each head
(particle) follows

.. math::

    d\theta_j = -\Big(\nabla_\theta\frac{\delta\mathcal L}{\delta\rho}(\theta_j;\rho^m_s) + \lambda\theta_j\Big)ds
                + \sqrt{2\beta}\,dW_j, \qquad
    \frac{\delta\mathcal L}{\delta\rho}(\theta;\rho) = \langle\nabla\ell(\bar x(\rho)), \Psi(\theta)\rangle ,

with :math:`\rho^m = \frac1m\sum_j\delta_{\theta_j}` (the first-variation gradient: the particle
gradient of :math:`\mathcal L(\rho^m)` times ``m``). :math:`\beta\to0` is the zero-temperature
limit: :math:`\rho^\star_\beta` tends to a minimiser of :math:`\mathcal L_\lambda`.

Euler-Maruyama with step ``h``: :math:`\theta\leftarrow\theta - h\,b(\theta) + \sqrt{2\beta h}\,\xi`.
For the Ornstein-Uhlenbeck part (drift :math:`\lambda\theta`) the scheme is stable for
:math:`h < 2/\lambda` and its stationary variance is :math:`\beta/(\lambda(1-\lambda h/2))`: a relative
bias :math:`\approx\lambda h/2` (0.5 % at :math:`\lambda h = 0.01`), far below the particle noise of the
stationary estimates; the tolerance of the stationary check adds this bias (doubled).

The experiment (:func:`langevin_experiment`, :func:`run`) has two parts.

* ``d = 1`` heads :math:`(q, k, v)`: the Gibbs fixed point by quadrature (:func:`gibbs_state`), the
  zero-temperature minimum by a 1-D problem (:func:`zero_temperature_minimum`), the stationary
  state of two runs against it, and the contraction of two runs driven by the **same** Brownian
  increments. Assumption 6 (the log-Sobolev inequality) is **not** established for this model (its
  potential is not convex and :math:`\Psi` is unbounded in ``v``): the contraction is an observation,
  and with shared noise it cannot tell apart the two readings of eq. 28.
* the query-scale model (one trained number per head, :mod:`ntkcheck.limits._langevin_lsi`), where
  Assumption 6 is proved with an explicit constant: the free-energy gap of runs with
  **independent** noise against eq. 28's :math:`e^{-2\beta\lambda_{LSI}s}` at several temperatures.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._progress import progress_bar
from ..errors import DomainError, InputError
from . import _langevin_model as _m
from ._langevin_lsi import (
    FreeEnergyParams,
    default_scale_problem,
    free_energy_decay,
    free_energy_fits,
)
from ._langevin_model import (
    Convexity,
    GibbsState,
    LangevinProblem,
    ZeroTemperature,
    _random_pair,
    as_particles,
    attention,
    convexity_along_interpolation,
    gibbs_state,
    head_features,
    head_features_vjp,
    interpolation_risks,
    zero_temperature_minimum,
)
from .rates import LimitExperiment, RateFit, fit_rate

__all__ = ["SIZES", "FreeEnergyParams", "LangevinProblem", "GibbsState", "ZeroTemperature", "LangevinPath", "Convexity",
           "default_problem", "attention", "head_features", "head_features_vjp", "interpolation_risks",
           "gibbs_state", "zero_temperature_minimum", "mean_field_drift", "langevin_step", "simulate",
           "convexity_along_interpolation", "langevin_experiment", "run"]

#: experiment parameters by size: heads per run, Euler-Maruyama step, horizon, the
#: temperatures of the stationary check and the beta -> 0 fit, the temperature of the
#: convergence fit, its window and points, the burn-in before stationary averages; the sizes of
#: the free-energy measurement on the query-scale model
SIZES: dict[str, dict[str, Any]] = {
    "small": {"particles": 96, "step": 0.04, "horizon": 9.0, "betas": (0.05, 0.1, 0.2),
              "beta_fit": 0.1, "window": (0.5, 4.5), "points": 9, "burn_in": 4.5, "pairs": 4,
              "free_energy": FreeEnergyParams(4000, 0.02, (0.25, 1.0, 4.0), (0.25, 1.75), 7)},
    "default": {"particles": 256, "step": 0.025, "horizon": 12.0, "betas": (0.025, 0.05, 0.1, 0.2),
                "beta_fit": 0.1, "window": (0.5, 6.0), "points": 12, "burn_in": 6.0, "pairs": 8,
                "free_energy": FreeEnergyParams(10000, 0.01, (0.25, 1.0, 4.0), (0.25, 2.0), 8)},
}


#: slack on the beta -> 0 slope: the first-order Laplace rate (p/2) beta leaves O(beta^2) terms
#: and the Euler-Maruyama bias (O(h beta)) out; 0.05 is several times the Gibbs reference's own
#: deviation from slope -1 over the measured temperatures (below 0.002 on the default problem)
BETA_SLACK = 0.05


def default_problem(seed: int = 1, *, lam: float = 1.0, tokens: int = 5) -> LangevinProblem:
    """The experiment's problem: ``d = 1``, ``tokens`` context tokens ``0.5 + N(0, 1)``, target 2, square loss."""
    rng = np.random.default_rng([2, 8, int(seed)])
    return LangevinProblem(0.5 + rng.standard_normal((tokens, 1)), np.array([[2.0]]), lam=lam)


# ----------------------------------------------------------------------------- the particle system


def mean_field_drift(problem: LangevinProblem, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Drift :math:`\nabla_\theta\frac{\delta\mathcal L_\lambda}{\delta\rho}(\theta_j;\rho^m)` of every head of
    independent runs.

    Parameters
    ----------
    theta : ndarray, shape (..., m, 3, d, d)
        Runs of ``m`` heads (any leading shape); each run has its own mean field :math:`\rho^m`.

    Returns
    -------
    drift : ndarray, same shape as ``theta``
    xbar : ndarray, shape (..., d)
        :math:`\bar x(\rho^m)` of each run.
    """
    lead, m = theta.shape[:-4], theta.shape[-4]
    d = problem.d
    flat = theta.reshape(-1, 3, d, d)
    psi, cache = _m._forward(problem.tokens, flat)
    xbar = problem.xbar0 + psi.reshape(-1, m, d).mean(axis=1)
    r = xbar[:, None, :] - problem.targets[None]
    g = (r if problem.loss == "square" else np.tanh(r)).mean(axis=1)  # loss_grad of every run
    grad = _m._vjp(problem.tokens, flat, cache, np.repeat(g, m, axis=0)).reshape(theta.shape)
    return grad + problem.lam * theta, xbar.reshape(*lead, d)


def langevin_step(theta: np.ndarray, drift: np.ndarray, beta: Any, step: float, xi: np.ndarray) -> np.ndarray:
    r"""One Euler-Maruyama step of seed 002 eq. 26: :math:`\theta - h\,b + \sqrt{2\beta h}\,\xi`
    (``beta`` a number or an array broadcasting against ``theta``)."""
    return theta - step * drift + np.sqrt(2.0 * np.asarray(beta) * step) * xi


@dataclass(frozen=True)
class LangevinPath:
    r"""Observables of ``B`` independent batches of ``R`` runs; the runs of a batch share their Brownian
    increments (synchronous coupling).

    Attributes
    ----------
    times : ndarray, shape (T,)
    mean_output : ndarray, shape (B, R, T, d)
        :math:`\bar x(\rho^m_s)`.
    second_moment : ndarray, shape (B, R, T)
        :math:`\int|\theta|^2d\rho^m_s`.
    risk, risk_lambda : ndarray, shape (B, R, T)
        :math:`\mathcal L(\rho^m_s)` and :math:`\mathcal L_\lambda(\rho^m_s)`.
    coupling : ndarray, shape (B, T)
        :math:`(\frac1m\sum_j|\theta^{(0)}_j - \theta^{(1)}_j|^2)^{1/2}` between runs 0 and 1 of each batch,
        an upper bound of :math:`W_2(\rho^{m,(0)}_s, \rho^{m,(1)}_s)` (0 when ``R = 1``).
    final : ndarray, shape (B, R, m, 3, d, d)
    """

    times: np.ndarray
    mean_output: np.ndarray
    second_moment: np.ndarray
    risk: np.ndarray
    risk_lambda: np.ndarray
    coupling: np.ndarray
    final: np.ndarray


def simulate(problem: LangevinProblem, theta0: Any, *, beta: Any, step: float, steps: int,
             rng: np.random.Generator, record_every: int = 1) -> LangevinPath:
    r"""Mean-field Langevin by Euler-Maruyama from the initial heads ``theta0``.

    Parameters
    ----------
    theta0 : array, shape (B, R, m, 3, d, d), (R, m, 3, d, d) or (m, 3, d, d)
        ``B`` independent batches of ``R`` runs of ``m`` heads; the runs of a batch share their noise.
    beta : float or array of shape (B,)
        Temperature of each batch (seed 002 convention: noise :math:`\sqrt{2\beta}\,dW`).
    step : float
        Euler-Maruyama step, in ``(0, 1/lam)``.
    """
    th = np.asarray(theta0, dtype=float)
    while th.ndim < 6:
        th = th[None]
    if th.ndim != 6:
        raise InputError(f"theta0: expected shape (B, R, m, 3, d, d), (R, m, 3, d, d) or (m, 3, d, d), got {np.shape(theta0)}")
    as_particles(th.reshape(-1, *th.shape[3:]), problem.d, "theta0")
    B, R, m = th.shape[:3]
    try:
        b = np.broadcast_to(np.asarray(beta, dtype=float), (B,)) if np.ndim(beta) <= 1 else None
    except (TypeError, ValueError):
        b = None
    if b is None or not (np.all(np.isfinite(b)) and np.all(b >= 0)):
        raise DomainError(f"simulate: beta must be one temperature >= 0 or one per batch ({B}), got {beta!r}")
    if not (math.isfinite(step) and 0 < step < 1.0 / problem.lam):
        raise DomainError(f"simulate: the step must lie in (0, 1/lam) = (0, {1.0 / problem.lam:.3g}) for a stable "
                          f"and accurate Euler-Maruyama scheme, got {step!r}")
    if int(steps) != steps or steps < 1 or int(record_every) != record_every or record_every < 1:
        raise InputError(f"simulate: steps and record_every must be positive integers, got {steps!r}, {record_every!r}")
    bcol = b.reshape(B, 1, 1, 1, 1, 1)
    rec: dict[str, list[Any]] = {k: [] for k in ("t", "x", "m2", "c")}

    def record(t: float, xbar: np.ndarray) -> None:
        rec["t"].append(t)
        rec["x"].append(xbar)
        rec["m2"].append(np.einsum("brjpac,brjpac->br", th, th) / m)
        rec["c"].append(np.sqrt(np.einsum("bjpac,bjpac->b", th[:, 0] - th[:, 1], th[:, 0] - th[:, 1]) / m)
                        if R > 1 else np.zeros(B))

    for n in range(int(steps)):
        drift, xbar = mean_field_drift(problem, th)
        if n % record_every == 0:
            record(n * step, xbar)
        xi = rng.standard_normal((B, 1, *th.shape[2:]))
        th = langevin_step(th, drift, bcol, step, xi)
        if not np.all(np.isfinite(th)):
            raise DomainError(f"simulate: the heads diverged at s = {(n + 1) * step:.3g}; lower the step")
    _, xbar = mean_field_drift(problem, th)
    record(int(steps) * step, xbar)
    X = np.stack(rec["x"], axis=2)  # (B, R, T, d)
    r = X[..., None, :] - problem.targets
    L = (0.5 * np.sum(r * r, axis=-1) if problem.loss == "square"
         else np.sum(np.abs(r) + np.log1p(np.exp(-2 * np.abs(r))) - math.log(2.0), axis=-1)).mean(axis=-1)
    m2 = np.stack(rec["m2"], axis=2)
    return LangevinPath(np.array(rec["t"]), X, m2, L, L + 0.5 * problem.lam * m2, np.stack(rec["c"], axis=1), th)


# ----------------------------------------------------------------------------- the experiment


def _inits(problem: LangevinProblem, m: int, rng: np.random.Generator) -> np.ndarray:
    """Two initial head laws far apart: ``N(0, 0.3^2)`` near the origin, ``N(1.5, 0.5^2)`` shifted."""
    d = problem.d
    return np.stack([rng.normal(0.0, 0.3, (m, 3, d, d)), rng.normal(1.5, 0.5, (m, 3, d, d))])


def _validate_experiment(problem: LangevinProblem, seeds: int, betas: tuple[float, ...], beta_fit: float) -> None:
    """Refuse what the references cannot check: ``d != 1``, another loss, under 2 seeds (no
    standard error), under 3 temperatures or ``beta_fit`` not among them."""
    if problem.d != 1 or problem.loss != "square":
        raise DomainError("langevin_experiment: the references are for d = 1 and the square loss")
    if seeds < 2:
        raise InputError(f"langevin_experiment: need at least 2 seeds, got {seeds}")
    if beta_fit not in betas or len(betas) < 3:
        raise InputError(f"langevin_experiment: need >= 3 temperatures including beta_fit, got {betas}, {beta_fit}")


def _coupled_runs(problem: LangevinProblem, *, particles: int, step: float, horizon: float,
                  betas: tuple[float, ...], seeds: int, seed: int,
                  progress: bool | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One batch per (seed, beta): two runs from the two initial laws (:func:`_inits`), sharing
    their Brownian increments, to ``horizon``, recorded every ~0.05 time units.

    Returns
    -------
    times : ndarray, shape (T,)
    observables : dict str -> ndarray
        ``mean_output`` (B, 2, T, d), ``second_moment`` and ``risk_lambda`` (B, 2, T), ``coupling``
        (B, T), with ``B = seeds * len(betas)``: batch ``i * len(betas) + j`` is seed ``i`` at ``betas[j]``.
    """
    steps = int(round(horizon / step))
    rec = max(1, int(round(0.05 / step)))
    nb = len(betas)
    inits = np.stack([_inits(problem, particles, np.random.default_rng([8, 3, int(seed) + i, j]))
                      for i in range(seeds) for j in range(nb)])
    bvec = np.tile(np.asarray(betas, dtype=float), seeds)
    chunks = max(1, -(-seeds * nb * 2 * particles // 8192))  # about 8k heads per simulate call
    paths = []
    bar = progress_bar(seeds * nb * horizon, desc="langevin", unit="time", enabled=progress, fractional=True)
    try:
        for c in np.array_split(np.arange(seeds * nb), chunks):
            rng = np.random.default_rng([8, 4, int(seed), int(c[0])])
            paths.append(simulate(problem, inits[c], beta=bvec[c], step=step, steps=steps, rng=rng, record_every=rec))
            bar.update(len(c) * horizon)
    finally:
        bar.close()
    times = paths[0].times
    cat = {k: np.concatenate([getattr(p, k) for p in paths]) for k in ("mean_output", "second_moment", "risk_lambda",
                                                                       "coupling")}
    return times, cat


def _stationary_averages(obs: dict[str, np.ndarray], times: np.ndarray, betas: tuple[float, ...],
                         burn_in: float) -> dict[float, dict[str, np.ndarray]]:
    """Time averages over ``s >= burn_in`` of each run, by temperature: for each observable an
    array of shape (seeds, 2) (the two initial laws)."""
    nb = len(betas)
    late = times >= burn_in
    return {b: {"mean_output": obs["mean_output"][j::nb][:, :, late, 0].mean(axis=2),
                "second_moment": obs["second_moment"][j::nb][:, :, late].mean(axis=2),
                "risk_lambda": obs["risk_lambda"][j::nb][:, :, late].mean(axis=2)} for j, b in enumerate(betas)}


def _contraction(obs: dict[str, np.ndarray], times: np.ndarray, betas: tuple[float, ...], beta_fit: float,
                 fit_t: np.ndarray) -> tuple[np.ndarray, dict[float, float]]:
    """The coupling distance of every seed at ``beta_fit`` on the fit times (seeds, points), and
    the contraction rate at every temperature (mean over seeds of the semilog slopes)."""
    nb = len(betas)
    jf = list(betas).index(beta_fit)
    coupling = np.stack([np.interp(fit_t, times, row) for row in obs["coupling"][jf::nb]])
    u = fit_t - fit_t.mean()
    rates = {b: float(np.mean([-(u @ np.log(np.interp(fit_t, times, row))) / (u @ u)
                               for row in obs["coupling"][j::nb]])) for j, b in enumerate(betas)}
    return coupling, rates


def _curves(obs: dict[str, np.ndarray], times: np.ndarray, betas: tuple[float, ...],
            beta_fit: float) -> dict[str, Any]:
    """The figure's curves: the first seed's runs at ``beta_fit``."""
    jf = list(betas).index(beta_fit)
    return {"times": times.tolist(), "coupling": obs["coupling"][jf].tolist(),
            "mean_output": obs["mean_output"][jf][:, :, 0].tolist(),
            "second_moment": obs["second_moment"][jf].tolist(), "risk_lambda": obs["risk_lambda"][jf].tolist()}


def _stationary_excess(stat: dict[float, dict[str, np.ndarray]], betas: tuple[float, ...],
                       zero: ZeroTemperature) -> tuple[np.ndarray, np.ndarray]:
    r"""The temperatures by increasing :math:`1/\beta`, and the stationary excess
    :math:`\mathcal L_\lambda(\rho^m_\infty) - \min\mathcal L_\lambda` of every (seed, temperature)."""
    order = np.argsort(betas)[::-1]  # increasing 1/beta
    bs = np.asarray(betas, dtype=float)[order]
    excess = np.stack([stat[b]["risk_lambda"].mean(axis=1) for b in bs], axis=1) - zero.value
    return bs, excess


def _fit_rates(fit_t: np.ndarray, coupling: np.ndarray, bs: np.ndarray, excess: np.ndarray,
               zero: ZeroTemperature) -> tuple[RateFit, RateFit]:
    """Fit 1: the coupling distance against ``s`` (semilog); fit 2: the stationary excess against
    ``1/beta`` (log-log), beside the Laplace rate."""
    fit_conv = fit_rate(fit_t, coupling, variable="s", scale="semilog", theorem_rate=None,
                        quantity="coupling bound on W2(rho^A_s, rho^B_s), shared noise",
                        theorem="exponential decay (observed: Assumption 6 not established for this model)")
    fit_beta = fit_rate(1.0 / bs, np.maximum(excess, 1e-300), variable="1/beta", scale="loglog",
                        theorem_rate=lambda x: 1.0 / x, reference_error=max(abs(zero.gap), 1e-12), slack=BETA_SLACK,
                        quantity="L_lambda(stationary) - min L_lambda",
                        theorem="-> 0 (no rate stated; Laplace: (p/2) beta)")
    return fit_conv, fit_beta


def _stationary_check(problem: LangevinProblem, refs: dict[float, GibbsState],
                      stat: dict[float, dict[str, np.ndarray]], *, betas: tuple[float, ...], step: float,
                      particles: int, seeds: int, tq: float) -> tuple[float, list[dict[str, Any]]]:
    """Each initialisation on its own against the Gibbs fixed point: mean over seeds, Student-t
    99 % interval (``tq`` its quantile at ``seeds - 1`` degrees of freedom) plus the
    discretisation allowance.

    Returns
    -------
    worst : float
        The largest ``|measured - Gibbs| / (t_99 SE + allowance)`` (the check holds at ``<= 1``).
    rows : list of dict
        One per (temperature, observable, initialisation).
    """
    worst, rows = 0.0, []
    for b in betas:
        ref = refs[b]
        for k, rv in (("mean_output", ref.mean_output), ("second_moment", ref.second_moment),
                      ("risk_lambda", ref.risk_lambda)):
            # Euler-Maruyama bias of the OU part (lambda h / 2 relative on the fluctuation
            # p beta / lambda), doubled; O(1/m) finite-head bias; quadrature error
            allow = step * problem.p * b * max(1.0, problem.lam) + 2.0 * (1.0 + abs(rv)) / particles + ref.error
            for r, init in enumerate(("A", "B")):
                per_seed = stat[b][k][:, r]
                se = float(per_seed.std(ddof=1) / math.sqrt(seeds))
                dev = abs(float(per_seed.mean()) - rv)
                ratio = dev / (tq * se + allow)
                worst = max(worst, ratio)
                rows.append({"beta": b, "observable": k, "init": init, "measured": float(per_seed.mean()), "se": se,
                             "gibbs": rv, "allowance": allow, "ratio": ratio})
    return worst, rows


def _convexity_pairs(problem: LangevinProblem, pairs: int, seed: int) -> list[Convexity]:
    """Prop. 8.2 on ``pairs`` random pairs of head measures, alternating the square loss of
    ``problem`` and a log-cosh loss with shifted targets (convexity must not hinge on the square)."""
    rng = np.random.default_rng([8, 2, int(seed)])
    return [convexity_along_interpolation(problem if j % 2 == 0 else LangevinProblem(
        problem.tokens, problem.targets + rng.normal(0, 3, problem.targets.shape), problem.lam, "logcosh"),
        *_random_pair(problem, rng)[:2]) for j in range(int(pairs))]


def _checks(conv: list[Convexity], worst: float, zero: ZeroTemperature) -> dict[str, bool]:
    """The experiment's direct checks, by the statement each tests."""
    return {
        "Prop. 8.2: risk convex along (1-s) rho_0 + s rho_1 (random pairs, square and log-cosh loss)":
            all(c.convex for c in conv),
        "Prop. 8.2: square-loss risk is the parabola through s = 0, 1/2, 1 (affine readout)":
            all(c.quadratic for c in conv),
        "Thm. 8.3: stationary observables of both initialisations = Gibbs fixed point (every beta)": worst <= 1.0,
        "beta -> 0: the minimum of L_lambda is certified (first-order condition)": zero.certified,
    }


def _notes(problem: LangevinProblem, *, beta_fit: float, b_fit: GibbsState, zero: ZeroTemperature, worst: float,
           rates: dict[float, float], bs: np.ndarray, excess: np.ndarray) -> tuple[str, ...]:
    """What the reader should know: the temperature convention, eq. 28's missing factors, the
    stationary margin, the references at ``beta_fit``, the rates and the Laplace ratio by temperature."""
    return (
        "seed 002 convention: beta is the temperature (noise sqrt(2 beta) dW, F = L_lambda + beta Ent); beta -> 0 "
        "is zero temperature, where the Gibbs state tends to a minimiser of L_lambda",
        "eq. 28's rate exp(-2 beta lambda_LSI s) is right for lambda_LSI the LSI constant of the Gibbs measure; "
        "the proof's chain (dF/ds = -I, I >= 2 lambda_LSI (F - F*)) drops beta^2 in the dissipation and 1/beta in "
        "the entropy sandwich and would give exp(-2 lambda_LSI s) (theory/limits-langevin.md)",
        "(q, k, v) model: the potential is not convex and Psi is unbounded in v, so Assumption 6 is not established "
        "here; the coupling contraction below is an observation, with shared noise (it cancels: it cannot tell "
        "the readings of eq. 28 apart)",
        f"stationary check: worst |measured - Gibbs| / (t_99 SE + allowance) = {worst:.2f} (must be <= 1)",
        f"Gibbs state at beta = {beta_fit:g}: mean output {b_fit.mean_output:.5f}, E|theta|^2 "
        f"{b_fit.second_moment:.5f}; min L_lambda = {zero.value:.6f} at theta = "
        f"({zero.theta[0]:.3f}, {zero.theta[1]:.3f}, {zero.theta[2]:.4f})",
        "coupling contraction rate by temperature, shared noise: " + ", ".join(f"beta {b:g}: {r:.3f}" for b, r in rates.items()),
        f"excess / beta (Laplace predicts p/2 = {problem.p / 2:g}): "
        + ", ".join(f"{b:g}: {e:.3f}" for b, e in zip(bs, excess.mean(axis=0) / bs, strict=True)),
    )


def _data(*, curves: dict[str, Any], beta_fit: float, fit_t: np.ndarray, betas: tuple[float, ...],
          refs: dict[float, GibbsState], zero: ZeroTemperature, rows: list[dict[str, Any]],
          rates: dict[float, float], conv: list[Convexity]) -> dict[str, Any]:
    """The experiment's extra data (JSON-serialisable): curves, references, stationary rows,
    contraction rates and the convexity margins."""
    return {
        "curves_beta_fit": curves, "beta_fit": beta_fit, "fit_times": fit_t.tolist(),
        "gibbs": {str(b): {"mean_output": refs[b].mean_output, "second_moment": refs[b].second_moment,
                           "risk_lambda": refs[b].risk_lambda, "error": refs[b].error} for b in betas},
        "min_risk_lambda": zero.value, "stationary": rows, "contraction_rates": {str(b): r for b, r in rates.items()},
        "convexity": [{"min_second_difference": c.min_second_difference, "quadratic_residual": c.quadratic_residual,
                       "tolerance": c.tolerance} for c in conv],
    }


def _setting(problem: LangevinProblem, particles: int, step: float, horizon: float) -> str:
    """The experiment in words: the model, the runs and the references."""
    return (f"one attention layer, d = 1, N = {problem.tokens.shape[0]} context tokens, square loss, lambda = "
            f"{problem.lam:g}; {particles} heads per run, two initial laws with shared Brownian increments, "
            f"Euler-Maruyama h = {step:g} to s = {horizon:g}; references: Gibbs fixed point by quadrature, "
            f"min L_lambda by a 1-D problem")


def langevin_experiment(problem: LangevinProblem, *, particles: int, step: float, horizon: float,
                        betas: tuple[float, ...], beta_fit: float, window: tuple[float, float], points: int,
                        burn_in: float, pairs: int, free_energy: FreeEnergyParams | None = None, seeds: int = 5,
                        seed: int = 0, progress: bool | None = None) -> LimitExperiment:
    r"""Prop. 8.2 and Thm. 8.3 on ``problem`` (``d = 1``, square loss), and eq. 28 where it is proved.

    For each seed and each temperature in ``betas`` (``beta_fit`` among them), two runs of
    ``particles`` heads from far-apart initial laws, driven by the same Brownian increments:

    * fit 1: the coupling distance :math:`(\frac1m\sum_j|\theta^A_j-\theta^B_j|^2)^{1/2}\ge W_2(\rho^A_s,\rho^B_s)`
      at ``beta_fit`` against ``s`` (semilog; exponential decay at an unspecified rate);
    * fit 2: the stationary excess :math:`\mathcal L_\lambda(\rho^m_\infty) - \min\mathcal L_\lambda` against
      :math:`1/\beta` (log-log), beside the Laplace rate :math:`(p/2)\beta`;
    * checks: the stationary observables of both runs (seed-averaged) match the Gibbs fixed
      point within a Student-t 99 % interval plus the discretisation allowance; Prop. 8.2 on
      ``pairs`` random pairs of head measures; the zero-temperature minimum is certified;
    * with ``free_energy``: on the query-scale model with the same weight decay, one fit per
      temperature of the free-energy gap against eq. 28's rate with the proved LSI constant, runs
      with independent noise (:func:`ntkcheck.limits._langevin_lsi.free_energy_fits`).
    """
    # imported before the clock starts, so the elapsed time leaves scipy's import out
    from scipy import stats

    _validate_experiment(problem, seeds, betas, beta_fit)
    t_start = time.perf_counter()
    fit_t = np.linspace(window[0], window[1], int(points))
    # the independent references: min L_lambda by a 1-D problem, each Gibbs state by quadrature
    zero = zero_temperature_minimum(problem)
    refs = {b: gibbs_state(problem, b) for b in betas}
    times, obs = _coupled_runs(problem, particles=particles, step=step, horizon=horizon, betas=betas, seeds=seeds,
                               seed=seed, progress=progress)
    stat = _stationary_averages(obs, times, betas, burn_in)
    coupling, rates = _contraction(obs, times, betas, beta_fit, fit_t)
    curves = _curves(obs, times, betas, beta_fit)
    bs, excess = _stationary_excess(stat, betas, zero)
    fits = _fit_rates(fit_t, coupling, bs, excess, zero)
    worst, rows = _stationary_check(problem, refs, stat, betas=betas, step=step, particles=particles, seeds=seeds,
                                    tq=float(stats.t.ppf(0.995, seeds - 1)))
    conv = _convexity_pairs(problem, pairs, seed)
    checks = _checks(conv, worst, zero)
    notes = _notes(problem, beta_fit=beta_fit, b_fit=refs[beta_fit], zero=zero, worst=worst, rates=rates, bs=bs,
                   excess=excess)
    data = _data(curves=curves, beta_fit=beta_fit, fit_t=fit_t, betas=betas, refs=refs, zero=zero, rows=rows,
                 rates=rates, conv=conv)
    if free_energy is not None:
        scale = default_scale_problem(problem.lam)
        # langevin_step is looked up here, in this module, so that a patched step reaches both models
        decay = free_energy_decay(scale, free_energy, seeds=seeds, seed=seed, step_fn=langevin_step)
        fe_fits, fe_checks, fe_notes, fe_data = free_energy_fits(decay, scale)
        fits, notes = (*fits, *fe_fits), (*notes, *fe_notes)
        checks.update(fe_checks)
        data.update(fe_data)
    return LimitExperiment("langevin", "seed 002 Prop. 8.2, Thm. 8.3", _setting(problem, particles, step, horizon),
                           fits, checks, notes, time.perf_counter() - t_start, data)


def run(*, size: str = "default", seeds: int = 5, seed: int = 0, progress: bool | None = None) -> LimitExperiment:
    """The ``langevin`` experiment at ``size`` (:data:`SIZES`) on :func:`default_problem`."""
    if size not in SIZES:
        raise InputError(f"langevin: unknown size {size!r}; known: {', '.join(SIZES)}")
    return langevin_experiment(default_problem(), seeds=seeds, seed=seed, progress=progress, **SIZES[size])
