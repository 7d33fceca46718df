r"""Discrete depth ``L`` against the continuous-depth model: the order of the Euler scheme.

References: seed 002 eq. 2 (the ResNet as Euler scheme of eq. 6); seed 003 Prop. 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._records import restore
from .._validate import as_samples
from ._experiment import _fit_slope
from .flow import gradient_flow
from .model import LossKind, _Batch, _forward, _outputs, init_params

__all__ = [
    "DepthConvergence",
    "depth_convergence",
]


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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DepthConvergence:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

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
