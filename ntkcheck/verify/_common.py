"""The three ways a check ends, the digest, and reading a file's numbers exactly and strictly.

A check ends verified (it returns a :class:`Checked`: the statement derived from the claim it
re-proved, and how), :class:`Refuted` (the claim or its recorded proof fails) or
:class:`Unchecked` (it cannot be re-checked here: too large, a dependency missing, a proof this
verifier has no code for). A file that is not a certificate at all is :class:`Unreadable`.

An input array is written in one of two forms (theory/certificates.md, "Re-checkable
certificates"): float64 (``{"shape", "data"}`` inline, or a float64 array in the ``.npz``
companion), whose entries are the dyadic rationals they are; or exact rationals
(``{"shape", "exact": ["1/10", ...]}`` inline, or an ASCII string array in the ``.npz``), written
when a value given is not a double. Either way every entry is read as the rational it is: nothing
is rounded before a claim is re-derived. Numbers are read strictly: a JSON number, or a string
``"p"``, ``"p/q"`` or ``"d.ddd"`` (no exponent: ``"1e1000000000"`` would be a number the size of
the file's budget, not of the file).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import zipfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np


class Refuted(Exception):
    """The claim does not hold, or its proof does not."""


class Unchecked(Exception):
    """The claim could not be re-checked here."""


class Unreadable(ValueError):
    """The file is not a certificate this verifier can read (exit status 2)."""


@dataclass(frozen=True)
class Checked:
    """A claim re-proved: what it states (derived from the checked claim, never read from the
    file) and how the verifier proved it."""

    statement: str
    how: str


#: errors that mean "these fields are not what the format says" (a malformed file or claim)
MALFORMED = (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, OverflowError,
             RecursionError)

#: digits a rational's numerator or denominator may have (Python's own limit on int() is 4300)
_RATIONAL = re.compile(r"[+-]?\d{1,4000}(?:/\d{1,4000}|\.\d{1,4000})?")


def digest(inputs: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the inputs: their canonical JSON, then each array's name, dtype, shape and bytes.

    It is an integrity check of the inputs (a file changed by accident, or an array companion that
    belongs to another file), not a signature: anyone can recompute it. The verifier needs no more,
    because it trusts nothing else in the file: every claim is re-derived from these inputs."""
    h = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _arrays(rec: dict[str, Any], base: Path) -> dict[str, np.ndarray]:
    """The ``.npz`` companion named in the file (a file beside it; read without unpickling)."""
    name = rec.get("arrays")
    if not name:
        return {}
    if not isinstance(name, str) or Path(name).name != name:
        raise Unreadable(f"the array companion must be a file name beside the certificate, got {name!r}")
    try:
        with np.load(base / name, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise Unreadable(f"the array companion {name!r} cannot be read ({type(exc).__name__}: {exc})") from None


def _q(v: Any) -> Fraction:
    """A JSON number or a rational string as the rational it denotes (a float is the double it is)."""
    if isinstance(v, bool):
        raise ValueError(f"{v!r} is not a number")
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{v!r} is not a finite number")
        return Fraction(v)
    if isinstance(v, str) and _RATIONAL.fullmatch(v):
        return Fraction(v)  # "1/0": ZeroDivisionError, a malformed number
    raise ValueError(f"{v!r} is not an exact rational (a number, or a string 'p', 'p/q', 'd.ddd')")


def _integer(v: Any, what: str, low: int | None = None) -> int:
    """An integer field (not a bool, not a float), at least ``low``."""
    if isinstance(v, bool) or not isinstance(v, int) or (low is not None and v < low):
        raise ValueError(f"{what}: expected an integer{'' if low is None else f' >= {low}'}, got {v!r}")
    return v


def _vector(v: Any, n: int | None, what: str) -> list[Fraction]:
    """A list of rationals, of length ``n`` when given (a longer or shorter one is refuted)."""
    if not isinstance(v, list):
        raise ValueError(f"{what}: expected a list of numbers, got {type(v).__name__}")
    out = [_q(x) for x in v]
    if n is not None and len(out) != n:
        raise Refuted(f"{what} has {len(out)} entries, {n} expected")
    return out


def _shape(v: Any) -> tuple[int, ...]:
    if not isinstance(v, list) or not v or len(v) > 3:
        raise ValueError(f"an array shape must be a list of 1 to 3 sizes, got {v!r}")
    return tuple(_integer(s, "an array size", 0) for s in v)


def _rationals(entries: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(entries), dtype=object)
    out[:] = [_q(v) for v in entries]
    return out.reshape(shape)


def _values(v: Any, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """An input array at its exact values: float64 as written, or an object array of ``Fraction``
    when the file holds exact rationals (a value given that is not a double)."""
    if not isinstance(v, dict):
        raise ValueError(f"an array must be written as an object, got {type(v).__name__}")
    if "npz" in v:
        a = arrays[v["npz"]]
        if a.dtype.kind == "S":
            return _rationals([s.decode("ascii") for s in a.reshape(-1)], a.shape)
        if a.dtype != np.float64:
            raise ValueError(f"array {v['npz']!r} has dtype {a.dtype}: neither float64 nor exact rationals")
        return np.asarray(a)
    shape = _shape(v["shape"])
    if "exact" in v:
        if not isinstance(v["exact"], list):
            raise ValueError("'exact' must be a list of rational strings")
        return _rationals(v["exact"], shape)
    data = v["data"]
    if not isinstance(data, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in data):
        raise ValueError("'data' must be a list of numbers")
    return np.asarray(data, dtype=np.float64).reshape(shape)


def _floats(v: Any, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """A float64 input array (a user's matrix, a vector): exact rationals are not expected there."""
    a = _values(v, arrays)
    if a.dtype != np.float64:
        raise ValueError("a float64 array was expected (a matrix or a vector), exact rationals were found")
    return a


def exact(a: np.ndarray) -> bool:
    """Whether ``a`` (from :func:`_values`) holds exact rationals rather than float64."""
    return a.dtype == object


def short(v: Any, most: int = 6) -> str:
    """A vector for a printed statement: ``(7, 3, 0)``, or its first entries and its length."""
    items = [str(x) for x in v]
    if len(items) <= most:
        return f"({', '.join(items)})"
    return f"({', '.join(items[:most - 2])}, ..., {items[-1]}; {len(items)} entries)"
