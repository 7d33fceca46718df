"""Argument types shared by the subcommands: argparse reports their errors as usage errors (exit 2)."""

from __future__ import annotations

import argparse
import math


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
