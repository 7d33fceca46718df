"""Time budgets that hold (issue 19 item 4): ``--max-seconds`` on every long verb, ``time_budget=``
in the API, one budget shared by the steps of a command.

For each verb, a run that would take well past a small budget (400 generic samples: the screen
takes 1.5-2 minutes; every claim at 100,000 examples; an experiment over 200 seeds; a sweep of
screenings of those 400 samples) ends within its budget + 5 s with the honest status: a
certificate cut short is "not certified (time budget spent)" (exit 3), a claim run cut short is
never "holds" (exit 3), an experiment stopped at a step is inconclusive (exit 3), a sweep counts
the tasks it did not run (exit 3). Only the budget contract is timed (elapsed <= budget + 5 s, as
the bad-input suite allows), never a speed. Only these runs are here, timed one after another
(the ``timing`` group of ``tests/suite_run.py``); the option's checks, the default sizes (where
the option changes nothing) and the machinery of :mod:`ntkcheck._budget` are in
``test_budget_options.py``, run in parallel.

Mutations this file was run against: without the progress-bar checkpoint the experiment case runs
for minutes; without the cost estimate of the preconditioned bound the gram case overshoots by its
5-30 s; with ``unexpected`` counting a cut-short claim, the claims case exits 1 instead of 3;
without the sweep's budget check between tasks the sweep case runs both screenings (3 minutes).
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from ntkcheck.cli import main

#: seconds a cut-short run may overrun its budget (the bad-input suite's contract)
SLACK = 5.0


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """400 generic samples of 4 tokens in d = 2 (the bad-input suite's 400-sample file): the
    Gram has 1600 rows and sits below float64's resolution, so the SVD fallback, the certificate
    and the slowest eigenvector each take 5-60 s."""
    path = tmp_path_factory.mktemp("budgets") / "many.npy"
    np.save(path, np.random.default_rng(5).standard_normal((400, 4, 2)))
    return str(path)


def _run(capsys, argv):
    t0 = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - t0
    out, err = capsys.readouterr()
    return code, elapsed, out, err


# ------------------------------------------------------------------------- runs cut short


@pytest.mark.parametrize("verb", ["screen", "gram"])
def test_screen_and_gram_hold_their_budget(capsys, many, verb):
    """Unbudgeted, the SVD fallback of this Gram (relative lambda_min ~2.5e-11, below eigvalsh's
    resolution), its certificate and the slowest eigenvector take 30 s to 2 minutes. Within 8 s
    the report says what the budget cut: a certificate "not certified (time budget spent)" (exit
    3), or a step skipped because it would not fit (the note says so; what was certified in time
    stands); or, when not even the float64 spectrum fits, the command is refused with the
    estimate (exit 2). On an idle machine the whole screening can fit in 8 s (seen in CI): then the
    report is complete, certified, and mentions no budget."""
    code, elapsed, out, err = _run(capsys, [verb, many, "--max-seconds", "8", "--json"])
    assert elapsed <= 8 + SLACK, f"{elapsed:.1f} s > 8 + {SLACK} s"
    if code == 2:
        assert "does not fit in the time budget" in err and "--max-seconds" in err
        return
    assert code == 3, err
    d = json.loads(out)
    g = d["gram"] if verb == "screen" else d
    cert = g["certified"]
    cut = cert["kind"] == "inconclusive" and cert["detail"].startswith("not certified (time budget spent)")
    skipped = any("would not fit in the time budget" in n for n in g["notes"])
    if not (cut or skipped):
        # an unloaded machine can finish everything within the budget: then the report is complete and
        # says nothing was cut (a certified bound, exit 3 from the gate on its relative lambda_min)
        assert cert["lower_bound"] is not None and cert["lower_bound"] > 0, (cert, g["notes"])
        assert not any("time budget" in n for n in g["notes"]), g["notes"]
    if cut:
        assert cert["lower_bound"] is None
    assert d["outcome"]["exit_code"] == 3


def test_claims_hold_their_budget_and_never_hold_when_cut(capsys):
    code, elapsed, out, err = _run(capsys, ["claims", "--examples", "100000", "--max-seconds", "5", "--json"])
    assert elapsed <= 5 + SLACK, f"{elapsed:.1f} s > 5 + {SLACK} s"
    d = json.loads(out)
    assert code == d["exit_code"] == 3, [c for c in d["claims"] if c["unexpected"]]
    cut = [c for c in d["claims"] if c["timed_out"]]
    assert cut and [c["id"] for c in cut] == d["cut_short"]
    for c in cut:  # only what ran is counted, and the report says the budget ended it
        assert not c["unexpected"] and "time budget of 5 s spent" in c["shortfall"]
        assert c["held"] + c["inconclusive"] + c["refuted"] <= c["tried"]


def test_experiment_holds_its_budget(capsys):
    code, elapsed, out, err = _run(capsys, ["experiment", "joint-fluctuations", "--seeds", "200", "--max-seconds",
                                            "4", "--json"])
    assert elapsed <= 4 + SLACK, f"{elapsed:.1f} s > 4 + {SLACK} s"
    d = json.loads(out)
    assert code == 3 and d["verdict"] == "inconclusive" and d["fits"] == []
    assert any("stopped by the time budget of 4 s" in n for n in d["notes"])


def test_sweep_holds_its_budget(capsys, many):
    code, elapsed, out, err = _run(capsys, ["sweep", many, "--serial", "--seeds", "0,1,2,3,4,5", "--max-seconds", "8",
                                            "--json"])
    assert elapsed <= 8 + SLACK, f"{elapsed:.1f} s > 8 + {SLACK} s"
    d = json.loads(out)
    assert code == d["exit_code"] == 3, err
    assert d["not_run"] >= 1 and d["not_run"] + len(d["rows"]) == 6  # the rows that ran, the rest counted


def test_flow_certificate_holds_the_command_budget(capsys, tmp_path):
    """``flow`` at d = 384 with one head: the run itself takes a second, the convergence certificate's ball
    bound (Jacobian blocks of 384^3 entries) about 20-40 s. Under ``--max-seconds 5`` the command ends
    within the budget + 5 s and the certificate says it was cut: nothing certified, exit 0 (the flow's
    status is only about contradictions), the JSON's ``certificate.cut`` naming the step (a machine fast
    enough to finish it in time gets the complete certificate). Mutation: without the budget around the
    certificate the command took 24-59 s."""
    rng = np.random.default_rng(0)
    path = tmp_path / "d384.npz"
    np.savez(path, **{f"sample_{i}": np.round(rng.standard_normal((2, 384)) * 4) / 64 for i in range(2)})
    code, elapsed, out, _ = _run(capsys, ["flow", str(path), "--samples", "0,1", "--heads", "1", "--layers", "1",
                                          "--time", "0.01", "--records", "2", "--ntk-records", "1",
                                          "--max-seconds", "5", "--no-progress", "--json"])
    assert elapsed <= 5 + SLACK, elapsed
    # a step cut by the budget is abandoned and stops at its next checkpoint, here a few seconds at
    # most (one d = 384 einsum); before, it ran on for minutes on both cores
    for t in [t for t in threading.enumerate() if t.name.startswith("ntkcheck: ")]:
        t.join(timeout=60.0)
        assert not t.is_alive(), f"{t.name} runs on after the command returned"
    cert = json.loads(out)["certificate"]
    assert code == 0
    if cert["cut"]:
        assert cert["certified"] is False and "time budget" in cert["cut"]
        assert cert["message"].startswith("not certified (time budget spent)")
    else:  # a machine fast enough to finish the certificate in time: a complete one, nothing said of a cut
        assert cert["threshold"] == cert["threshold"]  # a number, not the NaN of a cut certificate
        assert ("time budget" in cert["message"]) == bool(cert["split_skipped"])  # only the split region skipped
