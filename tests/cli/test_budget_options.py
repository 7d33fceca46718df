"""Time budgets (issue 19 item 4), the parts that are not timed: ``--max-seconds`` and ``time_budget=``
are checked, a default budget changes nothing at default sizes, a spent budget draws nothing, and
the machinery (:mod:`ntkcheck._budget`): scopes nest to the earlier deadline, checkpoints and
estimates act only where a caller handles them, and every progress-bar update is a checkpoint.

The runs cut short by their budget, whose seconds are asserted, are in ``test_budgets.py`` (timed
one after another, the ``timing`` group of ``tests/suite_run.py``); these run in parallel.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from ntkcheck import _budget
from ntkcheck._budget import Budget, OutOfTime, scope
from ntkcheck._progress import progress_bar
from ntkcheck.cli import main
from ntkcheck.errors import DomainError


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
@pytest.mark.parametrize("verb", ["screen", "gram", "claims", "experiment", "sweep"])
def test_max_seconds_is_checked(capsys, verb, value):
    with pytest.raises(SystemExit) as exc:
        main([verb, "--max-seconds", value])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "--max-seconds" in err and "seconds" in err


def test_decide_takes_max_seconds_and_timeout(capsys):
    """One name across verbs: ``decide --max-seconds`` is ``decide --timeout``."""
    args = ["decide", "--family", "uniform-cube", "--radii", "1,2,3,4,5,6,7", "--dim", "3"]
    assert main([*args, "--max-seconds", "1e-6"]) == main([*args, "--timeout", "1e-6"]) == 3


# ------------------------------------------------------------------------- default sizes unchanged


def test_default_budget_changes_nothing_at_default_sizes():
    """The bundled example screened, its Gram certified, a claim run, a small experiment and a
    sweep cell give the same results with the default budget as with none."""
    from ntkcheck import gram, screen
    from ntkcheck.claims import CLAIMS, run_claim
    from ntkcheck.distributed import sweep
    from ntkcheck.io.files import bundled_path, load_samples
    from ntkcheck.limits.rates import run_experiment

    X = load_samples(bundled_path())
    a, b = screen(X), screen(X, time_budget=None)
    assert (a.outcome, a.weak.verdict, a.strong.verdict) == (b.outcome, b.weak.verdict, b.strong.verdict)
    assert a.gram.to_dict() == b.gram.to_dict()
    g1, g2 = gram(X, 48, certify=True, time_budget=300), gram(X, 48, certify=True, time_budget=None)
    assert g1.to_dict() == g2.to_dict()
    r1 = run_claim(CLAIMS["003.prop7"], examples=4)
    r2 = run_claim(CLAIMS["003.prop7"], examples=4, time_budget=None)
    assert (r1.tried, r1.held, r1.refuted, r1.inconclusive, r1.timed_out) == \
        (r2.tried, r2.held, r2.refuted, r2.inconclusive, False)
    e1 = run_experiment("heads-lln", size="small", seeds=2)
    e2 = run_experiment("heads-lln", size="small", seeds=2, time_budget=None)
    assert e1.verdict == e2.verdict and [f.to_dict() for f in e1.fits] == [f.to_dict() for f in e2.fits]
    s1 = sweep(bundled_path(), serial=True)
    s2 = sweep(bundled_path(), serial=True, time_budget=None)
    assert s1.values() == s2.values() and s1.not_run == s2.not_run == 0


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "10", True])
def test_time_budget_keyword_is_checked(bad):
    from ntkcheck import gram, screen

    x = [np.zeros((1, 2)), np.ones((1, 2))]
    with pytest.raises(DomainError, match="time_budget"):
        screen(x, time_budget=bad)
    with pytest.raises(DomainError, match="time_budget"):
        gram(x, 4, time_budget=bad)


def test_a_cut_claim_run_counts_only_what_ran():
    """API: a budget already spent draws nothing; the report is cut short, not held, not failed."""
    from ntkcheck.claims import CLAIMS, run_claim

    spent = Budget(1e-9)
    time.sleep(1e-3)
    r = run_claim(CLAIMS["003.prop7"], examples=20, time_budget=spent)
    assert r.timed_out and r.cut_short and not r.unexpected
    assert r.tried == r.held == 0 and "before this claim started" in r.shortfall


# ------------------------------------------------------------------------- the machinery


def test_scopes_nest_to_the_earlier_deadline():
    with scope(Budget(100.0)) as outer:
        with scope(Budget(1000.0)) as inner:
            assert inner is outer  # the enclosing deadline is earlier
        with scope(Budget(1.0)) as inner:
            assert inner.seconds == 1.0 and _budget.current() is inner
        assert _budget.current(Budget(5.0)).seconds == 5.0
    assert _budget.current() is _budget.UNLIMITED


def test_checkpoints_and_estimates_act_only_in_stoppable_scopes():
    spent = Budget(1e-9)
    time.sleep(1e-3)
    calls = []

    def estimate():
        calls.append(1)
        return 10.0

    with scope(spent):  # a deadline for decisions and optional steps, nothing raises
        _budget.checkpoint("step")
        _budget.require(estimate, "step")
        assert not _budget.fits(estimate)
    with scope(spent, stoppable=True), pytest.raises(OutOfTime, match="step"):
        _budget.checkpoint("step")
    with scope(Budget(5.0), stoppable=True), pytest.raises(OutOfTime, match="estimated at 10.0 s"):
        _budget.require(estimate, "a factorisation")
    with scope(None, stoppable=True):  # no limit: the estimate is never computed
        _budget.require(lambda: pytest.fail("estimated without a limit"), "step")
    assert len(calls) == 2


@pytest.mark.parametrize("shown", [True, False])
def test_every_progress_update_is_a_checkpoint(shown):
    """A hidden bar too: the long loops stop whether or not their progress is shown."""
    spent = Budget(1e-9)
    time.sleep(1e-3)
    with scope(spent, stoppable=True), pytest.raises(OutOfTime, match="features"):
        with progress_bar(10, desc="features", unit="step", enabled=shown) as bar:
            bar.update(1)
    with scope(spent, stoppable=True), pytest.raises(OutOfTime, match="claims"):
        for _ in progress_bar(iterable=[1, 2], desc="claims", unit="claim", enabled=shown):
            pass
