"""``ntkcheck sweep [PATH ...]``: screening over a grid of initialisation laws, on Dask.

Parses the grid (``--q-scales``, ``--b-scales``, ``--heads``, ``--seeds``, data files), calls
:func:`ntkcheck.distributed.sweep` (a ``LocalCluster`` by default, ``--scheduler ADDRESS`` or
``--scheduler-file FILE`` for a running cluster, ``--serial`` for none), and prints a table or
(``--json``) exactly one JSON object; ``--plot`` writes the heatmap of the median ``lambda_min``
over seeds.

``--one-gram``: instead of a grid, ONE screening's Gram (one file, one value of each of
``--q-scales``, ``--b-scales``, ``--heads``, ``--seeds``) accumulated over head blocks (and
``--tiles``) on the Dask workers, :func:`ntkcheck.distributed.distributed_gram`; the JSON object then
carries ``one_gram`` instead of ``rows``. ``--certify`` keeps that Gram in tiles on the workers
and proves a lower bound on its ``lambda_min`` there (exit status 0 certified, 3 not).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..io.files import bundled_path
from ._args import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    add_budget_option,
    emit_json,
    nonnegative_float,
    positive_int,
    seed_int,
)
from ._paths import plot_path

#: memory of one LocalCluster worker process (Python, numpy, scipy, python-flint, dask, ntkcheck) and
#: of one screening of the bundled example in one of its threads, rounded up from what was measured
WORKER_BYTES = 256 << 20
THREAD_BYTES = 64 << 20


def _list(kind: Any, what: str) -> Any:
    def parse(x: str) -> list[Any]:
        parts = [p for p in x.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}, got {x!r}")
        return [kind(p.strip()) for p in parts]
    return parse


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="screen over a grid of init scales, head counts, seeds and files, on a Dask cluster",
        description="Screen token data at FixUp over a grid of initialisation laws (q_scale x b_scale x heads x "
        "seeds x files), one dask.distributed task per screening, and report lambda_min of the NTK Gram "
        "(seed 003 Prop. 5, 8) per task, whether positivity is certified, and where it is largest. Without "
        "PATH, sweeps the bundled example dataset. A LocalCluster is started unless --scheduler or --serial.",
        epilog="exit status: 0 the sweep ran (each row's status, certificate and cross-check are in the table); "
        "3 --max-seconds ran out before every task ran (the rows that ran are reported, the others counted); "
        "with --one-gram: 0 computed (with --certify: certified positive), 3 not certified or not finished in "
        "--max-seconds; 2 bad input; 130 interrupted (Ctrl-C: the cluster is stopped, one line on stderr).",
    )
    p.add_argument("paths", nargs="*", help=".npy (n, N, d) or .npz (sample_0, ...) token files")
    p.add_argument("--q-scales", type=_list(nonnegative_float, "numbers >= 0"), default=[1.0],
                   metavar="Q1,Q2,...", help="scales of the Q entries (default 1)")
    p.add_argument("--b-scales", type=_list(nonnegative_float, "numbers >= 0"), default=[1.0],
                   metavar="B1,B2,...", help="scales of the b entries (default 1)")
    p.add_argument("--heads", type=_list(positive_int, "positive integers"), default=None, metavar="H1,H2,...",
                   help="head counts (default: ceil(4 M / d) per file)")
    p.add_argument("--seeds", type=_list(seed_int, "integer seeds"), default=[0], metavar="S1,S2,...",
                   help="seeds of the head initialisation (default 0)")
    p.add_argument("--dist", choices=("gaussian", "uniform"), default="gaussian",
                   help="law of the head entries at initialisation (default gaussian)")
    p.add_argument("--no-certify", action="store_true", help="skip the certificates of the Grams (rigorous lower bounds on lambda_min)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="address of a running Dask scheduler (e.g. tcp://host:8786)")
    where.add_argument("--scheduler-file", metavar="FILE", default=None,
                       help="the scheduler file of a running Dask cluster, as written by `dask scheduler "
                       "--scheduler-file FILE` (the usual way on a batch system: the scheduler's job writes it "
                       "on a shared file system, the workers' and this job read it)")
    where.add_argument("--serial", action="store_true", help="run in this process, without Dask")
    p.add_argument("--workers", type=positive_int, default=2, help="LocalCluster worker processes (default 2)")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="threads per LocalCluster worker (default 1; screenings in one process run one at a time)")
    p.add_argument("--plot", metavar="FILE.png", type=plot_path, default=None,
                   help="heatmap of the median lambda_min over seeds against (q_scale, b_scale) (.png, .pdf, .svg, "
                   "...; .png is added to a name without suffix)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--progress", action="store_true", help="a progress bar over the tasks on stderr")
    add_budget_option(p, "sweep", "each task screens with what is left; once spent no task is started, the queued "
                      "ones are cancelled and counted (exit 3)")
    one = p.add_argument_group("one large Gram (--one-gram)")
    one.add_argument("--one-gram", action="store_true",
                     help="instead of a grid: the Gram of ONE screening (one file, one value of each grid option) "
                     "accumulated over head blocks on the Dask workers, and its lambda_min (float64 unless --certify)")
    one.add_argument("--certify", action="store_true",
                     help="with --one-gram: keep the Gram in tiles on the workers and prove a lower bound on its "
                     "lambda_min there (the certificate of `gram --certify`: rounding enclosure per tile, Rump's "
                     "criterion on a blocked Cholesky of G - tI on the workers)")
    one.add_argument("--chunk-heads", type=positive_int, default=None, metavar="C",
                     help="heads per block, one product task each (default: one product task per worker thread, "
                     "at least one per tile)")
    one.add_argument("--tiles", type=positive_int, default=None, metavar="P",
                     help="row blocks of the Gram: P (P + 1) / 2 tiles, 8 (M / P)^2 bytes a task (default 1)")
    one.add_argument("--reduce", choices=("tree", "ordered"), default=None,
                     help="sum the partial Grams in a pairwise tree (default) or in head order (the serial order)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..distributed import sweep
    from ..errors import InputError

    paths = args.paths or [str(bundled_path("screen_default.npz"))]
    _one_gram_options(args)
    if not args.serial and args.scheduler is None:  # a LocalCluster: one Python process per worker
        from .._memory import require_memory

        require_memory(args.workers * (WORKER_BYTES + args.threads * THREAD_BYTES),
                       f"a LocalCluster of {args.workers} worker processes of {args.threads} thread(s)",
                       "--workers or --threads (or use --serial)")
    if args.one_gram:
        return _one_gram(args, paths)
    if args.certify:
        raise InputError("--certify applies to --one-gram; a grid certifies every row unless --no-certify")
    res = sweep(paths, q_scales=args.q_scales, b_scales=args.b_scales,
                heads=args.heads if args.heads is not None else [None], seeds=args.seeds, dist=args.dist,
                certify=not args.no_certify, serial=args.serial, scheduler=args.scheduler,
                scheduler_file=args.scheduler_file, workers=args.workers, threads=args.threads,
                progress=args.progress, time_budget=args.max_seconds)
    code = EXIT_INCONCLUSIVE if res.not_run else EXIT_OK
    if args.plot and res.rows:
        res.plot(args.plot)
    if args.json:
        emit_json("sweep", {**res.to_dict(), "plot": args.plot, "exit_code": code})
        return code
    print(res.table())
    if args.plot and res.rows:
        print(f"plot written to {args.plot}")
    return code


def _one_gram_options(args: argparse.Namespace) -> None:
    """``--chunk-heads``, ``--tiles``, ``--reduce`` shape the one large Gram: refused without ``--one-gram``."""
    from ..errors import InputError

    given = [f"--{k.replace('_', '-')}" for k in ("chunk_heads", "tiles", "reduce") if getattr(args, k) is not None]
    if given and not args.one_gram:
        raise InputError(f"{', '.join(given)} shape(s) the Gram of --one-gram; without --one-gram it would be ignored")
    args.tiles = 1 if args.tiles is None else args.tiles
    args.reduce = "tree" if args.reduce is None else args.reduce


def _one_gram(args: argparse.Namespace, paths: list[str]) -> int:
    from .._budget import OutOfTime, scope
    from ..cgf import as_laws
    from ..distributed import distributed_gram
    from ..errors import InputError
    from ..io.files import load_samples
    from ..screening import default_head_count

    if args.serial:
        raise InputError("--one-gram accumulates the Gram on Dask; for one Gram in this process use `ntkcheck gram`")
    if args.plot:
        raise InputError("--plot draws the heatmap of a grid; --one-gram computes one Gram")
    many = [name for name, v in (("PATH", paths), ("--q-scales", args.q_scales), ("--b-scales", args.b_scales),
                                 ("--heads", args.heads or [None]), ("--seeds", args.seeds)) if len(v) != 1]
    if many:
        raise InputError(f"--one-gram takes one file and one value of each grid option; several given for {', '.join(many)}")
    laws = as_laws(load_samples(paths[0]))
    H = args.heads[0] if args.heads else default_head_count(sum(law.n_atoms for law in laws), laws[0].dim)
    q, b, seed = args.q_scales[0], args.b_scales[0], args.seeds[0]
    try:  # every finished task and step is a checkpoint of --max-seconds; the cluster is closed on the way out
        with scope(stoppable=True):
            r = distributed_gram(laws, H, q_scale=q, b_scale=b, dist=args.dist, seed=seed, scheduler=args.scheduler,
                                 scheduler_file=args.scheduler_file, workers=args.workers, threads=args.threads,
                                 chunk_heads=args.chunk_heads, tiles=args.tiles, reduce=args.reduce,
                                 certify=args.certify, progress=args.progress)
    except OutOfTime as exc:
        print(f"{paths[0]}: the Gram was not finished within --max-seconds {args.max_seconds:g} (stopped during "
              f"{exc.stage}): not computed, not certified; raise --max-seconds")
        return EXIT_INCONCLUSIVE
    code = EXIT_OK if not args.certify or r.gram.certified_positive else EXIT_INCONCLUSIVE
    if args.json:
        emit_json("sweep", {"mode": r.mode, "seconds": r.seconds_gram + r.seconds_spectrum, "dist": args.dist,
                            "plot": None, "exit_code": code,
                            "one_gram": {"file": paths[0], "q_scale": q, "b_scale": b, "heads": H, "seed": seed,
                                         **r.to_dict()}})
        return code
    print(f"{paths[0]}: q_scale {q:g}, b_scale {b:g}, seed {seed}, {args.dist} heads")
    print(r.summary())
    return code
