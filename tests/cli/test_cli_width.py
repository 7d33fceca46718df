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
