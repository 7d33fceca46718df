r"""Seed 002 Thm. 8.5 on a split region: the ``V`` displacement and the ``(Q, b)`` displacement apart.

At FixUp the gradient of the loss has no ``(Q, b)`` part, so along the flow the heads' queries
move only to second order while ``V`` moves to first order. The theorem checked here
(``theory/local-convergence.md``, "The split-region certificate") bounds them apart on
:math:`\Omega(r_V, r_q) = \{|V|_\rho \le r_V,\ |\psi - \psi_0|_\rho \le r_q\}`, with radius-dependent
constants. Let :math:`\sigma(\ell) \le \inf_{\Omega(\ell, r_q)} \sigma_{\min}(B_V(\theta))` and
:math:`\kappa(\ell) \ge \sup_{\Omega(\ell, r_q)} \|B_\psi(\theta)\| / |V|_\rho` (:class:`CoercivitySetup`),
:math:`\Sigma(\ell) = \int_0^\ell \sigma` and :math:`u_0 = |u(0)| = \sqrt{2\mathcal L(0)}`. If
:math:`\sigma > 0` on :math:`[0, W]`, :math:`\Sigma(W) = u_0` and

.. math::

    \Psi(W) = \int_0^W \frac{\ell\,\kappa(\ell)}{\sigma(\ell)}\,d\ell < r_q,

then gradient flow stays in :math:`\Omega(W, r_q)`: :math:`D(\theta_s, \theta_0) \le W` and
:math:`\mathcal L(s) \le e^{-2\sigma_{\rm low}^2 s}\mathcal L(0)`, :math:`\sigma_{\rm low} = \min_{[0, W]}\sigma`.
*Proof.* :math:`\sigma_{\min}(B) \ge \sigma_{\min}(B_V)` (:math:`BB^* \succeq B_VB_V^*`). With
:math:`\Lambda(s)` the path length, :math:`|V(s)|_\rho \le \Lambda(s)` and
:math:`-\frac{d}{ds}|u| = |B^* u|^2/|u| \ge \sigma(\Lambda)\,\Lambda'`, so :math:`\Sigma(\Lambda(s)) \le u_0 - |u(s)| < u_0`:
:math:`\Lambda < W`. The ``(Q, b)`` part moves at speed :math:`|B_\psi^* u| \le \kappa(\Lambda)\Lambda|u|`
and :math:`|u|\,ds \le d\Lambda/\sigma(\Lambda)`, so it moves by less than :math:`\Psi(W)`. At a first
exit time both would be reached: a contradiction.

The constants: :math:`\sigma(\ell) = \sigma_{\rm lin}(\ell, r_q) - \bar\rho_V(\ell, r_q)` with the linear
part from the NTK's eigenblocks (:mod:`~ntkcheck.convergence.coercivity._linear`, or Weyl with the
centre's constants) and the second-order remainder of :mod:`~ntkcheck.convergence.coercivity._remainder`;
the integrals are lower (:math:`\Sigma`) and upper (:math:`\Psi`) sums on a geometric grid.

References: seed 002 ("A Mean-Field Theory of Transformers") Thm. 8.5; ``theory/local-convergence.md``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._records import restore
from ._hessian import structured_etas, termwise_etas
from ._linear import LinearBlocks, linear_blocks
from ._remainder import centre_cross, region_bound
from ._stats import SampleStats, all_stats

__all__ = ["CoercivitySetup", "SplitCertificate", "coercivity_setup", "split_certificate"]

#: radii per profile
_GRID = 24
#: ``(Q, b)`` radii tried (a factor 2 apart)
_RADII = 12


@dataclass(frozen=True)
class CoercivitySetup:
    r"""What the split-region bound needs from the centre, computed once.

    ``linear`` is ``"eigenblocks"`` (:class:`~ntkcheck.convergence.coercivity._linear.LinearBlocks`) or
    ``"weyl"`` (:math:`\\sigma_0 - c\\,r_V - s\\,r_q`); ``quadratic`` is ``"hessian"`` or ``"termwise"``.
    """

    stats: list[SampleStats]
    crosses: list[dict]
    etas: tuple[np.ndarray, np.ndarray, np.ndarray]
    blocks: LinearBlocks | None
    sigma0: float
    c_lin: float
    s_lin: float
    layers: int
    T: float
    linear: str
    quadratic: str

    def profile(self, ell: np.ndarray, rq: float) -> dict[str, np.ndarray]:
        r"""``sigma``, ``kappa``, ``rho``, ``sigma_lin`` on :math:`\Omega(\ell_k, r_q)` for each ``ell``."""
        ell = np.atleast_1d(np.asarray(ell, dtype=np.float64))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # far radii overflow: no bound there
            rho, kappa, parts = region_bound(self.stats, self.crosses, self.etas, self.s_lin, self.layers, self.T,
                                             ell, rq)
        weyl = self.sigma0 - (self.c_lin * ell + self.s_lin * rq) * (1.0 + 1e-12)
        lin = weyl
        if self.blocks is not None:
            lam = self.blocks.lam_low(ell, rq)
            lin = np.maximum(weyl, np.sqrt(np.maximum(lam, 0.0)) * (1.0 - 1e-15))
        sigma = np.where(np.isfinite(rho), lin - rho, -np.inf)
        return {"sigma": sigma, "kappa": kappa, "rho": rho, "sigma_lin": lin, **parts}


def coercivity_setup(samples: Any, params: Any, *, layers: int, T: float, lambda_0: float, k_ball: Any,
                     centre: Any) -> CoercivitySetup | None:
    """The setup at a FixUp centre (``V = 0``, heads shared over depth, readout loss), or ``None``.

    ``lambda_0`` a proved lower bound of :math:`\\lambda_{\\min}(K_0)`, ``k_ball`` :math:`T^2 G_r` as an Arb
    ball matrix (or ``None``), ``centre`` the :class:`~ntkcheck.convergence.jacobian_bound.FixupCentre`
    (its ``c``, ``s`` bound the first-order change of the Jacobian)."""
    from ...cgf import as_laws

    if params.per_layer or np.any(params.V) or centre is None or not lambda_0 > 0:
        return None
    laws = as_laws(samples)
    xs = [np.asarray(law.atoms, dtype=np.float64) for law in laws]
    ws = [np.asarray(law.masses, dtype=np.float64) for law in laws]
    try:
        stats, _ = all_stats(xs, ws, params.Q, params.b)
    except ValueError:
        return None
    etas = structured_etas(stats, params.Q, params.b)
    quadratic = "hessian"
    if etas is None:
        etas, quadratic = termwise_etas(stats), "termwise"
    blocks = linear_blocks(stats, k_ball, T, layers) if k_ball is not None else None
    return CoercivitySetup(stats=stats, crosses=[centre_cross(st) for st in stats], etas=etas, blocks=blocks, sigma0=math.sqrt(lambda_0) * (1.0 - 1e-15),
                           c_lin=float(centre.c), s_lin=float(centre.s), layers=int(layers), T=float(T),
                           linear="eigenblocks" if blocks is not None else "weyl", quadratic=quadratic)


@dataclass(frozen=True)
class SplitCertificate:
    r"""The split-region theorem for one initial loss (module docstring).

    Attributes
    ----------
    certified : bool
    loss_initial : float
    radius_V, radius_psi : float
        The region :math:`\Omega(r_V, r_q)` of the guarantee (``r_V`` the grid radius reached); when not
        certified, the region of the largest certifiable initial loss.
    displacement_bound : float
        :math:`W`: guaranteed :math:`D(\theta_s, \theta_0) \le W`.
    sigma_low : float
        :math:`\sigma_{\min}(B(\theta)) \ge` ``sigma_low`` along the flow (on the region when not certified).
    rate : float
        :math:`2\sigma_{\rm low}^2` (``nan`` when not certified).
    psi_bound : float
        :math:`\Psi(W) < r_q`.
    threshold : float
        Largest :math:`\mathcal L(0)` the profiles admit.
    sigma_0 : float
    kappa, rho, sigma_linear : float
        On :math:`\Omega(r_V, r_q)`: :math:`\kappa`, the remainder :math:`\bar\rho_V`, the linear part.
    linear, quadratic : str
        How the linear part and the quadratic terms were bounded (:class:`CoercivitySetup`).
    profile : dict
        The chosen profile (radii, ``sigma``, ``kappa``), for plots and inspection.
    """

    certified: bool
    loss_initial: float
    radius_V: float
    radius_psi: float
    displacement_bound: float
    sigma_low: float
    rate: float
    psi_bound: float
    threshold: float
    sigma_0: float
    kappa: float
    rho: float
    sigma_linear: float
    linear: str
    quadratic: str
    profile: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SplitCertificate:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "profile"}
        out["profile"] = {k: [float(x) for x in v] for k, v in self.profile.items()}
        return out


@dataclass(frozen=True)
class _Profile:
    r"""One profile on the radius grid, with the step-function integrals: :math:`\Sigma` at the cell ends
    (lower sums), :math:`\Psi` at the cell ends (upper sums), the slopes :math:`c_k = \ell_k\kappa_k/\sigma_k` of
    :math:`\Psi` in each cell, and ``pos`` the number of leading cells with :math:`\sigma > 0`."""

    rq: float
    ell: np.ndarray
    values: dict
    Sig: np.ndarray
    Psi: np.ndarray
    slope: np.ndarray
    pos: int

    @classmethod
    def of(cls, ell: np.ndarray, values: dict, rq: float) -> _Profile:
        sigma, kappa = values["sigma"], values["kappa"]
        widths = np.diff(np.concatenate([[0.0], ell]))
        pos = int(np.argmin(sigma > 0)) if not np.all(sigma > 0) else len(sigma)
        s = np.where(sigma > 0, sigma, 0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            slope = np.where(sigma > 0, ell * kappa / np.where(sigma > 0, sigma, 1.0), np.inf) * (1.0 + 1e-12)
            Psi = np.cumsum(slope * widths) * (1.0 + 1e-12)
        return cls(rq, ell, values, np.cumsum(s * widths) * (1.0 - 1e-12), Psi, slope, pos)

    def _prev(self, k: int) -> tuple[float, float, float]:
        return (float(self.ell[k - 1]), float(self.Sig[k - 1]), float(self.Psi[k - 1])) if k > 0 else (0.0, 0.0, 0.0)

    def u0_max(self) -> float:
        r"""Supremum of the :math:`u_0` this profile certifies: :math:`\Sigma(W) = u_0` with :math:`\Psi(W) < r_q`
        and :math:`\sigma > 0` on :math:`[0, W]` (solved inside the cell where :math:`\Psi` reaches :math:`r_q`)."""
        for k in range(self.pos):
            if self.Psi[k] < self.rq:
                continue
            l0, S0, P0 = self._prev(k)
            W = l0 + max(self.rq - P0, 0.0) / self.slope[k] if math.isfinite(self.slope[k]) else l0
            return max(S0 + self.values["sigma"][k] * (W - l0), 0.0) * (1.0 - 1e-12)
        return float(self.Sig[self.pos - 1]) * (1.0 - 1e-12) if self.pos else 0.0

    def guarantee(self, u0: float) -> dict[str, float] | None:
        r"""The guarantee for ``u0`` (``None`` unless ``u0 < u0_max()``): the cell reached, ``W``, :math:`\Psi(W)`,
        the smallest :math:`\sigma` up to ``W``."""
        if not (u0 < self.u0_max() and u0 >= 0.0):
            return None
        hit = np.nonzero(self.Sig[:self.pos] > u0)[0]
        if not hit.size:
            return None
        k = int(hit[0])
        l0, S0, P0 = self._prev(k)
        sig = self.values["sigma"]
        W = min((l0 + (u0 - S0) / sig[k]) * (1.0 + 1e-12), float(self.ell[k]))
        psi = (P0 + self.slope[k] * (W - l0)) * (1.0 + 1e-12)
        if not psi < self.rq:  # the conditions checked on the numbers reported, not only through u0_max
            return None
        return {"k": k, "W": W, "psi": psi, "sigma_low": float(np.min(sig[:k + 1])), "radius_V": float(self.ell[k])}

    def last_cell(self) -> int:
        """The cell where the largest certifiable :math:`u_0` ends (``-1``: none)."""
        u = self.u0_max()
        if not u > 0:
            return -1
        hit = np.nonzero(self.Sig[:self.pos] >= u)[0]
        return int(hit[0]) if hit.size else self.pos - 1


def _radius_grid(setup: CoercivitySetup) -> np.ndarray:
    r"""Radii :math:`\ell_k = \ell_{end}(k/K)^{3/2}`, ``K`` = :data:`_GRID`: finer near the end of the useful
    range (where :math:`\sigma` falls fastest), :math:`\ell_{end}` where the bound at :math:`r_q = 0` has lost
    three quarters of :math:`\sigma_0`."""
    trial = setup.sigma0 * np.geomspace(2.0**-12, 2.0, 27)
    sig = setup.profile(trial, 0.0)["sigma"]
    bad = np.nonzero(~(sig > 0.25 * setup.sigma0))[0]
    end = float(trial[bad[0]]) if bad.size else float(trial[-1])
    return end * (np.arange(1, _GRID + 1) / _GRID) ** 1.5


def split_certificate(setup: CoercivitySetup, loss_initial: float, deadline: float | None = None) -> SplitCertificate:
    r"""The theorem (module docstring) for ``loss_initial``, on a fixed set of ``(Q, b)`` radii: the
    profiles do not depend on the loss, so ``certified`` holds exactly when ``loss_initial`` is below
    ``threshold``; among the radii that certify, the one with the best rate is reported. The radii:
    :data:`_RADII` values a factor 2 apart up to :math:`2\,s\,\ell_{end}^2/\sigma_0` (the ``(Q, b)``
    displacement the largest radius of the grid would need). ``deadline`` (``time.perf_counter()``):
    no further radius is tried once it has passed (at least one is)."""
    u0 = math.sqrt(2.0 * float(loss_initial)) * (1.0 + 1e-15)
    ell = _radius_grid(setup)
    top = 2.0 * max(setup.s_lin, 1e-6) * float(ell[-1]) ** 2 / setup.sigma0
    profiles: list[_Profile] = []
    for r in top * 2.0 ** -np.arange(_RADII):
        if profiles and deadline is not None and time.perf_counter() >= deadline:
            break
        profiles.append(_Profile.of(ell, setup.profile(ell, float(r)), float(r)))
    u0max = max(p.u0_max() for p in profiles)
    threshold = float(u0max * u0max / 2.0 * (1.0 - 1e-12))
    found = [(g, p) for p in profiles if (g := p.guarantee(u0)) is not None]
    nan = float("nan")
    if not found:  # the region of the largest certifiable loss, for the report
        p = max(profiles, key=lambda q: q.u0_max())
        k = p.last_cell()
        if k < 0:
            return SplitCertificate(False, float(loss_initial), nan, nan, nan, nan, nan, nan, threshold, setup.sigma0,
                                    nan, nan, nan, setup.linear, setup.quadratic)
        v = p.values
        return SplitCertificate(False, float(loss_initial), float(ell[k]), p.rq, nan, float(np.min(v["sigma"][:k + 1])),
                                nan, nan, threshold, setup.sigma0, float(v["kappa"][k]), float(v["rho"][k]),
                                float(v["sigma_lin"][k]), setup.linear, setup.quadratic,
                                {"radius": ell[:k + 1], "sigma": v["sigma"][:k + 1], "kappa": v["kappa"][:k + 1]})
    got, p = max(found, key=lambda gp: gp[0]["sigma_low"])
    k, v = got["k"], p.values
    keep = {"radius": ell[:k + 1], "sigma": v["sigma"][:k + 1], "kappa": v["kappa"][:k + 1]}
    return SplitCertificate(True, float(loss_initial), got["radius_V"], p.rq, got["W"], got["sigma_low"],
                            2.0 * got["sigma_low"] ** 2 * (1.0 - 1e-12), got["psi"], threshold, setup.sigma0,
                            float(v["kappa"][k]), float(v["rho"][k]), float(v["sigma_lin"][k]), setup.linear,
                            setup.quadratic, keep)
