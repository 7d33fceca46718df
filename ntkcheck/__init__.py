"""ntkcheck: certified checks of NTK injectivity for softmax attention.

Seed 003 Prop. 8: at FixUp initialisation the attention NTK is injective iff the
token distributions' CGFs are linearly independent modulo affine functions (the
converse needs overlapping supports). ntkcheck decides that property with
certificates, assembles the finite-token NTK Gram matrix, and runs the gradient flow
whose linear convergence the positivity buys.
"""

from __future__ import annotations

# CGFs of token sets
from .cgf import cgf_gradient as cgf_gradient
from .cgf import cgf_hessian as cgf_hessian
from .cgf import cumulants_1d_exact as cumulants_1d_exact
from .cgf import joint_cumulants as joint_cumulants
from .cgf import log_mgf as log_mgf

# the seed's sufficient conditions
from .conditions import gap_condition as gap_condition
from .conditions import vandermonde_condition as vandermonde_condition

# the decision engine
from .decide import Decision as Decision
from .decide import Verdict as Verdict
from .decide import decide as decide

# errors
from .errors import DomainError as DomainError
from .errors import InputError as InputError
from .errors import NtkcheckError as NtkcheckError
from .errors import NtkcheckWarning as NtkcheckWarning
from .errors import PrecisionError as PrecisionError

# token distributions
from .families import Dirac as Dirac
from .families import Empirical as Empirical
from .families import EmpiricalConvolution as EmpiricalConvolution
from .families import Family as Family
from .families import Gaussian as Gaussian
from .families import GaussianConvolution as GaussianConvolution
from .families import GaussianMixture2 as GaussianMixture2
from .families import Laplace as Laplace
from .families import Translation as Translation
from .families import UniformCube as UniformCube
from .io import load_samples as load_samples

__version__ = "0.1.0"
