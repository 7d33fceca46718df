r"""Re-check an ntkcheck certificate file, trusting nothing it can recompute.

``ntkcheck decide | gram | screen | certify ... --certificate-out FILE.json`` writes the inputs
of each claim (token laws with exact masses, heads, a matrix and its error bound) and what its
proof used. This package re-derives every claim from those inputs with its own code: it imports
nothing of the rest of ntkcheck and runs on its own (``python -m ntkcheck.verify FILE.json``; or,
with the ``ntkcheck/`` directory on ``sys.path``, ``python -m verify FILE.json``). It needs numpy
and mpmath; python-flint is optional (faster exact algebra and Arb balls, larger size limits).

What it trusts: nothing but the inputs, read at their exact values. Each claim's certificate
kind must be one that proves the claimed (property, verdict) (the table in
theory/certificates.md, "Re-checkable certificates"), every number the file records (a rank, a
bound, a radius, a determinant, gaps, a shift) is compared with what is recomputed, a file whose
claims contradict each other is refused, and the sentence printed for a verified claim is built
from the claim as re-checked, never read from the file (its ``statement`` fields are ignored).
The SHA-256 digest of the inputs is an integrity check (not a signature): the verifier needs no
signature because it re-derives every claim from the inputs it reads.

Exit status: 0 every claim re-proved; 1 a claim or its recorded proof fails, the claims
contradict each other, or the inputs do not match their recorded digest; 3 a claim could not be
re-checked here (too large for this verifier's work bounds, a sympy identity, a library missing,
nothing certified), none refuted; 2 the file is not a readable certificate.

Modules: ``_common`` (reading numbers exactly, the outcomes, the digest), ``_inputs`` (the laws,
heads and matrix, validated), ``_dispatch`` (claim kind -> check, the samples of a claim),
``_consistency`` (contradicting claims), ``_cgf`` (the verdict table) with ``_independence``,
``_dependence``, ``_identity``, ``_series``; ``_gram``; ``_matrix``; ``_exact`` (exact linear
algebra), ``_balls`` (Arb or mpmath intervals), ``_precision`` (the one FLINT precision region).

References: seed 003 Prop. 7, 8, 9, 11; S. M. Rump, "Verification of positive definiteness", BIT
46 (2006) 433-452; N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm. 10.3.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import MALFORMED, Refuted, Unreadable, _arrays, digest
from ._consistency import contradictions
from ._dispatch import check_claim
from ._inputs import read_inputs

__all__ = ["verify_file", "verify_record", "FORMAT", "READABLE", "digest", "main"]

#: the format written: inputs that are not doubles are held as exact rationals
FORMAT = "ntkcheck-certificate/2"
#: the formats read: ``/1`` held every input as float64 (its claims are re-checked for those values)
READABLE = ("ntkcheck-certificate/1", FORMAT)

Row = tuple[str, str, str]


def _claims(rec: Any) -> list[dict[str, Any]]:
    """The file's claims: a list of objects, each with a string ``id`` and ``kind``."""
    if not isinstance(rec, dict):
        raise Unreadable(f"a certificate is a JSON object, this file holds a {type(rec).__name__}")
    if rec.get("format") not in READABLE:
        raise Unreadable(f"not an {' or '.join(READABLE)} file (format {rec.get('format')!r})")
    claims = rec.get("claims")
    if not isinstance(claims, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str)
                                               and isinstance(c.get("kind"), str) for c in claims):
        raise Unreadable("'claims' must be a list of objects, each with a string 'id' and 'kind'")
    if not isinstance(rec.get("inputs"), dict):
        raise Unreadable("'inputs' must be an object")
    return claims


def verify_record(rec: Any, base: Path = Path(".")) -> tuple[int, list[Row]]:
    """Re-check every claim of a certificate record: ``(exit status, [(claim, status, why)])``.

    Raises :class:`ValueError` (``Unreadable``) when the record is not a readable certificate."""
    claims = _claims(rec)
    arrays = _arrays(rec, base)
    try:
        if digest(rec["inputs"], arrays) != rec.get("digest"):
            return 1, [("inputs", "refuted", "the inputs do not match the digest recorded with them")]
        inputs = read_inputs(rec["inputs"], arrays)
    except Refuted as exc:
        return 1, [("inputs", "refuted", str(exc))]
    except MALFORMED as exc:
        raise Unreadable(f"the inputs cannot be read ({type(exc).__name__}: {exc})") from None
    clash = contradictions(claims, len(inputs.laws))
    if clash:
        return 1, clash
    out = [check_claim(claim, inputs) for claim in claims]
    status = {s for _, s, _ in out}
    return (1 if "refuted" in status else 3 if "unchecked" in status or not out else 0), out


def verify_file(path: str | Path) -> tuple[int, list[Row]]:
    """:func:`verify_record` of a certificate file (its ``.npz`` companion is read beside it)."""
    p = Path(path)
    try:
        rec = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise Unreadable(f"not a JSON file ({type(exc).__name__}: {exc})") from None
    return verify_record(rec, p.parent)


def main(argv: Sequence[str] | None = None) -> int:
    """The command ``python -m ntkcheck.verify FILE.json``: one line per claim, then the summary."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m ntkcheck.verify FILE.json  (exit 0 verified, 1 refuted, 3 unchecked, 2 unreadable)")
        return 0 if args in (["-h"], ["--help"]) else 2
    try:
        code, rows = verify_file(args[0])
    except (OSError, ValueError) as exc:
        print(f"ntkcheck.verify: {args[0]}: unreadable certificate ({type(exc).__name__}: {exc})"[:300], file=sys.stderr)
        return 2
    for cid, status, why in rows:
        print(textwrap.fill(f"{cid}: {status} -- {why}", 100, subsequent_indent="    "))
    print({0: "every claim verified", 1: "REFUTED", 3: "some claims not re-checked, none refuted"}[code])
    return code
