r"""Token sets: i.i.d. from a density (seed 003 Prop. 10), dyadic rational atoms (exact in
float64), a controlled number of atoms shared by every sample (seed 003 condition (34)),
small rationals and rational directions.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ._common import (
    _BOUND,
    _INTS_1_3,
    _INTS_1_4,
    _INTS_2_3,
    _INTS_2_4,
    _INTS_2_5,
    IntOrStrategy,
    _check_scale,
    _ints,
)

__all__ = ["token_sets", "rational_token_sets", "shared_atom_token_sets", "directions", "rationals"]

Density = Literal["normal", "uniform", "laplace"]


# ----------------------------------------------------------------------------- token sets


@st.composite
def _iid_sets(draw: Any, n: SearchStrategy[int], sizes: SearchStrategy[int], dim: SearchStrategy[int],
              scale: float, density: str) -> list[np.ndarray]:
    nn, d = draw(n), draw(dim)
    Ns = [draw(sizes) for _ in range(nn)]
    # One integer seed per example: shrinking changes the draw, never the law, so the
    # sets stay "i.i.d. from a density" (ties have probability zero) while shrinking.
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for N in Ns:
        if density == "normal":
            x = rng.standard_normal((N, d))
        elif density == "uniform":
            x = rng.uniform(-1.0, 1.0, (N, d))
        else:
            x = rng.laplace(0.0, 1.0 / np.sqrt(2.0), (N, d))
        out.append(np.clip(x, -_BOUND, _BOUND) * scale)
    return out


def token_sets(
    *,
    n: IntOrStrategy = _INTS_1_4,
    sizes: IntOrStrategy = _INTS_2_5,
    dim: IntOrStrategy = _INTS_1_3,
    scale: float = 1.0,
    density: Density = "normal",
) -> SearchStrategy[list[np.ndarray]]:
    r"""Lists of ``n`` token sets, tokens i.i.d. from a law with a density.

    Parameters
    ----------
    n, sizes, dim : int or strategy of ints
        Number of samples, tokens per sample (drawn per sample: ragged sizes), dimension.
    scale : float
        Standard deviation of each coordinate (``"normal"``), half-width (``"uniform"``)
        or Laplace standard deviation; coordinates are clipped at ``8 * scale``.
    density : {"normal", "uniform", "laplace"}

    Returns
    -------
    strategy of list of (N_i, d) float64 arrays
        With probability one all atoms and all projected gaps are distinct, which is
        the situation of seed 003 Prop. 10.
    """
    if density not in ("normal", "uniform", "laplace"):
        raise ValueError(f"density: expected 'normal', 'uniform' or 'laplace', got {density!r}")
    return _iid_sets(_ints(n, "n"), _ints(sizes, "sizes"), _ints(dim, "dim"), _check_scale(scale), density)


def rationals(*, max_numerator: int = 16, denominators: Sequence[int] = (1, 2, 4, 8),
              nonzero: bool = False) -> SearchStrategy[Fraction]:
    """Small rationals ``p/q`` with ``|p| <= max_numerator`` and ``q`` from ``denominators``."""
    if max_numerator < 1 or not denominators or any(int(q) < 1 for q in denominators):
        raise ValueError(f"rationals: need max_numerator >= 1 and positive denominators, got {max_numerator}, {denominators}")
    lo = -max_numerator
    frac = st.builds(Fraction, st.integers(lo, max_numerator), st.sampled_from([int(q) for q in denominators]))
    return frac.filter(lambda f: f != 0) if nonzero else frac


@st.composite
def _rational_sets(draw: Any, n: SearchStrategy[int], sizes: SearchStrategy[int], dim: SearchStrategy[int],
                   max_numerator: int, denominator: int, distinct: bool) -> list[np.ndarray]:
    nn, d = draw(n), draw(dim)
    out = []
    for _ in range(nn):
        N = draw(sizes)
        cell = st.tuples(*[st.integers(-max_numerator, max_numerator)] * d)
        rows = draw(st.lists(cell, min_size=N, max_size=N, unique=distinct))
        out.append(np.asarray(rows, dtype=np.float64).reshape(N, d) / denominator)
    return out


def rational_token_sets(
    *,
    n: IntOrStrategy = _INTS_1_4,
    sizes: IntOrStrategy = _INTS_2_4,
    dim: IntOrStrategy = _INTS_1_3,
    max_numerator: int = 8,
    denominator: int = 4,
    distinct: bool = True,
) -> SearchStrategy[list[np.ndarray]]:
    """Token sets whose coordinates are ``k / denominator`` with ``|k| <= max_numerator``.

    With a power-of-two ``denominator`` every coordinate is exact in float64, so
    exact engines decide the numbers as written. Coincidences (shared atoms, repeated
    gaps) are frequent, which is what such sets are for. ``distinct=True`` keeps the
    atoms of each sample pairwise distinct.
    """
    if denominator < 1 or max_numerator < 1:
        raise ValueError(f"need denominator >= 1 and max_numerator >= 1, got {denominator}, {max_numerator}")
    return _rational_sets(_ints(n, "n"), _ints(sizes, "sizes"), _ints(dim, "dim"), max_numerator, denominator, distinct)


@st.composite
def _shared_sets(draw: Any, n: SearchStrategy[int], own: SearchStrategy[int], dim: SearchStrategy[int],
                 shared: SearchStrategy[int], scale: float) -> tuple[list[np.ndarray], np.ndarray]:
    nn, d, k = draw(n), draw(dim), draw(shared)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    common = np.clip(rng.standard_normal((k, d)), -_BOUND, _BOUND) * scale
    out = []
    for _ in range(nn):
        m = draw(own)
        x = np.clip(rng.standard_normal((m, d)), -_BOUND, _BOUND) * scale
        out.append(np.concatenate([common, x], axis=0))
    return out, common


def shared_atom_token_sets(
    *,
    n: IntOrStrategy = _INTS_2_3,
    own: IntOrStrategy = _INTS_1_3,
    dim: IntOrStrategy = _INTS_1_3,
    shared: IntOrStrategy = 1,
    scale: float = 1.0,
) -> SearchStrategy[tuple[list[np.ndarray], np.ndarray]]:
    """``n`` token sets sharing exactly ``shared`` atoms (a.s.), plus ``own`` i.i.d. atoms each.

    Returns ``(samples, common)`` with ``common`` the ``(shared, d)`` array of shared
    atoms (they come first in every sample). ``shared = 0`` gives disjoint supports.
    """
    sh = _ints(shared, "shared", lo=0)
    own_s = _ints(own, "own", lo=0)
    return _shared_sets(_ints(n, "n"), own_s, _ints(dim, "dim"), sh, _check_scale(scale)).filter(
        lambda r: all(s.shape[0] >= 1 for s in r[0]))


def directions(dim: IntOrStrategy, *, max_numerator: int = 8) -> SearchStrategy[tuple[Fraction, ...]]:
    """Non-zero directions ``w`` in :math:`\\mathbb Q^d` with small integer entries (exact, not normalised)."""
    d = _ints(dim, "dim")
    return d.flatmap(lambda k: st.tuples(*[st.builds(Fraction, st.integers(-max_numerator, max_numerator))] * k)
                     .filter(lambda w: any(v != 0 for v in w)))
