r"""The constants of seed 002 Thm. 4.1, Cor. 5.2 and Thm. 6.2, from the bounds of Lemmas 3.1-3.2.

Private to :mod:`ntkcheck.limits.stability`; every formula is derived in
``theory/limits-stability.md`` ("The constants from Lemmas 3.1 and 3.2"). Notation: heads with
operator norms :math:`\|Q\|, \|K\|, \|V\| \le D` (Assumption 1 in its smallest reading), tokens
and laws in the ball :math:`B_R`, :math:`G = Q^\top K/\sqrt d` (so :math:`\|G\|\le g := D^2/\sqrt d`),
scores :math:`|s| \le M := g R^2`, softmax weights relative to the law at most :math:`e^{2M}`.

First order (seed 002 Lemma 3.1, with the seed's own constants; the attention-bounds page shows
that (ii) holds with half of :math:`C_1`):

* :math:`C_1 = 2 D g R^2` (Lipschitz in ``x``),
* :math:`C_2 = e^{2M} D (1 + 2 g R^2)` (Lipschitz in :math:`\mu` for :math:`W_1`, the two terms of
  the seed's proof of (iii) added up),
* :math:`C_1' = R\sqrt{1 + 8 g^2 R^4}` (Lipschitz in :math:`\theta`, Frobenius norm: "identical to
  Lemma 3.1 (ii)", with its factor 2 on the softmax derivative).

Second order (needed by the adjoint in Thm. 6.2, not stated in the seed): Lipschitz constants of
:math:`\nabla_x A` in ``x``, :math:`\mu`, :math:`\theta` and of the non-local kernel
:math:`k(z, y) = \nabla_y\,\delta A(z, \mu, \theta)/\delta\mu(y)` in ``z``, ``y``, :math:`\mu`, :math:`\theta`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.integrate import quad

from ..errors import DomainError

__all__ = ["AttentionBounds", "attention_bounds", "initial_law_constant", "head_law_constant",
           "gradient_constant"]


@dataclass(frozen=True)
class AttentionBounds:
    r"""Per-head bounds on :math:`B_R` for heads of operator norms at most ``D`` in dimension ``d``.

    Attributes
    ----------
    D, R : float
    d : int
    C1, C2, C1p : float
        Lemma 3.1 (ii), (iii) and the :math:`\theta`-Lipschitz constant of Cor. 5.2.
    C11, C12, C1t : float
        Lipschitz constants of :math:`\nabla_x A` in ``x``, in :math:`\mu` (:math:`W_1`), in :math:`\theta`.
    Kz, Ky, Kmu, Kt : float
        Lipschitz constants of the kernel ``k`` (bounded by ``C2``) in ``z``, ``y``, :math:`\mu`, :math:`\theta`.
    """

    D: float
    R: float
    d: int
    C1: float
    C2: float
    C1p: float
    C11: float
    C12: float
    C1t: float
    Kz: float
    Ky: float
    Kmu: float
    Kt: float

    @property
    def L(self) -> float:
        """Lipschitz constant of the token velocity in the sup norm over tokens: ``C1 + C2``."""
        return self.C1 + self.C2


def attention_bounds(D: float, R: float, d: int) -> AttentionBounds:
    """The constants of :class:`AttentionBounds` (formulas in ``theory/limits-stability.md``)."""
    if not (math.isfinite(D) and D > 0 and math.isfinite(R) and R > 0) or int(d) != d or d < 1:
        raise DomainError(f"attention_bounds: need D > 0, R > 0 and a positive integer d, got {D!r}, {R!r}, {d!r}")
    g = D * D / math.sqrt(d)
    a = g * R * R  # = M, the score bound
    e2, e4 = math.exp(2 * a), math.exp(4 * a)
    return AttentionBounds(
        D=float(D), R=float(R), d=int(d),
        C1=2 * D * g * R * R,
        C2=e2 * D * (1 + 2 * a),
        C1p=R * math.sqrt(1 + 8 * a * a),
        C11=2 * D * g * g * R**3,
        C12=D * g * e2 * R * (5 * a + 4),
        C1t=math.sqrt(a * a + 2 * (a + 2 * a * a) ** 2),
        Kz=D * e2 * g * R * (4 + 5 * a),
        Ky=D * e2 * g * R * (2 + 2 * a),
        Kmu=2 * D * e4 * g * R * (1 + 2 * a),
        Kt=e2 * math.sqrt((1 + 2 * a) ** 2 + 2 * (2 * a * (1 + 2 * a) + a * a + 2 * a) ** 2),
    )


def initial_law_constant(b: AttentionBounds, T: float) -> float:
    r"""Thm. 4.1, eq. 17: :math:`\sup_t W_2(\mu_t,\mu_t') \le e^{(C_1 + C_2)T} W_2(\mu_0,\mu_0')`."""
    return math.exp(b.L * T)


def head_law_constant(b: AttentionBounds, T: float) -> float:
    r"""Cor. 5.2: :math:`\sup_t W_2(\mu_t,\tilde\mu_t) \le C_1'\,(e^{(C_1+C_2)T}-1)/(C_1+C_2)\;W_1(\rho,\tilde\rho)`."""
    return b.C1p * math.expm1(b.L * T) / b.L


def gradient_constant(b: AttentionBounds, T: float, loss_grad: float, loss_lip: float = 1.0) -> float:
    r"""Thm. 6.2: :math:`\|\delta\mathcal L/\delta\rho(\cdot;\rho)-\delta\mathcal L/\delta\rho(\cdot;\tilde\rho)\|_{C(\Theta)}
    \le C\,W_1(\rho,\tilde\rho)` for :math:`\mathcal J(\mu) = \ell(\int x\,d\mu)`, with
    ``loss_grad`` :math:`\ge\sup|\nabla\ell|` and ``loss_lip`` the Lipschitz constant of :math:`\nabla\ell`
    on the reachable means.

    Per unit :math:`W_1(\rho,\tilde\rho)`: tokens :math:`e_X(t) = C_1'(e^{Lt}-1)/L`; costates
    :math:`Q(t) = \ell' e^{L(T-t)}`; costate difference
    :math:`\Delta_q(t) = e^{L(T-t)}\ell'' e_X(T) + \int_t^T e^{L(\tau-t)}Q(\tau)[\Sigma e_X(\tau) + \Theta]d\tau`
    with :math:`\Sigma = C_{11}+C_{12}+K_z+K_y+K_\mu`, :math:`\Theta = C_{1\theta}+K_\theta`; and
    :math:`C = \int_0^T [D R\,\Delta_q(t) + Q(t)(C_1+C_2)e_X(t)]\,dt`.
    """
    L = b.L
    Sig = b.C11 + b.C12 + b.Kz + b.Ky + b.Kmu
    The = b.C1t + b.Kt

    def eX(t: float) -> float:
        return b.C1p * math.expm1(L * t) / L

    def Q(t: float) -> float:
        return loss_grad * math.exp(L * (T - t))

    def dq(t: float) -> float:
        # int_t^T e^{L(tau - t)} Q(tau) [Sig eX(tau) + The] dtau, with Q(tau) e^{L(tau - t)} = l' e^{L(T - t)}
        inner = loss_grad * math.exp(L * (T - t)) * (Sig * b.C1p / L * (math.expm1(L * T) - math.expm1(L * t)) / L
                                                     - Sig * b.C1p / L * (T - t) + The * (T - t))
        return math.exp(L * (T - t)) * loss_lip * eX(T) + inner

    val, err = quad(lambda t: b.D * b.R * dq(t) + Q(t) * L * eX(t), 0.0, T, epsabs=0.0, epsrel=1e-10)
    return float(val)


def log10(x: float) -> float:
    """``log10`` that maps an overflowed bound to ``inf``."""
    return float(np.log10(x)) if x > 0 else -math.inf
