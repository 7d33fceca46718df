"""Memory and range of the NTK Gram before it is formed.

* The heads ``Q`` (H, d, d) and ``b`` (H, d) take ``8 H d (d + 1)`` bytes, twice while they
  are drawn and validated.
* The Gram of ``M`` distinct atoms (:func:`ntkcheck.ntk.gram_matrix.pipeline.gram`): up to ``M = 4096``
  the features ``F`` (M, H d), ``F F^T``, ``eigvalsh``'s copy and the certificate's few
  ``M x M`` work arrays, ``8 M (H d + 6 M)`` bytes; beyond, the Gram and its Cholesky factor
  accumulated over head blocks, ``8 (3 M^2 + max(2^25, 256 M))`` bytes.
* Every entry of ``F F^T`` is a mean over heads of products of convex combinations of the
  atoms (times masses at most 1): at most ``R^2`` with ``R`` the largest token norm, so
  ``R^2`` beyond ``1e300`` would overflow float64 (``inf``, then ``NaN`` eigenvalues) and is
  refused with the bound instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..._memory import require_memory
from ...cgf import Empirical
from ...errors import InputError

__all__ = ["heads_bytes", "gram_bytes", "require_heads", "require_gram", "require_drawn_gram", "check_gram_range",
           "GRAM_LIMIT", "MAX_EIGENVALUES"]

#: largest Gram entry bound accepted (room below float64's 1.8e308 for the sums of a matmul)
GRAM_LIMIT = 1e300

#: full spectrum returned (and the Gram kept) up to this many distinct atoms (rows of the Gram)
MAX_EIGENVALUES = 4096


def heads_bytes(H: int, d: int) -> int:
    """Bytes of drawing ``H`` heads in dimension ``d`` (the arrays and their validated copies)."""
    return 2 * 8 * int(H) * int(d) * (int(d) + 1)


def gram_bytes(M: int, H: int, d: int) -> int:
    """Peak bytes of the Gram of ``M`` atoms with ``H`` heads in dimension ``d`` (module docstring)."""
    M, H, d = int(M), int(H), int(d)
    if M <= MAX_EIGENVALUES:
        return 8 * M * (H * d + 6 * M)
    return 8 * (3 * M * M + max(1 << 25, 256 * M))


def require_heads(H: int, d: int) -> None:
    """Refuse ``H`` heads that would not fit in memory."""
    require_memory(heads_bytes(H, d), f"{H} heads in d = {d} (Q: (H, d, d))", "the number of heads (--heads)")


def require_gram(M: int, H: int, d: int) -> None:
    """Refuse a Gram that would not fit in memory."""
    require_memory(gram_bytes(M, H, d), f"the NTK Gram of M = {M} distinct atoms with H = {H} heads in d = {d}",
                   "the number of heads (--heads) or of samples")


def require_drawn_gram(laws: Sequence[Empirical], heads: object) -> None:
    """Before ``heads`` (a count) are drawn for ``laws``: refuse when the heads and the Gram together
    would not fit (a count that is not a positive integer is left to the validation)."""
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer)) or heads < 1:
        return
    M, d = sum(law.n_atoms for law in laws), laws[0].dim
    require_memory(heads_bytes(heads, d) + gram_bytes(M, heads, d),
                   f"{heads} heads in d = {d} and the NTK Gram of M = {M} distinct atoms",
                   "the number of heads (--heads) or of samples")


def check_gram_range(laws: Sequence[Empirical]) -> None:
    """Refuse tokens whose Gram entries (bounded by ``R^2``) could overflow float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        R = max(float(np.max(np.abs(law.atoms))) for law in laws) * math.sqrt(laws[0].dim)
        bound = R * R
    if not bound <= GRAM_LIMIT:
        raise InputError(f"token norms up to {R:.1e}: the NTK Gram's entries (up to R^2) are beyond float64; "
                         f"rescale the tokens below norm {math.sqrt(GRAM_LIMIT):.0e}")
