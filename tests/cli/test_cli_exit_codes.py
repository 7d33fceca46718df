"""Exit statuses (0 certified positive / independent, 1 certified singular / dependent or a
failing check, 3 inconclusive / not certified, 2 bad input) and the option fixes of issue 13."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ntkcheck.cli import main


def _npz(path, samples):
    np.savez(path, **{f"sample_{i}": np.asarray(x, float) for i, x in enumerate(samples)})
    return str(path)


@pytest.fixture
def positive_file(tmp_path):
    """Three generic samples in d = 2 (independent almost surely, seed 003 Prop. 10), small
    enough for the Arb certificate to run by default."""
    rng = np.random.default_rng(3)
    return _npz(tmp_path / "pos.npz", [np.round(rng.standard_normal((3, 2)) * 16) / 16 for _ in range(3)])


@pytest.mark.parametrize("args, code", [
    # seed 003 Ex. 3: distinct radii are strongly independent; equal radii are dependent
    (["--family", "uniform-cube", "--radii", "1,2"], 0),
    (["--family", "uniform-cube", "--radii", "1,1"], 1),
    # a budget of one microsecond runs out before any certificate: inconclusive
    (["--family", "uniform-cube", "--radii", "1,2,3,4,5,6,7", "--dim", "3", "--timeout", "1e-6"], 3),
])
def test_decide_exit_status_is_the_verdict(capsys, args, code):
    assert main(["decide", *args]) == code
    out = capsys.readouterr().out
    verdict = {0: "independent", 1: "dependent", 3: "inconclusive"}[code]
    assert f"verdict    {verdict}" in out
    assert main(["decide", *args, "--json"]) == code
    assert json.loads(capsys.readouterr().out)["verdict"] == verdict


def test_decide_prints_the_sentence(capsys):
    from ntkcheck.independence.results import Verdict

    assert main(["decide", "--family", "uniform-cube", "--radii", "1,1"]) == 1
    assert Verdict.DEPENDENT.sentence("weak") in capsys.readouterr().out.splitlines()


def test_family_option_without_family_is_bad_input(capsys):
    """Issue 13: ``decide --radii 1,2`` printed the examples table and exited 0."""
    assert main(["decide", "--radii", "1,2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--radii needs --family" in err
    assert main(["decide", "--family", "laplace", "--radii", "1,2"]) == 2
    assert "does not apply" in capsys.readouterr().err


def test_dirac_points_give_the_dimension(capsys):
    """``--family dirac --points '0,0;1,2'`` wanted ``--dim 2``; the dimension is read from the points."""
    assert main(["decide", "--family", "dirac", "--points", "0,0;1,2", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["dim"] == 2 and d["verdict"] == "dependent"  # single Diracs: affine CGFs (seed 003 Ex. 6)
    assert main(["decide", "--family", "dirac", "--points", "0,0;1,2", "--dim", "3"]) == 2
    assert "--dim is 3" in capsys.readouterr().err
    assert main(["decide", "--family", "dirac", "--points", "0,0;1"]) == 2
    assert "vector 1 has 1 entries" in capsys.readouterr().err


def test_screen_bundled_data_is_certified_singular(capsys):
    """The bundled example holds the product mu_6 = mu_4 * mu_5 with a shared atom: the Gram is
    singular by seed 003 Prop. 8 (exit 1), with a bottom line; before, ``screen`` exited 0."""
    assert main(["screen", "--no-certify"]) == 1
    out = capsys.readouterr().out
    # the report ends with the library's bottom line (the same text as ntkcheck.screen().bottom_line)
    assert "\nTraining: sample 6 is the law of X+Y" in out and "NTK at FixUp has a kernel" in out
    tail = out[out.rindex("\nData: "):]  # the bottom line is last: Data, Training, Next
    assert "\nTraining: " in tail and "\nNext: remove or change one of samples [4, 5, 6]" in tail


def test_screen_positive_certified_or_not(capsys, positive_file):
    assert main(["screen", positive_file, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gram"]["certified"]["lower_bound"] > 0 and d["outcome"]["exit_code"] == 0
    # the same Gram without its certificate: positive in float64 only, not certified
    assert main(["screen", positive_file, "--no-certify"]) == 3
    assert "float64 only" in capsys.readouterr().out


def test_gram_reads_the_bundled_data_and_exits_by_its_certificate(capsys, positive_file):
    """Issue 13: ``gram`` required PATH where the others fall back to the bundled data."""
    assert main(["gram", "--json"]) == 1  # the bundled product triple: a named structure
    d = json.loads(capsys.readouterr().out)
    assert d["path"].endswith("screen_default.npz") and d["structure"]["predicted_kernel"] == 1
    assert main(["gram", positive_file, "--no-certify"]) == 3
    # issue 25: gram certifies by default, by screen's route, and exits as screen does
    assert main(["gram", positive_file]) == main(["screen", positive_file]) == 0
    assert main(["gram", positive_file, "--certify"]) == 0  # the default, kept for scripts
    assert "lambda_min >=" in capsys.readouterr().out


def test_claims_progress_flags_and_exit_sentence(capsys):
    """``claims --progress`` was an unrecognised argument; the report says what exit 0 means."""
    assert main(["claims", "--only", "003.ex6.translation", "--examples", "2", "--no-progress"]) == 0
    assert "exit status 0: every claim holds" in capsys.readouterr().out
    assert main(["claims", "--list", "--progress", "--only", "003.ex6.translation"]) == 0
