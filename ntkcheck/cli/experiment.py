"""``ntkcheck experiment NAME``: the seeds' limit theorems, measured (:mod:`ntkcheck.limits.rates`).

Runs one experiment (or ``--list`` them), prints the measured rates with their confidence
intervals beside the theorem's, the direct checks and the verdict, or (``--json``) exactly
one JSON object; ``--plot`` writes the figure.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._args import (
    EXIT_INCONCLUSIVE,
    EXIT_NEGATIVE,
    EXIT_OK,
    add_budget_option,
    add_progress_options,
    emit_json,
    exit_epilog,
    positive_int,
    progress_enabled,
    seed_int,
)
from ._paths import plot_path

#: most seeds a run may take (one simulation per seed and size: 5 seeds take under a minute)
MAX_SEEDS = 1000


def _seeds(x: str) -> int:
    v = positive_int(x)
    if v < 2:
        raise argparse.ArgumentTypeError(f"need at least 2 seeds for a confidence interval, got {x!r}")
    if v > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_SEEDS} seeds (each runs every size of the experiment), "
                                         f"got {x!r}")
    return v


def register(subparsers: Any) -> None:
    from ..limits.rates import EXPERIMENTS

    p = subparsers.add_parser(
        "experiment",
        help="measure a limit theorem of the seeds (tokens, heads, depth, Langevin, low temperature, "
        "stability constants, joint fluctuations)",
        description="Measure one of the seeds' limit theorems on simulated dynamics: the error against the "
        "number of tokens, heads, layers, the inverse temperature or time, a fitted slope with its 95%% "
        "confidence interval over independent seeds, the theorem's slope over the same range, and the verdict "
        "(a theorem's rate is an upper bound: consistent when decay is shown, the interval reaches the theorem's slope "
        "and is no wider than it). "
        f"Experiments: {', '.join(EXPERIMENTS)}. Each is written up in theory/limits-<name>.md.",
        epilog=exit_epilog("experiment"),
    )
    p.add_argument("name", nargs="?", choices=list(EXPERIMENTS), metavar="NAME",
                   help=f"the experiment: {', '.join(EXPERIMENTS)}")
    p.add_argument("--list", action="store_true", help="list the experiments with their theorem and sizes, and exit")
    p.add_argument("--size", default="default", metavar="SIZE",
                   help="problem size: small (seconds, what the tests run), default (under a minute), or large "
                   "where the experiment has it (default: default)")
    p.add_argument("--seeds", type=_seeds, default=5, help="independent repetitions for the confidence intervals "
                   f"(default 5, at least 2, at most {MAX_SEEDS})")
    p.add_argument("--seed", type=seed_int, default=0, help="first seed (default 0)")
    p.add_argument("--plot", metavar="FILE.png", type=plot_path, default=None,
                   help="write the figure (one log-scale panel per rate; .png is added to a name without suffix)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress_options(p, "per experiment step")
    add_budget_option(p, "experiment", "checked at every step of the experiment; once spent it stops at that step "
                      "and is inconclusive (exit 3), no rate is fitted on part of the sizes")
    p.set_defaults(func=run)


def _list(as_json: bool) -> int:
    """The experiments with their theorem, sizes and theory page, as text or (``--json``) one object."""
    import re

    from .._text import fit
    from ..limits.rates import EXPERIMENTS, experiment_module

    rows = []
    for name in EXPERIMENTS:
        mod = experiment_module(name)
        summary = (mod.__doc__ or "").strip().splitlines()[0]
        summary = re.sub(r"``([^`]*)``|`([^`]*)`", lambda m: m.group(1) or m.group(2), summary)  # no reST markup
        summary = re.sub(r":\w+:", "", summary)
        rows.append({"name": name, "summary": summary, "sizes": list(mod.SIZES), "theory": f"theory/limits-{name}.md"})
    if as_json:
        emit_json("experiment", {"experiments": rows})
        return EXIT_OK
    import textwrap

    from .._text import report_width

    w = max(len(r["name"]) for r in rows) + 2  # one column for every name, the longest included
    lines = []
    for r in rows:
        lines += textwrap.wrap(r["summary"], report_width(), initial_indent=f"{r['name']:{w}s}", subsequent_indent=" " * w,
                               break_on_hyphens=False)
        lines.append(f"{'':{w}s}sizes: {', '.join(r['sizes'])}; {r['theory']}")
    print(fit(lines))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from ..errors import NtkcheckError
    from ..limits.rates import run_experiment

    if args.list:
        return _list(args.json)
    if args.name is None:
        raise NtkcheckError("name an experiment (or --list them)")
    res = run_experiment(args.name, size=args.size, seeds=args.seeds, seed=args.seed,
                         progress=progress_enabled(args), time_budget=args.max_seconds)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        fig = res.plot()
        fig.savefig(args.plot, dpi=120)
    if args.json:
        payload = res.to_dict()
        payload.pop("schema", None)
        emit_json("experiment", {**payload, "size": args.size, "seeds": args.seeds, "seed": args.seed,
                                 "plot": args.plot})
    else:
        from .._text import fit

        print(fit(res.lines()))
        if args.plot:
            print(f"figure written to {args.plot}")
    return {"consistent": EXIT_OK, "inconsistent": EXIT_NEGATIVE}.get(res.verdict, EXIT_INCONCLUSIVE)
