r"""The second-order remainder of the Jacobian over a split region: the bound assembled.

Private to :mod:`ntkcheck.convergence.coercivity` (``theory/local-convergence.md``, "The remainder,
term by term"). On :math:`\Omega(r_V, r_q) = \{|V|_\rho \le r_V,\ |\psi - \psi_0|_\rho \le r_q\}`:

* :math:`\|B_V(\theta) - B_V(\theta_0) - DB_V(\theta_0)[\delta]\| \le \bar\rho_V`, the four terms
  ``R1`` (the layer Jacobians :math:`A_k` against their first order), ``R2`` (:math:`A_k` against
  the features' change), ``R3`` (products of two or more :math:`A_k`) and ``R4`` (the features
  against their first order), each split into a quadratic part computed at the centre (the
  :math:`\eta` norms) and term-by-term parts (second-order cross terms at the centre, third
  derivatives over the region);
* :math:`\|B_\psi(\theta)\| \le \kappa |V|_\rho` with :math:`\kappa = s + ` the analogous terms.

Samples are bounded one by one and combined in :math:`\ell^2`; heads through the ``(Q, b)``
budget :math:`\frac1H\sum_h t_h^2 \le r_q^2`: a bound :math:`b_h(t)` convex and increasing in the
head's displacement has :math:`\mathrm{rms}_h\, b_h(t_h) \le \mathrm{rms}_h b_h(0) + \max_h (b_h(t^*) - b_h(0))/\sqrt H`,
:math:`t^* = \sqrt H r_q` (:func:`_rms_budget`).
"""

from __future__ import annotations

import math

import numpy as np

from ._stats import SampleStats, up
from ._termwise import d2, d3_pair, field, head, motion, region


def _rms_budget(f0: np.ndarray, f1: np.ndarray | None, H: int) -> np.ndarray:
    """rms over heads (axis 1 of ``(B, H, ...)``) of a bound convex in the head's displacement, its values at
    0 (``f0``) and at the largest displacement (``f1``; ``None``: no ``(Q, b)`` budget)."""
    base = np.sqrt(np.mean(f0 * f0, axis=1))
    if f1 is None:
        return base
    return base + np.max(np.maximum(f1 - f0 * (1.0 - 1e-9), 0.0), axis=1) / math.sqrt(H)


def _wsum(st: SampleStats, v: np.ndarray) -> np.ndarray:
    """Readout sum over queries (last axis) with the masses."""
    return np.sum(st.w * v, axis=-1)


def _layer(st: SampleStats, D: np.ndarray, G: np.ndarray, sV: np.ndarray, t: float, memo: dict | None,
           with_q2: bool) -> dict:
    """Everything one layer needs at head displacement ``t`` (``memo``: the choices made at ``t = 0``;
    the ``(Q, b)`` column terms only at the largest displacement)."""
    new: dict = {}
    reg = region(st, D, G, sV, t)
    delta = motion(st, reg, sV) + field(st, reg, G) + head(st, reg, t)
    unit, unit_h, unit_m = field(st, reg, 1.0), head(st, reg, 1.0), motion(st, reg, 1.0)

    def two(key: str, e2: object) -> np.ndarray:
        val, choice = d2(reg, delta, e2, memo=None if memo is None else memo[key])  # type: ignore[arg-type]
        new[key] = choice
        return val

    dd = two("dd", delta)
    e1 = sV[:, None, None] * st.nu_u[None] + G[:, None, None] * st.alpha_u[None] + t * st.gamma_u[None] + 0.5 * dd
    du = two("du", unit)
    thirds = [delta, unit_m] + ([unit_h] if with_q2 else [])
    vals, choices = d3_pair(reg, delta, delta, thirds, None if memo is None else memo["d3"] + [None] * with_q2)
    new["d3"] = choices[:2]
    out = {
        "reg": reg, "e1": e1, "alpha": st.alpha_u[None] + du, "beta": st.beta_u[None] + _wsum(st, du),
        "gamma": st.gamma_u[None] + two("dh", unit_h),
        "r4": _wsum(st, vals[0]) / 6.0, "r1": 0.5 * _wsum(st, vals[1]),
        "q2": 0.5 * _wsum(st, vals[2]) if len(vals) > 2 else None,
    }
    return {**out, "memo": new}


def centre_cross(st: SampleStats) -> dict:
    r"""Unit second-order cross terms at the centre, per head (readout sums): the bound is bilinear in
    the sizes of its directions, and :math:`|D^2 m[e_a + e_b, e_c]| \le |D^2 m[e_a, e_c]| + |D^2 m[e_b, e_c]|`,
    so :math:`G`, :math:`s_V` and ``t`` enter as factors (:func:`sample_terms`)."""
    z = np.zeros(1)
    c0 = region(st, z, z, z, 0.0)
    f1, m1, h1 = field(st, c0, 1.0), motion(st, c0, 1.0), head(st, c0, 1.0)
    return {name: _wsum(st, d2(c0, a, b)[0])[0] for name, a, b in
            (("fm", f1, m1), ("fh", f1, h1), ("ff", f1, f1))}


def sample_terms(st: SampleStats, cross: dict, layers: int, T: float, ell: np.ndarray,
                 rq: float) -> tuple[np.ndarray, np.ndarray]:
    r"""Per sample: the term-by-term part of :math:`\bar\rho_V` (``R1 + R2 + R3 + R4``) and of
    :math:`\kappa - s` (``Q1 + Q2``), for each radius in ``ell`` (``(B,)``) and the ``(Q, b)`` radius ``rq``."""
    H = st.pi.shape[0]
    tau = T / layers
    ts = math.sqrt(H) * rq
    B = ell.shape[0]
    D, G = np.zeros(B), np.zeros(B)
    lay, xr4, xr1, xq2 = [], [], [], []
    for li in range(layers):
        sV = li * tau * ell
        f0 = _layer(st, D, G, sV, 0.0, None, with_q2=not rq > 0)
        f1 = _layer(st, D, G, sV, ts, f0["memo"], with_q2=True) if rq > 0 else None
        lay.append((f0, f1))
        # cross terms with the non-linear motion G at the centre (``centre_cross``), per head, t = 0 and t*
        g = G[:, None]
        base = g * sV[:, None] * cross["fm"][None] + 0.5 * g * g * cross["ff"][None] + st.beta_u[None] * g
        xr4.append((base, base + g * ts * cross["fh"][None]))
        xr1.append(g * cross["fm"][None])
        xq2.append(g * cross["fh"][None])
        e1r = _rms_budget(f0["e1"], None if f1 is None else f1["e1"], H)  # (B, N)
        mv = _rms_budget(st.mn_u[None] + f0["e1"], None if f1 is None else st.mn_u[None] + f1["e1"], H)
        D = D + tau * ell * np.minimum(mv.max(axis=-1), st.R_u + D)
        G = G + tau * ell * e1r.max(axis=-1)

    def rb(layer_sum: list[np.ndarray], layer_sum1: list[np.ndarray] | None) -> np.ndarray:
        return _rms_budget(sum(layer_sum), None if layer_sum1 is None else sum(layer_sum1), H)

    pick = [0, 1] if rq > 0 else [0]
    r4 = [[tau * (lay[li][k]["r4"] + xr4[li][k]) for li in range(layers)] for k in pick]
    R4 = rb(r4[0], r4[1] if rq > 0 else None)
    r1 = [[tau * (li * tau) * (lay[li][k]["r1"] + xr1[li]) for li in range(layers)] for k in pick]
    R1 = ell * rb(r1[0], r1[1] if rq > 0 else None)
    bR = [ell * _rms_budget(f0["beta"], None if f1 is None else f1["beta"], H) for f0, f1 in lay]  # ||R A_k||
    ak = [ell * _rms_budget(f0["alpha"], None if f1 is None else f1["alpha"], H).max(axis=-1) for f0, f1 in lay]
    R2, R3, Q1 = np.zeros(B), np.zeros(B), np.zeros(B)
    for li in range(layers):
        f0, f1 = lay[li]
        e1 = _rms_budget(f0["e1"], None if f1 is None else f1["e1"], H).max(axis=-1)
        gl = _rms_budget(st.mn_u[None] + f0["e1"], None if f1 is None else st.mn_u[None] + f1["e1"], H).max(axis=-1)
        gam = (f1 if f1 is not None else f0)["gamma"].max(axis=(1, 2))
        for k in range(li + 1, layers):
            between = sum((np.log1p(tau * ak[k2]) for k2 in range(li + 1, k)), np.zeros(B))
            R2 += tau * tau * bR[k] * e1
            R3 += tau * tau * bR[k] * np.expm1(between) * gl
            Q1 += tau * tau * bR[k] * np.exp(between) * gam
    last = [lay[li][1 if rq > 0 else 0] for li in range(layers)]
    Q2 = sum(tau * (last[li]["q2"] + xq2[li]).max(axis=1) for li in range(layers))
    return up(R1 + R2 + R3 + R4), up(Q1 + Q2)


def layer_sums(layers: int, T: float) -> tuple[float, float]:
    r""":math:`c_1 = \sum_l \tau\,(l\tau)` and :math:`c_2 = \sum_l \tau\,(l\tau)^2`."""
    tau = T / layers
    return (sum(tau * li * tau for li in range(layers)), sum(tau * (li * tau) ** 2 for li in range(layers)))


def region_bound(stats: list[SampleStats], crosses: list[dict], etas: tuple[np.ndarray, np.ndarray, np.ndarray],
                 s_lin: float, layers: int, T: float, ell: np.ndarray, rq: float) -> tuple[np.ndarray, np.ndarray, dict]:
    r""":math:`(\bar\rho_V, \kappa)` on :math:`\Omega(\ell, r_q)` for each ``ell`` (``(B,)``), and the parts.

    Quadratic parts from the centre's norms :math:`\eta` (``etas``): with :math:`c_1, c_2` of
    :func:`layer_sums`,
    :math:`R_4^{(2)} = \frac12(c_2\ell^2\,\mathrm{rms}\,\eta^{VV} + 2c_1\ell r_q\max\eta^{V\psi} + T\sqrt H r_q^2\max\eta^{\psi\psi})`,
    :math:`R_1^{(2)} = \ell(c_2\ell\,\mathrm{rms}\,\eta^{VV} + c_1 r_q\max\eta^{V\psi})`,
    :math:`\kappa^{(2)} = c_1\ell\max\eta^{V\psi} + T\sqrt H r_q\max\eta^{\psi\psi}`.
    """
    H = stats[0].pi.shape[0]
    ell = np.atleast_1d(np.asarray(ell, dtype=np.float64))
    c1, c2 = layer_sums(layers, T)
    eVV, eVP, ePP = etas
    rVV = math.sqrt(float(np.mean(eVV * eVV)))
    mVP, mPP = float(eVP.max()), float(ePP.max())
    r4s = 0.5 * (c2 * ell * ell * rVV + 2.0 * c1 * ell * rq * mVP + T * math.sqrt(H) * rq * rq * mPP)
    r1s = ell * (c2 * ell * rVV + c1 * rq * mVP)
    q2s = c1 * ell * mVP + T * math.sqrt(H) * rq * mPP
    terms = [sample_terms(st, cr, layers, T, ell, rq) for st, cr in zip(stats, crosses, strict=True)]
    cV = np.sqrt(sum(t[0] ** 2 for t in terms))
    cQ = np.sqrt(sum(t[1] ** 2 for t in terms))
    rho = up(r4s + r1s + cV)
    kappa = up(s_lin + q2s + cQ)
    rho = np.where(np.isfinite(rho), rho, np.inf)  # nan (inf - inf far out): no bound
    kappa = np.where(np.isfinite(kappa), kappa, np.inf)
    return rho, kappa, {"quadratic": r4s + r1s, "termwise": cV, "kappa_quadratic": q2s, "kappa_termwise": cQ}
