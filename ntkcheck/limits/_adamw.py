r"""AdamW (decoupled weight decay) on arrays of parameters, one step at a time.

Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019), Algorithm 2 with
a constant schedule multiplier :math:`\eta_t = 1`: for step :math:`t = 1, 2, \dots` with
gradient :math:`g_t` at :math:`\theta_{t-1}`,

.. math::

    m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t, \qquad
    v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2, \qquad
    \hat m_t = \frac{m_t}{1-\beta_1^t},\quad \hat v_t = \frac{v_t}{1-\beta_2^t},

.. math::

    \theta_t = \theta_{t-1} - \alpha\Big(\frac{\hat m_t}{\sqrt{\hat v_t}+\varepsilon}
    + \lambda\,\theta_{t-1}\Big),

elementwise, :math:`m_0 = v_0 = 0`. The decay :math:`\lambda\theta_{t-1}` is *decoupled*: it
is not part of the gradient and does not pass through the moment estimates (PyTorch's
``AdamW`` writes the same update as :math:`\theta \leftarrow (1-\alpha\lambda)\theta` followed
by the Adam step).

Private to :mod:`ntkcheck.dynamics` (used by :mod:`ntkcheck.limits.depth_heads`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import DomainError

__all__ = ["AdamW", "AdamWState", "adamw_step"]


@dataclass(frozen=True)
class AdamW:
    """AdamW hyper-parameters: step ``lr`` (:math:`\\alpha`), ``betas``, ``eps``, ``weight_decay`` (:math:`\\lambda`)."""

    lr: float = 0.02
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-2
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        b1, b2 = self.betas
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise DomainError(f"AdamW: lr must be finite and > 0, got {self.lr!r}")
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise DomainError(f"AdamW: betas must lie in [0, 1), got {self.betas!r}")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise DomainError(f"AdamW: eps must be finite and > 0, got {self.eps!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise DomainError(f"AdamW: weight_decay must be finite and >= 0, got {self.weight_decay!r}")


@dataclass(frozen=True)
class AdamWState:
    """Parameters and moment estimates after ``step`` updates (``m``, ``v`` shaped like ``theta``)."""

    theta: np.ndarray
    m: np.ndarray
    v: np.ndarray
    step: int = 0

    @staticmethod
    def start(theta: np.ndarray) -> AdamWState:
        theta = np.asarray(theta, dtype=np.float64)
        return AdamWState(theta, np.zeros_like(theta), np.zeros_like(theta), 0)


def adamw_step(state: AdamWState, grad: np.ndarray, opt: AdamW) -> AdamWState:
    r"""One AdamW update (module docstring formula) with the gradient ``grad`` taken at ``state.theta``."""
    g = np.asarray(grad, dtype=np.float64)
    if g.shape != state.theta.shape:
        raise DomainError(f"AdamW: gradient of shape {g.shape} for parameters of shape {state.theta.shape}")
    b1, b2 = opt.betas
    t = state.step + 1
    m = b1 * state.m + (1.0 - b1) * g
    v = b2 * state.v + (1.0 - b2) * g * g
    mhat = m / (1.0 - b1**t)
    vhat = v / (1.0 - b2**t)
    theta = state.theta - opt.lr * (mhat / (np.sqrt(vhat) + opt.eps) + opt.weight_decay * state.theta)
    return AdamWState(theta, m, v, t)
