"""``ntkcheck sweep [PATH ...]``: screening over a grid of initialisation laws, on Dask.

Parses the grid (``--q-scales``, ``--b-scales``, ``--heads``, ``--seeds``, data files), calls
:func:`ntkcheck.sweep.sweep` (a ``LocalCluster`` by default, ``--scheduler ADDRESS`` for a
running cluster, ``--serial`` for none), and prints a table or (``--json``) exactly one
JSON object; ``--plot`` writes the heatmap of the median ``lambda_min`` over seeds.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..io.files import bundled_path
from ._args import nonnegative_float, positive_int


def _list(kind: Any, what: str) -> Any:
    def parse(x: str) -> list[Any]:
        parts = [p for p in x.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}, got {x!r}")
        return [kind(p.strip()) for p in parts]
    return parse


def _seed(x: str) -> int:
    try:
        v = int(x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed >= 0, got {x!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer seed >= 0, got {x!r}")
    return v


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="screen over a grid of init scales, head counts, seeds and files, on a Dask cluster",
        description="Screen token data at FixUp over a grid of initialisation laws (q_scale x b_scale x heads x "
        "seeds x files), one dask.distributed task per screening, and report lambda_min of the NTK Gram "
        "(seed 003 Prop. 5, 8) per task, whether positivity is certified, and where it is largest. Without "
        "PATH, sweeps the bundled example dataset. A LocalCluster is started unless --scheduler or --serial.",
        epilog="exit status: 0 the sweep ran (each row's status, certificate and cross-check are in the table); "
        "2 bad input.",
    )
    p.add_argument("paths", nargs="*", help=".npy (n, N, d) or .npz (sample_0, ...) token files")
    p.add_argument("--q-scales", type=_list(nonnegative_float, "numbers >= 0"), default=[1.0],
                   metavar="Q1,Q2,...", help="scales of the Q entries (default 1)")
    p.add_argument("--b-scales", type=_list(nonnegative_float, "numbers >= 0"), default=[1.0],
                   metavar="B1,B2,...", help="scales of the b entries (default 1)")
    p.add_argument("--heads", type=_list(positive_int, "positive integers"), default=None, metavar="H1,H2,...",
                   help="head counts (default: ceil(4 M / d) per file)")
    p.add_argument("--seeds", type=_list(_seed, "integer seeds"), default=[0], metavar="S1,S2,...",
                   help="seeds of the head initialisation (default 0)")
    p.add_argument("--dist", choices=("gaussian", "uniform"), default="gaussian",
                   help="law of the head entries at initialisation (default gaussian)")
    p.add_argument("--no-certify", action="store_true", help="skip the Arb certificates of the Grams")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="address of a running Dask scheduler (e.g. tcp://host:8786)")
    where.add_argument("--serial", action="store_true", help="run in this process, without Dask")
    p.add_argument("--workers", type=positive_int, default=2, help="LocalCluster worker processes (default 2)")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="threads per LocalCluster worker (default 1; screenings in one process run one at a time)")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="heatmap of the median lambda_min over seeds against (q_scale, b_scale)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--progress", action="store_true", help="one line on stderr per finished task")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..sweep import sweep

    paths = args.paths or [str(bundled_path("screen_default.npz"))]
    res = sweep(paths, q_scales=args.q_scales, b_scales=args.b_scales,
                heads=args.heads if args.heads is not None else [None], seeds=args.seeds, dist=args.dist,
                certify=not args.no_certify, serial=args.serial, scheduler=args.scheduler, workers=args.workers,
                threads=args.threads, progress=args.progress)
    if args.plot:
        res.plot(args.plot)
    if args.json:
        d = {"schema": "ntkcheck/sweep/1", **res.to_dict(), "plot": args.plot}
        print(json.dumps(d))
        return 0
    print(res.table())
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0
