"""The inputs of a certificate file, read once and checked to be what they say they are.

Every law is a probability law of one dimension ``d`` shared by all: an empirical law has
distinct atoms and positive masses summing to 1 exactly; a Gaussian, a Laplace law or a
two-component Gaussian mixture has a symmetric positive semidefinite covariance (checked in
rationals); a uniform cube a positive radius. The heads are ``Q`` (H, d, d) and ``b`` (H, d); a
user's matrix is square and finite with a non-negative entrywise error bound. A law kind this
verifier does not know is kept (``dim`` unknown): a claim that needs it is "unchecked".

References: theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ._common import Refuted, _floats, _integer, _q, _values, _vector
from ._exact import psd

#: the law kinds this verifier knows (the token laws and the families of ``ntkcheck decide --family``)
KINDS = ("empirical", "dirac", "gaussian", "uniform-cube", "laplace", "gaussian-mixture")


@dataclass(frozen=True)
class Inputs:
    """What the claims are about: ``laws`` (dicts with exact rationals and ``dim``), the heads
    ``Q``, ``b`` (float64, or exact ``Fraction`` object arrays), a user's matrix and its error."""

    laws: list[dict[str, Any]] = field(default_factory=list)
    dim: int | None = None
    Q: np.ndarray | None = None
    b: np.ndarray | None = None
    matrix: np.ndarray | None = None
    abs_error: float = 0.0


def _matrix_of(v: Any, d: int, what: str) -> list[list[Fraction]]:
    if not isinstance(v, list) or len(v) != d:
        raise Refuted(f"{what} is not a {d} x {d} matrix")
    S = [_vector(row, d, what) for row in v]
    if not psd(S):
        raise Refuted(f"{what} is not symmetric positive semidefinite: no law has it as its covariance")
    return S


def _empirical(law: dict[str, Any], arrays: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    X = _values(law["atoms"], arrays)
    masses = _vector(law["masses"], None, f"law {i}: masses")
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0 or len(masses) != X.shape[0]:
        raise Refuted(f"law {i}: {len(masses)} masses for atoms of shape {X.shape}")
    if any(m <= 0 for m in masses) or sum(masses) != 1:
        raise Refuted(f"law {i}: the masses are not positive with sum 1")
    atoms = [tuple(v if isinstance(v, Fraction) else Fraction(float(v)) for v in row) for row in X.tolist()]
    if len(set(atoms)) != len(atoms):
        raise Refuted(f"law {i}: two atoms are equal (a law is written on its distinct atoms)")
    return {"kind": "empirical", "dim": X.shape[1], "X": X, "atoms": atoms, "masses": masses}


def _family(law: dict[str, Any], i: int) -> dict[str, Any]:
    k = law["kind"]
    if k == "dirac":
        point = _vector(law["point"], None, f"law {i}: point")
        return {"kind": k, "dim": len(point), "point": point}
    if k == "uniform-cube":
        r, d = _q(law["radius"]), _integer(law["dim"], f"law {i}: dim", 1)
        if r <= 0:
            raise Refuted(f"law {i}: a cube's radius must be positive, got {r}")
        return {"kind": k, "dim": d, "radius": r}
    if k == "laplace":
        d = len(law["cov"]) if isinstance(law["cov"], list) else 0
        return {"kind": k, "dim": d, "cov": _matrix_of(law["cov"], d, f"law {i}: cov")}
    key = "mean" if k == "gaussian" else "m"
    m = _vector(law[key], None, f"law {i}: {key}")
    return {"kind": k, "dim": len(m), key: m, "cov": _matrix_of(law["cov"], len(m), f"law {i}: cov")}


def read_laws(raw: Any, arrays: dict[str, np.ndarray]) -> tuple[list[dict[str, Any]], int | None]:
    """Every law with exact rationals and its dimension; the common dimension (``None`` if unknown)."""
    if not isinstance(raw, list):
        raise ValueError("inputs.laws must be a list")
    laws = []
    for i, law in enumerate(raw):
        kind = law["kind"]
        if kind == "empirical":
            laws.append(_empirical(law, arrays, i))
        elif kind in KINDS:
            laws.append(_family(law, i))
        else:
            laws.append({"kind": str(kind), "dim": None})
    dims = {law["dim"] for law in laws if law["dim"] is not None}
    if len(dims) > 1 or 0 in dims:
        raise Refuted(f"the laws have dimensions {sorted(dims)}: one dimension d >= 1 is expected")
    return laws, (dims.pop() if dims else None)


def read_inputs(raw: Any, arrays: dict[str, np.ndarray]) -> Inputs:
    """The inputs of a file: laws, heads, a matrix (each optional)."""
    if not isinstance(raw, dict):
        raise ValueError("inputs must be an object")
    laws, dim = read_laws(raw["laws"], arrays) if "laws" in raw else ([], None)
    Q = b = A = None
    if "heads" in raw:
        Q, b = _values(raw["heads"]["Q"], arrays), _values(raw["heads"]["b"], arrays)
        if Q.ndim != 3 or Q.shape[1] != Q.shape[2] or b.shape != Q.shape[:2] or Q.shape[0] == 0:
            raise Refuted(f"the heads have shapes Q {Q.shape}, b {b.shape}, not (H, d, d) and (H, d)")
        if Q.dtype == np.float64 and not (np.all(np.isfinite(Q)) and np.all(np.isfinite(b))):
            raise Refuted("a head has an entry that is not finite")
    e = 0.0
    if "matrix" in raw:
        A = _floats(raw["matrix"], arrays)
        eq = _q(raw.get("abs_error", 0.0))
        e = float(eq) if Fraction(float(eq)) >= eq else float(np.nextafter(float(eq), np.inf))  # rounded up
        if not (A.ndim == 2 and A.shape[0] == A.shape[1] and A.shape[0] > 0 and np.all(np.isfinite(A))) or e < 0:
            raise Refuted("the matrix is not square, non-empty and finite, or its error bound is negative")
    return Inputs(laws, dim, Q, b, A, e)
