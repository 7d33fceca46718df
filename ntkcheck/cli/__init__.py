"""The ``ntkcheck`` command line: parses arguments, calls the API, prints.

Each subcommand lives in its own module exposing ``register(subparsers)``, which adds
its parser with ``set_defaults(func=run)`` and an ``exit status:`` epilog
(:data:`ntkcheck.cli._args.EXIT_CODES`). Errors on bad input (``NtkcheckError``) become one
line on stderr and exit status 2; warnings are one plain line each; anything unexpected is one
line asking for a report, exit status 4 (:mod:`ntkcheck.cli._boundary`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ._boundary import EXIT_INTERRUPTED, OneLineParser, run_guarded

#: subcommand modules, in the order they appear in ``ntkcheck --help``
_COMMANDS: tuple[str, ...] = ("decide", "claims", "screen", "certify", "flow", "tokens", "heads", "sweep",
                              "experiment")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ntkcheck",
        description="Certified checks of NTK injectivity for softmax attention (seed 003 Prop. 8).",
        epilog="exit status (every command): 0 certified positive / independent / every claim holds; "
        "1 certified singular / dependent, or a failing claim or cross-check; 3 inconclusive or not "
        "certified; 2 bad input; 4 internal error (please report); 130 interrupted (Ctrl-C); 141 the reader of "
        "stdout went away (a closed pipe). Each command's "
        "--help says what they mean for it.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ntkcheck")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # answered before the subcommands (and numpy, sympy, flint) are imported
        print(f"ntkcheck {_version()}")
        return 0
    try:
        parser = build_parser()  # imports the subcommands: seconds on a loaded machine
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("ntkcheck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return run_guarded(args.command, lambda: _run(args, argv))


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    from .._budget import Budget, scope
    from ._provenance import invocation

    # --max-seconds bounds every step of the command, decisions and optional steps included
    seconds = getattr(args, "max_seconds", None)
    with invocation(argv, args), scope(None if seconds is None else Budget(seconds)):
        return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
