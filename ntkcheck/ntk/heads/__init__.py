"""How many heads, and what the head law says: the rank of the Gram of ``H`` heads (``rank``), the
head search of a screening (``search``), and the certificate of the head law's NTK, ``H`` = infinity
(``law``)."""

from __future__ import annotations

# head law (H = infinity)
from .law import HeadLawBound as HeadLawBound
from .law import HeadLawRound as HeadLawRound
from .law import head_law_bound as head_law_bound

# rank of the Gram of H heads
from .rank import AtomSpan as AtomSpan
from .rank import HeadsKernel as HeadsKernel
from .rank import Saturation as Saturation
from .rank import atom_span as atom_span
from .rank import default_head_count as default_head_count
from .rank import heads_kernel as heads_kernel
from .rank import saturation as saturation

# head count of a screening
from .search import HeadAttempt as HeadAttempt
from .search import HeadSearch as HeadSearch
from .search import search_heads as search_heads

__all__ = [
    # head law (H = infinity)
    "HeadLawRound", "HeadLawBound", "head_law_bound",
    # rank of the Gram of H heads
    "AtomSpan", "atom_span", "default_head_count", "Saturation", "saturation", "HeadsKernel", "heads_kernel",
    # head count of a screening
    "HeadAttempt", "HeadSearch", "search_heads",
]
