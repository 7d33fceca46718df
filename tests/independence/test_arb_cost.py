"""The Arb inverse is estimated before it starts (ntkcheck.independence._arb_cost)."""

from __future__ import annotations

import pytest

from ntkcheck._budget import Budget, OutOfTime
from ntkcheck.independence._arb_cost import SMALL_N, arb_inverse_seconds, check_arb_inverse


def test_the_estimate_scales_as_the_cube_of_the_size():
    """Elimination costs n^3: doubling the block multiplies the estimate by 8 (the timed constant
    is measured once per precision)."""
    a, b = arb_inverse_seconds(100, 256), arb_inverse_seconds(200, 256)
    assert b == pytest.approx(8 * a, rel=1e-12)
    assert arb_inverse_seconds(100, 256) > 0


def test_a_step_that_cannot_finish_is_not_started():
    """With 5 s left, a 1000 x 1000 inverse at 1024 bits (about ten minutes here) raises OutOfTime
    naming its estimate; a block below SMALL_N and an unlimited budget are never refused."""
    with pytest.raises(OutOfTime, match=r"1000 x 1000 block at 1024 bits, estimated at"):
        check_arb_inverse(1000, 1024, Budget(5.0))
    check_arb_inverse(SMALL_N - 1, 1024, Budget(1e-9))  # small: never estimated
    check_arb_inverse(1000, 1024, None)
    check_arb_inverse(1000, 1024, Budget(None))


def test_a_step_that_fits_runs():
    """A 64 x 64 inverse at 64 bits takes milliseconds: an hour of budget lets it start."""
    check_arb_inverse(SMALL_N, 64, Budget(3600.0))
