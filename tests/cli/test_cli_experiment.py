"""``ntkcheck experiment NAME``: the report, the JSON against its schema, the figure, the exit
status read from the verdict, and bad input."""

from __future__ import annotations

import json

import jsonschema
import pytest

import ntkcheck.limits.rates as R
from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema


def test_list_names_every_experiment(capsys):
    assert main(["experiment", "--list"]) == 0
    out = capsys.readouterr().out
    for name in R.EXPERIMENTS:
        assert out.count(name) >= 1
    assert out.count("sizes: ") == len(R.EXPERIMENTS)


def test_small_run_text_json_and_plot(capsys, tmp_path):
    """The fastest experiment at its small size: exit 0 with a consistent verdict, one JSON object
    valid against the shipped schema, and a PNG written."""
    png = tmp_path / "fig.png"
    code = main(["experiment", "heads-lln", "--size", "small", "--json", "--plot", str(png), "--no-progress"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    d = json.loads(out)
    jsonschema.validate(d, load_schema("experiment"))
    assert (code, d["verdict"]) == (0, "consistent") and d["seeds"] == 5
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert main(["experiment", "heads-lln", "--size", "small", "--seeds", "3", "--seed", "7"]) == 0
    text = capsys.readouterr().out
    assert "heads-lln (seed 002 Thm. 5.1): consistent" in text and "(3 seeds" in text


@pytest.mark.parametrize("verdict, code", [("consistent", 0), ("inconsistent", 1), ("inconclusive", 3),
                                           (R.SLOWER, 3)])
def test_exit_status_is_the_verdict(monkeypatch, capsys, verdict, code):
    """Exit 1 only for a refutation (a differential inequality slower on the window, ``refutes``); a
    bound err <= C r(x) slower on the window refutes nothing: exit 3."""
    import numpy as np

    xs = [8.0, 16.0, 32.0, 64.0]
    slope = {"consistent": -0.6, "inconsistent": 0.0, "inconclusive": -0.6, R.SLOWER: 0.0}[verdict]
    E = np.exp(slope * np.log(xs))[None, :] * np.array([[1.0], [1.01], [0.99]])
    fit = R.fit_rate(xs, E, variable="N", quantity="err", theorem="N^(-1/2)", theorem_rate=lambda x: x ** -0.5,
                     reference_error=1.0 if verdict == "inconclusive" else None, refutes=verdict == "inconsistent")
    assert fit.verdict == verdict
    fake = R.LimitExperiment("heads-lln", "ref", "setting", (fit,))
    monkeypatch.setattr(R, "run_experiment", lambda *a, **k: fake)
    assert main(["experiment", "heads-lln"]) == code
    assert f"heads-lln (ref): {verdict}" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["experiment"], "name an experiment"),
    (["experiment", "heads-lln", "--size", "huge"], "unknown size 'huge'"),
])
def test_bad_input_is_one_line_and_status_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["experiment", "nope"], ["experiment", "heads-lln", "--seeds", "1"],
                                  ["experiment", "heads-lln", "--seed", "-3"]])
def test_argparse_refusals(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_the_low_temperature_paper_has_one_title():
    """Issue 25: the README and the claim/figure gave the paper two different titles."""
    from pathlib import Path

    from ntkcheck.claims import CLAIMS
    from ntkcheck.limits.low_temperature import REFERENCE, TITLE

    root = Path(__file__).resolve().parents[2]
    assert TITLE == "Quantifying Concentration Phenomena of Mean-Field Transformers in the Low-Temperature Regime"
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    assert f'"{TITLE}", arXiv:2605.10931' in readme and TITLE in REFERENCE
    assert TITLE in CLAIMS["abstracts.low_temperature"].reference
    assert TITLE in (root / "theory" / "limits-low-temperature.md").read_text(encoding="utf-8").splitlines()[0]
    assert "deep encoder-only transformers at inference time\"" not in readme
