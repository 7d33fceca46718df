r"""Deep multi-head attention: parameters, forward pass, losses and the discrete adjoint.

**Model** (``theory/ntk-prop8.md``, "The model and FixUp initialisation"; seed 002 eq. 2 and eq. 6 without the MLP, seed 003 eqs. 3-5).
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

The NTK over all parameters is in :mod:`ntkcheck.dynamics.ntk`, the gradient flow in
:mod:`ntkcheck.dynamics.flow`, the experiments in :mod:`ntkcheck.convergence.local`,
:mod:`ntkcheck.dynamics.plateau`, :mod:`ntkcheck.convergence.eps_sweep` and
:mod:`ntkcheck.dynamics.depth`.

References: seed 002 section 6 (adjoint); seed 003 Def. 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._validate import as_samples, check_score_range
from ..errors import DomainError, InputError
from . import _attention, _sizes

__all__ = [
    "AttentionParams",
    "init_params",
    "forward",
    "loss_and_grad",
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

    ``Q, b`` come from :func:`ntkcheck.ntk.gram_matrix.features.init_heads` (entries ``N(0, q_scale^2)`` and
    ``N(0, b_scale^2)`` for ``dist="gaussian"``), so the NTK at FixUp is the Gram module's.
    ``V`` has i.i.d. entries ``N(0, v_scale^2 / d)``. ``layers`` given: one independent
    head set per layer (per-layer parameters, layer ``l`` drawn with seed ``seed + l``).

    Examples
    --------
    >>> init_params(2, 4, seed=0)
    AttentionParams(H=4, d=2, shared, |V|=0)
    """
    from ..ntk.gram_matrix.features import init_heads

    if int(dim) != dim or dim < 1 or int(heads) != heads or heads < 1:
        raise DomainError(f"dim and heads must be positive integers, got dim={dim!r}, heads={heads!r}")
    if not (np.isfinite(v_scale) and v_scale >= 0):
        raise DomainError(f"v_scale must be finite and >= 0, got {v_scale!r}")
    n_sets = 1 if layers is None else int(layers)
    if n_sets < 1:
        raise DomainError(f"layers must be >= 1, got {layers}")
    _sizes.require_params(int(heads), int(dim), n_sets)
    hs = [init_heads(int(heads), int(dim), q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed + k) for k in range(n_sets)]
    Q = np.stack([np.array(h.Q) for h in hs])
    b = np.stack([np.array(h.b) for h in hs])
    rng = np.random.default_rng([seed, 1])
    V = rng.standard_normal(Q.shape) * (v_scale / math.sqrt(dim))
    if layers is None:
        return AttentionParams(V[0], Q[0], b[0])
    return AttentionParams(V, Q, b)


# ----------------------------------------------------------------------------- batching

# The model on atoms with masses, the adjoint and the NTK pieces live in ._attention;
# the integrators in ._integrate. Re-exported here for the benchmarks and tests.
_Batch = _attention._Batch
_Cache = _attention._Cache
_forward = _attention._forward
_backward = _attention._backward
_loss_grad = _attention._loss_grad
_mobility = _attention._mobility
_displacement = _attention._displacement
_outputs = _attention._outputs
_loss_value = _attention._loss_value
_weights = _attention._weights


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


def _prepare(samples: Any, params: AttentionParams, layers: int, T: float) -> _Batch:
    """Validate model arguments and build the batch of laws (samples: arrays or Empirical laws)."""
    batch = _Batch.of(samples)
    if not isinstance(params, AttentionParams):
        raise InputError(f"params: expected AttentionParams, got {type(params).__name__}")
    if batch.X.shape[2] != params.dim:
        raise InputError(f"tokens have dimension {batch.X.shape[2]}, the heads have d={params.dim}")
    if int(layers) != layers or layers < 1:
        raise DomainError(f"layers must be a positive integer, got {layers!r}")
    if not (np.isfinite(T) and T > 0):
        raise DomainError(f"time horizon T must be finite and > 0, got {T!r}")
    _sizes.require_forward(*batch.X.shape[:2], params.dim, params.heads, int(layers))
    check_score_range(batch.unpad(batch.X), params.Q, params.b)  # at the input layer; tokens move later
    return batch


def _check_loss(loss: str) -> None:
    if loss not in _LOSSES:
        raise InputError(f"loss: expected one of {_LOSSES}, got {loss!r}")


def forward(samples: Any, params: AttentionParams, layers: int, T: float = 1.0) -> list[np.ndarray]:
    r"""Token positions after ``L`` Euler layers of residual attention.

    Parameters
    ----------
    samples : (n, N, d) array, list of (N_i, d) arrays, or list of Empirical laws
    params : AttentionParams
    layers : int
        ``L``, the number of Euler steps of size ``T / L``.
    T : float
        Depth horizon.

    Returns
    -------
    list of (N_i, d) arrays, :math:`x^L_{ij}` for every given token (for an
    :class:`~ntkcheck.cgf.empirical.Empirical`, for every atom). Copies of a token end at the
    same place: the pass runs on the distinct atoms with their masses.

    Examples
    --------
    >>> p = init_params(2, 4, seed=0)
    >>> out = forward([np.eye(2)], p, layers=3)   # FixUp: the identity map
    >>> bool(np.allclose(out[0], np.eye(2)))
    True
    """
    batch = _prepare(samples, params, layers, T)
    XT, _ = _forward(batch, params, int(layers), float(T), keep=False)
    return batch.expand(XT)


def loss_and_grad(
    samples: Any, params: AttentionParams, targets: Any, *, layers: int, T: float = 1.0, loss: LossKind = "tokens"
) -> tuple[float, AttentionParams]:
    r"""The loss and its gradient with respect to every ``V_h, Q_h, b_h`` by the adjoint method.

    .. math::

        \mathcal L = \tfrac12\sum w\,|z - y|^2,\qquad
        \nabla_\theta\mathcal L = \sum_{l} \langle p^{l+1}, \partial_\theta F_l(x^l)\rangle .

    Parameters
    ----------
    targets : list of (N_i, d) arrays (``loss="tokens"``, one row per given token) or
        (n, d) array (``"readout"``)

    Returns
    -------
    (loss, gradient) with the gradient in the shape of ``params``. The loss is the
    per-token loss; copies of a token whose targets differ contribute the spread of their
    targets, which no parameter can change.

    References: seed 002 Prop. 6.1 (eqs. 23-25), seed 003 Def. 1 and Thm. 1.
    """
    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    Y, floor = _attention._targets_array(batch, targets, loss)
    val, g = _loss_grad(batch, params, Y, int(layers), float(T), loss)
    return val + floor, g
