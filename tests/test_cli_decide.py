"""Tests of ``ntkcheck decide`` run in-process."""

from __future__ import annotations

import json

import numpy as np

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
    assert main(["decide", str(tmp_path / "t.npz"), "--json"]) == 0
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
    assert main(["decide", "--family", "gaussian", "--points", "0,0;1,1;2,-1", "--dim", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "dependent"
    assert main(["decide", "--family", "dirac", "--points", "0;3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "dependent"
    assert main(["decide", "--family", "dirac", "--points", "0,0;1", "--dim", "2"]) == 2
    assert "vector 1" in capsys.readouterr().err
