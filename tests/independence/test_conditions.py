"""Tests of the seed's sufficient conditions (ntkcheck.independence.conditions)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import Laplace, UniformCube
from ntkcheck.errors import InputError
from ntkcheck.independence.conditions import gap_condition, vandermonde_condition
from ntkcheck.independence.decision import decide
from ntkcheck.independence.results import Verdict


@given(st.integers(2, 8), st.integers(2, 6), st.integers(0, 2**31 - 1))
@settings(max_examples=25)
def test_gap_condition_holds_almost_surely(n, N, seed):
    """Seed 003 Prop. 10: for i.i.d. tokens from a density the gaps are distinct a.s., so (35) holds."""
    x = list(np.random.default_rng(seed).normal(size=(n, N, 2)))
    g = gap_condition(x, [3, -7])
    assert g.holds


@given(st.integers(0, 2**31 - 1))
@settings(max_examples=15)
def test_gap_condition_never_contradicts_exact_rank(seed):
    """Prop. 9 is sufficient: whenever it holds, the exact rank route agrees (independent)."""
    rng = np.random.default_rng(seed)
    x = [rng.integers(-4, 5, size=(3, 1)).astype(float) for _ in range(3)]
    g = gap_condition(x, [1])
    if g.holds:
        assert decide(x, "strong", direction=[1], method="exact").verdict is Verdict.INDEPENDENT


def test_remark5_product_fails_gap_condition():
    """Remark 5: distinct atoms are not enough; the product example fails (35) and is dependent."""
    p = np.array([[0.0], [1.0]])
    q = np.array([[0.0], [3.0]])
    prod = np.array([[a + b] for a in (0.0, 1.0) for b in (0.0, 3.0)])
    g = gap_condition([p, q, prod], [1])
    assert not g.holds
    assert decide([p, q, prod], "strong", direction=[1]).verdict is Verdict.DEPENDENT


def test_single_atom_sample_fails():
    g = gap_condition([np.array([[1.0, 2.0]]), np.array([[0.0, 0.0], [1.0, 1.0]])], [1, 1])
    assert not g.holds and "single distinct" in g.reason


def test_gap_bad_direction():
    with pytest.raises(InputError):
        gap_condition([np.eye(2)], [0, 0])


def test_vandermonde_uniform_and_laplace():
    """Seed 003 Prop. 11 / Ex. 3, 4: distinct radii (lambda = r^2) or distinct s = w^T S w certify."""
    v = vandermonde_condition([UniformCube(r, 2) for r in ("1", "2", "3")], [1, 1])
    assert v.holds and v.lambdas == (1, 4, 9)
    same = vandermonde_condition([UniformCube("1", 2), UniformCube("1", 2)], [1, 1])
    assert not same.holds
    lap = vandermonde_condition([Laplace([[1, 0], [0, 1]]), Laplace([[2, 0], [0, 1]])], [1, 0])
    assert lap.holds and lap.lambdas == (Fraction(1), Fraction(2))
    mixed = vandermonde_condition([UniformCube("1", 2), Laplace([[1, 0], [0, 1]])], [1, 0])
    assert not mixed.holds


def test_separation_flags_rounding_level_certificates():
    """The relative separation of the certifying gaps / lambdas: exact, then rounded to a float
    (0.0 below the float range). decide adds a note when it is at rounding level."""
    v = vandermonde_condition([UniformCube(1, 1), UniformCube(2, 1)], [1])
    assert v.separation == 0.75  # lambdas 1, 4: (4 - 1) / 4
    tiny = vandermonde_condition([UniformCube(1, 1), UniformCube(1 + Fraction(1, 10**1300), 1)], [1])
    assert tiny.holds and tiny.separation == 0.0
    dec = decide([UniformCube(1, 1), UniformCube(1 + Fraction(1, 10**1300), 1)], "strong")
    assert dec.method == "vandermonde" and any("below 1e-300" in n for n in dec.notes)
    g = gap_condition([np.array([[0.0], [1.0]]), np.array([[0.0], [1.0 + 2.0**-52]])], [1])
    assert g.holds and g.separation == 2.0**-52 / (1 + 2.0**-52)
