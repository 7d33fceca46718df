r"""What :func:`~ntkcheck.independence.decision.decide` returns: the verdict, its certificates, the decision.

The verdict (:class:`Verdict`), the certificates that are not rank certificates (structural
dependence of quadratic CGFs, weak dependence for the strong property and strong independence
for the weak property, seed 003 Prop. 7), the evidence an ``inconclusive`` carries (null
vectors of truncations: never a proof) and :class:`Decision` itself. The rank certificates
are in :mod:`ntkcheck.independence.rank`, the identities in :mod:`ntkcheck.independence.identities`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from .._records import dispatch, fraction, fractions, restore
from .identities import IdentityProof
from .rank import BallBound, ExactMinor, qstr

__all__ = [
    "decision_sentence",
    "Verdict",
    "Decision",
    "Structural",
    "StrongFromWeak",
    "ViaStrong",
    "Inconclusive",
    "NullVectorEvidence",
    "VerifiedNullVector",
    "TruncationNullSpace",
    "no_truth_value",
    "certificate_from_dict",
]


def no_truth_value(self: Any) -> bool:
    """``__bool__`` of results that carry a verdict: refuse, so ``if decide(...):`` cannot
    read a dependent or inconclusive verdict as success (a dataclass instance is always truthy)."""
    raise TypeError(
        f"the truth value of a {type(self).__name__} is ambiguous: test .independent, .dependent or "
        ".verdict (a Decision), .positive or .status (a GramResult), .agreement (a CrosscheckResult), "
        "or the fields of a report explicitly"
    )


class Verdict(StrEnum):
    """The answer, read as a sentence by :meth:`sentence`."""

    INDEPENDENT = "independent"
    DEPENDENT = "dependent"
    INCONCLUSIVE = "inconclusive"

    def sentence(self, prop: str) -> str:
        if self is Verdict.INDEPENDENT:
            return f"The CGFs are {prop}ly independent modulo affine functions (certified)."
        if self is Verdict.DEPENDENT:
            if prop == "strong":
                return ("A non-zero combination of the CGFs is affine along every direction (certified): they are "
                        "strongly dependent.")
            return "A non-zero combination of the CGFs is affine on R^d (certified): they are weakly dependent."
        return "Neither independence nor dependence could be certified."


# ---------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Structural:
    """Certificate of strong dependence for quadratic CGFs: along any direction the
    :math:`\\Lambda_i^w` lie in :math:`\\mathrm{span}\\{t^2\\} + \\mathrm{Aff}`, of dimension 1 < n.

    ``direction`` is the direction at which ``Decision.null_vector`` and
    ``Decision.affine`` are given (one example; the dependence holds at every ``w``).
    Exact: :attr:`~ntkcheck.cgf.base.Family.quadratic` is a property of the parameters
    (a single distinct atom, a Dirac, a Gaussian, zero covariance), read exactly.
    """

    n: int
    direction: tuple[Fraction, ...] | None = None
    kind: str = "structural"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "n": self.n,
            "direction": None if self.direction is None else [qstr(v) for v in self.direction],
            "statement": f"every CGF is a polynomial of degree <= 2, so along every direction w the {self.n} functions "
            "Lambda_i^w lie in span{t^2} modulo affine functions (dimension 1): dependent for every w",
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Structural:
        return restore(cls, d)


@dataclass(frozen=True)
class StrongFromWeak:
    """Certificate: weak dependence implies strong dependence (seed 003 Prop. 7, contrapositive)."""

    weak: IdentityProof
    kind: str = "weak-dependence"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "statement": "sum_i c_i Lambda_i is affine on R^d, hence along every direction (Prop. 7 contrapositive)",
            "identity": self.weak.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StrongFromWeak:
        return restore(cls, {**d, "weak": d["identity"]})


@dataclass(frozen=True)
class ViaStrong:
    """Certificate of weak independence from strong independence at one direction (Prop. 7)."""

    direction: tuple[Fraction, ...]
    strong: Any
    kind: str = "prop7-strong-implies-weak"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "direction": [qstr(v) for v in self.direction],
            "statement": "strongly independent at this direction, hence weakly independent (seed 003 Prop. 7)",
            "strong": self.strong.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ViaStrong:
        return restore(cls, d, strong=certificate_from_dict)


@dataclass(frozen=True)
class NullVectorEvidence:
    """Evidence, not proof: a null vector of the truncated coefficient matrix at two precisions.

    The residual ``|C^T c| / |C|`` (``C`` the column-scaled truncation, orders ``2..K``)
    is at the level of each working precision and the vectors found at both agree. This
    says nothing about orders above ``K``: distinct laws can share their first ``K``
    cumulants. An exact identity would decide it (:mod:`ntkcheck.independence.identities`).

    Attributes
    ----------
    orders : int
        ``K``: the truncation has orders ``2..K``.
    residuals : (float, float)
    prec_bits : (int, int)
    vector : tuple of float
        The null vector at the higher precision (largest entry 1 in absolute value).
    directions : tuple of tuple of Fraction
    """

    orders: int
    residuals: tuple[float, float]
    prec_bits: tuple[int, int]
    vector: tuple[float, ...] = ()
    directions: tuple[tuple[Fraction, ...], ...] = ()
    kind: str = "null-vector-two-precisions"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "orders": f"2..{self.orders}",
            "vector": list(self.vector),
            "directions": [[qstr(v) for v in w] for w in self.directions],
            "residuals": list(self.residuals),
            "prec_bits": list(self.prec_bits),
            "statement": f"evidence, not proof: residual {self.residuals[0]:.1e} at {self.prec_bits[0]} bits and "
            f"{self.residuals[1]:.1e} at {self.prec_bits[1]} bits for orders 2..{self.orders}; higher orders may differ",
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NullVectorEvidence:
        return restore(cls, {**d, "orders": int(str(d["orders"]).rpartition("..")[2])})


#: the former name (the evidence used to be reported as a dependence; it no longer is)
VerifiedNullVector = NullVectorEvidence


@dataclass(frozen=True)
class TruncationNullSpace:
    """Evidence, not proof: exact null vectors of the truncation ``2..K`` with no identity found.

    Attributes
    ----------
    K : int
    basis : tuple of tuple of Fraction
        Primitive integer vectors spanning the null space of the truncation (mod-p
        vectors lifted to rationals when ``n`` is large; at most 8 shown).
    directions : tuple of tuple of Fraction
    """

    K: int
    basis: tuple[tuple[Fraction, ...], ...]
    directions: tuple[tuple[Fraction, ...], ...]
    kind: str = "truncation-null-space"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "K": self.K,
            "basis": [[qstr(v) for v in c] for c in self.basis],
            "directions": [[qstr(v) for v in w] for w in self.directions],
            "statement": f"evidence, not proof: the truncation 2..{self.K} has {len(self.basis)} null vector(s) "
            "(shown), but no exact identity proves any combination affine; higher orders may differ",
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TruncationNullSpace:
        return restore(cls, d)


@dataclass(frozen=True)
class Inconclusive:
    """What was seen when nothing could be certified.

    Attributes
    ----------
    margin : float or None
        The float64 margin (see :class:`Decision`).
    tried : tuple of str
        Every step, in order.
    suggestion : str
        What would decide it.
    orders : tuple of int
        The truncation orders ``K`` tried.
    bits : tuple of int
        The Arb working precisions tried (interval and float routes).
    evidence : tuple
        :class:`NullVectorEvidence` and/or :class:`TruncationNullSpace` when the
        truncations had null vectors.
    timed_out : bool
        Whether the time budget ran out.
    """

    margin: float | None
    tried: tuple[str, ...]
    suggestion: str
    orders: tuple[int, ...] = ()
    bits: tuple[int, ...] = ()
    evidence: tuple[Any, ...] = ()
    timed_out: bool = False
    kind: str = "none"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "margin": self.margin,
            "tried": list(self.tried),
            "suggestion": self.suggestion,
            "orders": list(self.orders),
            "bits": list(self.bits),
            "evidence": [e.to_dict() for e in self.evidence],
            "timed_out": self.timed_out,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Inconclusive:
        return restore(cls, d, evidence=lambda v: tuple(certificate_from_dict(e) for e in v))


@dataclass(frozen=True)
class Decision:
    """Result of :func:`decide`.

    Attributes
    ----------
    verdict : Verdict
    property : {"weak", "strong"}
    method : str
        What decided it: ``exact`` (mod-p minor), ``interval`` (Arb ladder), ``float``
        (Arb at 53 bits), ``gap-condition``, ``vandermonde``, ``identity``,
        ``structural``; ``none`` for ``inconclusive``.
    precision : str
        ``"exact"`` or the working precision in bits.
    margin : float or None
        Smallest relative singular value of the scaled coefficient matrix seen in the
        float64 screen (``0.0``: below float64 resolution). ``None`` when an exact
        sufficient condition decided before any numerics.
    certificate : object with ``kind`` and ``to_dict()``
    direction : tuple of Fraction or None
        The direction that certifies (strong property), or the one tested.
    null_vector : tuple of Fraction or None
        ``c`` with :math:`\\sum_i c_i\\Lambda_i` affine, when dependent (never set by
        numerical evidence: that is in the certificate of an ``inconclusive``).
    affine : (alpha, beta) or None
        :math:`\\sum_i c_i \\Lambda_i(a) = \\langle\\alpha, a\\rangle + \\beta` (along ``w``: 1-D alpha).
    n, dim : int
    trail : tuple of str
        Every step tried.
    seconds : float
    K : int
        The truncation order of the certificate (orders ``2..K``), or the highest tried.
    notes : tuple of str
    orders : tuple of int
        Every truncation order tried, in order.
    """

    verdict: Verdict
    property: str
    method: str
    precision: str
    margin: float | None
    certificate: Any
    direction: tuple[Fraction, ...] | None
    null_vector: tuple[Any, ...] | None
    affine: tuple[tuple[Any, ...], Any] | None
    n: int
    dim: int
    trail: tuple[str, ...] = ()
    seconds: float = 0.0
    K: int = 0
    notes: tuple[str, ...] = ()
    orders: tuple[int, ...] = ()

    def __repr__(self) -> str:
        parts = [f"Decision({self.property}: {self.verdict.value}", f"method={self.method}", f"precision={self.precision}"]
        if self.margin is not None:
            parts.append(f"margin={self.margin:.2e}")
        if self.direction is not None:
            parts.append(f"direction={format_vector(self.direction)}")
        if self.null_vector is not None:
            parts.append(f"null_vector={format_vector(self.null_vector)}")
        parts.append(f"K={self.K}")
        parts.append(f"certificate={getattr(self.certificate, 'kind', '?')})")
        return ", ".join(parts)

    # ``if decide(...):`` would be True for every verdict: refuse with a pointer to the fields
    __bool__ = no_truth_value

    @property
    def independent(self) -> bool:
        return self.verdict is Verdict.INDEPENDENT

    @property
    def dependent(self) -> bool:
        return self.verdict is Verdict.DEPENDENT

    @property
    def sentence(self) -> str:
        """The verdict as a sentence; "certified" only for certified verdicts, and the direction
        wherever the verdict depends on one (seed 003 eq. 33: strong independence is independence
        along SOME direction ``w``; dependence along one ``w`` says nothing about it)."""
        if self.verdict is Verdict.INCONCLUSIVE:
            return self._inconclusive_sentence()
        w = "" if self.direction is None else format_vector(self.direction)
        if self.verdict is Verdict.INDEPENDENT:
            if self.property == "strong" and w:
                return (f"The CGFs are strongly independent modulo affine functions (certified along w = {w}: no "
                        "non-zero combination of the Lambda_i(t w) is affine in t).")
            via = f", via strong independence along w = {w}" if w and self.property == "weak" else ""
            return f"The CGFs are {self.property}ly independent modulo affine functions (certified{via})."
        return self.verdict.sentence(self.property)

    def _inconclusive_sentence(self) -> str:
        cert = self.certificate
        evidence = getattr(cert, "evidence", ())
        along = [e for e in evidence if getattr(e, "kind", "").endswith("-identity")]
        if along and self.direction is not None:
            s = (f"Along w = {format_vector(self.direction)} the CGFs are dependent modulo affine functions (an exact "
                 "identity); strong independence asks for some direction where they are independent, so this "
                 "direction decides nothing about it: not certified either way.")
        else:
            at = (f" along w = {format_vector(self.direction)}" if self.property == "strong" and self.direction
                  else "")
            s = Verdict.INCONCLUSIVE.sentence(self.property).rstrip(".") + at + "."
        if getattr(cert, "timed_out", False):
            s += " The time budget ran out."
        if len(evidence) > len(along):
            s += (" The truncated coefficients have a null vector (evidence of dependence, not a proof: "
                  "no exact identity was found).")
        return s

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "property": self.property,
            "method": self.method,
            "precision": self.precision,
            "margin": self.margin,
            "certificate": self.certificate.to_dict() if hasattr(self.certificate, "to_dict") else str(self.certificate),
            "direction": None if self.direction is None else [qstr(v) for v in self.direction],
            "null_vector": None if self.null_vector is None else [qstr(v) for v in self.null_vector],
            "affine": None
            if self.affine is None
            else {"alpha": [qstr(v) for v in self.affine[0]], "beta": qstr(self.affine[1])},
            "n": self.n,
            "dim": self.dim,
            "K": self.K,
            "orders": list(self.orders),
            "trail": list(self.trail),
            "notes": list(self.notes),
            "seconds": self.seconds,
            "sentence": self.sentence,
            "outcome": {"exit_code": self.exit_code, "conclusion": self.verdict.value},
            "exit_code": self.exit_code,
        }

    @property
    def exit_code(self) -> int:
        """What ``ntkcheck decide`` exits with: 0 independent, 1 dependent, 3 inconclusive."""
        return {"independent": 0, "dependent": 1}.get(self.verdict.value, 3)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Decision:
        """The decision from its :meth:`to_dict` (a saved ``ntkcheck decide --json`` object too)."""
        return restore(cls, d, certificate=certificate_from_dict, null_vector=fractions,
                       affine=lambda a: None if a is None else (fractions(a["alpha"]), fraction(a["beta"])))


def format_vector(v: Sequence[Any], head: int = 8) -> str:
    """``(v_1, ..., v_k)`` for humans: long vectors show their first entries and their length."""
    items = [qstr(x) for x in v]
    if len(items) <= head:
        return "(" + ", ".join(items) + ")"
    return "(" + ", ".join(items[: head - 1]) + f", ..., {items[-1]}) [{len(items)} entries]"


def decision_sentence(dec: Any) -> str:
    """The plain-English verdict of any decision result (``sentence`` is a property of
    :class:`Decision`, a method on some result types, absent on others)."""
    s = getattr(dec, "sentence", None)
    if callable(s):
        s = s()
    return s if isinstance(s, str) else dec.verdict.sentence(dec.property)


def certificate_from_dict(d: Any) -> Any:
    """Any certificate or evidence of a :class:`Decision` from its ``to_dict()``, by its ``kind``."""
    from .conditions import GapCondition, VandermondeCondition

    table: dict[str, Any] = {c.kind: c.from_dict for c in (  # type: ignore[attr-defined]
        Structural, StrongFromWeak, ViaStrong, NullVectorEvidence, TruncationNullSpace, Inconclusive,
        ExactMinor, BallBound, GapCondition, VandermondeCondition)}
    for kind in ("product-identity", "term-identity", "symbolic-identity"):
        table[kind] = IdentityProof.from_dict
    return dispatch(table)(d)
