r"""Deep multi-head attention trained by gradient flow, measured against the NTK theorems.

**Model** (MATH.md section 1, seed 002 eq. 2 and eq. 6 without the MLP, seed 003 eqs. 3-5).
``H`` heads :math:`\theta_h = (V_h, Q_h, b_h)` and ``L`` explicit Euler layers of step
:math:`\tau = T/L`; every token of sample ``i`` moves and the context is the current
token set :math:`\mu^i_l = \frac1{N_i}\sum_j \delta_{x^l_{ij}}`:

.. math::

    x^{l+1} = x^l + \frac{\tau}{H}\sum_h V_h\,\nabla\Lambda_{\mu^i_l}(Q_h x^l + b_h),
    \qquad \nabla\Lambda_\mu(a) = \sum_k \operatorname{softmax}_k(\langle a, x_k\rangle)\,x_k .

The heads are the same at every layer (``rho`` constant in depth, the default) or one
set per layer (``per_layer``: parameter arrays with a leading ``L`` axis).

**Losses.** Outputs :math:`z` and weights :math:`w`, :math:`\mathcal L = \frac12\sum w\,|z - y|^2`:

* ``"tokens"`` (seed 003): :math:`z = x^L_{ij}`, :math:`w_{ij} = 1/(n N_i)`, i.e.
  :math:`\frac1{2n}\sum_i \|x_T - y_i\|^2_{L^2(\mu_i)}`;
* ``"readout"`` (seed 002 Thm. 8.5): :math:`z_i = \frac1{N_i}\sum_j x^L_{ij}`, :math:`w_i = 1`.

**Adjoint** (seed 003 Def. 1, seed 002 eq. 24, discretised as the exact adjoint of the
Euler scheme, i.e. backpropagation): :math:`p^L = w\,(z - y)\,\partial z/\partial x^L` and
:math:`p^l = p^{l+1} + (\partial_x F_l)^T p^{l+1}` where :math:`\partial_x F_l` contains the
query derivative (through :math:`Q_h x + b_h`) and the context derivative (through
:math:`\mu^i_l`, the term :math:`D_\mu V\cdot\nabla p\,\mu` of seed 002 eq. 24). The
parameter gradient is :math:`\sum_l \langle p^{l+1}, \partial_\theta F_l\rangle`, the discrete
form of seed 002 eq. 25.

**Gradient flow** (MATH.md section 5): :math:`d\theta_h/ds = -m\,\nabla_{\theta_h}\mathcal L` with
mobility :math:`m = H` (shared heads: the mean-field Wasserstein flow of
:math:`\rho = \frac1H\sum_h\delta_{\theta_h}`) or :math:`m = HL/T` (per-layer heads: the flow
of :math:`\rho_t` in :math:`L^2(dt)` over depth, each layer a slab of mass :math:`\tau`).
Writing :math:`u = W^{1/2}(z - y)` (so :math:`\mathcal L = |u|^2/2`) and
:math:`J = \partial z/\partial\theta` over *all* parameters,

.. math::

    \frac{du}{ds} = -K u,\qquad K = m\,W^{1/2} J J^T W^{1/2},\qquad
    \frac{d\mathcal L}{ds} = -u^T K u \le -2\lambda_{\min}(K)\,\mathcal L .

``K`` is the NTK of seed 002 Def. 8.4 in these normalisations. At FixUp (``V = 0``)
only the ``V`` directions survive and, with :math:`G = W_N^{1/2}\mathcal K W_N^{1/2}` the
Gram of MATH.md section 3 (:math:`w_{ij} = 1/N_i`, ``ntkcheck.gram``):

* tokens, shared heads: :math:`K = \frac{T^2}{n} G\otimes I_d`; per-layer: :math:`\frac{T}{n} G\otimes I_d`;
* readout, shared heads: :math:`K = T^2 (A\mathcal K A^T)\otimes I_d` with :math:`A` the
  per-sample averaging; :math:`A W_N^{-1/2}` has orthonormal rows, so
  :math:`\lambda_{\min}(A\mathcal K A^T)\ge\lambda_{\min}(G)` (per-layer: ``T`` instead of ``T^2``).

**Rates.** With :math:`\lambda_0 = \lambda_{\min}(K_{\rho_0})`, the linearised flow gives
:math:`\mathcal L(s)\approx\frac12|e^{-K_0 s}u_0|^2`, which decays like
:math:`e^{-2\lambda_0 s}` along the slowest mode. Seed 002 eq. 31,
:math:`\mathcal L(s)\le e^{-\lambda_0 s}\mathcal L(0)`, is weaker by the factor 2 because
its proof only keeps :math:`\lambda_{\min}(K_{\rho_s})\ge\lambda_0/2` along the run. The
measured rate reported here is the one eq. 31 bounds,
:math:`\min_{s>0} -\log(\mathcal L(s)/\mathcal L(0))/s`; eq. 31 holds on the run iff it is
:math:`\ge\lambda_0`. The displacement :math:`\big(\frac1H\sum_h|\theta_h(s)-\theta_h(0)|^2\big)^{1/2}`
(per-layer: :math:`(\frac{T}{LH}\sum_{l,h}|\cdot|^2)^{1/2}`) bounds :math:`W_2(\rho_s,\rho_0)` and
its speed is exactly :math:`(u^T K u)^{1/2}`, so the proof of Thm. 8.5 applies verbatim:
:math:`W_2 \le 2\sqrt{2\Lambda+\lambda_0/L_K}\,\mathcal L(0)^{1/2}/\lambda_0`. ``L_K`` is not
computable; the bound reported is its :math:`L_K\to\infty` limit
:math:`2\sqrt{2\Lambda}\,\mathcal L(0)^{1/2}/\lambda_0` (the smallest the theorem can give).

References: seed 002 section 6 (adjoint), Def. 8.4, Thm. 8.5; seed 003 Def. 1, Thm. 4.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.integrate import solve_ivp

from ._validate import as_samples, as_token_set, check_score_range
from .errors import DomainError, InputError

__all__ = [
    "AttentionParams",
    "init_params",
    "forward",
    "loss_and_grad",
    "NTKSpectrum",
    "ntk_spectrum",
    "FlowResult",
    "gradient_flow",
    "overlap_example",
    "LocalConvergence",
    "local_convergence",
    "KernelPlateau",
    "kernel_plateau",
    "EpsSweep",
    "eps_sweep",
    "DepthConvergence",
    "depth_convergence",
    "default_samples",
]

LossKind = Literal["tokens", "readout"]
_LOSSES = ("tokens", "readout")


# ----------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class AttentionParams:
    """Parameters of the heads: shared over depth, or one set per layer.

    Attributes
    ----------
    V, Q : (H, d, d) or (L, H, d, d) float arrays
    b : (H, d) or (L, H, d) float array
        A leading ``L`` axis means per-layer heads.
    """

    V: np.ndarray
    Q: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        V, Q, b = (np.asarray(a, dtype=np.float64) for a in (self.V, self.Q, self.b))
        if V.ndim not in (3, 4) or V.shape != Q.shape or V.shape[-1] != V.shape[-2]:
            raise InputError(f"V and Q: expected equal shapes (H, d, d) or (L, H, d, d), got {V.shape} and {Q.shape}")
        if b.shape != V.shape[:-1]:
            raise InputError(f"b: expected shape {V.shape[:-1]} to match V {V.shape}, got {b.shape}")
        for name, a in (("V", V), ("Q", Q), ("b", b)):
            if not np.all(np.isfinite(a)):
                raise InputError(f"{name}: has non-finite entries")
        object.__setattr__(self, "V", V)
        object.__setattr__(self, "Q", Q)
        object.__setattr__(self, "b", b)

    @property
    def per_layer(self) -> bool:
        return self.V.ndim == 4

    @property
    def heads(self) -> int:
        return self.V.shape[-3]

    @property
    def dim(self) -> int:
        return self.V.shape[-1]

    @property
    def size(self) -> int:
        return self.V.size + self.Q.size + self.b.size

    def flat(self) -> np.ndarray:
        """All parameters as one vector (``V``, then ``Q``, then ``b``, C order)."""
        return np.concatenate([self.V.ravel(), self.Q.ravel(), self.b.ravel()])

    def unflat(self, vec: np.ndarray) -> AttentionParams:
        """Parameters of this shape from a vector laid out as :meth:`flat`."""
        nv, nb = self.V.size, self.b.size
        return AttentionParams(
            vec[:nv].reshape(self.V.shape), vec[nv : 2 * nv].reshape(self.Q.shape), vec[2 * nv : 2 * nv + nb].reshape(self.b.shape)
        )

    def __repr__(self) -> str:
        kind = f"per-layer L={self.V.shape[0]}" if self.per_layer else "shared"
        return f"AttentionParams(H={self.heads}, d={self.dim}, {kind}, |V|={np.linalg.norm(self.V):.3g})"


def init_params(
    dim: int,
    heads: int,
    *,
    layers: int | None = None,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    v_scale: float = 0.0,
    dist: Literal["gaussian", "uniform"] = "gaussian",
    seed: int = 0,
) -> AttentionParams:
    r"""Random heads; FixUp (``V = 0``) unless ``v_scale > 0``.

    ``Q, b`` come from :func:`ntkcheck.gram.init_heads` (entries ``N(0, q_scale^2)`` and
    ``N(0, b_scale^2)`` for ``dist="gaussian"``), so the NTK at FixUp is the Gram module's.
    ``V`` has i.i.d. entries ``N(0, v_scale^2 / d)``. ``layers`` given: one independent
    head set per layer (per-layer parameters, layer ``l`` drawn with seed ``seed + l``).

    Examples
    --------
    >>> init_params(2, 4, seed=0)
    AttentionParams(H=4, d=2, shared, |V|=0)
    """
    from .gram import init_heads

    if int(dim) != dim or dim < 1 or int(heads) != heads or heads < 1:
        raise DomainError(f"dim and heads must be positive integers, got dim={dim!r}, heads={heads!r}")
    if not (np.isfinite(v_scale) and v_scale >= 0):
        raise DomainError(f"v_scale must be finite and >= 0, got {v_scale!r}")
    n_sets = 1 if layers is None else int(layers)
    if n_sets < 1:
        raise DomainError(f"layers must be >= 1, got {layers}")
    hs = [init_heads(int(heads), int(dim), q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed + k) for k in range(n_sets)]
    Q = np.stack([np.array(h.Q) for h in hs])
    b = np.stack([np.array(h.b) for h in hs])
    rng = np.random.default_rng([seed, 1])
    V = rng.standard_normal(Q.shape) * (v_scale / math.sqrt(dim))
    if layers is None:
        return AttentionParams(V[0], Q[0], b[0])
    return AttentionParams(V, Q, b)


# ----------------------------------------------------------------------------- batching


@dataclass(frozen=True)
class _Batch:
    """Samples padded to a common length; padded tokens never enter any context."""

    X: np.ndarray  # (n, N, d), zeros in the padding
    mask: np.ndarray  # (n, N) bool, True on real tokens
    counts: np.ndarray  # (n,) int
    bias: np.ndarray  # (n, 1, 1, N): 0 on real tokens, -inf on padding (softmax mask)

    @staticmethod
    def of(samples: Sequence[np.ndarray]) -> _Batch:
        n, d = len(samples), samples[0].shape[1]
        Nmax = max(s.shape[0] for s in samples)
        X = np.zeros((n, Nmax, d))
        mask = np.zeros((n, Nmax), dtype=bool)
        for i, s in enumerate(samples):
            X[i, : s.shape[0]] = s
            mask[i, : s.shape[0]] = True
        bias = np.where(mask, 0.0, -np.inf)[:, None, None, :]
        return _Batch(X, mask, mask.sum(axis=1), bias)

    def unpad(self, X: np.ndarray) -> list[np.ndarray]:
        return [X[i, : self.counts[i]].copy() for i in range(X.shape[0])]

    def sample(self, i: int) -> _Batch:
        return _Batch(self.X[i : i + 1], self.mask[i : i + 1], self.counts[i : i + 1], self.bias[i : i + 1])


def _check_layers(params: AttentionParams, layers: int) -> None:
    if params.per_layer and params.V.shape[0] != layers:
        raise InputError(f"per-layer parameters have {params.V.shape[0]} layers, the model has layers={layers}")


def _at(a: np.ndarray, params: AttentionParams, k: int) -> np.ndarray:
    return a[k] if params.per_layer else a


@dataclass
class _Cache:
    Xs: list[np.ndarray] = field(default_factory=list)  # X^k, (n, N, d), k = 0..L
    As: list[np.ndarray] = field(default_factory=list)  # queries Q x + b, (n, H, N, d)
    Ps: list[np.ndarray] = field(default_factory=list)  # softmax weights, (n, H, N, N)
    Ms: list[np.ndarray] = field(default_factory=list)  # grad Lambda (head outputs before V), (n, H, N, d)

    def sample(self, i: int) -> _Cache:
        sl = slice(i, i + 1)
        return _Cache([x[sl] for x in self.Xs], [a[sl] for a in self.As], [p[sl] for p in self.Ps], [m[sl] for m in self.Ms])


def _forward(batch: _Batch, params: AttentionParams, layers: int, T: float, keep: bool) -> tuple[np.ndarray, _Cache]:
    _check_layers(params, layers)
    H, d = params.heads, params.dim
    n, N, _ = batch.X.shape
    c = T / (layers * H)
    X = batch.X
    cache = _Cache()
    for k in range(layers):
        Q, V, b = _at(params.Q, params, k), _at(params.V, params, k), _at(params.b, params, k)
        # all heads' queries as one GEMM against the stacked (d, H d) matrix
        A = np.ascontiguousarray((X.reshape(n * N, d) @ Q.reshape(H * d, d).T).reshape(n, N, H, d).transpose(0, 2, 1, 3)) + b[:, None, :]
        S = np.matmul(A, X[:, None].transpose(0, 1, 3, 2)) + batch.bias  # (n,H,N,N) scores
        S -= S.max(axis=-1, keepdims=True)  # max-shift: scores of any size stay finite
        P = np.exp(S, out=S)
        P /= P.sum(axis=-1, keepdims=True)
        M = np.matmul(P, X[:, None])  # (n,H,N,d): grad Lambda_mu(Q_h x + b_h)
        U = M.transpose(0, 2, 1, 3).reshape(n, N, H * d) @ V.transpose(0, 2, 1).reshape(H * d, d)
        if keep:
            cache.Xs.append(X)
            cache.As.append(A)
            cache.Ps.append(P)
            cache.Ms.append(M)
        X = X + c * U
    if keep:
        cache.Xs.append(X)
    return X, cache


def _backward(
    cache: _Cache, params: AttentionParams, layers: int, T: float, G: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Discrete adjoint of :func:`_forward` (backpropagation through the Euler layers).

    ``G``: (B, n, N, d), B adjoint seeds at the last layer. Returns the parameter
    gradients with a leading ``B`` axis, shapes (B, [L,] H, d, d), (B, [L,] H, d, d),
    (B, [L,] H, d).
    """
    H, d = params.heads, params.dim
    B, n, N, _ = G.shape
    c = T / (layers * H)
    shape = (B, layers) if params.per_layer else (B,)
    gV = np.zeros(shape + (H, d, d))
    gQ = np.zeros(shape + (H, d, d))
    gb = np.zeros(shape + (H, d))
    for k in range(layers - 1, -1, -1):
        X, A, P, M = cache.Xs[k], cache.As[k], cache.Ps[k], cache.Ms[k]
        Q, V = _at(params.Q, params, k), _at(params.V, params, k)
        tV, tQ, tb = (g[:, k] for g in (gV, gQ, gb)) if params.per_layer else (gV, gQ, gb)
        # dL/dV_h = c sum_{ij} p_ij (x) M_hij, one GEMM over the token slots
        tV += c * np.matmul(
            G.reshape(B, n * N, d).transpose(0, 2, 1), M.transpose(0, 2, 1, 3).reshape(n * N, H * d)
        ).reshape(B, d, H, d).transpose(0, 2, 1, 3)
        Gm = c * np.matmul(G[:, :, None], V)  # (B,n,H,N,d): adjoint of the head outputs M
        # softmax adjoint: dS_jk = P_jk <Gm_j, x_k - M_j>
        dS = np.matmul(Gm, X[:, None].transpose(0, 1, 3, 2))
        dS -= np.sum(Gm * M, axis=-1, keepdims=True)
        dS *= P
        dA = np.matmul(dS, X[:, None])  # (B,n,H,N,d): adjoint of the queries Q_h x + b_h
        dA_t = dA.transpose(0, 2, 4, 1, 3).reshape(B, H, d, n * N)
        tQ += dA_t @ X.reshape(n * N, d)
        tb += dA_t.sum(axis=-1)
        # context derivative (through mu_l: the D_mu V . grad p mu term of seed 002 eq. 24) ...
        dX = (np.matmul(P.transpose(0, 1, 3, 2), Gm) + np.matmul(dS.transpose(0, 1, 2, 4, 3), A)).sum(axis=2)
        # ... and query derivative (through Q_h x + b_h)
        dX += dA.transpose(0, 1, 3, 2, 4).reshape(B, n, N, H * d) @ Q.reshape(H * d, d)
        G = G + dX
    return gV, gQ, gb


# ----------------------------------------------------------------------------- losses


def _check_common(samples: Any, params: AttentionParams, layers: int, T: float) -> list[np.ndarray]:
    samples = as_samples(samples)
    if not isinstance(params, AttentionParams):
        raise InputError(f"params: expected AttentionParams, got {type(params).__name__}")
    if samples[0].shape[1] != params.dim:
        raise InputError(f"tokens have dimension {samples[0].shape[1]}, the heads have d={params.dim}")
    if int(layers) != layers or layers < 1:
        raise DomainError(f"layers must be a positive integer, got {layers!r}")
    if not (np.isfinite(T) and T > 0):
        raise DomainError(f"time horizon T must be finite and > 0, got {T!r}")
    check_score_range(samples, params.Q, params.b)  # at the input layer; tokens move later
    return samples


def _check_loss(loss: str) -> None:
    if loss not in _LOSSES:
        raise InputError(f"loss: expected one of {_LOSSES}, got {loss!r}")


def _targets_array(batch: _Batch, targets: Any, loss: str) -> np.ndarray:
    n, N, d = batch.X.shape
    if loss == "readout":
        y = np.asarray(targets, dtype=np.float64)
        if y.shape != (n, d):
            raise InputError(f"readout targets: expected shape ({n}, {d}) (one mean per sample), got {y.shape}")
        if not np.all(np.isfinite(y)):
            raise InputError("readout targets: have non-finite entries")
        return y
    if isinstance(targets, np.ndarray) and targets.dtype != object and targets.ndim == 3:
        targets = list(targets)
    if not isinstance(targets, Sequence) or len(targets) != n:
        raise InputError(f"token targets: expected {n} arrays of shapes (N_i, {d}), got {type(targets).__name__}")
    Y = np.zeros((n, N, d))
    for i, t in enumerate(targets):
        t = as_token_set(t, name=f"target {i}", dim=d)
        if t.shape[0] != batch.counts[i]:
            raise InputError(f"target {i}: has {t.shape[0]} tokens, sample {i} has {batch.counts[i]}")
        Y[i, : t.shape[0]] = t
    return Y


def _weights(batch: _Batch, loss: str) -> np.ndarray:
    """Loss weights of the outputs: (n, N) for tokens, (n,) for readout."""
    n = batch.X.shape[0]
    if loss == "readout":
        return np.ones(n)
    return batch.mask / (n * batch.counts[:, None])


def _outputs(batch: _Batch, XT: np.ndarray, loss: str) -> np.ndarray:
    if loss == "readout":
        return (XT * batch.mask[..., None]).sum(axis=1) / batch.counts[:, None]
    return XT * batch.mask[..., None]


def _loss_value(batch: _Batch, z: np.ndarray, Y: np.ndarray, loss: str) -> tuple[float, np.ndarray]:
    """Loss and its adjoint seed dLoss/dx^L, (n, N, d)."""
    w = _weights(batch, loss)
    R = z - Y
    if loss == "readout":
        val = 0.5 * float(np.sum(w[:, None] * R * R))
        G = np.broadcast_to((w[:, None] * R / batch.counts[:, None])[:, None, :], batch.X.shape) * batch.mask[..., None]
    else:
        R = R * batch.mask[..., None]
        val = 0.5 * float(np.sum(w[..., None] * R * R))
        G = w[..., None] * R
    return val, np.ascontiguousarray(G)


def forward(samples: Any, params: AttentionParams, layers: int, T: float = 1.0) -> list[np.ndarray]:
    r"""Token positions after ``L`` Euler layers of residual attention.

    Parameters
    ----------
    samples : (n, N, d) array or list of (N_i, d) arrays
    params : AttentionParams
    layers : int
        ``L``, the number of Euler steps of size ``T / L``.
    T : float
        Depth horizon.

    Returns
    -------
    list of (N_i, d) arrays, :math:`x^L_{ij}`.

    Examples
    --------
    >>> p = init_params(2, 4, seed=0)
    >>> out = forward([np.eye(2)], p, layers=3)   # FixUp: the identity map
    >>> bool(np.allclose(out[0], np.eye(2)))
    True
    """
    samples = _check_common(samples, params, layers, T)
    batch = _Batch.of(samples)
    XT, _ = _forward(batch, params, int(layers), float(T), keep=False)
    return batch.unpad(XT)


def loss_and_grad(
    samples: Any, params: AttentionParams, targets: Any, *, layers: int, T: float = 1.0, loss: LossKind = "tokens"
) -> tuple[float, AttentionParams]:
    r"""The loss and its gradient with respect to every ``V_h, Q_h, b_h`` by the adjoint method.

    .. math::

        \mathcal L = \tfrac12\sum w\,|z - y|^2,\qquad
        \nabla_\theta\mathcal L = \sum_{l} \langle p^{l+1}, \partial_\theta F_l(x^l)\rangle .

    Parameters
    ----------
    targets : list of (N_i, d) arrays (``loss="tokens"``) or (n, d) array (``"readout"``)

    Returns
    -------
    (loss, gradient) with the gradient in the shape of ``params``.

    References: seed 002 Prop. 6.1 (eqs. 23-25), seed 003 Def. 1 and Thm. 1.
    """
    _check_loss(loss)
    samples = _check_common(samples, params, layers, T)
    batch = _Batch.of(samples)
    Y = _targets_array(batch, targets, loss)
    return _loss_grad(batch, params, Y, int(layers), float(T), loss)


def _loss_grad(batch: _Batch, params: AttentionParams, Y: np.ndarray, layers: int, T: float, loss: str) -> tuple[float, AttentionParams]:
    XT, cache = _forward(batch, params, layers, T, keep=True)
    val, G = _loss_value(batch, _outputs(batch, XT, loss), Y, loss)
    gV, gQ, gb = _backward(cache, params, layers, T, G[None])
    return val, AttentionParams(gV[0], gQ[0], gb[0])


def _mobility(params: AttentionParams, layers: int, T: float) -> float:
    """Factor m in d theta/ds = -m grad Loss (module docstring)."""
    return params.heads * layers / T if params.per_layer else float(params.heads)


def _displacement(params: AttentionParams, p0: np.ndarray, p: np.ndarray, layers: int, T: float) -> float:
    sq = float(np.sum((p - p0) ** 2))
    if params.per_layer:
        return math.sqrt(T * sq / (layers * params.heads))
    return math.sqrt(sq / params.heads)


# ----------------------------------------------------------------------------- NTK


@dataclass(frozen=True)
class NTKSpectrum:
    """Spectrum of the NTK :math:`K = m W^{1/2} J J^T W^{1/2}` on the output space.

    Attributes
    ----------
    eigenvalues : tuple of float
        Ascending, length = number of weighted outputs (``M d`` or ``n d``).
    lambda_min, lambda_max : float
    loss : str
    """

    eigenvalues: tuple[float, ...]
    loss: str

    @property
    def lambda_min(self) -> float:
        return self.eigenvalues[0]

    @property
    def lambda_max(self) -> float:
        return self.eigenvalues[-1]

    def __repr__(self) -> str:
        return f"NTKSpectrum({self.loss}: lambda_min={self.lambda_min:.4g}, lambda_max={self.lambda_max:.4g}, size={len(self.eigenvalues)})"

    def to_dict(self) -> dict[str, Any]:
        return {"loss": self.loss, "lambda_min": self.lambda_min, "lambda_max": self.lambda_max, "eigenvalues": list(self.eigenvalues)}


def _weighted_jacobian(batch: _Batch, params: AttentionParams, layers: int, T: float, loss: str,
                       cache: _Cache | None = None) -> np.ndarray:
    """Rows of :math:`W^{1/2} J` (outputs x all parameters), one batched adjoint pass per sample."""
    if cache is None:
        _, cache = _forward(batch, params, layers, T, keep=True)
    n, N, d = batch.X.shape
    w = _weights(batch, loss)
    rows = []
    for i in range(n):
        Ni = int(batch.counts[i])
        sub = cache.sample(i)
        if loss == "readout":
            seeds = np.zeros((d, 1, N, d))
            for a in range(d):
                seeds[a, 0, :Ni, a] = math.sqrt(w[i]) / Ni
        else:
            seeds = np.zeros((Ni * d, 1, N, d))
            k = np.arange(Ni * d)
            seeds[k, 0, k // d, k % d] = np.sqrt(w[i, k // d])
        gV, gQ, gb = _backward(sub, params, layers, T, seeds)
        rows.append(np.concatenate([gV.reshape(len(seeds), -1), gQ.reshape(len(seeds), -1), gb.reshape(len(seeds), -1)], axis=1))
    return np.concatenate(rows, axis=0)


def _ntk_matrix(batch: _Batch, params: AttentionParams, layers: int, T: float, loss: str, cache: _Cache | None = None) -> np.ndarray:
    WJ = _weighted_jacobian(batch, params, layers, T, loss, cache)
    return _mobility(params, layers, T) * (WJ @ WJ.T)


def ntk_spectrum(samples: Any, params: AttentionParams, *, layers: int, T: float = 1.0, loss: LossKind = "tokens") -> NTKSpectrum:
    r"""Eigenvalues of the NTK at ``params`` over all parameter directions (``V``, ``Q``, ``b``).

    .. math::

        K = m\,W^{1/2} J J^T W^{1/2},\quad J = \partial z/\partial\theta,\qquad
        \frac{d}{ds}W^{1/2}(z - y) = -K\,W^{1/2}(z - y)

    along :func:`gradient_flow`. At FixUp, tokens loss, shared heads:
    :math:`K = (T^2/n)\,F F^T\otimes I_d` with ``F = ntkcheck.gram.attention_features``.

    References: seed 002 Def. 8.4, seed 003 Thm. 4 and Prop. 5.
    """
    _check_loss(loss)
    samples = _check_common(samples, params, layers, T)
    batch = _Batch.of(samples)
    ev = np.linalg.eigvalsh(_ntk_matrix(batch, params, int(layers), float(T), loss))
    return NTKSpectrum(tuple(float(v) for v in ev), loss)


# ----------------------------------------------------------------------------- gradient flow


@dataclass(frozen=True)
class FlowResult:
    """Records of one gradient-flow run (arrays are tuples of floats, one entry a record).

    Attributes
    ----------
    s : flow times of the records
    loss : loss values
    lambda_min, lambda_max : NTK extreme eigenvalues at the current parameters (empty if not tracked)
    displacement : :math:`(\\frac1H\\sum_h|\\theta_h(s)-\\theta_h(0)|^2)^{1/2}` (upper bound on W_2)
    wall : wall-clock seconds spent when the record was reached
    method : ``"solve_ivp:<name>"`` or ``"gd:step=<eta>"``
    nfev : number of gradient evaluations
    final_params : AttentionParams at the last record (not in ``to_dict``)
    outputs : the outputs ``z`` (what the loss sees, unweighted) at each record (not in ``to_dict``)
    """

    s: tuple[float, ...]
    loss: tuple[float, ...]
    lambda_min: tuple[float, ...]
    lambda_max: tuple[float, ...]
    displacement: tuple[float, ...]
    wall: tuple[float, ...]
    method: str
    nfev: int
    message: str
    final_params: AttentionParams = field(repr=False, compare=False)
    outputs: tuple[np.ndarray, ...] = field(repr=False, compare=False, default=())

    def __repr__(self) -> str:
        return (f"FlowResult({self.method}, s_end={self.s[-1]:.4g}, loss {self.loss[0]:.3e} -> {self.loss[-1]:.3e}, "
                f"displacement_max={max(self.displacement):.3g}, nfev={self.nfev})")

    def to_dict(self) -> dict[str, Any]:
        return {"s": list(self.s), "loss": list(self.loss), "lambda_min": list(self.lambda_min),
                "lambda_max": list(self.lambda_max), "displacement": list(self.displacement),
                "wall": list(self.wall), "method": self.method, "nfev": self.nfev, "message": self.message}


def _progress(total: float, enabled: bool | None, desc: str):
    from tqdm.auto import tqdm

    disable = (not sys.stderr.isatty()) if enabled is None else (not enabled)
    return tqdm(total=total, disable=disable, desc=desc, unit="s", leave=False)


def gradient_flow(
    samples: Any,
    params: AttentionParams,
    targets: Any,
    *,
    layers: int,
    time_end: float,
    T: float = 1.0,
    loss: LossKind = "tokens",
    n_records: int = 40,
    record_spacing: Literal["linear", "log"] = "linear",
    track_ntk: bool = True,
    rtol: float = 1e-8,
    atol: float = 1e-12,
    method: str = "RK45",
    step: float | None = None,
    progress: bool | None = None,
) -> FlowResult:
    r"""Integrate :math:`d\theta_h/ds = -m\,\nabla_{\theta_h}\mathcal L` on ``[0, time_end]``.

    With ``step=None`` the flow is integrated by :func:`scipy.integrate.solve_ivp`
    (``method``, ``rtol``, ``atol``); with ``step = eta`` it is explicit gradient descent
    :math:`\theta_{k+1} = \theta_k - \eta\,m\,\nabla\mathcal L(\theta_k)`, ``s = k eta``
    (stable for :math:`\eta < 2/\lambda_{\max}(K)` near a minimum).

    Records at ``n_records`` times: loss, NTK ``lambda_min``/``lambda_max`` over all
    parameters (``track_ntk``), displacement, wall time.

    References: MATH.md section 5; seed 002 eq. 13 with beta = 0; seed 003 Thm. 4.
    """
    _check_loss(loss)
    samples = _check_common(samples, params, layers, T)
    if not (np.isfinite(time_end) and time_end > 0):
        raise DomainError(f"time_end must be finite and > 0, got {time_end!r}")
    if n_records < 2:
        raise DomainError(f"n_records must be >= 2, got {n_records}")
    if step is not None and not (np.isfinite(step) and step > 0):
        raise DomainError(f"step must be finite and > 0, got {step!r}")
    batch = _Batch.of(samples)
    Y = _targets_array(batch, targets, loss)
    layers, T = int(layers), float(T)
    m = _mobility(params, layers, T)
    p0 = params.flat()
    if record_spacing == "log":
        s_rec = np.concatenate([[0.0], np.geomspace(time_end * 1e-3, time_end, n_records - 1)])
    else:
        s_rec = np.linspace(0.0, time_end, n_records)
    t_start = time.perf_counter()
    calls: list[tuple[float, float]] = []
    nfev = 0
    bar = _progress(time_end, progress, "gradient flow")

    def grad_vec(vec: np.ndarray) -> np.ndarray:
        nonlocal nfev
        nfev += 1
        _, g = _loss_grad(batch, params.unflat(vec), Y, layers, T, loss)
        return g.flat()

    if step is None:
        def rhs(s: float, vec: np.ndarray) -> np.ndarray:
            calls.append((s, time.perf_counter() - t_start))
            if s > bar.n:
                bar.update(min(s, time_end) - bar.n)
            return -m * grad_vec(vec)

        sol = solve_ivp(rhs, (0.0, time_end), p0, method=method, t_eval=s_rec, rtol=rtol, atol=atol)
        if not sol.success:
            bar.close()
            raise DomainError(f"solve_ivp ({method}) failed: {sol.message}")
        states = sol.y.T
        s_out = sol.t
        method_name, message = f"solve_ivp:{method}", str(sol.message)
        call_s = np.array([c[0] for c in calls])
        call_w = np.array([c[1] for c in calls])
        walls = [float(call_w[min(int(np.searchsorted(call_s, s)), len(call_w) - 1)]) for s in s_out]
    else:
        n_steps = int(math.ceil(time_end / step))
        rec_steps = np.unique(np.round(s_rec / step).astype(int).clip(0, n_steps))
        vec = p0.copy()
        states, walls, s_list = [], [], []
        for k in range(n_steps + 1):
            if k in set(rec_steps.tolist()):
                states.append(vec.copy())
                walls.append(time.perf_counter() - t_start)
                s_list.append(k * step)
            if k == n_steps:
                break
            vec = vec - step * m * grad_vec(vec)
            if not np.all(np.isfinite(vec)):
                bar.close()
                raise DomainError(f"gradient descent diverged at step {k} (step={step}); take a smaller step")
            bar.update(step)
        s_out = np.array(s_list)
        method_name, message = f"gd:step={step:g}", f"{n_steps} steps"
    bar.close()

    losses, lmins, lmaxs, disps = [], [], [], []
    outputs = []
    for vec in states:
        pr = params.unflat(vec)
        XT, cache = _forward(batch, pr, layers, T, keep=track_ntk)
        z = _outputs(batch, XT, loss)
        val, _ = _loss_value(batch, z, Y, loss)
        losses.append(val)
        disps.append(_displacement(params, p0, vec, layers, T))
        if track_ntk:
            ev = np.linalg.eigvalsh(_ntk_matrix(batch, pr, layers, T, loss, cache))
            lmins.append(float(ev[0]))
            lmaxs.append(float(ev[-1]))
        outputs.append(z)
    return FlowResult(
        tuple(float(v) for v in s_out), tuple(losses), tuple(lmins), tuple(lmaxs), tuple(disps),
        tuple(float(w) for w in walls), method_name, nfev, message, params.unflat(states[-1]), tuple(outputs),
    )


# ----------------------------------------------------------------------------- experiments


def default_samples(seed: int = 0) -> tuple[list[np.ndarray], str]:
    """The CLI's default data and where it came from.

    The bundled ``screen_default.npz`` when the package ships it (its first four
    samples), else four seeded Gaussian samples of three tokens in ``d = 3`` generated
    here (``source`` says which).
    """
    from .io import bundled_path, load_samples

    path = bundled_path("screen_default.npz")
    if path.exists():
        samples = load_samples(path)[:4]
        return samples, f"bundled {path.name} (first {len(samples)} samples)"
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3, 3)) for _ in range(4)], f"generated: 4 Gaussian samples of 3 tokens in d=3, seed {seed}"


def overlap_example(u: Sequence[float] = (2.0, 0.5), v: Sequence[float] = (-1.0, 2.0)) -> tuple[list[np.ndarray], np.ndarray]:
    r"""MATH.md section 3, row 1: :math:`\{0,u\}, \{0,v\}, \{0,u,v,u+v\}` in ``d = 2``.

    :math:`\Lambda_3 = \Lambda_1 + \Lambda_2` (dependent, ``c = (1, 1, -1)``, ``alpha = 0``) and
    the three samples share the atom 0, so (seed 003 Prop. 8, condition (34)) the adjoint
    :math:`p_i = c_i\,d\delta_0/d\mu_i` is in the NTK kernel: ``p = (2, 0 | 2, 0 | -4, 0, 0, 0)``
    on the token slots (the atom 0 is listed first in every sample).

    Returns
    -------
    (samples, p) with ``p`` a (M,) array over the token slots in sample order.
    """
    u_, v_ = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    z = np.zeros(2)
    samples = [np.stack([z, u_]), np.stack([z, v_]), np.stack([z, u_, v_, u_ + v_])]
    p = np.array([2.0, 0.0, 2.0, 0.0, -4.0, 0.0, 0.0, 0.0])
    return samples, p


def _fit_slope(s: np.ndarray, y: np.ndarray) -> float:
    if len(s) < 2:
        return float("nan")
    return float(np.polyfit(s, y, 1)[0])


@dataclass(frozen=True)
class _Setup:
    batch: _Batch
    params: AttentionParams
    layers: int
    T: float
    loss: str
    z0: np.ndarray
    K0: np.ndarray
    evals: np.ndarray
    evecs: np.ndarray
    sqrtw: np.ndarray  # sqrt of the loss weights, broadcast to the outputs' shape


def _setup(samples: Any, params: AttentionParams, layers: int, T: float, loss: str) -> _Setup:
    _check_loss(loss)
    samples = _check_common(samples, params, layers, T)
    batch = _Batch.of(samples)
    layers, T = int(layers), float(T)
    XT, cache = _forward(batch, params, layers, T, keep=True)
    z0 = _outputs(batch, XT, loss)
    K0 = _ntk_matrix(batch, params, layers, T, loss, cache)
    ev, U = np.linalg.eigh(K0)
    w = _weights(batch, loss)
    sqrtw = np.broadcast_to(np.sqrt(w)[..., None], z0.shape)
    return _Setup(batch, params, layers, T, loss, z0, K0, ev, U, sqrtw)


def _weighted_flat(st: _Setup, z: np.ndarray) -> np.ndarray:
    """Weighted outputs in the NTK's coordinates (rows of W^{1/2} J): real token slots only."""
    zw = st.sqrtw * z
    if st.loss == "readout":
        return zw.ravel()
    return zw[st.batch.mask].ravel()


def _from_weighted(st: _Setup, u: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_weighted_flat` (zero on padding)."""
    out = np.zeros(st.z0.shape)
    if st.loss == "readout":
        out[:] = u.reshape(st.z0.shape)
    else:
        out[st.batch.mask] = u.reshape(-1, st.z0.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(st.sqrtw > 0, out / np.where(st.sqrtw > 0, st.sqrtw, 1.0), 0.0)


def _targets_from(st: _Setup, z: np.ndarray) -> Any:
    if st.loss == "readout":
        return z
    return st.batch.unpad(z)


def _default_params(samples: Any, heads: int, layers: int, per_layer: bool, q_scale: float, b_scale: float, seed: int) -> AttentionParams:
    d = as_samples(samples)[0].shape[1]
    return init_params(d, heads, layers=layers if per_layer else None, q_scale=q_scale, b_scale=b_scale, seed=seed)


@dataclass(frozen=True)
class LocalConvergence:
    r"""Local convergence of gradient flow from FixUp against seed 002 Thm. 8.5 / seed 003 Thm. 4.

    Attributes
    ----------
    lambda_0, lambda_max_0 : extreme NTK eigenvalues at initialisation (``Lambda`` = lambda_max_0)
    rate_measured : :math:`\min_{s>0} -\log(\mathcal L(s)/\mathcal L(0))/s` over the records; eq. 31
        holds on the run iff ``rate_measured >= lambda_0`` (``loss* = 0``: the targets are reachable)
    rate_asymptotic : slope of :math:`-\log\mathcal L` over the second half of the run
    rate_linearised : ``2 lambda_0``, the slowest decay rate of the loss of the linearised flow
    eq31_holds : every record satisfies :math:`\mathcal L(s)\le e^{-\lambda_0 s}\mathcal L(0)`
    linearisation_error : max over records of :math:`|\mathcal L - \mathcal L_{lin}| / \mathcal L_{lin}`,
        :math:`\mathcal L_{lin}(s) = \frac12|e^{-K_0 s}u_0|^2`
    displacement_max, displacement_bound : max particle displacement and the Thm. 8.5 bound in
        its :math:`L_K\to\infty` limit :math:`2\sqrt{2\Lambda}\,\mathcal L(0)^{1/2}/\lambda_0`
    lipschitz_lower : :math:`\max_s|\lambda_{\min}(K_s)-\lambda_0|/\mathrm{disp}(s)`, a lower bound on ``L_K``
    """

    loss_kind: str
    eps: float
    heads: int
    layers: int
    T: float
    per_layer: bool
    lambda_0: float
    lambda_max_0: float
    loss_initial: float
    loss_final: float
    rate_theorem: float
    rate_measured: float
    rate_asymptotic: float
    rate_linearised: float
    eq31_holds: bool
    linearisation_error: float
    displacement_max: float
    displacement_bound: float
    lipschitz_lower: float
    time_end: float
    flow: FlowResult = field(repr=False)

    def __repr__(self) -> str:
        return (f"LocalConvergence({self.loss_kind}, eps={self.eps:g}: lambda_0={self.lambda_0:.4g}, "
                f"rate_measured={self.rate_measured:.4g} (theorem {self.rate_theorem:.4g}, linearised {self.rate_linearised:.4g}), "
                f"eq31_holds={self.eq31_holds}, displacement {self.displacement_max:.3g} <= bound {self.displacement_bound:.3g})")

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "loss_kind", "eps", "heads", "layers", "T", "per_layer", "lambda_0", "lambda_max_0", "loss_initial",
            "loss_final", "rate_theorem", "rate_measured", "rate_asymptotic", "rate_linearised", "eq31_holds",
            "linearisation_error", "displacement_max", "displacement_bound", "lipschitz_lower", "time_end")}
        out["flow"] = self.flow.to_dict()
        return out


def local_convergence(
    samples: Any,
    *,
    heads: int = 16,
    layers: int = 4,
    T: float = 1.0,
    eps: float = 1e-2,
    loss: LossKind = "tokens",
    per_layer: bool = False,
    params: AttentionParams | None = None,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    seed: int = 0,
    time_end: float | None = None,
    decades: float = 4.0,
    n_records: int = 30,
    track_ntk: bool = True,
    rtol: float = 1e-7,
    atol: float = 1e-12,
    method: str = "RK45",
    step: float | None = None,
    progress: bool | None = None,
) -> LocalConvergence:
    r"""Experiment (a): targets :math:`y = z_0 + \varepsilon r` near the initial outputs.

    ``r`` is a seeded Gaussian direction normalised to :math:`|W^{1/2} r| = 1`, so
    :math:`\mathcal L(0) = \varepsilon^2/2` and ``loss* = 0`` whenever the NTK is positive
    (the outputs can follow any direction to first order). ``time_end`` defaults to the time
    the slowest linearised mode needs to lose ``decades`` decades of loss,
    :math:`\text{decades}\cdot\ln 10/(2\lambda_0)`.

    References: seed 002 Thm. 8.5 (eq. 31 and the displacement bound), seed 003 Thm. 4.
    """
    if not (np.isfinite(eps) and eps > 0):
        raise DomainError(f"eps must be finite and > 0, got {eps!r}")
    if params is None:
        params = _default_params(samples, heads, layers, per_layer, q_scale, b_scale, seed)
    st = _setup(samples, params, layers, T, loss)
    lam0, lamM = float(st.evals[0]), float(st.evals[-1])
    if lam0 <= 1e-12 * lamM:
        import warnings

        from .errors import NtkcheckWarning

        warnings.warn(f"the NTK at initialisation is singular (lambda_min={lam0:.3g}, lambda_max={lamM:.3g}): "
                      "Thm. 8.5 does not apply; see kernel_plateau", NtkcheckWarning, stacklevel=2)
    rng = np.random.default_rng(seed + 1)
    u_dir = rng.standard_normal(len(st.evals))
    u_dir /= np.linalg.norm(u_dir)
    # residual z0 - y = -eps r, i.e. u0 = W^{1/2}(z0 - y) = -eps u_dir
    y = st.z0 + eps * _from_weighted(st, u_dir)
    if time_end is None:
        time_end = decades * math.log(10.0) / (2.0 * max(lam0, 1e-300))
    flow = gradient_flow(samples, params, _targets_from(st, y), layers=layers, time_end=time_end, T=T, loss=loss,
                         n_records=n_records, track_ntk=track_ntk, rtol=rtol, atol=atol, method=method, step=step,
                         progress=progress)
    s = np.array(flow.s)
    Ls = np.array(flow.loss)
    L0 = Ls[0]
    pos = s > 0
    rates = -np.log(Ls[pos] / L0) / s[pos]
    rate_measured = float(rates.min())
    half = s >= s[-1] / 2
    rate_asym = -_fit_slope(s[half], np.log(Ls[half]))
    coef = st.evecs.T @ (-eps * u_dir)
    L_lin = 0.5 * np.sum((np.exp(-np.outer(s, st.evals)) * coef) ** 2, axis=1)
    lin_err = float(np.max(np.abs(Ls - L_lin) / L_lin))
    eq31 = bool(np.all(Ls <= np.exp(-lam0 * s) * L0 * (1 + 1e-9)))
    disp = np.array(flow.displacement)
    if track_ntk and np.any(disp > 0):
        dl = np.abs(np.array(flow.lambda_min) - lam0)
        lip = float(np.max(dl[disp > 0] / disp[disp > 0]))
    else:
        lip = float("nan")
    bound = 2.0 * math.sqrt(2.0 * lamM) / lam0 * math.sqrt(L0) if lam0 > 0 else float("inf")
    return LocalConvergence(
        loss, float(eps), params.heads, int(layers), float(T), params.per_layer, lam0, lamM, float(L0), float(Ls[-1]),
        lam0, rate_measured, float(rate_asym), 2.0 * lam0, eq31, lin_err, float(disp.max()), bound, lip, float(time_end), flow,
    )


@dataclass(frozen=True)
class KernelPlateau:
    r"""Experiment (b): a target residual in the NTK kernel does not decay at the linear rate.

    The weighted residual :math:`u = W^{1/2}(z - y)` is split by the NTK at initialisation
    into its kernel part (eigenvalues below ``kernel_tol * lambda_max``) and its range part.

    Attributes
    ----------
    kernel_dim : dimension of the numerical kernel of :math:`K_0`
    lambda_min_0 : smallest eigenvalue (float64 zero, ~1e-17)
    lambda_plus : smallest eigenvalue on the range (the linear rate the range part gets)
    kernel_loss_ratio : :math:`\mathcal L_{ker}(s_{end})/\mathcal L_{ker}(0)` (plateau: close to 1)
    range_loss_ratio : :math:`\mathcal L_{rng}(s_{end})/\mathcal L_{rng}(0)`
    predicted_ratio : :math:`e^{-2\lambda_+ s_{end}}`, what the kernel part would reach at the range's slowest rate
    kernel_rate_measured : :math:`-\log(\text{kernel\_loss\_ratio})/s_{end}`
    """

    kernel_dim: int
    lambda_min_0: float
    lambda_plus: float
    lambda_max_0: float
    eps: float
    mix: float
    time_end: float
    kernel_loss_ratio: float
    range_loss_ratio: float
    predicted_ratio: float
    kernel_rate_measured: float
    kernel_loss: tuple[float, ...]
    range_loss: tuple[float, ...]
    flow: FlowResult = field(repr=False)

    def __repr__(self) -> str:
        return (f"KernelPlateau(kernel_dim={self.kernel_dim}, lambda_plus={self.lambda_plus:.4g}: kernel loss x{self.kernel_loss_ratio:.4g}, "
                f"range loss x{self.range_loss_ratio:.3g} over s={self.time_end:.3g}; linear rate would give x{self.predicted_ratio:.3g})")

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "kernel_dim", "lambda_min_0", "lambda_plus", "lambda_max_0", "eps", "mix", "time_end", "kernel_loss_ratio",
            "range_loss_ratio", "predicted_ratio", "kernel_rate_measured")}
        out["kernel_loss"] = list(self.kernel_loss)
        out["range_loss"] = list(self.range_loss)
        out["flow"] = self.flow.to_dict()
        return out


def kernel_plateau(
    *,
    samples: Any = None,
    kernel_direction: np.ndarray | None = None,
    heads: int = 16,
    layers: int = 2,
    T: float = 1.0,
    eps: float = 1e-2,
    mix: float = 0.5,
    q_scale: float = 2.0,
    b_scale: float = 2.0,
    seed: int = 0,
    time_end: float | None = None,
    decades: float = 3.0,
    kernel_tol: float = 1e-10,
    n_records: int = 30,
    rtol: float = 1e-7,
    atol: float = 1e-12,
    progress: bool | None = None,
) -> KernelPlateau:
    r"""Experiment (b), per-token loss: dependent CGFs with overlap (:func:`overlap_example` by default).

    The residual is :math:`z_0 - y = \varepsilon(\sqrt{1-\text{mix}^2}\,p\otimes e + \text{mix}\,r)`
    (weighted-normalised), ``p`` the kernel adjoint of seed 003 Prop. 8 (condition (34)),
    ``e`` a unit vector, ``r`` a random direction in the range of :math:`K_0`. At ``mix = 0``
    the initial point is stationary (the gradient vanishes exactly); ``mix > 0`` lets the
    parameters move, so the plateau is a property of the flow, not of a fixed point.

    References: seed 003 Prop. 8 (necessity half), Thm. 4 (its positivity assumption fails here).
    """
    if samples is None:
        samples, p = overlap_example()
        kernel_direction = p if kernel_direction is None else kernel_direction
    if kernel_direction is None:
        raise InputError("kernel_plateau: give kernel_direction (one value per token slot) with custom samples")
    if not (0 <= mix < 1):
        raise DomainError(f"mix must be in [0, 1), got {mix!r}")
    samples = as_samples(samples)
    d = samples[0].shape[1]
    params = init_params(d, heads, q_scale=q_scale, b_scale=b_scale, seed=seed)
    st = _setup(samples, params, layers, T, "tokens")
    lamM = float(st.evals[-1])
    ker = st.evals < kernel_tol * lamM
    kdim = int(ker.sum())
    if kdim == 0:
        raise DomainError(f"the NTK at initialisation has no kernel (lambda_min={st.evals[0]:.3g}); not a dependent-with-overlap case")
    lam_plus = float(st.evals[~ker][0])
    pk = np.asarray(kernel_direction, dtype=np.float64).reshape(-1)
    M = int(st.batch.counts.sum())
    if pk.shape[0] != M:
        raise InputError(f"kernel_direction: expected {M} values (one per token slot), got {pk.shape[0]}")
    e = np.zeros(d)
    e[0] = 1.0
    # residual (z - y) proportional to p (x) e  <=>  u proportional to W^{1/2} p (x) e
    w_flat = st.sqrtw[..., 0][st.batch.mask]
    u_ker = np.kron(w_flat * pk, e)
    u_ker /= np.linalg.norm(u_ker)
    P_ker = st.evecs[:, ker] @ st.evecs[:, ker].T
    if np.linalg.norm(u_ker - P_ker @ u_ker) > 1e-6:
        raise DomainError("kernel_direction is not in the NTK kernel at initialisation (residual "
                          f"{np.linalg.norm(u_ker - P_ker @ u_ker):.3g}); check the shared atom and the coefficients")
    rng = np.random.default_rng(seed + 1)
    r = rng.standard_normal(len(st.evals))
    r -= P_ker @ r
    r /= np.linalg.norm(r)
    u0 = eps * (math.sqrt(1 - mix**2) * u_ker + mix * r)
    y = st.z0 - _from_weighted(st, u0)
    if time_end is None:
        time_end = decades * math.log(10.0) / (2.0 * lam_plus)
    flow = gradient_flow(samples, params, _targets_from(st, y), layers=layers, time_end=time_end, T=T, loss="tokens",
                         n_records=n_records, track_ntk=False, rtol=rtol, atol=atol, progress=progress)
    kl, rl = [], []
    for z in flow.outputs:
        u = _weighted_flat(st, z - y)
        uk = P_ker @ u
        kl.append(0.5 * float(uk @ uk))
        rl.append(0.5 * float((u - uk) @ (u - uk)))
    s_end = flow.s[-1]
    kratio = kl[-1] / kl[0]
    rratio = rl[-1] / rl[0] if mix > 0 else float("nan")  # mix = 0: the range part is rounding noise
    return KernelPlateau(
        kdim, float(st.evals[0]), lam_plus, lamM, float(eps), float(mix), float(s_end), float(kratio), float(rratio),
        float(math.exp(-2 * lam_plus * s_end)), float(-math.log(kratio) / s_end), tuple(kl), tuple(rl), flow,
    )


@dataclass(frozen=True)
class EpsSweep:
    r"""Experiment (c): the linear rate as the initial loss grows.

    Attributes
    ----------
    eps, rate_measured, loss_final, displacement_max, displacement_bound : one entry per ``eps``
    lambda_0 : NTK lambda_min at initialisation (the same for every eps)
    breakdown_eps : smallest ``eps`` with ``rate_measured < lambda_0`` (eq. 31 fails), or ``nan``
    linear_breakdown_eps : smallest ``eps`` with ``rate_measured < (1 - tol) 2 lambda_0``
        (the run leaves the linearised regime), or ``nan``
    """

    eps: tuple[float, ...]
    rate_measured: tuple[float, ...]
    loss_initial: tuple[float, ...]
    loss_final: tuple[float, ...]
    displacement_max: tuple[float, ...]
    displacement_bound: tuple[float, ...]
    lambda_0: float
    breakdown_eps: float
    linear_breakdown_eps: float
    tol: float

    def __repr__(self) -> str:
        rows = ", ".join(f"{e:.3g}:{r / self.lambda_0:.3g}" for e, r in zip(self.eps, self.rate_measured))
        return (f"EpsSweep(lambda_0={self.lambda_0:.4g}, rate/lambda_0 by eps {{{rows}}}, "
                f"breakdown_eps={self.breakdown_eps:.3g}, linear_breakdown_eps={self.linear_breakdown_eps:.3g})")

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def eps_sweep(
    samples: Any,
    eps_values: Sequence[float] = (1e-2, 1e-1, 0.3, 1.0, 3.0),
    *,
    tol: float = 0.1,
    **kwargs: Any,
) -> EpsSweep:
    """Experiment (c): :func:`local_convergence` at growing ``eps`` (same heads, same direction).

    ``kwargs`` go to :func:`local_convergence` (``track_ntk`` defaults to False here).
    ``time_end`` is fixed by ``lambda_0``, so every ``eps`` runs for the same flow time.
    """
    if len(eps_values) == 0:
        raise InputError("eps_values: give at least one eps")
    kwargs.setdefault("track_ntk", False)
    res = [local_convergence(samples, eps=float(e), **kwargs) for e in eps_values]
    lam0 = res[0].lambda_0
    rates = [r.rate_measured for r in res]
    bad = [e for e, r in zip(eps_values, rates) if r < lam0]
    lin_bad = [e for e, r in zip(eps_values, rates) if r < (1 - tol) * 2 * lam0]
    return EpsSweep(
        tuple(float(e) for e in eps_values), tuple(rates), tuple(r.loss_initial for r in res), tuple(r.loss_final for r in res),
        tuple(r.displacement_max for r in res), tuple(r.displacement_bound for r in res), lam0,
        float(min(bad)) if bad else float("nan"), float(min(lin_bad)) if lin_bad else float("nan"), float(tol),
    )


@dataclass(frozen=True)
class DepthConvergence:
    r"""Discrete depth ``L`` against the continuous-depth model (Euler in ``t``: expected order 1).

    Attributes
    ----------
    layers : the depths compared
    forward_error : RMS distance of :math:`x_T` at depth ``L`` from the reference depth
    forward_order : fitted order, slope of ``-log(error)`` against ``log L``
    forward_orders_pairwise : :math:`\log_2(D_L/D_{2L})` with :math:`D_L = \mathrm{rms}(x^{(L)}_T - x^{(2L)}_T)`
        (successive differences: no reference bias)
    trained_error, trained_order, trained_orders_pairwise : the same for the outputs after training
        by ``train_steps`` gradient-descent steps from FixUp (empty when not run)
    """

    layers: tuple[int, ...]
    layers_ref: int
    forward_error: tuple[float, ...]
    forward_order: float
    forward_orders_pairwise: tuple[float, ...]
    trained_error: tuple[float, ...]
    trained_order: float
    trained_orders_pairwise: tuple[float, ...]

    def __repr__(self) -> str:
        return (f"DepthConvergence(L={list(self.layers)}, forward order {self.forward_order:.3f} "
                f"(pairwise {[round(o, 3) for o in self.forward_orders_pairwise]}), trained order {self.trained_order:.3f})")

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _orders(layers: Sequence[int], outs: dict[int, np.ndarray], ref: np.ndarray) -> tuple[tuple[float, ...], float, tuple[float, ...]]:
    err = [float(np.sqrt(np.mean((outs[L] - ref) ** 2))) for L in layers]
    order = -_fit_slope(np.log(np.array(layers, dtype=float)), np.log(np.array(err)))
    pair = []
    for L in layers:
        if 2 * L in outs and 4 * L in outs:
            d1 = np.sqrt(np.mean((outs[L] - outs[2 * L]) ** 2))
            d2 = np.sqrt(np.mean((outs[2 * L] - outs[4 * L]) ** 2))
            pair.append(float(np.log2(d1 / d2)))
    return tuple(err), float(order), tuple(pair)


def depth_convergence(
    samples: Any,
    *,
    heads: int = 8,
    layers: Sequence[int] = (4, 8, 16, 32, 64),
    layers_ref: int = 2048,
    T: float = 1.0,
    v_scale: float = 1.0,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    seed: int = 0,
    train_steps: int = 0,
    train_time: float = 1.0,
    train_layers_ref: int = 512,
    eps: float = 0.3,
    loss: LossKind = "tokens",
) -> DepthConvergence:
    r"""Depth ``L`` Euler model vs its continuous-depth limit (shared heads, so the limit exists).

    Forward: random heads with :math:`V\neq 0` (``v_scale``). Trained: FixUp heads,
    targets :math:`y = z_0 + \varepsilon r`, ``train_steps`` gradient-descent steps of size
    ``train_time / train_steps`` (the same step sequence at every depth, so the differences
    are the depth discretisation's). Euler's local error is :math:`O(\tau^2)`, so the
    expected order is 1.

    References: seed 002 eq. 2 (the ResNet as Euler scheme of eq. 6); seed 003 Prop. 1.
    """
    samples = as_samples(samples)
    Ls = sorted(set(int(L) for L in layers))
    d = samples[0].shape[1]
    pv = init_params(d, heads, q_scale=q_scale, b_scale=b_scale, v_scale=v_scale, seed=seed)
    batch = _Batch.of(samples)
    fw = {L: _forward(batch, pv, L, T, keep=False)[0] for L in Ls}
    ref = _forward(batch, pv, layers_ref, T, keep=False)[0]
    f_err, f_ord, f_pair = _orders(Ls, fw, ref)
    t_err: tuple[float, ...] = ()
    t_ord, t_pair = float("nan"), ()
    if train_steps > 0:
        p0 = init_params(d, heads, q_scale=q_scale, b_scale=b_scale, seed=seed)
        rng = np.random.default_rng(seed + 1)
        if loss == "readout":
            y: Any = _outputs(batch, batch.X, loss) + eps * rng.standard_normal((len(samples), d))
        else:
            y = [s + eps * rng.standard_normal(s.shape) for s in samples]
        step = train_time / train_steps

        def trained(L: int) -> np.ndarray:
            fl = gradient_flow(samples, p0, y, layers=L, time_end=train_time, T=T, loss=loss, n_records=2,
                               track_ntk=False, step=step, progress=False)
            return fl.outputs[-1]

        tr = {L: trained(L) for L in Ls}
        t_err, t_ord, t_pair = _orders(Ls, tr, trained(train_layers_ref))
    return DepthConvergence(tuple(Ls), int(layers_ref), f_err, f_ord, f_pair, t_err, t_ord, t_pair)
