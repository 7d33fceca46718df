"""Interfaces that agree and end cleanly (issue 33, "Interfaces that agree"): a closed pipe, Ctrl-C at
start-up, ``--version`` without the numerical stack, the lazy public API, duplicate sample indices,
strict JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ntkcheck.cli import main


def test_a_closed_stdout_ends_quietly():
    """``ntkcheck screen | head -1``: the reader goes away; the command ends with 141 (128 + SIGPIPE)
    and nothing on stderr (it was 'internal error: BrokenPipeError')."""
    p = subprocess.Popen([sys.executable, "-m", "ntkcheck", "screen", "--no-certify", "--head-law-seconds", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 141 and err == ""


def test_ctrl_c_while_the_subcommands_load_is_130(monkeypatch, capsys):
    import ntkcheck.cli as cli

    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["sweep"]) == 130
    assert capsys.readouterr().err.strip() == "ntkcheck: interrupted"


def test_version_and_import_need_no_numerical_stack():
    """``ntkcheck --version`` and ``import ntkcheck`` import neither numpy nor sympy nor flint (the
    public names load on first use), and every public name still resolves."""
    code = ("import sys; import ntkcheck; from ntkcheck.cli import main; main(['--version']); "
            "print(sorted(m for m in ('numpy', 'sympy', 'flint') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.splitlines()[0].startswith("ntkcheck ") and out.splitlines()[-1] == "[]"
    import ntkcheck

    assert set(ntkcheck._LAZY) == set(ntkcheck.__all__) - {"__version__"}
    for name in ntkcheck.__all__:
        assert getattr(ntkcheck, name) is not None
    with pytest.raises(AttributeError):
        ntkcheck.no_such_name  # noqa: B018


def test_a_sample_listed_twice_is_refused(tmp_path, capsys):
    f = tmp_path / "t.npz"
    rng = np.random.default_rng(0)
    np.savez(f, sample_0=rng.standard_normal((3, 2)), sample_1=rng.standard_normal((3, 2)))
    assert main(["flow", str(f), "--samples", "0,0"]) == 2
    assert "listed twice" in capsys.readouterr().err


def test_json_is_strict(tmp_path, capsys):
    """No bare NaN or Infinity in any --json: the parser of a strict JSON reader accepts it."""
    f = tmp_path / "K.npy"
    np.save(f, np.diag([1e308, 1e308, 1e308]))  # lambda_max's float estimate is finite; a sum overflows
    main(["certify", str(f), "--json"])
    text = capsys.readouterr().out
    json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))


def test_numbers_below_their_uncertainty_are_not_printed_as_digits(capsys):
    """The bundled example's Gram is singular at the rounding level (lambda_min ~1e-32 beside an
    uncertainty ~1e-26): the report says "below resolution" with the uncertainty, never six digits of
    the float64 value, and gives no convergence rate for it (issue 33: "lambda_min 1.6e-32 (+/- 4e-29)")."""
    import re

    assert main(["screen", "--head-law-seconds", "0"]) == 1
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("lambda_min"))
    assert "below resolution (" in line and not re.search(r"\d\.\d{4,}e-", line)
    lam = next(ln for ln in out.splitlines() if ln.startswith("NTK lambda_0"))
    assert "no convergence rate" in lam and "decays" not in lam


def test_claims_say_why_tried_is_not_examples(capsys):
    """--examples 3 on a claim with a minimum of 10 held instances: it tries more than 3, and the report
    says why (pinned cases, examples // cost drawn, more until the minimum holds)."""
    from ntkcheck.claims import CLAIMS

    c = CLAIMS["003.prop5.quadratic_form"]
    assert main(["claims", "--examples", "3", "--only", c.id]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the sentence is wrapped
    assert f"{len(c.examples)} pinned, then {max(1, 3 // c.cost)} drawn" in out and f"until {c.min_held} held" in out


def test_plot_title_says_certified_singular(tmp_path):
    """The bundled example is certified singular (an exact CGF dependency with overlap): the plot's
    title says so (it said "below resolution", the float64 status)."""
    import matplotlib

    matplotlib.use("Agg")
    import ntkcheck

    samples = ntkcheck.load_samples(str(__import__("ntkcheck.io.files", fromlist=["bundled_path"]).bundled_path()))
    rep = ntkcheck.screen(samples, head_law_seconds=0)
    assert rep.outcome == "certified singular"
    fig = ntkcheck.plot_report(rep, samples)
    assert fig.axes[0].get_title().startswith("NTK Gram at FixUp: certified singular")


def test_a_decision_shows_its_clock(monkeypatch, capsys):
    """decide --progress: a decision reports no work of its own, so the bar counts the seconds spent
    against the budget (shown at once with NTKCHECK_PROGRESS_DELAY=0)."""
    import time

    from ntkcheck._progress import ClockBar

    monkeypatch.setenv("NTKCHECK_PROGRESS_DELAY", "0")
    with ClockBar(10.0, desc="decide", enabled=True):
        time.sleep(1.2)
    err = capsys.readouterr().err
    assert "decide" in err and "/10 s" in err
