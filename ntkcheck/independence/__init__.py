"""The independence engine: are the CGFs linearly independent modulo affine functions?

What lives here: the decision (:func:`decide`, module ``decision``), what it returns (the
verdict, its certificates and the evidence of an ``inconclusive``: ``results``), the
truncations' coefficient rows and null vectors (private ``_rows``) and the full-rank
certificate of one truncation (private ``_full_rank``), certified rank (``rank``: exact
mod-p minors and Arb ball bounds), exact identities that prove dependence
(``identities``; the exponential-polynomial forms they compare: ``exp_gauss``), the
seed's sufficient conditions (``conditions``: gap, Vandermonde) and the seed's examples
(``examples``).

May import: :mod:`ntkcheck.cgf` and the base modules.
"""

from __future__ import annotations

# results
from .results import Verdict as Verdict
from .results import Decision as Decision
from .results import Structural as Structural
from .results import StrongFromWeak as StrongFromWeak
from .results import ViaStrong as ViaStrong
from .results import Inconclusive as Inconclusive
from .results import NullVectorEvidence as NullVectorEvidence
from .results import VerifiedNullVector as VerifiedNullVector
from .results import TruncationNullSpace as TruncationNullSpace

# decision
from .decision import decide as decide
from .decision import as_measures as as_measures
from .decision import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT

# rank
from .rank import PRIMES as PRIMES
from .rank import ExactMinor as ExactMinor
from .rank import BallBound as BallBound
from .rank import Scaled as Scaled
from .rank import scale_rows as scale_rows
from .rank import float_screen as float_screen
from .rank import choose_columns as choose_columns
from .rank import ball_full_rank as ball_full_rank
from .rank import ball_attempt as ball_attempt
from .rank import modp_full_rank as modp_full_rank
from .rank import exact_nullspace as exact_nullspace
from .rank import qstr as qstr

# identities
from .identities import IdentityProof as IdentityProof
from .identities import product_identity as product_identity
from .identities import product_identity_decides as product_identity_decides
from .identities import term_identity as term_identity
from .identities import symbolic_identity as symbolic_identity
from .identities import numerically_affine as numerically_affine
from .identities import prove_dependence as prove_dependence

# exp_gauss
from .exp_gauss import ExpGaussForm as ExpGaussForm
from .exp_gauss import exp_gauss_form as exp_gauss_form

# conditions
from .conditions import GapCondition as GapCondition
from .conditions import gap_condition as gap_condition
from .conditions import VandermondeCondition as VandermondeCondition
from .conditions import vandermonde_condition as vandermonde_condition

# examples
from .examples import SeedExample as SeedExample
from .examples import seed_examples as seed_examples

__all__ = [
    'Verdict',
    'Decision',
    'Structural',
    'StrongFromWeak',
    'ViaStrong',
    'Inconclusive',
    'NullVectorEvidence',
    'VerifiedNullVector',
    'TruncationNullSpace',
    'decide',
    'as_measures',
    'DEFAULT_TIMEOUT',
    'PRIMES',
    'ExactMinor',
    'BallBound',
    'Scaled',
    'scale_rows',
    'float_screen',
    'choose_columns',
    'ball_full_rank',
    'ball_attempt',
    'modp_full_rank',
    'exact_nullspace',
    'qstr',
    'IdentityProof',
    'product_identity',
    'product_identity_decides',
    'term_identity',
    'symbolic_identity',
    'numerically_affine',
    'prove_dependence',
    'ExpGaussForm',
    'exp_gauss_form',
    'GapCondition',
    'gap_condition',
    'VandermondeCondition',
    'vandermonde_condition',
    'SeedExample',
    'seed_examples',
]
