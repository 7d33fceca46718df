r"""CGFs of token distributions and the closed-form families.

What lives here: the cumulant generating function
:math:`\Lambda_\mu(a) = \log\int e^{\langle a, y\rangle}\,d\mu(y)` of an empirical law
(max-shifted log-sum-exp, its gradient and Hessian; exact, Arb and mod-p Taylor series),
the empirical law itself (:class:`Empirical`: distinct atoms with exact masses, the one
sample type of the package) and the seed's closed-form families.

Modules: ``core`` (CGFs of empirical laws, series), ``base`` (the :class:`Family`
interface), ``empirical`` (:class:`Empirical`, :func:`as_laws`), ``compact`` (Dirac,
uniform cube), ``gaussian`` (Laplace, Gaussian, mixture), ``families`` (laws built from
other laws, the registry by name) and the private helpers ``_series``.

May import: the base modules (:mod:`ntkcheck.errors`, :mod:`ntkcheck._validate`,
:mod:`ntkcheck._budget`).
"""

from __future__ import annotations

# base
from .base import Family as Family
from .base import VandermondeForm as VandermondeForm

# compact
from .compact import Dirac as Dirac
from .compact import UniformCube as UniformCube
from .core import cgf_gradient as cgf_gradient
from .core import cgf_hessian as cgf_hessian
from .core import cumulants_1d_exact as cumulants_1d_exact
from .core import joint_cumulants as joint_cumulants
from .core import log_mgf as log_mgf
from .core import log_mgf_mp as log_mgf_mp

# core
from .core import normalize_weights as normalize_weights
from .core import series_log_mgf_arb as series_log_mgf_arb
from .core import series_log_mgf_exact as series_log_mgf_exact
from .core import taylor_1d_arb as taylor_1d_arb
from .core import taylor_1d_exact as taylor_1d_exact
from .core import to_fmpq as to_fmpq
from .core import to_fraction as to_fraction

# empirical
from .empirical import Empirical as Empirical
from .empirical import as_laws as as_laws
from .empirical import exact_masses as exact_masses
from .families import FAMILY_NAMES as FAMILY_NAMES
from .families import EmpiricalConvolution as EmpiricalConvolution

# families
from .families import GaussianConvolution as GaussianConvolution
from .families import Translation as Translation
from .families import family_from_name as family_from_name
from .gaussian import Gaussian as Gaussian
from .gaussian import GaussianMixture2 as GaussianMixture2

# gaussian
from .gaussian import Laplace as Laplace

__all__ = [
    'normalize_weights',
    'log_mgf',
    'cgf_gradient',
    'cgf_hessian',
    'log_mgf_mp',
    'taylor_1d_exact',
    'taylor_1d_arb',
    'series_log_mgf_exact',
    'series_log_mgf_arb',
    'cumulants_1d_exact',
    'joint_cumulants',
    'to_fraction',
    'to_fmpq',
    'Family',
    'VandermondeForm',
    'Empirical',
    'as_laws',
    'exact_masses',
    'Dirac',
    'UniformCube',
    'Laplace',
    'Gaussian',
    'GaussianMixture2',
    'GaussianConvolution',
    'Translation',
    'EmpiricalConvolution',
    'FAMILY_NAMES',
    'family_from_name',
]
