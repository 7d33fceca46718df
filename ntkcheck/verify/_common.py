"""Reading a certificate file's inputs at their exact values, and the two ways a check ends.

An input array is written in one of two forms (theory/certificates.md, "Re-checkable
certificates"): float64 (``{"shape", "data"}`` inline, or a float64 array in the ``.npz``
companion), whose entries are the dyadic rationals they are; or exact rationals
(``{"shape", "exact": ["1/10", ...]}`` inline, or an ASCII string array in the ``.npz``), written
when a value given is not a double. Either way every entry is read here as the rational it is:
nothing is rounded before a claim is re-derived.
"""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np


class Refuted(Exception):
    """The claim does not hold, or its proof does not."""


class Unchecked(Exception):
    """The claim could not be re-checked here."""


def digest(inputs: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the inputs: their canonical JSON, then each array's name, dtype, shape and bytes."""
    h = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _arrays(rec: dict[str, Any], base: Path) -> dict[str, np.ndarray]:
    if not rec.get("arrays"):
        return {}
    with np.load(base / rec["arrays"], allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _q(v: Any) -> Fraction:
    """A JSON number or string as the rational it denotes (a float is the double it is)."""
    return Fraction(v) if isinstance(v, (int, str)) else Fraction(float(v))


def _rationals(entries: list[Any], shape: Any) -> np.ndarray:
    out = np.empty(len(entries), dtype=object)
    out[:] = [_q(v) for v in entries]
    return out.reshape(shape)


def _values(v: Any, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """An input array at its exact values: float64 as written, or an object array of ``Fraction``
    when the file holds exact rationals (a value given that is not a double)."""
    if isinstance(v, dict) and "npz" in v:
        a = arrays[v["npz"]]
        if a.dtype.kind == "S":
            return _rationals([s.decode("ascii") for s in a.reshape(-1)], a.shape)
        if a.dtype != np.float64:
            raise ValueError(f"array {v['npz']!r} has dtype {a.dtype}: neither float64 nor exact rationals")
        return np.asarray(a)
    if "exact" in v:
        return _rationals(list(v["exact"]), v["shape"])
    return np.asarray(v["data"], dtype=np.float64).reshape(v["shape"])


def _floats(v: Any, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """A float64 input array (a user's matrix, a vector): exact rationals are not expected there."""
    a = _values(v, arrays)
    if a.dtype != np.float64:
        raise ValueError("a float64 array was expected (a matrix or a vector), exact rationals were found")
    return a


def exact(a: np.ndarray) -> bool:
    """Whether ``a`` (from :func:`_values`) holds exact rationals rather than float64."""
    return a.dtype == object


def _rat(v: Any) -> Any:  # a family's JSON parameters, exactly (an integer ``dim`` stays one)
    if isinstance(v, list):
        return [_rat(x) for x in v]
    return v if isinstance(v, int) and not isinstance(v, bool) else _q(v)


def _empirical(law: dict[str, Any], arrays: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    X = _values(law["atoms"], arrays)
    masses = [_q(m) for m in law["masses"]]
    if X.ndim != 2 or X.shape[0] == 0 or len(masses) != X.shape[0]:
        raise Refuted(f"law {i}: {len(masses)} masses for atoms of shape {X.shape}")
    if any(m <= 0 for m in masses) or sum(masses) != 1:
        raise Refuted(f"law {i}: the masses are not positive with sum 1")
    atoms = [tuple(Fraction(v) for v in row) for row in X.tolist()]  # a NaN or inf: ValueError
    if len(set(atoms)) != len(atoms):
        raise Refuted(f"law {i}: two atoms are equal (a law is written on its distinct atoms)")
    return {"kind": "empirical", "X": X, "atoms": atoms, "masses": masses}


def _laws(inputs: dict[str, Any], arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Every law as ``{"kind", ...}`` with exact rationals; an empirical law also keeps its atoms
    as written (``X``: float64, or an object array of ``Fraction``) for the Arb enclosures."""
    out = []
    for i, law in enumerate(inputs["laws"]):
        if law["kind"] == "empirical":
            out.append(_empirical(law, arrays, i))
        else:
            out.append({"kind": law["kind"], **{key: _rat(v) for key, v in law.items() if key != "kind"}})
    return out


def _heads(inputs: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The heads ``Q`` (H, d, d) and ``b`` (H, d) as written (float64, or exact ``Fraction``)."""
    heads = inputs["heads"]
    Q, b = _values(heads["Q"], arrays), _values(heads["b"], arrays)
    if Q.ndim != 3 or Q.shape[1] != Q.shape[2] or b.shape != Q.shape[:2] or Q.shape[0] == 0:
        raise Refuted(f"the heads have shapes Q {Q.shape}, b {b.shape}, not (H, d, d) and (H, d)")
    return Q, b
