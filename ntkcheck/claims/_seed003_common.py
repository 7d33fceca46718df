r"""Shared engines and pinned instances of the seed 003 claims (``_seed003`` and ``_seed003_ntk``).

The engines reach :mod:`ntkcheck.independence` at call time (so that a monkeypatched
``decide`` is used); the exact rank of the joint cumulant tensors (orders 2..K) is the
reference that Prop. 7 and Prop. 8's one-relation hypothesis are checked against
(theory/cgf-independence.md).
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from typing import Any

import numpy as np
from flint import fmpq, fmpq_mat

from ..cgf.core import joint_cumulants
from ._core import Check, Instance

# ----------------------------------------------------------------------------- engines


def _decide(measures: Any, prop: str, **kw: Any) -> Any:
    # looked up at call time, so that a monkeypatched ``ntkcheck.independence.decision.decide`` is used
    # (through sys.modules: the package re-exports the function under the module's name)
    return importlib.import_module("ntkcheck.independence.decision").decide(measures, prop, **kw)


def _conditions() -> Any:
    return importlib.import_module("ntkcheck.independence.conditions")


def _verdict(dec: Any) -> str:
    return str(getattr(dec.verdict, "value", dec.verdict))


def _expect(dec: Any, expected: str) -> Check:
    v = _verdict(dec)
    what = f"decide -> {v} ({dec.method}, {dec.precision})"
    if v == "inconclusive":
        return Check.inconclusive(what)
    return Check.of(v == expected, what)


def _exact_rank(rows: list[list[Fraction]]) -> int:
    if not rows or not rows[0]:
        return 0
    return fmpq_mat(len(rows), len(rows[0]), [fmpq(v.numerator, v.denominator) for r in rows for v in r]).rank()


def weak_rank_reference(samples: list[np.ndarray], K: int) -> int:
    """Exact rank of the joint cumulant tensors of orders 2..K (rows: samples), theory/cgf-independence.md."""
    rows = []
    for x in samples:
        idx, vals = joint_cumulants(x, K, exact=True)
        rows.append([v for a, v in zip(idx, vals, strict=True) if sum(a) >= 2])
    return _exact_rank(rows)


def inst_cache(inst: Instance) -> dict[str, Any]:
    # instances are dicts built per example: a private slot for values the hypothesis
    # checker computed and the conclusion reuses
    return inst.setdefault("_cache", {})  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- pinned instances


_U, _V = [1.0, 0.0], [0.0, 1.0]
_PRODUCT = [[[0, 0], _U], [[0, 0], _V], [[0, 0], _U, _V, [1, 1]]]
_PRODUCT_APART = [[[3, 0], [4, 0]], [[0, 5], [0, 6]], [[-7, -7], [-6, -7], [-7, -6], [-6, -6]]]
_PROGRESSION = [[[0, 0], [1, 0], [2, 0]], [[1, 0], [2, 0], [3, 0]]]
_TRANSLATE_APART = [[[0, 0], [1, 0.5], [-0.5, 1]], [[5, 3], [6, 3.5], [4.5, 4]]]
_RANDOM3 = [[[0.3, -1.1], [1.7, 0.2], [-0.4, 0.9]], [[1.2, 1.3], [-0.8, -0.6], [0.1, 2.1]],
            [[-1.5, 0.4], [0.6, -0.7], [2.2, 1.0]]]
