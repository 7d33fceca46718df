"""``ntkcheck screen [PATH]`` and ``ntkcheck gram PATH``: initialisation screening and the NTK Gram.

Both parse, call :func:`ntkcheck.screen.screen` / :func:`ntkcheck.gram.gram`, and print a
table or (``--json``) exactly one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ..errors import InputError
from ..io import bundled_path, load_samples
from ._args import nonnegative_float, positive_int


def _head_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heads", type=positive_int, default=None,
                   help="number of heads H (default: ceil(4 M / d), so that H d >= 4 M)")
    p.add_argument("--q-scale", type=nonnegative_float, default=1.0, help="scale of the Q entries (default 1)")
    p.add_argument("--b-scale", type=nonnegative_float, default=1.0, help="scale of the b entries (default 1)")
    p.add_argument("--dist", choices=("gaussian", "uniform"), default="gaussian", help="head init law")
    p.add_argument("--seed", type=int, default=0, help="seed of the head initialisation (default 0)")
    p.add_argument("--heads-file", metavar="FILE.npz", default=None,
                   help="explicit heads: arrays Q (H, d, d) and b (H, d); overrides --heads and the scales")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--progress", action="store_true", help="progress bar on long feature builds")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "screen",
        help="screen token data at FixUp: CGF verdicts, NTK Gram, cross-check, convergence rate",
        description="Screen token samples at FixUp initialisation (seed 003 Prop. 8, seed 002 Thm. 8.5). "
        "Without PATH, screens the bundled example dataset.",
    )
    p.add_argument("path", nargs="?", default=None, help=".npy (n, N, d) or .npz (sample_0, ...) token file")
    _head_options(p)
    p.add_argument("--depth-T", type=float, default=1.0, help="model depth T (the NTK scales by T; default 1)")
    p.add_argument("--plot", metavar="FILE.png", default=None, help="write the Gram spectrum and CGF plot")
    p.add_argument("--no-certify", action="store_true", help="skip the Arb certificate of the Gram")
    p.set_defaults(func=run)

    g = subparsers.add_parser(
        "gram",
        help="the attention NTK Gram at FixUp: lambda_min, lambda_max, condition",
        description="Spectrum of the NTK Gram W^1/2 K W^1/2 = F F^T at FixUp (MATH.md section 3).",
    )
    g.add_argument("path", help=".npy (n, N, d) or .npz (sample_0, ...) token file")
    _head_options(g)
    g.add_argument("--certify", action="store_true",
                   help="certify positivity in Arb when float64 cannot (M <= 256)")
    g.set_defaults(func=run_gram)


def _heads_for(args: argparse.Namespace, samples: list) -> Any:
    from ..gram import init_heads
    from ..screen import default_head_count, load_heads

    d = samples[0].shape[1]
    if args.heads_file is not None:
        h = load_heads(args.heads_file)
        if h.dim != d:
            raise InputError(f"{args.heads_file}: heads have dimension {h.dim}, the tokens have dimension {d}")
        return h
    M = sum(s.shape[0] for s in samples)
    H = args.heads if args.heads is not None else default_head_count(M, d)
    return init_heads(H, d, q_scale=args.q_scale, b_scale=args.b_scale, dist=args.dist, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    from ..screen import plot_report, screen

    path = args.path if args.path is not None else bundled_path("screen_default.npz")
    samples = load_samples(path)
    if not (math.isfinite(args.depth_T) and args.depth_T > 0):
        raise InputError(f"--depth-T: expected a positive number, got {args.depth_T}")
    # explicit heads from a file; otherwise let screen() draw them so the report names the init spec
    heads = _heads_for(args, samples) if args.heads_file is not None else args.heads
    report = screen(samples, heads=heads, q_scale=args.q_scale, b_scale=args.b_scale, dist=args.dist, seed=args.seed,
                    depth_T=args.depth_T, certify=not args.no_certify, progress=args.progress)
    if args.plot:
        plot_report(report, samples, args.plot)
    if args.json:
        d = report.to_dict()
        d["path"] = str(path)
        d["plot"] = args.plot
        print(json.dumps(d))
    else:
        print(f"ntkcheck screen: {path}")
        print(report.table())
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0


def run_gram(args: argparse.Namespace) -> int:
    from ..gram import gram

    samples = load_samples(args.path)
    heads = _heads_for(args, samples)
    res = gram(samples, heads, certify=args.certify, progress=args.progress)
    if args.json:
        print(json.dumps(res.to_dict()))
        return 0
    print(f"NTK Gram at FixUp for {args.path}")
    print(f"  token slots M        {res.tokens}")
    print(f"  heads H, dim d       {res.heads}, {res.dim}")
    print(f"  lambda_min           {res.lambda_min:.6g}   (relative {res.relative_lambda_min:.3g})")
    print(f"  lambda_max           {res.lambda_max:.6g}")
    print(f"  condition            {res.condition:.3g}")
    print(f"  status               {res.status}   (spectrum: {res.method})")
    if res.certified is not None:
        print(f"  certificate          {res.certified!r}")
    for n in res.notes:
        print(f"  note: {n}")
    return 0
