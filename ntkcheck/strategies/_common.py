"""Shared argument checks, default sizes and the coordinate bound of the strategies."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

IntOrStrategy = int | SearchStrategy[int]

# default sizes (module-level so that the defaults are shared, not rebuilt per call)
_INTS_1_16 = st.integers(1, 16)
_INTS_1_2 = st.integers(1, 2)
_INTS_1_3 = st.integers(1, 3)
_INTS_1_4 = st.integers(1, 4)
_INTS_2_3 = st.integers(2, 3)
_INTS_2_4 = st.integers(2, 4)
_INTS_2_5 = st.integers(2, 5)

#: largest |coordinate| any strategy here produces before scaling: keeps exp(<a, x>) and
#: the cumulant recursions far from overflow at the default scales.
_BOUND = 8.0


def _ints(x: IntOrStrategy, name: str, lo: int = 1) -> SearchStrategy[int]:
    if isinstance(x, SearchStrategy):
        return x
    if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or int(x) < lo:
        raise ValueError(f"{name}: expected an int >= {lo} or a strategy of ints, got {x!r}")
    return st.just(int(x))


def _check_scale(scale: float) -> float:
    s = float(scale)
    if not np.isfinite(s) or s <= 0 or s > 1e3:
        raise ValueError(f"scale: expected a finite number in (0, 1000], got {scale!r}")
    return s
