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
Gram of ``theory/ntk-prop8.md`` (:math:`w_{ij} = 1/N_i`, ``ntkcheck.ntk.gram_matrix.pipeline``):

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
from .._records import restore
from ..errors import DomainError, InputError
from . import _attention, _integrate, _sizes
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
#: does not resolve relative eigenvalues below ~1e-13 (ntkcheck.ntk.gram_matrix.pipeline, RESOLUTION_EIGH)
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
    states : the parameters at each record, flat as ``AttentionParams.flat`` (not in ``to_dict``)
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
    states: tuple[np.ndarray, ...] = field(repr=False, compare=False, default=())

    def __repr__(self) -> str:
        return (f"FlowResult({self.method}, s_end={self.s[-1]:.4g}, loss {self.loss[0]:.3e} -> {self.loss[-1]:.3e}, "
                f"displacement_max={max(self.displacement):.3g}, nfev={self.nfev}, {self.status.name.lower()})")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FlowResult:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, {**d, "final_params": None}, status=lambda v: FlowStatus[str(v).upper()])

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


def _check_flow_options(time_end: float, n_records: int, record_spacing: str, step: float | None,
                        loss_target: float | None, time_budget: float | None) -> None:
    """Refuse run options of :func:`gradient_flow` (the model arguments are ``_prepare``'s)."""
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


def _record_times(time_end: float, n_records: int, record_spacing: str) -> np.ndarray:
    """The ``n_records`` flow times of the records, ``0`` first and ``time_end`` last.

    ``"log"`` spaces them from ``1e-3 time_end`` on, so that the fast early decay gets as
    many records as the slow tail.
    """
    if record_spacing == "log":
        return np.concatenate([[0.0], np.geomspace(time_end * 1e-3, time_end, n_records - 1)])
    return np.linspace(0.0, time_end, n_records)


@dataclass(frozen=True, eq=False)
class _FlowProblem:
    r"""What every step of one run needs: the model on the atoms, its targets, its mobility.

    Attributes
    ----------
    batch : the samples as atoms with masses
    params : the initial parameters; states are flat vectors read through ``params.unflat``
    Y : the targets on the atoms
    floor : the part of the loss no parameter can change (``FlowResult.loss_floor``)
    layers, T : depth and horizon, as ``int`` and ``float``
    loss : ``"tokens"`` or ``"readout"``
    m : the mobility in :math:`d\theta/ds = -m\,\nabla\mathcal L`
    p0 : ``params.flat()``: where the run starts and displacements are measured from
    """

    batch: _attention._Batch
    params: AttentionParams
    Y: np.ndarray
    floor: float
    layers: int
    T: float
    loss: LossKind
    m: float
    p0: np.ndarray

    @classmethod
    def set_up(cls, batch: _attention._Batch, params: AttentionParams, targets: Any, layers: int, T: float,
               loss: LossKind) -> _FlowProblem:
        """The problem of :func:`gradient_flow` from its validated arguments."""
        Y, floor = _attention._targets_array(batch, targets, loss)
        layers, T = int(layers), float(T)
        return cls(batch, params, Y, floor, layers, T, loss, _mobility(params, layers, T), params.flat())

    def field(self, vec: np.ndarray) -> tuple[float, np.ndarray]:
        r"""The loss (without ``floor``) and :math:`-m\,\nabla\mathcal L` at the flat parameters ``vec``."""
        val, g = _loss_grad(self.batch, self.params.unflat(vec), self.Y, self.layers, self.T, self.loss)
        return val, -self.m * g.flat()

    def relinearise(self, vec: np.ndarray) -> _attention._Linear | None:
        """The linear part at ``vec``, or ``None`` for the exponential integrator to keep its own."""
        try:
            return _attention.linear_part(self.batch, self.params.unflat(vec), self.layers, self.T, self.loss)
        except DomainError:  # the dense Jacobian is over the memory budget
            return None


def _initial_linear_part(problem: _FlowProblem, method: str, notes: list[str]) -> _attention._Linear | None:
    """The linear part at the initial parameters if ``method`` asks for the exponential integrator.

    ``"auto"`` takes ``None`` (RK45, said in ``notes``) when the dense Jacobian is over the
    memory budget; ``"exponential"`` was asked for explicitly, so it raises instead.
    """
    if method not in ("auto", "exponential"):
        return None
    try:
        return _attention.linear_part(problem.batch, problem.params, problem.layers, problem.T, problem.loss)
    except DomainError as exc:
        if method == "exponential":
            raise
        notes.append(f"RK45 instead of the exponential integrator ({exc})")
        return None


def _integrate_flow(problem: _FlowProblem, time_end: float, rec: _integrate._Recorder, *, method: str,
                    step: float | None, rtol: float, atol: float, notes: list[str]) -> _integrate._Run:
    """One run from ``p0`` to ``time_end`` (or until ``rec`` stops it) by the integrator the options pick."""
    if step is not None:
        return _integrate.descent(problem.field, problem.p0, time_end, rec, step=step)
    lin = _initial_linear_part(problem, method, notes)
    if lin is not None:
        return _integrate.exponential(problem.field, problem.p0, time_end, lin, rec, rtol=rtol, atol=atol,
                                      relinearise=problem.relinearise)
    return _integrate.ode_solver(problem.field, problem.p0, time_end, rec,
                                 method="RK45" if method == "auto" else method, rtol=rtol, atol=atol)


def _integrate_with_progress(
    problem: _FlowProblem,
    s_rec: np.ndarray,
    time_end: float,
    *,
    method: str,
    step: float | None,
    rtol: float,
    atol: float,
    loss_target: float | None,
    time_budget: float | None,
    progress: bool | None,
    notes: list[str],
) -> tuple[_integrate._Run, _integrate._Recorder]:
    """Integrate the flow under a progress bar, storing the states at the record times.

    Parameters
    ----------
    problem : the run's model, targets and mobility
    s_rec : flow times of the records (:func:`_record_times`)
    time_end, method, step, rtol, atol, loss_target, time_budget, progress : as in
        :func:`gradient_flow`
    notes : remarks for ``FlowResult.message`` are appended to it

    Returns
    -------
    run : the stored states and why the run stopped
    rec : its recorder, whose wall clock keeps running for the NTK records
    """
    bar = _progress(time_end, progress, "gradient flow")

    def show(s: float, val: float) -> None:
        bar.update(min(s, time_end) - bar.n)
        bar.set_postfix_str(f"loss={val + problem.floor:.3e}", refresh=False)

    # the integrators see the loss without its floor, so the target is shifted alike
    target = None if loss_target is None else loss_target - problem.floor
    rec = _integrate._Recorder(s_rec, time_budget, target, show)
    try:
        run = _integrate_flow(problem, time_end, rec, method=method, step=step, rtol=rtol, atol=atol, notes=notes)
    finally:
        bar.close()
    return run, rec


@dataclass(frozen=True)
class _Records:
    """What is evaluated at the stored states after the run (``FlowResult`` fields of these names).

    ``ntk_note`` says from which record on NTK eigenvalues are missing, and why ("" if none is).
    """

    loss: tuple[float, ...]
    lambda_min: tuple[float, ...]
    lambda_max: tuple[float, ...]
    displacement: tuple[float, ...]
    outputs: tuple[np.ndarray, ...]
    ntk_note: str


def _ntk_extremes(problem: _FlowProblem, pr: AttentionParams, cache: Any, rec: _integrate._Recorder,
                  time_budget: float | None, ntk_bar: Any) -> tuple[float, float, str]:
    """``lambda_min`` and ``lambda_max`` of the NTK at one record, or ``nan`` and why not.

    Once the wall-clock budget is spent no dense NTK is started; the FixUp one comes from the
    features (no dense Jacobian) and is still computed.
    """
    lo = hi = float("nan")
    cheap = _attention._is_fixup(pr)
    if not cheap and time_budget is not None and rec.wall() >= time_budget:
        return lo, hi, "the wall-clock budget was spent"
    why = ""
    try:
        ev = _ntk_eigenvalues(problem.batch, pr, problem.layers, problem.T, problem.loss, cache)
        lo, hi = float(ev[0]), float(ev[-1])
    except DomainError as exc:
        why = str(exc)
    if ntk_bar is not None and not cheap:
        ntk_bar.update(1)
    return lo, hi, why


def _evaluate_records(problem: _FlowProblem, run: _integrate._Run, rec: _integrate._Recorder, *,
                      track_ntk: bool | int, time_budget: float | None, progress: bool | None) -> _Records:
    """Loss, displacement, outputs and the tracked NTK extremes at every stored state of ``run``.

    The NTK is given up at the first record where it cannot be computed (memory or wall-clock
    budget): trying again at every later record would only spend more. Those records get ``nan``.
    """
    ntk_at = set(_ntk_record_indices(track_ntk, len(run.states)))
    dense = [r for r in ntk_at if not _attention._is_fixup(problem.params.unflat(run.states[r]))]
    ntk_bar = _progress(len(dense), progress, "NTK records") if dense else None
    losses, lmins, lmaxs, disps, outputs = [], [], [], [], []
    skipped, skipped_at = "", float("nan")
    for r, vec in enumerate(run.states):
        pr = problem.params.unflat(vec)
        want = r in ntk_at and not skipped
        XT, cache = _forward(problem.batch, pr, problem.layers, problem.T, keep=want)
        z = _outputs(problem.batch, XT, problem.loss)
        val, _ = _loss_value(problem.batch, z, problem.Y, problem.loss)
        losses.append(val + problem.floor)
        disps.append(_displacement(problem.params, problem.p0, vec, problem.layers, problem.T))
        if track_ntk:
            lo = hi = float("nan")
            if want:
                lo, hi, why = _ntk_extremes(problem, pr, cache, rec, time_budget, ntk_bar)
                if why:
                    skipped, skipped_at = why, run.s[r]
            lmins.append(lo)
            lmaxs.append(hi)
        outputs.append(z)
    if ntk_bar is not None:
        ntk_bar.close()
    note = f"NTK eigenvalues not recorded from s={skipped_at:.4g} on: {skipped}" if skipped else ""
    return _Records(tuple(losses), tuple(lmins), tuple(lmaxs), tuple(disps), tuple(outputs), note)


def _stop_message(run: _integrate._Run, notes: list[str]) -> str:
    """Why the run stopped (``run.status``, set by the integrator) and at what cost, then the notes."""
    message = f"{run.status}: {run.steps} steps, {run.nfev} gradients"
    if run.rejected:
        message += f" ({run.rejected} steps rejected)"
    return "; ".join([message] + notes)


def _assemble_result(problem: _FlowProblem, run: _integrate._Run, records: _Records, notes: list[str],
                     time_end: float) -> FlowResult:
    """The :class:`FlowResult` of a run; ``notes`` are the integration's remarks."""
    notes = list(notes)
    if records.ntk_note:
        notes.append(records.ntk_note)
    if problem.floor > 0:
        notes.append(f"copies of a token have different targets: loss >= {problem.floor:.4g} (loss_floor)")
    return FlowResult(
        run.s, records.loss, records.lambda_min, records.lambda_max, records.displacement, run.walls, run.method,
        run.nfev, _stop_message(run, notes), problem.params.unflat(run.states[-1]), records.outputs, run.status,
        float(problem.floor), float(time_end), tuple(run.states),
    )


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
    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    _check_flow_options(time_end, n_records, record_spacing, step, loss_target, time_budget)
    _sizes.require_records(int(n_records), params.size, batch.X.size)
    problem = _FlowProblem.set_up(batch, params, targets, layers, T, loss)
    s_rec = _record_times(time_end, n_records, record_spacing)
    notes: list[str] = []
    run, rec = _integrate_with_progress(
        problem, s_rec, time_end, method=method, step=step, rtol=rtol, atol=atol,
        loss_target=loss_target, time_budget=time_budget, progress=progress, notes=notes,
    )
    records = _evaluate_records(problem, run, rec, track_ntk=track_ntk, time_budget=time_budget, progress=progress)
    return _assemble_result(problem, run, records, notes, time_end)
