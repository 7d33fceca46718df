"""Experiment (c): the measured rate of local convergence as the initial loss grows.

Runs :func:`ntkcheck.convergence.local.local_convergence` at growing ``eps``.

References: seed 002 Thm. 8.5 (eq. 31 holds only near initialisation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._records import restore
from ..errors import InputError
from .local import local_convergence

__all__ = [
    "EpsSweep",
    "eps_sweep",
]


@dataclass(frozen=True)
class EpsSweep:
    r"""Experiment (c): the linear rate as the initial loss grows.

    Attributes
    ----------
    eps, rate_measured, loss_final, displacement_max, displacement_bound : one entry per ``eps``
    lambda_0 : NTK lambda_min at initialisation (the same for every eps)
    breakdown_eps : smallest ``eps`` with ``rate_measured < lambda_0`` (eq. 31 fails), or ``nan``
    linear_breakdown_eps : smallest ``eps`` with ``rate_measured < (1 - tol) 2 lambda_0``
        (the run leaves the linearised regime), or ``nan``
    """

    eps: tuple[float, ...]
    rate_measured: tuple[float, ...]
    loss_initial: tuple[float, ...]
    loss_final: tuple[float, ...]
    displacement_max: tuple[float, ...]
    displacement_bound: tuple[float, ...]
    lambda_0: float
    breakdown_eps: float
    linear_breakdown_eps: float
    tol: float

    def __repr__(self) -> str:
        rows = ", ".join(f"{e:.3g}:{r / self.lambda_0:.3g}" for e, r in zip(self.eps, self.rate_measured))
        return (f"EpsSweep(lambda_0={self.lambda_0:.4g}, rate/lambda_0 by eps {{{rows}}}, "
                f"breakdown_eps={self.breakdown_eps:.3g}, linear_breakdown_eps={self.linear_breakdown_eps:.3g})")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpsSweep:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def eps_sweep(
    samples: Any,
    eps_values: Sequence[float] = (1e-2, 1e-1, 0.3, 1.0, 3.0),
    *,
    tol: float = 0.1,
    **kwargs: Any,
) -> EpsSweep:
    """Experiment (c): :func:`local_convergence` at growing ``eps`` (same heads, same direction).

    ``kwargs`` go to :func:`local_convergence` (``track_ntk`` defaults to False here).
    ``time_end`` is fixed by ``lambda_0``, so every ``eps`` runs for the same flow time.
    """
    if len(eps_values) == 0:
        raise InputError("eps_values: give at least one eps")
    kwargs.setdefault("track_ntk", False)
    kwargs.setdefault("certify", False)  # the sweep reads rates and displacements only
    res = [local_convergence(samples, eps=float(e), **kwargs) for e in eps_values]
    lam0 = res[0].lambda_0
    rates = [r.rate_measured for r in res]
    bad = [e for e, r in zip(eps_values, rates) if r < lam0]
    lin_bad = [e for e, r in zip(eps_values, rates) if r < (1 - tol) * 2 * lam0]
    return EpsSweep(
        tuple(float(e) for e in eps_values), tuple(rates), tuple(r.loss_initial for r in res), tuple(r.loss_final for r in res),
        tuple(r.displacement_max for r in res), tuple(r.displacement_bound for r in res), lam0,
        float(min(bad)) if bad else float("nan"), float(min(lin_bad)) if lin_bad else float("nan"), float(tol),
    )
