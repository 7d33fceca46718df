r"""What rounding adds to the head-law bounds: the drawn heads are float64 numbers, and the atoms of
a reduction to the span are moved by the rounding of the basis.

Both terms bound how far :math:`\lambda_{\min}(K_\rho)` can move (Weyl), so the certificate
subtracts them from its lower bound and adds them to its upper one
(``theory/ntk-head-law.md``, "What the rounding of the draw adds").
"""

from __future__ import annotations

import math

import numpy as np

#: relative rounding of one drawn head entry: an exact draw rounded to float64, then multiplied by
#: its scale (two roundings of at most 2^-53 each), inflated
U_DRAW = 2.0**-52 * (1.0 + 2.0**-40)


def head_moments(dist: str, dim: int, q_scale: float, b_scale: float) -> tuple[float, float]:
    """:math:`E\\|Q\\|_F^2` and :math:`E\\|b\\|^2` of the head law in ``dim`` dimensions."""
    f = 1.0 if dist == "gaussian" else 1.0 / 3.0
    return f * dim * dim * q_scale**2, f * dim * b_scale**2


def eta_draw(R: np.ndarray, L: float, dist: str, dim: int, q_scale: float, b_scale: float) -> float:
    r"""What rounding the drawn heads to float64 can move :math:`\lambda_{\min}` of the head law's NTK:

    .. math::

        \eta = 2\sqrt{L}\, u'\, \Big(\sum_i R_i^4\,(2R_i^2 E\|Q\|_F^2 + 2E\|b\|^2)\Big)^{1/2},

    from :math:`|\phi(\theta) - \phi(\tilde\theta)| \le u' R_i^2 (R_i\|Q\|_F + |b|)` (the softmax
    covariance has norm at most :math:`R_i^2`) and :math:`\|X_\theta - X_{\tilde\theta}\|_2 \le
    2\sqrt L\,\|W^{1/2}(\Phi_\theta - \Phi_{\tilde\theta})\|_F`, with Jensen over the head law."""
    q2, b2 = head_moments(dist, dim, q_scale, b_scale)
    with np.errstate(over="ignore"):  # radii beyond ~1e51: eta = inf, no lower bound (sound, and said)
        s = float(np.sum(R**4 * (2.0 * R**2 * q2 + 2.0 * b2)))
    return 2.0 * math.sqrt(L) * U_DRAW * math.sqrt(s) * (1.0 + 1e-10)


def eta_atoms(eps: np.ndarray, R: np.ndarray, L: float, dim: int, q_scale: float, b_scale: float) -> float:
    r"""What moving the atoms of law ``i`` by at most ``eps[i]`` can move :math:`\lambda_{\min}` of the
    head law's NTK (Gaussian heads in ``dim`` dimensions):

    .. math::

        \eta = 2\sqrt{L}\,\Big(\sum_i \varepsilon_i^2\, 3\,(1 + 4R_i^4 E\|Q\|_F^2 + R_i^2 E\|b\|^2)\Big)^{1/2},

    from :math:`|\partial\phi| \le \varepsilon_i (1 + 2R_i^2\|Q\|_F + R_i|b|)` along the segment."""
    q2, b2 = head_moments("gaussian", dim, q_scale, b_scale)
    s = float(np.sum(eps**2 * 3.0 * (1.0 + 4.0 * R**4 * q2 + R**2 * b2)))
    return 2.0 * math.sqrt(L) * math.sqrt(s) * (1.0 + 1e-10)
