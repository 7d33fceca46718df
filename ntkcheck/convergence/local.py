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
        ``loss_floor_rounding`` (``nan`` if none is); eq. 31 holds on those records iff
        ``rate_measured >= lambda_0`` (``loss* = 0``: the targets are reachable)
    rate_asymptotic : slope of :math:`-\log\mathcal L` over the second half of the records above the floor
    rate_linearised : ``2 lambda_0``, the slowest decay rate of the loss of the linearised flow
    eq31_holds : every record satisfies :math:`\mathcal L(s)\le e^{-\lambda_0 s}\mathcal L(0)` up to
        ``loss_floor_rounding`` (a record at the rounding floor violates nothing)
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
    loss_floor_rounding : :func:`rounding_floor`: records at or below it are not used for rates
    rate_records : records (``s > 0``) above the floor that the rates use
    guarantee_holds : when certified, whether every record obeys the guaranteed envelope
        :math:`e^{-\text{rate}\,s}\mathcal L(0)` (up to the floor and the integration tolerance) and the
        displacement stays within the guaranteed radius; ``None`` when nothing is certified
    lipschitz_search : the search behind ``lipschitz_lower`` (``LipschitzSearch``, ``RegionSearch`` or None)
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
    eq31_holds: bool
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
        return restore(cls, d, flow=FlowResult.from_dict, certificate=_certificate, lipschitz_search=_search)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "loss_kind", "eps", "heads", "layers", "T", "per_layer", "lambda_0", "lambda_max_0", "loss_initial",
            "loss_final", "rate_theorem", "rate_measured", "rate_asymptotic", "rate_linearised", "eq31_holds",
            "linearisation_error", "displacement_max", "displacement_bound", "lipschitz_lower", "time_end",
            "loss_floor_rounding", "rate_records", "guarantee_holds", "lipschitz_ratio")}
        out["lipschitz_search"] = None if self.lipschitz_search is None else self.lipschitz_search.to_dict()
        out["flow"] = self.flow.to_dict()
        out["certificate"] = None if self.certificate is None else self.certificate.to_dict()
        return out


def _certificate(c: Any) -> Any:
    from .guarantee import ConvergenceCertificate

    return None if c is None else ConvergenceCertificate.from_dict(c)


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
    Lipschitz search on its ball (0: no search). ``targets``: the readout targets ``y`` themselves, an
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
    if targets is None:
        rng = np.random.default_rng(seed + 1)
        u_dir = rng.standard_normal(len(st.evals))
        u_dir /= np.linalg.norm(u_dir)
        # residual z0 - y = -eps r, i.e. u0 = W^{1/2}(z0 - y) = -eps u_dir
        y = st.z0 + eps * _from_weighted(st, u_dir)
    else:
        y, eps, u_dir = _given_targets(st, targets)
    if time_end is None:
        time_end = flow_time(st.evals, decades).time  # finite even for a singular NTK
    flow = gradient_flow(samples, params, _targets_from(st, y), layers=layers, time_end=time_end, T=T, loss=loss,
                         n_records=n_records, track_ntk=track_ntk, rtol=rtol, atol=atol, method=method, step=step,
                         progress=progress, time_budget=time_budget, loss_target=loss_target)
    s = np.array(flow.s)
    Ls = np.array(flow.loss)
    L0 = Ls[0]
    floor = rounding_floor(st.z0, y, int(layers), st.batch.X.shape[1])
    above = Ls > floor  # below it the loss is rounding: no rate is measured there
    pos = (s > 0) & above
    rate_measured = float(np.min(-np.log(Ls[pos] / L0) / s[pos])) if np.any(pos) else float("nan")
    keep = above & (s >= s[above][-1] / 2) if np.any(pos) else above
    rate_asym = -_fit_slope(s[keep], np.log(Ls[keep]))
    coef = st.coords(-eps * u_dir)
    L_lin = 0.5 * np.sum((np.exp(-np.outer(s, st.evals)) * coef) ** 2, axis=1)
    seen = above & (L_lin > floor)
    lin_err = float(np.max(np.abs(Ls[seen] - L_lin[seen]) / L_lin[seen]))
    eq31 = bool(np.all(Ls <= np.exp(-lam0 * s) * L0 * (1 + 1e-9) + floor))
    disp = np.array(flow.displacement)
    # seed 002 Thm. 8.5 with the corrected constants (theory/local-convergence.md)
    bound = 2.0 * math.sqrt(2.0 * lamM + lam0) / lam0 * math.sqrt(L0) if lam0 > 0 else float("inf")
    cert, search, holds = None, None, None
    if certify and not params.per_layer:
        left = None if time_budget is None else max(float(time_budget) - (time.perf_counter() - started), 0.0)
        cert, search, holds = _certify(samples, params, int(layers), float(T), loss, lam0, lamM, float(L0), s, Ls, disp,
                                       floor, rtol, atol, seed, search_evaluations, left)
    lip = float("nan") if search is None else getattr(search, "K_change", getattr(search, "best_ratio", float("nan")))
    return LocalConvergence(
        loss, float(eps), params.heads, int(layers), float(T), params.per_layer, lam0, lamM, float(L0), float(Ls[-1]),
        lam0, rate_measured, float(rate_asym), 2.0 * lam0, eq31, lin_err, float(disp.max()), bound, lip, float(time_end), flow,
        cert, float(floor), int(np.sum(pos)), holds, search,
    )


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


def _certify(samples: Any, params: AttentionParams, layers: int, T: float, loss: str, lam0: float, lamM: float,
             L0: float, s: np.ndarray, Ls: np.ndarray, disp: np.ndarray, floor: float, rtol: float, atol: float,
             seed: int, search_evaluations: int, seconds: float | None) -> tuple[Any, Any, bool | None]:
    r"""The certificate (:mod:`ntkcheck.convergence.guarantee`), the search on its ball or region, and whether the
    run obeys it, within ``seconds`` (``None``: no limit; the split region is not tried and the search not
    run once the time is spent).

    A record contradicts the guarantee when its loss is above :math:`e^{-\text{rate}\,s}\mathcal L(0)(1 + tol)`
    plus the larger of the rounding floor and the integration floor :math:`\frac12\Lambda\,(P/H)\,atol^2`
    (the loss of the residual :math:`B\,\Delta\theta` with every parameter off by the integrator's
    absolute tolerance: a converged run stalls there, e.g. at 4e-25 on the README example).
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
        slack = max(floor, 0.5 * lamM * (params.size / params.heads) * atol * atol)
        holds = bool(np.all(Ls <= np.exp(-cert.rate_guaranteed * s) * L0 * (1.0 + tol) + slack)
                     and disp.max() <= cert.displacement_bound * (1.0 + tol) + 10.0 * atol)
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
