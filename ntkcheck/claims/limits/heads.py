"""Claims of the limit-theorem experiment ``heads-lln`` (:mod:`ntkcheck.limits.heads_lln`).

Seed 002 ("A Mean-Field Theory of Transformers") Thm. 5.1, the law of large numbers over heads:
the tokens moved by ``H`` i.i.d. heads stay within ``C(T) H^(-1/2) sqrt(log H)`` of the tokens moved
by the rho-averaged field (eq. 22), and the head-averaged field converges to the rho-average
uniformly on a ball at the same rate. Each instance runs the experiment at size ``"small"`` over
5 seeds on a problem drawn from the instance's seed, token dimension and horizon; the conclusion is
the fit's verdict (:func:`ntkcheck.limits.rates.fit_rate`): consistent -> held, a failed direct check ->
failed, inconclusive and "slower than the theorem's rate on this window" (which refutes no bound
with an unspecified constant) -> inconclusive. Written up in ``theory/limits-heads-lln.md``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .._core import Check, Claim, Instance
from ._common import verdict_check

#: independent repetitions per instance (the confidence interval is over these)
SEEDS = 5


def _instances() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "seed": st.integers(0, 2**20),
        "dim": st.sampled_from([1, 2, 3]),
        "horizon": st.sampled_from([0.5, 1.0, 2.0]),
    })


def _pinned() -> dict[str, Any]:
    # the experiment's default problem (``ntkcheck experiment heads-lln --size small``)
    return {"seed": 0, "dim": 2, "horizon": 1.0}


def _trajectories(inst: Instance) -> Check:
    from ...limits.heads_lln import run

    res = run(size="small", seeds=SEEDS, seed=inst["seed"], dim=inst["dim"], horizon=inst["horizon"])
    fit = res.fits[0]
    broken = [name for name, ok in res.checks.items() if not ok]
    if broken:
        return Check.failed(f"{fit.line()}; direct check fails: {'; '.join(broken)}")
    return verdict_check(fit.verdict, f"{fit.line()} ({fit.reason})")


def _uniform(inst: Instance) -> Check:
    from ...limits.heads_lln import run

    res = run(size="small", seeds=SEEDS, seed=inst["seed"], dim=inst["dim"], horizon=inst["horizon"],
              field_only=True)
    fit = res.fits[0]
    return verdict_check(fit.verdict, f"{fit.line()} ({fit.reason})")


CLAIMS_HEADS: list[Claim] = [
    Claim(
        id="002.thm5.1",
        seed="002",
        place="Thm. 5.1",
        statement="H i.i.d. heads theta_r ~ rho: the tokens x^H(t) moved by V_H = (1/H) sum_r A(., mu, theta_r) "
                  "and the tokens x(t) moved by the rho-average, from the same x_0, satisfy "
                  "E[sup_{t<=T} |x^H(t) - x(t)|^2]^(1/2) <= C(T) H^(-1/2) sqrt(log H) (eq. 22); measured: the "
                  "fitted slope against H over 5 seeds is consistent with the theorem's slope over the same H "
                  "(and the H-head tokens stay in the ball of Lemma 3.2).",
        hypothesis=lambda inst: True,
        conclusion=_trajectories,
        instances=_instances,
        examples=(_pinned,),
        requires=("ntkcheck.limits.heads_lln",),
        cost=10,
        min_held=4,
        max_inconclusive=0.25,
    ),
    Claim(
        id="002.thm5.1.uniform",
        seed="002",
        place="Thm. 5.1 (uniform LLN)",
        statement="H i.i.d. heads theta_r ~ rho: sup_{x in B_R} |V_H(x, mu) - V_rho(x, mu)| = "
                  "O_P(H^(-1/2) sqrt(log H)) for mu supported in B_R; measured: E of the max over a grid of the "
                  "ball and over the reference laws mu_t, its fitted slope against H over 5 seeds consistent "
                  "with the theorem's slope.",
        hypothesis=lambda inst: True,
        conclusion=_uniform,
        instances=_instances,
        examples=(_pinned,),
        requires=("ntkcheck.limits.heads_lln",),
        cost=4,
        min_held=4,
        max_inconclusive=0.25,
    ),
]
