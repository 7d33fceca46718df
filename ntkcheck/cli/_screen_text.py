"""What ``ntkcheck screen`` and ``ntkcheck gram`` print, and the exit status they return.

Built from the fields of :class:`~ntkcheck.screening.ScreenReport` and
:class:`~ntkcheck.ntk.gram_matrix.result.GramResult` (no reprs): long vectors are summarised
(:func:`~ntkcheck.cli._text.vector_summary`), the report ends with a bottom line and the next
step, and :func:`structured` turns the library's free-text JSON values into values.
"""

from __future__ import annotations

import argparse
from typing import Any

from .._records import structured as structured


def heads_json(args: argparse.Namespace, count: int) -> dict[str, Any]:
    """The heads as values: ``{kind, q_scale, b_scale, seed, count, file}``."""
    if getattr(args, "heads_file", None) is not None:
        return {"kind": "file", "q_scale": None, "b_scale": None, "seed": None, "count": count,
                "file": str(args.heads_file)}
    return {"kind": args.dist, "q_scale": args.q_scale, "b_scale": args.b_scale, "seed": args.seed,
            "count": count, "file": None}


def gram_lines(res: Any, st: Any, kc: Any, label: str) -> list[str]:
    """The ``ntkcheck gram`` report, line by line."""
    out = [f"NTK Gram at FixUp for {label}",
           f"  size M              {res.atoms} distinct atoms ({res.tokens} tokens)",
           f"  heads H, dim d      {res.heads}, {res.dim}", *res.report_lines()]
    if st is not None and kc is not None:
        lines = st.lines() or ["none named"]
        out.append(f"  structure           {lines[0]}")
        out.extend(f"                      {line}" for line in lines[1:])
        out.append(f"  kernel dimension    {kc.sentence()}")
        out.append(f"                      ({'exact' if st.exact else 'lower bound'}: {st.certificate})")
    for n in res.notes:
        out.append(f"  note: {n}")
    return out
