"""Training dynamics: deep multi-head attention trained by gradient flow.

What lives here: the model and its discrete adjoint (``model``), the NTK over all
parameters (``ntk``), gradient flows with their stopping rule (``flow``), the certified
guarantee of seed 002 Thm. 8.5 (``guarantee``) and its pieces: the proved spectrum at FixUp
(``spectrum_bound``), the deviation of the Jacobian on a ball (``jacobian_bound``, FixUp
structure; ``lipschitz``, the propagated bound) and the search for the true constant
(``lipschitz_search``); one module per experiment
(``convergence``, ``plateau``, ``sweep``, ``depth``; shared helpers and the
default data in ``_experiment``), the attention kernels on atoms with masses
(``_attention``) and the exponential integrator (``_integrate``). The limit-theorem
experiments, which simulate other models at scale, are a layer above: :mod:`ntkcheck.limits`.

May import: :mod:`ntkcheck.ntk`, :mod:`ntkcheck.io`, :mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

# _experiment
from ._experiment import default_samples as default_samples
from ._experiment import overlap_example as overlap_example

# convergence
from .convergence import LocalConvergence as LocalConvergence
from .convergence import local_convergence as local_convergence

# depth
from .depth import DepthConvergence as DepthConvergence
from .depth import depth_convergence as depth_convergence

# flow
from .flow import FlowResult as FlowResult
from .flow import FlowStatus as FlowStatus
from .flow import FlowTime as FlowTime
from .flow import flow_time as flow_time
from .flow import gradient_flow as gradient_flow

# guarantee
from .guarantee import ConvergenceCertificate as ConvergenceCertificate
from .guarantee import certificate_from_spectrum as certificate_from_spectrum
from .guarantee import convergence_certificate as convergence_certificate

# jacobian_bound
from .jacobian_bound import JacobianBound as JacobianBound
from .lipschitz import ROUNDING_MARGIN as ROUNDING_MARGIN

# lipschitz
from .lipschitz import LipschitzBound as LipschitzBound
from .lipschitz import lipschitz_bound as lipschitz_bound
from .lipschitz import readout_ntk_fixup as readout_ntk_fixup

# search
from .lipschitz_search import LipschitzSearch as LipschitzSearch
from .lipschitz_search import lipschitz_search as lipschitz_search

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

# spectrum_bound
from .spectrum_bound import CertifiedSpectrum as CertifiedSpectrum
from .spectrum_bound import certified_spectrum as certified_spectrum

# sweep
from .sweep import EpsSweep as EpsSweep
from .sweep import eps_sweep as eps_sweep

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
    'LipschitzBound',
    'lipschitz_bound',
    'ConvergenceCertificate',
    'convergence_certificate',
    'certificate_from_spectrum',
    'readout_ntk_fixup',
    'ROUNDING_MARGIN',
    'JacobianBound',
    'CertifiedSpectrum',
    'certified_spectrum',
    'LipschitzSearch',
    'lipschitz_search',
    'default_samples',
    'overlap_example',
    'LocalConvergence',
    'local_convergence',
    'KernelPlateau',
    'kernel_plateau',
    'EpsSweep',
    'eps_sweep',
    'DepthConvergence',
    'depth_convergence',
]
