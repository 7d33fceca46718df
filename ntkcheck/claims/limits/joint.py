r"""Claim of the experiment ``joint-fluctuations`` (:mod:`ntkcheck.limits.joint_fluctuations`).

"A Mean-Field Theory of Transformers" (seed 002) section 10 leaves open a finite-size theory of the
joint fluctuations in tokens ``N`` and heads ``H`` around the doubly mean-field limit of Thm. 9.1.
The claim is empirical and says no more than the data: the mean-square error of the mean token
decays in ``N`` (at ``H = inf``) and in ``H`` (at ``N = inf``) at least like the CLT scaling
``1/N``, ``1/H`` (fitted slopes, 5 seeds, the rule of :func:`ntkcheck.limits.rates.fit_rate`), and
the scaled fluctuations at the largest sizes are not rejected as Gaussian (Shapiro-Wilk,
family-wise level 1 %). An instance is one run at size ``"small"`` from a drawn seed.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .._core import Check, Claim, Instance
from ._common import limit_check

__all__ = ["CLAIMS_JOINT"]


@st.composite
def _instances(draw: Any) -> dict[str, Any]:
    return {"seed": draw(st.integers(0, 10**6))}


def _conclusion(inst: Instance) -> Check:
    from ...limits.joint_fluctuations import run

    res = run(size="small", seeds=5, seed=int(inst["seed"]))
    return limit_check(res, res.notes[0])


CLAIMS_JOINT: list[Claim] = [
    Claim(
        id="002.sec10.joint_fluctuations",
        seed="002",
        place="section 10 (open problem), around Thm. 9.1",
        statement="(Measured; seed 002 states no result.) N tokens i.i.d. from 0.5 + U[-1, 1] moved by H i.i.d. "
                  "heads (d = 1) and their own empirical law: E (mean token at T - its doubly mean-field limit)^2 "
                  "decays at least like 1/N at H = inf and like 1/H at N = inf (fitted slopes over N = 16..64, "
                  "H = 4..256, 5 seeds), and sqrt(N)-, sqrt(H)-scaled and joint fluctuations at the largest sizes "
                  "are not rejected as Gaussian (Shapiro-Wilk, family-wise level 1%).",
        hypothesis=lambda inst: True,
        conclusion=_conclusion,
        instances=_instances,
        examples=(lambda: {"seed": 0},),
        requires=("ntkcheck.limits.joint_fluctuations",),
        # one instance is one small run (about 2 s): 2 drawn + the pinned one, and a draw more
        cost=7,
        min_held=4,
        # inconclusive when an interval is wider than |slope| = 1 (the N-edge at 24 systems per
        # cell reaches widths of 0.9); one instance in four tolerated
        max_inconclusive=0.25,
    ),
]
