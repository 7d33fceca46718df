r"""Attention heads from a trained model's state dict: PyTorch ``nn.MultiheadAttention`` and Hugging Face layers.

A softmax attention head scores a query token ``x`` against a key token ``y`` by
:math:`\langle W_Q^h x + b_Q^h,\ W_K^h y + b_K^h\rangle/\sqrt{d_h}`, with :math:`W^h` the rows
``h d_h .. (h+1) d_h`` of the layer's query and key weights (``y = W x + b``, the convention of a
stored ``Linear``) and :math:`d_h = E / H`. The terms that do not depend on ``y`` cancel in the
softmax over keys, so with keys read through the identity (seed 003 Remark 1) the head is

.. math:: Q_h = (W_K^h)^T W_Q^h/\sqrt{d_h},\qquad b_h = (W_K^h)^T b_Q^h/\sqrt{d_h},

and :math:`b_K` does not survive (``theory/real-models.md``). Layouts read
(:func:`attention_layers` finds them by their tensor names, under any prefix):

* **PyTorch** ``nn.MultiheadAttention`` (``batch_first`` or not): ``in_proj_weight`` ``(3E, E)``
  holding :math:`W_Q, W_K, W_V` in that order, ``in_proj_bias`` ``(3E,)`` (absent with
  ``bias=False``: then :math:`b_h = 0`), or ``q_proj_weight`` / ``k_proj_weight`` when ``kdim``
  was given (it must equal ``E``: the heads act on one token space). The number of heads is not
  in the state dict: it is an argument;
* **Hugging Face** BERT-style layers (BERT, RoBERTa, MiniLM, ...):
  ``attention.self.query.weight``, ``.query.bias``, ``attention.self.key.weight`` (``(E, E)``). The
  number of heads is ``num_attention_heads`` of the model's ``config.json`` when it sits beside
  the file, else an argument.

The tensors come from ``.safetensors`` (read with numpy, no torch), ``.npz`` or ``.pt``
(``torch.load(weights_only=True)``, torch optional): :func:`ntkcheck.io.arrays.read_tensors`. The heads
are the float64 values of the formula (a relative rounding of about :math:`d_h u` per entry); the
``Heads`` built from them are then read exactly, as any heads file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["AttentionLayer", "attention_layers", "choose_layer", "heads_from_state_dict", "heads_from_file", "qk_heads"]

_MHA = re.compile(r"^(?P<p>.*?)in_proj_weight$")
_MHA_SPLIT = re.compile(r"^(?P<p>.*?)q_proj_weight$")
_HF = re.compile(r"^(?P<p>.*?)attention\.self\.query\.weight$")


@dataclass(frozen=True)
class AttentionLayer:
    """One attention layer found in a state dict: its tensor-name ``prefix`` and ``layout``
    (``"torch-mha"`` or ``"hf-bert"``)."""

    prefix: str
    layout: str


def _natural(s: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def attention_layers(names: Any) -> list[AttentionLayer]:
    """The attention layers whose query and key tensors are among ``names``, in natural order
    (``layer.2`` before ``layer.10``)."""
    names = set(names)
    out = []
    for n in names:
        if (m := _MHA.match(n)) is not None:
            out.append(AttentionLayer(m["p"], "torch-mha"))
        elif (m := _MHA_SPLIT.match(n)) is not None and m["p"] + "k_proj_weight" in names:
            out.append(AttentionLayer(m["p"], "torch-mha"))
        elif (m := _HF.match(n)) is not None and m["p"] + "attention.self.key.weight" in names:
            out.append(AttentionLayer(m["p"], "hf-bert"))
    return sorted(out, key=lambda a: _natural(a.prefix))


def qk_heads(WQ: np.ndarray, bQ: np.ndarray | None, WK: np.ndarray, num_heads: int) -> Any:
    r""":math:`Q_h = (W_K^h)^T W_Q^h/\sqrt{d_h}`, :math:`b_h = (W_K^h)^T b_Q^h/\sqrt{d_h}` for ``H = num_heads``
    heads of the ``(E, E)`` query and key weights (``bQ`` None: no query bias).

    Returns
    -------
    ntkcheck.ntk.gram_matrix.features.Heads with ``Q`` of shape (H, E, E) and ``b`` of shape (H, E).
    """
    from ..ntk.gram_matrix.features import Heads

    WQ, WK = (np.asarray(a, dtype=np.float64) for a in (WQ, WK))
    E = WQ.shape[-1]
    H = num_heads
    if not (isinstance(H, int) and not isinstance(H, bool) and H >= 1):
        raise InputError(f"num_heads: expected a positive integer, got {num_heads!r}")
    if WQ.shape != (E, E) or WK.shape != (E, E):
        raise InputError(f"query and key weights of shapes {WQ.shape} and {WK.shape}: expected (E, E) with the keys "
                         "read from the same tokens as the queries (self-attention)")
    if E % H:
        raise InputError(f"num_heads {H} does not divide the embedding dimension {E}")
    b_q = np.zeros(E) if bQ is None else np.asarray(bQ, dtype=np.float64).reshape(-1)
    if b_q.shape != (E,):
        raise InputError(f"query bias of shape {np.shape(bQ)}: expected ({E},)")
    for name, a in (("query weight", WQ), ("key weight", WK), ("query bias", b_q)):
        if not np.all(np.isfinite(a)):
            raise InputError(f"the {name} has non-finite entries")
    dh = E // H
    Q = np.empty((H, E, E))
    b = np.empty((H, E))
    for h in range(H):
        rows = slice(h * dh, (h + 1) * dh)
        Q[h] = WK[rows].T @ WQ[rows] / math.sqrt(dh)
        b[h] = WK[rows].T @ b_q[rows] / math.sqrt(dh)
    return Heads(Q, b)


def _tensor(tensors: Mapping[str, Any], name: str) -> np.ndarray:
    t = tensors[name]
    return np.asarray(getattr(t, "array", t))


def _query_key(tensors: Mapping[str, Any], layer: AttentionLayer) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    p = layer.prefix
    if layer.layout == "hf-bert":
        return (_tensor(tensors, p + "attention.self.query.weight"), _tensor(tensors, p + "attention.self.query.bias")
                if p + "attention.self.query.bias" in tensors else None, _tensor(tensors, p + "attention.self.key.weight"))
    bias = _tensor(tensors, p + "in_proj_bias") if p + "in_proj_bias" in tensors else None
    if p + "in_proj_weight" in tensors:
        W = _tensor(tensors, p + "in_proj_weight")
        if W.ndim != 2 or W.shape[0] != 3 * W.shape[1]:
            raise InputError(f"{p}in_proj_weight has shape {W.shape}: expected (3E, E) (query, key, value stacked)")
        E = W.shape[1]
        return W[:E], None if bias is None else bias[:E], W[E:2 * E]
    WQ, WK = _tensor(tensors, p + "q_proj_weight"), _tensor(tensors, p + "k_proj_weight")
    return WQ, None if bias is None else bias[: WQ.shape[0]], WK


def choose_layer(tensors: Mapping[str, Any], layer: int | str | None) -> AttentionLayer:
    """The attention layer ``layer`` names (an index in natural order, or a prefix; None: the only one)."""
    layers = attention_layers(tensors)
    if not layers:
        raise InputError("no attention layer found: expected nn.MultiheadAttention tensors (in_proj_weight, or "
                         "q_proj_weight and k_proj_weight) or Hugging Face ones (attention.self.query.weight and "
                         "attention.self.key.weight)")
    names = ", ".join(f"{i}: {a.prefix or '(no prefix)'}" for i, a in enumerate(layers[:8]))
    names += " ..." if len(layers) > 8 else ""
    if layer is None:
        if len(layers) > 1:
            raise InputError(f"{len(layers)} attention layers found ({names}): choose one (layer index or prefix)")
        return layers[0]
    if isinstance(layer, str) and not layer.isdigit():
        match = [a for a in layers if a.prefix.rstrip(".") == layer.rstrip(".")]
        if not match:
            raise InputError(f"layer {layer!r}: no attention layer with that prefix; found {names}")
        return match[0]
    i = int(layer)
    if not 0 <= i < len(layers):
        raise InputError(f"layer {layer}: expected an index in 0..{len(layers) - 1} ({names})")
    return layers[i]


def heads_from_state_dict(tensors: Mapping[str, Any], num_heads: int, layer: int | str | None = None) -> Any:
    """The heads of one attention layer of a state dict (name -> array, or the tensors of
    :func:`~ntkcheck.io.arrays.read_tensors`).

    ``layer``: the index among the attention layers found (natural order of their names), or the
    prefix of their tensor names; None when there is exactly one.

    Examples
    --------
    >>> E, H = 4, 2
    >>> W = np.random.default_rng(0).standard_normal((3 * E, E))
    >>> h = heads_from_state_dict({"in_proj_weight": W, "in_proj_bias": np.zeros(3 * E)}, num_heads=H)
    >>> h.Q.shape, h.b.shape
    ((2, 4, 4), (2, 4))
    """
    chosen = choose_layer(tensors, layer)
    WQ, bQ, WK = _query_key(tensors, chosen)
    try:
        return qk_heads(WQ, bQ, WK, num_heads)
    except InputError as exc:
        raise InputError(f"layer {chosen.prefix or '(no prefix)'}: {exc}") from None


def _config_heads(path: Path) -> int | None:
    """``num_attention_heads`` of a ``config.json`` beside the file (a Hugging Face model folder)."""
    cfg = path.parent / "config.json"
    try:
        value = json.loads(cfg.read_text(encoding="utf-8")).get("num_attention_heads")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def heads_from_file(path: str | Path, num_heads: int | None = None, layer: int | str | None = None) -> tuple[Any, str]:
    """The heads of one attention layer of a ``.safetensors`` / ``.npz`` / ``.pt`` state dict, and a
    sentence saying where they came from. ``num_heads`` None: from a ``config.json`` beside the file."""
    from .arrays import read_tensors

    p = Path(path)
    tensors = read_tensors(p)
    H = num_heads if num_heads is not None else _config_heads(p)
    if H is None:
        raise InputError(f"{p}: the number of heads is not in a state dict: give it (--num-heads), or put the "
                         "model's config.json beside the file")
    heads = heads_from_state_dict(tensors, H, layer)
    which = choose_layer(tensors, layer)
    how = "num_attention_heads of config.json" if num_heads is None else "given"
    return heads, (f"{p}: layer {which.prefix or '(no prefix)'} ({which.layout}), H = {H} heads ({how}) of "
                   f"dimension {heads.dim // H}, Q_h = W_K^T W_Q / sqrt(d_h), b_h = W_K^T b_Q / sqrt(d_h)")
