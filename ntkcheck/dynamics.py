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
its speed is exactly :math:`(u^T K u)^{1/2}`, so the proof of Thm. 8.5 applies verbatim. With
the seed's slip corrected (its step 1 bounds :math:`\lambda_{\max}` by :math:`\Lambda + \lambda_0/(2L_K)`;
it is :math:`\Lambda + \lambda_0/2`) the bound is
:math:`W_2 \le 2\sqrt{2\Lambda+\lambda_0}\,\mathcal L(0)^{1/2}/\lambda_0`, valid when
:math:`\mathcal L(0) \le \lambda_0^4/(16 L_K^2(2\Lambda+\lambda_0))` (corrected eq. 30). A certified
upper bound on ``L_K`` (:mod:`ntkcheck.lipschitz`) decides that condition:
:attr:`LocalConvergence.certificate`.

**Computation** (``theory/flow-numerics.md``). Samples are their empirical laws: the
model runs on the distinct atoms with the masses as log-offsets in the softmax, which is
exactly the token-level model (copies of a token move together), and the NTK and rates
are those of :math:`L^2(\mu_i)`. At FixUp the NTK is :math:`k\otimes I_d` with ``k`` from
the features. The flow is integrated by an adaptive exponential integrator whose linear
part is that NTK (exact on the linearised flow, so not limited by
:math:`\lambda_{\max}/\lambda_{\min}`), and every run ends: at its flow time (finite
even for a singular NTK, :func:`flow_time`), at a target loss, or at a wall-clock budget.

References: seed 002 section 6 (adjoint), Def. 8.4, Thm. 8.5; seed 003 Def. 1, Thm. 4.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from . import _attention
from ._integrate import FlowStatus
from ._validate import as_samples, check_score_range
from .errors import DomainError, InputError
from .families import as_laws

__all__ = [
    "AttentionParams",
    "init_params",
    "forward",
    "loss_and_grad",
    "NTKSpectrum",
    "ntk_spectrum",
    "FlowResult",
    "FlowStatus",
    "FlowTime",
    "flow_time",
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
    :class:`~ntkcheck.families.Empirical`, for every atom). Copies of a token end at the
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


# ----------------------------------------------------------------------------- NTK


@dataclass(frozen=True)
class NTKSpectrum:
    """Spectrum of the NTK :math:`K = m W^{1/2} J J^T W^{1/2}` on the output space.

    Attributes
    ----------
    eigenvalues : tuple of float
        Ascending, length = number of weighted outputs (``d`` times the number of distinct
        atoms for ``"tokens"``, ``n d`` for ``"readout"``).
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


def _ntk_eigenvalues(batch: _Batch, params: AttentionParams, layers: int, T: float, loss: str,
                     cache: _Cache | None = None) -> np.ndarray:
    """Eigenvalues of K: at FixUp from the small matrix k of K = k (x) I_d, else dense."""
    if cache is None:
        _, cache = _forward(batch, params, layers, T, keep=True)
    if _attention._is_fixup(params):
        return _attention._fixup_linear(batch, params, layers, T, loss, cache).full_evals()
    return np.linalg.eigvalsh(_attention._ntk_dense(batch, params, layers, T, loss, cache))


def ntk_spectrum(samples: Any, params: AttentionParams, *, layers: int, T: float = 1.0, loss: LossKind = "tokens") -> NTKSpectrum:
    r"""Eigenvalues of the NTK at ``params`` over all parameter directions (``V``, ``Q``, ``b``).

    .. math::

        K = m\,W^{1/2} J J^T W^{1/2},\quad J = \partial z/\partial\theta,\qquad
        \frac{d}{ds}W^{1/2}(z - y) = -K\,W^{1/2}(z - y)

    along :func:`gradient_flow`. The outputs are the distinct atoms of each sample with
    their masses as weights (the operator on :math:`L^2(\mu_i)`; copies of a token are one
    point). At FixUp, tokens loss, shared heads: :math:`K = (T^2/n)\,F F^T\otimes I_d` with
    ``F`` the distinct-atom features of ``ntkcheck.gram`` (weights = masses), computed from
    that small matrix; away from FixUp the dense NTK (``V`` part by a kernel trick, ``Q, b``
    parts from per-sample Jacobians).

    References: seed 002 Def. 8.4, seed 003 Thm. 4 and Prop. 5.
    """
    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    ev = _ntk_eigenvalues(batch, params, int(layers), float(T), loss)
    return NTKSpectrum(tuple(float(v) for v in ev), loss)


# ----------------------------------------------------------------------------- gradient flow


#: relative eigenvalue under which the NTK counts as singular: eigvalsh of the formed Gram
#: does not resolve relative eigenvalues below ~1e-13 (ntkcheck.gram, RESOLUTION_EIGH)
SINGULAR_REL = 1e-10
#: smallest rate (relative to lambda_max) a default flow time is derived from
RATE_FLOOR_REL = 1e-8


@dataclass(frozen=True)
class FlowTime:
    r"""The flow time a run needs: ``decades`` decades of loss along the slowest resolved mode.

    Attributes
    ----------
    time : :math:`\text{decades}\cdot\ln 10/(2\,\text{rate})`
    rate : the eigenvalue used: :math:`\lambda_0` if it is resolved (above
        ``SINGULAR_REL`` :math:`\lambda_{\max}`), else the smallest eigenvalue above that
        (the range's slowest rate), never below ``RATE_FLOOR_REL`` :math:`\lambda_{\max}`
    singular : :math:`\lambda_0 < ` ``SINGULAR_REL`` :math:`\lambda_{\max}`
    kernel_dim : number of eigenvalues below ``SINGULAR_REL`` :math:`\lambda_{\max}`
    """

    time: float
    rate: float
    singular: bool
    kernel_dim: int
    lambda_0: float
    lambda_max: float


def flow_time(eigenvalues: Any, decades: float = 4.0) -> FlowTime:
    r"""Default flow time from the NTK spectrum, finite whatever the spectrum.

    A singular NTK has no linear rate (seed 002 Thm. 8.5 does not apply): the time is then
    set by the slowest mode of the range, so the run ends after the range part has lost
    ``decades`` decades and the kernel part shows its plateau.

    Examples
    --------
    >>> ft = flow_time([1e-18, 1e-18, 0.02, 1.0], decades=2)
    >>> ft.singular, ft.kernel_dim, round(ft.time, 3)
    (True, 2, 115.129)
    """
    ev = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())
    if ev.size == 0 or not np.all(np.isfinite(ev)):
        raise InputError("flow_time: expected a non-empty finite spectrum")
    if not (np.isfinite(decades) and decades > 0):
        raise DomainError(f"decades must be finite and > 0, got {decades!r}")
    lam0, lamM = float(ev[0]), float(ev[-1])
    if lamM <= 0:
        raise DomainError(f"the NTK is zero (lambda_max={lamM:.3g}): the flow does not move")
    resolved = ev[ev >= SINGULAR_REL * lamM]
    singular = lam0 < SINGULAR_REL * lamM
    rate = max(float(resolved[0]), RATE_FLOOR_REL * lamM)
    return FlowTime(decades * math.log(10.0) / (2.0 * rate), rate, bool(singular), int(ev.size - resolved.size), lam0, lamM)


@dataclass(frozen=True)
class FlowResult:
    """Records of one gradient-flow run (arrays are tuples of floats, one entry a record).

    Attributes
    ----------
    s : flow times of the records (the last one is where the run stopped)
    loss : loss values (per-token loss, including ``loss_floor``)
    lambda_min, lambda_max : NTK extreme eigenvalues at the current parameters (empty if not
        tracked; ``nan`` at records where they were not computed, see ``message``)
    displacement : :math:`(\\frac1H\\sum_h|\\theta_h(s)-\\theta_h(0)|^2)^{1/2}` (upper bound on W_2)
    wall : wall-clock seconds spent when the record was reached
    method : ``"exponential:etd2"``, ``"solve_ivp:<name>"`` or ``"gd:step=<eta>"``
    nfev : number of gradient evaluations
    message : what happened, in words
    status : :class:`FlowStatus`, why the run stopped
    loss_floor : the part of the loss no parameter can change (targets that differ on
        copies of one token; 0 otherwise)
    time_requested : the flow time asked for (``s[-1]`` is smaller if the run stopped early)
    final_params : AttentionParams at the last record (not in ``to_dict``)
    outputs : the outputs ``z`` (what the loss sees, on the distinct atoms, unweighted) at
        each record (not in ``to_dict``)
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
    status: FlowStatus = FlowStatus.COMPLETED
    loss_floor: float = 0.0
    time_requested: float = float("nan")

    def __repr__(self) -> str:
        return (f"FlowResult({self.method}, s_end={self.s[-1]:.4g}, loss {self.loss[0]:.3e} -> {self.loss[-1]:.3e}, "
                f"displacement_max={max(self.displacement):.3g}, nfev={self.nfev}, {self.status.name.lower()})")

    def to_dict(self) -> dict[str, Any]:
        return {"s": list(self.s), "loss": list(self.loss), "lambda_min": list(self.lambda_min),
                "lambda_max": list(self.lambda_max), "displacement": list(self.displacement),
                "wall": list(self.wall), "method": self.method, "nfev": self.nfev, "message": self.message,
                "status": self.status.name.lower(), "loss_floor": self.loss_floor, "time_requested": self.time_requested}


def _progress(total: float, enabled: bool | None, desc: str):
    """A tqdm bar over flow time on stderr: on when ``enabled``, else only on a terminal."""
    from tqdm.auto import tqdm

    disable = (not sys.stderr.isatty()) if enabled is None else (not enabled)
    if desc != "gradient flow":
        return tqdm(total=total, disable=disable, desc=desc, leave=False)
    return tqdm(total=total, disable=disable, desc=desc, unit="s", leave=False,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| s={n:.4g}/{total:.4g} [{elapsed}<{remaining}{postfix}]")


def _ntk_record_indices(track_ntk: bool | int, n_records: int) -> list[int]:
    if track_ntk is True:
        return list(range(n_records))
    k = int(track_ntk)
    if k <= 0:
        return []
    if k == 1:
        return [0]
    return sorted(set(np.round(np.linspace(0, n_records - 1, min(k, n_records))).astype(int).tolist()))


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
    track_ntk: bool | int = True,
    rtol: float = 1e-8,
    atol: float = 1e-12,
    method: str = "auto",
    step: float | None = None,
    progress: bool | None = None,
    loss_target: float | None = None,
    time_budget: float | None = None,
) -> FlowResult:
    r"""Integrate :math:`d\theta_h/ds = -m\,\nabla_{\theta_h}\mathcal L` on ``[0, time_end]``.

    Integrators (``method``):

    * ``"auto"`` / ``"exponential"``: adaptive exponential integrator (ETD2) whose linear
      part is the NTK at the initial parameters, treated exactly; the step is limited by
      the nonlinearity only, not by :math:`\lambda_{\max}/\lambda_{\min}` (module
      ``ntkcheck._integrate``). Needs the linearisation: free at FixUp (``V = 0``: the
      features), a dense Jacobian otherwise (``"auto"`` then falls back to ``"RK45"``
      when that is over the memory budget);
    * a :mod:`scipy.integrate` solver by name (``"RK45"``, ``"DOP853"``, ...), with
      ``rtol``, ``atol``;
    * ``step = eta``: explicit gradient descent
      :math:`\theta_{k+1} = \theta_k - \eta\,m\,\nabla\mathcal L(\theta_k)`, ``s = k eta``
      (stable for :math:`\eta < 2/\lambda_{\max}(K)` near a minimum).

    The run always ends: at ``time_end``, when the loss reaches ``loss_target``, or when
    ``time_budget`` wall-clock seconds are spent (``status`` says which; the last record
    is where it stopped).

    Records at ``n_records`` times: loss, displacement, wall time, and the NTK
    ``lambda_min``/``lambda_max`` over all parameters at every record (``track_ntk=True``),
    at ``k`` evenly spaced records (``track_ntk=k``), or never (``False``).

    The model runs on the distinct atoms of each sample with their masses (copies of a
    token move together); token targets are averaged over copies and their spread is
    reported as ``loss_floor``.

    References: MATH.md section 5; seed 002 eq. 13 with beta = 0; seed 003 Thm. 4.
    """
    from . import _integrate

    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    if not (np.isfinite(time_end) and time_end > 0):
        raise DomainError(f"time_end must be finite and > 0, got {time_end!r}")
    if n_records < 2:
        raise DomainError(f"n_records must be >= 2, got {n_records}")
    if step is not None and not (np.isfinite(step) and step > 0):
        raise DomainError(f"step must be finite and > 0, got {step!r}")
    if loss_target is not None and not (np.isfinite(loss_target) and loss_target >= 0):
        raise DomainError(f"loss_target must be finite and >= 0, got {loss_target!r}")
    if time_budget is not None and not (np.isfinite(time_budget) and time_budget > 0):
        raise DomainError(f"time_budget must be finite and > 0 seconds, got {time_budget!r}")
    if record_spacing not in ("linear", "log"):
        raise InputError(f"record_spacing: expected 'linear' or 'log', got {record_spacing!r}")
    Y, floor = _attention._targets_array(batch, targets, loss)
    layers, T = int(layers), float(T)
    m = _mobility(params, layers, T)
    p0 = params.flat()
    if record_spacing == "log":
        s_rec = np.concatenate([[0.0], np.geomspace(time_end * 1e-3, time_end, n_records - 1)])
    else:
        s_rec = np.linspace(0.0, time_end, n_records)
    bar = _progress(time_end, progress, "gradient flow")

    def field_(vec: np.ndarray) -> tuple[float, np.ndarray]:
        val, g = _loss_grad(batch, params.unflat(vec), Y, layers, T, loss)
        return val, -m * g.flat()

    def show(s: float, val: float) -> None:
        bar.update(min(s, time_end) - bar.n)
        bar.set_postfix_str(f"loss={val + floor:.3e}", refresh=False)

    notes: list[str] = []
    rec = _integrate._Recorder(s_rec, time_budget, None if loss_target is None else loss_target - floor, show)
    try:
        if step is not None:
            run = _integrate.descent(field_, p0, time_end, rec, step=step)
        else:
            lin = None
            if method in ("auto", "exponential"):
                try:
                    lin = _attention.linear_part(batch, params, layers, T, loss)
                except DomainError as exc:
                    if method == "exponential":
                        raise
                    notes.append(f"RK45 instead of the exponential integrator ({exc})")
            if lin is not None:
                def relinearise(vec: np.ndarray) -> _attention._Linear | None:
                    try:
                        return _attention.linear_part(batch, params.unflat(vec), layers, T, loss)
                    except DomainError:  # the dense Jacobian is over the memory budget
                        return None

                run = _integrate.exponential(field_, p0, time_end, lin, rec, rtol=rtol, atol=atol,
                                             relinearise=relinearise)
            else:
                run = _integrate.ode_solver(field_, p0, time_end, rec, method="RK45" if method == "auto" else method,
                                            rtol=rtol, atol=atol)
    finally:
        bar.close()

    ntk_at = set(_ntk_record_indices(track_ntk, len(run.states)))
    dense = [r for r in ntk_at if not _attention._is_fixup(params.unflat(run.states[r]))]
    ntk_bar = _progress(len(dense), progress, "NTK records") if dense else None
    losses, lmins, lmaxs, disps, outputs = [], [], [], [], []
    skipped, skipped_at = "", float("nan")
    for r, vec in enumerate(run.states):
        pr = params.unflat(vec)
        want = r in ntk_at and not skipped
        XT, cache = _forward(batch, pr, layers, T, keep=want)
        z = _outputs(batch, XT, loss)
        val, _ = _loss_value(batch, z, Y, loss)
        losses.append(val + floor)
        disps.append(_displacement(params, p0, vec, layers, T))
        if track_ntk:
            lo = hi = float("nan")
            cheap = _attention._is_fixup(pr)  # from the features: no dense Jacobian
            if want and not cheap and time_budget is not None and rec.wall() >= time_budget:
                skipped, skipped_at = "the wall-clock budget was spent", run.s[r]
            elif want:
                try:
                    ev = _ntk_eigenvalues(batch, pr, layers, T, loss, cache)
                    lo, hi = float(ev[0]), float(ev[-1])
                except DomainError as exc:
                    skipped, skipped_at = str(exc), run.s[r]
                if ntk_bar is not None and not cheap:
                    ntk_bar.update(1)
            lmins.append(lo)
            lmaxs.append(hi)
        outputs.append(z)
    if ntk_bar is not None:
        ntk_bar.close()
    if skipped:
        notes.append(f"NTK eigenvalues not recorded from s={skipped_at:.4g} on: {skipped}")
    message = f"{run.status}: {run.steps} steps, {run.nfev} gradients"
    if run.rejected:
        message += f" ({run.rejected} steps rejected)"
    if floor > 0:
        notes.append(f"copies of a token have different targets: loss >= {floor:.4g} (loss_floor)")
    message = "; ".join([message] + notes)
    return FlowResult(
        run.s, tuple(losses), tuple(lmins), tuple(lmaxs), tuple(disps), run.walls, run.method, run.nfev, message,
        params.unflat(run.states[-1]), tuple(outputs), run.status, float(floor), float(time_end),
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
    """The model at initialisation: outputs, the NTK ``K_0 = k (x) I_q`` and its eigenbasis."""

    batch: _Batch
    params: AttentionParams
    layers: int
    T: float
    loss: str
    z0: np.ndarray
    lin: _attention._Linear
    evals: np.ndarray  # eigenvalues of K_0, ascending
    sqrtw: np.ndarray  # sqrt of the loss weights, broadcast to the outputs' shape

    @functools.cached_property
    def evecs(self) -> np.ndarray:
        """Eigenvectors of ``K_0`` as a dense matrix (columns, ordered as ``evals``).

        ``(rows d)^2`` entries at FixUp: prefer :meth:`coords` / :meth:`project`."""
        return np.kron(self.lin.U, np.eye(self.lin.q))

    def coords(self, u: np.ndarray) -> np.ndarray:
        """``evecs.T @ u`` without forming ``evecs``."""
        return self.lin.coords(u)

    def project(self, u: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Orthogonal projection of ``u`` on the eigenvectors where ``keep`` (over ``evals``) is True."""
        c = self.lin.coords(u)
        return self.lin.from_coords(np.where(keep, c, 0.0))


def _setup(samples: Any, params: AttentionParams, layers: int, T: float, loss: str) -> _Setup:
    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    layers, T = int(layers), float(T)
    XT, cache = _forward(batch, params, layers, T, keep=True)
    z0 = _outputs(batch, XT, loss)
    lin = _attention.linear_part(batch, params, layers, T, loss, cache)
    w = _weights(batch, loss)
    sqrtw = np.broadcast_to(np.sqrt(w)[..., None], z0.shape)
    return _Setup(batch, params, layers, T, loss, z0, lin, lin.full_evals(), sqrtw)


def _weighted_flat(st: _Setup, z: np.ndarray) -> np.ndarray:
    """Weighted outputs in the NTK's coordinates (rows of W^{1/2} J): real atoms only."""
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
    """Targets for :func:`gradient_flow` from atom-level outputs (copies get their atom's)."""
    if st.loss == "readout":
        return z
    return st.batch.expand(z)


def _default_params(samples: Any, heads: int, layers: int, per_layer: bool, q_scale: float, b_scale: float, seed: int) -> AttentionParams:
    d = as_laws(samples)[0].dim
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
    displacement_max, displacement_bound : max particle displacement and the Thm. 8.5 bound with
        the corrected constants, :math:`2\sqrt{2\Lambda+\lambda_0}\,\mathcal L(0)^{1/2}/\lambda_0`
        (guaranteed only when ``certificate.certified``)
    lipschitz_lower : :math:`\max_s|\lambda_{\min}(K_s)-\lambda_0|/\mathrm{disp}(s)`, a measured lower
        bound on ``L_K``: it can refute the corrected eq. 30, never establish it
    certificate : :class:`ntkcheck.lipschitz.ConvergenceCertificate` or None
        Whether the corrected eq. 30 holds with a certified ``L_K`` and, if so, the guaranteed
        rate and radius; ``None`` for per-layer heads (the bound covers shared heads).
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
    certificate: Any = field(default=None, repr=False)

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
        out["certificate"] = None if self.certificate is None else self.certificate.to_dict()
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
    track_ntk: bool | int = True,
    rtol: float = 1e-7,
    atol: float = 1e-12,
    method: str = "auto",
    step: float | None = None,
    progress: bool | None = None,
    time_budget: float | None = None,
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
        time_end = flow_time(st.evals, decades).time  # finite even for a singular NTK
    flow = gradient_flow(samples, params, _targets_from(st, y), layers=layers, time_end=time_end, T=T, loss=loss,
                         n_records=n_records, track_ntk=track_ntk, rtol=rtol, atol=atol, method=method, step=step,
                         progress=progress, time_budget=time_budget)
    s = np.array(flow.s)
    Ls = np.array(flow.loss)
    L0 = Ls[0]
    pos = s > 0
    rates = -np.log(Ls[pos] / L0) / s[pos]
    rate_measured = float(rates.min())
    half = s >= s[-1] / 2
    rate_asym = -_fit_slope(s[half], np.log(Ls[half]))
    coef = st.coords(-eps * u_dir)
    L_lin = 0.5 * np.sum((np.exp(-np.outer(s, st.evals)) * coef) ** 2, axis=1)
    lin_err = float(np.max(np.abs(Ls - L_lin) / L_lin))
    eq31 = bool(np.all(Ls <= np.exp(-lam0 * s) * L0 * (1 + 1e-9)))
    disp = np.array(flow.displacement)
    if track_ntk and np.any(disp > 0):
        dl = np.abs(np.array(flow.lambda_min) - lam0)
        seen = (disp > 0) & np.isfinite(dl)  # records where the NTK was computed
        lip = float(np.max(dl[seen] / disp[seen])) if np.any(seen) else float("nan")
    else:
        lip = float("nan")
    # seed 002 Thm. 8.5 with the corrected constants (theory/local-convergence.md)
    bound = 2.0 * math.sqrt(2.0 * lamM + lam0) / lam0 * math.sqrt(L0) if lam0 > 0 else float("inf")
    cert = None
    if not params.per_layer:
        from .lipschitz import certificate_from_spectrum

        cert = certificate_from_spectrum(samples, params, layers=int(layers), T=float(T), loss=loss, lambda_min=lam0,
                                         lambda_max=lamM, loss_initial=float(L0))
    return LocalConvergence(
        loss, float(eps), params.heads, int(layers), float(T), params.per_layer, lam0, lamM, float(L0), float(Ls[-1]),
        lam0, rate_measured, float(rate_asym), 2.0 * lam0, eq31, lin_err, float(disp.max()), bound, lip, float(time_end), flow,
        cert,
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
    kernel_source: str = "given"

    def __repr__(self) -> str:
        return (f"KernelPlateau(kernel_dim={self.kernel_dim}, lambda_plus={self.lambda_plus:.4g}: kernel loss x{self.kernel_loss_ratio:.4g}, "
                f"range loss x{self.range_loss_ratio:.3g} over s={self.time_end:.3g}; linear rate would give x{self.predicted_ratio:.3g})")

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "kernel_dim", "lambda_min_0", "lambda_plus", "lambda_max_0", "eps", "mix", "time_end", "kernel_loss_ratio",
            "range_loss_ratio", "predicted_ratio", "kernel_rate_measured", "kernel_source")}
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
    time_budget: float | None = None,
) -> KernelPlateau:
    r"""Experiment (b), per-token loss: a residual in the NTK kernel (:func:`overlap_example` by default).

    The residual is :math:`z_0 - y = \varepsilon(\sqrt{1-\text{mix}^2}\,p\otimes e + \text{mix}\,r)`
    (weighted-normalised), ``p`` the kernel adjoint of seed 003 Prop. 8 (condition (34)),
    ``e`` a unit vector, ``r`` a random direction in the range of :math:`K_0`. At ``mix = 0``
    the initial point is stationary (the gradient vanishes exactly); ``mix > 0`` lets the
    parameters move, so the plateau is a property of the flow, not of a fixed point.

    ``kernel_direction``: one value per given token (copies of a token are averaged: the
    NTK acts on :math:`L^2(\mu_i)`) or per distinct atom. Omitted with custom ``samples``,
    the slowest eigenvector of :math:`K_0` is used when it is in the numerical kernel
    (eigenvalue below ``kernel_tol`` :math:`\lambda_{\max}`); ``kernel_source`` says which.

    References: seed 003 Prop. 8 (necessity half), Thm. 4 (its positivity assumption fails here).
    """
    if samples is None:
        samples, p = overlap_example()
        kernel_direction = p if kernel_direction is None else kernel_direction
    if not (0 <= mix < 1):
        raise DomainError(f"mix must be in [0, 1), got {mix!r}")
    if not (np.isfinite(eps) and eps > 0):
        raise DomainError(f"eps must be finite and > 0, got {eps!r}")
    d = as_laws(samples)[0].dim
    params = init_params(d, heads, q_scale=q_scale, b_scale=b_scale, seed=seed)
    st = _setup(samples, params, layers, T, "tokens")
    lamM = float(st.evals[-1])
    ker = st.evals < kernel_tol * lamM
    kdim = int(ker.sum())
    if kdim == 0:
        raise DomainError(f"the NTK at initialisation has no kernel (lambda_min / lambda_max = {st.evals[0] / lamM:.3g} "
                          f">= kernel_tol = {kernel_tol:g}): nothing plateaus; this is not a dependent-with-overlap case")
    lam_plus = float(st.evals[~ker][0])
    if kernel_direction is None:
        source = "computed"
        first = np.zeros(len(st.evals))
        first[0] = 1.0
        u_ker = st.lin.from_coords(first)  # the slowest eigenvector, in the kernel
    else:
        source = "given"
        pk = np.asarray(kernel_direction, dtype=np.float64).reshape(-1)
        n_tok, n_atoms = int(st.batch.n_tokens.sum()), int(st.batch.counts.sum())
        if pk.shape[0] == n_tok:  # per token: average the copies of each atom
            parts = np.split(pk, np.cumsum(st.batch.n_tokens)[:-1])
            pk = np.concatenate([np.bincount(t, weights=v, minlength=int(c)) / np.bincount(t, minlength=int(c))
                                 for t, v, c in zip(st.batch.tokens, parts, st.batch.counts)])
        elif pk.shape[0] != n_atoms:
            raise InputError(f"kernel_direction: expected {n_tok} values (one per token) or {n_atoms} "
                             f"(one per distinct atom), got {pk.shape[0]}")
        e = np.zeros(d)
        e[0] = 1.0
        # residual (z - y) proportional to p (x) e  <=>  u proportional to W^{1/2} p (x) e
        w_flat = st.sqrtw[..., 0][st.batch.mask]
        u_ker = np.kron(w_flat * pk, e)
        if not np.linalg.norm(u_ker) > 0:
            raise InputError("kernel_direction: is zero on every atom")
        u_ker /= np.linalg.norm(u_ker)
        off = float(np.linalg.norm(u_ker - st.project(u_ker, ker)))
        if off > 1e-6:
            raise DomainError(f"kernel_direction is not in the NTK kernel at initialisation (residual {off:.3g}); "
                              "check the shared atom and the coefficients")
    rng = np.random.default_rng(seed + 1)
    r = rng.standard_normal(len(st.evals))
    r -= st.project(r, ker)
    r /= np.linalg.norm(r)
    u0 = eps * (math.sqrt(1 - mix**2) * u_ker + mix * r)
    y = st.z0 - _from_weighted(st, u0)
    if time_end is None:
        time_end = decades * math.log(10.0) / (2.0 * lam_plus)
    flow = gradient_flow(samples, params, _targets_from(st, y), layers=layers, time_end=time_end, T=T, loss="tokens",
                         n_records=n_records, track_ntk=False, rtol=rtol, atol=atol, progress=progress,
                         time_budget=time_budget)
    kl, rl = [], []
    for z in flow.outputs:
        u = _weighted_flat(st, z - y)
        uk = st.project(u, ker)
        kl.append(0.5 * float(uk @ uk))
        rl.append(0.5 * float((u - uk) @ (u - uk)))
    s_end = flow.s[-1]
    kratio = kl[-1] / kl[0]
    rratio = rl[-1] / rl[0] if mix > 0 else float("nan")  # mix = 0: the range part is rounding noise
    return KernelPlateau(
        kdim, float(st.evals[0]), lam_plus, lamM, float(eps), float(mix), float(s_end), float(kratio), float(rratio),
        float(math.exp(-2 * lam_plus * s_end)), float(-math.log(kratio) / s_end), tuple(kl), tuple(rl), flow, source,
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
