"""``ntkcheck claims``: try every seed claim on a budget of hypothesis-drawn instances.

Prints one row per claim (claim, seed reference, instances tried, held / the minimum the
claim needs, refuted, inconclusive, skipped, seconds) and, for each failure, the shrunk
counterexample or the shortfall. Exit status 1 when a claim that is not marked
``refuted`` in the registry fails, falls short of its minimum of held instances or of
its inconclusive budget, or its checker raises; 3 when ``--max-seconds`` ran out before
some claim was established (only what ran is counted, never "holds"); 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._text import WIDTH, fit
from ..errors import InputError
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

#: most instances per claim a run may draw (the default 20 takes about a minute for every claim)
MAX_EXAMPLES = 100_000


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "claims",
        help="try the seeds' claims on hypothesis-drawn instances",
        description="Run every claim of the registry (ntkcheck.claims) on a budget of instances "
                    "and report held / refuted / inconclusive counts.",
        epilog=exit_epilog("claims"),
    )
    p.add_argument("--examples", type=positive_int, default=20, metavar="N",
                   help=f"hypothesis budget per claim (divided by the claim's cost; default 20, at most {MAX_EXAMPLES})")
    p.add_argument("--seed", type=seed_int, default=0, help="hypothesis seed (default 0)")
    p.add_argument("--only", action="append", metavar="ID",
                   help="run only this claim id (repeatable; a trailing '*' matches a prefix)")
    p.add_argument("--list", action="store_true", help="list the claims and their statements, run nothing")
    p.add_argument("--no-shrink", action="store_true", help="report the first counterexample found, unshrunk")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (schema ntkcheck/claims/1)")
    add_progress_options(p, "claims run")
    add_budget_option(p, "claims", "shared by the claims in order; once spent no instance is drawn and the claims "
                      "not established are reported as cut short (exit 3)")
    p.set_defaults(func=run)


def _select(only: list[str] | None) -> list[str]:
    from ..claims import CLAIMS

    if not only:
        return list(CLAIMS)
    chosen: list[str] = []
    for pat in only:
        hits = [c for c in CLAIMS if (c.startswith(pat[:-1]) if pat.endswith("*") else c == pat)]
        if not hits:
            raise InputError(f"--only {pat}: no such claim; known ids: {', '.join(CLAIMS)}")
        chosen += [h for h in hits if h not in chosen]
    return chosen


def _progress(items: list[str], enabled: bool) -> Any:
    from .._progress import progress_bar

    return progress_bar(len(items), iterable=items, desc="claims", unit="claim", enabled=enabled)


def run(args: argparse.Namespace) -> int:
    from .._budget import Budget
    from ..claims import CLAIMS, run_claim

    if not 1 <= args.examples <= MAX_EXAMPLES:
        raise InputError(f"--examples: expected a number of instances in 1..{MAX_EXAMPLES} (each claim draws at "
                         f"least examples / cost instances, at up to seconds each), got {args.examples}")
    ids = _select(args.only)
    if args.list:
        if args.json:
            emit_json("claims", {"claims": [CLAIMS[i].to_dict() for i in ids]})
        else:
            print(fit(f"{CLAIMS[i].id}  [{CLAIMS[i].reference}, {CLAIMS[i].status}]\n    {CLAIMS[i].statement}"
                      for i in ids))
        return EXIT_OK
    reports = []
    budget = Budget(args.max_seconds)  # one budget for the whole run
    for i in _progress(ids, progress_enabled(args)):
        reports.append(run_claim(CLAIMS[i], examples=args.examples, seed=args.seed, shrink=not args.no_shrink,
                                 time_budget=budget))
    unexpected = [r for r in reports if r.unexpected]
    cut = [r for r in reports if r.cut_short]
    code = EXIT_NEGATIVE if unexpected else EXIT_INCONCLUSIVE if cut else EXIT_OK
    if args.json:
        emit_json("claims", {"examples": args.examples, "seed": args.seed, "max_seconds": args.max_seconds,
                             "claims": [r.to_dict() for r in reports],
                             "unexpected": [r.id for r in unexpected], "cut_short": [r.id for r in cut],
                             "exit_code": code})
    else:
        _table(reports)
        print(fit(["", _examples_sentence(args.examples, reports)]))
        print(fit(["", f"exit status 1: {len(unexpected)} claim(s) failed unexpectedly: "
                       f"{', '.join(r.id for r in unexpected)}" if unexpected else
                       f"exit status 3: the time budget of {args.max_seconds:g} s ran out before {len(cut)} claim(s) "
                       f"were established (only what ran is counted; raise --max-seconds): "
                       f"{', '.join(r.id for r in cut)}" if cut else
                       "exit status 0: every claim holds (known-refuted claims fail as recorded)"]))
    return code


def _examples_sentence(examples: int, reports: list[Any]) -> str:
    """Why the 'tried' column is not ``--examples``: each claim runs its pinned cases, then ``examples //
    cost`` drawn instances (at least 1), and more until its minimum of held instances is reached."""
    from ..claims import CLAIMS

    by_id = CLAIMS
    differ = [r for r in reports if r.ran and r.tried != examples]
    if not differ:
        return f"--examples {examples}: every claim tried {examples} instances"
    parts = []
    for r in differ[:4]:
        c = by_id.get(r.id)
        if c is None:
            continue
        parts.append(f"{r.id} tried {r.tried} ({len(c.examples)} pinned, then {max(1, examples // max(1, c.cost))} "
                     f"drawn = {examples} // cost {c.cost}, and more until {c.min_held} held)")
    more = f"; {len(differ) - 4} more alike" if len(differ) > 4 else ""
    return (f"--examples {examples} is the draw budget before each claim's cost: " + "; ".join(parts) + more
            + (" (a run cut short by the time budget tries fewer)" if any(r.cut_short for r in differ) else ""))


def _table(reports: list[Any]) -> None:
    """One row per claim (its id and counts), its seed reference on the next line; the failures'
    details after the table; every line fitted to 100 columns (issue 25: rows of 167)."""
    head = ("tried", "held/min", "refuted", "inconcl.", "skipped", "time")
    rows = []
    for r in reports:
        mark = "" if r.ran else " (not run)"
        if r.status == "refuted":
            mark += " [known refuted]"
        if r.unexpected:
            mark += " !!"
        elif r.cut_short:
            mark += " (time)"
        rows.append((r.id + mark, r.reference, (str(r.tried), f"{r.held}/{r.min_held}", str(r.refuted),
                                                str(r.inconclusive), str(r.skipped), f"{r.seconds:.1f}s")))
    widths = [max(len(h), *(len(row[2][k]) for row in rows)) for k, h in enumerate(head)]
    counts = "  ".join(f"{{:>{w}}}" for w in widths)
    first = WIDTH - len(counts.format(*head)) - 2
    lines = [f"{'claim':<{first}}  " + counts.format(*head), f"{'-' * first}  " + counts.format(*("-" * w for w in widths))]
    for cid, ref, vals in rows:
        if len(cid) > first:  # a long id on its own line, the counts under it
            lines.append(cid)
            cid = ""
        lines += [f"{cid:<{first}}  " + counts.format(*vals), f"    {ref}"]
    total = sum(r.seconds for r in reports)
    lines.append(f"\n{len(reports)} claims, {sum(r.tried for r in reports)} instances, {total:.1f}s")
    for r in reports:
        lines += _failure_lines(r)
    print(fit(lines))


def _failure_lines(r: Any) -> list[str]:
    """What a failing, unexpected or skipped claim adds under the table."""
    out: list[str] = []
    if r.refuted or r.error:
        out.append(f"\n{r.id} ({r.reference}): " + ("checker error: " + r.error if r.error else "counterexample"))
        if r.detail:
            out.append(f"  {r.detail}")
        if r.counterexample is not None:
            text = json.dumps(r.counterexample)
            out.append("  " + (text if len(text) <= 1200 else text[:1200] + " ... (the whole instance: --json)"))
    elif r.unexpected or r.cut_short:
        out.append(f"\n{r.id} ({r.reference}): " + (r.shortfall or "the stored counterexample no longer fails"))
        if r.detail:
            out.append(f"  {r.detail}")
    elif not r.ran:
        out.append(f"\n{r.id}: {r.detail}")
    return out
