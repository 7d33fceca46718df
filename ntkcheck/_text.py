"""Text helpers of the reports (library and command line): every printed line fits :data:`WIDTH` columns,
or the terminal's ``COLUMNS`` when that is narrower (:func:`report_width`)."""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterable, Sequence

#: the widest line a report prints (a terminal split in two, a pasted log, a diff)
WIDTH = 100


#: the narrowest width a report is wrapped to, whatever ``COLUMNS`` says
MIN_WIDTH = 40


def report_width() -> int:
    """:data:`WIDTH`, or ``COLUMNS`` (the terminal's width, as shells export it) when narrower; never below
    :data:`MIN_WIDTH`. Read at each call."""
    try:
        cols = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return WIDTH
    return max(MIN_WIDTH, min(WIDTH, cols))


def fit(lines: Iterable[str], width: int | None = None) -> str:
    """Join ``lines``, wrapping any longer than ``width`` (default :func:`report_width`) at spaces with a
    hanging indent (the line's own indent plus two); a word longer than the width is broken."""
    width = report_width() if width is None else width
    out: list[str] = []
    for block in lines:
        for line in str(block).split("\n"):
            if len(line) <= width:
                out.append(line)
                continue
            indent = " " * (len(line) - len(line.lstrip(" ")))
            out.extend(textwrap.wrap(line.strip(), width=width, initial_indent=indent,
                                     subsequent_indent=indent + "  ", break_on_hyphens=False))
    return "\n".join(out)


def vector_summary(v: Sequence[float], head: int = 3) -> str:
    """A vector in a few columns: all entries when there are at most ``head + 1``, else its
    Euclidean norm, the first ``head`` entries and the length: ``|v| 1.2 (+0.1, -0.3, +0.2, ... 384)``."""
    vals = [float(x) for x in v]
    if len(vals) <= head + 1:
        return "(" + ", ".join(f"{x:+.3f}" for x in vals) + ")"
    norm = math.sqrt(sum(x * x for x in vals))
    return f"|.| {norm:.3g} (" + ", ".join(f"{x:+.3f}" for x in vals[:head]) + f", ... {len(vals)})"


def exact_vector(v: Sequence[object] | None, head: int = 6) -> str:
    """Exact entries (strings such as ``'1/2'``), the first ``head`` and the count when longer."""
    if v is None:
        return "-"
    items = [str(x) for x in v]
    if len(items) <= head:
        return "(" + ", ".join(items) + ")"
    nz = sum(1 for x in items if x not in ("0", "0.0"))
    return "(" + ", ".join(items[:head]) + f", ... {len(items)} entries, {nz} non-zero)"
