"""The distinct atoms of a sample found two ways: a dict of the rows' bytes (samples of at most
``_SMALL_SAMPLE`` tokens, the common case in screening) and ``np.unique`` on a void view (longer
samples). Both must give the same first indices, in order of first appearance, and the same slots;
checked against each other and against a plain-Python reference (tuples of exact values) on samples
with repeated rows, signed zeros and long doubles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ntkcheck.cgf.empirical as emp


def _reference(rows: list[tuple]) -> tuple[list[int], list[int]]:
    """First index of each distinct row (order of first appearance) and each row's slot: by tuples."""
    slot: dict[tuple, int] = {}
    slots = [slot.setdefault(r, len(slot)) for r in rows]
    first = [slots.index(s) for s in range(len(slot))]
    return first, slots


@given(n=st.integers(1, 40), d=st.integers(1, 4), pool=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_dict_and_unique_paths_agree_with_the_reference(n, d, pool, seed):
    rng = np.random.default_rng(seed)
    values = rng.choice(np.array([0.0, -0.0, 1.0, 0.1, -2.5, 1e-300]), size=(pool, d))
    x = values[rng.integers(0, pool, size=n)] + 0.0  # repeats; + 0.0 as Empirical does (-0.0 is 0.0)
    ref_first, ref_slot = _reference([tuple(r) for r in x.tolist()])
    old = emp._SMALL_SAMPLE
    try:
        for small in (0, 64):  # 0: np.unique for every size; 64: the dict path here (n <= 40)
            emp._SMALL_SAMPLE = small
            first, slot = emp._distinct_rows(x, None)
            assert first.tolist() == ref_first and slot.tolist() == ref_slot, small
    finally:
        emp._SMALL_SAMPLE = old


@pytest.mark.parametrize("small", [0, 64])
def test_long_double_rows_are_compared_exactly_on_both_paths(small, monkeypatch):
    """Two long doubles that share a float64 view are different atoms on both paths."""
    if np.finfo(np.longdouble).nmant <= 52:
        pytest.skip("long double is float64 on this platform")
    monkeypatch.setattr(emp, "_SMALL_SAMPLE", small)
    a = np.longdouble(1) + np.longdouble(2) ** -60
    ex = np.array([[a], [np.longdouble(1)], [a]], dtype=np.longdouble)
    first, slot = emp._distinct_rows(ex.astype(np.float64), ex)
    assert first.tolist() == [0, 1] and slot.tolist() == [0, 1, 0]


def test_uniform_masses_are_the_nearest_doubles_of_the_exact_ones():
    """The float masses of a uniform sample (count / N in float64) equal float(Fraction(count, N))."""
    rng = np.random.default_rng(3)
    for n in (3, 7, 10, 49):
        x = rng.integers(0, 3, size=(n, 1)).astype(float)
        law = emp.Empirical(x)
        assert law.masses.tolist() == [float(w) for w in law.weights]
