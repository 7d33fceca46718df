r"""The convergence guarantee of seed 002 Thm. 8.5 for given data, heads and targets, proved.

**The statement certified** (``theory/local-convergence.md``, "The certified guarantee"). Let
:math:`\sigma_0 = \sqrt{\lambda_0}` with :math:`\lambda_0 \le \lambda_{\min}(K_0)` proved
(:mod:`ntkcheck.convergence.spectrum_bound`), :math:`\beta(r) \ge \sup_{D(\theta,\theta_0)\le r}\|B(\theta) - B_0\|`
(:mod:`ntkcheck.convergence.jacobian_bound`, :math:`K = BB^\top`) and :math:`|u_0| = \sqrt{2\mathcal L(0)}`. If
for some radius ``r``

.. math::

    (\sigma_0 - \beta(r))\, r \;\ge\; \sqrt{2\mathcal L(0)},

then along the gradient flow :math:`D(\theta_s, \theta_0) \le W = \sqrt{2\mathcal L(0)}/(\sigma_0 - \beta(r)) \le r`
and :math:`\mathcal L(s) \le e^{-2(\sigma_0 - \beta(r))^2 s}\,\mathcal L(0)`. Two steps of the seed's
proof are sharpened: the coercivity on the ball comes from Weyl's inequality for singular
values, :math:`\sigma_{\min}(B(\theta)) \ge \sigma_0 - \|B(\theta) - B_0\|` (no :math:`\Lambda`, no factor
:math:`\|B\|`), and the displacement from the Polyak-Łojasiewicz length bound
:math:`\int_0^\infty|\dot\theta|_\rho\,ds \le \sqrt{2\mathcal L(0)/\lambda_{\rm low}}` (no :math:`\Lambda`).
Whenever the corrected eq. 30, :math:`\mathcal L(0) \le \lambda_0^4/(16 L_K^2(2\Lambda+\lambda_0))`, holds
with the certified ``L_K``, so does this condition; the converse fails by large factors.

References: seed 002 ("A Mean-Field Theory of Transformers") Thm. 8.5 (eqs. 30-31), Assumption 7;
seed 003 ("Training Infinitely Deep and Wide Transformers") Thm. 4.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import _budget
from .._records import restore
from ..errors import DomainError
from .coercivity.split import SplitCertificate, coercivity_setup, split_certificate
from .jacobian_bound import FixupCentre, JacobianBound, fixup_centre, second_derivative_bound
from .lipschitz import ROUNDING_MARGIN, _bound, _check_model

__all__ = [
    "ConvergenceCertificate",
    "certificate_from_spectrum",
    "certificates_from_spectrum",
    "convergence_certificate",
]

#: radii on which the condition is checked: geometric, this many per decade
_PER_DECADE = 16
#: decades of radius scanned below sigma_0 / M_2(0), where the condition can first hold
_DECADES = 5


@dataclass(frozen=True)
class ConvergenceCertificate:
    r"""Seed 002 Thm. 8.5 (sharpened, ``theory/local-convergence.md``) for given data, heads and targets.

    Attributes
    ----------
    certified : bool
        The condition :math:`(\sigma_0 - \beta(r))r \ge \sqrt{2\mathcal L(0)}` holds for some ``r``
        and the spectrum is proved.
    loss_initial : float
        :math:`\mathcal L(0)`.
    lambda_0, lambda_max_0 : float
        Proved :math:`\lambda_0 \le \lambda_{\min}(K_0)`, :math:`\Lambda \ge \lambda_{\max}(K_0)` when
        ``spectrum_proved`` (else float64 values widened by ``ROUNDING_MARGIN``, and nothing is certified).
    spectrum_proved : bool
    radius : float
        The ball of the certificate: the smallest checked ``r`` where the condition holds, or,
        when it holds nowhere, the one where :math:`(\sigma_0 - \beta(r))r` is largest.
    deviation : float
        :math:`\beta(r) \ge \sup\|B(\theta) - B_0\|` on that ball.
    L_K : float
        Certified :math:`\|K(\theta) - K(\theta')\| \le L_K D(\theta,\theta')` on that ball.
    threshold : float
        Largest :math:`\mathcal L(0)` the certificate admits, :math:`\max_r (\sigma_0 - \beta(r))^2 r^2/2`.
    excess_factor : float
        ``loss_initial / threshold`` (at most 1 when certified).
    threshold_eq30 : float
        The corrected eq. 30 with this ``L_K`` on the ball :math:`r L_K(r) = \lambda_0/2`, for comparison.
    displacement_bound : float
        :math:`W = \sqrt{2\mathcal L(0)}/(\sigma_0 - \beta(r))`: guaranteed :math:`D(\theta_s,\theta_0) \le W`.
    rate_eq31 : float
        :math:`\lambda_0`, the rate of seed 002 eq. 31.
    rate_guaranteed : float
        :math:`2(\sigma_0 - \beta(r))^2`: guaranteed :math:`\mathcal L(s) \le e^{-\text{rate}\,s}\mathcal L(0)`
        (``nan`` when not certified). Tends to the linearised rate :math:`2\lambda_0` as
        :math:`\mathcal L(0) \to 0`; at least :math:`\lambda_0` (eq. 31) when :math:`\beta \le (1 - 2^{-1/2})\sigma_0`.
    method : str
        ``"split-region"`` (:mod:`ntkcheck.convergence.coercivity`: ``V`` and ``(Q, b)`` displacements bounded
        apart, the default at a FixUp centre with the readout loss), ``"fixup-structure"`` (the ball
        bound of :mod:`ntkcheck.convergence.jacobian_bound`) or ``"propagated"``.
    bound : JacobianBound or None
        The ball bound behind ``"fixup-structure"`` and ``"propagated"``.
    radius_psi : float
        ``"split-region"``: the ``(Q, b)`` radius :math:`r_q` of the region
        :math:`|V|_\rho \le` ``radius``, :math:`|\psi - \psi_0|_\rho \le r_q` (``nan`` for a ball).
    sigma_low : float
        :math:`\sigma_{\min}(B(\theta)) \ge` ``sigma_low`` along the flow (``rate_guaranteed`` is
        :math:`2\,\sigma_{\rm low}^2`).
    split : SplitCertificate or None
        The split-region theorem's details (``"split-region"``).
    split_skipped : bool
        The split region was not tried: the time budget (``seconds``) was spent by then.
    cut : str
        Non-empty when the time budget ran out before the certificate was finished: where (then
        nothing is certified, and the spectrum fields are the run's float64 values).

    For ``"split-region"``, ``deviation`` bounds :math:`\|B_V(\theta) - B_V(\theta_0)\|` on the region and
    ``L_K`` is the centred constant at the region's scale, :math:`\sup\|K(\theta) - K_0\| / r_V`; for a
    ball, ``L_K`` is the two-point Lipschitz constant on it.
    """

    certified: bool
    loss_initial: float
    lambda_0: float
    lambda_max_0: float
    spectrum_proved: bool
    radius: float
    deviation: float
    L_K: float
    threshold: float
    excess_factor: float
    threshold_eq30: float
    displacement_bound: float
    rate_eq31: float
    rate_guaranteed: float
    method: str
    bound: JacobianBound | None
    radius_psi: float = float("nan")
    sigma_low: float = float("nan")
    split: SplitCertificate | None = None
    split_skipped: bool = False
    cut: str = ""

    @classmethod
    def out_of_time(cls, loss_initial: float, lambda_0: float, lambda_max_0: float, stage: str) -> ConvergenceCertificate:
        """Nothing certified: the time budget ran out in ``stage`` before the certificate was finished
        (``lambda_0``, ``lambda_max_0``: the float64 values of the run, not proved)."""
        nan = float("nan")
        return cls(False, float(loss_initial), float(lambda_0), float(lambda_max_0), False, nan, nan, nan, nan, nan, nan,
                   nan, float(lambda_0), nan, "none", None, cut=stage)

    @property
    def eq31_guaranteed(self) -> bool:
        """Whether the guaranteed rate is at least eq. 31's :math:`\\lambda_0`."""
        return bool(self.certified and self.rate_guaranteed >= self.lambda_0)

    @property
    def message(self) -> str:
        if self.cut:
            return f"not certified (time budget spent): {self.cut}"
        if self.lambda_0 <= 0:
            return "not certified: the NTK at initialisation is not proved positive (lambda_0 <= 0)"
        if not self.spectrum_proved:
            return "not certified: the NTK spectrum at initialisation is not proved (float64 only)"
        if self.certified:
            return (f"certified: Loss(0) = {self.loss_initial:.3e} <= {self.threshold:.3e}; "
                    f"Loss(s) <= exp(-{self.rate_guaranteed:.4g} s) Loss(0), displacement <= {self.displacement_bound:.3g}")
        skipped = " (the split region was not tried: the time budget was spent)" if self.split_skipped else ""
        return (f"not certified: Loss(0) = {self.loss_initial:.3e} exceeds the certifiable {self.threshold:.3e} "
                f"by a factor {self.excess_factor:.3g}{skipped}")

    def __repr__(self) -> str:
        return f"ConvergenceCertificate({self.message}; L_K <= {self.L_K:.4g}, lambda_0 >= {self.lambda_0:.4g})"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConvergenceCertificate:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d, bound=lambda b: None if b is None else JacobianBound.from_dict(b),
                       split=lambda b: None if b is None else SplitCertificate.from_dict(b))

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("bound", "split")}
        out["bound"] = None if self.bound is None else self.bound.to_dict()
        out["split"] = None if self.split is None else self.split.to_dict()
        out["eq31_guaranteed"] = self.eq31_guaranteed
        out["message"] = self.message
        return out


@dataclass(frozen=True)
class _Scan:
    """The bound on a geometric grid of radii: ``M_2``, ``beta`` (an upper sum) and ``g = (sigma_0 - beta) r``."""

    r: np.ndarray
    M2: np.ndarray
    beta: np.ndarray
    g: np.ndarray
    growth: np.ndarray
    propagated: np.ndarray
    first_order: float
    centre: FixupCentre | None


def _scan(samples: Any, params: Any, layers: int, T: float, loss: str, sigma0: float, lamM: float) -> _Scan:
    r"""``beta(r_k) <= sum_{j<=k} M_2(r_j)(r_j - r_{j-1})``: on :math:`(r_{j-1}, r_j]` the supremum of
    :math:`\|D^2 z\|` over the smaller ball is at most the bound at :math:`r_j`."""
    atoms = _check_model(samples, params, layers, T, loss)
    ctr = fixup_centre(samples, params, layers=layers, T=T) if loss == "readout" else None

    def prop(r: float) -> float:
        try:
            return _bound(atoms, params, layers, T, loss, r, lamM).hessian_bound
        except OverflowError:  # a radius far beyond any use
            return math.inf

    M0 = second_derivative_bound(ctr, prop, 0.0)[0]
    top = min(sigma0 / max(M0, 1e-300), 1e3)  # radii beyond 1e3 are not scanned (the threshold is only smaller)
    r = np.geomspace(top * 10.0**-_DECADES, top, _DECADES * _PER_DECADE + 1)
    vals = []
    for x in r:
        _budget.checkpoint("the second-derivative scan")
        vals.append(second_derivative_bound(ctr, prop, float(x)))
    M2 = np.array([v[0] for v in vals])
    widths = np.diff(np.concatenate([[0.0], r]))
    beta = np.cumsum(M2 * widths) * (1.0 + 1e-12)
    g = (sigma0 - beta) * r
    first = ctr.first_order if ctr is not None else float("nan")
    return _Scan(r, M2, beta, g, np.array([v[1] for v in vals]), np.array([v[2] for v in vals]), first, ctr)


def certificate_from_spectrum(
    samples: Any,
    params: Any,
    *,
    layers: int,
    lambda_min: float,
    lambda_max: float,
    loss_initial: float,
    T: float = 1.0,
    loss: str = "readout",
    seconds: float | None = None,
) -> ConvergenceCertificate:
    r"""The certificate for the initial loss ``loss_initial``.

    ``loss_initial`` is an upper bound of the exact initial loss (the callers in the package pass one proved in
    ball arithmetic, :func:`ntkcheck.convergence.enclosure.point.loss_bounds`: the forward pass's rounding is in it).
    The spectrum of :math:`K_0` is proved here (:func:`ntkcheck.convergence.spectrum_bound.certified_spectrum`);
    ``lambda_min``, ``lambda_max`` (float64, e.g. from :func:`ntkcheck.dynamics.ntk.ntk_spectrum`) are used,
    widened by ``ROUNDING_MARGIN``, only where it cannot be proved, and then nothing is certified.
    ``seconds`` (``None``: no limit): once spent after the ball bound, the split region is not tried,
    and its profiles stop (fewer ``(Q, b)`` radii: a smaller threshold, never a wrong one).
    See :func:`convergence_certificate`; :func:`certificates_from_spectrum` for several initial losses.
    """
    deadline = None if seconds is None else time.perf_counter() + float(seconds)
    if not all(np.isfinite(v) for v in (lambda_min, lambda_max, loss_initial)) or loss_initial < 0:
        raise DomainError(f"expected finite lambda_min, lambda_max and loss_initial >= 0, got "
                          f"{lambda_min!r}, {lambda_max!r}, {loss_initial!r}")
    return certificates_from_spectrum(samples, params, layers=layers, lambda_min=lambda_min, lambda_max=lambda_max,
                                      T=T, loss=loss)(loss_initial, deadline=deadline)


def certificates_from_spectrum(
    samples: Any,
    params: Any,
    *,
    layers: int,
    lambda_min: float,
    lambda_max: float,
    T: float = 1.0,
    loss: str = "readout",
) -> Callable[..., ConvergenceCertificate]:
    r"""``f(loss_initial, deadline=None)``: :func:`certificate_from_spectrum` for any initial loss, the work
    that does not depend on it (the proved spectrum, the second-derivative scan, the coercivity setup of
    the split region) done once (e.g. a threshold at ``loss_initial = 0``, then the certificate of a loss
    below it). ``deadline`` is a :func:`time.perf_counter` value (``None``: no limit)."""
    from .spectrum_bound import certified_spectrum

    if not all(np.isfinite(v) for v in (lambda_min, lambda_max)):
        raise DomainError(f"expected finite lambda_min and lambda_max, got {lambda_min!r}, {lambda_max!r}")
    _check_model(samples, params, layers, T, loss)
    spec = certified_spectrum(samples, params, layers=int(layers), T=float(T), loss=loss)
    if spec.proved:
        lam0, lamM = spec.lower, spec.upper
    else:
        margin = ROUNDING_MARGIN * abs(lambda_max)
        lam0, lamM = float(lambda_min) - margin, float(lambda_max) + margin
    sc = None
    if lam0 > 0:
        sc = _scan(samples, params, int(layers), float(T), loss, math.sqrt(lam0) * (1.0 - 1e-15), lamM)
    @functools.cache
    def setup() -> Any:  # the coercivity setup, made at the first loss that needs it
        return coercivity_setup(samples, params, layers=int(layers), T=float(T), lambda_0=lam0, k_ball=spec.kernel,
                                centre=sc.centre)

    def certificate(loss_initial: float, *, deadline: float | None = None) -> ConvergenceCertificate:
        if not math.isfinite(loss_initial) or loss_initial < 0:
            raise DomainError(f"expected a finite loss_initial >= 0, got {loss_initial!r}")
        L0 = float(loss_initial)
        nan = float("nan")
        if sc is None:
            return ConvergenceCertificate(False, L0, lam0, lamM, spec.proved, nan, nan, nan, 0.0, math.inf, 0.0, nan,
                                          lam0, nan, "none", None)
        ball = _ball(sc, spec.proved, L0, lam0, lamM)
        if not (spec.proved and loss == "readout" and sc.centre is not None):
            return ball
        if deadline is not None and time.perf_counter() >= deadline:  # the time is spent: the ball only
            return replace(ball, split_skipped=True)
        made = setup()
        if made is None:
            return ball
        split = split_certificate(made, L0, deadline=deadline)
        if (ball.certified and not split.certified) or (not split.certified and split.threshold < ball.threshold):
            return ball
        return _from_split(split, ball, made)

    return certificate


def _ball(sc: _Scan, proved: bool, L0: float, lam0: float, lamM: float) -> ConvergenceCertificate:
    """The ball certificate for the initial loss ``L0`` from the scan ``sc`` (``lam0 > 0``)."""
    nan = float("nan")
    sigma0 = math.sqrt(lam0) * (1.0 - 1e-15)
    eps_u = math.sqrt(2.0 * L0) * (1.0 + 1e-15)
    ok = np.nonzero(sc.g >= eps_u)[0]
    k = int(ok[0]) if ok.size and eps_u > 0 else int(np.argmax(sc.g))
    if eps_u == 0 and ok.size:
        k = 0
    certified = bool(ok.size) and proved
    low = sigma0 - sc.beta[k]
    threshold = float(np.max(sc.g)) ** 2 / 2.0 / (1.0 + 1e-12)
    LK = 2.0 * sc.M2[k] * (math.sqrt(lamM) + sc.beta[k]) * (1.0 + 1e-12)
    W = eps_u / low * (1.0 + 1e-12) if low > 0 else math.inf
    rate = 2.0 * low * low * (1.0 - 1e-12) if certified else nan
    bound = JacobianBound(float(sc.r[k]), float(sc.M2[k]), float(sc.beta[k]), float(LK), sc.first_order,
                          float(sc.growth[k]), float(sc.propagated[k]), float(lamM))
    excess = L0 / threshold if threshold > 0 else math.inf
    method = "fixup-structure" if math.isfinite(sc.first_order) else "propagated"
    return ConvergenceCertificate(certified, L0, lam0, lamM, proved, float(sc.r[k]), float(sc.beta[k]), float(LK),
                                  threshold, excess, _threshold_eq30(sc, lam0, lamM), float(W), lam0, rate, method,
                                  bound, sigma_low=float(low) if certified else nan)


def _from_split(split: SplitCertificate, ball: ConvergenceCertificate, setup: Any) -> ConvergenceCertificate:
    r"""The certificate of the split-region theorem (:mod:`ntkcheck.convergence.coercivity.split`), with the
    ball's eq. 30 threshold for comparison. On the region: :math:`\|B_V - B_V(\theta_0)\| \le c\,r_V + s\,r_q
    + \bar\rho_V = \mathrm{dev}` (Weyl form of the linear part), :math:`\|B_\psi\| \le \kappa r_V`; since
    :math:`B_\psi(\theta_0) = 0`, :math:`K - K_0 = (B_VB_V^* - B_{V0}B_{V0}^*) + B_\psi B_\psi^*`, so
    :math:`\|K - K_0\| \le \mathrm{dev}(2\sqrt\Lambda + \mathrm{dev}) + (\kappa r_V)^2` (reported as ``L_K``
    after division by :math:`r_V`; the theorem does not use it)."""
    rV, rq = split.radius_V, split.radius_psi
    dev = (setup.c_lin * rV + setup.s_lin * rq + split.rho) * (1.0 + 1e-12)
    kc = (dev * (2.0 * math.sqrt(ball.lambda_max_0) + dev) + (split.kappa * rV) ** 2) * (1.0 + 1e-12)
    LK = kc / rV * (1.0 + 1e-12) if rV > 0 else float("nan")
    excess = ball.loss_initial / split.threshold if split.threshold > 0 else math.inf
    return ConvergenceCertificate(split.certified, ball.loss_initial, ball.lambda_0, ball.lambda_max_0, ball.spectrum_proved,
                                  rV, dev, LK, split.threshold, excess, ball.threshold_eq30, split.displacement_bound,
                                  ball.lambda_0, split.rate, "split-region", None, radius_psi=rq,
                                  sigma_low=split.sigma_low, split=split)


def _threshold_eq30(sc: _Scan, lam0: float, lamM: float) -> float:
    """The corrected eq. 30 with the certified two-point L_K on the smallest ball with r L_K(r) >= lambda_0 / 2."""
    LK = 2.0 * sc.M2 * (math.sqrt(lamM) + sc.beta)
    hit = np.nonzero(sc.r * LK >= lam0 / 2.0)[0]
    L = float(LK[hit[0]]) if hit.size else float(LK[-1])
    return lam0**4 / (16.0 * L * L * (2.0 * lamM + lam0)) / (1.0 + 1e-12)


def convergence_certificate(
    samples: Any,
    params: Any,
    targets: Any,
    *,
    layers: int,
    T: float = 1.0,
    loss: str = "readout",
) -> ConvergenceCertificate:
    r"""Whether seed 002 Thm. 8.5 (sharpened, proved constants) guarantees linear convergence here.

    Proves an upper bound of the initial loss for ``targets`` (ball arithmetic), proves the spectrum of :math:`K_0`, bounds the
    deviation :math:`\beta(r)` of the Jacobian on balls around ``params`` and checks
    :math:`(\sigma_0 - \beta(r))\,r \ge \sqrt{2\mathcal L(0)}` for some ``r``. Where it holds, gradient
    flow :math:`d\theta_h/ds = -H\nabla_{\theta_h}\mathcal L` satisfies
    :math:`\mathcal L(s) \le e^{-r_g s}\mathcal L(0)`, :math:`r_g = 2(\sigma_0 - \beta(r))^2`, and
    :math:`D(\theta_s, \theta_0) \le W = \sqrt{2\mathcal L(0)}/(\sigma_0 - \beta(r))`. Where it does not,
    ``excess_factor`` says by how much the initial loss is too large.

    Parameters
    ----------
    samples : list of (N_i, d) arrays
    params : ntkcheck.dynamics.model.AttentionParams
        Heads shared over depth (usually FixUp, ``V = 0``).
    targets : (n, d) array (readout) or list of (N_i, d) arrays (tokens)
    layers, T, loss :
        The model, as in :func:`ntkcheck.dynamics.flow.gradient_flow`.

    Returns
    -------
    ConvergenceCertificate

    References: seed 002 Thm. 8.5 (eqs. 30-31); ``theory/local-convergence.md``.

    Examples
    --------
    >>> from ntkcheck.dynamics import init_params
    >>> x = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
    >>> y = np.array([m.mean(axis=0) for m in x]) + 1e-6   # targets next to the initial outputs
    >>> c = convergence_certificate(x, init_params(2, 6, seed=0), y, layers=2)
    >>> c.certified, bool(c.rate_guaranteed >= c.lambda_0)
    (True, True)
    """
    from ..dynamics.ntk import ntk_spectrum
    from .enclosure._model import model_of
    from .enclosure.point import loss_bounds

    _check_model(samples, params, layers, T, loss)
    spec = ntk_spectrum(samples, params, layers=layers, T=T, loss=loss)  # type: ignore[arg-type]
    mdl = model_of(samples, params.heads, params.dim, targets, layers=int(layers), T=float(T), loss=loss)
    L0 = loss_bounds(mdl, params.flat())[1]  # the forward pass's rounding included (issue 30 item 7)
    return certificate_from_spectrum(samples, params, layers=layers, lambda_min=spec.lambda_min,
                                     lambda_max=spec.lambda_max, loss_initial=L0, T=T, loss=loss)
