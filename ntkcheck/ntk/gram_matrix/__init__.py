"""The NTK Gram at FixUp: the heads and their attention features, the problem validated once, the
Gram accumulated over head blocks, its spectrum, and the pipeline of :func:`gram` that walks them
(``problem`` -> ``accumulate`` (the features, a loop over head blocks) -> ``spectrum`` -> the
certificate of :mod:`ntkcheck.ntk.certificate` -> ``result``).

Two layers live here. Below the certificate (it imports them): ``features``, ``_sizes``, ``problem``,
``cholesky`` (the float64 model and the Cholesky work array), ``extremal`` and ``accumulate``. Above
it: ``spectrum``, ``result`` and ``pipeline``. This face imports the lower layer; the names of the
upper one are loaded on first use (PEP 562), so that importing the certificate, which initialises
this package first, never runs the pipeline that imports the certificate.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# heads and their features
from .features import Heads as Heads
from .features import attention_features as attention_features
from .features import init_heads as init_heads

if TYPE_CHECKING:  # the upper layer, for type checkers
    from .pipeline import certify_result as certify_result
    from .pipeline import gram as gram
    from .problem import SampleSize as SampleSize
    from .problem import merge_note as merge_note
    from .result import GramResult as GramResult
    from .spectrum import POSITIVE_REL as POSITIVE_REL
    from .spectrum import RESOLUTION_EIGH as RESOLUTION_EIGH
    from .spectrum import RESOLUTION_SVD as RESOLUTION_SVD

#: the Gram, its spectrum and its result: name -> module (loaded on first use)
_UPPER = {
    "gram": "pipeline", "certify_result": "pipeline", "GramResult": "result", "SampleSize": "problem",
    "merge_note": "problem", "POSITIVE_REL": "spectrum", "RESOLUTION_EIGH": "spectrum", "RESOLUTION_SVD": "spectrum",
}

__all__ = [
    # heads and their features
    "Heads", "init_heads", "attention_features",
    # the Gram, its spectrum and its result
    "gram", "certify_result", "GramResult", "SampleSize", "merge_note", "POSITIVE_REL", "RESOLUTION_EIGH",
    "RESOLUTION_SVD",
]


def __getattr__(name: str) -> Any:
    if name in _UPPER:
        value = getattr(importlib.import_module(f"{__name__}.{_UPPER[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
