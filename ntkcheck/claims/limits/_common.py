"""What every limit-theorem claim concludes from its experiment (:mod:`ntkcheck.limits.rates`).

An instance runs one experiment; the claim holds when every fitted rate is consistent with the
theorem's and every direct check holds, fails when a direct check fails or a rate is
significantly slower than a theorem that binds on every window (a differential inequality:
``"inconsistent"``), and is inconclusive otherwise (an interval too wide, errors on the
reference's floor, or a rate slower than a bound ``err <= C r(x)`` on the window measured,
which refutes nothing: :data:`~ntkcheck.limits.rates.SLOWER`). The detail names every fit and the
reason of each one that is not consistent.
"""

from __future__ import annotations

from typing import Any

from ...limits.rates import SLOWER
from .._core import Check, Outcome

_OUTCOME = {"consistent": Outcome.HELD, "inconsistent": Outcome.FAILED, "inconclusive": Outcome.INCONCLUSIVE,
            SLOWER: Outcome.INCONCLUSIVE}


def verdict_check(verdict: str, detail: str) -> Check:
    """``consistent`` -> held, ``inconsistent`` -> failed, ``inconclusive`` and the slower-on-this-window
    verdict -> inconclusive."""
    return Check(_OUTCOME[verdict], detail)


def limit_check(exp: Any, extra: str = "") -> Check:
    """The claim's outcome for one :class:`~ntkcheck.limits.rates.LimitExperiment`."""
    parts = [f.line() for f in exp.fits]
    parts += [f.reason for f in exp.fits if f.verdict != "consistent"]
    parts += [f"check fails: {k}" for k, ok in exp.checks.items() if not ok]
    if extra:
        parts.append(extra)
    return verdict_check(exp.verdict, "; ".join(parts))
