"""Tests of ``ntkcheck decide`` run in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ntkcheck.cli import main


def test_seed_examples_table(capsys):
    assert main(["decide"]) == 0
    out = capsys.readouterr().out
    assert "seed 003 Ex. 3" in out and "DISAGREES" not in out
    assert out.count("dependent") >= 6


def test_family_json(capsys):
    assert main(["decide", "--family", "uniform-cube", "--radii", "1,1.5,2", "--dim", "3", "--property", "strong", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "independent" and {"verdict", "method", "certificate", "margin"} <= set(d)


def test_dependent_json_has_null_vector(capsys, tmp_path):
    x = np.array([[0.0, 0.0], [1.0, 0.5]])
    np.savez(tmp_path / "t.npz", sample_0=x, sample_1=x + 2.0)
    assert main(["decide", str(tmp_path / "t.npz"), "--json"]) == 1  # dependent: exit status 1
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "dependent" and d["null_vector"] is not None


def test_errors_are_one_line(capsys, tmp_path):
    np.save(tmp_path / "nan.npy", np.full((1, 2, 2), np.nan))
    assert main(["decide", str(tmp_path / "nan.npy")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "non-finite" in err
    assert main(["decide", "--family", "uniform-cube", "--radii", "-1"]) == 2
    assert "radius" in capsys.readouterr().err
    assert main(["decide", str(tmp_path / "t.npy"), "--property", "strong", "--direction", "0"]) == 2


def test_gaussian_and_dirac_families(capsys):
    """Seed 003 Ex. 6: Gaussians with one covariance and single Diracs are dependent."""
    assert main(["decide", "--family", "gaussian", "--points", "0,0;1,1;2,-1", "--dim", "2", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "dependent"
    assert main(["decide", "--family", "dirac", "--points", "0;3", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "dependent"
    assert main(["decide", "--family", "dirac", "--points", "0,0;1", "--dim", "2"]) == 2
    assert "vector 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--family", "uniform-cube", "--radii", "-1,2"], "radius"),
        (["--family", "uniform-cube", "--radii", "-.5"], "radius"),
        (["--family", "laplace", "--scales", "-1,2"], "positive semidefinite"),
        (["--family", "gaussian", "--points", "0;1", "--variance", "-1/2"], "positive semidefinite"),
    ],
    ids=["radii", "radii-decimal", "scales", "variance-fraction"],
)
def test_negative_list_values_reach_the_domain_check(capsys, args, needle):
    """Issue 9 item 6: ``--radii -1,2`` gave argparse's 'expected one argument' and a usage dump;
    the value now reaches the family's check: one line on stderr, exit 2."""
    assert main(["decide", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ntkcheck decide: error:") and needle in err, err


def test_negative_values_are_values(capsys):
    """Negative separations, points and directions are legitimate values."""
    assert main(["decide", "--family", "gaussian-mixture", "--separations", "-1,2", "--json"]) == 0
    # <w, m_i>^2 = 1 and 4: distinct and non-zero, so independent (seed 003 Ex. 5)
    assert json.loads(capsys.readouterr().out)["verdict"] == "independent"
    assert main(["decide", "--family", "dirac", "--points", "-1,2;3,-4", "--dim", "2", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "dependent"  # single Diracs (Ex. 6)
    assert main(["decide", "--family", "uniform-cube", "--radii", "1,2", "--dim", "2", "--property", "strong",
                 "--direction", "-1,3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "independent" and d["direction"] == ["-1", "3"]


def test_timeout_is_passed_to_decide(capsys, monkeypatch):
    """``--timeout SECONDS`` (default 60) is the budget of the command: what is left of it once the
    measures are built is the ``timeout=`` of the decision (here they take milliseconds)."""
    import ntkcheck.cli.decide as cli_decide

    seen = []
    real = cli_decide._decision.decide

    def spy(*args, **kw):
        seen.append(kw.get("timeout"))
        return real(*args, **kw)

    monkeypatch.setattr(cli_decide._decision, "decide", spy)
    assert main(["decide", "--family", "uniform-cube", "--radii", "1,2"]) == 0
    assert main(["decide", "--family", "uniform-cube", "--radii", "1,2", "--timeout", "2.5"]) == 0
    assert cli_decide.DEFAULT_TIMEOUT == 60 and len(seen) == 2
    # the construction of two uniform cubes takes milliseconds: at most 1 s of the budget is gone
    assert cli_decide.DEFAULT_TIMEOUT - 1 < seen[0] <= cli_decide.DEFAULT_TIMEOUT
    assert 1.5 < seen[1] <= 2.5
    capsys.readouterr()
    for bad in ("0", "-1", "inf", "soon"):
        with pytest.raises(SystemExit) as exc:
            main(["decide", "--family", "uniform-cube", "--radii", "1,2", "--timeout", bad])
        assert exc.value.code == 2
        assert "--timeout" in capsys.readouterr().err


@pytest.mark.parametrize(
    "array, what",
    [(np.ones((2, 3, 1)) + 1j, "complex"), (np.ones((2, 3, 1), dtype=bool), "boolean"), (np.array([[["1"], ["2"]]]), "string")],
    ids=["complex", "bool", "str"],
)
def test_non_real_token_files_are_one_line_errors(capsys, tmp_path, array, what):
    """Issue 9 item 6: complex files lost their imaginary part with a warning; bool and string
    files were read silently. Now: one line on stderr, exit 2."""
    np.save(tmp_path / "x.npy", array)
    assert main(["decide", str(tmp_path / "x.npy")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and what in err and "x.npy" in err, err


@pytest.mark.parametrize("scale", [1e300, 1.7e308])
@pytest.mark.parametrize("prop", ["weak", "strong"])
def test_huge_tokens_give_a_verdict_or_one_line(capsys, tmp_path, scale, prop):
    """Issue 9 item 6: tokens of size 1e300 or 1.7e308 gave a 41-line traceback, exit 1. Now a
    verdict (exit 0) or the package's one-line error (exit 2), and never ``dependent``: the
    samples are generic (independent almost surely, seed 003 Prop. 10)."""
    x = np.random.default_rng(1).uniform(-1, 1, size=(3, 4, 2)) * scale
    np.save(tmp_path / "big.npy", x)
    rc = main(["decide", str(tmp_path / "big.npy"), "--property", prop, "--timeout", "30", "--json"])
    out, err = capsys.readouterr()
    assert rc in (0, 2) and "Traceback" not in err
    assert err.count("\n") == (1 if rc == 2 else 0), err
    verdicts = [json.loads(out)["verdict"]] if rc == 0 else []
    assert "dependent" not in verdicts


def test_repeated_tokens_are_one_atom(capsys, tmp_path):
    """The CLI decides laws: a sample and the same sample with a token repeated differ
    (masses 1/2, 1/2 against 2/3, 1/3) and are independent; a permuted copy is the same law."""
    x = np.array([[0.0], [1.0]])
    np.savez(tmp_path / "r.npz", sample_0=x, sample_1=np.array([[0.0], [1.0], [0.0]]))
    assert main(["decide", str(tmp_path / "r.npz"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "independent"
    np.savez(tmp_path / "p.npz", sample_0=x, sample_1=x[::-1])
    assert main(["decide", str(tmp_path / "p.npz"), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "dependent" and d["null_vector"] in (["1", "-1"], ["-1", "1"])


def test_help_says_what_method_float_does(capsys):
    """Issue 19 item 9: the help called --method float "evidence only, never certified" while it
    issues rigorous Arb certificates at 53 bits, printed "(certified)". The help and the behaviour
    now agree. Reference for the behaviour: radii 1 and 2 differ far above 2^-53 (certified at 53
    bits); radii 1 and 1 + 2^-80 cannot be told apart at 53 bits (inconclusive)."""
    with pytest.raises(SystemExit):
        main(["decide", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "never certified" not in text and "evidence only" not in text
    assert "float (the same Arb ball bounds at 53 bits only: a rigorous certificate" in text
    assert main(["decide", "--family", "uniform-cube", "--radii", "1,2", "--method", "float", "--property", "strong",
                 "--direction", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["method"] == "float" and d["certificate"]["kind"] == "ball-bound" and d["certificate"]["prec_bits"] == 53
    r = f"1,{2**80 + 1}/{2**80}"  # 1 + 2^-80, exactly
    assert main(["decide", "--family", "uniform-cube", "--radii", r, "--method", "float", "--property", "strong",
                 "--direction", "1"]) == 3
    out = capsys.readouterr().out
    assert "inconclusive" in out and "(certified)" not in out
    assert main(["decide", "--family", "uniform-cube", "--radii", r, "--method", "interval", "--property", "strong",
                 "--direction", "1"]) == 0  # more bits resolve it: the float route's refusal was precision only
