"""Results read back from their ``to_dict()``: the ``from_dict`` classmethods of the result types.

Every frozen result dataclass writes ``to_dict()`` (what ``--json`` prints); :func:`restore`
builds the dataclass back from such a dict, field by field, converting each value by the
field's annotation: lists become tuples, exact rationals written as strings become
:class:`~fractions.Fraction`, ``"inf"`` becomes ``math.inf``, enums are looked up by value and
nested results go through their own ``from_dict``. Keys that ``to_dict`` derives (a
``statement``, a ``sentence``) are ignored; a field ``to_dict`` leaves out takes its default.
``converters`` handle fields whose annotation does not say enough (``Any``).

A round trip ``type(r).from_dict(r.to_dict()).to_dict() == r.to_dict()`` holds for every result
type with ``from_dict`` (tests/test_records.py); arrays that ``to_dict`` does not write (a kept
Gram matrix, a kernel basis) come back as None.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import types
import typing
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from .errors import InputError

__all__ = ["restore", "fraction", "fraction_or_text", "fractions", "dispatch", "plain", "structured"]

#: an overlap described in words: ``"1 shared atom"``, ``"3 shared atoms"``
_SHARED = re.compile(r"^(\d+) shared atoms?$")


def fraction(v: Any) -> Any:
    """An exact rational from its ``to_dict`` string (``"3/2"``), or ``v`` unchanged when it is
    not one (a float, None). A rational shortened for display (``"~1e5000 (...)"``) cannot be
    read back: :class:`~ntkcheck.errors.InputError`."""
    if isinstance(v, str):
        try:
            return Fraction(v)
        except (ValueError, ZeroDivisionError):
            raise InputError(f"from_dict: {v!r} is not an exact rational (a shortened one cannot be read back)") from None
    return v


def fraction_or_text(v: Any) -> Any:
    """:func:`fraction`, keeping a rational shortened for display as its text (a field shown, not computed on)."""
    try:
        return fraction(v)
    except InputError:
        return v


def fractions(v: Any) -> Any:
    """A tuple of :func:`fraction` (None stays None)."""
    return None if v is None else tuple(fraction(x) for x in v)


def dispatch(table: dict[str, Callable[[dict[str, Any]], Any]]) -> Callable[[Any], Any]:
    """A converter that picks the ``from_dict`` of ``table[d["kind"]]`` (None stays None)."""
    def convert(d: Any) -> Any:
        if d is None or not isinstance(d, dict):
            return d
        kind = d.get("kind")
        if kind not in table:
            raise InputError(f"from_dict: unknown kind {kind!r}; expected one of {sorted(table)}")
        return table[kind](d)
    return convert


def plain(obj: Any) -> Any:
    """A saved ``--json`` object with its structured values back in the library's form: an
    ``overlap`` object becomes its description, a null ``coefficient`` becomes ``"-"``."""
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: plain(v) for k, v in obj.items()}
    if isinstance(out.get("overlap"), dict):
        out["overlap"] = out["overlap"].get("description")
    if "coefficient" in out and out["coefficient"] is None:
        out["coefficient"] = "-"
    return out


def _overlap(value: Any, prediction: Any) -> Any:
    if not isinstance(value, str):
        return value
    m = _SHARED.match(value)
    shared = int(m.group(1)) if m else (prediction.get("shared") if isinstance(prediction, dict) else None)
    return {"shared_atoms": shared, "description": value}


def structured(obj: Any) -> Any:
    """The inverse of :func:`plain`: a ``to_dict()`` with values instead of free text (what ``--json``
    prints): a ``coefficient`` ``"-"`` becomes null, an ``overlap`` ``"1 shared atom"`` becomes
    ``{"shared_atoms": 1, "description": ...}``."""
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


def _convert(tp: Any, v: Any) -> Any:
    """``v`` converted to the annotated type ``tp``."""
    if v is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], v) if len(inner) == 1 else v
    if origin is tuple and isinstance(v, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], x) for x in v)
        if args and len(args) == len(v):
            return tuple(_convert(a, x) for a, x in zip(args, v))
        return tuple(v)
    if tp is Fraction:
        return fraction(v)
    if tp is np.ndarray:
        return np.asarray(v, dtype=np.float64)
    if tp is float:
        return math.inf if v == "inf" else (-math.inf if v == "-inf" else float(v))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(v)
    if isinstance(tp, type) and hasattr(tp, "from_dict") and isinstance(v, dict):
        return tp.from_dict(v)
    return v


def _hints(cls: type) -> dict[str, Any]:
    """The fields' annotations; none when one names a type imported only for type checking
    (the values then stay as ``to_dict`` wrote them; ``converters`` handle what matters)."""
    try:
        return typing.get_type_hints(cls)
    except NameError:
        return {}


def restore(cls: type, d: dict[str, Any], **converters: Callable[[Any], Any]) -> Any:
    """The frozen dataclass ``cls`` from ``d`` (its ``to_dict()``), as described in the module docstring."""
    if not isinstance(d, dict):
        raise InputError(f"{cls.__name__}.from_dict: expected a dict, got {type(d).__name__}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InputError(f"{cls.__name__}.from_dict: the key {f.name!r} is missing")
            continue
        v = d[f.name]
        kwargs[f.name] = converters[f.name](v) if f.name in converters else _convert(hints.get(f.name, Any), v)
    return cls(**kwargs)
