"""What the command line shows when something goes wrong (ntkcheck.cli._boundary): one line.

Issue 19: tracebacks with exit status 1 (which reads as "certified singular"), Python warning
records with source paths. Issue 25 item 3: ``--plot outplot`` wrote ``outplot.png`` but said
"outplot". Issue 25 item 6: ``--target-loss`` was parsed and never used.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import ntkcheck.cli.screen as cli_screen
from ntkcheck.cli import main
from ntkcheck.cli._boundary import EXIT_INTERNAL, EXIT_INTERRUPTED
from ntkcheck.errors import NtkcheckWarning


def _raising(exc):
    def run(args):
        raise exc
    return run


@pytest.mark.parametrize("exc, code, text", [
    (RuntimeError("boom"), EXIT_INTERNAL, "internal error: RuntimeError: boom"),
    (MemoryError(), 2, "out of memory"),
    (KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted"),
])
def test_the_boundary_turns_every_exception_into_one_line(monkeypatch, capsys, exc, code, text):
    """The safety net: an unexpected exception is one line asking for a report, exit 4 (not 1,
    which means "certified singular"); MemoryError is one line with the remedy, exit 2."""
    monkeypatch.setattr(cli_screen, "run", _raising(exc))
    assert main(["screen"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ntkcheck screen: ") and text in err
    assert "Traceback" not in err
    if code == EXIT_INTERNAL:
        assert "please report" in err and "test_cli_errors" not in err


def test_warnings_are_one_plain_line(capsys):
    """H d < M warns (the Gram is singular by rank): one line, no file:line, no category name,
    although the test run turns NtkcheckWarning into an error (pyproject filterwarnings). The rank
    proves the Gram singular: exit status 1 (issue 33; it was 3)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", NtkcheckWarning)
        code = main(["gram", "--heads", "1", "--no-structure"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 1
    assert lines and all(ln.startswith("ntkcheck gram: warning: ") for ln in lines), lines
    assert "H d = 1*3 = 3 < M" in err and "NtkcheckWarning" not in err and ".py:" not in err


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["screen", "--seed", "-1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err
    assert err.startswith("ntkcheck screen: error: argument --seed: expected an integer seed >= 0")


def test_plot_without_suffix_is_written_as_png_and_named(tmp_path, capsys):
    """Issue 25 item 3: the report names the file actually written."""
    out = tmp_path / "outplot"
    assert main(["screen", "--no-certify", "--plot", str(out)]) == 1
    printed = capsys.readouterr().out
    assert (tmp_path / "outplot.png").is_file() and not out.exists()
    assert f"plot written to {out}.png" in printed


def test_target_loss_stops_the_flow(capsys):
    """Issue 25 item 6: --target-loss was parsed and ignored; the run now stops there."""
    assert main(["flow", "--target-loss", "1e-6", "--ntk-records", "0", "--json"]) == 0
    flow = json.loads(capsys.readouterr().out)["flow"]
    loss = np.array(flow["loss"])
    assert flow["status"] == "target_loss" and flow["s"][-1] < flow["time_requested"]
    assert loss[-1] <= 1e-6 < loss[0]
