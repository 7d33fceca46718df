r"""The seeds' claims, executable: a registry that hypothesis tries and ``ntkcheck claims`` reports.

Each :class:`Claim` holds an id (``"003.prop8.sufficiency"``), the seed and place, the
statement in words, a checker of its hypotheses, a checker of its conclusion, a strategy
of instances (from :mod:`ntkcheck.strategies`), the minimum number of instances that must
hold in a run (``min_held``) with its inconclusive budget (``max_inconclusive``), and a
status: ``"open"`` (no counterexample known) or ``"refuted"`` with the shrunk
counterexample stored. A run fails a claim on a counterexample, a toolkit or checker
error, or a shortfall of held instances.

>>> from ntkcheck.claims import get, run_claim
>>> rep = run_claim(get("003.ex6.translation"), examples=5)
>>> rep.refuted, rep.tried > 0
(0, True)

References: seed 003 ("Training Infinitely Deep and Wide Transformers") section 3 (Props.
5-12, Ex. 3-6, Remark 5), seed 002 ("A Mean-Field Theory of Transformers") Lemmas 3.1-3.2,
Thm. 8.5 (corrected constants); theory/.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._core import Check, Claim, ClaimReport, Outcome, check_instance, describe, run_claim
from ._seed002 import CLAIMS_002, attention_002, attention_002_jacobian, theta_norm
from ._seed003 import CLAIMS_003
from ._seed003_ntk import reference_gram_eigenvalues
from .limits.depth import CLAIMS_DEPTH
from .limits.heads import CLAIMS_HEADS
from .limits.joint import CLAIMS_JOINT
from .limits.langevin import CLAIMS_LANGEVIN
from .limits.lowtemp import CLAIMS_LOWTEMP
from .limits.stability import CLAIMS_STABILITY
from .limits.tokens import CLAIMS_TOKENS

__all__ = [
    "Claim", "Check", "Outcome", "ClaimReport", "CLAIMS", "get", "run_claim", "run_claims",
    "check_instance", "describe", "attention_002", "attention_002_jacobian", "theta_norm",
    "reference_gram_eigenvalues",
]

#: every claim, by id, in report order (seed 003, seed 002, then the limit theorems)
CLAIMS: dict[str, Claim] = {c.id: c for c in [*CLAIMS_003, *CLAIMS_002, *CLAIMS_TOKENS, *CLAIMS_HEADS,
                                              *CLAIMS_DEPTH, *CLAIMS_LANGEVIN, *CLAIMS_LOWTEMP,
                                              *CLAIMS_STABILITY, *CLAIMS_JOINT]}


def get(claim_id: str) -> Claim:
    """The claim with this id (``KeyError`` lists the known ids)."""
    try:
        return CLAIMS[claim_id]
    except KeyError:
        raise KeyError(f"unknown claim {claim_id!r}; known: {', '.join(CLAIMS)}") from None


def run_claims(ids: Iterable[str] | None = None, *, examples: int = 20, seed: int = 0,
               shrink: bool = True) -> list[ClaimReport]:
    """Run the claims ``ids`` (default: all) on ``examples`` instances each; see :func:`run_claim`."""
    chosen = list(CLAIMS) if ids is None else list(ids)
    return [run_claim(get(i), examples=examples, seed=seed, shrink=shrink) for i in chosen]
