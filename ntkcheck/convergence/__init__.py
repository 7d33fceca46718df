"""Local convergence: the certified guarantee of seed 002 Thm. 8.5 and the runs that check it.

What lives here: the guarantee (``guarantee``) and its pieces: the proved spectrum of the NTK at
FixUp (``spectrum_bound``), the deviation of the Jacobian on a ball (``jacobian_bound``, FixUp
structure; ``lipschitz``, the propagated bound), the split region that bounds the value and the
query displacements apart (``coercivity``), and the search for the true constants
(``lipschitz_search``); the experiments that run a flow from FixUp and hold it against the
guarantee (``local``, one run; ``eps_sweep``, a sweep of the initial loss). The model, the NTK and
the flows they use are a layer below, :mod:`ntkcheck.dynamics`.

May import: :mod:`ntkcheck.dynamics` and everything below it.
"""

from __future__ import annotations

# eps_sweep
from .eps_sweep import EpsSweep as EpsSweep
from .eps_sweep import eps_sweep as eps_sweep

# guarantee
from .guarantee import ConvergenceCertificate as ConvergenceCertificate
from .guarantee import certificate_from_spectrum as certificate_from_spectrum
from .guarantee import convergence_certificate as convergence_certificate

# jacobian_bound
from .jacobian_bound import JacobianBound as JacobianBound

# lipschitz
from .lipschitz import ROUNDING_MARGIN as ROUNDING_MARGIN
from .lipschitz import LipschitzBound as LipschitzBound
from .lipschitz import lipschitz_bound as lipschitz_bound
from .lipschitz import readout_ntk_fixup as readout_ntk_fixup

# lipschitz_search
from .lipschitz_search import LipschitzSearch as LipschitzSearch
from .lipschitz_search import lipschitz_search as lipschitz_search

# local
from .local import LocalConvergence as LocalConvergence
from .local import local_convergence as local_convergence

# spectrum_bound
from .spectrum_bound import CertifiedSpectrum as CertifiedSpectrum
from .spectrum_bound import certified_spectrum as certified_spectrum

__all__ = [
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
    'LocalConvergence',
    'local_convergence',
    'EpsSweep',
    'eps_sweep',
]
