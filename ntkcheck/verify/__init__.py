r"""Re-check an ntkcheck certificate file, with numpy, mpmath and python-flint only.

``ntkcheck decide | gram | screen | certify ... --certificate-out FILE.json`` writes the inputs
of each claim (token laws with exact masses, heads, a matrix and its error bound) and what its
proof used. This package re-derives every claim from those inputs with its own code: it imports
nothing of the rest of ntkcheck and runs on its own (``python -m ntkcheck.verify FILE.json``; or,
with the ``ntkcheck/`` directory on ``sys.path``, ``python -m verify FILE.json``).

Every input is read at its exact value: float64 arrays as the dyadic rationals they are, and the
values given that are not doubles (``Fraction`` tokens or heads, integers beyond 2^53, long
doubles) from the exact rationals the file holds for them (format ``ntkcheck-certificate/2``), so
a claim is re-checked for the numbers the user gave, never for their float64 view.

Exit status: 0 every claim re-proved; 1 a claim or its recorded proof fails, or the inputs do not
match their recorded digest (a tampered file); 3 a claim could not be re-checked here (too large,
a sympy identity, nothing certified), none refuted; 2 the file is unreadable.

Modules: ``_common`` (reading the inputs exactly), ``_cgf`` (independence and dependence),
``_matrix`` (lower bounds on ``lambda_min`` of a ball of matrices; a user's matrix), ``_gram``
(the Gram's bound and singularity), ``_precision`` (the one FLINT precision region).
How each claim is re-proved: theory/certificates.md, "Re-checkable certificates".

References: S. M. Rump, "Verification of positive definiteness", BIT 46 (2006) 433-452;
N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm. 10.3.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._cgf import _dependent, _independent
from ._common import Refuted, Unchecked, _arrays, _heads, _laws, digest
from ._convergence import _convergence
from ._gram import _gram, _gram_equal_scores, _gram_singular
from ._matrix import _matrix

__all__ = ["verify_file", "verify_record", "FORMAT", "digest", "main"]

#: the format written: inputs that are not doubles are held as exact rationals
FORMAT = "ntkcheck-certificate/2"
#: the formats read: ``/1`` held every input as float64 (its claims are re-checked for those values)
READABLE = ("ntkcheck-certificate/1", FORMAT)


def _check(claim: dict[str, Any], laws: list[dict[str, Any]], inputs: dict[str, Any],
           arrays: dict[str, np.ndarray]) -> str:
    kind = claim["kind"]
    if claim.get("samples") is not None and not all(0 <= int(i) < len(laws) for i in claim["samples"]):
        raise Refuted(f"the claim names samples {claim['samples']} of {len(laws)}")
    sub = laws if claim.get("samples") is None else [laws[int(i)] for i in claim["samples"]]
    if kind == "cgf":
        if claim["verdict"] == "independent":
            return _independent(sub, claim["certificate"], claim.get("direction"))
        if claim["verdict"] == "dependent":
            return _dependent(sub, claim["certificate"], claim.get("direction"))
    if kind == "gram-lower-bound":
        return _gram(sub, claim, *_heads(inputs, arrays))
    if kind == "gram-singular":
        return _gram_singular(sub, claim)
    if kind == "gram-equal-scores":
        return _gram_equal_scores(sub, claim, _heads(inputs, arrays)[0])
    if kind.startswith("matrix-"):
        return _matrix(inputs, arrays, claim)
    if kind.startswith("convergence-"):
        return _convergence(sub, inputs, arrays, claim)
    raise Unchecked(claim.get("reason") or f"nothing to verify ({kind}, {claim.get('verdict')})")


def verify_record(rec: dict[str, Any], base: Path = Path(".")) -> tuple[int, list[tuple[str, str, str]]]:
    """Re-check every claim of a certificate record: ``(exit status, [(claim, status, why)])``."""
    if rec.get("format") not in READABLE:
        raise ValueError(f"not an {' or '.join(READABLE)} file (format {rec.get('format')!r})")
    arrays = _arrays(rec, base)
    inputs = rec["inputs"]
    if digest(inputs, arrays) != rec.get("digest"):
        return 1, [("inputs", "refuted", "the inputs do not match the digest recorded with them")]
    try:
        laws = _laws(inputs, arrays) if "laws" in inputs else []
    except Refuted as exc:
        return 1, [("inputs", "refuted", str(exc))]
    out = []
    for claim in rec["claims"]:
        try:
            out.append((claim["id"], "verified", _check(claim, laws, inputs, arrays)))
        except (Refuted, Unchecked) as exc:
            out.append((claim["id"], "refuted" if isinstance(exc, Refuted) else "unchecked", str(exc)))
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:  # a malformed claim
            out.append((str(claim.get("id")), "refuted", f"malformed claim ({type(exc).__name__}: {exc})"))
    status = {s for _, s, _ in out}
    return (1 if "refuted" in status else 3 if "unchecked" in status or not out else 0), out


def verify_file(path: str | Path) -> tuple[int, list[tuple[str, str, str]]]:
    """:func:`verify_record` of a certificate file (its ``.npz`` companion is read beside it)."""
    p = Path(path)
    return verify_record(json.loads(p.read_text(encoding="utf-8")), p.parent)


def main(argv: Sequence[str] | None = None) -> int:
    """The command ``python -m ntkcheck.verify FILE.json``: one line per claim, then the summary."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m ntkcheck.verify FILE.json  (exit 0 verified, 1 refuted, 3 unchecked, 2 unreadable)")
        return 0 if args in (["-h"], ["--help"]) else 2
    try:
        code, rows = verify_file(args[0])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"ntkcheck.verify: {args[0]}: unreadable certificate ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    for cid, status, why in rows:
        print(textwrap.fill(f"{cid}: {status} -- {why}", 100, subsequent_indent="    "))
    print({0: "every claim verified", 1: "REFUTED", 3: "some claims not re-checked, none refuted"}[code])
    return code
