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

# conditions
from .conditions import GapCondition as GapCondition
from .conditions import VandermondeCondition as VandermondeCondition
from .conditions import gap_condition as gap_condition
from .conditions import vandermonde_condition as vandermonde_condition
from .decision import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from .decision import as_measures as as_measures

# decision
from .decision import decide as decide

# examples
from .examples import SeedExample as SeedExample
from .examples import seed_examples as seed_examples

# exp_gauss
from .exp_gauss import ExpGaussForm as ExpGaussForm
from .exp_gauss import exp_gauss_form as exp_gauss_form

# identities
from .identities import IdentityProof as IdentityProof
from .identities import numerically_affine as numerically_affine
from .identities import product_identity as product_identity
from .identities import product_identity_decides as product_identity_decides
from .identities import prove_dependence as prove_dependence
from .identities import symbolic_identity as symbolic_identity
from .identities import term_identity as term_identity

# rank
from .rank import PRIMES as PRIMES
from .rank import BallBound as BallBound
from .rank import ExactMinor as ExactMinor
from .rank import Scaled as Scaled
from .rank import ball_attempt as ball_attempt
from .rank import ball_full_rank as ball_full_rank
from .rank import choose_columns as choose_columns
from .rank import exact_nullspace as exact_nullspace
from .rank import float_screen as float_screen
from .rank import modp_full_rank as modp_full_rank
from .rank import qstr as qstr
from .rank import scale_rows as scale_rows
from .results import Decision as Decision
from .results import Inconclusive as Inconclusive
from .results import NullVectorEvidence as NullVectorEvidence
from .results import StrongFromWeak as StrongFromWeak
from .results import Structural as Structural
from .results import TruncationNullSpace as TruncationNullSpace

# results
from .results import Verdict as Verdict
from .results import VerifiedNullVector as VerifiedNullVector
from .results import ViaStrong as ViaStrong

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
