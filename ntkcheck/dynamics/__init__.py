"""Training dynamics: deep multi-head attention trained by gradient flow.

What lives here: the model and its discrete adjoint (``model``), the NTK over all
parameters (``ntk``), gradient flows with their stopping rule (``flow``), the attention
kernels on atoms with masses (``_attention``), the exponential integrator (``_integrate``), and
the experiments that need only the flow (``plateau``, ``depth``; shared helpers and the default
data in ``_experiment``). The certified guarantee of seed 002 Thm. 8.5 and the local-convergence
experiments that check it against a run are a layer above, :mod:`ntkcheck.convergence`; the
limit-theorem experiments, which simulate other models at scale, another: :mod:`ntkcheck.limits`.

May import: :mod:`ntkcheck.ntk`, :mod:`ntkcheck.io`, :mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

# _experiment
from ._experiment import default_samples as default_samples
from ._experiment import overlap_example as overlap_example

# depth
from .depth import DepthConvergence as DepthConvergence
from .depth import depth_convergence as depth_convergence

# flow
from .flow import FlowResult as FlowResult
from .flow import FlowStatus as FlowStatus
from .flow import FlowTime as FlowTime
from .flow import flow_time as flow_time
from .flow import gradient_flow as gradient_flow

# model
from .model import AttentionParams as AttentionParams
from .model import forward as forward
from .model import init_params as init_params
from .model import loss_and_grad as loss_and_grad

# ntk
from .ntk import NTKSpectrum as NTKSpectrum
from .ntk import ntk_spectrum as ntk_spectrum

# plateau
from .plateau import KernelPlateau as KernelPlateau
from .plateau import kernel_plateau as kernel_plateau

__all__ = [
    'AttentionParams',
    'init_params',
    'forward',
    'loss_and_grad',
    'NTKSpectrum',
    'ntk_spectrum',
    'FlowResult',
    'FlowStatus',
    'FlowTime',
    'flow_time',
    'gradient_flow',
    'default_samples',
    'overlap_example',
    'KernelPlateau',
    'kernel_plateau',
    'DepthConvergence',
    'depth_convergence',
]
