r"""Hand-off along a run: the earliest recorded state from which the centred certificate holds.

``theory/local-convergence.md``, "Hand-off along the run". The certificate of
:mod:`ntkcheck.convergence.centred` is about the flow (or gradient descent) started *at the
computed state* :math:`\theta_k` of record ``k``: from ``s_k`` on, that flow satisfies
:math:`\mathcal L(s) \le e^{-r(s - s_k)}\mathcal L(\theta_k)` and stays within ``R`` of :math:`\theta_k`.
Records are searched by bisection (the condition is checked at about :math:`\log_2` of their number
of records), under a time budget; the run after ``s_k`` is then held against the statement when the
run is one of the same object, accurate enough (``comparison`` of
:class:`~ntkcheck.convergence.local.LocalConvergence`). That the computed state is the true flow's
state at ``s_k`` is *not* claimed here: the validated tube (:mod:`ntkcheck.convergence.enclosure.tube`)
closes that gap in :mod:`ntkcheck.convergence.from_fixup`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._records import restore
from .centred import CentredCertificate, centred_certificate
from .enclosure._model import Model

__all__ = ["HandOff", "hand_off"]


@dataclass(frozen=True)
class HandOff:
    r"""The hand-off of one run.

    Attributes
    ----------
    found : a record where the centred certificate holds was found
    index, s : that record and its flow time (``-1``, ``nan`` if none)
    certificate : the centred certificate there (or, if none holds, at the last record checked)
    checked : the records where it was checked, in order
    holds_on_run : every later record obeys the statement (its loss up to the run's floor, its distance to
        :math:`\theta_k`); ``None`` when not held against the run
    message : the statement, or why there is none
    cut : non-empty when the time budget stopped the search
    """

    found: bool
    index: int
    s: float
    certificate: CentredCertificate | None
    checked: tuple[int, ...]
    holds_on_run: bool | None
    message: str
    cut: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "certificate"}
        out["checked"] = list(self.checked)
        out["certificate"] = None if self.certificate is None else self.certificate.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HandOff:
        return restore(cls, d, certificate=lambda c: None if c is None else CentredCertificate.from_dict(c),
                       checked=tuple)


def _statement(k: int, s_k: float, c: CentredCertificate) -> str:
    obj = "the gradient flow" if c.step is None else f"gradient descent with step {c.step:g}"
    return (f"from s_k = {s_k:.4g} (record {k}) on, convergence of {obj} from the computed state is proved: "
            f"Loss(s) <= exp(-{c.rate:.4g} (s - s_k)) {c.start_loss:.3e}, displacement from it <= "
            f"{c.displacement_bound:.3g}")


def hand_off(samples: Any, params: Any, mdl: Model, flow: Any, *, layers: int, T: float, loss: str,
             step: float | None = None, floor: np.ndarray | None = None, check: bool = True,
             seconds: float | None = None) -> HandOff:
    """Search the records of ``flow`` (a :class:`~ntkcheck.dynamics.flow.FlowResult` with states) for the
    earliest one where :func:`~ntkcheck.convergence.centred.centred_certificate` holds."""
    started = time.perf_counter()
    n = len(flow.states)
    memo: dict[int, CentredCertificate] = {}

    def at(k: int) -> CentredCertificate:
        if k not in memo:
            memo[k] = centred_certificate(samples, params.unflat(flow.states[k]), mdl, layers=layers, T=T,
                                          loss=loss, step=step)
        return memo[k]

    def out_of_time() -> bool:
        return seconds is not None and time.perf_counter() - started >= seconds

    last = n - 1
    if n < 2:
        return HandOff(False, -1, math.nan, None, (), None, "no record after the start")
    if not at(last).certified:
        c = memo[last]
        at_floor = floor is not None and flow.loss[last] <= 10.0 * float(np.asarray(floor).reshape(-1)[-1])
        hint = ("the loss there is at the run's rounding floor, so a longer run cannot lower it: the second-derivative "
                "bound at that state (the ball's radius it allows) is what limits" if at_floor else
                "a longer run (--time) reaches smaller losses")
        return HandOff(False, -1, math.nan, c, tuple(memo), None,
                       f"no record of the run is a state from which convergence is proved: at the last record "
                       f"(s = {flow.s[last]:.4g}) {c.message}; {hint}")
    lo, hi, cut = 0, last, ""
    while hi - lo > 1:
        if out_of_time():
            cut = "the time budget stopped the search: a later record than the earliest may be reported"
            break
        mid = (lo + hi) // 2
        if at(mid).certified:
            hi = mid
        else:
            lo = mid
    c = memo[hi]
    holds = _check_run(flow, hi, c, floor) if check else None
    return HandOff(True, hi, float(flow.s[hi]), c, tuple(memo), holds, _statement(hi, float(flow.s[hi]), c), cut)


def _check_run(flow: Any, k: int, c: CentredCertificate, floor: np.ndarray | None) -> bool:
    """Every record after ``k`` below the envelope (up to its floor) and within the radius of :math:`\\theta_k`."""
    s = np.asarray(flow.s, dtype=np.float64)
    L = np.asarray(flow.loss, dtype=np.float64) - flow.loss_floor
    fl = np.zeros_like(s) if floor is None else np.asarray(floor, dtype=np.float64)
    later = np.arange(k, len(s))
    env = np.exp(-c.rate * (s[later] - s[k])) * c.start_loss * (1.0 + 1e-6)
    H = flow.final_params.heads if flow.final_params is not None else 1
    dist = np.array([np.linalg.norm(flow.states[j] - flow.states[k]) / math.sqrt(H) for j in later])
    slack = math.sqrt(2.0 * float(np.max(fl[later])) / max(c.lambda_max, 1e-300)) * 10.0
    return bool(np.all(L[later] <= env + fl[later]) and np.all(dist <= c.displacement_bound * (1.0 + 1e-6) + slack))
