"""The attention NTK at FixUp initialisation (V = 0 on every head), in four subpackages by concept.

* :mod:`~ntkcheck.ntk.gram_matrix`: the heads and their attention features (``features``), the
  Gram on the distinct atoms of each sample and the pipeline of :func:`gram` that a reader walks
  once, top-down: the samples and heads validated into one problem (``problem``), the features and
  the Gram accumulated over head blocks (``accumulate``), its spectrum (``spectrum``, Lanczos steps
  in ``extremal`` on the Cholesky work array of ``cholesky``), the certificate, the result
  (``result``);
* :mod:`~ntkcheck.ntk.certificate`: what proves a bound on ``lambda_min`` (Arb, a preconditioned
  float64 bound, or a verified Cholesky, each rigorous): the rounding radii (``rounding``), the
  values the user gave (``inputs``), the routes (``routes``, ``arb_fast``), the cascade that
  certifies :func:`gram` (``cascade``), a useful rate (``useful_rate``), matrices made elsewhere
  (``matrix_input``, ``exact_matrix``, ``user_matrix``) and Jacobians (``jacobian``);
* :mod:`~ntkcheck.ntk.heads`: the rank of the Gram of ``H`` heads and the kernel it predicts
  (``rank``), the head count of a screening (``search``), the certificate of the head law's NTK,
  ``H`` = infinity (``law``, its rounds in ``rounds``, ``accumulate``, ``preconditioner``,
  ``tail_bounds``, ``head_range``, ``span_reduction``, ``draw_rounding``);
* :mod:`~ntkcheck.ntk.prop8`: the named dependence structures of a data set (``relations``, exact
  helpers in ``exact``, ``structure``), the kernel vector they predict (``prediction``), Prop. 8's
  hypothesis on the head law (``hypotheses``) and the cross-check of the Gram against the CGF verdict, seed 003 Prop. 8 (``crosscheck``).

Inside ``ntk`` imports point down this order (``tests/test_layout.py``): the Gram's inputs and
linear algebra (``gram_matrix``: ``features``, ``_sizes``, ``problem``, ``cholesky``, ``extremal``,
``accumulate``), then ``certificate``, then the pipeline (``gram_matrix``: ``spectrum``, ``result``,
``pipeline``), then ``heads``, then ``prop8``, and the matrices made elsewhere (``certificate``:
``matrix_input``, ``exact_matrix``, ``user_matrix``, ``jacobian``) on top.

May import: :mod:`ntkcheck.independence`, :mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

# certificate
from .certificate import GramCertificate as GramCertificate
from .certificate import PositivityCertificate as PositivityCertificate
from .certificate import certify_gram_enclosure as certify_gram_enclosure
from .certificate import certify_lambda_min as certify_lambda_min
from .certificate import certify_positive as certify_positive
from .certificate import gram_matrix_arb as gram_matrix_arb

# gram_matrix
from .gram_matrix import POSITIVE_REL as POSITIVE_REL
from .gram_matrix import RESOLUTION_EIGH as RESOLUTION_EIGH
from .gram_matrix import RESOLUTION_SVD as RESOLUTION_SVD
from .gram_matrix import GramResult as GramResult

# features
from .gram_matrix import Heads as Heads
from .gram_matrix import SampleSize as SampleSize
from .gram_matrix import attention_features as attention_features
from .gram_matrix import gram as gram
from .gram_matrix import init_heads as init_heads
from .gram_matrix import merge_note as merge_note

# rank of the Gram of H heads
from .heads import AtomSpan as AtomSpan

# head count of a screening
from .heads import HeadAttempt as HeadAttempt

# head law (H = infinity)
from .heads import HeadLawBound as HeadLawBound
from .heads import HeadLawRound as HeadLawRound
from .heads import HeadSearch as HeadSearch
from .heads import HeadsKernel as HeadsKernel
from .heads import Saturation as Saturation
from .heads import atom_span as atom_span
from .heads import default_head_count as default_head_count
from .heads import head_law_bound as head_law_bound
from .heads import heads_kernel as heads_kernel
from .heads import saturation as saturation
from .heads import search_heads as search_heads

# crosscheck
from .prop8 import KERNEL_RTOL as KERNEL_RTOL
from .prop8 import CrosscheckResult as CrosscheckResult

# structure
from .prop8 import DependenceStructure as DependenceStructure
from .prop8 import KernelComparison as KernelComparison
from .prop8 import KernelPrediction as KernelPrediction

# relations
from .prop8 import Relation as Relation
from .prop8 import dependence_structure as dependence_structure
from .prop8 import find_relations as find_relations
from .prop8 import kernel_dimension as kernel_dimension
from .prop8 import kernel_residual as kernel_residual
from .prop8 import predicted_kernel_vector as predicted_kernel_vector
from .prop8 import subspace_residual as subspace_residual
from .prop8.crosscheck import crosscheck as crosscheck

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
