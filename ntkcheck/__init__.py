"""ntkcheck: certified checks of NTK injectivity for softmax attention.

Seed 003 Prop. 8: at FixUp initialisation the attention NTK is injective iff the
token distributions' CGFs are linearly independent modulo affine functions (the
converse needs overlapping supports). ntkcheck decides that property with
certificates, assembles the finite-token NTK Gram matrix, and runs the gradient flow
whose linear convergence the positivity buys.

Layout (imports point down this list; ``tests/test_layout.py`` enforces it)::

    cli                      command line
    claims                   seed claims tried by hypothesis
    distributed, strategies  sweeps and one large Gram on Dask; hypothesis strategies for users' tests
    screening, limits,       initialisation screening of user data; the limit-theorem experiments;
      convergence            the certified Thm. 8.5 guarantee (L_K, split region) and the local-convergence runs
    dynamics                 model, adjoint, NTK over all parameters, flows
    io                       token files, heads files, real models
    ntk                      the NTK at FixUp, inside in this order: heads, features and the Gram's
                             linear algebra (gram_matrix); its certificate (certificate); the pipeline
                             of gram() (gram_matrix); head counts (heads); Prop. 8 (prop8)
    independence             decision, certified rank, identities, sufficient conditions
    cgf                      CGFs, the empirical law (one sample type), closed-form families
    _validate, _memory       validation where data enter; memory estimates before allocation
    _progress                progress bars (each update a checkpoint of the time budget)
    errors, _budget, _text   exceptions; time budget and cost estimates; report text helpers
    _precision               the one lock around mpmath / python-flint working precision
    verify                   the standalone certificate checker (numpy, mpmath, flint; nothing of ntkcheck)
"""

from __future__ import annotations

__all__ = [
    # CGFs of token sets
    "cgf_gradient", "cgf_hessian", "cumulants_1d_exact", "joint_cumulants", "log_mgf",
    # the seed's sufficient conditions
    "gap_condition", "vandermonde_condition",
    # the decision engine
    "decide", "Decision", "Verdict",
    # the NTK Gram at FixUp
    "gram", "GramResult", "Heads", "init_heads",
    # a symmetric matrix made elsewhere (an empirical NTK)
    "certify_matrix", "MatrixCertificate",
    # screening token data
    "screen", "ScreenReport", "plot_report",
    # errors
    "DomainError", "InputError", "NtkcheckError", "NtkcheckWarning", "PrecisionError",
    # token distributions
    "Dirac", "Empirical", "EmpiricalConvolution", "Family", "Gaussian", "GaussianConvolution",
    "GaussianMixture2", "Laplace", "Translation", "UniformCube",
    # token files
    "load_samples", "load_laws",
    "__version__",
]

# CGFs of token sets
# token distributions
from .cgf import Dirac as Dirac
from .cgf import Empirical as Empirical
from .cgf import EmpiricalConvolution as EmpiricalConvolution
from .cgf import Family as Family
from .cgf import Gaussian as Gaussian
from .cgf import GaussianConvolution as GaussianConvolution
from .cgf import GaussianMixture2 as GaussianMixture2
from .cgf import Laplace as Laplace
from .cgf import Translation as Translation
from .cgf import UniformCube as UniformCube
from .cgf.core import cgf_gradient as cgf_gradient
from .cgf.core import cgf_hessian as cgf_hessian
from .cgf.core import cumulants_1d_exact as cumulants_1d_exact
from .cgf.core import joint_cumulants as joint_cumulants
from .cgf.core import log_mgf as log_mgf

# errors
from .errors import DomainError as DomainError
from .errors import InputError as InputError
from .errors import NtkcheckError as NtkcheckError
from .errors import NtkcheckWarning as NtkcheckWarning
from .errors import PrecisionError as PrecisionError

# the seed's sufficient conditions
from .independence.conditions import gap_condition as gap_condition
from .independence.conditions import vandermonde_condition as vandermonde_condition

# the decision engine
from .independence.decision import decide as decide
from .independence.results import Decision as Decision
from .independence.results import Verdict as Verdict

# token files
from .io.files import load_laws as load_laws
from .io.files import load_samples as load_samples

# a symmetric matrix made elsewhere (module ``ntkcheck.ntk.certificate.user_matrix``)
from .ntk.certificate.user_matrix import MatrixCertificate as MatrixCertificate
from .ntk.certificate.user_matrix import certify_matrix as certify_matrix

# the NTK Gram at FixUp (module ``ntkcheck.ntk.gram_matrix.pipeline``; the function is ``gram``)
from .ntk.gram_matrix.features import Heads as Heads
from .ntk.gram_matrix.features import init_heads as init_heads
from .ntk.gram_matrix.pipeline import gram as gram
from .ntk.gram_matrix.result import GramResult as GramResult

# screening token data (module ``ntkcheck.screening``; the function is ``screen``)
from .screening import ScreenReport as ScreenReport
from .screening import plot_report as plot_report
from .screening import screen as screen

__version__ = "0.1.0"

# ``from __future__ import annotations`` binds the name ``annotations`` here: not public
del annotations
