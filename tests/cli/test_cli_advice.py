"""Advice that can be followed (issue 33): a bottom line names only options the command accepts in
that context, and a singularity proved by the rank of the heads is "certified singular", exit 1."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from ntkcheck.cli import main


def _too_few_heads(tmp_path):
    """Two samples of three 2-d tokens (M = 6 distinct atoms) and a heads file of H = 2 heads:
    H d = 4 < 6, so the Gram has rank at most 4 whatever the data (checked below with numpy's rank
    of the float features' Gram, far from its floor)."""
    rng = np.random.default_rng(0)
    f, h = tmp_path / "t.npz", tmp_path / "h.npz"
    np.savez(f, sample_0=rng.standard_normal((3, 2)), sample_1=rng.standard_normal((3, 2)))
    np.savez(h, Q=rng.standard_normal((2, 2, 2)), b=rng.standard_normal((2, 2)))
    return f, h


def test_a_heads_file_too_small_is_certified_singular_and_the_advice_fits(tmp_path, capsys):
    f, h = _too_few_heads(tmp_path)
    code = main(["screen", str(f), "--heads-file", str(h), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 1 and d["outcome"]["conclusion"] == "certified singular"
    assert d["gram"]["rank_deficient_by_size"] and d["gram"]["heads"] * d["gram"]["dim"] < d["gram"]["atoms"]
    nxt = d["outcome"]["next_step"]
    assert "--heads-file" in nxt and "rerun with at least" not in nxt  # --heads is refused with --heads-file
    assert main(["gram", str(f), "--heads-file", str(h)]) == 1
    assert "proved singular" in capsys.readouterr().out


def test_drawn_heads_too_few_keep_the_heads_advice(tmp_path, capsys):
    f, _ = _too_few_heads(tmp_path)
    code = main(["screen", str(f), "--heads", "2", "--json", "--head-law-seconds", "0"])
    d = json.loads(capsys.readouterr().out)
    assert code == 1 and "at least 3 heads" in d["outcome"]["next_step"]


def test_no_certify_advice_only_when_no_certify_was_given():
    """The independent-data sentences: "without --no-certify" only when certification was not asked
    for (``g.certified is None``); an attempt cut short by the budget says to raise --max-seconds; a
    failed attempt says the floor was reached."""
    from ntkcheck._report_text import _independent_sentences
    from ntkcheck.ntk.certificate.routes import GramCertificate

    def report(certified, positive=True):
        g = SimpleNamespace(certified_positive=False, positive=positive, certified=certified, status="positive",
                            lambda_min=0.5, floor=1e-16, lambda_min_tolerance=None)
        return SimpleNamespace(gram=g, head_law=None, lambda_0=0.0)
    assert "--no-certify" in _independent_sentences(report(None))[1]
    spent = GramCertificate("inconclusive", None, 53, "not certified (time budget spent): the Cholesky")
    failed = GramCertificate("inconclusive", None, 53, "below resolution at M = 40")
    for cert, word in ((spent, "--max-seconds"), (failed, "rounding floor")):
        nxt = _independent_sentences(report(cert))[1]
        assert "--no-certify" not in nxt and word in nxt


def test_flow_with_a_heads_file_and_targets(tmp_path, capsys):
    """flow --heads-file starts from the file's heads (their count is the H reported) and --targets fits
    the given readout targets: the initial loss is 1/2 sum_i |y_i - z0_i|^2 with z0_i the mean of sample
    i (at FixUp V = 0 and the tokens do not move), computed here from the data alone; the options they
    replace are refused."""
    rng = np.random.default_rng(0)
    tokens, heads, targets = tmp_path / "t.npz", tmp_path / "h.npz", tmp_path / "y.npy"
    samples = [rng.standard_normal((3, 2)), rng.standard_normal((4, 2)), rng.standard_normal((3, 2))]
    np.savez(tokens, **{f"sample_{i}": x for i, x in enumerate(samples)})
    np.savez(heads, Q=rng.standard_normal((6, 2, 2)), b=rng.standard_normal((6, 2)))
    y = 0.01 * rng.standard_normal((3, 2))
    np.save(targets, y)
    code = main(["flow", str(tokens), "--heads-file", str(heads), "--targets", str(targets), "--json",
                 "--max-seconds", "30", "--records", "5"])
    d = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and d["heads"] == 6
    z0 = np.array([x.mean(axis=0) for x in samples])  # distinct tokens: equal masses
    np.testing.assert_allclose(d["loss_initial"], 0.5 * float(np.sum((y - z0) ** 2)), rtol=1e-10)  # float64 sums
    for extra in (["--heads", "4"], ["--q-scale", "2"], ["--per-layer"]):
        assert main(["flow", str(tokens), "--heads-file", str(heads), *extra]) == 2
        assert "--heads-file" in capsys.readouterr().err
    assert main(["flow", str(tokens), "--targets", str(targets), "--eps", "0.1"]) == 2
    assert main(["flow", str(tokens), "--targets", str(targets), "--loss", "tokens"]) == 2
    np.save(targets, np.zeros((2, 2)))
    assert main(["flow", str(tokens), "--targets", str(targets)]) == 2
    assert "one target row per sample" in capsys.readouterr().err
