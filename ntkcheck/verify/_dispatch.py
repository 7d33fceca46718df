"""Which module re-checks which claim kind, and the samples a claim is about.

:data:`CHECKS` maps a claim's ``kind`` to the function that re-derives it, one module per claim
family (``_cgf``: independence and dependence of the CGFs; ``_gram``: the attention Gram;
``_matrix``: a user's matrix). A new family registers its kinds here. Every check receives the
claim, the file's :class:`~._inputs.Inputs` and the :class:`Scope` (the samples the claim is
about), and returns a :class:`~._common.Checked` or raises :class:`~._common.Refuted` /
:class:`~._common.Unchecked`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _cgf, _gram, _matrix
from ._common import MALFORMED, Checked, Refuted, Unchecked, _integer, short
from ._inputs import Inputs


@dataclass(frozen=True)
class Scope:
    """The laws a claim is about: all of the file's, or the samples it names (then it says so)."""

    laws: list[dict[str, Any]]
    indices: list[int]
    total: int
    restricted: bool

    def name(self, positions: list[int] | None = None) -> str:
        """``all 7 samples`` (``both samples``), or ``samples 0, 2, 3 (of 7; the claim is about these only)``."""
        idx = self.indices if positions is None else [self.indices[p] for p in positions]
        if not self.restricted and positions is None:
            return {1: "the one sample", 2: "both samples"}.get(self.total, f"all {self.total} samples")
        only = "; the claim is about these only" if self.restricted else ""
        return f"samples {short(idx, 12)[1:-1]} (of {self.total}{only})"

    @property
    def who(self) -> str:
        return self.name()


def scope_of(claim: dict[str, Any], inputs: Inputs) -> Scope:
    """The claim's samples: distinct indices into the file's laws (all of them when not named)."""
    n = len(inputs.laws)
    raw = claim.get("samples")
    if raw is None:
        return Scope(inputs.laws, list(range(n)), n, False)
    if not isinstance(raw, list):
        raise ValueError("samples must be a list of indices")
    idx = [_integer(i, "a sample index", 0) for i in raw]
    if not idx or len(set(idx)) != len(idx) or max(idx) >= n:
        raise Refuted(f"the claim names samples {short(idx, 12)}: distinct indices below {n} are expected")
    return Scope([inputs.laws[i] for i in idx], idx, n, True)


def _cgf_claim(claim: dict[str, Any], inputs: Inputs, scope: Scope) -> Checked:
    return _cgf.check(claim, scope.laws, inputs.dim, f"the CGFs of {scope.who}")


def _nothing(claim: dict[str, Any], inputs: Inputs, scope: Scope) -> Checked:
    raise Unchecked("nothing certified: the file claims nothing here")


#: claim kind -> the function that re-derives it
CHECKS: dict[str, Callable[[dict[str, Any], Inputs, Scope], Checked]] = {
    "cgf": _cgf_claim,
    "gram-lower-bound": _gram.check_bound,
    "gram-singular": _gram.check_singular,
    "gram-equal-scores": _gram.check_equal_scores,
    "matrix-lower-bound": _matrix.check_bound,
    "matrix-singular": _matrix.check_singular,
    "matrix-indefinite": _matrix.check_indefinite,
    "none": _nothing,
}


def check_claim(claim: dict[str, Any], inputs: Inputs) -> tuple[str, str, str]:
    """``(id, status, text)``: ``verified`` with the statement re-derived and how, or ``refuted`` /
    ``unchecked`` with why. A malformed claim is refuted: it proves nothing."""
    cid = claim["id"]
    fn = CHECKS.get(claim["kind"])
    try:
        if fn is None:
            raise Unchecked(f"this verifier has no check for a {claim['kind']!r} claim")
        with np.errstate(all="ignore"):  # every check handles non-finite values itself: no warning lines
            done = fn(claim, inputs, scope_of(claim, inputs))
        return cid, "verified", f"{done.statement}. Re-proved: {done.how}"
    except Refuted as exc:
        return cid, "refuted", str(exc)
    except Unchecked as exc:
        return cid, "unchecked", str(exc)
    except MALFORMED as exc:
        return cid, "refuted", f"malformed claim ({type(exc).__name__}: {exc})"[:500]
    except Exception as exc:  # noqa: BLE001 - a failure of this verifier is never a verdict on the claim
        return cid, "unchecked", f"the verifier failed on this claim ({type(exc).__name__}: {exc})"[:500]
