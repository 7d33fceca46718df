r"""Gradient flow of the attention model over all parameters, with its stopping rule.

**Gradient flow** (``theory/local-convergence.md``): :math:`d\theta_h/ds = -m\,\nabla_{\theta_h}\mathcal L` with
mobility :math:`m = H` (shared heads: the mean-field Wasserstein flow of
:math:`\rho = \frac1H\sum_h\delta_{\theta_h}`) or :math:`m = HL/T` (per-layer heads: the flow
of :math:`\rho_t` in :math:`L^2(dt)` over depth, each layer a slab of mass :math:`\tau`).
Writing :math:`u = W^{1/2}(z - y)` (so :math:`\mathcal L = |u|^2/2`) and
:math:`J = \partial z/\partial\theta` over *all* parameters,

.. math::

    \frac{du}{ds} = -K u,\qquad K = m\,W^{1/2} J J^T W^{1/2},\qquad
    \frac{d\mathcal L}{ds} = -u^T K u \le -2\lambda_{\min}(K)\,\mathcal L .

``K`` is the NTK of seed 002 Def. 8.4 in these normalisations. At FixUp (``V = 0``)
only the ``V`` directions survive and, with :math:`G = W_N^{1/2}\mathcal K W_N^{1/2}` the
Gram of ``theory/ntk-prop8.md`` (:math:`w_{ij} = 1/N_i`, ``ntkcheck.ntk.gram_matrix``):

* tokens, shared heads: :math:`K = \frac{T^2}{n} G\otimes I_d`; per-layer: :math:`\frac{T}{n} G\otimes I_d`;
* readout, shared heads: :math:`K = T^2 (A\mathcal K A^T)\otimes I_d` with :math:`A` the
  per-sample averaging; :math:`A W_N^{-1/2}` has orthonormal rows, so
  :math:`\lambda_{\min}(A\mathcal K A^T)\ge\lambda_{\min}(G)` (per-layer: ``T`` instead of ``T^2``).

**Computation** (``theory/flow-numerics.md``). Samples are their empirical laws: the
model runs on the distinct atoms with the masses as log-offsets in the softmax, which is
exactly the token-level model (copies of a token move together), and the NTK and rates
are those of :math:`L^2(\mu_i)`. At FixUp the NTK is :math:`k\otimes I_d` with ``k`` from
the features. The flow is integrated by an adaptive exponential integrator whose linear
part is that NTK (exact on the linearised flow, so not limited by
:math:`\lambda_{\max}/\lambda_{\min}`), and every run ends: at its flow time (finite
even for a singular NTK, :func:`flow_time`), at a target loss, or at a wall-clock budget.

References: ``theory/local-convergence.md``; seed 002 eq. 13, Def. 8.4; seed 003 Thm. 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .._progress import progress_bar
from ..errors import DomainError, InputError
from . import _attention
from ._integrate import FlowStatus
from .model import (
    AttentionParams,
    LossKind,
    _check_loss,
    _displacement,
    _forward,
    _loss_grad,
    _loss_value,
    _mobility,
    _outputs,
    _prepare,
)
from .ntk import _ntk_eigenvalues

__all__ = [
    "FlowResult",
    "FlowStatus",
    "FlowTime",
    "flow_time",
    "gradient_flow",
]


#: relative eigenvalue under which the NTK counts as singular: eigvalsh of the formed Gram
#: does not resolve relative eigenvalues below ~1e-13 (ntkcheck.ntk.gram_matrix, RESOLUTION_EIGH)
SINGULAR_REL = 1e-10
#: smallest rate (relative to lambda_max) a default flow time is derived from
RATE_FLOOR_REL = 1e-8


@dataclass(frozen=True)
class FlowTime:
    r"""The flow time a run needs: ``decades`` decades of loss along the slowest resolved mode.

    Attributes
    ----------
    time : :math:`\text{decades}\cdot\ln 10/(2\,\text{rate})`
    rate : the eigenvalue used: :math:`\lambda_0` if it is resolved (above
        ``SINGULAR_REL`` :math:`\lambda_{\max}`), else the smallest eigenvalue above that
        (the range's slowest rate), never below ``RATE_FLOOR_REL`` :math:`\lambda_{\max}`
    singular : :math:`\lambda_0 < ` ``SINGULAR_REL`` :math:`\lambda_{\max}`
    kernel_dim : number of eigenvalues below ``SINGULAR_REL`` :math:`\lambda_{\max}`
    """

    time: float
    rate: float
    singular: bool
    kernel_dim: int
    lambda_0: float
    lambda_max: float


def flow_time(eigenvalues: Any, decades: float = 4.0) -> FlowTime:
    r"""Default flow time from the NTK spectrum, finite whatever the spectrum.

    A singular NTK has no linear rate (seed 002 Thm. 8.5 does not apply): the time is then
    set by the slowest mode of the range, so the run ends after the range part has lost
    ``decades`` decades and the kernel part shows its plateau.

    Examples
    --------
    >>> ft = flow_time([1e-18, 1e-18, 0.02, 1.0], decades=2)
    >>> ft.singular, ft.kernel_dim, round(ft.time, 3)
    (True, 2, 115.129)
    """
    ev = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())
    if ev.size == 0 or not np.all(np.isfinite(ev)):
        raise InputError("flow_time: expected a non-empty finite spectrum")
    if not (np.isfinite(decades) and decades > 0):
        raise DomainError(f"decades must be finite and > 0, got {decades!r}")
    lam0, lamM = float(ev[0]), float(ev[-1])
    if lamM <= 0:
        raise DomainError(f"the NTK is zero (lambda_max={lamM:.3g}): the flow does not move")
    resolved = ev[ev >= SINGULAR_REL * lamM]
    singular = lam0 < SINGULAR_REL * lamM
    rate = max(float(resolved[0]), RATE_FLOOR_REL * lamM)
    return FlowTime(decades * math.log(10.0) / (2.0 * rate), rate, bool(singular), int(ev.size - resolved.size), lam0, lamM)


@dataclass(frozen=True)
class FlowResult:
    """Records of one gradient-flow run (arrays are tuples of floats, one entry a record).

    Attributes
    ----------
    s : flow times of the records (the last one is where the run stopped)
    loss : loss values (per-token loss, including ``loss_floor``)
    lambda_min, lambda_max : NTK extreme eigenvalues at the current parameters (empty if not
        tracked; ``nan`` at records where they were not computed, see ``message``)
    displacement : :math:`(\\frac1H\\sum_h|\\theta_h(s)-\\theta_h(0)|^2)^{1/2}` (upper bound on W_2)
    wall : wall-clock seconds spent when the record was reached
    method : ``"exponential:etd2"``, ``"solve_ivp:<name>"`` or ``"gd:step=<eta>"``
    nfev : number of gradient evaluations
    message : what happened, in words
    status : :class:`FlowStatus`, why the run stopped
    loss_floor : the part of the loss no parameter can change (targets that differ on
        copies of one token; 0 otherwise)
    time_requested : the flow time asked for (``s[-1]`` is smaller if the run stopped early)
    final_params : AttentionParams at the last record (not in ``to_dict``)
    outputs : the outputs ``z`` (what the loss sees, on the distinct atoms, unweighted) at
        each record (not in ``to_dict``)
    """

    s: tuple[float, ...]
    loss: tuple[float, ...]
    lambda_min: tuple[float, ...]
    lambda_max: tuple[float, ...]
    displacement: tuple[float, ...]
    wall: tuple[float, ...]
    method: str
    nfev: int
    message: str
    final_params: AttentionParams = field(repr=False, compare=False)
    outputs: tuple[np.ndarray, ...] = field(repr=False, compare=False, default=())
    status: FlowStatus = FlowStatus.COMPLETED
    loss_floor: float = 0.0
    time_requested: float = float("nan")

    def __repr__(self) -> str:
        return (f"FlowResult({self.method}, s_end={self.s[-1]:.4g}, loss {self.loss[0]:.3e} -> {self.loss[-1]:.3e}, "
                f"displacement_max={max(self.displacement):.3g}, nfev={self.nfev}, {self.status.name.lower()})")

    def to_dict(self) -> dict[str, Any]:
        return {"s": list(self.s), "loss": list(self.loss), "lambda_min": list(self.lambda_min),
                "lambda_max": list(self.lambda_max), "displacement": list(self.displacement),
                "wall": list(self.wall), "method": self.method, "nfev": self.nfev, "message": self.message,
                "status": self.status.name.lower(), "loss_floor": self.loss_floor, "time_requested": self.time_requested}


def _progress(total: float, enabled: bool | None, desc: str):
    """A bar on stderr: flow time (3 digits) for the flow, a count for the NTK records."""
    if desc == "gradient flow":
        return progress_bar(total, desc=desc, unit="flow time", enabled=enabled, fractional=True)
    return progress_bar(total, desc=desc, unit="record", enabled=enabled)


def _ntk_record_indices(track_ntk: bool | int, n_records: int) -> list[int]:
    if track_ntk is True:
        return list(range(n_records))
    k = int(track_ntk)
    if k <= 0:
        return []
    if k == 1:
        return [0]
    return sorted(set(np.round(np.linspace(0, n_records - 1, min(k, n_records))).astype(int).tolist()))


def gradient_flow(
    samples: Any,
    params: AttentionParams,
    targets: Any,
    *,
    layers: int,
    time_end: float,
    T: float = 1.0,
    loss: LossKind = "tokens",
    n_records: int = 40,
    record_spacing: Literal["linear", "log"] = "linear",
    track_ntk: bool | int = True,
    rtol: float = 1e-8,
    atol: float = 1e-12,
    method: str = "auto",
    step: float | None = None,
    progress: bool | None = None,
    loss_target: float | None = None,
    time_budget: float | None = None,
) -> FlowResult:
    r"""Integrate :math:`d\theta_h/ds = -m\,\nabla_{\theta_h}\mathcal L` on ``[0, time_end]``.

    Integrators (``method``):

    * ``"auto"`` / ``"exponential"``: adaptive exponential integrator (ETD2) whose linear
      part is the NTK at the initial parameters, treated exactly; the step is limited by
      the nonlinearity only, not by :math:`\lambda_{\max}/\lambda_{\min}` (module
      ``ntkcheck.dynamics._integrate``). Needs the linearisation: free at FixUp (``V = 0``: the
      features), a dense Jacobian otherwise (``"auto"`` then falls back to ``"RK45"``
      when that is over the memory budget);
    * a :mod:`scipy.integrate` solver by name (``"RK45"``, ``"DOP853"``, ...), with
      ``rtol``, ``atol``;
    * ``step = eta``: explicit gradient descent
      :math:`\theta_{k+1} = \theta_k - \eta\,m\,\nabla\mathcal L(\theta_k)`, ``s = k eta``
      (stable for :math:`\eta < 2/\lambda_{\max}(K)` near a minimum).

    The run always ends: at ``time_end``, when the loss reaches ``loss_target``, or when
    ``time_budget`` wall-clock seconds are spent (``status`` says which; the last record
    is where it stopped).

    Records at ``n_records`` times: loss, displacement, wall time, and the NTK
    ``lambda_min``/``lambda_max`` over all parameters at every record (``track_ntk=True``),
    at ``k`` evenly spaced records (``track_ntk=k``), or never (``False``).

    The model runs on the distinct atoms of each sample with their masses (copies of a
    token move together); token targets are averaged over copies and their spread is
    reported as ``loss_floor``.

    References: ``theory/local-convergence.md``; seed 002 eq. 13 with beta = 0; seed 003 Thm. 4.
    """
    from . import _integrate

    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    if not (np.isfinite(time_end) and time_end > 0):
        raise DomainError(f"time_end must be finite and > 0, got {time_end!r}")
    if n_records < 2:
        raise DomainError(f"n_records must be >= 2, got {n_records}")
    if step is not None and not (np.isfinite(step) and step > 0):
        raise DomainError(f"step must be finite and > 0, got {step!r}")
    if loss_target is not None and not (np.isfinite(loss_target) and loss_target >= 0):
        raise DomainError(f"loss_target must be finite and >= 0, got {loss_target!r}")
    if time_budget is not None and not (np.isfinite(time_budget) and time_budget > 0):
        raise DomainError(f"time_budget must be finite and > 0 seconds, got {time_budget!r}")
    if record_spacing not in ("linear", "log"):
        raise InputError(f"record_spacing: expected 'linear' or 'log', got {record_spacing!r}")
    Y, floor = _attention._targets_array(batch, targets, loss)
    layers, T = int(layers), float(T)
    m = _mobility(params, layers, T)
    p0 = params.flat()
    if record_spacing == "log":
        s_rec = np.concatenate([[0.0], np.geomspace(time_end * 1e-3, time_end, n_records - 1)])
    else:
        s_rec = np.linspace(0.0, time_end, n_records)
    bar = _progress(time_end, progress, "gradient flow")

    def field_(vec: np.ndarray) -> tuple[float, np.ndarray]:
        val, g = _loss_grad(batch, params.unflat(vec), Y, layers, T, loss)
        return val, -m * g.flat()

    def show(s: float, val: float) -> None:
        bar.update(min(s, time_end) - bar.n)
        bar.set_postfix_str(f"loss={val + floor:.3e}", refresh=False)

    notes: list[str] = []
    rec = _integrate._Recorder(s_rec, time_budget, None if loss_target is None else loss_target - floor, show)
    try:
        if step is not None:
            run = _integrate.descent(field_, p0, time_end, rec, step=step)
        else:
            lin = None
            if method in ("auto", "exponential"):
                try:
                    lin = _attention.linear_part(batch, params, layers, T, loss)
                except DomainError as exc:
                    if method == "exponential":
                        raise
                    notes.append(f"RK45 instead of the exponential integrator ({exc})")
            if lin is not None:
                def relinearise(vec: np.ndarray) -> _attention._Linear | None:
                    try:
                        return _attention.linear_part(batch, params.unflat(vec), layers, T, loss)
                    except DomainError:  # the dense Jacobian is over the memory budget
                        return None

                run = _integrate.exponential(field_, p0, time_end, lin, rec, rtol=rtol, atol=atol,
                                             relinearise=relinearise)
            else:
                run = _integrate.ode_solver(field_, p0, time_end, rec, method="RK45" if method == "auto" else method,
                                            rtol=rtol, atol=atol)
    finally:
        bar.close()

    ntk_at = set(_ntk_record_indices(track_ntk, len(run.states)))
    dense = [r for r in ntk_at if not _attention._is_fixup(params.unflat(run.states[r]))]
    ntk_bar = _progress(len(dense), progress, "NTK records") if dense else None
    losses, lmins, lmaxs, disps, outputs = [], [], [], [], []
    skipped, skipped_at = "", float("nan")
    for r, vec in enumerate(run.states):
        pr = params.unflat(vec)
        want = r in ntk_at and not skipped
        XT, cache = _forward(batch, pr, layers, T, keep=want)
        z = _outputs(batch, XT, loss)
        val, _ = _loss_value(batch, z, Y, loss)
        losses.append(val + floor)
        disps.append(_displacement(params, p0, vec, layers, T))
        if track_ntk:
            lo = hi = float("nan")
            cheap = _attention._is_fixup(pr)  # from the features: no dense Jacobian
            if want and not cheap and time_budget is not None and rec.wall() >= time_budget:
                skipped, skipped_at = "the wall-clock budget was spent", run.s[r]
            elif want:
                try:
                    ev = _ntk_eigenvalues(batch, pr, layers, T, loss, cache)
                    lo, hi = float(ev[0]), float(ev[-1])
                except DomainError as exc:
                    skipped, skipped_at = str(exc), run.s[r]
                if ntk_bar is not None and not cheap:
                    ntk_bar.update(1)
            lmins.append(lo)
            lmaxs.append(hi)
        outputs.append(z)
    if ntk_bar is not None:
        ntk_bar.close()
    if skipped:
        notes.append(f"NTK eigenvalues not recorded from s={skipped_at:.4g} on: {skipped}")
    message = f"{run.status}: {run.steps} steps, {run.nfev} gradients"
    if run.rejected:
        message += f" ({run.rejected} steps rejected)"
    if floor > 0:
        notes.append(f"copies of a token have different targets: loss >= {floor:.4g} (loss_floor)")
    message = "; ".join([message] + notes)
    return FlowResult(
        run.s, tuple(losses), tuple(lmins), tuple(lmaxs), tuple(disps), run.walls, run.method, run.nfev, message,
        params.unflat(run.states[-1]), tuple(outputs), run.status, float(floor), float(time_end),
    )
