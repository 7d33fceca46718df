"""The attention NTK at FixUp initialisation (V = 0 on every head).

What lives here: heads and attention features (``features``), the Gram matrix on the
distinct atoms of each sample and its spectrum (``gram_matrix``) with its certificate (``certificate``: Arb, a preconditioned float64
bound, or a verified Cholesky, each a rigorous lower bound on ``lambda_min``), the named dependence structures of a data set (``relations``, exact
helpers in ``_exact``) with the Gram kernel they predict (``structure``), and the
cross-check of the Gram against the CGF verdict, seed 003 Prop. 8 (``crosscheck``), the rank
of the Gram of ``H`` heads and the kernel it predicts (``head_rank``), the head count of a
screening (``head_search``), and the certificate of the head law's NTK, ``H`` = infinity
(``head_law``).

May import: :mod:`ntkcheck.independence`, :mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

# certificate
from .certificate.routes import GramCertificate as GramCertificate
from .certificate.routes import PositivityCertificate as PositivityCertificate
from .certificate.routes import certify_gram_enclosure as certify_gram_enclosure
from .certificate.routes import certify_lambda_min as certify_lambda_min
from .certificate.routes import certify_positive as certify_positive
from .certificate.routes import gram_matrix_arb as gram_matrix_arb

# features
from .gram_matrix.features import Heads as Heads
from .gram_matrix.features import attention_features as attention_features
from .gram_matrix.features import init_heads as init_heads
from .gram_matrix.pipeline import POSITIVE_REL as POSITIVE_REL
from .gram_matrix.pipeline import RESOLUTION_EIGH as RESOLUTION_EIGH
from .gram_matrix.pipeline import RESOLUTION_SVD as RESOLUTION_SVD

# gram_matrix
from .gram_matrix.pipeline import GramResult as GramResult
from .gram_matrix.pipeline import SampleSize as SampleSize
from .gram_matrix.pipeline import gram as gram
from .gram_matrix.pipeline import merge_note as merge_note

# head law (H = infinity)
from .heads.law import HeadLawBound as HeadLawBound
from .heads.law import HeadLawRound as HeadLawRound
from .heads.law import head_law_bound as head_law_bound

# rank of the Gram of H heads
from .heads.rank import AtomSpan as AtomSpan
from .heads.rank import HeadsKernel as HeadsKernel
from .heads.rank import Saturation as Saturation
from .heads.rank import atom_span as atom_span
from .heads.rank import default_head_count as default_head_count
from .heads.rank import heads_kernel as heads_kernel
from .heads.rank import saturation as saturation

# head count of a screening
from .heads.search import HeadAttempt as HeadAttempt
from .heads.search import HeadSearch as HeadSearch
from .heads.search import search_heads as search_heads
from .prop8.crosscheck import KERNEL_RTOL as KERNEL_RTOL
from .prop8.crosscheck import CrosscheckResult as CrosscheckResult
from .prop8.crosscheck import KernelComparison as KernelComparison

# crosscheck
from .prop8.crosscheck import KernelPrediction as KernelPrediction
from .prop8.crosscheck import crosscheck as crosscheck
from .prop8.crosscheck import kernel_residual as kernel_residual
from .prop8.crosscheck import predicted_kernel_vector as predicted_kernel_vector
from .prop8.crosscheck import subspace_residual as subspace_residual

# relations
from .prop8.relations import Relation as Relation
from .prop8.relations import find_relations as find_relations

# structure
from .prop8.structure import DependenceStructure as DependenceStructure
from .prop8.structure import dependence_structure as dependence_structure
from .prop8.structure import kernel_dimension as kernel_dimension

__all__ = [
    'Heads',
    'init_heads',
    'attention_features',
    'GramCertificate',
    'gram_matrix_arb',
    'certify_lambda_min',
    'PositivityCertificate',
    'certify_positive',
    'certify_gram_enclosure',
    'GramResult',
    'gram',
    'SampleSize',
    'merge_note',
    'RESOLUTION_EIGH',
    'RESOLUTION_SVD',
    'POSITIVE_REL',
    'KernelPrediction',
    'KernelComparison',
    'CrosscheckResult',
    'predicted_kernel_vector',
    'kernel_residual',
    'subspace_residual',
    'crosscheck',
    'KERNEL_RTOL',
    'Relation',
    'find_relations',
    'DependenceStructure',
    'dependence_structure',
    'kernel_dimension',
    'AtomSpan',
    'atom_span',
    'default_head_count',
    'Saturation',
    'saturation',
    'HeadsKernel',
    'heads_kernel',
    'HeadAttempt',
    'HeadSearch',
    'search_heads',
    'HeadLawRound',
    'HeadLawBound',
    'head_law_bound',
]
