r"""Depth and heads together during training (AdamW): abstract "Uniform Scaling Limits in AdamW-Trained Transformers".

An ``L``-layer, ``H``-head transformer trained with AdamW against its forward-backward limit.

Claim (abstract "Uniform Scaling Limits in AdamW-Trained Transformers"): the hidden states and the
back-propagated (adjoint) variables of an ``L``-layer, ``H``-head transformer trained with
AdamW converge in :math:`L^2`, uniformly over the initial tokens, to the solution of a
forward-backward system of ODEs, at rate :math:`O(L^{-1} + L^{-1/3}H^{-1/2})`.

**Model** (the mean-field deep model of "A Mean-Field Theory of Transformers", seed 002
eq. 6 without the MLP, and "Training Infinitely Deep and Wide Transformers", seed 003
eqs. 3-5): tokens of sample :math:`i` move through ``L`` residual attention layers of
step :math:`1/L`, the heads of layer :math:`l` averaged with weight :math:`1/H`,

.. math::

    x^{l+1}_{is} = x^l_{is} + \frac1L\,\frac1H\sum_{h=1}^H V_{lh}\,
    \nabla\Lambda_{\mu^l_i}(Q_{lh}x^l_{is} + b_{lh}),\qquad
    \nabla\Lambda_\mu(a) = \sum_r \operatorname{softmax}_r(\langle a, x_r\rangle)\,x_r,

with :math:`\mu^l_i` the current tokens of sample :math:`i`; the loss is
:math:`\frac1{2n}\sum_i\frac1N\sum_s|x^L_{is}-y_{is}|^2`. The adjoint
:math:`p^l = \partial\mathcal L/\partial x^l` is reported per unit mass,
:math:`\hat p^l_{is} = nN\,p^l_{is}` (the adjoint density of seed 003 Def. 1).

**Coupling.** The heads are particles :math:`\theta_{lh} = \theta(l/L, \omega_{lh})` with
:math:`\omega_{lh}` i.i.d. over layers *and* heads from a fixed law :math:`\rho` of finite
support (``K`` atoms, uniform weights) and a smooth depth profile :math:`\theta(t,\omega)`
(:class:`HeadLaw`). Heads drawn independently per layer are what the theorem's rate needs:
with one draw shared by all layers the error at fixed ``H`` would stay of order
:math:`H^{-1/2}` as :math:`L\to\infty`. Because :math:`\rho` has finite support, ``H``
i.i.d. heads of a layer are *exactly* ``K`` distinct heads with multinomial weights
:math:`n_{lk}/H` (copies of a head get equal gradients and stay equal under AdamW), so
any ``H`` (up to :math:`2^{24}`) costs the same; the tests check this reduction against the
explicit ``H``-head model of :mod:`ntkcheck.dynamics.model`.

**AdamW and the head scaling.** The gradient of head :math:`(l, h)` is
:math:`\frac1{LH}\,\hat g(l/L, \theta_{lh})` with :math:`\hat g(t,\theta) = \sum_{i,s}
\langle p(t)_{is}, \partial_\theta f(x_{is}(t);\theta,\mu_i(t))\rangle` the particle
gradient (the first variation of the risk). AdamW (:mod:`ntkcheck.limits._adamw`) is
applied to the *rescaled* gradient :math:`LH\,\nabla_{\theta_{lh}}\mathcal L = \hat g`, with
``lr``, betas, ``eps`` and weight decay independent of ``L`` and ``H``: Adam is invariant to
the gradient's scale except through ``eps``, so this is AdamW with
:math:`\varepsilon/(LH)` on the raw gradient - the "suitable adaptation" under which every
particle follows a limit AdamW map. ``eps > 0`` keeps that map Lipschitz in the gradient
(constant :math:`\alpha/\varepsilon` at the first step; at ``eps -> 0`` the first step is
:math:`\alpha\,\mathrm{sign}(\hat g)`, discontinuous).

**Reference.** The limit is the same system with the head average replaced by the
:math:`\rho`-average (``K`` atoms, weights :math:`1/K`: exact) and the depth continuous;
it is solved by the Euler scheme at ``L_ref``, ``L_ref/2``, ``L_ref/4`` layers and Richardson
extrapolation :math:`R = 2E(L_\mathrm{ref}) - E(L_\mathrm{ref}/2)` (second order); its error
is bounded by :math:`|R - R'|`, :math:`R'` the extrapolation one level down.

References: abstract "Uniform Scaling Limits in AdamW-Trained Transformers"; seed 003 Def. 1
(adjoint), seed 002 eq. 24.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._progress import progress_bar
from ..errors import DomainError, InputError
from ._adamw import AdamW, AdamWState, adamw_step
from .rates import LimitExperiment, fit_rate

__all__ = [
    "SIZES", "OPTIMIZER", "HeadLaw", "Problem", "Trajectory", "Reference", "default_law", "default_problem",
    "pack", "unpack", "theta_size", "head_weights", "sample_weights", "forward_backward", "train",
    "finite_models", "reference", "errors_against", "run",
]


# ----------------------------------------------------------------------------- the law of the heads


@dataclass(frozen=True)
class HeadLaw:
    r"""The law :math:`\rho` of :math:`\omega` (``K`` atoms, uniform) and the depth profile.

    .. math::

        V(t,\omega_k) = V_0 + \sigma\,(A_k\cos\pi t + B_k\sin\pi t),\quad
        Q(t,\omega_k) = C_k + t D_k,\quad b(t,\omega_k) = c_k + t e_k .

    Attributes
    ----------
    V0 : (d, d) array
    A, B, C, D : (K, d, d) arrays
    c, e : (K, d) arrays
    sigma : float
        Spread of the values across heads (the size of the head-sampling fluctuation).
    """

    V0: np.ndarray
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    c: np.ndarray
    e: np.ndarray
    sigma: float

    @property
    def atoms(self) -> int:
        return int(self.A.shape[0])

    @property
    def dim(self) -> int:
        return int(self.A.shape[-1])

    def at(self, t: np.ndarray) -> np.ndarray:
        """Packed particle parameters :math:`(V, Q, b)` at depths ``t``: shape (len(t), K, 2 d^2 + d)."""
        t = np.asarray(t, dtype=np.float64)[:, None, None, None]
        V = self.V0 + self.sigma * (self.A * np.cos(np.pi * t) + self.B * np.sin(np.pi * t))
        Q = self.C + t * self.D
        b = self.c + t[..., 0] * self.e
        return pack(V, Q, b)


def pack(V: np.ndarray, Q: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(..., d, d), (..., d, d), (..., d)`` -> ``(..., 2 d^2 + d)`` (V, then Q, then b)."""
    lead = V.shape[:-2]
    return np.concatenate([V.reshape(lead + (-1,)), Q.reshape(lead + (-1,)), b], axis=-1)


def unpack(theta: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of :func:`pack`."""
    lead = theta.shape[:-1]
    dd = d * d
    return (theta[..., :dd].reshape(lead + (d, d)), theta[..., dd : 2 * dd].reshape(lead + (d, d)),
            theta[..., 2 * dd :])


def default_law(atoms: int = 8, dim: int = 2, sigma: float = 1.5, seed: int = 2605) -> HeadLaw:
    """The fixed law of the experiment: ``atoms`` heads, values spread ``sigma`` around a rotation."""
    if int(atoms) != atoms or atoms < 1 or int(dim) != dim or dim < 2:
        raise DomainError(f"default_law: need atoms >= 1 and dim >= 2, got atoms={atoms!r}, dim={dim!r}")
    rng = np.random.default_rng(seed)
    d = int(dim)
    V0 = 0.6 * np.array([[0.0, -1.0], [1.0, 0.0]]) if d == 2 else 0.6 * np.eye(d)
    g = lambda *s: rng.standard_normal(s)  # noqa: E731
    A, B = g(atoms, d, d) / math.sqrt(d), g(atoms, d, d) / math.sqrt(d)
    A -= A.mean(axis=0)
    B -= B.mean(axis=0)
    C, D = g(atoms, d, d), 0.5 * g(atoms, d, d)
    c, e = 0.5 * g(atoms, d), 0.5 * g(atoms, d)
    return HeadLaw(V0, A, B, C, D, c, e, float(sigma))


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Problem:
    """Training data and probe tokens.

    Attributes
    ----------
    X : (n, N, d) array
        The samples' tokens (each sample its own context).
    Y : (n, N, d) array
        Token targets.
    probes : (n, R, d) array
        Extra initial tokens moved by sample ``i``'s flow map (context :math:`\\mu^l_i`) but
        not part of it: the uniformity of the hidden-state error over initial conditions.
    """

    X: np.ndarray
    Y: np.ndarray
    probes: np.ndarray

    def __post_init__(self) -> None:
        X, Y, P = (np.asarray(a, dtype=np.float64) for a in (self.X, self.Y, self.probes))
        if X.ndim != 3 or min(X.shape) < 1:
            raise InputError(f"Problem: tokens X must have shape (n, N, d) with n, N, d >= 1, got {X.shape}")
        if Y.shape != X.shape:
            raise InputError(f"Problem: targets Y must have the tokens' shape {X.shape}, got {Y.shape}")
        if P.ndim != 3 or P.shape[0] != X.shape[0] or P.shape[2] != X.shape[2] or P.shape[1] < 1:
            raise InputError(f"Problem: probes must have shape ({X.shape[0]}, R, {X.shape[2]}) with R >= 1, got {P.shape}")
        for name, a in (("X", X), ("Y", Y), ("probes", P)):
            if not np.all(np.isfinite(a)):
                raise InputError(f"Problem: {name} has non-finite entries")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "Y", Y)
        object.__setattr__(self, "probes", P)


def default_problem(samples: int = 2, tokens: int = 4, probes: int = 3, dim: int = 2, seed: int = 7) -> Problem:
    """Tokens uniform in the square, targets a rotation by 30 degrees scaled by 1.2, probes on a
    ``probes x probes`` grid of the square (the same grid against each sample's context)."""
    if min(samples, tokens, probes) < 1 or dim < 2:
        raise DomainError(f"default_problem: need samples, tokens, probes >= 1 and dim >= 2, got "
                          f"{samples}, {tokens}, {probes}, dim={dim}")
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (samples, tokens, dim))
    a = math.pi / 6
    R = np.eye(dim)
    R[:2, :2] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    Y = 1.2 * X @ R.T
    g = np.linspace(-1.0, 1.0, probes)
    grid = np.stack(np.meshgrid(*([g] * dim), indexing="ij"), axis=-1).reshape(-1, dim)
    return Problem(X, Y, np.broadcast_to(grid, (samples,) + grid.shape).copy())


# ----------------------------------------------------------------------------- head weights


def head_weights(counts: np.ndarray, heads: int) -> np.ndarray:
    r"""Weight of each distinct head in a layer's head average: :math:`n_{lk}/H`."""
    return counts / heads


def sample_weights(L: int, H: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """Weights (L, K) of ``H`` i.i.d. heads per layer, uniform over the ``K`` atoms (multinomial counts)."""
    if int(L) != L or L < 1 or int(H) != H or H < 1 or int(K) != K or K < 1:
        raise DomainError(f"sample_weights: L, H, K must be positive integers, got L={L!r}, H={H!r}, K={K!r}")
    counts = rng.multinomial(int(H), np.full(int(K), 1.0 / K), size=int(L)).astype(np.float64)
    return head_weights(counts, H)


# ----------------------------------------------------------------------------- forward / adjoint


def _attend(Xq: np.ndarray, Xk: np.ndarray, Qt: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """Queries (rows (token, head)) ``A = Q_k x + b_k`` (B, n, S K, d), softmax weights ``P``
    (B, n, S K, R) over the keys ``Xk`` (B, n, R, d), :math:`M = \\nabla\\Lambda_\\mu(A)` (B, n, S K, d).
    ``Qt``: (B, 1, d, K d), the stacked transposed queries; ``b``: (B, 1, 1, K d)."""
    Bn, n, S, d = Xq.shape
    A = (Xq @ Qt + b).reshape(Bn, n, -1, d)
    P = A @ Xk.transpose(0, 1, 3, 2)
    P -= P.max(axis=-1, keepdims=True)
    np.exp(P, out=P)
    P /= P.sum(axis=-1, keepdims=True)
    return A, P, P @ Xk


@dataclass(frozen=True)
class Trajectory:
    r"""Hidden states, adjoints and probes of a batch of models at one training step.

    Attributes
    ----------
    x : (B, L+1, n, N, d) array, :math:`x^l`
    p : (B, L+1, n, N, d) array, :math:`\hat p^l = nN\,\partial\mathcal L/\partial x^l`
    probes : (B, L+1, n, R, d) array
    loss : (B,) array
    """

    x: np.ndarray
    p: np.ndarray
    probes: np.ndarray
    loss: np.ndarray


def forward_backward(theta: np.ndarray, W: np.ndarray, problem: Problem, step: float) -> tuple[Trajectory, np.ndarray]:
    r"""One forward and one adjoint pass of ``B`` models at once.

    Parameters
    ----------
    theta : (B, L, K, 2 d^2 + d) array
        Packed particle parameters (:func:`pack`).
    W : (B, L, K) array
        Head weights of each layer (:func:`head_weights`; rows sum to 1).
    step : float
        The residual step (``1/L`` for the model).

    Returns
    -------
    (Trajectory, particle gradients (B, L, K, 2 d^2 + d)): the particle gradient is
    :math:`\hat g_{lk} = \partial\mathcal L/\partial\theta_{lk}\,/\,(\tau W_{lk})`, i.e.
    :math:`LH\,\nabla_{\theta_{lh}}\mathcal L` for each head that is a copy of atom ``k``.
    """
    n, N, d = problem.X.shape
    if theta.ndim != 4 or theta.shape[-1] != theta_size(d) or W.shape != theta.shape[:3]:
        raise InputError(f"forward_backward: expected theta (B, L, K, {theta_size(d)}) and weights (B, L, K), "
                         f"got {theta.shape} and {W.shape}")
    Bn, L, K, _ = theta.shape
    V, Q, b = unpack(theta, d)
    Qt = Q.transpose(0, 1, 4, 2, 3).reshape(Bn, L, 1, d, K * d)  # [d_in, (k, e)] = Q_k[e, d_in]
    Qs = Q.reshape(Bn, L, 1, K * d, d)  # [(k, e), d_in]
    bs = b.reshape(Bn, L, 1, 1, K * d)
    Vt = V.transpose(0, 1, 3, 2, 4).reshape(Bn, L, 1, d, K * d)  # [f, (k, e)] = V_k[f, e]
    c = step * W  # (B, L, K): tau * weight of each distinct head
    VWs = (V * c[..., None, None]).transpose(0, 1, 2, 4, 3).reshape(Bn, L, 1, K * d, d)  # [(k, e), f]
    X = np.broadcast_to(problem.X, (Bn, n, N, d)).copy()
    Pr = np.broadcast_to(problem.probes, (Bn,) + problem.probes.shape).copy()
    xs, prs, cache = [X], [Pr], []
    NK = N * K
    for j in range(L):
        # tokens and probes query the tokens in one pass; rows (token, head), the tokens first
        A, P, M = _attend(np.concatenate([X, Pr], axis=2), X, Qt[:, j], bs[:, j])
        U = M.reshape(Bn, n, -1, K * d) @ VWs[:, j]
        cache.append((A[:, :, :NK], P[:, :, :NK], M[:, :, :NK]))
        X = X + U[:, :, :N]
        Pr = Pr + U[:, :, N:]
        xs.append(X)
        prs.append(Pr)
    R = X - problem.Y
    loss = 0.5 * np.sum(R * R, axis=(1, 2, 3)) / (n * N)
    G = R / (n * N)
    ps = [G]
    grads = np.empty_like(theta)
    for j in range(L - 1, -1, -1):
        A, P, M = cache[j]
        X = xs[j]
        Gm = (G @ Vt[:, j]).reshape(Bn, n, N * K, d)  # per-particle value adjoint V_k^T G, rows (s, k)
        gV = G.reshape(Bn, n * N, d).transpose(0, 2, 1) @ M.reshape(Bn, n * N, K * d)  # [f, (k, e)]
        dZ = Gm @ X.transpose(0, 1, 3, 2)
        dZ -= np.sum(Gm * M, axis=-1, keepdims=True)
        dZ *= P
        dA = dZ @ X  # (B, n, N K, d): per-particle query adjoint
        gQ = dA.reshape(Bn, n * N, K * d).transpose(0, 2, 1) @ X.reshape(Bn, n * N, d)  # [(k, e), d_in]
        gb = dA.reshape(Bn, n * N, K * d).sum(axis=1)
        grads[:, j] = np.concatenate([gV.reshape(Bn, d, K, d).transpose(0, 2, 1, 3).reshape(Bn, K, d * d),
                                      gQ.reshape(Bn, K, d * d), gb.reshape(Bn, K, d)], axis=-1)
        cl = c[:, j][:, None, None, :, None]  # (B, 1, 1, K, 1) on rows (s, k)
        cdA = (dA.reshape(Bn, n, N, K, d) * cl).reshape(Bn, n, N, K * d)
        cGm = (Gm.reshape(Bn, n, N, K, d) * cl).reshape(Bn, n, N * K, d)
        cdZ = (dZ.reshape(Bn, n, N, K, N) * cl).reshape(Bn, n, N * K, N)
        G = (G + cdA @ Qs[:, j]  # query
             + cdZ.transpose(0, 1, 3, 2) @ A  # keys (context through the scores)
             + P.transpose(0, 1, 3, 2) @ cGm)  # values (context through the average)
        ps.append(G)
    p = np.stack(ps[::-1], axis=1) * (n * N)
    return Trajectory(np.stack(xs, axis=1), p, np.stack(prs, axis=1), loss), grads


def train(theta0: np.ndarray, W: np.ndarray, problem: Problem, steps: int, opt: AdamW) -> list[Trajectory]:
    """``steps`` AdamW updates of every particle on its particle gradient; the trajectories at
    steps ``0 .. steps`` (the last one after the last update)."""
    L = theta0.shape[1]
    state = AdamWState.start(theta0)
    out = []
    for _ in range(steps + 1):
        traj, g = forward_backward(state.theta, W, problem, 1.0 / L)
        out.append(traj)
        if len(out) <= steps:
            state = adamw_step(state, g, opt)
    return out


# ----------------------------------------------------------------------------- the reference


@dataclass(frozen=True)
class Reference:
    r"""The limit forward-backward system after each training step, on the depth grid ``t = j/M``.

    Attributes
    ----------
    x, p : (steps+1, M+1, n, N, d) arrays
        Hidden states and adjoint densities of the limit (Richardson-extrapolated Euler).
    probes : (steps+1, M+1, n, R, d) array
    layers : int
        ``L_ref``, the finest Euler resolution (``M = L_ref/2``).
    error : float
        Estimated error :math:`\max|R - R'|` (module docstring), over steps, depths, tokens.
    """

    x: np.ndarray
    p: np.ndarray
    probes: np.ndarray
    layers: int
    error: float

    @property
    def grid(self) -> int:
        return int(self.x.shape[1] - 1)


def _limit_euler(law: HeadLaw, problem: Problem, steps: int, opt: AdamW, layers: int) -> list[Trajectory]:
    """The limit system by Euler at ``layers``: all ``K`` atoms in every layer, weights ``1/K``."""
    K = law.atoms
    theta0 = law.at(np.arange(layers) / layers)[None]
    W = np.full((1, layers, K), 1.0 / K)  # the law's own masses: the exact rho-average
    return train(theta0, W, problem, steps, opt)


def _stack(trajs: list[Trajectory], stride: int) -> tuple[np.ndarray, ...]:
    return tuple(np.stack([getattr(tr, f)[0, ::stride] for tr in trajs]) for f in ("x", "p", "probes"))


def reference(law: HeadLaw, problem: Problem, steps: int, opt: AdamW, layers: int = 256) -> Reference:
    """The limit after ``0 .. steps`` AdamW steps: Euler at ``layers``, ``layers/2``, ``layers/4``, two
    Richardson extrapolations, the finer one returned with the error estimate :math:`|R - R'|`."""
    if int(layers) != layers or layers < 8 or layers % 4:
        raise DomainError(f"reference: layers must be a multiple of 4, at least 8, got {layers!r}")
    E1, E2, E4 = (_stack(_limit_euler(law, problem, steps, opt, layers // q), 1) for q in (1, 2, 4))
    R = [2 * a[:, ::2] - b for a, b in zip(E1, E2, strict=True)]
    Rc = [2 * a[:, ::2] - b for a, b in zip(E2, E4, strict=True)]
    err = max(float(np.max(np.linalg.norm(r[:, ::2] - rc, axis=-1))) for r, rc in zip(R, Rc, strict=True))
    return Reference(R[0], R[1], R[2], int(layers), err)


def errors_against(trajs: list[Trajectory], ref: Reference) -> tuple[np.ndarray, np.ndarray]:
    r"""Errors of ``B`` models against the limit after each training step.

    Returns
    -------
    (ex, ep): (B, steps+1) arrays,
    :math:`\max_{l,i,s}|x^l_{is} - x_{is}(l/L)|` over the tokens *and* the probes, and
    :math:`\max_{l,i,s}|\hat p^l_{is} - p_{is}(l/L)|` over the tokens.
    """
    L = trajs[0].x.shape[1] - 1
    if ref.grid % L or len(trajs) != ref.x.shape[0]:
        raise DomainError(f"errors_against: depth {L} must divide the reference grid {ref.grid} "
                          f"and {len(trajs)} steps must match {ref.x.shape[0]}")
    q = ref.grid // L
    ex = np.empty((trajs[0].x.shape[0], len(trajs)))
    ep = np.empty_like(ex)
    for s, tr in enumerate(trajs):
        dx = np.linalg.norm(tr.x - ref.x[s, ::q], axis=-1).max(axis=(1, 2, 3))
        dq = np.linalg.norm(tr.probes - ref.probes[s, ::q], axis=-1).max(axis=(1, 2, 3))
        ex[:, s] = np.maximum(dx, dq)
        ep[:, s] = np.linalg.norm(tr.p - ref.p[s, ::q], axis=-1).max(axis=(1, 2, 3))
    return ex, ep


def finite_models(law: HeadLaw, problem: Problem, layers: int, heads: list[int], seeds: list[int],
                  steps: int, opt: AdamW) -> list[Trajectory]:
    """Train one ``layers``-layer model per (head count, seed) pair (batch order: heads outer),
    heads i.i.d. from ``law`` per layer, drawn with ``numpy.random.default_rng([seed, layers, H])``."""
    K = law.atoms
    W = np.stack([sample_weights(layers, H, K, np.random.default_rng([s, layers, H])) for H in heads for s in seeds])
    theta0 = np.broadcast_to(law.at(np.arange(layers) / layers), (len(W), layers, K, theta_size(law.dim))).copy()
    return train(theta0, W, problem, steps, opt)


def theta_size(d: int) -> int:
    """Parameters per head: ``V``, ``Q`` (d x d) and ``b`` (d)."""
    return 2 * d * d + d


# ----------------------------------------------------------------------------- the experiment

#: sizes of :func:`run`: Euler resolution of the reference, depths of the L-fit (at ``H_large``
#: heads), the depth and head counts of the H-fit, AdamW steps, data
SIZES: dict[str, dict[str, Any]] = {
    "small": {"ref_layers": 128, "Ls": (4, 8, 16, 32), "H_large": 2**24, "L_fixed": 64,
              "Hs": (1, 4, 16, 64), "steps": 5, "samples": 2, "tokens": 4, "probes": 3},
    "default": {"ref_layers": 256, "Ls": (4, 8, 16, 32, 64, 128), "H_large": 2**24, "L_fixed": 128,
                "Hs": (1, 2, 4, 8, 16, 32, 64), "steps": 10, "samples": 2, "tokens": 4, "probes": 4},
}

#: the AdamW of the experiment (on the particle gradient; module docstring)
OPTIMIZER = AdamW(lr=0.02, betas=(0.9, 0.999), eps=1e-2, weight_decay=0.01)


def _size(size: str) -> Mapping[str, Any]:
    if size not in SIZES:
        raise DomainError(f"depth-heads: unknown size {size!r}; known: {', '.join(SIZES)}")
    return SIZES[size]


def run(*, size: str = "default", seeds: int = 5, seed: int = 0, progress: bool | None = None,
        steps: int | None = None, lr: float | None = None) -> LimitExperiment:
    r"""Errors of trained ``L``-layer, ``H``-head models against the forward-backward limit.

    The error of one model is :math:`\max(\max|x - \bar x|, \max|\hat p - \bar p|)` after
    ``steps`` AdamW steps, the maxima over depths :math:`l/L`, tokens (and probe tokens for
    the hidden states). Two fits: against ``L`` at ``H_large`` heads (the :math:`L^{-1}` term
    dominates) and against ``H`` at depth ``L_fixed`` (the :math:`L^{-1/3}H^{-1/2}` term
    dominates for the ``H`` measured); ``seeds`` independent draws of the heads,
    ``seed, seed+1, ...``. ``steps`` and ``lr`` override the size's AdamW steps and
    :data:`OPTIMIZER`'s learning rate (the claim draws them).
    """
    cfg = _size(size)
    if int(seeds) != seeds or seeds < 2:
        raise DomainError(f"depth-heads: need at least 2 seeds for a confidence interval, got {seeds!r}")
    if int(seed) != seed or seed < 0:
        raise DomainError(f"depth-heads: seed must be a non-negative integer, got {seed!r}")
    t0 = time.perf_counter()
    law = default_law()
    problem = default_problem(cfg["samples"], cfg["tokens"], cfg["probes"], law.dim)
    steps = int(cfg["steps"] if steps is None else steps)
    if steps < 0:
        raise DomainError(f"depth-heads: steps must be a non-negative integer, got {steps!r}")
    opt = OPTIMIZER if lr is None else dataclasses.replace(OPTIMIZER, lr=float(lr))
    seed_list = [int(seed) + k for k in range(int(seeds))]
    Ls, Hs, Lf, Hl = list(cfg["Ls"]), list(cfg["Hs"]), int(cfg["L_fixed"]), int(cfg["H_large"])
    work = 1.75 * cfg["ref_layers"] + sum(Ls) + Lf
    # a model that blows up (a wrong scaling) yields inf/nan errors: the "finite" check reports it
    with progress_bar(work, desc="depth-heads", unit="layers", enabled=progress) as bar, np.errstate(all="ignore"):
        ref = reference(law, problem, steps, opt, int(cfg["ref_layers"]))
        bar.update(1.75 * cfg["ref_layers"])
        xs_L, ps_L = [], []
        for L in Ls:
            ex, ep = errors_against(finite_models(law, problem, L, [Hl], seed_list, steps, opt), ref)
            xs_L.append(ex)
            ps_L.append(ep)
            bar.update(L)
        ex, ep = errors_against(finite_models(law, problem, Lf, Hs, seed_list, steps, opt), ref)
        bar.update(Lf)
    S = len(seed_list)
    exL, epL = np.stack(xs_L, axis=1), np.stack(ps_L, axis=1)  # (seeds, len(Ls), steps + 1)
    exH, epH = (e.reshape(len(Hs), S, -1).transpose(1, 0, 2) for e in (ex, ep))  # (seeds, len(Hs), steps + 1)
    curves = {f"L={L}": {"x": exL[:, j].tolist(), "p": epL[:, j].tolist()} for j, L in enumerate(Ls)}
    curves.update({f"L={Lf},H={H}": {"x": exH[:, j].tolist(), "p": epH[:, j].tolist()} for j, H in enumerate(Hs)})
    hl = int(round(math.log2(Hl)))

    def fits_of(eL: np.ndarray, eH: np.ndarray, what: str) -> tuple[Any, Any]:
        quantity = f"max {what} after {steps} AdamW steps"
        return (fit_rate(Ls, eL[..., -1], variable="L", quantity=quantity,
                         theorem=f"L^(-1) + L^(-1/3) H^(-1/2), H = 2^{hl}",
                         theorem_rate=lambda x: 1.0 / x + x ** (-1 / 3) / math.sqrt(Hl), reference_error=ref.error),
                fit_rate(Hs, eH[..., -1], variable="H", quantity=quantity,
                         theorem=f"L^(-1/3) H^(-1/2), L = {Lf}",
                         theorem_rate=lambda x: x ** -0.5, reference_error=ref.error))

    finite = all(bool(np.all(np.isfinite(e))) for e in (exL, epL, exH, epH))
    checks = {"errors finite (no blow-up)": finite}
    fits: tuple[Any, ...] = ()
    parts: dict[str, Any] = {}
    if finite:
        fits = fits_of(np.maximum(exL, epL), np.maximum(exH, epH), "|(x, p) - limit|")
        parts = {"hidden states": fits_of(exL, exH, "|x - limit|"), "adjoints": fits_of(epL, epH, "|p - limit|")}
    notes = (
        "head scaling: residual step 1/L, heads averaged with 1/H; AdamW on the particle gradient "
        "L H grad_theta Loss with lr, betas, eps, weight decay independent of L and H (eps/(L H) on "
        f"the raw gradient): lr={opt.lr}, betas={opt.betas}, eps={opt.eps}, weight decay={opt.weight_decay}",
        f"heads theta(l/L, omega) with omega i.i.d. over layers and heads from {law.atoms} atoms; H i.i.d. "
        "heads of a layer are exactly the atoms weighted by multinomial counts / H",
        f"reference: Richardson-extrapolated Euler at {cfg['ref_layers']} and {cfg['ref_layers'] // 2} layers, "
        f"estimated error {ref.error:.2g}",
        f"uniformity: max over {problem.X.shape[0] * problem.X.shape[1]} tokens and "
        f"{problem.probes.shape[0] * problem.probes.shape[1]} probe tokens, every depth l/L",
    ) + tuple(f"{k} alone: slope vs L {fL.slope:+.3f} [{fL.ci[0]:+.3f}, {fL.ci[1]:+.3f}] ({fL.verdict}), "
              f"vs H {fH.slope:+.3f} [{fH.ci[0]:+.3f}, {fH.ci[1]:+.3f}] ({fH.verdict})" for k, (fL, fH) in parts.items())
    setting = (f"d = {law.dim}, {problem.X.shape[0]} samples x {problem.X.shape[1]} tokens, {steps} AdamW steps; "
               f"L in {Ls} at H = 2^{int(round(math.log2(Hl)))}; H in {Hs} at L = {Lf}")
    data = {"steps": list(range(steps + 1)), "curves": curves, "reference_error": ref.error,
            "Ls": Ls, "Hs": Hs, "L_fixed": Lf, "H_large": Hl,
            "parts": {k: [f.to_dict() for f in v] for k, v in parts.items()}}
    return LimitExperiment("depth-heads", 'abstract "Uniform Scaling Limits in AdamW-Trained Transformers"', setting,
                           fits, checks, notes, time.perf_counter() - t0, data)
