"""What ``ntkcheck screen`` and ``ntkcheck gram`` print, and the exit status they return.

Built from the fields of :class:`~ntkcheck.screening.ScreenReport` and
:class:`~ntkcheck.ntk.gram_matrix.result.GramResult` (no reprs): long vectors are summarised
(:func:`~ntkcheck.cli._text.vector_summary`), the report ends with a bottom line and the next
step, and :func:`structured` turns the library's free-text JSON values into values.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

#: what the bundled ``screen_default.npz`` is (ntkcheck/data/make_screen_default.py)
_SHARED = re.compile(r"^(\d+) shared atoms?$")


def heads_json(args: argparse.Namespace, count: int) -> dict[str, Any]:
    """The heads as values: ``{kind, q_scale, b_scale, seed, count, file}``."""
    if getattr(args, "heads_file", None) is not None:
        return {"kind": "file", "q_scale": None, "b_scale": None, "seed": None, "count": count,
                "file": str(args.heads_file)}
    return {"kind": args.dist, "q_scale": args.q_scale, "b_scale": args.b_scale, "seed": args.seed,
            "count": count, "file": None}


def _overlap(value: Any, prediction: Any) -> Any:
    if not isinstance(value, str):
        return value
    m = _SHARED.match(value)
    shared = int(m.group(1)) if m else (prediction.get("shared") if isinstance(prediction, dict) else None)
    return {"shared_atoms": shared, "description": value}


def structured(obj: Any) -> Any:
    """A copy of a library ``to_dict()`` with values instead of free text: ``coefficient``
    ``"-"`` becomes null, ``overlap`` ``"1 shared atom"`` becomes ``{"shared_atoms": 1, ...}``."""
    if isinstance(obj, list):
        return [structured(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: structured(v) for k, v in obj.items()}
    if out.get("coefficient") == "-":
        out["coefficient"] = None
    if "overlap" in out:
        out["overlap"] = _overlap(out["overlap"], out.get("prediction"))
    return out


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
