r"""Propagation of chaos in tokens, measured (seed 002 Thm. 4.2; experiment ``chaos-tokens``).

"A Mean-Field Theory of Transformers" (seed 002), Thm. 4.2: ``N`` tokens drawn i.i.d. from a
compactly supported :math:`\mu_0` and moved by the multi-head attention field of their own
empirical measure :math:`\mu^N_t` (eq. 6/10, feed-forward part dropped as in its Remark 2.1),

.. math::

    \dot x_i = V_{\rho,\mu^N_t}(x_i), \qquad
    V_{\rho,\mu}(x) = \frac1H\sum_{h=1}^H V_h
        \frac{\int e^{\langle Q_h x, K_h y\rangle/\sqrt d}\, y\, d\mu(y)}
             {\int e^{\langle Q_h x, K_h y\rangle/\sqrt d}\, d\mu(y)},

stay close to the McKean-Vlasov limit under the synchronous coupling
:math:`\bar x_i(t) = \Phi_t(x_i(0))`, with :math:`\Phi_t` the flow of
:math:`\dot x = V_{\rho,\mu_t}(x)` and :math:`\mu_t = (\Phi_t)_\#\mu_0`:

.. math::

    \sup_{t\le T}\mathbb E\big[\max_i |x_i^N(t)-\bar x_i(t)|^2\big]^{1/2} \le C(T)\,\epsilon_N,
    \qquad \mathbb E\,W_2(\mu^N_t,\mu_t) \le C(T)\,\epsilon_N,

with :math:`\epsilon_N = N^{-1/4}` for :math:`d < 4`, :math:`N^{-1/4}\sqrt{\log N}` for
``d = 4`` and :math:`N^{-1/d}` for ``d > 4``.

The setting simulated (details and measured numbers in ``theory/limits-chaos-tokens.md``):
``d = 1`` (so :math:`\epsilon_N = N^{-1/4}`), :math:`\mu_0` uniform on ``[-1, 1]``, ``H``
fixed heads :math:`\rho = \frac1H\sum_h\delta_{\theta_h}`, :math:`\theta_h = (Q_h, K_h, V_h)`
scalars. The limit :math:`\mu_t` is a Gauss-Legendre quadrature of :math:`\mu_0` carried
by the flow as weighted particles; :math:`\Phi_t` is evaluated at any point as a test
particle in that field (:func:`mean_field_flow`). In 1-D every flow map is increasing, so
the quantile function of :math:`\mu_t` is :math:`\Phi_t\circ F_0^{-1}` and
:math:`W_2(\mu^N_t,\mu_t)` is the :math:`L^2(0,1)` distance of quantile functions, integrated
by Gauss-Legendre on each cell ``((k-1)/N, k/N]`` (:func:`w2_to_limit`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._progress import progress_bar
from ..errors import DomainError, InputError, NtkcheckError
from . import _chaos_tokens_ref as _ref
from .rates import LimitExperiment, fit_rate

__all__ = [
    "TokenHeads", "ChaosParams", "ChaosMeasurement", "SIZES", "eps_N", "attention_field", "particle_system",
    "mean_field_flow", "w2_to_limit", "measure", "experiment", "run",
]

#: token dimension of the experiment (the theorem's rate depends on it through eps_N)
DIM = 1


def eps_N(N: Any, d: int = DIM) -> np.ndarray:
    r"""The rate :math:`\epsilon_N` of seed 002 Thm. 4.2 in dimension ``d``.

    :math:`N^{-1/4}` for ``d < 4``, :math:`N^{-1/4}\sqrt{\log N}` for ``d = 4``,
    :math:`N^{-1/d}` for ``d > 4``.

    >>> float(eps_N(16.0))
    0.5
    """
    n = np.asarray(N, dtype=float)
    if d < 1:
        raise DomainError(f"eps_N: dimension must be a positive integer, got {d}")
    if d < 4:
        return n ** -0.25
    if d == 4:
        return n ** -0.25 * np.sqrt(np.log(n))
    return n ** (-1.0 / d)


@dataclass(frozen=True)
class TokenHeads:
    r"""``H`` one-dimensional attention heads :math:`\theta_h = (Q_h, K_h, V_h)`, :math:`\rho = \frac1H\sum_h\delta_{\theta_h}`.

    The score of head ``h`` between tokens ``x`` and ``y`` is :math:`Q_h K_h x y/\sqrt d` (``d = 1``),
    its value map :math:`y \mapsto V_h y`.
    """

    Q: tuple[float, ...]
    K: tuple[float, ...]
    V: tuple[float, ...]

    def __post_init__(self) -> None:
        lens = {len(self.Q), len(self.K), len(self.V)}
        if len(lens) != 1 or 0 in lens:
            raise InputError(f"TokenHeads: Q, K, V need the same positive number of heads, got lengths "
                             f"{len(self.Q)}, {len(self.K)}, {len(self.V)}")
        vals = np.array([self.Q, self.K, self.V], dtype=float)
        if not np.all(np.isfinite(vals)):
            raise InputError(f"TokenHeads: parameters must be finite, got Q={self.Q}, K={self.K}, V={self.V}")

    @property
    def H(self) -> int:
        return len(self.V)

    @property
    def scores(self) -> np.ndarray:
        """:math:`a_h = Q_h K_h / \\sqrt d`, shape (H,)."""
        return np.asarray(self.Q, dtype=float) * np.asarray(self.K, dtype=float) / math.sqrt(DIM)

    @property
    def values(self) -> np.ndarray:
        return np.asarray(self.V, dtype=float)

    def norm(self) -> float:
        r""":math:`D_\Theta = \max_h \max(|Q_h|, |K_h|, |V_h|)` (Assumption 1)."""
        return float(np.max(np.abs([self.Q, self.K, self.V])))


def _batch(name: str, arr: Any) -> np.ndarray:
    try:
        a = np.array(arr, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: expected a real array of positions, got {type(arr).__name__} ({exc})") from None
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] == 0:
        raise InputError(f"{name}: expected positions of shape (P,) or (B, P) with P >= 1 (d = 1), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name}: positions must be finite (got {int(np.sum(~np.isfinite(a)))} non-finite entries)")
    return a


def attention_field(x: Any, atoms: Any, heads: TokenHeads, weights: Any = None, *, method: str = "auto") -> np.ndarray:
    r"""Multi-head attention field :math:`V_{\rho,\mu}(x)` of :math:`\mu = \sum_j w_j\delta_{y_j}` on the line.

    .. math::

        V_{\rho,\mu}(x) = \frac1H\sum_h V_h\,\frac{\sum_j w_j e^{a_h x y_j}\,y_j}{\sum_j w_j e^{a_h x y_j}},
        \qquad a_h = Q_h K_h/\sqrt d

    (seed 002 eqs. 8, 10-11 with ``d = 1``).

    Parameters
    ----------
    x : (P,) or (B, P) array
        Points where the field is evaluated (``B`` independent measures in a batch).
    atoms : (M,) or (B, M) array
        The atoms :math:`y_j` of each measure.
    weights : (M,) or (B, M) array, optional
        Non-negative masses summing to 1 per measure; uniform if omitted.
    method : {"auto", "direct", "series"}
        ``direct``: max-shifted softmax, cost ``P M`` per head. ``series``: power series of
        the exponential through the moments of :math:`\mu` (cost ``(P + M) K``, exact to
        rounding while :math:`|a|\max|x|\max|y| \le 6`). ``auto`` takes the series when it applies.

    Returns
    -------
    (B, P) array (``(1, P)`` for 1-D input).

    >>> h = TokenHeads(Q=(1.0,), K=(0.0,), V=(2.0,))  # a = 0: the field is V times the mean
    >>> attention_field([0.3, -5.0], [0.0, 1.0], h).tolist()
    [[1.0, 1.0]]
    """
    X = _batch("attention_field: x", x)
    Y = _batch("attention_field: atoms", atoms)
    W = np.full(Y.shape, 1.0 / Y.shape[1]) if weights is None else _batch("attention_field: weights", weights)
    if Y.shape[0] != X.shape[0] or W.shape != Y.shape:
        raise InputError(f"attention_field: batch shapes disagree: x {X.shape}, atoms {Y.shape}, weights {W.shape}")
    if np.any(W < 0) or not np.allclose(W.sum(axis=1), 1.0, rtol=0, atol=1e-12):
        raise InputError("attention_field: weights must be non-negative and sum to 1 per measure")
    if method not in ("auto", "direct", "series"):
        raise InputError(f"attention_field: method must be 'auto', 'direct' or 'series', got {method!r}")
    return _field(X, Y, W, heads, method)


def _field(X: np.ndarray, Y: np.ndarray, W: np.ndarray, heads: TokenHeads, method: str = "auto") -> np.ndarray:
    a, v = heads.scores, heads.values
    if method == "series" or (method == "auto" and _ref.series_applies(X, Y, a)):
        return _ref.field_series(X, Y, W, a, v)
    with np.errstate(divide="ignore"):
        return _ref.field_direct(X, Y, np.log(W), a, v)


def _check_time(T: float, steps: int) -> None:
    if not (isinstance(T, (int, float)) and math.isfinite(T) and T > 0):
        raise DomainError(f"time horizon T must be a positive finite number, got {T!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise DomainError(f"steps must be a positive integer, got {steps!r}")


def particle_system(x0: Any, heads: TokenHeads, T: float, steps: int) -> np.ndarray:
    r"""The ``N``-token system (seed 002 eq. 10): every token moved by the field of the empirical measure of all.

    .. math:: \dot x_i = V_{\rho,\mu^N_t}(x_i), \qquad \mu^N_t = \frac1N\sum_j \delta_{x_j(t)},

    integrated by classical RK4 with ``steps`` equal steps on ``[0, T]``.

    Parameters
    ----------
    x0 : (N,) or (B, N) array
        Initial tokens; each row is an independent system.

    Returns
    -------
    (steps + 1, B, N) array: the positions at ``t_n = n T / steps``.
    """
    X0 = _batch("particle_system: x0", x0)
    _check_time(T, steps)
    W = np.full(X0.shape, 1.0 / X0.shape[1])
    return _ref.rk4(X0, lambda X: _field(X, X, W, heads), float(T), int(steps))


def mean_field_flow(points: Any, heads: TokenHeads, T: float, steps: int, nodes: int, *,
                    law: str = "uniform", loc: float = 0.0, scale: float = 1.0) -> np.ndarray:
    r"""The flow map :math:`\Phi_t` of the McKean-Vlasov limit from :math:`\mu_0`, at ``points``.

    :math:`\mu_0` is ``loc + scale * U[-1, 1]`` (``law="uniform"``, compact support as the
    theorem assumes: the experiment's case) or ``loc + scale * N(0, 1)`` (``law="gaussian"``,
    which has a closed-form limit for this attention: the tests use it). The limit law is
    represented by the ``nodes``-point Gauss-Legendre (Gauss-Hermite) quadrature of
    :math:`\mu_0` (nodes :math:`\xi_q`, weights :math:`w_q`) carried by the flow as weighted
    particles, :math:`\mu_t \approx \sum_q w_q\delta_{\Phi_t(\xi_q)}`, whose field drives
    both the nodes and the test particles ``points``:

    .. math:: \dot\xi_q = V_{\rho,\mu_t}(\xi_q), \qquad \dot p = V_{\rho,\mu_t}(p).

    The integrand :math:`y_0 \mapsto e^{a x\Phi_t(y_0)}\Phi_t(y_0)` is analytic, so the
    quadrature converges exponentially in ``nodes``; the test compares two resolutions.

    Parameters
    ----------
    points : array of any shape
        Starting points of the test particles (anywhere: e.g. the tokens' initial positions).

    Returns
    -------
    (steps + 1, *points.shape) array: :math:`\Phi_{t_n}(p)` at ``t_n = n T / steps``.
    """
    P = np.array(points, dtype=np.float64)
    if P.size == 0 or not np.all(np.isfinite(P)):
        raise InputError(f"mean_field_flow: points must be a non-empty finite array, got shape {P.shape}")
    _check_time(T, steps)
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 2:
        raise DomainError(f"mean_field_flow: nodes must be an integer >= 2, got {nodes!r}")
    if law not in ("uniform", "gaussian"):
        raise InputError(f"mean_field_flow: law must be 'uniform' or 'gaussian', got {law!r}")
    if not (math.isfinite(loc) and math.isfinite(scale) and scale > 0):
        raise DomainError(f"mean_field_flow: need finite loc and scale > 0, got loc={loc!r}, scale={scale!r}")
    if law == "uniform":
        xi, wq = _ref.gauss_legendre_uniform(int(nodes))
    else:
        xi, wq = np.polynomial.hermite_e.hermegauss(int(nodes))
        wq = wq / wq.sum()
    xi = loc + scale * xi
    n = len(xi)
    state0 = np.concatenate([xi, P.ravel()])[None, :]
    W = wq[None, :]

    def rhs(S: np.ndarray) -> np.ndarray:
        return _field(S, S[:, :n], W, heads)

    traj = _ref.rk4(state0, rhs, float(T), int(steps))
    return traj[:, 0, n:].reshape((steps + 1,) + P.shape)


def w2_to_limit(tokens: Any, limit_quantiles: np.ndarray, cell_weights: np.ndarray) -> np.ndarray:
    r""":math:`W_2(\mu^N, \mu)` on the line from the quantile functions.

    .. math::

        W_2^2(\mu^N,\mu) = \int_0^1 |F_N^{-1}(u) - F^{-1}(u)|^2 du
        = \sum_{k=1}^N \int_{(k-1)/N}^{k/N} |x_{(k)} - F^{-1}(u)|^2 du,

    each cell integrated by the Gauss-Legendre rule whose points ``u_{k,m}`` gave
    ``limit_quantiles[k, m]`` :math:`= F^{-1}(u_{k,m})`.

    Parameters
    ----------
    tokens : (B, N) array
        ``B`` empirical measures of ``N`` tokens (any order).
    limit_quantiles : (N, m) array
    cell_weights : (m,) array summing to 1

    Returns
    -------
    (B,) array.
    """
    X = np.sort(_batch("w2_to_limit: tokens", tokens), axis=1)
    Qn = np.asarray(limit_quantiles, dtype=float)
    if Qn.ndim != 2 or Qn.shape[0] != X.shape[1] or Qn.shape[1] != len(cell_weights):
        raise InputError(f"w2_to_limit: limit_quantiles must have shape (N={X.shape[1]}, m={len(cell_weights)}), "
                         f"got {Qn.shape}")
    d2 = (X[:, :, None] - Qn[None, :, :]) ** 2 @ np.asarray(cell_weights, dtype=float)
    return np.sqrt(d2.mean(axis=1))


# ----------------------------------------------------------------------------- the experiment


@dataclass(frozen=True)
class ChaosParams:
    """Parameters of one size of the experiment.

    Attributes
    ----------
    heads : TokenHeads
    T : float
        Time horizon (continuous depth).
    steps : int
        RK4 steps on ``[0, T]`` (the same grid for the particles and the limit).
    Ns : tuple of int
        Token counts measured.
    particles : int
        Tokens per size and seed: ``particles // N`` independent systems of ``N`` tokens are
        averaged at each ``N`` (the expectations of the theorem).
    nodes : int
        Gauss-Legendre nodes of the reference :math:`\\mu_t` (checked against ``2 nodes``, ``2 steps``).
    cells : int
        Gauss-Legendre points per quantile cell in :func:`w2_to_limit`.
    """

    heads: TokenHeads
    T: float
    steps: int
    Ns: tuple[int, ...]
    particles: int
    nodes: int = 24
    cells: int = 3

    def __post_init__(self) -> None:
        _check_time(self.T, self.steps)
        ns = list(self.Ns)
        if len(ns) < 3 or len(set(ns)) != len(ns) or any(not isinstance(n, int) or n < 2 for n in ns):
            raise DomainError(f"ChaosParams: Ns must be at least 3 distinct integers >= 2, got {self.Ns}")
        if self.particles < max(ns):
            raise DomainError(f"ChaosParams: particles ({self.particles}) must be at least the largest N ({max(ns)})")
        if self.nodes < 2 or self.cells < 1:
            raise DomainError(f"ChaosParams: nodes >= 2 and cells >= 1 needed, got {self.nodes}, {self.cells}")


#: the heads of every size: a contracting head (Q K > 0, V < 0) and a weaker one of the other
#: sign; mu_t shrinks to about half its width by T = 2 (the field of mu_0 is then far off)
_HEADS = TokenHeads(Q=(1.5, -1.0), K=(1.0, 1.0), V=(-1.0, 0.5))

SIZES: Mapping[str, ChaosParams] = {
    "small": ChaosParams(_HEADS, T=2.0, steps=16, Ns=(32, 64, 128, 256, 512, 1024), particles=1024),
    "default": ChaosParams(_HEADS, T=2.0, steps=24, Ns=(32, 64, 128, 256, 512, 1024, 2048, 4096), particles=4096),
    "large": ChaosParams(_HEADS, T=2.0, steps=32, Ns=(64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
                         particles=16384),
}


@dataclass(frozen=True)
class ChaosMeasurement:
    r"""What :func:`measure` measured.

    Attributes
    ----------
    Ns : tuple of int
    gap : (seeds, len(Ns)) array
        Per seed, :math:`\big(\overline{\sup_t \max_i |x_i^N(t)-\bar x_i(t)|^2}\big)^{1/2}`, the mean
        over the ``particles // N`` independent systems (the time grid is the RK4 grid).
    w2 : (seeds, len(Ns)) array
        Per seed, the mean of :math:`W_2(\mu^N_T, \mu_T)` over the systems.
    times : (steps + 1,) array
    gap_t, w2_t : (len(Ns), steps + 1) arrays
        Mean over seeds and systems of :math:`\max_i|x_i^N(t)-\bar x_i(t)|` and :math:`W_2(\mu^N_t,\mu_t)`.
    flow_error : float
        Largest difference of :math:`\Phi_t` at all test points and grid times between the
        reference at (``nodes``, ``steps``) and at (``2 nodes``, ``2 steps``).
    step_error : float
        Largest difference of the particle system at ``steps`` and ``2 steps`` (first seed, largest ``N``).
    order_preserved : bool
        Every system kept the order of its tokens and :math:`\Phi_t` stayed increasing on the
        quantile grid (the 1-D facts behind the quantile formula of :math:`W_2`).
    support_t : (steps + 1, 2) array
        Smallest and largest node of the reference :math:`\mu_t`.
    """

    Ns: tuple[int, ...]
    gap: np.ndarray
    w2: np.ndarray
    times: np.ndarray
    gap_t: np.ndarray
    w2_t: np.ndarray
    flow_error: float
    step_error: float
    order_preserved: bool
    support_t: np.ndarray

    @property
    def reference_error(self) -> float:
        """``max(flow_error, step_error)``: what the measured errors cannot resolve below."""
        return max(self.flow_error, self.step_error)


def _draw(params: ChaosParams, seeds: int, seed: int) -> list[np.ndarray]:
    """Initial tokens per size: (seeds * R, N) with R = particles // N; stream (seed + s, N)."""
    out = []
    for N in params.Ns:
        R = params.particles // N
        out.append(np.concatenate([np.random.default_rng((seed + s, N)).uniform(-1.0, 1.0, (R, N))
                                   for s in range(seeds)]))
    return out


def measure(params: ChaosParams, *, seeds: int = 5, seed: int = 0, progress: bool | None = None) -> ChaosMeasurement:
    """Run the particle systems and the reference, synchronously coupled, and measure the two errors.

    Seeds are independent repetitions ``seed, seed + 1, ...`` (random streams ``(seed + s, N)``).
    """
    if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1:
        raise DomainError(f"measure: seeds must be a positive integer, got {seeds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DomainError(f"measure: seed must be a non-negative integer, got {seed!r}")
    p, S = params, int(seeds)
    x0 = _draw(p, S, int(seed))
    cells = [_ref.quantile_cells(N, p.cells) for N in p.Ns]
    # test particles: every token's start, and F_0^{-1}(u) = 2u - 1 on every quantile grid
    starts = np.concatenate([x.ravel() for x in x0] + [(2.0 * u - 1.0).ravel() for u, _ in cells])
    bar = progress_bar(total=len(p.Ns) + 3, desc="chaos-tokens", unit="step", enabled=progress)
    with bar:
        ref = mean_field_flow(starts, p.heads, p.T, p.steps, p.nodes)
        bar.update(1)
        fine = mean_field_flow(starts, p.heads, p.T, 2 * p.steps, 2 * p.nodes)[::2]
        flow_error = float(np.max(np.abs(fine - ref)))
        nodes = mean_field_flow(_ref.gauss_legendre_uniform(p.nodes)[0], p.heads, p.T, p.steps, p.nodes)
        bar.update(1)
        gap = np.empty((S, len(p.Ns)))
        w2 = np.empty((S, len(p.Ns)))
        gap_t = np.empty((len(p.Ns), p.steps + 1))
        w2_t = np.empty((len(p.Ns), p.steps + 1))
        ordered = True
        off = 0
        offq = sum(x.size for x in x0)
        for k, (X0, (u, cw)) in enumerate(zip(x0, cells, strict=True)):
            traj = particle_system(X0, p.heads, p.T, p.steps)  # (steps+1, S R, N)
            xbar = ref[:, off : off + X0.size].reshape(traj.shape)
            off += X0.size
            limit_q = ref[:, offq : offq + u.size].reshape((p.steps + 1,) + u.shape)
            offq += u.size
            dev = np.max(np.abs(traj - xbar), axis=2)  # (steps+1, S R)
            gap[:, k] = np.sqrt(np.mean(np.max(dev, axis=0).reshape(S, -1) ** 2, axis=1))
            gap_t[k] = dev.mean(axis=1)
            w = np.stack([w2_to_limit(traj[n], limit_q[n], cw) for n in range(p.steps + 1)])  # (steps+1, S R)
            w2[:, k] = w[-1].reshape(S, -1).mean(axis=1)
            w2_t[k] = w.mean(axis=1)
            order0 = np.argsort(X0, axis=1)
            ordered &= bool(np.all(np.diff(np.take_along_axis(traj[-1], order0, axis=1), axis=1) >= 0))
            ordered &= bool(np.all(np.diff(limit_q.reshape(p.steps + 1, -1), axis=1) >= 0))
            bar.update(1)
        big = x0[-1][: p.particles // p.Ns[-1]]
        step_error = float(np.max(np.abs(particle_system(big, p.heads, p.T, 2 * p.steps)[::2]
                                         - particle_system(big, p.heads, p.T, p.steps))))
        bar.update(1)
    return ChaosMeasurement(tuple(p.Ns), gap, w2, np.linspace(0.0, p.T, p.steps + 1), gap_t, w2_t,
                            flow_error, step_error, ordered, np.stack([nodes.min(axis=1), nodes.max(axis=1)], axis=1))


def run(*, size: str = "default", seeds: int = 5, seed: int = 0, progress: bool | None = None) -> LimitExperiment:
    """Experiment ``chaos-tokens`` at ``size`` (a key of :data:`SIZES`) over ``seeds`` seeds from ``seed``.

    Two fits against ``N``: the coupled gap and :math:`E\\,W_2(\\mu^N_T,\\mu_T)`, each beside
    the theorem's :math:`\\epsilon_N = N^{-1/4}` (``d = 1``). See :func:`experiment`.
    """
    if size not in SIZES:
        raise NtkcheckError(f"chaos-tokens: unknown size {size!r}; known: {', '.join(SIZES)}")
    return experiment(SIZES[size], seeds=seeds, seed=seed, progress=progress)


def experiment(params: ChaosParams, *, seeds: int = 5, seed: int = 0, progress: bool | None = None) -> LimitExperiment:
    """:func:`measure` at ``params``, then the two rate fits against the theorem's ``eps_N`` (:func:`~ntkcheck.limits.rates.fit_rate`)."""
    if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 2:
        raise NtkcheckError(f"chaos-tokens: need at least 2 seeds for a confidence interval, got {seeds!r}")
    t0 = time.perf_counter()
    p = params
    m = measure(p, seeds=seeds, seed=seed, progress=progress)
    theorem = "eps_N = N^(-1/4) (d = 1 < 4)"
    ref = m.reference_error
    fits = (
        fit_rate(m.Ns, m.gap, variable="N", quantity="E[sup_t max_i |x_i^N - xbar_i|^2]^(1/2)", theorem=theorem,
                 theorem_rate=eps_N, reference_error=ref),
        fit_rate(m.Ns, m.w2, variable="N", quantity="E W_2(mu_T^N, mu_T)", theorem=theorem,
                 theorem_rate=eps_N, reference_error=ref),
    )
    setting = (f"d = 1, mu_0 = U[-1, 1], {p.heads.H} heads (Q K, V) = "
               f"{[(round(float(a), 3), float(v)) for a, v in zip(p.heads.scores, p.heads.values, strict=True)]}, "
               f"T = {p.T:g}, RK4 with {p.steps} steps; N = {list(p.Ns)}, {p.particles} tokens per N and seed; "
               f"limit: {p.nodes}-node Gauss-Legendre quadrature of mu_0 transported as weighted particles, "
               f"xbar_i = Phi_t(x_i(0)) as test particles (synchronous coupling)")
    notes = (
        "eps_N = N^(-1/4) because d = 1 < 4; it bounds every compactly supported law, while for a law with a "
        "density bounded below on an interval and a smooth kernel N^(-1/2) is expected (empirical W_2 on the line, "
        "CLT for the field): a slope below -1/4 is consistent, not a test of sharpness",
        "the gap is sup over the RK4 time grid inside the expectation (stronger than the theorem's sup_t E[.]), "
        "root-mean-square over the independent systems of each seed",
        f"reference error {ref:.2g} = max(flow map at two quadrature/step resolutions {m.flow_error:.2g}, "
        f"particle system at two step sizes {m.step_error:.2g})",
        f"mu_t moves: support [{m.support_t[0, 0]:+.3f}, {m.support_t[0, 1]:+.3f}] at t = 0, "
        f"[{m.support_t[-1, 0]:+.3f}, {m.support_t[-1, 1]:+.3f}] at t = T",
    )
    data = {"N": list(m.Ns), "t": m.times.tolist(), "gap_t": m.gap_t.tolist(), "w2_t": m.w2_t.tolist(),
            "support_t": m.support_t.tolist(), "reference_error": ref, "flow_error": m.flow_error,
            "step_error": m.step_error}
    checks = {"1-D order preserved by both flows (the quantile formula of W_2 applies)": m.order_preserved}
    return LimitExperiment("chaos-tokens", "seed 002 Thm. 4.2", setting, fits, checks, notes,
                           time.perf_counter() - t0, data)
