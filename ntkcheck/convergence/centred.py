r"""The local convergence certificate centred at any parameter state :math:`\theta^*` (``V != 0`` allowed).

``theory/local-convergence.md``, "The certificate at any centre", states and proves it. With
:math:`K = BB^*` the NTK (``B`` the weighted Jacobian in the particle metric ``D``), on the ball
:math:`\{D(\theta, \theta^*) \le r\}`:

* coercivity from the centre minus a Taylor remainder: :math:`\sigma_{\min}(B(\theta)) \ge \sigma_* - \beta(r)`
  with :math:`\sigma_*^2 \le \lambda_{\min}(K(\theta^*))` proved in ball arithmetic
  (:func:`~ntkcheck.convergence.enclosure.point.ntk_bounds`: the Jacobian in forward mode, rounding
  included) and :math:`\beta(r) = \int_0^r M_2 \ge \sup\|B(\theta) - B(\theta^*)\|` from the second-derivative
  bound :math:`M_2` propagated through the layers around this centre
  (:mod:`ntkcheck.convergence.lipschitz`; at a FixUp centre with the readout loss the structured bound of
  :mod:`ntkcheck.convergence.jacobian_bound` where smaller);
* a start :math:`\theta'` with :math:`D(\theta', \theta^*) \le e` has
  :math:`|u(\theta')| \le u_s = \sqrt{2\mathcal L(\theta^*)} + (\sigma^* + \beta(e))\,e` (the loss proved in ball
  arithmetic, :math:`\sigma^{*2} \ge \lambda_{\max}(K(\theta^*))`);
* **flow**: if :math:`(\sigma_* - \beta(r))(r - e) \ge u_s`, the gradient flow from any such start stays in the
  ball (the Polyak-Łojasiewicz length bound :math:`\int|\dot\theta| \le u_s/\sigma_{\rm low}`) and
  :math:`\mathcal L(s) \le e^{-2\sigma_{\rm low}^2 s}\,u_s^2/2`, :math:`\sigma_{\rm low} = \sigma_* - \beta(r)`;
* **gradient descent** with step :math:`\eta`: if moreover :math:`\eta\ell < 2` with
  :math:`\ell = (\sigma^* + \beta(r))^2 + u_s M_2(r) \ge \lambda_{\max}(H\nabla^2\mathcal L)` on the ball, and
  :math:`c\,\sigma_{\rm low}(r - e) \ge u_s`, :math:`c = 1 - \eta\ell/2`, the iterates stay in the ball and
  :math:`\mathcal L_{k+1} \le (1 - 2\eta c\,\sigma_{\rm low}^2)\,\mathcal L_k`.

The loss here is the part a parameter can change (the floor of copies with different targets excluded).

References: seed 002 ("A Mean-Field Theory of Transformers") Thm. 8.5; seed 003 ("Training Infinitely
Deep and Wide Transformers") Thm. 4 and Cor. 1; H. Karimi, J. Nutini, M. Schmidt, "Linear convergence of
gradient and proximal-gradient methods under the Polyak-Łojasiewicz condition" (2016), Thm. 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._records import restore
from .enclosure._model import Model
from .enclosure.point import loss_bounds, ntk_bounds
from .jacobian_bound import fixup_centre, second_derivative_bound
from .lipschitz import _bound, _check_model

__all__ = ["CentredCertificate", "centred_certificate"]

#: radii scanned: geometric, this many per decade, over this many decades below sigma_* / M_2(0)
_PER_DECADE = 16
_DECADES = 5
_INFLATE = 1.0 + 1e-12


@dataclass(frozen=True)
class CentredCertificate:
    r"""Local convergence from every start near :math:`\theta^*` (``theory/local-convergence.md``).

    Attributes
    ----------
    certified : the condition holds on some ball and the spectrum at the centre is proved positive
    loss_centre : proved upper bound of :math:`\mathcal L(\theta^*)` (without the floor)
    start_radius : ``e``: every start with :math:`D(\theta', \theta^*) \le e` is covered
    start_loss : :math:`u_s^2/2`, an upper bound of the loss at any such start
    lambda_min, lambda_max : proved bounds of the NTK's spectrum at the centre
    radius, deviation, hessian_bound : the ball ``r``, :math:`\beta(r)`, :math:`M_2(r)`
    sigma_low : :math:`\sigma_* - \beta(r)`
    rate : the guaranteed rate: flow :math:`2\sigma_{\rm low}^2`; gradient descent (``step``) the per-unit-time
        rate :math:`-\ln(1 - 2\eta c\sigma_{\rm low}^2)/\eta`
    displacement_bound : :math:`D(\theta_s, \theta^*) \le e + u_s/(c\,\sigma_{\rm low})` (``c = 1`` for the flow)
    threshold : the largest :math:`\mathcal L(\theta^*)` the scan admits with ``e = 0``
    excess_factor : ``start_loss / threshold``
    step : ``None`` (gradient flow) or the step of gradient descent
    smoothness : gradient descent: :math:`\ell`, and ``step * smoothness < 2`` is required
    method : ``"ball, propagated"`` or ``"ball, fixup-structure"`` (how :math:`M_2` was bounded)
    sigma_star, sigma_up, beta_start, u_start : :math:`\sigma_*`, :math:`\sigma^*`, :math:`\beta(e)`, :math:`u_s`
        (the numbers of the inequality chain, for the verifier)
    grid : the radii of the upper sum of :math:`\beta`, up to ``radius``
    """

    certified: bool
    loss_centre: float
    start_radius: float
    start_loss: float
    lambda_min: float
    lambda_max: float
    radius: float
    deviation: float
    hessian_bound: float
    sigma_low: float
    rate: float
    displacement_bound: float
    threshold: float
    excess_factor: float
    step: float | None = None
    smoothness: float = float("nan")
    method: str = "ball, propagated"
    sigma_star: float = float("nan")
    sigma_up: float = float("nan")
    beta_start: float = float("nan")
    u_start: float = float("nan")
    grid: tuple[float, ...] = ()

    @property
    def message(self) -> str:
        obj = "the gradient flow" if self.step is None else f"gradient descent with step {self.step:g}"
        if self.lambda_min <= 0:
            return f"not certified: the NTK at the centre is not proved positive (lambda_min >= {self.lambda_min:.3g})"
        if self.certified:
            return (f"certified for {obj}: Loss <= exp(-{self.rate:.4g} s) {self.start_loss:.3e}, displacement <= "
                    f"{self.displacement_bound:.3g}")
        if self.step is not None and not self.step * self.smoothness < 2.0:
            return (f"not certified for {obj}: step x smoothness = {self.step * self.smoothness:.3g} >= 2 on the "
                    "smallest ball that could hold (the loss need not decrease)")
        return f"not certified for {obj}: the loss is {self.excess_factor:.3g} times too large here"

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["grid"] = list(self.grid)
        out["message"] = self.message
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CentredCertificate:
        return restore(cls, d, grid=tuple)


@dataclass(frozen=True)
class _Radii:
    r: np.ndarray
    M2: np.ndarray
    beta: np.ndarray


def _radii(samples: Any, params: Any, layers: int, T: float, loss: str, sigma: float, lam_up: float) -> tuple[_Radii, str]:
    r""":math:`M_2` and :math:`\beta` (an upper sum) on a geometric grid of radii around the centre."""
    atoms = _check_model(samples, params, layers, T, loss)
    fixup = loss == "readout" and not np.any(params.V)
    ctr = fixup_centre(samples, params, layers=layers, T=T) if fixup else None

    def prop(r: float) -> float:
        try:
            return _bound(atoms, params, layers, T, loss, r, lam_up).hessian_bound
        except OverflowError:
            return math.inf

    M0 = second_derivative_bound(ctr, prop, 0.0)[0]
    top = min(sigma / max(M0, 1e-300), 1e3)
    r = np.geomspace(top * 10.0**-_DECADES, top, _DECADES * _PER_DECADE + 1)
    M2 = np.array([second_derivative_bound(ctr, prop, float(x))[0] for x in r])
    beta = np.cumsum(M2 * np.diff(np.concatenate([[0.0], r]))) * _INFLATE
    return _Radii(r, M2, beta), "ball, fixup-structure" if fixup else "ball, propagated"


def _beta_at(rad: _Radii, e: float) -> tuple[float, float]:
    """:math:`\\beta(e)` and :math:`M_2(e)` bounded by the first grid radius at least ``e`` (or linearly beyond)."""
    if e <= 0:
        return 0.0, float(rad.M2[0])
    k = int(np.searchsorted(rad.r, e))
    if k < rad.r.size:
        return float(rad.beta[k]), float(rad.M2[k])
    return math.inf, math.inf


def centred_certificate(samples: Any, params: Any, mdl: Model, *, layers: int, T: float, loss: str,
                        start_radius: float = 0.0, step: float | None = None) -> CentredCertificate:
    r"""The certificate around ``params`` (any ``V``) for every start within ``start_radius`` (particle metric).

    ``mdl``: the ball-arithmetic model of the same data and targets
    (:func:`ntkcheck.convergence.enclosure._model.model_of`). ``step``: certify gradient descent with this
    step instead of the flow.
    """
    theta = params.flat()
    # recorded with a margin of 1e-9 relative so that an independent re-derivation in a looser arithmetic (the
    # verifier's intervals) still confirms them; the theorem only needs bounds
    loss_c = loss_bounds(mdl, theta, floor=False)[1] * (1.0 + 1e-9)
    nb = ntk_bounds(mdl, theta)
    nb = type(nb)(nb.lower * (1.0 - 1e-9), nb.upper * (1.0 + 1e-9), nb.lambda_min_float, nb.lambda_max_float, nb.rows)
    e = float(start_radius)
    nan = float("nan")
    if not nb.lower > 0:
        return CentredCertificate(False, loss_c, e, nan, nb.lower, nb.upper, nan, nan, nan, nan, nan, nan, 0.0,
                                  math.inf, step)
    sig = math.sqrt(nb.lower) * (1.0 - 1e-15)
    sig_hi = math.sqrt(nb.upper) * (1.0 + 1e-15)
    rad, method = _radii(samples, params, int(layers), float(T), loss, sig, nb.upper)
    be, _ = _beta_at(rad, e)
    us = (math.sqrt(2.0 * loss_c) + (sig_hi + be) * e) * _INFLATE
    # every number below is rounded to the safe side (1e-14 relative): the verifier re-checks the chain exactly
    low = (sig - rad.beta) * (1.0 - 1e-14)
    c = np.ones_like(rad.r)
    ell = ((sig_hi + rad.beta) ** 2 + us * rad.M2) * (1.0 + 1e-14)
    if step is not None:
        c = (1.0 - step * ell / 2.0) * (1.0 - 1e-14)
    ok = np.nonzero((low > 0) & (c > 0) & (low * c * (rad.r - e) >= us * (1.0 + 1e-12)))[0]
    g = np.where(low > 0, low * rad.r, 0.0)
    threshold = float(np.max(g)) ** 2 / 2.0 / _INFLATE
    start_loss = us * us / 2.0 * (1.0 + 1e-14)
    excess = start_loss / threshold if threshold > 0 else math.inf
    k = int(ok[0]) if ok.size else int(np.argmax(g))
    certified = bool(ok.size)
    sl = float(low[k])
    if step is None:
        rate = 2.0 * sl * sl / _INFLATE
    else:
        q = 2.0 * step * float(c[k]) * sl * sl
        rate = -math.log1p(-q) / step / _INFLATE if 0 < q < 1 else nan
    W = e + us / (float(c[k]) * sl) * _INFLATE if sl > 0 and c[k] > 0 else math.inf
    return CentredCertificate(certified, loss_c, e, start_loss, nb.lower, nb.upper, float(rad.r[k]),
                              float(rad.beta[k]), float(rad.M2[k]), sl, rate if certified else nan, W, threshold,
                              excess, step, float(ell[k]) if step is not None else nan, method, sig, sig_hi, be, us,
                              tuple(float(x) for x in rad.r[: k + 1]))
