"""``ntkcheck certify``: the command line around :func:`ntkcheck.certify_matrix` / :func:`ntkcheck.certify_jacobian`
(file formats, arguments refused before any work, the JSON against its schema)."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema


def test_matrix_or_jacobian_exactly_one(tmp_path, capsys):
    f = tmp_path / "K.npy"
    np.save(f, np.eye(3))
    for argv in (["certify"], ["certify", str(f), "--jacobian", str(f)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "--jacobian" in err and len(err.strip().splitlines()) == 1


def test_jacobian_certificate_out_is_refused_before_the_run(tmp_path, capsys):
    f = tmp_path / "J.npy"
    np.save(f, np.ones((3, 2)))
    assert main(["certify", "--jacobian", str(f), "--certificate-out", str(tmp_path / "c.json")]) == 2
    assert "--certificate-out" in capsys.readouterr().err and not (tmp_path / "c.json").exists()


def test_certificate_out_in_a_missing_directory_is_refused_at_once(tmp_path, capsys):
    f = tmp_path / "K.npy"
    np.save(f, np.eye(3))
    with pytest.raises(SystemExit) as info:
        main(["certify", str(f), "--certificate-out", str(tmp_path / "nowhere" / "c.json")])
    assert info.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_safetensors_matrix_and_its_schema(tmp_path, capsys):
    st = pytest.importorskip("safetensors.numpy")
    J = np.random.default_rng(0).standard_normal((6, 9))
    f = tmp_path / "K.safetensors"
    st.save_file({"ntk": J @ J.T}, str(f))
    assert main(["certify", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    jsonschema.validate(d, load_schema("certify"))
    assert d["status"] == "certified positive" and d["outcome"] == {"exit_code": 0, "conclusion": "certified positive"}
    assert d["provenance"]["inputs"][0]["path"] == str(f)


def test_jacobian_json_validates(tmp_path, capsys):
    f = tmp_path / "J.npy"
    np.save(f, np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
    assert main(["certify", "--jacobian", str(f), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    jsonschema.validate(d, load_schema("certify"))
    assert d["source"] == "jacobian" and d["parameters"] == 3 and d["max_rank"] == 3
