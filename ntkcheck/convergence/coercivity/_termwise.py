r"""Term-by-term bounds on the derivatives of one head's feature at every point of a region.

Private to :mod:`ntkcheck.convergence.coercivity` (``theory/local-convergence.md``, "Softmax
derivatives over a region"). A feature :math:`m = \sum_k \pi_k x_k`, :math:`\pi = \operatorname{softmax}(s)`,
:math:`s_k = \langle q, x_k\rangle + \log w_k`, :math:`q = \psi\tilde x_j`, has along directions
:math:`e_i = (Y^i, \Delta\psi^i)` (token field, head displacement)

.. math::

    D^2 m[e_1, e_2] = \sum_k \pi_k(\tilde a^1_k Y^2_k + \tilde a^2_k Y^1_k) + \sum_k \pi_k y_k \tilde a^1_k\tilde a^2_k
        + C\,d^2q + \sum_k \pi_k y_k(\langle dq^1, Y^2_k\rangle + \langle dq^2, Y^1_k\rangle),

with :math:`\tilde a^i_k` the centred score derivative, and :math:`D^3 m` the analogous sum of
:math:`\ell_1\ell_2\ell_3 + \ell_1\ell_{23} + \ell_2\ell_{13} + \ell_3\ell_{12} + \ell_{123}` terms
(:math:`\ell` the derivatives of :math:`\log\pi_k`). Each factor is bounded per key ``k`` at every point
of the region: the weights by :math:`\pi_k e^{\sigma^{tot}_k}` (the centred score change
:math:`\sigma^{tot}_k` over the region, from the per-score sensitivities of
:mod:`~ntkcheck.convergence.coercivity._stats`), the score derivatives of a token motion
:math:`M[V]` by :math:`\sigma_{hjk}` (not by :math:`|q|` times a token displacement: the motion
is shared by all tokens), and the rest by triangle inequalities. Every bound is a sum of
products of nonnegative upper bounds (and ``exp``), so it increases with each of them; as a
function of a head's displacement ``t`` it is convex (used to spread the ``(Q, b)`` budget over
the heads).

Arrays carry a leading batch axis ``B`` (region radii evaluated together), then heads ``H``,
queries ``j`` and keys ``k``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._stats import SampleStats


@dataclass(frozen=True)
class Region:
    """Enclosures at every point of a region: tokens moved by at most ``D`` (max-norm), of which
    at most ``G`` not along the linear motion ``sV M[V]``, the head by at most ``t`` (Frobenius)."""

    D: np.ndarray  # (B,)
    t: float
    P: np.ndarray  # (B, H, N, N) upper bound of the weights
    pe: np.ndarray  # (B, H, N, N) upper bound of |pi' - pi|
    yb: np.ndarray  # (B, H, N, N) upper bound of |y'_k|
    qb: np.ndarray  # (B, H, N) |q'|
    Qb: np.ndarray  # (H,) ||Q'||
    rhob: np.ndarray  # (B, N) (1 + |x'_j|^2)^(1/2)
    dq: np.ndarray  # (B, H, N) |q' - q|
    dm: np.ndarray  # (B, H, N) |m' - m|
    M1: np.ndarray  # (B, H, N)
    M2: np.ndarray  # (B, H, N)
    pi: np.ndarray  # (H, N, N) centre weights (upper bounds)


def region(st: SampleStats, D: np.ndarray, G: np.ndarray, sV: np.ndarray, t: float) -> Region:
    r"""Enclosures over the region (``D``, ``G``, ``sV`` of shape ``(B,)``).

    Centred score change (centre weights): :math:`\sigma^{tot}_k = s_V\sigma_k + (t\rho_j + \|Q\|G + tD)|y_k|
    + 2|q|G + 2\,dq\,D`, :math:`dq = (\|Q\| + t)D + t\rho_j`; then
    :math:`\pi'_k \le \pi_k e^{\sigma^{tot}_k}` (Jensen) and :math:`|\pi'_k - \pi_k| \le \pi_k(e^{\sigma^{tot}_k + \max\sigma^{tot}} - 1)`.
    """
    D, G, sV = (np.asarray(v, dtype=np.float64)[:, None, None, None] for v in (D, G, sV))
    yn, pi = st.yn_u[None], st.pi_u[None]
    Qn = st.Qn_u[None, :, None, None]
    rho_j = st.rho_u[None, None, :, None]
    qn = st.qn_u[None, :, :, None]
    dq = (Qn + t) * D + t * rho_j  # (B, H, N, 1)
    stot = sV * st.sigma_u[None] + (t * rho_j + Qn * G + t * D) * yn + 2.0 * qn * G + 2.0 * dq * D
    P = pi * np.exp(np.minimum(stot, 700.0))
    pe = pi * np.expm1(np.minimum(stot + stot.max(axis=-1, keepdims=True), 700.0))
    dm = D[..., 0] + np.sum(pe * yn, axis=-1)
    yb = yn + D + dm[..., None]
    xj = st.xn_u[None, :] + D[:, 0, 0]
    return Region(D=D[:, 0, 0, 0], t=float(t), P=P, pe=pe, yb=yb, qb=st.qn_u[None] + dq[..., 0], Qb=st.Qn_u + t,
                  rhob=np.sqrt(1.0 + xj * xj), dq=dq[..., 0], dm=dm, M1=np.sum(P * yb, axis=-1),
                  M2=np.sum(P * yb * yb, axis=-1), pi=st.pi_u)


@dataclass(frozen=True)
class Direction:
    """Bounds on a direction at every point of a region, per ``(B, H, j, k)``: ``L`` the centred
    score derivative, ``A`` the score derivative centred at the centre's mean (for variances),
    ``Y``/``Yc`` the token displacement of key ``k`` (plain / centred with the centre's weights),
    ``Yj`` that of the query token, ``g`` the query change, ``t`` the head's displacement."""

    L: np.ndarray
    A: np.ndarray
    Y: np.ndarray
    Yc: np.ndarray
    Yj: np.ndarray  # (B, H, N) broadcastable
    g: np.ndarray  # (B, H, N)
    t: np.ndarray | float

    def __add__(self, o: Direction) -> Direction:
        return Direction(self.L + o.L, self.A + o.A, self.Y + o.Y, self.Yc + o.Yc, self.Yj + o.Yj, self.g + o.g,
                         self.t + o.t)


def _centred(reg: Region, A: np.ndarray, corr: np.ndarray) -> np.ndarray:
    r""":math:`|\tilde a_k| \le A_k + \sum_l |\pi'_l - \pi_l| A_l + \sum_l \pi_l\,corr_l` (recentring at the region's weights)."""
    return A + np.sum(reg.pe * A, axis=-1, keepdims=True) + np.sum(reg.pi[None] * corr, axis=-1, keepdims=True)


def motion(st: SampleStats, reg: Region, scale: np.ndarray | float) -> Direction:
    r"""``scale`` times a unit token motion :math:`M[V]` (:math:`|V|_\rho \le 1`, centre features)."""
    s = np.asarray(scale, dtype=np.float64).reshape(-1, 1, 1, 1) if np.ndim(scale) else float(scale)
    mu_k, mu_j = st.mu_u[None, None, None, :], st.mu_u[None, None, :, None]
    D = reg.D[:, None, None, None]
    corr = reg.t * mu_j * (st.xn_u[None, None, None, :] + D) + st.Qn_u[None, :, None, None] * mu_j * D \
        + reg.dq[..., None] * mu_k
    A = st.sigma_u[None] + corr
    Yj = np.broadcast_to(st.mu_u[None, None, :], reg.dq.shape)
    sj = s[..., 0] if np.ndim(s) else s
    return Direction(L=s * _centred(reg, A, corr), A=s * A, Y=s * np.broadcast_to(mu_k, A.shape),
                     Yc=s * np.broadcast_to(st.muc_u[None], A.shape), Yj=sj * Yj, g=sj * reg.Qb[None, :, None] * Yj,
                     t=0.0)


def head(st: SampleStats, reg: Region, scale: float) -> Direction:
    r"""A displacement of the head's :math:`(Q, b)` of Frobenius norm ``scale``."""
    D = reg.D[:, None, None, None]
    corr = D * (st.xn_u[None, None, None, :] + D) + st.rho_u[None, None, :, None] * D
    A = st.rho_u[None, None, :, None] * st.yn_u[None] + corr
    z = np.zeros_like(A)
    return Direction(L=scale * _centred(reg, A, corr), A=scale * A, Y=z, Yc=z, Yj=np.zeros_like(reg.dq),
                     g=scale * np.broadcast_to(reg.rhob[:, None, :], reg.dq.shape), t=float(scale))


def field(st: SampleStats, reg: Region, size: np.ndarray | float) -> Direction:
    """Any token field of max-norm ``size`` (``(B,)`` or scalar)."""
    G = np.asarray(size, dtype=np.float64).reshape(-1, 1, 1, 1) if np.ndim(size) else float(size)
    L = reg.Qb[None, :, None, None] * G * reg.yb + 2.0 * reg.qb[..., None] * G
    Gj = G[..., 0] if np.ndim(G) else G
    ones = np.ones_like(reg.yb)
    return Direction(L=L, A=L, Y=G * ones, Yc=2.0 * G * ones, Yj=Gj * np.ones_like(reg.dq),
                     g=reg.Qb[None, :, None] * Gj * np.ones_like(reg.dq), t=0.0)


def _tt(e: Direction) -> np.ndarray | float:
    return e.t


def _pick(a: np.ndarray, b: np.ndarray, memo: dict | None, key: object, out: dict) -> np.ndarray:
    """``min(a, b)`` where ``memo`` is None (the choice is recorded in ``out``), else the recorded
    choice: a bound reused at another head displacement stays convex in it."""
    if memo is None:
        out[key] = a <= b
        return np.minimum(a, b)
    return np.where(memo[key], a, b)


def d2(reg: Region, e1: Direction, e2: Direction, memo: dict | None = None) -> tuple[np.ndarray, dict]:
    """Bound on :math:`|D^2 m_{hj}[e_1, e_2]|` at every point of the region, ``(B, H, N)``; the centring
    choices are returned (pass them back as ``memo`` at another head displacement)."""
    P, yb = reg.P, reg.yb
    out: dict = {}
    plain = np.sum(P * (e1.L * e2.Y + e2.L * e1.Y), axis=-1)
    cent = np.sum(P * (e1.L * e2.Yc + e2.L * e1.Yc), axis=-1)
    h12 = _tt(e1) * e2.Yj + _tt(e2) * e1.Yj
    val = (_pick(plain, cent, memo, "a", out) + np.sum(P * yb * e1.L * e2.L, axis=-1) + reg.M2 * h12
           + np.sum(P * yb * (e1.g[..., None] * e2.Y + e2.g[..., None] * e1.Y), axis=-1))
    return val, out


def d3(reg: Region, e1: Direction, e2: Direction, e3: Direction, memo: dict | None = None) -> tuple[np.ndarray, dict]:
    r"""Bound on :math:`|D^3 m_{hj}[e_1, e_2, e_3]|` at every point of the region, ``(B, H, N)``
    (:func:`d3_pair` with one third direction)."""
    vals, memos = d3_pair(reg, e1, e2, [e3], None if memo is None else [memo])
    return vals[0], memos[0]


def d3_pair(reg: Region, e1: Direction, e2: Direction, thirds: list[Direction],
            memos: list[dict] | None = None) -> tuple[list[np.ndarray], list[dict]]:
    r"""Bounds on :math:`|D^3 m_{hj}[e_1, e_2, e_3]|` for each ``e_3`` in ``thirds`` (the ``e_1, e_2`` parts shared).

    :math:`D^3 m = \sum_k \pi_k y_k(\ell_1\ell_2\ell_3 + \ell_1\ell_{23} + \ell_2\ell_{13} + \ell_3\ell_{12} + s^{123}_k)
    + \sum_{(ij;l)} \sum_k \pi_k(\ell_i\ell_j + \ell_{ij})(Y^l_k - c)`, with
    :math:`|\ell_{ij}| \le |\tilde s^{ij}_k| + |\mathrm{Cov}'(\tilde a^i, \tilde a^j)|`. The covariances
    :math:`\le (\Sigma_i \Sigma_j)^{1/2}`, :math:`\Sigma_i = \sum_k P_k A_{ik}^2`, are bounded by
    :math:`(\lambda\Sigma_i + \Sigma_j/\lambda)/2`, and each centring ``c`` is a choice; ``memos`` (returned by
    a call without them) fix :math:`\lambda` and the choices, so that a bound reused at another head
    displacement is convex in it (equal to the geometric-mean bound where :math:`\lambda` was chosen).
    """
    P, yb = reg.P, reg.yb
    Pyb = P * yb

    def prep(e: Direction) -> dict:
        return {"e": e, "var": np.sum(P * e.A * e.A, axis=-1, keepdims=True),
                "Yp": e.Y + np.sum(P * e.Y, axis=-1, keepdims=True), "Ycp": e.Yc + np.sum(P * e.Yc, axis=-1, keepdims=True),
                "g": e.g[..., None]}

    def cov(a: dict, b: dict, memo: dict | None, out: dict, key: object) -> np.ndarray:
        if memo is None:
            lij = np.sqrt(np.where(a["var"] > 0, b["var"] / np.where(a["var"] > 0, a["var"], 1.0), 1.0))
            lij = np.where(lij > 0, lij, 1.0)
            out[key] = lij
        else:
            lij = memo[key]
        return 0.5 * (lij * a["var"] + b["var"] / lij)

    def h(a: dict, b: dict) -> np.ndarray:
        return (_tt(a["e"]) * b["e"].Yj + _tt(b["e"]) * a["e"].Yj)[..., None]

    def s2(a: dict, b: dict, memo: dict | None, out: dict, key: object) -> np.ndarray:
        """|centred second score derivative| per key (any centring, chosen per key)."""
        pa = a["g"] * _pick(b["Yp"], b["Ycp"], memo, (key, 0), out)
        pb = b["g"] * _pick(a["Yp"], a["Ycp"], memo, (key, 1), out)
        return h(a, b) * yb + pa + pb

    p1, p2 = prep(e1), prep(e2)
    m0 = None if memos is None else memos[0]
    shared: dict = {}
    l12 = s2(p1, p2, m0, shared, "s12") + cov(p1, p2, m0, shared, "c12")
    L1, L2 = e1.L, e2.L
    L12 = L1 * L2
    vals, outs = [], []
    for n, e3 in enumerate(thirds):
        memo = None if memos is None else memos[n]
        out = dict(shared)
        p3 = prep(e3)
        l13 = s2(p1, p3, memo, out, "s13") + cov(p1, p3, memo, out, "c13")
        l23 = s2(p2, p3, memo, out, "s23") + cov(p2, p3, memo, out, "c23")
        L3 = e3.L
        val = np.sum(Pyb * (L12 * L3 + L1 * l23 + L2 * l13 + L3 * l12), axis=-1)
        val = val + np.sum(Pyb * (h(p1, p2) * e3.Y + h(p1, p3) * e2.Y + h(p2, p3) * e1.Y), axis=-1)
        for key, w, y in (("y3", P * (L12 + l12), e3), ("y2", P * (L1 * L3 + l13), e2), ("y1", P * (L2 * L3 + l23), e1)):
            val = val + _pick(np.sum(w * y.Y, axis=-1), np.sum(w * y.Yc, axis=-1), memo, key, out)
        vals.append(val)
        outs.append(out)
    return vals, outs
