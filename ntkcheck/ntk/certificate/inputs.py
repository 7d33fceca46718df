r"""The Gram certificates and the values the user gave: rounded inputs, carried over or refused.

Tokens and heads may be given at values that are not doubles (``Fraction``, integers beyond
2^53, long doubles; :attr:`Empirical.rounded <ntkcheck.cgf.empirical.Empirical.rounded>`,
:attr:`Heads.rounded <ntkcheck.ntk.gram_matrix.features.Heads.rounded>`). The float64 routes of
:mod:`ntkcheck.ntk.certificate.routes` prove a lower bound :math:`\ell` on :math:`\lambda_{\min}` of the
Gram of the float64 *view* (the nearest doubles), which is a statement about other numbers.
It carries over to the numbers given through a proved bound on what the rounding moves:

.. math::

    \|F - \hat F\|_F \le E, \qquad
    \sigma_{\min}(F) \ge \sigma_{\min}(\hat F) - E \ge \sqrt{\ell} - E
    \quad\Rightarrow\quad \lambda_{\min}(F F^T) \ge (\sqrt{\ell} - E)^2

(Weyl's inequality for singular values), with ``F`` the exact features of the values given and
:math:`\hat F` those of the view, both in exact arithmetic (:func:`rounding_radius`; derived in
``theory/certificates.md``, "Inputs: exact, refused or rounded"). When :math:`\sqrt{\ell} \le E`
nothing carries over and the float64 certificate is kept only as evidence.

:func:`exactly_singular` proves a Gram singular in exact arithmetic in the one structural case
it checks: two atoms ``x, y`` of one sample with :math:`Q_h x + b_h = Q_h y + b_h` for every
head (checked in ``Fraction``): their feature rows are proportional.

References: seed 003 Prop. 5; ``theory/certificates.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from ...cgf.empirical import Empirical
from ..gram_matrix.cholesky import _SAFE, U
from ..gram_matrix.features import Heads
from .rounding import _norm_up

__all__ = ["rounding_radius", "carried_over", "exactly_singular"]

#: the absolute rounding of a value in the subnormal range (half the smallest subnormal, inflated)
_ETA = 2.0**-1074
#: the exact singularity check is attempted only below this many float64 flops (pairs x heads x d^2)
SINGULAR_CHECK_FLOPS = 2e8
#: and verifies at most this many candidate pairs in Fraction arithmetic, each of at most this cost
SINGULAR_CHECK_PAIRS = 16
SINGULAR_PAIR_OPS = 2_000_000


def rounding_radius(laws: Sequence[Empirical], heads: Heads) -> float:
    r"""A proved upper bound :math:`E \ge \|F - \hat F\|_F`: ``F`` the features of the values given,
    :math:`\hat F` those of their nearest doubles, both in exact arithmetic (0 when nothing rounds).

    Every value rounds to its nearest double, so :math:`|v - \hat v| \le u|\hat v| + \eta`
    (:math:`u = 2^{-53}`, :math:`\eta = 2^{-1074}` for the subnormal range). Per law ``i`` (largest
    token norm :math:`\hat R_i` of the view, :math:`\delta_i \ge \max_a |x_a - \hat x_a|`,
    :math:`R_i = \hat R_i + \delta_i`) and head ``h`` (:math:`\Delta_{Q} \ge \|Q_h - \hat Q_h\|_F`,
    :math:`\Delta_b \ge |b_h - \hat b_h|`), every score moves by at most

    .. math::

        \varepsilon_{ih} = (\Delta_Q R_i + \|\hat Q_h\|_F \delta_i + \Delta_b) R_i
                         + (\|\hat Q_h\|_F \hat R_i + |\hat b_h|)\,\delta_i,

    the softmax weights by a factor within :math:`e^{\pm 2\varepsilon}` (so by at most
    :math:`e^{2\varepsilon} - 1` in :math:`\ell^1`), and a feature
    :math:`\nabla\Lambda_i(Q_h x + b_h)` by at most :math:`(e^{2\varepsilon_{ih}} - 1) R_i + \delta_i`.
    The row weights :math:`\sqrt{m_{ia}/H}` are the same exact masses in both, and
    :math:`\sum_a m_{ia} = 1`, so
    :math:`\|F - \hat F\|_F^2 \le \frac1H \sum_{i,h} ((e^{2\varepsilon_{ih}} - 1) R_i + \delta_i)^2`.
    """
    d = heads.dim
    lr = np.array([law.rounded for law in laws])
    if not lr.any() and not heads.rounded:
        return 0.0
    R_hat = np.array([float(np.max(_norm_up(law.atoms))) for law in laws])
    delta = np.where(lr, (U * R_hat + d * _ETA) * _SAFE, 0.0)
    R = (R_hat + delta) * _SAFE
    q = _norm_up(heads.Q.reshape(heads.count, -1))
    bn = _norm_up(heads.b)
    if heads.rounded:
        dQ = (U * q + d * _ETA) * _SAFE
        db = (U * bn + d * _ETA) * _SAFE
    else:
        dQ = db = np.zeros(heads.count)
    with np.errstate(over="ignore", invalid="ignore"):
        eps = ((dQ[None, :] * R[:, None] + q[None, :] * delta[:, None] + db[None, :]) * R[:, None]
               + (q[None, :] * R_hat[:, None] + bn[None, :]) * delta[:, None]) * _SAFE
        rho = np.expm1(2.0 * eps) * (1.0 + 8.0 * U) * _SAFE  # expm1 is within an ulp or two
        row = (rho * R[:, None] + delta[:, None]) * _SAFE
        tot = float(np.sum(row * row)) / heads.count
    if not math.isfinite(tot):
        return math.inf
    return math.sqrt(tot * _SAFE) * _SAFE


def carried_over(lower_bound: float, E: float) -> float | None:
    r""":math:`(\sqrt{\ell} - E)^2` rounded down, when positive: the bound ``lower_bound`` proved for the
    float64 view carried over to the values given; None when the rounding radius ``E`` eats it."""
    if not (lower_bound > 0 and math.isfinite(E)):
        return None
    s = math.sqrt(lower_bound) * (1.0 - 2.0**-50) - E * _SAFE
    if not s > 0:
        return None
    return float(np.nextafter(s * s * (1.0 - 2.0**-50), 0.0))


def _candidate_pairs(laws: Sequence[Empirical], heads: Heads) -> list[tuple[int, int, int]]:
    """Pairs ``(i, a, b)`` of atoms of one law whose float64 score vectors agree for every head to
    a tolerance far above rounding (a filter: every exact pair passes it)."""
    H, d = heads.count, heads.dim
    out = []
    for i, law in enumerate(laws):
        N = law.n_atoms
        if N < 2:
            continue
        X = law.atoms
        S = np.einsum("hkl,al->ahk", heads.Q, X).reshape(N, H * d)  # Q_h x_a, all heads
        scale = np.abs(np.einsum("hkl,al->ahk", np.abs(heads.Q), np.abs(X))).reshape(N, H * d)
        for a in range(N):
            diff = np.abs(S[a + 1:] - S[a])
            tol = 1e-9 * (scale[a + 1:] + scale[a]) + 1e-300
            for b in np.nonzero(np.all(diff <= tol, axis=1))[0]:
                out.append((i, a, a + 1 + int(b)))
                if len(out) >= SINGULAR_CHECK_PAIRS:
                    return out
    return out


def exactly_singular(laws: Sequence[Empirical], heads: Heads) -> tuple[str, tuple[int, int, int]] | None:
    r"""A proof that the Gram is singular in exact arithmetic, in words, with the sample and its two
    atoms ``(i, a, b)`` (what a certificate file records), or None.

    Two distinct atoms ``x, y`` of one law with :math:`Q_h (x - y) = 0` for every head (checked in
    ``Fraction`` on the values given) have equal scores :math:`Q_h x + b_h = Q_h y + b_h`, so equal
    features :math:`\nabla\Lambda_i(Q_h x + b_h)`: their rows of ``F`` are proportional
    (:math:`\sqrt{m_y}\,F_x - \sqrt{m_x}\,F_y = 0`) and ``F F^T`` has a kernel. Candidates come from a
    float64 filter and the check is skipped above :data:`SINGULAR_CHECK_FLOPS` (then None: nothing
    is claimed).
    """
    H, d = heads.count, heads.dim
    pairs_n = sum(law.n_atoms * (law.n_atoms - 1) // 2 for law in laws)
    if pairs_n == 0 or (pairs_n + sum(law.n_atoms for law in laws)) * H * d * d > SINGULAR_CHECK_FLOPS:
        return None
    if H * d * d > SINGULAR_PAIR_OPS:
        return None
    Qr = None
    for i, a, b in _candidate_pairs(laws, heads):
        xa, xb = laws[i].rational_atoms()[a], laws[i].rational_atoms()[b]
        v = [p - q for p, q in zip(xa, xb, strict=True)]
        if Qr is None:
            Qr = [heads.rational_Q(h) for h in range(H)]
        if all(sum((qk * vk for qk, vk in zip(row, v, strict=True)), Fraction(0)) == 0 for Q in Qr for row in Q):
            return (f"atoms {a} and {b} of sample {i} have equal scores under every head (Q_h (x_{a} - x_{b}) = 0 "
                    f"for all {H} heads, in exact rational arithmetic), so their feature rows are proportional: "
                    "the Gram is exactly singular", (i, a, b))
    return None
