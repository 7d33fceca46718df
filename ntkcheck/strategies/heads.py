r"""Attention heads :math:`(Q_h, b_h)` drawn from an init spec (seed 003 eq. 1, FixUp ``V = 0``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ._common import _INTS_1_3, _INTS_1_16, IntOrStrategy, _check_scale, _ints

__all__ = ["HeadsSpec", "heads"]


# ----------------------------------------------------------------------------- attention heads


@dataclass(frozen=True)
class HeadsSpec:
    """How to initialise ``H`` heads: i.i.d. Gaussian ``Q`` and ``b`` entries with standard
    deviations ``q_scale`` and ``b_scale`` (a law whose support contains an open set, as
    seed 003 Prop. 8 needs)."""

    H: int
    dim: int
    q_scale: float = 1.0
    b_scale: float = 1.0


@st.composite
def _heads(draw: Any, spec: SearchStrategy[HeadsSpec]) -> Any:
    sp_ = draw(spec)
    seed = draw(st.integers(0, 2**32 - 1))
    try:
        from ..ntk.gram_matrix.features import init_heads
    except ImportError:  # pragma: no cover - gram is optional for the strategies
        rng = np.random.default_rng(seed)
        Q = rng.standard_normal((sp_.H, sp_.dim, sp_.dim)) * sp_.q_scale
        b = rng.standard_normal((sp_.H, sp_.dim)) * sp_.b_scale
        return Q, b
    return init_heads(sp_.H, sp_.dim, q_scale=sp_.q_scale, b_scale=sp_.b_scale, seed=seed)


def heads(spec: HeadsSpec | SearchStrategy[HeadsSpec] | None = None, *, H: IntOrStrategy = _INTS_1_16,
          dim: IntOrStrategy = _INTS_1_3, q_scale: float = 1.0, b_scale: float = 1.0) -> SearchStrategy[Any]:
    """Attention heads :math:`(Q_h, b_h)_{h \\le H}` drawn from an init spec (seed 003 eq. 1, FixUp ``V = 0``).

    Pass a :class:`HeadsSpec` (or a strategy of them), or ``H``, ``dim`` and the scales.
    Returns :class:`ntkcheck.ntk.gram_matrix.features.Heads` (``Q`` of shape (H, d, d), ``b`` of shape (H, d)).
    """
    if spec is None:
        qs, bs = _check_scale(q_scale), _check_scale(b_scale)
        spec_s: SearchStrategy[HeadsSpec] = st.builds(HeadsSpec, _ints(H, "H"), _ints(dim, "dim"), st.just(qs), st.just(bs))
    elif isinstance(spec, HeadsSpec):
        spec_s = st.just(spec)
    else:
        spec_s = spec
    return _heads(spec_s)
