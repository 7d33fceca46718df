r"""Experiment (a): local convergence of gradient flow from FixUp against seed 002 Thm. 8.5.

**Rates.** With :math:`\lambda_0 = \lambda_{\min}(K_{\rho_0})`, the linearised flow gives
:math:`\mathcal L(s)\approx\frac12|e^{-K_0 s}u_0|^2`, which decays like
:math:`e^{-2\lambda_0 s}` along the slowest mode. Seed 002 eq. 31,
:math:`\mathcal L(s)\le e^{-\lambda_0 s}\mathcal L(0)`, is weaker by the factor 2 because
its proof only keeps :math:`\lambda_{\min}(K_{\rho_s})\ge\lambda_0/2` along the run. The
measured rate reported here is the one eq. 31 bounds,
:math:`\min_{s>0} -\log(\mathcal L(s)/\mathcal L(0))/s`; eq. 31 holds on the run iff it is
:math:`\ge\lambda_0`. The displacement :math:`\big(\frac1H\sum_h|\theta_h(s)-\theta_h(0)|^2\big)^{1/2}`
(per-layer: :math:`(\frac{T}{LH}\sum_{l,h}|\cdot|^2)^{1/2}`) bounds :math:`W_2(\rho_s,\rho_0)` and
its speed is exactly :math:`(u^T K u)^{1/2}`, so the proof of Thm. 8.5 applies verbatim. With
the seed's slip corrected (its step 1 bounds :math:`\lambda_{\max}` by :math:`\Lambda + \lambda_0/(2L_K)`;
it is :math:`\Lambda + \lambda_0/2`) the bound is
:math:`W_2 \le 2\sqrt{2\Lambda+\lambda_0}\,\mathcal L(0)^{1/2}/\lambda_0`, valid when
:math:`\mathcal L(0) \le \lambda_0^4/(16 L_K^2(2\Lambda+\lambda_0))` (corrected eq. 30). A certified
upper bound on ``L_K`` (:mod:`ntkcheck.convergence.lipschitz`) decides that condition:
:attr:`LocalConvergence.certificate`.

References: seed 002 Thm. 8.5 (eqs. 30, 31); seed 003 Thm. 4.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _budget
from .._records import restore
from ..dynamics._experiment import (
    _default_params,
    _fit_slope,
    _from_weighted,
    _setup,
    _targets_from,
    _weighted_flat,
)
from ..dynamics.flow import FlowResult, flow_time, gradient_flow
from ..dynamics.model import AttentionParams, LossKind
from ..errors import DomainError
from .enclosure._model import model_of
from .enclosure.point import loss_bounds

__all__ = [
    "LocalConvergence",
    "local_convergence",
    "rounding_floor",
]


@dataclass(frozen=True)
class LocalConvergence:
    r"""Local convergence of gradient flow from FixUp against seed 002 Thm. 8.5 / seed 003 Thm. 4.

    Attributes
    ----------
    lambda_0, lambda_max_0 : extreme NTK eigenvalues at initialisation (``Lambda`` = lambda_max_0)
    rate_measured : :math:`\min_{s>0} -\log(\mathcal L(s)/\mathcal L(0))/s` over the records above
        the run's floor (``nan`` if none is); eq. 31 holds on those records iff
        ``rate_measured >= lambda_0`` (``loss* = 0``: the targets are reachable)
    rate_asymptotic : slope of :math:`-\log\mathcal L` over the second half of the records above the floor
    rate_linearised : ``2 lambda_0``, the slowest decay rate of the loss of the linearised flow
    eq31_holds : every record satisfies :math:`\mathcal L(s)\le e^{-\lambda_0 s}\mathcal L(0)` up to
        the run's floor (a record at the floor violates nothing); ``None`` when the comparison does not apply
    linearisation_error : max over records of :math:`|\mathcal L - \mathcal L_{lin}| / \mathcal L_{lin}`,
        :math:`\mathcal L_{lin}(s) = \frac12|e^{-K_0 s}u_0|^2`
    displacement_max, displacement_bound : max particle displacement and the Thm. 8.5 bound with
        the corrected constants, :math:`2\sqrt{2\Lambda+\lambda_0}\,\mathcal L(0)^{1/2}/\lambda_0`
        (guaranteed only when ``certificate.certified``)
    lipschitz_lower : the largest :math:`\|K(\theta)-K(\theta')\|/D(\theta,\theta')` found on the
        certificate's ball (:func:`ntkcheck.convergence.lipschitz_search.lipschitz_search`), or for a
        split-region certificate the largest :math:`\|K(\theta) - K_0\|/r_V` found on its region
        (:func:`~ntkcheck.convergence.lipschitz_search.region_search`): a lower bound on the true constant,
        beside the certified ``certificate.L_K`` (``lipschitz_ratio`` = their ratio)
    certificate : :class:`ntkcheck.convergence.guarantee.ConvergenceCertificate` or None
        Whether seed 002 Thm. 8.5 (sharpened, proved constants) guarantees the run and, if so, the
        guaranteed rate and radius; ``None`` for per-layer heads (the bound covers shared heads).
    loss_noise : per record, a proved bound of the rounding of the computed loss (the forward pass in ball
        arithmetic, :func:`ntkcheck.convergence.enclosure.point.loss_bounds`; for per-layer heads the estimate
        :func:`rounding_floor`)
    loss_floor_rounding : ``loss_noise`` at the last record
    loss_floor_integration : the loss of a residual :math:`B\,\Delta\theta` with every parameter off by the
        integrator's absolute tolerance, :math:`\frac12\Lambda(P/H)\,atol^2` (a converged run stalls there;
        for gradient descent the same with one rounding of the largest parameter)
    loss_floor_run : ``loss_floor_rounding + loss_floor_integration``, the run's floor at its last record. At
        every record the floor is its ``loss_noise`` plus ``loss_floor_integration``: records at or below it are
        not used for rates, and a record contradicts a bound only by more than it
    rate_records : records (``s > 0``) above the floor that the rates use
    comparison : empty when the run is a run of the flow the theorems are about, accurate enough to confirm
        or contradict them; otherwise why it is not (gradient descent with a step, a loose integrator), and
        then ``eq31_holds`` and ``guarantee_holds`` are ``None`` (the run is reported, never held against them)
    loss_initial_upper : a proved upper bound of the exact initial loss (ball arithmetic), the one the
        certificate uses
    guarantee_holds : when certified, whether every record obeys the guaranteed envelope
        :math:`e^{-\text{rate}\,s}\mathcal L(0)` (up to the floor and the integration tolerance) and the
        displacement stays within the guaranteed radius; ``None`` when nothing is certified or the comparison
        does not apply
    lipschitz_search : the search behind ``lipschitz_lower`` (``LipschitzSearch``, ``RegionSearch`` or None)
    handoff : :class:`ntkcheck.convergence.handoff.HandOff` when the certificate at FixUp does not hold (or the
        run is gradient descent): the earliest record from whose computed state convergence is proved
    targets : the targets the run used, as :func:`~ntkcheck.dynamics.flow.gradient_flow` takes them (not in ``to_dict``)
    from_fixup : :class:`ntkcheck.convergence.from_fixup.FromFixup` after a hand-off of the flow: the validated
        tube from FixUp to the hand-off and the certificate that covers its radius (or what stopped it)
    """

    loss_kind: str
    eps: float
    heads: int
    layers: int
    T: float
    per_layer: bool
    lambda_0: float
    lambda_max_0: float
    loss_initial: float
    loss_final: float
    rate_theorem: float
    rate_measured: float
    rate_asymptotic: float
    rate_linearised: float
    eq31_holds: bool | None
    linearisation_error: float
    displacement_max: float
    displacement_bound: float
    lipschitz_lower: float
    time_end: float
    flow: FlowResult = field(repr=False)
    certificate: Any = field(default=None, repr=False)
    loss_floor_rounding: float = 0.0
    rate_records: int = 0
    guarantee_holds: bool | None = None
    lipschitz_search: Any = field(default=None, repr=False)
    loss_floor_integration: float = 0.0
    loss_floor_run: float = 0.0
    comparison: str = ""
    loss_initial_upper: float = float("nan")
    loss_noise: tuple[float, ...] = ()
    handoff: Any = field(default=None, repr=False)
    targets: Any = field(default=None, repr=False, compare=False)
    from_fixup: Any = field(default=None, repr=False)

    @property
    def lipschitz_ratio(self) -> float:
        """Certified ``L_K`` over the best ratio found on the same ball (how loose the bound is)."""
        if self.certificate is None or not self.lipschitz_lower > 0:
            return float("nan")
        return float(self.certificate.L_K / self.lipschitz_lower)

    def __repr__(self) -> str:
        return (f"LocalConvergence({self.loss_kind}, eps={self.eps:g}: lambda_0={self.lambda_0:.4g}, "
                f"rate_measured={self.rate_measured:.4g} (theorem {self.rate_theorem:.4g}, linearised {self.rate_linearised:.4g}), "
                f"eq31_holds={self.eq31_holds}, displacement {self.displacement_max:.3g} <= bound {self.displacement_bound:.3g})")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LocalConvergence:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d, flow=FlowResult.from_dict, certificate=_certificate, lipschitz_search=_search,
                       handoff=_handoff, from_fixup=_from_fixup)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "loss_kind", "eps", "heads", "layers", "T", "per_layer", "lambda_0", "lambda_max_0", "loss_initial",
            "loss_final", "rate_theorem", "rate_measured", "rate_asymptotic", "rate_linearised", "eq31_holds",
            "linearisation_error", "displacement_max", "displacement_bound", "lipschitz_lower", "time_end",
            "loss_floor_rounding", "loss_floor_integration", "loss_floor_run", "comparison", "loss_initial_upper",
            "rate_records", "guarantee_holds", "lipschitz_ratio")}
        out["loss_noise"] = list(self.loss_noise)
        out["handoff"] = None if self.handoff is None else self.handoff.to_dict()
        out["from_fixup"] = None if self.from_fixup is None else self.from_fixup.to_dict()
        out["lipschitz_search"] = None if self.lipschitz_search is None else self.lipschitz_search.to_dict()
        out["flow"] = self.flow.to_dict()
        out["certificate"] = None if self.certificate is None else self.certificate.to_dict()
        return out


def _certificate(c: Any) -> Any:
    from .guarantee import ConvergenceCertificate

    return None if c is None else ConvergenceCertificate.from_dict(c)


def _from_fixup(h: Any) -> Any:
    from .from_fixup import FromFixup

    return None if h is None else FromFixup.from_dict(h)


def _handoff(h: Any) -> Any:
    from .handoff import HandOff

    return None if h is None else HandOff.from_dict(h)


def _search(s: Any) -> Any:
    from .lipschitz_search import LipschitzSearch, RegionSearch

    if isinstance(s, dict) and "radius_V" in s:
        return RegionSearch.from_dict(s)

    return None if s is None else LipschitzSearch.from_dict(s)


def local_convergence(
    samples: Any,
    *,
    heads: int = 16,
    layers: int = 4,
    T: float = 1.0,
    eps: float = 1e-2,
    loss: LossKind = "tokens",
    per_layer: bool = False,
    params: AttentionParams | None = None,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    seed: int = 0,
    time_end: float | None = None,
    decades: float = 4.0,
    n_records: int = 30,
    track_ntk: bool | int = True,
    rtol: float = 1e-7,
    atol: float = 1e-12,
    method: str = "auto",
    step: float | None = None,
    progress: bool | None = None,
    time_budget: float | None = None,
    loss_target: float | None = None,
    search_evaluations: int = 200,
    certify: bool = True,
    tube: bool = True,
    tube_progress: Any = None,
    targets: Any = None,
) -> LocalConvergence:
    r"""Experiment (a): targets :math:`y = z_0 + \varepsilon r` near the initial outputs.

    ``r`` is a seeded Gaussian direction normalised to :math:`|W^{1/2} r| = 1`, so
    :math:`\mathcal L(0) = \varepsilon^2/2` and ``loss* = 0`` whenever the NTK is positive
    (the outputs can follow any direction to first order). ``time_end`` defaults to the time
    the slowest linearised mode needs to lose ``decades`` decades of loss,
    :math:`\text{decades}\cdot\ln 10/(2\lambda_0)`. ``loss_target`` stops the run as soon as
    the loss reaches it, ``time_budget`` after that many wall-clock seconds (as in
    :func:`~ntkcheck.dynamics.flow.gradient_flow`; what the run leaves of it, or the enclosing command's
    budget, bounds the certificate, which is "not certified (time budget spent)" past it, and the search). ``certify``: compute the certificate
    (:mod:`ntkcheck.convergence.guarantee`, a few seconds), and ``search_evaluations`` NTKs for the
    Lipschitz search on its ball (0: no search). When the certificate at FixUp does not hold, the records are
    searched for a hand-off (:mod:`ntkcheck.convergence.handoff`) and, for the flow and with ``tube``, the
    validated tube from FixUp to it is built within the time left (:mod:`ntkcheck.convergence.from_fixup`;
    ``tube_progress(s, e)`` is called after each of its segments).
    ``targets``: the readout targets ``y`` themselves, an
    ``(n, d)`` array (one row per sample; ``loss="readout"``), instead of ``z_0 + eps r``; ``eps`` is
    then :math:`|W^{1/2}(y - z_0)|`, so that :math:`\mathcal L(0) = \varepsilon^2/2` still.

    References: seed 002 Thm. 8.5 (eq. 31 and the displacement bound), seed 003 Thm. 4.
    """
    started = time.perf_counter()
    if not (np.isfinite(eps) and eps > 0):
        raise DomainError(f"eps must be finite and > 0, got {eps!r}")
    if eps > 1e150:
        raise DomainError(f"eps = {eps:g}: the initial loss eps^2 / 2 overflows float64; take eps below 1e150")
    if params is None:
        params = _default_params(samples, heads, layers, per_layer, q_scale, b_scale, seed)
    st = _setup(samples, params, layers, T, loss)
    lam0, lamM = float(st.evals[0]), float(st.evals[-1])
    if step is not None and step * lamM > 2.0:
        raise DomainError(f"step = {step:g} is beyond the stability limit 2 / Lambda = {2.0 / lamM:.4g} of explicit "
                          "gradient descent (Lambda: the largest NTK eigenvalue at FixUp); take a smaller step")
    if lam0 <= 1e-12 * lamM:
        import warnings

        from ..errors import NtkcheckWarning

        warnings.warn(f"the NTK at initialisation is singular (lambda_min={lam0:.3g}, lambda_max={lamM:.3g}): "
                      "Thm. 8.5 does not apply; see kernel_plateau", NtkcheckWarning, stacklevel=2)
    y, eps, u_dir = _offset_targets(st, eps, seed) if targets is None else _given_targets(st, targets)
    if time_end is None:
        time_end = flow_time(st.evals, decades).time  # finite even for a singular NTK
    targets = _targets_from(st, y)
    flow = gradient_flow(samples, params, targets, layers=layers, time_end=time_end, T=T, loss=loss,
                         n_records=n_records, track_ntk=track_ntk, rtol=rtol, atol=atol, method=method, step=step,
                         progress=progress, time_budget=time_budget, loss_target=loss_target)
    s = np.array(flow.s)
    Ls = np.array(flow.loss)
    L0 = Ls[0]
    mdl = None if params.per_layer else model_of(samples, params.heads, params.dim, targets, layers=int(layers),
                                                 T=float(T), loss=loss)
    L0_up = float("nan") if mdl is None else loss_bounds(mdl, params.flat())[1]
    noise, f_int = _floors(mdl, flow, st, y, params, lamM, atol, step, int(layers))
    floor = noise + f_int  # per record: the proved rounding of that record's loss and the integration floor
    comparison = _comparison(step, rtol, atol)
    above = Ls > floor  # at or below it the loss is noise: no rate is measured there
    pos = (s > 0) & above
    rate_measured = float(np.min(-np.log(Ls[pos] / L0) / s[pos])) if np.any(pos) else float("nan")
    keep = above & (s >= s[above][-1] / 2) if np.any(pos) else above
    rate_asym = -_fit_slope(s[keep], np.log(Ls[keep]))
    coef = st.coords(-eps * u_dir)
    L_lin = 0.5 * np.sum((np.exp(-np.outer(s, st.evals)) * coef) ** 2, axis=1)
    seen = above & (L_lin > floor)
    lin_err = float(np.max(np.abs(Ls[seen] - L_lin[seen]) / L_lin[seen])) if np.any(seen) else float("nan")
    eq31 = None if comparison else bool(np.all(Ls <= np.exp(-lam0 * s) * L0 * (1 + 1e-9) + floor))
    disp = np.array(flow.displacement)
    # seed 002 Thm. 8.5 with the corrected constants (theory/local-convergence.md)
    bound = 2.0 * math.sqrt(2.0 * lamM + lam0) / lam0 * math.sqrt(L0) if lam0 > 0 else float("inf")
    cert, search, holds = None, None, None
    if certify and not params.per_layer:
        left = None if time_budget is None else max(float(time_budget) - (time.perf_counter() - started), 0.0)
        cert, search, holds = _certify(samples, params, int(layers), float(T), loss, lam0, lamM, L0_up, s, Ls, disp,
                                       floor, rtol, seed, search_evaluations, left)
        holds = None if comparison else holds
    ho, fx = None, None
    if certify and mdl is not None and (step is not None or cert is None or not cert.certified):
        ho, fx = _hand_over(samples, params, mdl, flow, int(layers), float(T), loss, step, floor,
                            not comparison or step is not None, tube, tube_progress, time_budget, started)
    lip = float("nan") if search is None else getattr(search, "K_change", getattr(search, "best_ratio", float("nan")))
    return LocalConvergence(
        loss, float(eps), params.heads, int(layers), float(T), params.per_layer, lam0, lamM, float(L0), float(Ls[-1]),
        lam0, rate_measured, float(rate_asym), 2.0 * lam0, eq31, lin_err, float(disp.max()), bound, lip, float(time_end), flow,
        cert, float(noise[-1]), int(np.sum(pos)), holds, search, float(f_int), float(floor[-1]), comparison, L0_up,
        tuple(float(v) for v in noise), ho, targets, fx,
    )


def _offset_targets(st: Any, eps: float, seed: int) -> tuple[np.ndarray, float, np.ndarray]:
    """``(y, eps, u_dir)`` for targets ``eps`` away along a seeded direction: ``u0 = W^{1/2}(z0 - y) = -eps u_dir``."""
    rng = np.random.default_rng(seed + 1)
    u_dir = rng.standard_normal(len(st.evals))
    u_dir /= np.linalg.norm(u_dir)
    return st.z0 + eps * _from_weighted(st, u_dir), float(eps), u_dir


def _given_targets(st: Any, targets: Any) -> tuple[np.ndarray, float, np.ndarray]:
    """``(y, eps, u_dir)`` for readout targets given by the user: ``u0 = W^{1/2}(z0 - y) = -eps u_dir``."""
    if st.loss != "readout":
        raise DomainError("targets: given targets are readout targets (one row per sample): use loss='readout'")
    y = np.asarray(targets, dtype=np.float64)
    if y.shape != st.z0.shape:
        raise DomainError(f"targets: expected one row per sample, shape {st.z0.shape}, got {y.shape}")
    if not np.all(np.isfinite(y)):
        raise DomainError("targets: has non-finite entries")
    u0 = _weighted_flat(st, st.z0 - y)
    eps = float(np.linalg.norm(u0))
    if not (eps > 0 and math.isfinite(eps)):
        raise DomainError("targets: equal the outputs at initialisation (the loss is 0 from the start) or overflow")
    return y, eps, -u0 / eps


def _hand_over(samples: Any, params: AttentionParams, mdl: Any, flow: FlowResult, layers: int, T: float, loss: str,
               step: float | None, floor: np.ndarray, check: bool, tube: bool, tube_progress: Any,
               time_budget: float | None, started: float) -> tuple[Any, Any]:
    """The hand-off along the run (:mod:`ntkcheck.convergence.handoff`) and, for the flow, the tube from FixUp to
    it (:mod:`ntkcheck.convergence.from_fixup`), each within what the run's time budget and the command's leave."""
    from .handoff import HandOff, hand_off

    def left() -> float | None:
        rest = None if time_budget is None else max(float(time_budget) - (time.perf_counter() - started), 1.0)
        return _budget.capped(rest)

    # each centred certificate is one uninterruptible call (a forward-mode Jacobian over every parameter): under a
    # limited budget the search runs where the caller stops waiting at the deadline (ntkcheck._budget.run)
    limit = left()
    outer = _budget.current().seconds is not None
    with _budget.scope(None if outer or limit is None else _budget.Budget(limit), stoppable=True):
        try:
            ho = _budget.run(lambda: hand_off(samples, params, mdl, flow, layers=layers, T=T, loss=loss, step=step,
                                              floor=floor, check=check, seconds=limit), "the hand-off search")
        except _budget.OutOfTime as exc:
            return HandOff(False, -1, math.nan, None, (), None, f"not searched to the end: {exc}", cut=str(exc)), None
    if not (tube and ho.found and step is None):
        return ho, None
    from .from_fixup import from_fixup

    # run even when the budget is spent: the tube then stops at once and the report says the budget stopped it
    return ho, from_fixup(samples, params, mdl, layers=layers, T=T, loss=loss, s_target=ho.s,
                          s_max=max(float(flow.s[-1]), 2.0 * ho.s), seconds=left(), progress=tube_progress)


#: a run of the flow is held against its theorems only at tolerances this tight or tighter (its error is then
#: far below the tolerance ``max(1e-6, 10 rtol)`` a record is allowed over a bound)
CHECK_RTOL = 1e-6
CHECK_ATOL = 1e-9


def _comparison(step: float | None, rtol: float, atol: float) -> str:
    """Empty when the run can confirm or contradict the flow's theorems; otherwise why it cannot."""
    if step is not None:
        return (f"gradient descent with step {step:g} is not the gradient flow: the flow's theorems (eq. 31, the "
                "certified guarantee) are not held against it")
    if rtol > CHECK_RTOL or atol > CHECK_ATOL:
        return (f"at rtol={rtol:g}, atol={atol:g} the run's integration error is not bounded (the check needs rtol <= "
                f"{CHECK_RTOL:g}, atol <= {CHECK_ATOL:g}): it neither confirms nor contradicts the flow's theorems")
    return ""


def _floors(mdl: Any, flow: FlowResult, st: Any, y: np.ndarray, params: AttentionParams, lamM: float, atol: float,
            step: float | None, layers: int) -> tuple[np.ndarray, float]:
    r"""The run's loss noise: a proved bound of the evaluation rounding at each record (ball arithmetic;
    per-layer heads: the estimate :func:`rounding_floor`), and the integration floor
    :math:`\frac12\Lambda(P/H)\,\epsilon^2`, :math:`\epsilon` the absolute tolerance (gradient descent: four
    roundings of the largest parameter)."""
    if mdl is None or not flow.states:
        rnd = np.full(len(flow.s), rounding_floor(st.z0, y, layers, st.batch.X.shape[1]))
    else:
        bounds = [loss_bounds(mdl, vec) for vec in flow.states]
        rnd = np.array([hi - lo for lo, hi in bounds])
    tol = atol if step is None else 4.0 * 2.0**-53 * max(float(np.max(np.abs(v))) for v in flow.states or [params.flat()])
    return rnd, 0.5 * lamM * (params.size / params.heads) * tol * tol


def _certify(samples: Any, params: AttentionParams, layers: int, T: float, loss: str, lam0: float, lamM: float,
             L0: float, s: np.ndarray, Ls: np.ndarray, disp: np.ndarray, floor: np.ndarray, rtol: float,
             seed: int, search_evaluations: int, seconds: float | None) -> tuple[Any, Any, bool | None]:
    r"""The certificate (:mod:`ntkcheck.convergence.guarantee`), the search on its ball or region, and whether the
    run obeys it, within ``seconds`` (``None``: no limit; the split region is not tried and the search not
    run once the time is spent).

    A record contradicts the guarantee when its loss is above :math:`e^{-\text{rate}\,s}\mathcal L(0)(1 + tol)`
    plus the run's floor (``LocalConvergence.loss_floor_run``: the proved rounding of the loss and the
    integration floor :math:`\frac12\Lambda\,(P/H)\,atol^2`, where a converged run stalls, e.g. at 4e-25 on
    the README example). ``L0`` is the proved upper bound of the initial loss.
    """
    from .. import _budget
    from .guarantee import ConvergenceCertificate, certificate_from_spectrum
    from .lipschitz_search import lipschitz_search, region_search

    t0 = time.perf_counter()
    # the ball bound and the certified spectrum cannot stop half-way: under a limited budget they run where
    # the caller stops waiting at the deadline (ntkcheck._budget.run) and the certificate says it was cut
    # (the command's budget when one encloses the call, e.g. ``flow --max-seconds``; else what the run left)
    outer = _budget.current().seconds is not None
    limit = None if outer or seconds is None else _budget.Budget(max(float(seconds), 0.0))
    with _budget.scope(limit, stoppable=True):
        try:
            cert = _budget.run(lambda: certificate_from_spectrum(
                samples, params, layers=layers, T=T, loss=loss, lambda_min=lam0, lambda_max=lamM, loss_initial=L0,
                seconds=seconds), "the convergence certificate")
        except _budget.OutOfTime as exc:
            return ConvergenceCertificate.out_of_time(L0, lam0, lamM, str(exc)), None, None
    left = math.inf if seconds is None else seconds - (time.perf_counter() - t0)
    search = None
    if search_evaluations > 0 and np.isfinite(cert.radius) and cert.radius > 0 and left > 0:
        try:
            if cert.method == "split-region":
                search = region_search(samples, params, layers=layers, T=T, loss=loss, radius_V=cert.radius,
                                       radius_psi=cert.radius_psi, evaluations=search_evaluations,
                                       seconds=min(10.0, left), seed=seed)
            else:
                search = lipschitz_search(samples, params, layers=layers, T=T, loss=loss, radius=cert.radius,
                                          evaluations=search_evaluations, seconds=min(10.0, left), seed=seed)
        except DomainError:  # the dense NTKs of the search are over the memory budget: no search
            search = None
    holds = None
    if cert.certified:
        tol = max(1e-6, 10.0 * rtol)
        holds = bool(np.all(Ls <= np.exp(-cert.rate_guaranteed * s) * L0 * (1.0 + tol) + floor)
                     and disp.max() <= cert.displacement_bound * (1.0 + tol)
                     + 10.0 * math.sqrt(2.0 * float(np.max(floor)) / lamM + 1e-300))
    return cert, search, holds


def rounding_floor(z0: np.ndarray, y: np.ndarray, layers: int, atoms: int) -> float:
    r"""The loss below which a computed loss is rounding, not signal.

    The outputs pass through ``L`` layers of sums over at most ``N`` atoms and ``d`` coordinates,
    so each carries an error of order :math:`(L + 1)(N + d)\,u\,s` with ``s`` the scale of the
    outputs and targets; the floor is :math:`\frac12\sum (8(L+1)(N+d)\,u\,s)^2` over the outputs.
    A record at or below it is consistent with every rate (``theory/local-convergence.md``).
    """
    scale = max(float(np.max(np.abs(z0))), float(np.max(np.abs(y))), 1.0)
    e = 8.0 * (layers + 1) * (atoms + z0.shape[-1]) * 2.0**-53 * scale
    return 0.5 * z0.size * e * e
