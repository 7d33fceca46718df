"""Tests of ntkcheck.screen and the ``screen`` / ``gram`` CLI subcommands."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ntkcheck.cli as cli
from ntkcheck.errors import InputError
from ntkcheck.gram import gram, init_heads
from ntkcheck.io import bundled_path, load_samples
from ntkcheck.screen import load_heads, screen


@pytest.fixture(scope="module")
def bundled_report():
    return screen(load_samples(bundled_path()), depth_T=2.0, certify=False)


def test_bundled_dataset_shows_both_outcomes(bundled_report):
    r = bundled_report
    assert r.weak.verdict.value == "dependent" and r.strong.verdict.value == "dependent"
    # the product construction (samples 4-6, MATH.md section 3 row 1) carries the dependency
    assert [s.coefficient != "0" for s in r.samples] == [False] * 4 + [True] * 3
    assert r.crosscheck.statement == "necessity" and r.crosscheck.agreement == "agrees"
    assert r.complement_indices == (0, 1, 2, 3)
    assert r.complement.weak.independent and r.complement.gram.positive and r.complement.agreement == "agrees"
    # seed 002 Thm. 8.5 with depth T: the NTK, hence the rate, scales by T
    assert r.lambda_0 == pytest.approx(2.0 * r.gram.lambda_min, rel=1e-15)
    assert "L_K" in r.rate_caveat
    json.dumps(r.to_dict())
    assert "cross-check" in r.table()


def test_independent_screen_rate_is_positive():
    S = load_samples(bundled_path())[:4]
    r = screen(S, heads=40, seed=3, depth_T=3.0, certify=False)
    assert r.weak.independent and r.gram.positive and r.complement is None
    assert r.lambda_0 == pytest.approx(3.0 * r.gram.lambda_min, rel=1e-15) and r.lambda_0 > 0


def test_cli_screen_json_and_plot(capsys, tmp_path):
    png = tmp_path / "s.png"
    assert cli.main(["screen", "--json", "--no-certify", "--plot", str(png)]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("weak", "strong", "gram", "crosscheck"):
        assert k in d
    for k in ("lambda_min", "lambda_max", "tokens", "heads"):
        assert k in d["gram"]
    assert d["gram"]["tokens"] == 36 and d["gram"]["heads"] == 48  # ceil(4 M / d)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_screen_table(capsys):
    assert cli.main(["screen", "--no-certify", "--heads", "50", "--q-scale", "0.5", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "lambda_min" in out and "H = 50 heads" in out and "agrees" in out


def test_cli_gram_json_and_heads_file(capsys, tmp_path):
    S = load_samples(bundled_path())[:4]
    data = tmp_path / "t.npz"
    np.savez(data, **{f"sample_{i}": X for i, X in enumerate(S)})
    h = init_heads(30, 3, seed=9)
    hf = tmp_path / "h.npz"
    np.savez(hf, Q=h.Q, b=h.b)
    assert cli.main(["gram", str(data), "--json", "--heads-file", str(hf)]) == 0
    d = json.loads(capsys.readouterr().out)
    ref = gram(S, load_heads(hf))
    assert d["heads"] == 30 and d["tokens"] == 28 and len(d["eigenvalues"]) == 28
    # the same computation through the CLI and the API: identical floats after JSON
    assert d["lambda_min"] == ref.lambda_min and d["lambda_max"] == ref.lambda_max


def _one_error_line(capsys, argv):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0]
    return err[0]


def test_cli_bad_input(capsys, tmp_path):
    txt = tmp_path / "x.npz"
    txt.write_text("not an array")
    assert "not a readable" in _one_error_line(capsys, ["screen", str(txt)])
    ragged = tmp_path / "r.npz"
    np.savez(ragged, sample_0=np.zeros((2, 2)), sample_1=np.zeros((2, 3)))
    assert "dimension" in _one_error_line(capsys, ["gram", str(ragged)])
    nan = tmp_path / "n.npy"
    np.save(nan, np.array([[[0.0, np.nan]]]))
    assert "non-finite" in _one_error_line(capsys, ["gram", str(nan)])
    good = tmp_path / "g.npy"
    np.save(good, np.zeros((2, 2, 3)))
    hf = tmp_path / "h.npz"
    np.savez(hf, Q=np.zeros((0, 3, 3)), b=np.zeros((0, 3)))
    assert "zero heads" in _one_error_line(capsys, ["gram", str(good), "--heads-file", str(hf)])
    bad = tmp_path / "hb.npz"
    np.savez(bad, W=np.zeros(3))
    assert "Q" in _one_error_line(capsys, ["gram", str(good), "--heads-file", str(bad)])


def test_screen_bad_arguments():
    S = load_samples(bundled_path())[:2]
    with pytest.raises(InputError, match="depth_T"):
        screen(S, depth_T=0.0)
    with pytest.raises(InputError, match="heads"):
        screen(S, heads=0)


def test_cli_screen_head_options_reach_the_report(capsys):
    """--heads, --q-scale and --seed change the heads drawn; the report names them."""
    assert cli.main(["screen", "--json", "--heads", "60", "--q-scale", "2", "--seed", "3", "--no-certify"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gram"]["heads"] == 60
    assert cli.main(["screen", "--heads", "60", "--q-scale", "2", "--seed", "3", "--no-certify"]) == 0
    assert "q_scale 2, b_scale 1, seed 3" in capsys.readouterr().out
