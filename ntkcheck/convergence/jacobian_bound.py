r"""A certified bound on how far the Jacobian of the readout moves on a ball around FixUp.

Seed 002 Thm. 8.5 needs the kernel :math:`K(\theta) = B(\theta)B(\theta)^\top` to stay coercive on a
ball :math:`D(\theta, \theta_0) \le r` around the initialisation. Everything follows from one function
of the radius,

.. math::

    M_2(r) \ge \sup_{D(\theta,\theta_0)\le r} \|D^2_\theta z(\theta)\|_\rho ,\qquad
    \beta(r) = \int_0^r M_2(t)\,dt \ge \sup_{D(\theta,\theta_0)\le r}\|B(\theta) - B(\theta_0)\| ,

where :math:`B = \sqrt H\, J` is the Jacobian of the outputs in the particle metric
(:math:`\|B\|_2` is the norm of :math:`J` from :math:`(\mathbb R^P, |\cdot|_\rho)`), so that
:math:`\sigma_{\min}(B(\theta)) \ge \sqrt{\lambda_0} - \beta(r)` (Weyl) and
:math:`\|K(\theta) - K(\theta')\| \le 2 M_2(r)(\sqrt\Lambda + \beta(r))\,D(\theta,\theta')`.

**Where it is tight.** At FixUp (``V = 0`` on every head) the tokens do not move and only two
parts of :math:`D^2 z` survive, both computed here from the data and the heads
(``theory/local-convergence.md``, "A certified bound at FixUp"):

* ``V``-against-``(Q, b)`` of one head, :math:`T\,aV_h\,\sum_j w_j C_{hj}(\delta Q_h x_j + \delta b_h)`
  with :math:`C_{hj}` the covariance of the softmax law of query ``j``: block diagonal over heads,
  so its norm is the largest per-head norm :math:`s = T\max_h\|G_h\|_2`;
* ``V``-against-``V`` of all head pairs, through the motion of the tokens:
  :math:`c = T^2\frac{L-1}{L}\,\|\Xi\|_2` with :math:`\Xi` the map
  :math:`\delta V \mapsto (\sum_j w_j D_X m_{hj}[\Delta X(\delta V)])_{h,i}`;

and :math:`\|D^2 z(\theta_0)\|_\rho \le c/2 + \sqrt{c^2/4 + s^2}`. Away from the centre,
every coefficient moves by at most a proved Lipschitz bound times the displacement (budget
:math:`\frac1H\sum_h|\delta\theta_h|^2 \le r^2`: one head moves at most :math:`\sqrt H r`), and the
terms proportional to ``V`` grow from zero (the growth terms of the theory page). The bound is
the smaller of this and the propagated bound of :mod:`ntkcheck.convergence.lipschitz`.

Readout loss, heads shared over depth, a FixUp centre; anything else uses the propagated
bound alone.

References: seed 002 ("A Mean-Field Theory of Transformers") Thm. 8.5, Assumption 7,
Lemma 3.1; ``theory/local-convergence.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _budget
from .._memory import available_memory
from .._records import restore

__all__ = [
    "FixupCentre",
    "fixup_centre",
    "JacobianBound",
    "jacobian_bound",
    "second_derivative_bound",
]

#: unit roundoff of float64
_U = 2.0**-53
#: the centre quantities are evaluated only while H N^2 d stays below this (memory: 8 bytes each)
_MAX_CENTRE_ENTRIES = 1 << 25
#: arcs of the split between the V budget and the (Q, b) budget of the ball
_SPLITS = 6
#: radii at which the integral beta(r) = int_0^r M_2 is sampled (right end points: an upper sum)
_STEPS = 24


# ----------------------------------------------------------------------------- centre quantities


@dataclass(frozen=True)
class FixupCentre:
    r"""What the bound needs from the FixUp centre, computed once.

    Attributes
    ----------
    s, c : float
        Certified :math:`T\max_h\|G_h\|_2` (``V``-``(Q, b)`` part) and
        :math:`T^2\frac{L-1}{L}\|\Xi\|_2` (``V``-``V`` part) of :math:`D^2 z(\theta_0)`.
    first_order : float
        :math:`c/2 + \sqrt{c^2/4 + s^2} \ge \|D^2 z(\theta_0)\|_\rho`.
    radius, diameter : tuple of float
        Per sample, the largest token norm ``R`` and the diameter :math:`\omega` of the token set.
    q_norm, b_norm : (H,) arrays
        :math:`\|Q_h\|_2`, :math:`|b_h|` (inflated for rounding).
    c_D : (H,) array
        Per head, the bound :math:`\kappa_2\|Q_h\| + 1 + \omega|q_h|` on :math:`\|D_X m_{hj}\|` at the
        centre (largest over samples).
    tables : tuple
        Per sample, the softmax weights ``pi (H, N, N)``, the norms ``|y| (H, N, N)`` of the centred
        tokens and ``|q| (H, N)`` of the queries at the centre (for the growth terms).
    feature_norms : tuple of (H, N) arrays
        Per sample, :math:`|m_{hj}|` at the centre (how fast the tokens can move).
    exact_xi : bool
        Whether :math:`\|\Xi\|` came from its Gram matrix (else a product of two norms).
    """

    s: float
    c: float
    first_order: float
    radius: tuple[float, ...]
    diameter: tuple[float, ...]
    q_norm: np.ndarray
    b_norm: np.ndarray
    c_D: np.ndarray
    tables: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    feature_norms: tuple[np.ndarray, ...]
    heads: int
    layers: int
    T: float
    exact_xi: bool


def _softmax_stats(x: np.ndarray, w: np.ndarray, Q: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """Queries ``q (H,N,d)``, weights ``pi (H,N,N)``, means ``m (H,N,d)``, centred ``y (H,N,N,d)``,
    covariances ``C (H,N,d,d)`` of the softmax laws of every head and query token."""
    q = np.einsum("hab,jb->hja", Q, x) + b[:, None, :]
    s = np.einsum("hja,ka->hjk", q, x) + np.log(w)[None, None, :]
    s -= s.max(axis=-1, keepdims=True)
    pi = np.exp(s)
    pi /= pi.sum(axis=-1, keepdims=True)
    m = pi @ x
    y = x[None, None, :, :] - m[:, :, None, :]
    C = np.einsum("hjk,hjka,hjkb->hjab", pi, y, y)
    return q, pi, m, y, C


def _error_margin(xs: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> float:
    r"""Relative error bound of the float64 centre quantities (``theory/local-convergence.md``).

    Scores carry absolute errors at most :math:`\gamma_{d+2}(\|Q\|R + |b| + 1)R`, so the softmax
    weights carry relative errors at most :math:`2\gamma_{d+2}S + \gamma_{N+4}` (``np.exp`` within
    2 ulps), and every mean, covariance and contraction adds :math:`\gamma_{N+d+4}`:
    :math:`\eta = 8 (N + d + 16)\,u\,(1 + S)` covers them with room.
    """
    d = Q.shape[1]
    N = max(x.shape[0] for x in xs)
    R = max(float(np.linalg.norm(x, axis=1).max()) for x in xs)
    S = (float(np.linalg.norm(Q, ord=2, axis=(1, 2)).max()) * R + float(np.linalg.norm(b, axis=1).max()) + 1.0) * R
    return 8.0 * (N + d + 16) * _U * (1.0 + S)


def _spectral_upper(A: np.ndarray, err: float) -> float:
    r"""A proved upper bound on :math:`\|A_\star\|_2` for every :math:`A_\star` with
    :math:`\|A_\star - A\|_2 \le` ``err``.

    :math:`\|A\|_2^2 \le t` once :math:`tI - \mathrm{fl}(AA^\top)` is certified positive by Rump's
    Cholesky criterion (:func:`ntkcheck.ntk.certificate.routes.certify_gram_enclosure`), with the product's
    rounding :math:`\gamma_k\|A\|_F^2` in the enclosure radius; falls back on :math:`\|A\|_F`
    when no shift is certified.
    """
    from ..ntk.certificate.routes import certify_gram_enclosure

    A = np.asarray(A, dtype=np.float64)
    if A.size == 0 or not np.any(A):
        return err
    if A.shape[0] > A.shape[1]:
        A = A.T
    k = A.shape[1]
    fro = float(np.linalg.norm(A)) * (1.0 + (k + 2) * _U)
    G = A @ A.T
    G = 0.5 * (G + G.T)
    lam = float(np.linalg.eigvalsh(G)[-1])
    gamma = (k + 2) * _U / (1.0 - (k + 2) * _U)
    radius = gamma * fro * fro + 4.0 * _U * abs(lam)
    for f in (1e-7, 1e-4, 1e-2):
        t = lam * (1.0 + f) + 4.0 * radius + 1e-300
        cert = certify_gram_enclosure(t * np.eye(G.shape[0]) - G, radius + 2.0 * _U * t)
        if cert.positive:
            return min(math.sqrt(t) * (1.0 + 4.0 * _U), fro) + err
    return fro + err


@dataclass(frozen=True)
class _Blocks:
    """Centre blocks of one sample, with entrywise bounds on their absolute values (``*_abs``)."""

    G: np.ndarray  # (H, d, d^2 + d): (dQ_h, db_h) -> sum_j w_j C_hj (dQ_h x_j + db_h)
    G_abs: np.ndarray
    E: np.ndarray  # (H, d, N, d): Y -> sum_j w_j D_X m_hj[Y]
    E_abs: np.ndarray
    m: np.ndarray  # (H, N, d) features
    cD: np.ndarray  # (H,) bound on ||D_X m_hj|| over j
    table: tuple[np.ndarray, np.ndarray, np.ndarray]  # pi, |y|, |q|


def _blocks(x: np.ndarray, w: np.ndarray, Q: np.ndarray, b: np.ndarray, omega: float) -> _Blocks:
    H, d = Q.shape[0], Q.shape[1]
    q, pi, m, y, C = _softmax_stats(x, w, Q, b)
    ya = np.abs(y)
    Ca = np.einsum("hjk,hjka,hjkb->hjab", pi, ya, ya)
    G = np.concatenate([np.einsum("j,hjca,je->hcae", w, C, x).reshape(H, d, d * d), np.einsum("j,hjca->hca", w, C)], 2)
    _budget.checkpoint("the centre's blocks")  # each einsum here takes seconds at d = 384
    Ga = np.concatenate([np.einsum("j,hjca,je->hcae", w, Ca, np.abs(x)).reshape(H, d, d * d),
                         np.einsum("j,hjca->hca", w, Ca)], 2)
    _budget.checkpoint("the centre's blocks")
    # E_h[Y] = sum_j w_j (C_hj Q_h Y_j + sum_k pi_hjk (Y_k + y_hjk <q_hj, Y_k>))
    eye = np.einsum("j,hjk->hk", w, pi)[:, None, :, None] * np.eye(d)[None, :, None, :]
    E = np.einsum("k,hkab,hbc->hakc", w, C, Q) + eye + np.einsum("j,hjk,hjka,hjc->hakc", w, pi, y, q)
    Ea = (np.einsum("k,hkab,hbc->hakc", w, Ca, np.abs(Q)) + eye
          + np.einsum("j,hjk,hjka,hjc->hakc", w, pi, ya, np.abs(q)))
    Qn = np.linalg.norm(Q, ord=2, axis=(1, 2))
    cD = omega * omega / 4.0 * Qn + 1.0 + omega * np.linalg.norm(q, axis=-1).max(axis=1)
    yn = np.linalg.norm(y, axis=-1) * (1.0 + 8.0 * _U * (d + 2))
    return _Blocks(G, Ga, E, Ea, m, cD, (pi, yn, np.linalg.norm(q, axis=-1) * (1.0 + 8.0 * _U * (d + 2))))


def _diameter(x: np.ndarray) -> float:
    """Largest distance between two tokens (0 for one token), inflated for rounding."""
    if x.shape[0] < 2:
        return 0.0
    diff = x[:, None, :] - x[None, :, :]
    return float(np.sqrt(np.max(np.sum(diff * diff, axis=-1)))) * (1.0 + 4.0 * _U * (x.shape[1] + 2))


def _xi_norm(blocks: list[_Blocks], rel: float) -> tuple[float, bool]:
    r""":math:`\|\Xi\|_2`, from :math:`\Xi\Xi^\top = \frac1H E(K\otimes I_d)E^\top` with ``K`` the feature
    Gram of the tokens (:math:`\frac1H\sum_g\langle m_{gik}, m_{gjk'}\rangle`), or the product bound
    :math:`\|E\|\,\|\Delta X\|` when that Gram would be large."""
    H, d = blocks[0].E.shape[0], blocks[0].E.shape[1]
    n = len(blocks)
    if H * n * d <= 2048:
        rows, rows_abs = [], []
        for bi in blocks:
            cols, cols_abs = [], []
            for bj in blocks:
                K = np.einsum("gka,gla->kl", bi.m, bj.m) / H
                Ka = np.einsum("gka,gla->kl", np.abs(bi.m), np.abs(bj.m)) / H
                cols.append(np.einsum("hckb,kl->hclb", bi.E, K).reshape(H * d, -1) @ bj.E.reshape(H * d, -1).T / H)
                cols_abs.append(np.einsum("hckb,kl->hclb", bi.E_abs, Ka).reshape(H * d, -1)
                                @ bj.E_abs.reshape(H * d, -1).T / H)
            rows.append(np.concatenate(cols, axis=1))
            rows_abs.append(np.concatenate(cols_abs, axis=1))
        G, Ga = np.concatenate(rows, axis=0), np.concatenate(rows_abs, axis=0)
        # entries: relative errors rel (E twice, K once) plus the products' rounding
        k = G.shape[0] + max(b.m.shape[1] for b in blocks) * d
        err = (4.0 * rel + (k + 4) * _U) * float(np.linalg.norm(Ga)) * (1.0 + 1e-9)
        return math.sqrt(_spectral_upper(G, err)), True
    e2 = [max(_spectral_upper(b.E[h].reshape(d, -1), rel * float(np.linalg.norm(b.E_abs[h]))) ** 2 for b in blocks)
          for h in range(H)]
    mall = np.concatenate([b.m for b in blocks], axis=1)  # (H, M, d)
    m2 = [_spectral_upper(mall[h], rel * float(np.linalg.norm(mall[h]))) ** 2 for h in range(H)]
    return math.sqrt(float(np.mean(e2)) * float(np.mean(m2))) * (1.0 + 1e-12), False


def _centre_bytes(H: int, n: int, d: int) -> float:
    """Peak memory of :func:`fixup_centre`'s blocks: ``G`` and its bound ``|G|``, ``H x d x (d^2 + d)`` per
    sample, held twice while they are stacked (at d = 384, one head, two samples: 3.6 GB)."""
    return 4.0 * 8.0 * H * n * d * (d * d + d)


def fixup_centre(samples: Any, params: Any, *, layers: int, T: float) -> FixupCentre | None:
    r"""The centre quantities of :func:`jacobian_bound` at FixUp params (``None`` when not FixUp,
    per-layer, too large to tabulate, or when their blocks would need more than half the available
    memory: the certificate then uses the propagated bound alone)."""
    from ..cgf import as_laws

    if params.per_layer or np.any(params.V):
        return None
    laws = as_laws(samples)
    xs = [np.asarray(law.atoms, dtype=np.float64) for law in laws]
    ws = [np.asarray(law.masses, dtype=np.float64) for law in laws]
    Q, b = params.Q, params.b
    H, d = Q.shape[0], Q.shape[1]
    too_many = H * max(x.shape[0] for x in xs) ** 2 * d > _MAX_CENTRE_ENTRIES
    if too_many or _centre_bytes(H, len(xs), d) > available_memory() / 2:
        return None
    rel = _error_margin(xs, Q, b)
    if rel > 1e-6:
        return None
    omegas = [_diameter(x) for x in xs]
    blocks = []
    for x, w, om in zip(xs, ws, omegas, strict=True):
        _budget.checkpoint("the centre's blocks")
        blocks.append(_blocks(x, w, Q, b, om))
    _budget.checkpoint("the centre's blocks")
    G_all = np.concatenate([bl.G for bl in blocks], axis=1)  # (H, n d, d^2 + d)
    G_abs = np.concatenate([bl.G_abs for bl in blocks], axis=1)
    _budget.checkpoint("the centre's spectral bound")
    s = T * max(_spectral_upper(G_all[h], 2.0 * rel * float(np.linalg.norm(G_abs[h]))) for h in range(H))
    xi, exact = _xi_norm(blocks, rel)
    c = T * T * (layers - 1) / layers * xi
    s, c = s * (1.0 + 1e-12), c * (1.0 + 1e-12)
    first = (0.5 * c + math.sqrt(0.25 * c * c + s * s)) * (1.0 + 4.0 * _U)
    infl = 1.0 + 16.0 * _U
    cD = np.max(np.stack([bl.cD for bl in blocks]), axis=0) * (1.0 + 1e-12)
    return FixupCentre(
        s, c, first, tuple(float(np.linalg.norm(x, axis=1).max()) * infl for x in xs), tuple(omegas),
        np.linalg.norm(Q, ord=2, axis=(1, 2)) * infl, np.linalg.norm(b, axis=1) * infl, cD,
        tuple(bl.table for bl in blocks), tuple(np.linalg.norm(bl.m, axis=-1) * (1.0 + 1e-12) for bl in blocks), H, int(layers), float(T),
        exact,
    )


# ----------------------------------------------------------------------------- growth over the ball


def _ball_moments(table: tuple[np.ndarray, np.ndarray, np.ndarray], Qd: np.ndarray, dq: np.ndarray, Dx: float,
                  Rp: float) -> dict[str, np.ndarray]:
    r"""Per head (largest over query tokens): softmax moments and derivative bounds valid at every
    point of the ball, from the centre's weights.

    A query moved by at most ``dq`` and tokens moved by at most ``Dx`` change every score by at most
    :math:`\delta s = dq\,R' + |q|\,Dx`, so the weights stay within a factor :math:`e^{\pm 2\delta s}`
    of the centre's; the mean moves by at most :math:`Dx + (e^{2\delta s} - 1)M_1`, hence
    :math:`M_p' \le e^{2\delta s}\sum_k\pi_k(|y_k| + \varepsilon_y)^p`.
    """
    pi, yn, qn = table
    ds = dq[:, None] * Rp + qn * Dx  # (H, N)
    infl = np.exp(np.minimum(2.0 * ds, 600.0)) * (1.0 + 1e-12)
    M1c = np.einsum("hjk,hjk->hj", pi, yn)
    eps = 2.0 * Dx + (infl - 1.0) * M1c
    yb = yn + eps[..., None]
    M1 = infl * np.einsum("hjk,hjk->hj", pi, yb)
    M2 = infl * np.einsum("hjk,hjk->hj", pi, yb * yb)
    M3 = infl * np.einsum("hjk,hjk->hj", pi, yb * yb * yb)
    qb = qn + dq[:, None]
    Qj = Qd[:, None]
    cD = M2 * Qj + 1.0 + qb * M1  # ||D_X m||: query part C Q, context part
    LqX = 2.0 * qb * M2 + 2.0 * M1  # context derivative of the covariance
    mXX = 4.0 * qb + 3.0 * qb * qb * M1  # second context derivative of m
    LXX = M3 * Qj * Qj + 2.0 * Qj * LqX + mXX  # second token derivative, query through the token included
    dm = Dx + (infl - 1.0) * M1c  # how far a head's output moves
    out = {"M1": M1, "M2": M2, "M3": M3, "cD": cD, "LqX": LqX, "LXX": LXX, "dm": dm}
    return {k: v.max(axis=1) for k, v in out.items()}


def _growth(ctr: FixupCentre, i: int, rV: float, rq: float) -> float:
    r"""Sample ``i``: a bound on :math:`|D^2 z_i(\theta) - D^2 z_i(\theta_0)|`, unit directions, for every
    :math:`\theta` whose ``V`` part has :math:`|V|_\rho \le` ``rV`` and whose ``(Q, b)`` displacement has
    :math:`\rho`-norm at most ``rq``.

    The six terms of ``theory/local-convergence.md`` ("Growth over the ball"): the propagation
    through later layers (``t0``), the covariance of the ``V``-``(Q, b)`` part (``t1``), the
    token-motion part (``t2``), the ``V``-proportional third cumulant (``t3``), derivative
    (``t4``) and second token derivative (``t5``); every softmax moment from
    :func:`_ball_moments`.
    """
    H, L, T = ctr.heads, ctr.layers, ctr.T
    R = ctr.radius[i]
    Rp = R * math.exp(T * rV)
    Dx = Rp - R  # token motion, every layer (seed 002 Lemma 3.2's argument)
    # sharper: each layer moves token j by tau (1/H) sum_h |V_h| |m_hj| <= tau r_V rms_h |m_hj|, and a head's
    # output moves by at most dm over the ball (bounded with the cruder Dx, which only enlarges it)
    crude = _ball_moments(ctr.tables[i], ctr.q_norm + math.sqrt(H) * rq,
                          math.sqrt(1.0 + Rp * Rp) * math.sqrt(H) * rq + (ctr.q_norm + math.sqrt(H) * rq) * Dx, Dx, Rp)
    mn = ctr.feature_norms[i]  # (H, N): |m_hj| at the centre
    m_ball = np.minimum(mn + crude["dm"][:, None], Rp)
    Dx = min(Dx, T * rV * float(np.sqrt(np.mean(m_ball**2, axis=0)).max()) * (1.0 + 1e-12)) if rV > 0 else 0.0
    rp = math.sqrt(1.0 + Rp * Rp)
    dV = math.sqrt(H) * rV  # one head can carry the whole V budget ...
    dmax = math.sqrt(H) * rq  # ... or the whole (Q, b) budget
    Qn = ctr.q_norm
    Qd = Qn + dmax
    far = _ball_moments(ctr.tables[i], Qd, rp * dmax + Qd * Dx, Dx, Rp)  # a head moved by sqrt(H) rq
    near = _ball_moments(ctr.tables[i], Qn, Qn * Dx, Dx, Rp)  # a head that did not move (tokens did)
    ctr0 = _ball_moments(ctr.tables[i], Qn, np.zeros_like(Qn), 0.0, R)  # the centre

    def rms(key: str) -> float:
        # rms over heads of a quantity convex and increasing in the head's displacement t_h, with
        # (1/H) sum t_h^2 <= rq^2: f(t) <= f(0) + t (f(t*) - f(0)) / t*, t* = sqrt(H) rq (Minkowski)
        if dmax == 0:
            return _rms(near[key])
        return _rms(near[key]) + float(np.max(far[key] - near[key])) / math.sqrt(H)

    M2m, M3m = float(far["M2"].max()), float(far["M3"].max())
    A_rms = rms("cD")
    alpha = rV * A_rms
    grow = math.exp(min(T * alpha, 600.0))
    b1 = math.sqrt(Rp * Rp + (rV * M2m * rp) ** 2)
    T2L = T * T * (L - 1) / (2.0 * L)
    T3L = T**3 * (L - 1) * (2 * L - 1) / (6.0 * L * L)
    s_sum = T2L * grow * b1  # sum_l tau s_l
    k4 = (far["M3"] * Qd + far["LqX"]) * rp + far["M2"]
    k4m = float(k4.max())
    dq = rp * dmax + Qd * Dx
    phi = np.minimum(far["M3"] * dq + far["LqX"] * Dx, 2.0 * far["M2"]) * rp + far["M2"] * Dx
    t1 = 2.0 * T * float(phi.max())
    dD = min(k4m * rq + rms("LXX") * Dx, 2.0 * float(far["cD"].max()))
    e_S = (grow - 1.0) * b1 + rms("dm") + rV * M2m * rp
    t2 = 2.0 * (dD * s_sum + _rms(ctr0["cD"]) * T2L * e_S)
    t3 = T * dV * M3m * rp * rp
    t4 = 2.0 * s_sum * rV * k4m
    t5 = rV * rms("LXX") * grow * grow * b1 * b1 * T3L
    # the later layers' propagation, ||P^l - I|| <= e^{T alpha} - 1, applied to the layer sources: the
    # centre's (V-(Q, b) part and V-V part with S^l = l tau mu_0, |mu_0| <= R) and their changes t1..t5
    src0 = T * float(ctr0["M2"].max()) * math.sqrt(1.0 + R * R) + 2.0 * _rms(ctr0["cD"]) * R * T2L
    t0 = (grow - 1.0) * (src0 + t1 + t2 + t3 + t4 + t5)
    return (t0 + t1 + t2 + t3 + t4 + t5) * (1.0 + 1e-12)


def _rms(v: np.ndarray) -> float:
    return math.sqrt(float(np.mean(np.asarray(v) ** 2)))


@dataclass(frozen=True)
class JacobianBound:
    r"""Certified bounds on a ball :math:`D(\theta, \theta_0) \le r`.

    Attributes
    ----------
    radius : float
    second_derivative : float
        :math:`M_2(r) \ge \sup\|D^2_\theta z\|_\rho` on the ball: the smaller of
        ``first_order + growth`` (FixUp structure) and ``propagated``.
    deviation : float
        :math:`\beta(r) \ge \sup\|B(\theta) - B(\theta_0)\|_2` (an upper sum of :math:`\int_0^r M_2`).
    L_K : float
        :math:`2 M_2(r)(\sqrt\Lambda + \beta(r))`: :math:`\|K(\theta) - K(\theta')\| \le L_K D(\theta,\theta')`
        on the ball.
    first_order, growth, propagated : float
        :math:`\|D^2 z(\theta_0)\|_\rho` bound, the growth term at ``r`` (``nan`` without the FixUp
        structure), the propagated bound of :func:`ntkcheck.convergence.lipschitz.lipschitz_bound`.
    lambda_max_0 : float
        The :math:`\Lambda` used.
    """

    radius: float
    second_derivative: float
    deviation: float
    L_K: float
    first_order: float
    growth: float
    propagated: float
    lambda_max_0: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JacobianBound:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def second_derivative_bound(ctr: FixupCentre | None, prop: Any, r: float) -> tuple[float, float, float]:
    r"""``(M_2(r), growth, propagated)``: :math:`M_2(r) \ge \sup_{D(\theta,\theta_0)\le r}\|D^2_\theta z\|_\rho`,
    the smaller of ``first_order + growth`` (``ctr`` given) and ``prop(r)``, the propagated bound."""
    p = prop(r)
    if ctr is None:
        return p, float("nan"), p
    # |V|_rho^2 + |(Q, b) displacement|_rho^2 <= r^2: on the arc phi in [phi_j, phi_j+1] the growth (increasing
    # in both budgets) is at most its value at (r cos phi_j, r sin phi_j+1)
    phis = np.linspace(0.0, math.pi / 2.0, _SPLITS + 1)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            g = max(float(np.linalg.norm([_growth(ctr, i, r * math.cos(phis[j]), r * math.sin(phis[j + 1]))
                                          for i in range(len(ctr.radius))])) for j in range(_SPLITS))
    except OverflowError:  # far outside where the structured bound is useful
        g = math.inf
    if not g == g:  # nan from inf - inf: no bound
        g = math.inf
    return min(ctr.first_order + g, p), g, p


def jacobian_bound(ctr: FixupCentre | None, propagated: Any, radius: float, lambda_max_0: float) -> JacobianBound:
    r"""The bounds of :class:`JacobianBound` at ``radius``.

    ``ctr`` from :func:`fixup_centre` (``None``: the propagated bound alone); ``propagated(r)``
    returns the propagated second-derivative bound at radius ``r``.
    :math:`\beta(r) \le \sum_k M_2(t_{k+1})(t_{k+1} - t_k)` on a uniform grid (``M_2`` increases).
    """
    M2, g, p = second_derivative_bound(ctr, propagated, radius)
    ts = np.linspace(0.0, radius, _STEPS + 1)[1:]
    beta = sum(second_derivative_bound(ctr, propagated, float(t))[0] for t in ts) * (radius / _STEPS) if radius > 0 else 0.0
    beta = min(beta, M2 * radius) * (1.0 + 1e-12)
    LK = 2.0 * M2 * (math.sqrt(lambda_max_0) + beta) * (1.0 + 1e-12)
    first = ctr.first_order if ctr is not None else float("nan")
    return JacobianBound(float(radius), M2, beta, LK, first, g, p, float(lambda_max_0))
