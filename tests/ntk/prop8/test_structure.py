"""Tests of ntkcheck.ntk.prop8.structure: named dependence structures and the kernel dimension they predict."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import Empirical, as_laws
from ntkcheck.ntk.prop8.exact import _exact_mean
from ntkcheck.ntk.prop8.relations import _two_diff, find_relations
from ntkcheck.ntk.prop8.structure import (
    dependence_structure,
    kernel_dimension,
)

_rng = np.random.default_rng(11)
# on the 2^-20 grid, so that translating by small dyadic shifts is exact in float64
A, B, C = (np.round(_rng.standard_normal((4, 3)) * 2**20) / 2**20 for _ in range(3))


def _sentences(samples):
    return [r.sentence for r in find_relations(samples)]


def test_duplicates_and_translates_by_name():
    S = [A, B, A[::-1].copy(), A + 0.5, C]
    rel = find_relations(S)
    assert [r.kind for r in rel] == ["duplicate", "translate"]
    assert rel[0].sentence == "sample 2 is sample 0 (equal laws)"
    assert rel[1].sentence == "sample 3 is sample 0 translated by (0.5, 0.5, 0.5)"
    assert rel[1].shift == (Fraction(1, 2),) * 3
    # c_3 Lambda_3 - Lambda_0 = <s, a>: c and alpha as the identity says
    assert rel[1].c == (-1, 0, 0, 1, 0) and rel[1].alpha == (Fraction(1, 2),) * 3


def test_equal_laws_with_different_multiplicities_are_duplicates():
    """Laws, not token arrays: {x, y} and {x, x, y, y} are the same law; {x, x, y} is not."""
    x = A[:2]
    assert _sentences([x, np.repeat(x, 2, axis=0), np.vstack([x, x[:1]])]) == ["sample 1 is sample 0 (equal laws)"]


def test_rounded_translate_is_not_a_translate():
    """x + 0.1 rounds: the atoms are not exactly a translate, and nothing is claimed."""
    X = np.array([[0.3, 0.7], [1.1, -0.2], [0.9, 0.05]])
    Y = X + 0.1
    exact = all(Fraction(float(y)) - Fraction(float(x)) == Fraction(float(Y[0, k] - X[0, k]))
                for xr, yr in zip(X, Y, strict=True) for k, (x, y) in enumerate(zip(xr, yr, strict=True)))
    assert not exact  # the premise: float rounding broke the translation
    assert find_relations([X, Y]) == ()


def test_products_with_and_without_shift():
    x = np.array([[0.0, 0.0], [1.0, 0.25]])
    y = np.array([[0.0, 0.0], [-0.5, 1.0]])
    z = (x[:, None, :] + y[None, :, :]).reshape(-1, 2)
    assert _sentences([x, y, z]) == ["sample 2 is the law of X+Y, X ~ sample 0, Y ~ sample 1 independent"]
    assert _sentences([x, y, z + [0.25, -2.0]]) == [
        "sample 2 is the law of X+Y, X ~ sample 0, Y ~ sample 1 independent, translated by (0.25, -2)"]
    # X + X' with X' an independent copy of X: the law of {0, 2a} with masses 1/4, 1/4 and a at 1/2
    zz = np.array([[0.0, 0.0], [1.0, 0.25], [1.0, 0.25], [2.0, 0.5]])
    rel = find_relations([x, zz])
    assert [r.kind for r in rel] == ["product"] and rel[0].c == (-2, 1)
    # the same atoms with other masses are not the product
    assert find_relations([x, y, z[[0, 1, 2, 3, 3]]]) == ()


def test_diracs():
    S = [np.array([[1.0, 0.0]]), A[:, :2], np.array([[0.0, 1.0]]), np.array([[1.0, 2.0]])]
    st = dependence_structure(S)
    assert [r.kind for r in st.relations] == ["dirac"] * 3
    assert st.dirac_relations == 1
    assert st.lines() == ["samples [0, 2, 3] are single Diracs (linear CGFs); 1 independent Dirac relation "
                          "sum_i c_i x_i = 0 among them"]


# Closed forms of theory/ntk-prop8.md, "The dimension of the kernel" (derived by hand there):
@pytest.mark.parametrize(
    "samples, expected",
    [
        ([A, A.copy()], 4),  # duplicate of m = 4 atoms: m
        ([A, A.copy(), A.copy(), B], 8),  # three copies: (3 - 1) m
        ([A, A + (A[0] - A[1])], 0),  # translate sharing one atom: max(0, 1 - 1)
        (lambda: [np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([[1.0], [2.0], [3.0], [4.0]])], 2),  # 3 shared: 2
        ([np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]]),
          np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])], 1),  # product: atoms common to all three
        ([np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([[1.0, 2.0]]), np.array([[2.0, 2.0]])], 2),  # n - rank
        ([np.array([[0.0, 0.0]]), B[:, :2]], 1),  # a lone Dirac at the origin: its feature is 0
        ([np.array([[0.5, 0.0, 0.0]]), B], 0),  # a lone Dirac elsewhere
        ([A, A + 3.0], 0),  # disjoint translate
    ],
)
def test_kernel_dimension_closed_forms(samples, expected):
    S = samples() if callable(samples) else samples
    assert kernel_dimension(S, find_relations(S)) == expected


def test_exact_only_when_certified():
    S = [A, B, A.copy()]
    lower = dependence_structure(S, certify=False)
    assert not lower.exact and "lower bound" in lower.certificate and lower.predicted_kernel == 4
    full = dependence_structure(S)
    assert full.exact and full.predicted_kernel == 4 and len(full.decisions) == 1
    # the decision was taken on the samples outside the pivot (2): 0 and 1
    assert full.decisions[0].n == 2 and full.decisions[0].independent
    assert full.kernel_basis.shape == (12, 4)
    # the basis vectors are q = W^1/2 p with p_0 = f, p_2 = -f on the shared atoms: rows of
    # sample 1 vanish, and the rows of samples 0 and 2 cancel
    q = full.kernel_basis
    assert np.all(q[4:8] == 0)
    np.testing.assert_allclose(q[:4], -q[8:], rtol=0, atol=0)


def test_decide_null_vector_is_kept_when_unnamed():
    """A dependency that is not a named structure (the decide engine's null vector) enters D'
    with its exact linear part, and the count uses it."""
    from ntkcheck.independence.decision import decide

    x = np.array([[0.0], [1.0]])
    y = np.array([[0.0], [2.0]])
    # X + Y with X ~ {0, 1} and Y ~ {0, 2}, written with the sums in another sample: named product
    S = [x, y, np.array([[0.0], [1.0], [2.0], [3.0]])]
    weak = decide(S, property="weak")
    st = dependence_structure(S, weak=weak)
    assert [r.kind for r in st.relations] == ["product"] and st.exact
    assert st.predicted_kernel == 1  # the atom 0 is common to all three


@settings(max_examples=50)
@given(a=st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e300, max_value=1e300),
       b=st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e300, max_value=1e300))
def test_two_diff_is_exact(a, b):
    """hi + lo = a - b exactly (error-free transformation), checked in rational arithmetic."""
    hi, lo = _two_diff(np.array([a]), np.array([b]))
    assert Fraction(float(hi[0])) + Fraction(float(lo[0])) == Fraction(a) - Fraction(b)


def test_exact_mean_matches_fractions():
    """Integer-arithmetic means against Fraction sums, over exponents from 1e-300 to 1e200."""
    X = _rng.standard_normal((7, 3)) * np.array([1e-300, 1.0, 1e200])
    X[2] = 0.0
    law = Empirical(np.vstack([X, X[:2]]), list(range(1, 10)))
    ref = tuple(sum((w * Fraction(float(x[k])) for w, x in zip(law.weights, law.atoms, strict=True)), Fraction(0))
                for k in range(3))
    assert _exact_mean(law) == ref


def test_laws_pass_through():
    laws = as_laws([A, B])
    assert find_relations(laws) == () and dependence_structure(laws).predicted_kernel == 0


def test_translates_far_from_the_origin_are_found():
    """Shifts of 2^30 and 2^33: the float fingerprints lose digits to cancellation, the
    candidates must still reach the exact comparison."""
    X = np.round(np.random.default_rng(0).standard_normal((4, 2)) * 2**10) / 2**10
    rel = find_relations([X, X + 2.0**30, X + [2.0**33, -(2.0**31)]])
    assert [r.kind for r in rel] == ["translate", "translate"]
    assert rel[1].shift == (Fraction(2**33), Fraction(-(2**31)))
