"""Tests of ntkcheck.ntk.heads.tail_bounds: the inversions of Bernstein's and Chernoff's bounds against
mpmath at 50 digits, the second-moment bound against a direct evaluation, the sizing inversions against
the bounds they invert, and the union bound over rounds."""

from __future__ import annotations

import math

import mpmath
import pytest

from ntkcheck.ntk.heads import tail_bounds as steps


@pytest.mark.parametrize(("c", "L", "H", "t"), [(0.09, 1.0, 2000, 3.0), (1e-3, 36.0, 10**6, 15.0),
                                                 (5.0, 2.0, 100, 0.5), (1e-12, 1.0, 10**9, 20.0)])
def test_bernstein_lower_is_the_root_of_the_deviation_equation(c, L, H, t):
    """lambda = bernstein_lower(c) solves lambda + sqrt(2 L lambda t / H) + L t / (3H) = c (checked at 50
    digits, relative 1e-10: the float64 evaluation deflates by 1e-12 and rounds a few ulps)."""
    lam = steps.bernstein_lower(c, L, H, t)
    with mpmath.workdps(50):
        lhs = mpmath.mpf(lam) + mpmath.sqrt(2 * mpmath.mpf(L) * lam * t / H) + mpmath.mpf(L) * t / (3 * H)
        if lam == 0:
            assert lhs >= c  # no root: the deviation term alone reaches c
        else:
            assert lhs <= c  # a lower bound: never above the root
            assert float(abs(lhs - c) / c) < 1e-10


def test_bernstein_lower_is_zero_below_the_threshold():
    """No positive lower bound when c <= L t / (3H): the deviation term alone reaches c."""
    assert steps.bernstein_lower(1.0 / 3.0 - 1e-12, 1.0, 1, 1.0) == 0.0
    assert steps.bernstein_lower(1.0, 1.0, 1, 1.0) > 0.0


@pytest.mark.parametrize(("g", "L", "H", "t"), [(0.09, 1.0, 2000, 9.0), (1e-3, 36.0, 10**6, 20.0),
                                                 (0.0, 2.0, 100, 5.0), (3.0, 2.0, 10, 1.0), (1.0, 1.0, 10**12, 1.0)])
def test_chernoff_upper_solves_the_chernoff_exponent(g, L, H, t):
    """U = chernoff_upper(g) solves (H/L)(U - g - g log(U/g)) = t (mpmath findroot at 50 digits, relative
    1e-10), and is L t / H when g = 0 (the tail M exp(-H lambda / L) of a singular draw)."""
    U = steps.chernoff_upper(g, L, H, t)
    with mpmath.workdps(50):
        if g == 0:
            ref = mpmath.mpf(L) * t / H
        else:
            lo, hi = mpmath.mpf(g), mpmath.mpf(g) + 10 * mpmath.mpf(L) * t / H + 10
            for _ in range(400):  # bisection of the increasing (H/L)(x - g - g log(x/g)) - t on [g, hi]
                mid = (lo + hi) / 2
                if (H / mpmath.mpf(L)) * (mid - g - g * mpmath.log(mid / g)) <= t:
                    lo = mid
                else:
                    hi = mid
            ref = hi
        assert U >= ref * (1 - mpmath.mpf(10) ** -40)  # an upper bound: never below the root
        assert float((U - ref) / ref) < 1e-10


def test_round_deltas_sum_below_delta():
    """delta_j = delta / ((j+1)(j+2)) telescopes: any number of rounds spends less than delta."""
    assert math.fsum(steps.round_delta(1e-6, j) for j in range(10**5)) < 1e-6




@pytest.mark.parametrize(("z", "w", "L", "H", "t"), [(1e-3, 2e-6, 2.0, 10**5, 15.0), (0.09, 0.02, 1.0, 2000, 3.0)])
def test_second_moment_upper_solves_its_two_deviation_inequalities(z, w, L, H, t):
    """U = second_moment_upper(z, w) is z + m sqrt(2t/H) with m the root of m^2 - L sqrt(2t/H) m - w = 0
    (mpmath at 50 digits; the float value is not below it)."""
    U = steps.second_moment_upper(z, w, L, H, t)
    with mpmath.workdps(50):
        a = L * mpmath.sqrt(2 * mpmath.mpf(t) / H)
        m = mpmath.findroot(lambda x: x * x - a * x - w, (a + mpmath.sqrt(a * a + 4 * w)) / 2)
        ref = z + m * mpmath.sqrt(2 * mpmath.mpf(t) / H)
        assert U >= ref and float((U - ref) / ref) < 1e-10


@pytest.mark.parametrize("ratio", [0.5, 0.75])
def test_heads_for_lower_inverts_bernstein_lower(ratio):
    """At the head count heads_for_lower(ratio) L t / lambda, bernstein_lower(lambda) = ratio lambda."""
    L, t, lam = 3.0, 12.0, 1e-3
    H = heads_f = steps.heads_for_lower(ratio, L, t) * L * t / lam
    assert heads_f > 0
    np_ratio = steps.bernstein_lower(lam, L, H, t) / lam  # H as a float: the formula is continuous in H
    assert abs(np_ratio - ratio) < 1e-9


@pytest.mark.parametrize("ratio", [2.0, 1.25])
def test_heads_for_upper_inverts_chernoff_upper(ratio):
    """At heads_for_upper(ratio) L t / g heads, chernoff_upper(g) = ratio g."""
    L, t, g = 3.0, 12.0, 1e-3
    H = steps.heads_for_upper(ratio) * L * t / g
    assert abs(steps.chernoff_upper(g, L, H, t) / g - ratio) < 1e-8


@pytest.mark.parametrize("ratio", [2.0, 1.25])
def test_heads_for_second_moment_inverts_second_moment_upper(ratio):
    """At heads_for_second_moment(ratio) heads, second_moment_upper(z, w) = ratio z."""
    z, w, L, t = 1e-3, 3e-6, 2.0, 15.0
    H = steps.heads_for_second_moment(ratio, z, w, L, t)
    assert abs(steps.second_moment_upper(z, w, L, H, t) / z - ratio) < 1e-8
