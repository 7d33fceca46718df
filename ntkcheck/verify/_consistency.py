r"""Claims of one file that cannot all be true: the file is refused before any claim is checked.

Each claim is read as an assertion about a set of samples (before its proof is checked):

* weak dependence on ``T`` (a ``cgf`` claim, or the identity behind a Prop. 8 singularity)
  contradicts weak or strong independence on any ``S`` containing ``T`` (pad ``c`` with zeros);
  strong dependence (every direction) contradicts strong independence on ``S`` containing ``T``;
  dependence along ``w`` contradicts strong independence at the same ``w``;
* a singular Gram on ``T`` (Prop. 8's kernel vector, supported on the samples with
  :math:`c_i \ne 0`; equal scores in one sample) contradicts a positive lower bound for the Gram
  of any ``S`` containing ``T`` (the heads are the file's, for every Gram claim);
* a positive lower bound on a matrix contradicts its singularity or indefiniteness.

``T`` is the support of the recorded ``c`` when it has one, else the claim's samples. True
claims never contradict each other, so this refuses nothing a correct file says; it catches a file
where one claim would be verified and the other is false or could not be re-checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._common import MALFORMED, _q

_INDEPENDENT = ("indep-weak", "indep-strong")


@dataclass(frozen=True)
class _Assertion:
    cid: str
    what: str
    samples: frozenset[int]
    direction: tuple[Any, ...] | None = None


def _support(c: Any, scope: list[int]) -> frozenset[int]:
    """The samples with ``c_i != 0`` (global indices); the claim's samples when ``c`` cannot be read."""
    try:
        got = frozenset(scope[i] for i, v in enumerate(c) if _q(v) != 0) if len(c) == len(scope) else frozenset()
    except MALFORMED:
        got = frozenset()
    return got or frozenset(scope)


def _direction(v: Any) -> tuple[Any, ...] | None:
    try:
        return None if v is None else tuple(_q(x) for x in v)
    except MALFORMED:
        return None


def _null_vector(cert: Any) -> Any:
    if not isinstance(cert, dict):
        return None
    inner = cert.get("identity") if cert.get("kind") == "weak-dependence" else cert
    return inner.get("null_vector") if isinstance(inner, dict) else None


def _cgf(claim: dict[str, Any], cid: str, scope: list[int]) -> list[_Assertion]:
    prop, verdict, w = claim.get("property"), claim.get("verdict"), _direction(claim.get("direction"))
    if verdict == "independent" and prop in ("weak", "strong"):
        return [_Assertion(cid, f"indep-{prop}", frozenset(scope), w)]
    if verdict != "dependent" or prop not in ("weak", "strong"):
        return []
    T = _support(_null_vector(claim.get("certificate")), scope)
    if prop == "weak":
        return [_Assertion(cid, "dep-weak", T)]
    return [_Assertion(cid, "dep-strong" if w is None else "dep-along", T, w)]


def _assertions(claim: dict[str, Any], n_laws: int) -> list[_Assertion]:
    cid, kind = str(claim.get("id")), claim.get("kind")
    raw = claim.get("samples")
    try:
        scope = list(range(n_laws)) if raw is None else [int(i) for i in raw]
    except MALFORMED:
        return []
    if kind == "cgf":
        return _cgf(claim, cid, scope)
    if kind == "gram-lower-bound":
        return [_Assertion(cid, "gram-positive", frozenset(scope))]
    if kind == "gram-singular":
        T = _support(claim.get("c"), scope)
        return [_Assertion(cid, "gram-singular", T), _Assertion(cid, "dep-weak", T)]
    if kind == "gram-equal-scores":
        try:
            return [_Assertion(cid, "gram-singular", frozenset([int(claim.get("sample"))]))]
        except MALFORMED:
            return []
    matrix = {"matrix-lower-bound": "matrix-positive", "matrix-singular": "matrix-singular",
              "matrix-indefinite": "matrix-indefinite"}
    return [_Assertion(cid, matrix[kind], frozenset())] if kind in matrix else []


def _clash(a: _Assertion, b: _Assertion) -> str | None:
    """Why ``a`` (a dependence or singularity) and ``b`` cannot both hold, or None."""
    inside = a.samples <= b.samples
    if a.what == "dep-weak" and b.what in _INDEPENDENT and inside:
        return "a weak dependence among samples that another claim calls independent"
    if a.what == "dep-strong" and b.what == "indep-strong" and inside:
        return "a strong dependence among samples that another claim calls strongly independent"
    if a.what == "dep-along" and b.what == "indep-strong" and inside and a.direction == b.direction is not None:
        return "a dependence along w among samples that another claim calls strongly independent at the same w"
    if a.what == "gram-singular" and b.what == "gram-positive" and inside:
        return "a singular Gram inside a Gram that another claim bounds away from 0"
    if b.what == "matrix-positive" and a.what in ("matrix-singular", "matrix-indefinite"):
        return f"a matrix called {a.what.removeprefix('matrix-')} and bounded away from 0 by another claim"
    return None


def contradictions(claims: list[dict[str, Any]], n_laws: int) -> list[tuple[str, str, str]]:
    """Rows ``(ids, "refuted", why)`` for every pair of claims that contradict each other."""
    found = [x for c in claims for x in _assertions(c, n_laws)]
    rows = []
    for a in found:
        for b in found:
            why = _clash(a, b) if a.cid != b.cid or a.what != b.what else None
            if why is not None:
                rows.append((f"{a.cid} / {b.cid}", "refuted", f"the claims contradict each other: {why}"))
    return rows
