"""Argument types shared by the subcommands: argparse reports their errors as usage errors (exit 2)."""

from __future__ import annotations

import argparse
import math
import re

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


def positive_int(x: str) -> int:
    """An integer >= 1."""
    try:
        v = int(x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {x!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {x!r}")
    return v


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
