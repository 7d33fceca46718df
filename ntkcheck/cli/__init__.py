"""The ``ntkcheck`` command line: parses arguments, calls the API, prints.

Each subcommand lives in its own module exposing ``register(subparsers)``, which adds
its parser with ``set_defaults(func=run)``. Errors on bad input (``NtkcheckError``)
become one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import NtkcheckError

#: subcommand modules, in the order they appear in ``ntkcheck --help``
_COMMANDS: tuple[str, ...] = ("decide", "claims", "screen", "flow", "tokens")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ntkcheck",
        description="Certified checks of NTK injectivity for softmax attention (seed 003 Prop. 8).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except NtkcheckError as exc:
        print(f"ntkcheck {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ntkcheck {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
