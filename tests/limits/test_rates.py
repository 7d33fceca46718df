"""The rate fit behind every limit-theorem experiment (``ntkcheck.limits.rates``).

The slope and its interval are checked against an independent computation (``numpy.polyfit``
per seed and a t quantile from ``scipy.stats``), the verdict rule on data built to fall on each
side of it, and bad input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from ntkcheck.errors import NtkcheckError
from ntkcheck.limits.rates import EXPERIMENTS, LimitExperiment, fit_rate, run_experiment

XS = [8.0, 16.0, 32.0, 64.0, 128.0]


def _errors(slope, noise, seeds=5, xs=XS, seed=0, scale="loglog"):
    rng = np.random.default_rng(seed)
    u = np.log(xs) if scale == "loglog" else np.asarray(xs)
    return np.exp(slope * u[None, :] + rng.normal(0.0, noise, size=(seeds, len(xs))))


@given(slope=st.floats(-2.0, 0.5), noise=st.floats(0.0, 0.3), seeds=st.integers(2, 8),
       seed=st.integers(0, 2**16))
def test_slope_and_interval_match_polyfit(slope, noise, seeds, seed):
    """Mean slope and 95 % t-interval equal polyfit per seed + scipy's t quantile (to 1e-9
    absolute: two least-squares solvers on 5 points, both backward stable)."""
    E = _errors(slope, noise, seeds=seeds, seed=seed)
    f = fit_rate(XS, E, variable="N", quantity="err", theorem="N^(-1/2)", theorem_rate=lambda x: x ** -0.5)
    per = np.array([np.polyfit(np.log(XS), np.log(row), 1)[0] for row in E])
    half = stats.t.ppf(0.975, seeds - 1) * per.std(ddof=1) / math.sqrt(seeds)
    assert f.slope == pytest.approx(per.mean(), abs=1e-9)
    assert f.ci[0] == pytest.approx(per.mean() - half, abs=1e-9)
    assert f.ci[1] == pytest.approx(per.mean() + half, abs=1e-9)
    assert f.theorem_slope == pytest.approx(-0.5, abs=1e-12)


def test_theorem_slope_includes_the_log_factor():
    """N^(-1/4) sqrt(log N) over 8..128 has a log-log slope above -1/4 (the log factor slows the
    decay): the fit compares with that, computed here by polyfit."""
    f = fit_rate(XS, _errors(-0.5, 0.05), variable="N", quantity="err", theorem="N^(-1/4) sqrt(log N)",
                 theorem_rate=lambda x: x ** -0.25 * np.sqrt(np.log(x)))
    ref = np.polyfit(np.log(XS), np.log(np.array(XS) ** -0.25 * np.sqrt(np.log(XS))), 1)[0]
    assert f.theorem_slope == pytest.approx(ref, abs=1e-12) and f.theorem_slope > -0.25


def test_verdicts_on_each_side():
    th = dict(variable="N", quantity="err", theorem="N^(-1/2)", theorem_rate=lambda x: x ** -0.5)
    assert fit_rate(XS, _errors(-0.8, 0.05), **th).verdict == "consistent"
    assert fit_rate(XS, _errors(-0.5, 0.05), **th).verdict == "consistent"
    slow = fit_rate(XS, _errors(-0.2, 0.05), **th)
    assert slow.verdict == "inconsistent" and slow.ci[0] > -0.5
    # the slack moves the line: -0.2 is within 0.5 of -0.5
    assert fit_rate(XS, _errors(-0.2, 0.05), slack=0.5, **th).verdict == "consistent"
    # noisy: interval wider than the cap
    noisy = fit_rate(XS, _errors(-0.5, 1.5, seeds=3), max_ci_width=0.2, **th)
    assert noisy.verdict in ("inconclusive", "inconsistent") and noisy.ci[1] - noisy.ci[0] > 0.2
    # errors on the reference's floor
    floor = fit_rate(XS, _errors(-0.8, 0.05), reference_error=0.05, **th)
    assert floor.verdict == "inconclusive" and "reference" in floor.reason


def test_semilog_unspecified_rate():
    ts = [0.0, 1.0, 2.0, 3.0, 4.0]
    kw = dict(variable="t", quantity="gap", theorem="e^(-c t)", theorem_rate=None, scale="semilog")
    assert fit_rate(ts, _errors(-0.7, 0.05, xs=ts, scale="semilog"), **kw).verdict == "consistent"
    assert fit_rate(ts, _errors(0.0, 0.05, xs=ts, scale="semilog"), **kw).verdict in ("inconsistent", "inconclusive")
    assert fit_rate(ts, _errors(0.3, 0.01, xs=ts, scale="semilog"), **kw).verdict == "inconsistent"
    with pytest.raises(NtkcheckError, match="unspecified"):
        fit_rate(XS, _errors(-0.5, 0.0), variable="N", quantity="e", theorem="?", theorem_rate=None)


@pytest.mark.parametrize("xs, E, match", [
    ([1.0, 2.0], [[1.0, 0.5], [1.0, 0.5]], "at least 3"),
    ([1.0, 2.0, 2.0], [[1, 1, 1], [1, 1, 1]], "at least 3 distinct"),
    (XS, [[1.0] * 5], "seeds >= 2"),
    (XS, [[1.0] * 4] * 3, "shape"),
    (XS, [[1.0, 0.0, 1, 1, 1]] * 3, "positive"),
    (XS, [[1.0, np.nan, 1, 1, 1]] * 3, "positive"),
    ([-1.0, 2.0, 3.0], [[1, 1, 1]] * 2, "positive N"),
])
def test_bad_input(xs, E, match):
    with pytest.raises(NtkcheckError, match=match):
        fit_rate(xs, E, variable="N", quantity="e", theorem="N^-1", theorem_rate=lambda x: 1 / x)


def test_experiment_verdict_and_report():
    th = dict(variable="N", quantity="err", theorem="N^(-1/2)", theorem_rate=lambda x: x ** -0.5)
    good = fit_rate(XS, _errors(-0.6, 0.05), **th)
    bad = fit_rate(XS, _errors(-0.1, 0.05), **th)
    assert LimitExperiment("x", "seed 002 Thm. 4.2", "s", (good,)).verdict == "consistent"
    assert LimitExperiment("x", "r", "s", (good, bad)).verdict == "inconsistent"
    failed_check = LimitExperiment("x", "r", "s", (good,), checks={"convexity": False})
    assert failed_check.verdict == "inconsistent"
    assert any("FAILS" in line for line in failed_check.lines())
    d = LimitExperiment("x", "r", "s", (good,)).to_dict()
    assert d["schema"] == "ntkcheck/experiment/1" and d["fits"][0]["verdict"] == "consistent"


def test_unknown_experiment_and_size():
    with pytest.raises(NtkcheckError, match="known: " + ", ".join(EXPERIMENTS)):
        run_experiment("no-such")
    with pytest.raises(NtkcheckError, match="unknown size"):
        run_experiment(next(iter(EXPERIMENTS)), size="enormous")


def test_the_figure_keeps_legends_off_the_data_and_tick_labels_apart():
    """Issue 25: the low-temperature figure's legends covered the curves and its x tick labels
    (matplotlib's minor labels ``3x10^2 4x10^2``) ran into each other. Drawn on the Agg canvas:
    every legend lies below its panel, and the visible x tick labels of a panel do not overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    th = dict(variable="beta", quantity="W2", theorem="sqrt(log(beta+1)/beta)",
              theorem_rate=lambda x: np.sqrt(np.log(x + 1) / x))
    xs = [100.0, 200.0, 300.0, 400.0]
    fits = tuple(fit_rate(xs, _errors(-0.6, 0.05, xs=xs, seed=k), **th) for k in range(4))
    fig = LimitExperiment("low-temperature", "a long reference " * 6, "s", fits).plot()
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    for ax in fig.axes:
        box, leg = ax.get_window_extent(r), ax.get_legend().get_window_extent(r)
        assert leg.y1 <= box.y0, "a legend overlaps its panel"
        labels = [t.get_window_extent(r) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        assert labels, "no x tick labels"
        assert all(a.x1 <= b.x0 for a, b in zip(sorted(labels, key=lambda b: b.x0), sorted(labels, key=lambda b: b.x0)[1:]))
    plt.close(fig)
