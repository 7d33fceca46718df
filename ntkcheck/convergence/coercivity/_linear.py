r"""The first-order change of the NTK at FixUp, seen through its eigenspaces.

Private to :mod:`ntkcheck.convergence.coercivity` (``theory/local-convergence.md``, "The linear part").
With :math:`L(\delta) = D B_V(\theta_0)[\delta]` the first-order change of the ``V``-Jacobian,
:math:`(B_0 + L)(B_0 + L)^* \succeq K_0 + E(\delta)`, :math:`E(\delta) = L(\delta) B_0^* + B_0 L(\delta)^*`, so
:math:`\sigma_{\min}(B_0 + L(\delta))^2 \ge \lambda_{\min}(K_0 + E(\delta))`. Here

.. math::

    E(\delta)_{oo'} = \Lambda_{o o'}(\delta) + \Lambda_{o' o}(\delta),\qquad
    \Lambda_{o o'}(\delta) = D^2 z(\theta_0)[\delta, a^{(o)}]_{o'},\quad a^{(o)} = B_0^* e_o,

a linear functional of :math:`\delta` for each pair of outputs, assembled from the centre's
statistics (``V``-``V`` part through the token motion, ``V``-``(Q, b)`` part through the
covariances). :math:`K_0 = T^2 G_r \otimes I_d`: in the eigenbasis :math:`u_a \otimes I_d` of ``G_r``
the blocks :math:`\tilde E_{ab}(\delta)` are ``d x d``, and for :math:`|\delta_V|_\rho \le r_V`,
:math:`|\delta_\psi|_\rho \le r_q`,

.. math::

    \lambda_{\min}(K_0 + E) \ge \lambda_{\min}(M)/\lambda_{\max}(S),\quad M_{aa} = \tilde G_{aa} - e_{aa},\;
    M_{ab} = -|\tilde G_{ab}| - e_{ab},\quad e_{ab} = r_V e^V_{ab} + r_q e^\psi_{ab},

with :math:`\tilde G = U^\top (T^2 G_r) U` and :math:`S = U^\top U` enclosed in ball arithmetic (``U``
the float eigenvectors, exact rationals) and :math:`e^V_{ab} \ge \sup_{|\delta_V|_\rho\le1}\|\tilde E_{ab}\|_2`
from a flattening. The first-order decrease of the smallest eigenvalue is what enters, not
:math:`2\sigma_0\|L\|`: about three times smaller on the README example.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..._precision import flint_prec
from ...ntk.certificate import rounding as rnd
from ._stats import SampleStats, err_factor, spec_up, up

#: the tensor (n d)^2 x (parameters) is formed while it has at most this many entries
MAX_ENTRIES = 1 << 23


@dataclass(frozen=True)
class LinearBlocks:
    """Certified data of the block bound: diagonal lower bounds ``gd`` and off-diagonal magnitudes
    ``go`` of :math:`\\tilde G`, :math:`\\lambda_{\\max}(S)` upper bound, and ``eV``, ``eP`` (``n x n``)."""

    gd: np.ndarray
    go: np.ndarray
    smax: float
    eV: np.ndarray
    eP: np.ndarray

    def lam_low(self, rV: np.ndarray, rq: float) -> np.ndarray:
        r"""Lower bounds of :math:`\lambda_{\min}(K_0 + E(\delta))` over the region, for each ``rV`` (``(B,)``)."""
        rV = np.atleast_1d(np.asarray(rV, dtype=np.float64))
        n = self.gd.shape[0]
        M = -(self.go[None] + rV[:, None, None] * self.eV[None] + rq * self.eP[None]) * (1.0 + 1e-12)
        M[:, np.arange(n), np.arange(n)] = self.gd[None] - (rV[:, None] * np.diag(self.eV)[None]
                                                            + rq * np.diag(self.eP)[None]) * (1.0 + 1e-12)
        return np.array([_lam_min_lower(Mb) for Mb in M]) / self.smax


def _lam_min_lower(M: np.ndarray) -> float:
    """A proved lower bound of the smallest eigenvalue of the symmetric float matrix ``M`` (exact
    rationals): a float64 Cholesky of ``M - tI`` completing with Rump's allowance to spare."""
    n = M.shape[0]
    lam = float(np.linalg.eigvalsh(M)[0])
    scale = float(np.max(np.abs(M))) + 1e-300
    for gap in (1e-9, 1e-6, 1e-3, 1e-1, 0.5):
        t = lam - gap * abs(lam) - 1e-12 * scale
        A = M - t * np.eye(n)
        s = rnd.rump_allowance(np.diag(A)) + rnd.U * float(np.max(np.abs(np.diag(A)))) + 2.0 * rnd.gamma(2) * scale
        try:
            np.linalg.cholesky(A - s * np.eye(n))
        except np.linalg.LinAlgError:
            continue
        return t
    return -math.inf


def _tensor(stats: list[SampleStats], T: float, layers: int, absolute: bool) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\Lambda` as ``(n d, n d, P_V)`` and ``(n d, n d, P_\psi)`` in :math:`\varphi`-coordinates (or its
    absolute companion)."""
    n = len(stats)
    H, _, d = stats[0].m.shape
    T2L = T * T * (layers - 1) / (2.0 * layers)
    f = np.abs if absolute else (lambda a: a)
    mbar = np.stack([np.einsum("j,hja->ha", st.w, f(st.m)) for st in stats])  # (n, H, d)
    LV = np.zeros((n, d, n, d, H, d, d))
    LP = np.zeros((n, d, n, d, H, d, d + 1))
    for i2, st in enumerate(stats):
        JR = np.einsum("j,hjkab->hkab", st.w, f(st.J))  # readout Jacobian of sample i2, (H, N, d, d)
        m2 = f(st.m)  # (H, N, d) features of the tokens of sample i2
        # term 1: u_{i,i2,k} = sum_h JR_{h i2 k}^T mbar_ih; Gamma1_g = sum_k u m_gk^T, times delta_cc' T2L T / H^2
        u = np.einsum("hkab,iha->ikb", JR, mbar)  # (n, N, d)
        G1 = np.einsum("ikb,gke->igbe", u, m2) * (T2L * T / (H * H))  # (n, H, d, d)
        LV[:, np.arange(d), i2, np.arange(d)] += G1[:, None]
        # term 2: kappa_{i,k} = (1/H) sum_g <mbar_ig, m_gk>; v_{h,i,c} = sum_k JR_hk e_c kappa_ik
        kap = np.einsum("iga,gka->ik", mbar, m2) / H
        v = np.einsum("hkac,ik->hica", JR, kap)  # (H, n, c, a): JR e_c summed with kappa
        for c in range(d):
            for cp in range(d):
                LV[:, c, i2, cp, :, cp, :] += (T2L * T / H) * np.swapaxes(v[:, :, c, :], 0, 1)
        # psi part: T^2 / H * delta_cc' sum_j w_j (C_hj mbar_ih) xt_j^T
        xt = np.concatenate([f(st.x), np.ones((st.x.shape[0], 1))], axis=1)
        Cm = np.einsum("j,hjab,ihb,je->ihae", st.w, f(st.C), mbar, xt) * (T * T / H)
        LP[:, np.arange(d), i2, np.arange(d)] += Cm[:, None]
    sq = math.sqrt(H)  # theta -> phi coordinates
    return (LV.reshape(n * d, n * d, H * d * d) * sq, LP.reshape(n * d, n * d, H * d * (d + 1)) * sq)


def linear_blocks(stats: list[SampleStats], k_ball: object, T: float, layers: int) -> LinearBlocks | None:
    r"""The certified block data (module docstring), or ``None`` when the tensor would be large.

    ``k_ball`` is :math:`T^2 G_r` as an Arb ball matrix (:func:`ntkcheck.convergence.spectrum_bound._ball_kernel`).
    """
    from flint import arb, arb_mat, fmpq

    n = len(stats)
    H, _, d = stats[0].m.shape
    if (n * d) ** 2 * H * d * (2 * d + 1) > MAX_ENTRIES:
        return None
    LV, LP = _tensor(stats, T, layers, False)
    LVa, LPa = _tensor(stats, T, layers, True)
    kmid = np.array([[float(k_ball[i, j].mid()) for j in range(n)] for i in range(n)])  # type: ignore[index]
    U = np.linalg.eigh(0.5 * (kmid + kmid.T))[1]
    with flint_prec(128):
        Ub = arb_mat([[arb(fmpq(*float(U[i, j]).as_integer_ratio())) for j in range(n)] for i in range(n)])
        Gt = Ub.transpose() * k_ball * Ub  # type: ignore[operator]
        S = Ub.transpose() * Ub
        gd = np.array([float((Gt[a, a] - Gt[a, a].rad()).mid()) for a in range(n)]) - 1e-300
        go = np.array([[0.0 if a == b else float(abs(Gt[a, b]).upper()) for b in range(n)] for a in range(n)])
        sdev = sum(float(abs(S[a, b] - (1 if a == b else 0)).upper()) ** 2 for a in range(n) for b in range(n))
    smax = 1.0 + math.sqrt(sdev) * (1.0 + 1e-12)
    eta = stats[0].eta
    ef = err_factor(eta, 8)
    Ue = np.kron(U, np.eye(d))  # (n d, n d), columns u_a (x) e_c
    eV, eP = np.zeros((n, n)), np.zeros((n, n))
    for L, La, out in ((LV, LVa, eV), (LP, LPa, eP)):
        E = L + np.swapaxes(L, 0, 1)
        Ea = La + np.swapaxes(La, 0, 1)
        Et = np.einsum("op,oqx,qr->prx", Ue, E, Ue)  # (n d, n d, P)
        Eta = np.einsum("op,oqx,qr->prx", np.abs(Ue), Ea, np.abs(Ue))
        err = (ef + rnd.gamma(2 * n * d + 4)) * Eta
        for a in range(n):
            for b in range(n):
                blk = Et[a * d:(a + 1) * d, b * d:(b + 1) * d].reshape(d * d, -1)
                e = float(np.sqrt(np.sum(err[a * d:(a + 1) * d, b * d:(b + 1) * d] ** 2)))
                out[a, b] = float(spec_up(blk, e))
    return LinearBlocks(gd=gd, go=up(go), smax=smax, eV=up(eV), eP=up(eP))
