r"""Second derivatives of the heads' readout features at FixUp, contracted with the token motion.

Private to :mod:`ntkcheck.convergence.coercivity` (``theory/local-convergence.md``, "The quadratic
terms, computed"). For head ``h`` the readout feature of sample ``i`` is
:math:`\bar m_{hi} = \sum_j w_j m_{hj}`, a function of the sample's token field ``Y`` and of the
head's :math:`\Delta\psi_h = (\Delta Q_h, \Delta b_h)`. Its Hessian :math:`H_{hi}` (per output
coordinate) is assembled from the formula of :mod:`~ntkcheck.convergence.coercivity._termwise`,
basis vector by basis vector. The token field of a layer is the motion :math:`Y = M[V]`, and
with :math:`V = \sqrt H\,v` (:math:`|V|_\rho = |v|`) it is :math:`Y = W_i v`,
:math:`(W_i v)_k = H^{-1/2}\sum_g v_g m_{gk}`. The three norms

.. math::

    \eta^{VV}_h \ge \sup_{|v|,|v'|\le1}\Big|\big(v^\top W_i^\top H^{YY}_{hio} W_i v'\big)_{i,o}\Big|,\quad
    \eta^{V\psi}_h \ge \sup \big|\big(v^\top W_i^\top H^{Y\psi}_{hio}\,p\big)_{i,o}\big|,\quad
    \eta^{\psi\psi}_h \ge \sup \big|\big(p^\top H^{\psi\psi}_{hio}\,p'\big)_{i,o}\big|

(the vector over samples ``i`` and output coordinates ``o``) are bounded by flattenings:
:math:`\sup_{|v|,|v'|\le 1}|(v^\top A_o v')_o| \le \|[A_1,\dots,A_O]\|_2`. When the head's Hessian would be
large (:data:`MAX_VARIABLES`) or the motion space is (:data:`MAX_MOTION`) the same norms are
bounded term by term (:func:`termwise_etas`, about an order of magnitude looser).
"""

from __future__ import annotations

import math

import numpy as np

from ._stats import SampleStats, err_factor, spec_up, up
from ._termwise import d2, head, motion, region

#: Hessians are formed while N d + d (d + 1) stays below this
MAX_VARIABLES = 160
#: the motion space H d^2 up to which the flattening is formed
MAX_MOTION = 400


def _basis(x: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``DQ (H, N, nv, d)`` query change of query ``j``, ``YU (N, nv, d)`` token change and ``DQb``,
    the ``Q``-part of each basis vector acting on a token (``(nv, d, d)``); token variables first."""
    H, d = Q.shape[0], Q.shape[1]
    N = x.shape[0]
    nY = N * d
    nv = nY + d * (d + 1)
    YU = np.zeros((N, nv, d))
    idx = np.arange(nY)
    YU[idx // d, idx, idx % d] = 1.0
    xt = np.concatenate([x, np.ones((N, 1))], axis=1)
    DQ = np.zeros((H, N, nv, d))
    for k in range(N):
        DQ[:, k, k * d:(k + 1) * d, :] = np.swapaxes(Q, 1, 2)
    DQb = np.zeros((nv, d, d))
    for a in range(d):
        for c in range(d + 1):
            u = nY + a * (d + 1) + c
            DQ[:, :, u, a] = xt[None, :, c]
            if c < d:
                DQb[u, a, c] = 1.0
    return DQ, YU, DQb, nY


def readout_hessian(st: SampleStats, Q: np.ndarray, b: np.ndarray, absolute: bool = False) -> tuple[np.ndarray, int]:
    r"""``(H, d, nv, nv)`` Hessian of :math:`\bar m_h` in (token field, :math:`\Delta\psi_h`) for one sample,
    or (``absolute``) its absolute companion: every factor replaced by a bound of its absolute value
    (:math:`|y| \le |x_k| + \sum_l\pi_l|x_l|`, :math:`|q| \le |Q||x_j| + |b|`, signs dropped)."""
    x, pi, w = st.x, st.pi, st.w
    N, d = x.shape
    if absolute:
        xa = np.abs(x)
        y = xa[None, None] + np.einsum("hjk,ka->hja", pi, xa)[:, :, None, :]
        q = np.einsum("hab,jb->hja", np.abs(Q), xa) + np.abs(b)[:, None, :]
        C = np.einsum("hjk,hjka,hjkb->hjab", pi, y, y)
        DQ, YU, DQb, nY = _basis(xa, np.abs(Q))
    else:
        y, q, C = st.y, st.q, st.C
        DQ, YU, DQb, nY = _basis(x, Q)
    Ybar = np.einsum("hjl,lud->hjud", pi, YU)
    A = np.einsum("hjud,hjkd->hjku", DQ, y) + np.einsum("hjd,kud->hjku", q, YU)
    A = A + (1.0 if absolute else -1.0) * np.einsum("hjd,hjud->hju", q, Ybar)[:, :, None, :]
    T1 = np.einsum("j,hjk,hjku,kvd->hduv", w, pi, A, YU, optimize=True)
    T2 = np.einsum("j,hjk,hjkd,hjku,hjkv->hduv", w, pi, y, A, A, optimize=True)
    DQY = np.einsum("hjud,kvd->hjkuv", DQ, YU)
    T3 = np.einsum("j,hjk,hjkd,hjkuv->hduv", w, pi, y, DQY, optimize=True)
    # C_j d^2 q, d^2 q = dQ^u Y^v_j + dQ^v Y^u_j
    T4 = np.einsum("j,hjac,uce,jve->hauv", w, C, DQb, YU[np.arange(N)], optimize=True)
    out = T1 + np.swapaxes(T1, -1, -2) + T2 + T3 + np.swapaxes(T3, -1, -2) + T4 + np.swapaxes(T4, -1, -2)
    return out, nY


def _motion_map(stats: list[SampleStats]) -> list[np.ndarray]:
    """Per sample ``W_i`` (``(N_i d, H d^2)``) with :math:`(W_i v)_k = H^{-1/2}\\sum_g v_g m_{gk}`."""
    out = []
    for st in stats:
        H, N, d = st.m.shape
        W = np.zeros((N, d, H, d, d))
        for a in range(d):
            W[:, a, :, a, :] = np.swapaxes(st.m, 0, 1) / math.sqrt(H)
        out.append(W.reshape(N * d, H * d * d))
    return out


def structured_etas(stats: list[SampleStats], Q: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    r"""Certified :math:`(\eta^{VV}_h, \eta^{V\psi}_h, \eta^{\psi\psi}_h)` from the Hessians (module
    docstring), or ``None`` when they would be large."""
    H, d = Q.shape[0], Q.shape[1]
    if max(st.x.shape[0] for st in stats) * d + d * (d + 1) > MAX_VARIABLES or H * d * d > MAX_MOTION:
        return None
    eta = stats[0].eta
    ef = err_factor(eta, 8)
    Ws = _motion_map(stats)
    Wa = [np.abs(W) for W in Ws]
    hs = [readout_hessian(st, Q, b) for st in stats]
    ha = [readout_hessian(st, Q, b, absolute=True) for st in stats]
    out = np.zeros((3, H))
    for h in range(H):
        blocks: list[list[np.ndarray]] = [[], [], [], []]
        errs = np.zeros(4)
        for (Hh, nY), (Ha, _), W, Wb in zip(hs, ha, Ws, Wa, strict=True):
            for a in range(d):
                Hs, Hb = Hh[h, a], Ha[h, a]
                AVV, AVVa = W.T @ Hs[:nY, :nY] @ W, Wb.T @ Hb[:nY, :nY] @ Wb
                AVP, AVPa = W.T @ Hs[:nY, nY:], Wb.T @ Hb[:nY, nY:]
                APP, APPa = Hs[nY:, nY:], Hb[nY:, nY:]
                blocks[0].append(AVV)
                blocks[1].append(AVP)
                blocks[2].append(AVP.T)
                blocks[3].append(APP)
                errs += np.array([np.sum(AVVa**2), np.sum(AVPa**2), np.sum(AVPa**2), np.sum(APPa**2)])
        errs = ef * np.sqrt(errs)
        vv = float(spec_up(np.concatenate(blocks[0], axis=1), errs[0]))
        vp = min(float(spec_up(np.concatenate(blocks[1], axis=1), errs[1])),
                 float(spec_up(np.concatenate(blocks[2], axis=1), errs[2])))
        pp = float(spec_up(np.concatenate(blocks[3], axis=1), errs[3]))
        out[:, h] = (vv, vp, pp)
    return tuple(up(out))  # type: ignore[return-value]


def termwise_etas(stats: list[SampleStats]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The same three norms bounded term by term: per sample the readout sum of
    :func:`~ntkcheck.convergence.coercivity._termwise.d2` at the centre (unit motions, unit head
    displacements), combined over samples in :math:`\ell^2`."""
    acc = np.zeros((3, stats[0].pi.shape[0]))
    z = np.zeros(1)
    for st in stats:
        c0 = region(st, z, z, z, 0.0)
        mv, hd = motion(st, c0, 1.0), head(st, c0, 1.0)
        for k, (e1, e2) in enumerate(((mv, mv), (mv, hd), (hd, hd))):
            acc[k] += np.sum(st.w * d2(c0, e1, e2)[0][0], axis=-1) ** 2  # batch of one region
    return tuple(up(np.sqrt(acc)))  # type: ignore[return-value]
