"""Seed 003 Prop. 8 checked on a data set: the named dependence structures (``relations``,
``structure``, exact helpers in ``exact``), the kernel vector they predict (``prediction``), and the
cross-check of the Gram against the CGF verdict (``crosscheck``; the function ``crosscheck`` is
exported by :mod:`ntkcheck.ntk`, not here: this face never binds a name of one of its modules).

May import the Gram pipeline and the heads (``gram_matrix``, ``heads``); nothing of ``ntk`` imports it
but ``certificate.user_matrix`` (a matrix made elsewhere, checked against the structure of its samples).
"""

from __future__ import annotations

# the cross-check
from .crosscheck import CrosscheckResult as CrosscheckResult
from .crosscheck import KernelComparison as KernelComparison

# the kernel vector of condition (34)
from .prediction import KERNEL_RTOL as KERNEL_RTOL
from .prediction import KernelPrediction as KernelPrediction
from .prediction import kernel_residual as kernel_residual
from .prediction import predicted_kernel_vector as predicted_kernel_vector
from .prediction import subspace_residual as subspace_residual

# relations and structures
from .relations import Relation as Relation
from .relations import find_relations as find_relations
from .structure import DependenceStructure as DependenceStructure
from .structure import dependence_structure as dependence_structure
from .structure import kernel_dimension as kernel_dimension

__all__ = [
    # the cross-check
    "CrosscheckResult", "KernelComparison",
    # the kernel vector of condition (34)
    "KernelPrediction", "predicted_kernel_vector", "kernel_residual", "subspace_residual", "KERNEL_RTOL",
    # relations and structures
    "Relation", "find_relations", "DependenceStructure", "dependence_structure", "kernel_dimension",
]
