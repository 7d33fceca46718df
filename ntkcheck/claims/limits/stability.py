r"""Claims of the experiment ``stability`` (:mod:`ntkcheck.limits.stability`).

"A Mean-Field Theory of Transformers" (seed 002) Thm. 4.1 (eq. 17) and Cor. 5.2: the token flow
is Lipschitz in its initial law (:math:`W_2`) and in its head law (:math:`W_1`), with constants
built from Lemmas 3.1-3.2; Thm. 6.2: the gradient :math:`\delta\mathcal L/\delta\rho` of the
forward-backward system is :math:`W_1`-Lipschitz in the head law. An instance is one run of
:func:`ntkcheck.limits.stability.run` at size ``"small"`` (5 random problems from a drawn seed);
it holds when the worst ratio found is below the theorem's constant and the measurement's own
checks (confinement, the worst-case verification, the adjoint) hold.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .._core import Check, Claim, Instance

__all__ = ["CLAIMS_STABILITY"]


@st.composite
def _instances(draw: Any) -> dict[str, Any]:
    return {"seed": draw(st.integers(0, 10**6))}


def _pinned() -> dict[str, Any]:
    return {"seed": 0}


def _conclusion(inst: Instance, keys: tuple[str, ...]) -> Check:
    from ...limits.stability import run

    res = run(size="small", seeds=5, seed=int(inst["seed"]))
    chosen = {k: v for k, v in res.checks.items() if k.startswith(keys)}
    q = res.data["quotients"]
    detail = "; ".join(f"{k}: {'holds' if v else 'FAILS'}" for k, v in chosen.items())
    detail += "; worst ratio / constant: " + ", ".join(f"{k} {v:.2e}" for k, v in q.items())
    return Check.of(all(chosen.values()), detail)


CLAIMS_STABILITY: list[Claim] = [
    Claim(
        id="002.thm4.1",
        seed="002",
        place="Thm. 4.1 (eq. 17), Cor. 5.2",
        statement="The token flow of eq. 12 with frozen heads satisfies sup_t W2(mu_t, mu'_t) <= e^((C1 + C2) T) "
                  "W2(mu_0, mu'_0) and sup_t W2(mu_t, mu~_t) <= C1' (e^((C1 + C2) T) - 1) / (C1 + C2) W1(rho, rho~), "
                  "C1, C2, C1' from Lemma 3.1 on the ball of Lemma 3.2; measured: the worst ratio over the exact "
                  "linearised worst case, finite moves, random moves and fresh draws (5 random problems, N = 4 "
                  "tokens, H = 3 heads) is below the constant, the tokens stay in the ball, and a finite move along "
                  "the linearised worst direction reproduces its ratio.",
        hypothesis=lambda inst: True,
        conclusion=lambda inst: _conclusion(inst, ("Thm. 4.1", "Cor. 5.2", "Lemma 3.2", "worst-case")),
        instances=_instances,
        examples=(_pinned,),
        requires=("ntkcheck.limits.stability",),
        # one instance is one small run (about 1 s): the default 20 examples -> 2 drawn + the pinned
        # one, and one more draw to reach min_held = 4
        cost=7,
        min_held=4,
    ),
    Claim(
        id="002.thm6.2",
        seed="002",
        place="Thm. 6.2",
        statement="The gradient dL/drho(theta; rho) of eq. 25 (forward eq. 12, adjoint eq. 24, loss |mean token - "
                  "y|^2 / 2) is W1-Lipschitz in rho, uniformly over theta in Theta, with the constant of its proof "
                  "built from Lemma 3.1 and the second-order bounds the proof needs; measured: the worst ratio over "
                  "moves of one head (sup over Theta exact in V, searched in Q^T K) is below the constant, and the "
                  "gradient from the adjoint equals the derivative of the loss along mixtures.",
        hypothesis=lambda inst: True,
        conclusion=lambda inst: _conclusion(inst, ("Thm. 6.2", "adjoint")),
        instances=_instances,
        examples=(_pinned,),
        requires=("ntkcheck.limits.stability",),
        # one instance is one small run (about 1 s): the default 20 examples -> 2 drawn + the pinned
        # one, and one more draw to reach min_held = 4
        cost=7,
        min_held=4,
    ),
]
