"""The head law and the head count on the command line (issue 20): ``--heads auto|N``, ``--delta``,
``--head-law-seconds``; the ``head_law`` and ``head_search`` sections of ``screen --json`` and
``gram --json`` against their schemas; what the bottom line says when the heads are too few."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema


def _json(capsys, argv):
    code = main(argv)
    d = json.loads(capsys.readouterr().out)
    jsonschema.validate(d, load_schema(argv[0]))
    return code, d


def _shared_words_file(tmp_path):
    """Five 'sentences' of static embeddings in d = 384 over a vocabulary with shared words (the
    synthetic case of tests/ntk/heads/test_rank.py): 42 atoms on 34 distinct words."""
    rng = np.random.default_rng(0)
    vocab = rng.standard_normal((40, 384)) / np.sqrt(384) + 0.3 * rng.standard_normal(384) / np.sqrt(384)
    sentences = [[0, 1, 5, 6, 7, 0, 8], [0, 2, 9, 10, 11, 12, 1, 13], [3, 14, 15, 0, 16, 17, 18, 3, 19],
                 [1, 20, 21, 22, 2, 23, 24, 25, 0, 26], [4, 27, 28, 29, 0, 30, 31, 1, 32, 33]]
    f = tmp_path / "words.npz"
    np.savez(f, **{f"sample_{i}": vocab[s] for i, s in enumerate(sentences)})
    return str(f)


def test_screen_json_carries_the_head_law_and_its_delta(capsys, tmp_path):
    """One sample {-1, 1} in d = 1 with b much wider than q: the head law is certified positive within
    the budget; the JSON states delta, both bounds and the rounds; the text states delta."""
    f = tmp_path / "x.npy"
    np.save(f, np.array([[[-1.0], [1.0]]]))
    argv = ["screen", str(f), "--q-scale", "2", "--b-scale", "10", "--head-law-seconds", "10", "--delta", "0.001"]
    code, d = _json(capsys, [*argv, "--json"])
    hl = d["head_law"]
    assert hl["status"] == "positive" and hl["delta"] == 0.001
    assert 0 < hl["lower"] <= 0.0926 <= hl["upper"]  # lambda_min(K_rho) = 0.0925 (tests/helpers.py quadrature)
    assert hl["rounds"] and max(r["heads"] for r in hl["rounds"]) <= hl["heads"]
    assert "1 - 0.001" in hl["statement"]
    main(argv)
    out = capsys.readouterr().out
    assert "head law (H = inf)" in out and "1 - 0.001" in out


def test_head_law_skipped_with_zero_seconds_or_a_heads_file(capsys, tmp_path):
    """--head-law-seconds 0 skips the certificate (null in JSON); so do explicit heads, which have no
    head law."""
    f = tmp_path / "x.npy"
    np.save(f, np.random.default_rng(0).standard_normal((2, 3, 2)))
    _, d = _json(capsys, ["screen", str(f), "--head-law-seconds", "0", "--json"])
    assert d["head_law"] is None and d["head_search"]["mode"] == "auto"
    hf = tmp_path / "h.npz"
    np.savez(hf, Q=np.random.default_rng(1).standard_normal((8, 2, 2)), b=np.zeros((8, 2)))
    _, d = _json(capsys, ["screen", str(f), "--heads-file", str(hf), "--json"])
    assert d["head_law"] is None and d["head_search"]["mode"] == "given"


def test_one_head_on_shared_words_is_predicted_not_a_disagreement(capsys, tmp_path):
    """--heads 1 on shared-word embeddings: 8 zero eigenvalues predicted for these heads and observed,
    0 for the head law; the cross-check is inconclusive (not 'disagrees') and the bottom line says
    how many heads are needed. The certified rank bound r + (H - 1) A = 34 < 42 proves these heads'
    Gram singular whatever the data: "certified singular", exit status 1 (issue 33; it was 3)."""
    f = _shared_words_file(tmp_path)
    code, d = _json(capsys, ["gram", f, "--heads", "1", "--head-law-seconds", "0", "--json"])
    k = d["kernel"]
    assert k["predicted"] == k["observed"] == 8 and k["head_law"] == 0 and k["status"] == "equal"
    assert k["heads"]["span"]["rank"] == 34 and k["heads"]["heads_needed"] == 2
    code, d = _json(capsys, ["screen", f, "--heads", "1", "--head-law-seconds", "0", "--json"])
    assert code == 1 and d["crosscheck"]["agreement"] == "inconclusive"
    assert d["outcome"]["conclusion"] == "certified singular"
    assert "at least 2 heads" in d["outcome"]["next_step"]
    assert d["head_search"] == {**d["head_search"], "mode": "count", "heads": 1}


def test_default_heads_certify_shared_words(capsys, tmp_path):
    """Default options (--heads auto): certified positive, the cross-check agrees, exit 0; the head
    count and why it stopped are reported."""
    f = _shared_words_file(tmp_path)
    code, d = _json(capsys, ["screen", f, "--json"])
    assert code == 0 and d["crosscheck"]["agreement"] == "agrees"
    hs = d["head_search"]
    assert hs["mode"] == "auto" and hs["heads"] == d["gram"]["heads"] and "certified positive" in hs["stopped"]
    assert 34 + (hs["heads"] - 1) * 33 >= 4 * 42


@pytest.mark.parametrize("bad", [["--delta", "0"], ["--delta", "1"], ["--delta", "x"], ["--heads", "0"],
                                 ["--heads", "many"], ["--head-law-seconds", "-1"]])
def test_bad_head_options_exit_2(capsys, bad):
    with pytest.raises(SystemExit) as e:
        main(["screen", *bad])
    assert e.value.code == 2


@pytest.mark.parametrize("command", ["screen", "gram"])
def test_csv_decimals_below_the_float64_range_get_a_sentence(capsys, tmp_path, command):
    """Issue 30: CSV decimals 1e-400 are read exactly (0 and 1e-400 are distinct atoms), their float64
    view is 0; screen and gram run their Gram, head search and head-law bound in float64, where those two
    rows coincide, so they refuse with one line naming both exact values (exit 2), never a traceback
    (exit 4). The head-law step's own sentence for such laws ('not run') is tested in
    tests/ntk/heads/test_law.py; the exact verdict of decide on the same file is tested in
    tests/test_exact_inputs.py."""
    f = tmp_path / "tiny.csv"
    f.write_text("sample,x0\n0,0\n0,1e-400\n1,0\n1,3e-400\n2,1\n2,2\n")
    code = main([command, str(f), "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "same nearest doubles" in err[0] and "1.0e-400 exactly" in err[0], err
