r"""The ``cgf`` claims: a verdict on a property, dispatched on the certificate kinds that prove it.

Weak independence (seed 003 Def. 6): :math:`\sum_i c_i \Lambda_i` affine on :math:`\mathbb R^d`
only for :math:`c = 0`. Strong independence (eq. 33): the same along some one direction ``w``.
Strong implies weak (Prop. 7), so weak dependence implies strong dependence. The table
:data:`PROVES` says which certificate kinds prove which (property, verdict), and why; a known
kind that does not prove the claimed pair is **refuted** (a verdict flipped against its own
certificate), an unknown one is "unchecked". The printed statement is built here from the claim
as re-checked, never read from the file.

References: seed 003 Def. 6, eq. 33, Prop. 7, 9, 11; theory/certificates.md,
"Re-checkable certificates" (the same table, with the reasons).
"""

from __future__ import annotations

from typing import Any

from ._common import Checked, Refuted, Unchecked, short
from ._dependence import SYMBOLIC, strong_dependence, weak_dependence
from ._independence import direction, strong, weak

#: (property, verdict) -> {certificate kind: why it proves it}
PROVES: dict[tuple[str, str], dict[str, str]] = {
    ("weak", "independent"): {
        "prop7-strong-implies-weak": "strong independence at its direction, then Prop. 7",
        "exact-minor": "a non-singular minor of Taylor orders k >= 2 along one or more directions",
        "ball-bound": "a non-singular minor of Taylor orders k >= 2 along one or more directions",
        "gap-condition": "strong independence at its direction (Prop. 9), then Prop. 7",
        "vandermonde": "strong independence at its direction (Prop. 11), then Prop. 7",
    },
    ("strong", "independent"): {
        "exact-minor": "a non-singular minor of Taylor orders k >= 2 along one direction",
        "ball-bound": "a non-singular minor of Taylor orders k >= 2 along one direction",
        "gap-condition": "the gap condition at its direction (Prop. 9)",
        "vandermonde": "the Vandermonde condition at its direction (Prop. 11)",
    },
    ("weak", "dependent"): {
        "product-identity": "an identity on all of R^d",
        "term-identity": "an identity on all of R^d",
        "weak-dependence": "the identity on all of R^d it wraps",
    },
    ("strong", "dependent"): {
        "weak-dependence": "an identity on all of R^d holds on every line (Prop. 7)",
        "product-identity": "an identity on all of R^d (every line), or along the claim's one direction",
        "term-identity": "an identity on all of R^d (every line), or along the claim's one direction",
        "structural": "every CGF of degree <= 2 and at least two laws: dependent along every line",
    },
}
#: kinds written as evidence or as nothing: they never prove a verdict
NOT_PROOFS = ("null-vector-two-precisions", "truncation-null-space", "none")


def _proves(kind: str) -> str:
    pairs = [f"{p} {v}" for (p, v), kinds in PROVES.items() if kind in kinds]
    return " or ".join(pairs) if pairs else "nothing (evidence is not a proof)"


def _certificate(claim: dict[str, Any], prop: str, verdict: str) -> dict[str, Any]:
    cert = claim["certificate"]
    if not isinstance(cert, dict) or not isinstance(cert.get("kind"), str):
        raise ValueError("the certificate must be an object with a kind")
    kind = cert["kind"]
    if kind in PROVES[(prop, verdict)]:
        return cert
    if kind == SYMBOLIC and verdict == "dependent":
        raise Unchecked("an identity proved by sympy (symbolic-identity) has no standalone check here")
    if kind == SYMBOLIC or kind in NOT_PROOFS or any(kind in k for k in PROVES.values()):
        raise Refuted(f"a {kind} certificate proves {_proves(kind) if kind != SYMBOLIC else 'dependence'}, "
                      f"not {prop} {verdict}: the verdict does not follow from its certificate")
    raise Unchecked(f"no standalone check for a {kind!r} certificate")


def check(claim: dict[str, Any], laws: list[dict[str, Any]], d: int | None, who: str) -> Checked:
    """Re-check a ``cgf`` claim on ``laws`` (``who`` names them in the statement)."""
    prop, verdict = claim["property"], claim["verdict"]
    if verdict in ("inconclusive", None):
        raise Unchecked("nothing certified: the verdict is inconclusive")
    if prop not in ("weak", "strong") or verdict not in ("independent", "dependent"):
        raise Refuted(f"a claim of {prop!r} {verdict!r}: the properties are weak and strong, the verdicts "
                      "independent and dependent")
    if not laws:
        raise Refuted("the claim is about no law")
    cert = _certificate(claim, prop, verdict)
    w = None if claim.get("direction") is None else direction(claim["direction"], d, "the claim's direction")
    if verdict == "independent":
        if prop == "weak":
            return Checked(f"{who} are weakly independent: no c != 0 makes sum_i c_i Lambda_i affine on R^d",
                           weak(laws, cert, w, d))
        at, how = strong(laws, cert, w, d)
        return Checked(f"{who} are strongly independent: along w = {short(at)}, no c != 0 makes "
                       "t -> sum_i c_i Lambda_i(t w) affine", how)
    if prop == "weak":
        if w is not None:
            raise Refuted("a weak dependence is on all of R^d: the claim names a direction")
        text, how = weak_dependence(laws, cert, d)
    else:
        text, how = strong_dependence(laws, cert, d, w)
    return Checked(f"{who} are {text}", how)
