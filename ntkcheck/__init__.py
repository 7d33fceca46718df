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
    screening, gram_report,  initialisation screening of user data, what `ntkcheck gram` reports;
      limits,                the limit-theorem experiments;
      convergence            the certified Thm. 8.5 guarantee (L_K, split region) and the local-convergence runs
    dynamics                 model, adjoint, NTK over all parameters, flows
    io                       token files, heads files, real models
    ntk                      the NTK at FixUp, inside in this order: heads, features and the Gram's
                             linear algebra (gram_matrix); its certificate (certificate); the pipeline
                             of gram() (gram_matrix); head counts (heads); Prop. 8 (prop8)
    independence             decision, certified rank, identities, sufficient conditions
    cgf                      CGFs, the empirical law (one sample type), closed-form families
    _validate, _memory       validation where data enter; memory estimates before allocation
    _figures                 saving a figure (written, or one clear error)
    _progress                progress bars (each update a checkpoint of the time budget)
    errors, _budget, _text   exceptions; time budget and cost estimates; report text helpers
    _precision               the one lock around mpmath / python-flint working precision
    verify                   the standalone certificate checker (numpy, mpmath, flint; nothing of ntkcheck)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    # CGFs of token sets
    "cgf_gradient", "cgf_hessian", "cumulants_1d_exact", "joint_cumulants", "log_mgf",
    # the seed's sufficient conditions
    "gap_condition", "vandermonde_condition",
    # the decision engine
    "decide", "Decision", "Verdict",
    # the NTK Gram at FixUp
    "gram", "GramResult", "Heads", "init_heads",
    # an NTK made elsewhere (an empirical NTK: its matrix or its Jacobian)
    "certify_matrix", "certify_jacobian", "MatrixCertificate",
    # screening token data
    "screen", "ScreenReport", "plot_report", "GramReport",
    # errors
    "DomainError", "InputError", "NtkcheckError", "NtkcheckWarning", "PrecisionError",
    # token distributions
    "Dirac", "Empirical", "EmpiricalConvolution", "Family", "Gaussian", "GaussianConvolution",
    "GaussianMixture2", "Laplace", "Translation", "UniformCube",
    # token files
    "load_samples", "load_laws",
    "__version__",
]

# The public names are imported on first use (PEP 562): ``import ntkcheck`` (and so the command
# line's entry point, ``ntkcheck --version``, a Ctrl-C at start-up) costs no numpy, sympy or flint
# import until a name is used. Type checkers read the imports below.
if TYPE_CHECKING:
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

    # what ``ntkcheck gram`` reports (module ``ntkcheck.gram_report``)
    from .gram_report import GramReport as GramReport

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

    # an NTK made elsewhere: its matrix or its Jacobian (modules ``ntkcheck.ntk.certificate.user_matrix``, ``.jacobian``)
    from .ntk.certificate.jacobian import certify_jacobian as certify_jacobian
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

#: public name -> the module that defines it (tests/cli/test_cli_interfaces.py checks it against ``__all__``)
_LAZY: dict[str, str] = {
    "Dirac": ".cgf",
    "Empirical": ".cgf",
    "EmpiricalConvolution": ".cgf",
    "Family": ".cgf",
    "Gaussian": ".cgf",
    "GaussianConvolution": ".cgf",
    "GaussianMixture2": ".cgf",
    "Laplace": ".cgf",
    "Translation": ".cgf",
    "UniformCube": ".cgf",
    "cgf_gradient": ".cgf.core",
    "cgf_hessian": ".cgf.core",
    "cumulants_1d_exact": ".cgf.core",
    "joint_cumulants": ".cgf.core",
    "log_mgf": ".cgf.core",
    "DomainError": ".errors",
    "InputError": ".errors",
    "NtkcheckError": ".errors",
    "NtkcheckWarning": ".errors",
    "PrecisionError": ".errors",
    "gap_condition": ".independence.conditions",
    "vandermonde_condition": ".independence.conditions",
    "decide": ".independence.decision",
    "Decision": ".independence.results",
    "Verdict": ".independence.results",
    "load_laws": ".io.files",
    "load_samples": ".io.files",
    "certify_jacobian": ".ntk.certificate.jacobian",
    "MatrixCertificate": ".ntk.certificate.user_matrix",
    "certify_matrix": ".ntk.certificate.user_matrix",
    "Heads": ".ntk.gram_matrix.features",
    "init_heads": ".ntk.gram_matrix.features",
    "GramResult": ".ntk.gram_matrix.result",
    "gram": ".ntk.gram_matrix.pipeline",
    "ScreenReport": ".screening",
    "plot_report": ".screening",
    "screen": ".screening",
    "GramReport": ".gram_report",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ntkcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

# ``from __future__ import annotations`` binds the name ``annotations`` here: not public
del annotations
