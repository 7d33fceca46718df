"""``ntkcheck heads STATE_DICT -o HEADS.npz``: the heads of a trained attention layer as a heads file.

Parses, reads the state dict (:func:`ntkcheck.io.state_dict.heads_from_file`: ``.safetensors``, ``.npz``,
``.pt``; PyTorch ``nn.MultiheadAttention`` or Hugging Face BERT-style layers), writes ``Q (H, d, d)`` and
``b (H, d)`` for ``screen --heads-file``, ``gram --heads-file`` and ``flow --heads-file``, and prints
where they came from (or one JSON object of schema ``ntkcheck/heads/1``).
"""

from __future__ import annotations

import argparse
from typing import Any

from .._text import fit
from ._args import EXIT_OK, emit_json, exit_epilog, positive_int
from ._paths import output_path


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "heads",
        help="the heads Q_h = W_K^T W_Q / sqrt(d_h), b_h = W_K^T b_Q / sqrt(d_h) of a trained attention layer, "
        "as a heads file",
        description="Read one attention layer of a state dict (a PyTorch nn.MultiheadAttention: in_proj_weight, "
        "in_proj_bias; or a Hugging Face BERT-style layer: attention.self.query.weight, .query.bias, "
        "attention.self.key.weight) from .safetensors (read with numpy, no torch), .npz or .pt (torch.load with "
        "weights_only=True, when torch is installed), and write its heads under the key = identity convention "
        "(seed 003 Remark 1): Q_h = W_K^T W_Q / sqrt(d_h), b_h = W_K^T b_Q / sqrt(d_h); the key bias cancels in "
        "the softmax. The file is what screen, gram and flow read with --heads-file.",
        epilog=exit_epilog("heads"),
    )
    p.add_argument("state_dict", metavar="STATE_DICT", help=".safetensors, .npz or .pt file of the model's tensors")
    p.add_argument("-o", "--output", metavar="HEADS.npz", type=output_path(".npz"), default=None,
                   help="the heads file to write (arrays Q (H, d, d) and b (H, d); .npz is added to a name without "
                   "it); required unless --list")
    p.add_argument("--num-heads", type=positive_int, default=None, metavar="H",
                   help="heads of the layer (not stored in a state dict; default: num_attention_heads of a "
                   "config.json beside the file)")
    p.add_argument("--layer", default=None, metavar="L",
                   help="the attention layer: its index among those found (natural order of names) or the prefix "
                   "of its tensor names (default: the only one; --list shows them)")
    p.add_argument("--list", action="store_true", help="list the attention layers found and write nothing")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema ntkcheck/heads/1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..io.arrays import read_tensors
    from ..io.models import save_heads
    from ..io.state_dict import attention_layers, heads_from_file

    if args.list:
        layers = attention_layers(read_tensors(args.state_dict))
        if args.json:
            emit_json("heads", {"path": args.state_dict, "layers": [{"index": i, "prefix": a.prefix,
                                                                     "layout": a.layout} for i, a in enumerate(layers)],
                                "output": None, "exit_code": EXIT_OK})
            return EXIT_OK
        print(fit([f"{args.state_dict}: {len(layers)} attention layers"]
                  + [f"  {i}: {a.prefix or '(no prefix)'} ({a.layout})" for i, a in enumerate(layers)]))
        return EXIT_OK
    if args.output is None:
        raise InputError("give the heads file to write (-o HEADS.npz), or --list to see the layers")
    heads, where = heads_from_file(args.state_dict, args.num_heads, args.layer)
    out = save_heads(args.output, heads)
    if args.json:
        emit_json("heads", {"path": args.state_dict, "source": where, "num_heads": heads.count, "dim": heads.dim,
                            "output": str(out), "exit_code": EXIT_OK})
        return EXIT_OK
    print(fit([f"heads: {out}", f"  from {where}",
               f"  use: ntkcheck screen TOKENS --heads-file {out} (also gram, flow)"]))
    return EXIT_OK
