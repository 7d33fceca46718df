r"""Certificates of dependence, re-derived: an identity on :math:`\mathbb R^d` or along a line, or structure.

* **Weak dependence** (some :math:`c \ne 0` with :math:`\sum_i c_i\Lambda_i` affine on
  :math:`\mathbb R^d`) only from an identity on all of :math:`\mathbb R^d` (``direction`` null): an
  identity along one line says nothing about the others.
* **Strong dependence** (dependent along *every* direction) from an identity on
  :math:`\mathbb R^d` (it restricts to every line: the contrapositive of Prop. 7; the
  ``weak-dependence`` wrapper), or from the structure: every CGF a polynomial of degree
  :math:`\le 2` (Diracs, one-atom laws, Gaussians) and at least two laws, so along every line the
  CGFs lie in :math:`\mathrm{span}\{t^2\}` modulo affine functions. Never from one direction.
* **Dependence along the claim's direction only** (``decide --property strong --direction w``):
  from an identity along that same ``w``, or from any of the above.

References: seed 003 Prop. 7; theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ._common import Refuted, Unchecked, _integer, short
from ._identity import parse, product_identity, term_identity

#: identities re-expanded here, and the one that is not (it was proved by sympy)
IDENTITIES = ("product-identity", "term-identity")
SYMBOLIC = "symbolic-identity"


def identity(laws: list[dict[str, Any]], cert: dict[str, Any],
             d: int | None) -> tuple[list[Fraction], list[Fraction], list[Fraction] | None, str]:
    """Re-check an identity: ``(c, alpha, direction or None, how)``."""
    kind = cert["kind"]
    if kind == SYMBOLIC:
        raise Unchecked("an identity proved by sympy (symbolic-identity) has no standalone check here")
    if kind not in IDENTITIES:
        raise Refuted(f"a {kind} certificate is not an identity")
    c, alpha, w = parse(cert, len(laws), d)
    (product_identity if kind == "product-identity" else term_identity)(laws, c, alpha, w)
    form = "exponential polynomials" if kind == "product-identity" else "closed-form terms"
    return c, alpha, w, f"the {form} of both sides re-expanded exactly and equal"


def structural(laws: list[dict[str, Any]], cert: dict[str, Any]) -> str:
    """Every CGF is a polynomial of degree <= 2, and there are at least two laws."""
    if cert.get("n") is not None and _integer(cert["n"], "n") != len(laws):
        raise Refuted(f"the certificate counts {cert['n']} laws, the claim has {len(laws)}")
    quadratic = all(law["kind"] in ("dirac", "gaussian") or (law["kind"] == "empirical" and len(law["atoms"]) == 1)
                    for law in laws)
    if not (quadratic and len(laws) >= 2):
        raise Refuted("not every CGF is a polynomial of degree <= 2 (Diracs, one-atom laws, Gaussians), or there "
                      "are fewer than two laws")
    return "every law is a Dirac, a one-atom law or a Gaussian: each CGF is a polynomial of degree <= 2"


def _identity_text(c: list[Fraction], alpha: list[Fraction], w: list[Fraction] | None) -> str:
    if w is None:
        return f"sum_i c_i Lambda_i(a) = <alpha, a> for every a in R^d, c = {short(c)}, alpha = {short(alpha)}"
    return f"sum_i c_i Lambda_i(t w) = {alpha[0]} t for every t, w = {short(w)}, c = {short(c)}"


def weak_dependence(laws: list[dict[str, Any]], cert: dict[str, Any], d: int | None) -> tuple[str, str]:
    """``(statement, how)`` of weak dependence: an identity on R^d (also inside a ``weak-dependence`` wrapper)."""
    inner = cert["identity"] if cert["kind"] == "weak-dependence" else cert
    if not isinstance(inner, dict):
        raise ValueError("the wrapped identity must be an object")
    c, alpha, w, how = identity(laws, inner, d)
    if w is not None:
        raise Refuted(f"the identity holds along w = {short(w)} only: weak dependence needs an identity on all of "
                      "R^d (an identity along one line proves nothing about the others)")
    return f"weakly dependent: {_identity_text(c, alpha, None)}", how


def strong_dependence(laws: list[dict[str, Any]], cert: dict[str, Any], d: int | None,
                      along: list[Fraction] | None) -> tuple[str, str]:
    """``(statement, how)`` of strong dependence (``along`` None: every direction), or of dependence
    along the claim's one direction ``along``."""
    kind = cert["kind"]
    if kind == "structural":
        how = structural(laws, cert)
        where = "every direction" if along is None else f"every direction (w = {short(along)} among them)"
        return (f"strongly dependent: along {where} the CGFs lie in span{{t^2}} modulo affine functions, a space of "
                f"dimension 1 < {len(laws)} laws"), how
    if kind == "weak-dependence":
        text, how = weak_dependence(laws, cert, d)
        return f"strongly {text.removeprefix('weakly ')}, hence on every line (Prop. 7)", how
    c, alpha, w, how = identity(laws, cert, d)
    if w is None:
        return f"strongly dependent: {_identity_text(c, alpha, None)}, hence on every line (Prop. 7)", how
    if along is None:
        raise Refuted(f"the identity holds along w = {short(w)} only: strong dependence needs every direction "
                      "(an identity on R^d, or the structural certificate)")
    if w != along:
        raise Refuted("the identity's direction differs from the claim's")
    return (f"dependent along w = {short(w)} only (not strong dependence, which needs every direction): "
            f"{_identity_text(c, alpha, w)}"), how
