r"""Proved values at a parameter point (or over a box): the loss, the NTK's extreme eigenvalues, and the
one-sided Lipschitz constant of the gradient-flow field.

All three evaluate the model of :mod:`._model` in ball arithmetic (``theory/flow-numerics.md``,
"Ball arithmetic"), so the rounding of the forward pass is inside the bound:

* :func:`loss_bounds`: :math:`\mathcal L(\theta)` for every :math:`\theta` in the box (a point: radius 0);
* :func:`ntk_bounds`: :math:`\lambda_{\min}`, :math:`\lambda_{\max}` of :math:`K = H W^{1/2}JJ^\top W^{1/2}`
  from the Jacobian :math:`J = \partial z/\partial\theta` in forward mode (:class:`~._series.Dual`, all
  ``P`` directions, in chunks under a memory cap), then Weyl on the ball of ``K``;
* :func:`field_mu`: an upper bound of :math:`\lambda_{\max}` of the symmetric part of
  :math:`Df = -H\nabla^2\mathcal L` over the box, the rate at which two solutions of the flow can
  separate there (``theory/flow-numerics.md``, "The validated enclosure").

References: Rump, BIT 39 (1999) (midpoint-radius arithmetic); Weyl's inequality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import DomainError
from ._linalg import lambda_max_upper, lambda_min_lower
from ._model import Model, field, forward, loss_and_seed, outputs
from ._series import Dual, Series, Taylor, U, _up

__all__ = ["NtkBounds", "field_mu", "loss_bounds", "ntk_bounds"]

#: entries of the largest array of one forward-mode chunk (the directions are split to stay below)
CHUNK_ENTRIES = 6_000_000


def _theta(kind: type[Series], mid: np.ndarray, rad: np.ndarray | None, directions: np.ndarray | None) -> Series:
    """The parameters as a ball (coefficient 0) with unit tangents along ``directions`` (indices)."""
    if directions is None:
        return kind(mid[None].copy(), (np.zeros_like(mid) if rad is None else rad)[None].copy())
    k = directions.size
    m = np.zeros((1 + k, mid.size))
    m[0] = mid
    m[1 + np.arange(k), directions] = 1.0
    r = np.zeros_like(m)
    if rad is not None:
        r[0] = rad
    return kind(m, r)


def loss_bounds(mdl: Model, theta: np.ndarray, rad: np.ndarray | None = None, *, floor: bool = True
                ) -> tuple[float, float]:
    r"""Proved ``(lower, upper)`` of :math:`\mathcal L(\theta)` for every :math:`\theta` in ``[theta +- rad]``
    (a point when ``rad`` is None); ``floor=False``: without the part no parameter changes (copies with
    different targets), i.e. of :math:`|u|^2/2`."""
    th = _theta(Taylor, np.asarray(theta, dtype=np.float64), rad, None)
    V, Q, b = mdl.split(th)
    XT, _ = forward(mdl, V, Q, b)
    val, _ = loss_and_seed(mdl, outputs(mdl, XT))
    m, r = float(val.mid[0]), float(val.rad[0])  # type: ignore[index]
    lo = max((m - r) * (1.0 - 4.0 * U), 0.0)
    hi = float(_up(np.array((m + r) * (1.0 + 4.0 * U) + (mdl.floor_up if floor else 0.0))))
    return lo, hi


def _chunks(mdl: Model, P: int) -> list[np.ndarray]:
    n, S, d = mdl.X.shape
    # the largest arrays of a chunk of k directions: the scores (k, n, S, S, H), the parameters' tangents (k, P)
    per = max(1, CHUNK_ENTRIES // max(1, n * S * S * mdl.heads, P))
    return [np.arange(a, min(P, a + per)) for a in range(0, P, per)]


def jacobian_ball(mdl: Model, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The ball of :math:`B = \sqrt{H}\,W^{1/2}\partial z/\partial\theta` at ``theta``, rows the outputs
    (``(i, a)`` readout, real ``(i, atom, a)`` tokens), columns the parameters."""
    theta = np.asarray(theta, dtype=np.float64)
    cols_m, cols_r = [], []
    for idx in _chunks(mdl, theta.size):
        th = _theta(Dual, theta, None, idx)
        V, Q, b = mdl.split(th)
        XT, _ = forward(mdl, V, Q, b)
        z = outputs(mdl, XT)
        cols_m.append(z.mid[1:].reshape(idx.size, -1))
        cols_r.append(z.rad[1:].reshape(idx.size, -1))  # type: ignore[index]
    Jm, Jr = np.concatenate(cols_m).T, np.concatenate(cols_r).T
    w_m, w_r = _sqrt_weights(mdl)
    Bm = Jm * w_m[:, None]
    Br = _up(np.abs(Jm) * w_r[:, None] + Jr * (w_m + w_r)[:, None] + U * np.abs(Bm))
    if mdl.loss == "tokens":
        keep = np.repeat((mdl.mass_mid > 0)[:, :, None], mdl.dim, axis=2).reshape(-1)
        Bm, Br = Bm[keep], Br[keep]
    return Bm, Br


def _sqrt_weights(mdl: Model) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\sqrt{H w}` per output row, enclosed (``w = 1`` readout, :math:`m_{ia}/n` tokens)."""
    n, S, d = mdl.X.shape
    if mdl.loss == "readout":
        v = math.sqrt(mdl.heads)
        return np.full(n * d, v), np.full(n * d, _up(np.array(v * U)).item())
    w = mdl.mass_mid * mdl.heads / n
    wr = _up(mdl.mass_rad * mdl.heads / n + 2.0 * U * w)
    s = np.sqrt(w)
    low = np.maximum(w - wr, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sr = np.where(w > 0, _up(wr / np.maximum(np.sqrt(low) + s, 1e-300) * (1.0 + 4.0 * U) + U * s), 0.0)
    return np.repeat(s[..., None], d, axis=2).reshape(-1), np.repeat(sr[..., None], d, axis=2).reshape(-1)


@dataclass(frozen=True)
class NtkBounds:
    """Proved bounds on the NTK at a point: ``lambda_min >= lower``, ``lambda_max <= upper``."""

    lower: float
    upper: float
    lambda_min_float: float
    lambda_max_float: float
    rows: int


def ntk_bounds(mdl: Model, theta: np.ndarray) -> NtkBounds:
    r"""Proved :math:`\lambda_{\min}(K(\theta)) \ge` ``lower`` and :math:`\lambda_{\max}(K(\theta)) \le` ``upper``."""
    Bm, Br = jacobian_ball(mdl, theta)
    Km = Bm @ Bm.T
    inner = Bm.shape[1]
    g = (inner + 2) * U / (1.0 - (inner + 2) * U) + U
    Ab = np.abs(Bm)
    Kr = _up(Ab @ (Br + g * Ab).T + Br @ (Ab + Br).T, inner)
    ev = np.linalg.eigvalsh(0.5 * (Km + Km.T))
    return NtkBounds(lambda_min_lower(Km, Kr), lambda_max_upper(Km, Kr), float(ev[0]), float(ev[-1]), Km.shape[0])


def field_mu(mdl: Model, box_mid: np.ndarray, box_rad: np.ndarray, *, full: bool = True) -> float:
    r"""An upper bound of :math:`\sup_{\theta\in\text{box}}\lambda_{\max}(\mathrm{sym}\,Df(\theta))`, :math:`f = -H\nabla\mathcal L`.

    ``full=False`` drops :math:`-HJ^\top WJ \preceq 0` from :math:`Df` (a valid upper bound again) and keeps
    the residual part :math:`-H\sum_i r_i\nabla^2 z_i`, whose enclosure is narrower far from the centre."""
    P = box_mid.size
    rows_m = np.empty((P, P))
    rows_r = np.empty((P, P))
    for idx in _chunks(mdl, P):
        th = _theta(Dual, box_mid, box_rad, idx)
        _, f = field(mdl, th, exact_seed=full)
        rows_m[idx] = f.mid[1:]
        rows_r[idx] = f.rad[1:]  # type: ignore[index]
    if not np.all(np.isfinite(rows_r)):
        raise DomainError("the enclosure of the field's derivative is not finite over this box")
    return lambda_max_upper(rows_m, rows_r)


def field_mu_line(mdl: Model, a: np.ndarray, b: np.ndarray, r: np.ndarray, w: float, *, full: bool = True) -> float:
    r"""An upper bound of :math:`\lambda_{\max}(\mathrm{sym}\,Df(\theta))` for every :math:`\theta` with
    :math:`|\theta_j - a_j - b_j\sigma| \le r_j`, :math:`|\sigma| \le w`: a tube around a segment of the path
    given as a first-order Taylor model (:class:`~._tm.Tm1`).

    The derivative is then enclosed as :math:`A + B\sigma + [-R, R]` (entrywise), so
    :math:`\lambda_{\max} \le \lambda_{\max}(A \pm R) + w\|\mathrm{sym}\,B\|_2`."""
    from ._tm import DualOf, Tm1

    P = a.size
    theta = Tm1(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), np.asarray(r, dtype=np.float64), w)
    Am, Ar, Bm = np.empty((P, P)), np.empty((P, P)), np.empty((P, P))
    for idx in _chunks(mdl, P):
        tang = np.zeros((idx.size, P))
        tang[np.arange(idx.size), idx] = 1.0
        th = DualOf(theta, Tm1(tang, np.zeros_like(tang), np.zeros_like(tang), w))
        _, f = field(mdl, th, exact_seed=full)
        t = f.t._full()
        Am[idx], Ar[idx], Bm[idx] = t.a, t.r, t.b
    if not (np.all(np.isfinite(Ar)) and np.all(np.isfinite(Bm))):
        raise DomainError("the Taylor model of the field's derivative is not finite on this segment")
    Bs = 0.5 * (Bm + Bm.T)
    Br = _up(U * np.abs(Bs) + U * 0.5 * (np.abs(Bm) + np.abs(Bm.T)))
    bnorm = max(lambda_max_upper(Bs, Br), -lambda_min_lower(Bs, Br), 0.0)
    return float(_up(np.array(lambda_max_upper(Am, Ar) + w * bnorm * (1.0 + 4.0 * U))))


def line_of_path(pieces: list[tuple[float, np.ndarray, float]], ebar: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    r"""A first-order Taylor model ``(a, b, r, w)`` of a piecewise-polynomial path: the chord through its ends,
    :math:`\sigma` the time from the middle, ``r`` a proved bound of every piece's distance from the chord
    (per coordinate) plus ``ebar``. ``pieces``: ``(s_n, coeffs_n, h_n)``, consecutive."""
    s0, s1 = pieces[0][0], pieces[-1][0] + pieces[-1][2]
    sc, w = 0.5 * (s0 + s1), 0.5 * (s1 - s0)
    start, end = _centred(pieces[0][1], 0.0), _centred(pieces[-1][1], pieces[-1][2])
    pa, pb = start.mid[0], end.mid[0]
    a = 0.5 * (pa + pb)
    b = (pb - pa) / (s1 - s0)
    r = np.zeros_like(a)
    for sn, c, h in pieces:
        cen = _centred(c, h / 2.0)  # p_n around its middle, in balls
        base = Taylor.const(a) + Taylor.const(b).scale(sn + h / 2.0 - sc)  # the chord there (t0 exact on the grid)
        chord = Taylor(np.stack([base.mid[0], b]), np.stack([base.rad[0], np.zeros_like(b)]))  # type: ignore[index]
        diff = cen - chord
        powers = (h / 2.0) ** np.arange(diff.order_count)
        r = np.maximum(r, np.sum(diff.upper_abs() * powers[:, None], axis=0))
    r = _up(r + ebar, pieces[0][1].shape[0])
    return a, b, r, w


def _centred(coeffs: np.ndarray, t: float) -> Taylor:
    r"""The Taylor coefficients (balls) of :math:`p(t + \sigma)` in :math:`\sigma`, ``t`` an exact float."""
    n, P = coeffs.shape
    tm = np.zeros((n, P))
    tm[0], tm[1] = t, 1.0
    tau = Taylor(tm, np.zeros((n, P)))
    acc: Series = Taylor.const(coeffs[-1])
    for k in range(n - 2, -1, -1):
        acc = acc * tau + coeffs[k]
    return acc  # type: ignore[return-value]
