"""Argument types shared by the subcommands: argparse reports their errors as usage errors (exit 2)."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

#: a token that starts like a negative number: "-1", "-.5", "-1,2", "-1e-3", "-1/2", "-1,0;2,3"
_NEGATIVE_VALUE = re.compile(r"^-\.?\d")


def allow_negative_values(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Let option values start with a minus sign: ``--radii -1,2`` gives ``-1,2`` to ``--radii``.

    argparse (Python 3.11) reads a token starting with ``-`` as an option unless it is a
    plain negative number (``-1``, ``-1.5``), so ``--radii -1,2`` or ``--eps -1e-3`` failed
    with "expected one argument" and a usage dump instead of reaching the check that says
    what is wrong with the value. No option of ours starts with a digit, so every token
    ``-<digit>...`` or ``-.<digit>...`` is read as a value.
    """
    parser._negative_number_matcher = _NEGATIVE_VALUE  # the one hook argparse offers for this
    return parser


def _int_at_least(x: str, low: int, what: str) -> int:
    try:
        v = int(x)
    except ValueError:
        v = low - 1
    if v < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {x!r}")
    return v


def positive_int(x: str) -> int:
    """An integer >= 1."""
    return _int_at_least(x, 1, "a positive integer")


def seed_int(x: str) -> int:
    """An integer seed >= 0 (argparse ``type``)."""
    return _int_at_least(x, 0, "an integer seed >= 0")


def nonnegative_int(x: str) -> int:
    """An integer >= 0."""
    return _int_at_least(x, 0, "an integer >= 0")


def _number(x: str, *, strict: bool) -> float:
    try:
        v = float(x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {x!r}") from None
    if not math.isfinite(v) or v < 0 or (strict and v == 0):
        bound = "> 0" if strict else ">= 0"
        raise argparse.ArgumentTypeError(f"expected a finite number {bound}, got {x!r}")
    return v


def positive_float(x: str) -> float:
    """A finite number > 0."""
    return _number(x, strict=True)


def nonnegative_float(x: str) -> float:
    """A finite number >= 0."""
    return _number(x, strict=False)


def seconds(x: str) -> float:
    """A time budget in seconds: a finite number > 0."""
    try:
        v = float(x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {x!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {x!r}")
    return v


#: ``--max-seconds`` of each long command by default (the API's ``time_budget`` defaults are the same;
#: ``decide`` calls it the budget of each decision and also takes ``--timeout``)
MAX_SECONDS: dict[str, float] = {"decide": 60.0, "certify": 300.0, "flow": 50.0, "screen": 300.0, "gram": 300.0, "claims": 1800.0,
                                 "experiment": 900.0, "sweep": 3600.0}


def add_budget_option(p: argparse.ArgumentParser, verb: str, what: str) -> None:
    """``--max-seconds SECONDS``: the time budget of the whole command (:mod:`ntkcheck._budget`)."""
    p.add_argument("--max-seconds", type=seconds, default=MAX_SECONDS[verb], metavar="SECONDS",
                   help=f"time budget of the whole command in seconds (default {MAX_SECONDS[verb]:g}); {what}")


# ---------------------------------------------------------------------- exit codes

#: exit statuses shared by every subcommand (stated in each ``--help`` and in the README)
EXIT_OK = 0  # certified positive / independent / every claim holds / the job ran
EXIT_NEGATIVE = 1  # certified singular / dependent, a failing claim or a disagreeing cross-check
EXIT_BAD_INPUT = 2  # bad input: one line on stderr (argparse usage errors too)
EXIT_INCONCLUSIVE = 3  # inconclusive / not certified: the report says what was seen

#: ``--help`` epilog per subcommand: what each exit status means for it
EXIT_CODES: dict[str, str] = {
    "decide": "0 independent (certified); 1 dependent (certified); 3 inconclusive; 2 bad input. "
              "Without PATH and --family (the seed's examples): 0 every verdict certified and as the seed "
              "says, 1 a verdict disagrees with the seed, 3 some verdict inconclusive.",
    "screen": "0 NTK Gram certified positive with a useful rate (a rigorous lower bound on lambda_min of at least "
              "--min-relative-lambda times lambda_max) and the Prop. 8 cross-check agrees; "
              "1 Gram singular, certified by an exact CGF dependency with overlap (Prop. 8), by an exact proof "
              "on these heads or by their rank (H d < M, or the certified bound r + (H - 1) A < M), or the "
              "cross-check disagrees; 3 certified positive but below the useful rate "
              "(a near-dependency, named), or not certified (positive in float64 only, --no-certify, no "
              "prediction, a certificate that holds only for the float64 rounding of tokens or heads "
              "given at other values, or one cut short by --max-seconds); 2 bad input, or a float64 Gram that "
              "cannot finish within --max-seconds (refused with the estimate).",
    "gram": "0 Gram certified positive with a useful rate (the route of screen; --min-relative-lambda); 1 singular "
            "by a named dependence structure (duplicates, translates, products, Diracs), proved singular in "
            "exact arithmetic on these heads, or by their rank (H d < M, or the certified bound r + (H - 1) A < M); 3 certified positive below the useful rate, or not certified "
            "(--no-certify, or the certificate cut short by --max-seconds); 2 bad input, or a float64 Gram that "
            "cannot finish within --max-seconds (refused with the estimate).",
    "certify": "0 certified positive (lambda_min >= the bound printed, for every symmetric matrix within "
               "--abs-error of the file, or every J J^T with J within --abs-error of the Jacobian); 1 certified not "
               "positive definite, only from an exact proof: singular (a Jacobian with more rows than columns, or "
               "the exact rank of the numbers given, --abs-error 0) or indefinite (a vector with x^T S x < 0 for "
               "every such S, or an exact determinant); 3 not certified (e.g. below float64 resolution, or "
               "--max-seconds spent); 2 bad input (not square, NaN, not symmetric beyond 2 x --abs-error, a memory "
               "estimate over what is available).",
    "flow": "0 the run ended (certified or not: the report says which); 1 the Thm. 8.5 guarantee is "
            "certified but the run contradicts it (a record above the rounding floor exceeds the guaranteed "
            "envelope exp(-rate s) Loss(0), or the displacement exceeds the guaranteed radius); 2 bad input.",
    "claims": "0 every claim holds (known-refuted claims fail as recorded); 1 a claim fails unexpectedly, "
              "falls short of its minimum of held instances or of its inconclusive budget, or its checker "
              "raises; 3 --max-seconds ran out before some claim was established (only what ran is counted, "
              "never 'holds'); 2 bad input.",
    "tokens": "0 files written; 2 bad input (missing file, no texts, model not installed).",
    "heads": "0 heads file written (or the layers listed); 2 bad input (no attention layer, several without "
             "--layer, the number of heads missing or not dividing the dimension, a file that cannot be read).",
    "experiment": "0 every measured rate is consistent with the theorem and every direct check holds (--list: "
                  "listed); 1 a direct check fails, or a rate is significantly slower than a theorem that binds on "
                  "every window (a differential inequality: inconsistent); 3 inconclusive (confidence interval too "
                  "wide, errors on the reference's floor, a rate slower than a bound err <= C r(x) on this window, "
                  "which refutes nothing, or stopped by --max-seconds); 2 bad input.",
}


def exit_epilog(verb: str) -> str:
    """The ``exit status:`` paragraph of ``ntkcheck <verb> --help``."""
    return f"exit status: {EXIT_CODES[verb]}"


def add_progress_options(p: argparse.ArgumentParser, what: str) -> None:
    """``--progress`` / ``--no-progress``: default on when stderr is a terminal."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help=f"show a progress bar on stderr ({what}; default: on when stderr is a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")


def progress_enabled(args: argparse.Namespace) -> bool:
    """``--progress`` / ``--no-progress``, else whether stderr is a terminal (never with --json)."""
    import sys

    if args.progress is not None:
        return bool(args.progress)
    return sys.stderr.isatty() and not getattr(args, "json", False)


# ---------------------------------------------------------------------- JSON

#: version of every ``--json`` layout; bumped when a key changes meaning or type
SCHEMA_VERSION = 1


def schema_id(verb: str) -> str:
    """``"ntkcheck/<verb>/1"``: the ``schema`` key of ``ntkcheck <verb> --json``."""
    return f"ntkcheck/{verb}/{SCHEMA_VERSION}"


def strict(obj: Any, path: str = "", found: list[dict[str, str]] | None = None) -> Any:
    """``obj`` with every NaN or infinity replaced by None; each replacement is recorded in ``found`` as
    ``{"path": "/a/0/b", "value": "nan" | "inf" | "-inf"}`` (strict JSON has no NaN or Infinity)."""
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        if found is not None:
            found.append({"path": path or "/", "value": "nan" if obj != obj else ("inf" if obj > 0 else "-inf")})
        return None
    if isinstance(obj, dict):
        return {k: strict(v, f"{path}/{k}", found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v, f"{path}/{i}", found) for i, v in enumerate(obj)]
    return obj


def emit_json(verb: str, payload: dict) -> None:
    """Print ``payload`` as one strict JSON object whose first key is ``schema`` and last ``provenance``
    (:func:`ntkcheck.cli._provenance.provenance`: versions, BLAS, command line, seeds, sha256 of
    the inputs); the shape is described by ``ntkcheck/data/<verb>.schema.json`` (shipped with the
    package). A NaN or an infinity is written as null, and ``non_finite`` lists where and what it was
    (the reason a number is missing)."""
    import json

    from ._provenance import provenance

    found: list[dict[str, str]] = []
    body = strict(payload, "", found)
    extra = {"non_finite": found} if found else {}
    print(json.dumps({"schema": schema_id(verb), **body, **extra, "provenance": provenance()}, allow_nan=False))


#: keys only the command line writes (what was run, on which files): not in a result's ``to_dict()``
INVOCATION_KEYS = ("schema", "path", "plot", "thm85", "certificate_out", "provenance", "tokens")


def load_schema(verb: str, *, api: bool = False) -> dict:
    """The JSON Schema of ``ntkcheck <verb> --json`` (``ntkcheck/data/<verb>.schema.json``). ``api``: the same
    schema without requiring the keys only the command line writes (:data:`INVOCATION_KEYS`): what the
    result's ``to_dict()`` (``ScreenReport``, ``GramReport``, ``MatrixCertificate``, ``Decision``) validates
    against; every other key and value is checked alike."""
    import json
    from importlib import resources

    schema = json.loads((resources.files("ntkcheck") / "data" / f"{verb}.schema.json").read_text(encoding="utf-8"))
    if api:
        keep = {"tokens"} if verb in ("gram", "screen") else set()  # there: the token count, a result
        schema["required"] = [k for k in schema.get("required", []) if k not in set(INVOCATION_KEYS) - keep]
    return schema


def add_depth_option(p: argparse.ArgumentParser, help: str) -> None:
    """``--depth-t`` (lower case like every flag); ``--depth-T``, the old spelling, is a hidden alias."""
    p.add_argument("--depth-t", dest="depth_T", type=positive_float, default=1.0, metavar="T", help=help)
    p.add_argument("--depth-T", dest="depth_T", type=positive_float, default=1.0, help=argparse.SUPPRESS)
