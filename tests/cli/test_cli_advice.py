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
        g = SimpleNamespace(certified_positive=False, positive=positive, certified=certified, status="positive")
        return SimpleNamespace(gram=g, head_law=None, lambda_0=0.0)
    assert "--no-certify" in _independent_sentences(report(None))[1]
    spent = GramCertificate("inconclusive", None, 53, "not certified (time budget spent): the Cholesky")
    failed = GramCertificate("inconclusive", None, 53, "below resolution at M = 40")
    for cert, word in ((spent, "--max-seconds"), (failed, "rounding floor")):
        nxt = _independent_sentences(report(cert))[1]
        assert "--no-certify" not in nxt and word in nxt
