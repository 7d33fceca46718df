"""Tests of ntkcheck.screening and the ``screen`` / ``gram`` CLI subcommands."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ntkcheck.cli as cli
from ntkcheck.errors import InputError
from ntkcheck.io.files import bundled_path, load_samples
from ntkcheck.ntk.gram_matrix.features import init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram
from ntkcheck.screening import load_heads, plot_report, screen


@pytest.fixture(scope="module")
def bundled_report():
    return screen(load_samples(bundled_path()), depth_T=2.0, certify=False)


def test_bundled_dataset_shows_both_outcomes(bundled_report):
    r = bundled_report
    assert r.weak.verdict.value == "dependent" and r.strong.verdict.value == "dependent"
    # the product construction (samples 4-6, row 1 of the table in theory/ntk-prop8.md) carries the dependency
    assert [s.coefficient != "0" for s in r.samples] == [False] * 4 + [True] * 3
    assert r.crosscheck.statement == "necessity" and r.crosscheck.agreement == "agrees"
    assert r.complement_indices == (0, 1, 2, 3)
    assert r.complement.weak.independent and r.complement.gram.positive and r.complement.agreement == "agrees"
    # lambda_0 is named after what it is under the screen's convention (issue 10), not Thm. 8.5's rate
    assert "Not the rate of seed 002 Thm. 8.5" in r.rate_caveat and "L_K" in r.rate_caveat
    json.dumps(r.to_dict())
    assert "cross-check" in r.table()


def test_independent_screen_rate_is_the_ntk_of_its_convention():
    """lambda_0 under the screen's convention (depth T, every layer's heads from the same law,
    per-token loss without the 1/n) against the NTK of that model from its definition: a
    one-layer model carrying the screen's heads, K = m W^1/2 J J^T W^1/2 with J by central
    differences of ``dynamics.forward`` (no Gram code), mobility m = H / tau, times n for the
    loss normalisation. FD error ~1e-9 relative to lambda_max."""
    from ntkcheck.dynamics.model import AttentionParams, forward

    S = [np.asarray(x) for x in load_samples(bundled_path())[:4]]
    T, H, d, n = 3.0, 40, S[0].shape[1], 4
    heads = init_heads(H, d, seed=3)
    r = screen(S, heads=heads, depth_T=T, certify=False)
    assert r.weak.independent and r.gram.positive and r.complement is None
    Q, b = np.asarray(heads.Q)[None], np.asarray(heads.b)[None]
    p = AttentionParams(np.zeros_like(Q), Q, b)  # per-layer parameters, one layer of depth T

    def z(vec):
        return np.concatenate([(o / np.sqrt(n * len(o))).ravel() for o in forward(S, p.unflat(vec), layers=1, T=T)])

    v, h = p.flat(), 1e-6
    nv = p.V.size  # at FixUp only V moves the outputs: the Q, b columns of J vanish
    J = np.stack([(z(v + h * e) - z(v - h * e)) / (2 * h) for e in np.eye(v.size)[:nv]], axis=1)
    ev = np.linalg.eigvalsh((H / T) * (J @ J.T)) * n
    assert r.lambda_0 > 0
    np.testing.assert_allclose(r.lambda_0, ev[0], rtol=0, atol=1e-8 * ev[-1])


def test_cli_screen_json_and_plot(capsys, tmp_path):
    png = tmp_path / "s.png"
    assert cli.main(["screen", "--json", "--no-certify", "--plot", str(png)]) == 1  # bundled: singular
    d = json.loads(capsys.readouterr().out)
    for k in ("weak", "strong", "gram", "crosscheck"):
        assert k in d
    for k in ("lambda_min", "lambda_max", "tokens", "heads"):
        assert k in d["gram"]
    assert d["gram"]["tokens"] == 36 and d["gram"]["heads"] == 48  # ceil(4 M / d)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_screen_table(capsys):
    assert cli.main(["screen", "--no-certify", "--heads", "50", "--q-scale", "0.5", "--seed", "2"]) == 1
    out = capsys.readouterr().out
    assert "lambda_min" in out and "H = 50 heads" in out and "agrees" in out


def test_cli_gram_json_and_heads_file(capsys, tmp_path):
    S = load_samples(bundled_path())[:4]
    data = tmp_path / "t.npz"
    np.savez(data, **{f"sample_{i}": X for i, X in enumerate(S)})
    h = init_heads(30, 3, seed=9)
    hf = tmp_path / "h.npz"
    np.savez(hf, Q=h.Q, b=h.b)
    # positive in float64 only without the certificate; certified by default, as screen does (issue 25)
    assert cli.main(["gram", str(data), "--json", "--heads-file", str(hf), "--no-certify"]) == 3
    assert json.loads(capsys.readouterr().out)["outcome"]["conclusion"] == "positive in float64 only"
    assert cli.main(["gram", str(data), "--json", "--heads-file", str(hf)]) == 0
    d = json.loads(capsys.readouterr().out)
    ref = gram(S, load_heads(hf))
    # the default spectrum is extremal: lambda_min (with its Lanczos tolerance) and lambda_max only
    assert d["heads"] == 30 and d["tokens"] == 28 and d["eigenvalues"] is None
    assert d["lambda_min_tolerance"] == ref.lambda_min_tolerance and 0 < ref.lambda_min_tolerance < 1e-6 * ref.lambda_min
    assert d["lambda_min"] == ref.lambda_min and d["lambda_max"] == ref.lambda_max
    assert cli.main(["gram", str(data), "--json", "--heads-file", str(hf), "--spectrum", "full"]) == 0
    d = json.loads(capsys.readouterr().out)
    ref = gram(S, load_heads(hf), spectrum="full")
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
    assert cli.main(["screen", "--json", "--heads", "60", "--q-scale", "2", "--seed", "3", "--no-certify"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["gram"]["heads"] == 60
    assert cli.main(["screen", "--heads", "60", "--q-scale", "2", "--seed", "3", "--no-certify"]) == 1
    assert "q_scale 2, b_scale 1, seed 3" in capsys.readouterr().out



# ---------------------------------------------------------------------- issue 11


def test_readme_repeated_token_screen(capsys, tmp_path):
    """README example with X[2, 7] = X[2, 0]: Gram positive on 47 atoms, cross-check agrees,
    per-sample tokens / distinct atoms / largest multiplicity and a merge note, in text and JSON
    (before issue 11: lambda_min 1.8e-32 and 'disagrees')."""
    X = np.random.default_rng(0).normal(size=(6, 8, 3))
    X[2, 7] = X[2, 0]
    f = tmp_path / "my_tokens.npy"
    np.save(f, X)
    assert cli.main(["screen", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gram"]["status"] == "positive" and d["crosscheck"]["agreement"] == "agrees"
    assert (d["gram"]["atoms"], d["gram"]["tokens"], d["gram"]["heads"]) == (47, 48, 63)  # ceil(4 * 47 / 3)
    assert d["samples"][2]["tokens"] == 8 and d["samples"][2]["distinct"] == 7
    assert d["samples"][2]["max_multiplicity"] == 2 and d["samples"][1]["max_multiplicity"] == 1
    assert d["kernel"]["predicted"] == d["kernel"]["observed"] == 0
    assert cli.main(["screen", str(f)]) == 0
    out = capsys.readouterr().out
    assert "M = 47 distinct atoms (48 tokens)" in out and "max mult" in out
    assert "sample 2 (8 tokens on 7 atoms, largest multiplicity 2)" in out
    assert "cross-check:          agrees" in out


def _structured_file(tmp_path):
    """10 random samples (5 tokens, d = 8, on the 2^-20 grid), then sample 10 = sample 3,
    sample 11 = sample 5 + shift, samples 12, 13, 14 = X, Y and the law of X + Y."""
    rng = np.random.default_rng(5)
    grid = lambda a: np.round(np.asarray(a) * 2**20) / 2**20  # noqa: E731
    S = [grid(rng.standard_normal((5, 8))) for _ in range(10)]
    S.append(S[3][::-1].copy())
    S.append(S[5] + grid(3 * rng.standard_normal(8)))
    Xp, Yp = grid(rng.standard_normal((2, 8))), grid(rng.standard_normal((2, 8)))
    S += [Xp, Yp, (Xp[:, None, :] + Yp[None, :, :]).reshape(-1, 8)]
    f = tmp_path / "structured.npz"
    np.savez(f, **{f"sample_{i}": x for i, x in enumerate(S)})
    return f


EXPECTED_NAMES = [
    "sample 10 is sample 3 (equal laws)",
    "sample 11 is sample 5 translated by",
    "sample 14 is the law of X+Y, X ~ sample 12, Y ~ sample 13 independent",
]


def test_cli_names_duplicates_translates_products(capsys, tmp_path):
    """Duplicates, translates (with the shift) and products by name, in text and JSON, for
    `screen` and `gram`; predicted kernel 5 (the duplicate's 5 shared atoms; the translate and
    the product share none) = observed 5."""
    f = _structured_file(tmp_path)
    assert cli.main(["screen", str(f), "--json", "--no-certify"]) == 1  # certified singular
    d = json.loads(capsys.readouterr().out)
    kinds = [r["kind"] for r in d["structure"]["relations"]]
    assert kinds == ["duplicate", "translate", "product"]
    for got, want in zip(d["structure"]["sentences"], EXPECTED_NAMES, strict=True):
        assert got.startswith(want)
    assert d["structure"]["relations"][1]["shift"] is not None
    assert d["structure"]["exact"] and d["kernel"]["status"] == "equal"
    assert d["kernel"]["predicted"] == d["kernel"]["observed"] == 5
    assert cli.main(["screen", str(f), "--no-certify"]) == 1
    out = capsys.readouterr().out
    for want in EXPECTED_NAMES:
        assert want in out
    assert "kernel dimension    predicted 5, observed 5 eigenvalues at the rounding floor" in out
    assert cli.main(["gram", str(f)]) == 1
    out = capsys.readouterr().out
    for want in EXPECTED_NAMES:
        assert want in out
    assert "predicted 5, observed 5" in out
    assert cli.main(["gram", str(f), "--json"]) == 1
    g = json.loads(capsys.readouterr().out)
    assert g["kernel"]["predicted"] == g["kernel"]["observed"] == g["kernel_observed"] == 5
    assert [r["kind"] for r in g["structure"]["relations"]] == kinds
    # without the structure nothing proves the kernel: not certified singular (exit 3), and the
    # certificate tried on the singular Gram is not positive. One head count (the first of the
    # search, rank bound 4 M) instead of the search, whose three more doublings on a Gram that
    # never certifies took ~25 s and are not what this checks.
    assert cli.main(["gram", str(f), "--json", "--no-structure", "--heads", "34"]) == 3
    g = json.loads(capsys.readouterr().out)
    assert g["structure"] is None and g["heads"] == 34 and g["certified"]["kind"] == "inconclusive"


# ------------------------------------------------------------------ plots and bottom line (issue 13)


def _dyadic_with_translate(d, seed=0):
    """Three random dyadic token sets and a translate of the first (exact: Lambda_3 = Lambda_0 + <a, 1>)."""
    rng = np.random.default_rng(seed)
    X = [np.round(rng.standard_normal((3, d)) * 64) / 64 for _ in range(3)]
    return [*X, X[0] + 1.0]


def _independent(d, seed=0):
    rng = np.random.default_rng(seed)
    return [np.round(rng.standard_normal((2, d)) * 64) / 64 for _ in range(3)]


def _drawn(X):
    """screen + plot_report on the Agg canvas (the test's renderer; plot_report sets no backend)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    rep = screen(X, heads=1, certify=False)
    fig = plot_report(rep, X)
    fig.canvas.draw()
    return rep, fig


# d = 384 with a dependency costs ~13 s in decide (translate search), so the wide case uses
# independent data: the title then names the certified direction, the longest case before
# issue 13 (every coordinate of w was listed)
@pytest.mark.parametrize("X", [_dyadic_with_translate(64), _independent(384)], ids=["d64-dependent", "d384"])
def test_plot_titles_fit_and_lines_are_labelled(X):
    """At d = 64 and 384 the titles stay inside their half of the figure and do not overlap
    (measured with the Agg renderer), no title lists coordinates, every line has a legend
    label and every axis a label."""
    import matplotlib.pyplot as plt

    rep, fig = _drawn(X)
    try:
        r = fig.canvas.get_renderer()
        ax1, ax2 = fig.axes[:2]
        b1, b2 = ax1.title.get_window_extent(r), ax2.title.get_window_extent(r)
        assert b1.x1 < b2.x0 and b1.x0 >= 0 and b2.x1 <= fig.bbox.width
        assert "[" not in ax2.get_title() and "(" + str(X[0].shape[1]) not in ax2.get_title()
        for ax in (ax1, ax2):
            assert [line.get_label() for line in ax.get_lines() if line.get_label().startswith("_")] == []
            assert ax.get_legend() is not None and ax.get_ylabel() and ax.get_xlabel()
    finally:
        plt.close(fig)


def test_plot_draws_the_dependency():
    """In the dependent case the CGF panel draws sum_i c_i Lambda_i - affine, which the
    certificate says vanishes: relative to the residuals drawn it is zero to rounding (1e-9:
    the least-squares fit is linear in Lambda, so the combination of the fits is the fit of
    the combination, and Lambda is evaluated in float64)."""
    import matplotlib.pyplot as plt

    rep, fig = _drawn(_dyadic_with_translate(64))
    try:
        assert rep.weak.dependent
        ax2 = fig.axes[1]
        dep = [line for line in ax2.get_lines() if line.get_label().startswith("sum_i c_i")]
        assert len(dep) == 1
        scale = max(float(np.abs(line.get_ydata()).max()) for line in ax2.get_lines() if line is not dep[0])
        assert scale > 1e-3 and float(np.abs(dep[0].get_ydata()).max()) <= 1e-9 * scale
        assert {"sample 0 (c = 1)", "sample 3 (c = -1)"} <= {t.get_text() for t in ax2.get_legend().get_texts()}
    finally:
        plt.close(fig)


def test_plot_report_saves_a_file_and_keeps_the_backend(tmp_path):
    import matplotlib

    before = matplotlib.get_backend()
    X = _dyadic_with_translate(3)
    out = plot_report(screen(X, heads=4, certify=False), X, tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and matplotlib.get_backend() == before


def test_bottom_line_for_each_outcome():
    """Independent data: the bottom line says the NTK is injective and points to flow; too few
    heads: it asks for more; dependent without overlap and a positive Gram: no removal advice."""
    rng = np.random.default_rng(0)
    indep = [np.round(rng.standard_normal((4, 2)) * 64) / 64 for _ in range(3)]
    text = screen(indep, certify=False).bottom_line
    assert "certified weakly independent" in text and "ntkcheck flow" in text
    assert "Data: 3 samples, 12 distinct atoms in d = 2" in text
    with pytest.warns(Warning, match="singular by rank"):
        few = screen(indep, heads=1, certify=False).bottom_line
    assert "rerun with at least 6 heads" in few
    X = _dyadic_with_translate(3)
    rep = screen(X, heads=8, certify=False)
    assert rep.crosscheck.statement != "necessity" and rep.gram.positive
    assert "despite the dependency" in rep.bottom_line and "remove" not in rep.bottom_line
    for t in (text, few, rep.bottom_line):
        assert max(map(len, t.splitlines())) <= 100


def test_outcome_and_next_step():
    """One conclusion per report (``ntkcheck screen`` reads its exit status from it): the bundled
    product triple is certified singular; generic data are certified positive with the
    certificate and positive in float64 only without it, and the bottom line then asks for the
    certificate instead of sending the user to train; next_step is the bottom line's last sentence."""
    from ntkcheck.screening import OUTCOMES

    bundled = screen()
    assert bundled.outcome == "certified singular" and bundled.outcome in OUTCOMES
    rng = np.random.default_rng(0)
    indep = [np.round(rng.standard_normal((4, 2)) * 64) / 64 for _ in range(3)]
    cert = screen(indep)
    assert cert.outcome == "certified positive" and cert.gram.certified_positive
    assert "Next: train" in cert.bottom_line
    bare = screen(indep, certify=False)
    assert bare.outcome == "positive in float64 only"
    assert "Next: certify the Gram" in bare.bottom_line and "Next: train" not in bare.bottom_line
    for rep in (bundled, cert, bare):
        assert " ".join(rep.bottom_line.split()).endswith(" ".join(rep.next_step.split()))


def test_table_fits_100_columns_without_reprs():
    """The report's text: no line over 100 columns at d = 384, no Python repr, the bottom line last."""
    rng = np.random.default_rng(5)
    X = [np.round(rng.standard_normal((2, 384)) * 64) / 64 for _ in range(3)]
    rep = screen(X, heads=1)
    text = rep.table()
    assert max(map(len, text.splitlines())) <= 100
    assert "GramCertificate(" not in text and "Decision(" not in text
    assert text.endswith(rep.bottom_line.splitlines()[-1])


def test_screen_certifies_past_the_arb_size_with_the_float64_route():
    """M = 320 distinct atoms is past the Arb route (256): a Gram positive in float64 is certified
    by the float64 route with proved error bounds. Its lower bound must sit below the smallest
    eigenvalue that ``eigvalsh`` (another algorithm than the certificate's Cholesky) reports,
    and within a factor 2 of it (the certificate's slack is rounding-level at this size)."""
    X = np.random.default_rng(11).normal(size=(40, 8, 8))
    rep = screen(list(X), q_scale=0.5, b_scale=0.5)
    g = rep.gram
    assert g.atoms == 320 and g.certified is not None and g.certified.kind == "float64-cholesky"
    assert g.lambda_min / 2 <= g.certified.lower_bound <= g.lambda_min
