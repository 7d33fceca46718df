r"""Centre statistics of the coercivity bound: every head's softmax laws at FixUp, as certified bounds.

Private to :mod:`ntkcheck.convergence.coercivity`. For each sample (distinct atoms :math:`x_k` with
masses :math:`w_k`) and head :math:`h` (query :math:`q_{hj} = Q_h x_j + b_h` of token ``j``):
weights :math:`\pi_{hjk}`, features :math:`m_{hj} = \sum_k \pi_{hjk} x_k`, centred tokens
:math:`y_{hjk} = x_k - m_{hj}`, covariances :math:`C_{hj}`, computed in float64, and from them
upper bounds of the exact quantities the bound uses (``theory/local-convergence.md``, "Centre
statistics"):

* norms :math:`|x_k|`, :math:`\rho_k = (1 + |x_k|^2)^{1/2}`, :math:`|q_{hj}|`, :math:`\|Q_h\|_2`,
  :math:`|m_{hj}|`, :math:`\mu_k = (\frac1H\sum_h |m_{hk}|^2)^{1/2}` (a unit ``V`` moves token ``k``
  by at most :math:`\mu_k`), weights and :math:`|y_{hjk}|`;
* the first-order score sensitivity :math:`\sigma_{hjk}`: the dual norm of
  :math:`V \mapsto \langle Q_h M[V]_j, y_{hjk}\rangle + \langle q_{hj}, M[V]_k - \sum_l \pi_{hjl} M[V]_l\rangle`,
  :math:`M[V]_k = \frac1H \sum_g V_g m_{gk}` the token motion of a layer (per unit :math:`|V|_\rho`),
  and the centred motion :math:`\mu^c_{hjk} \ge |M[V]_k - \sum_l \pi_{hjl} M[V]_l|`;
* first-order operator norms: :math:`\alpha_{hj} \ge \|D_X m_{hj}\|` from max-norm token fields,
  its readout :math:`\beta_h \ge \|\sum_j w_j D_X m_{hj}\|`, :math:`\gamma_{hj} = \|C_{hj}\|\rho_j \ge
  \|\partial_\psi m_{hj}\|`, and :math:`\nu_{hj} \ge \sup_{|V|_\rho \le 1} |D_X m_{hj}[M[V]]|`.

**Rounding.** Every float statistic is within :math:`\eta\,|\cdot|_{abs}` of the exact one
(:func:`ntkcheck.convergence.jacobian_bound._error_margin`; :math:`|\cdot|_{abs}` the same expression
with every factor replaced by an upper bound of its absolute value, computed alongside), a
product of ``k`` such factors within :math:`(1+\eta)^k - 1` of its companion, and a spectral norm is
proved by Rump's criterion (:func:`spec_up`, :func:`ntkcheck.convergence.jacobian_bound._spectral_upper`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...ntk.certificate import rounding as rnd
from ..jacobian_bound import _softmax_stats, _spectral_upper

#: relative inflation of bounds evaluated in float64 from upper bounds (sums, products, exp and
#: sqrt of nonnegative numbers, chains far shorter than 10^6 operations, exp within 2^-44)
UP = 1.0 + 1e-9


def up(v: np.ndarray | float) -> np.ndarray | float:
    """``v`` inflated by :data:`UP` (a bound computed from upper bounds in float64)."""
    return v * UP


def err_factor(eta: float, k: int) -> float:
    """:math:`(1 + \\eta)^k (1 + \\gamma_{64}) - 1`: the relative error of a sum of products of ``k`` statistics."""
    return (1.0 + eta) ** k * (1.0 + rnd.gamma(64)) - 1.0


def spec_up(A: np.ndarray, err: np.ndarray | float = 0.0) -> np.ndarray:
    r"""Upper bounds of :math:`\|A_\star\|_2` for a stack of small matrices ``A (..., a, b)`` and every
    :math:`A_\star` with :math:`\|A_\star - A\|_F \le` ``err``.

    :math:`\|A\|_2^2 \le t` when :math:`tI - A^\top A` is positive definite; with
    :math:`\hat G = \mathrm{fl}(A^\top A)` (error at most :math:`\gamma_a |A|^\top|A|` entrywise) this is proved
    by a float64 Cholesky of :math:`tI - \hat G - sI` that runs to completion, ``s`` the product's
    rounding plus Rump's allowance (:func:`ntkcheck.ntk.gram_matrix.cholesky.rump_allowance`). ``t`` is the
    computed largest eigenvalue widened by :math:`10^{-8}`; a stack entry whose Cholesky fails
    falls back on the Frobenius norm.
    """
    A = np.asarray(A, dtype=np.float64)
    if A.shape[-2] < A.shape[-1]:
        A = np.swapaxes(A, -1, -2)
    n = A.shape[-1]
    fro = np.sqrt(np.sum(A * A, axis=(-2, -1))) * (1.0 + rnd.gamma(A.shape[-1] * A.shape[-2] + 4))
    if A.size == 0:
        return np.asarray(err, dtype=np.float64) + 0.0 * fro
    G = np.swapaxes(A, -1, -2) @ A
    G = 0.5 * (G + np.swapaxes(G, -1, -2))
    Ga = np.swapaxes(np.abs(A), -1, -2) @ np.abs(A)
    rad = rnd.gamma(A.shape[-2] + 2) * np.sqrt(np.sum(Ga * Ga, axis=(-2, -1)))
    lam = np.linalg.eigvalsh(G)[..., -1]
    t = np.maximum(lam, 0.0) * (1.0 + 1e-8) + 4.0 * rad + 1e-300
    M = t[..., None, None] * np.eye(n) - G
    diag = np.diagonal(M, axis1=-2, axis2=-1)
    g = rnd.gamma(n + 1)
    allow = (g / (1.0 - g) * np.sum(diag, axis=-1) * (1.0 + rnd.gamma(n)) + rnd.U * np.max(diag, axis=-1)) * 1.0001
    shift = rad + allow + 1e-300
    Ms = (M - shift[..., None, None] * np.eye(n)).reshape(-1, n, n)
    try:  # one batched factorisation; entry by entry only when some entry fails
        np.linalg.cholesky(Ms)
        ok = np.ones(t.shape, dtype=bool)
    except np.linalg.LinAlgError:
        flat_ok = np.zeros(Ms.shape[0], dtype=bool)
        for i in range(Ms.shape[0]):
            try:
                np.linalg.cholesky(Ms[i])
                flat_ok[i] = True
            except np.linalg.LinAlgError:
                flat_ok[i] = False
        ok = flat_ok.reshape(t.shape)
    out = np.where(ok, np.sqrt(t) * (1.0 + 4.0 * rnd.U), fro)
    return np.minimum(out, fro) + np.asarray(err, dtype=np.float64)


@dataclass(frozen=True)
class SampleStats:
    """One sample's centre statistics: float values (``q, pi, m, y, C``) and certified upper bounds
    (``*_u``: the exact quantity is at most the bound). Shapes: ``H`` heads, ``N`` atoms, ``d``."""

    x: np.ndarray  # (N, d) atoms
    w: np.ndarray  # (N,) masses
    q: np.ndarray  # (H, N, d)
    pi: np.ndarray  # (H, N, N)
    m: np.ndarray  # (H, N, d)
    y: np.ndarray  # (H, N, N, d)
    C: np.ndarray  # (H, N, d, d)
    J: np.ndarray  # (H, N, N, d, d) d m_hj / d x_k (query part at k = j included)
    eta: float  # relative error of a statistic with respect to its absolute companion
    pi_u: np.ndarray  # (H, N, N)
    yn_u: np.ndarray  # (H, N, N)
    xn_u: np.ndarray  # (N,)
    rho_u: np.ndarray  # (N,)
    qn_u: np.ndarray  # (H, N)
    Qn_u: np.ndarray  # (H,)
    mn_u: np.ndarray  # (H, N)
    mu_u: np.ndarray  # (N,)
    sigma_u: np.ndarray  # (H, N, N)
    muc_u: np.ndarray  # (H, N, N)
    alpha_u: np.ndarray  # (H, N)
    beta_u: np.ndarray  # (H,)
    gamma_u: np.ndarray  # (H, N)
    nu_u: np.ndarray  # (H, N)

    @property
    def R_u(self) -> float:
        """Largest atom norm (upper bound)."""
        return float(self.xn_u.max())


def _jacobians(q: np.ndarray, pi: np.ndarray, y: np.ndarray, C: np.ndarray, Q: np.ndarray) -> np.ndarray:
    r""":math:`J_{hjk} = \pi_{hjk}(I + y_{hjk} q_{hj}^\top) + \delta_{jk} C_{hj} Q_h` (``(H, N, N, d, d)``)."""
    H, N, d = q.shape
    J = np.einsum("hjk,ab->hjkab", pi, np.eye(d)) + np.einsum("hjk,hjka,hjb->hjkab", pi, y, q)
    idx = np.arange(N)
    J[:, idx, idx] += np.einsum("hjac,hcb->hjab", C, Q)
    return J


def _kernel_terms(m: np.ndarray, pi: np.ndarray, sign: float = -1.0) -> tuple[np.ndarray, ...]:
    r"""Feature Gram :math:`K_{kl} = \frac1H\sum_g \langle m_{gk}, m_{gl}\rangle` and its centrings by
    :math:`\pi_{hj}`: :math:`K^c_{hjk} = \frac1H\sum_g|m_{gk} - \bar m_{g}|^2` and
    :math:`K^c_{hjjk} = \frac1H\sum_g\langle m_{gj}, m_{gk} - \bar m_g\rangle` (``(H, N, N)`` each,
    :math:`\bar m_g = \sum_l \pi_{hjl} m_{gl}`). ``sign=+1`` with absolute companions of ``m``: every
    term added, the absolute companions of the three."""
    H = m.shape[0]
    K = np.einsum("gka,gla->kl", m, m) / H
    Kp = np.einsum("hjl,kl->hjk", pi, K)  # sum_l pi_hjl K_kl
    pKp = np.einsum("hjk,hjk->hj", pi, Kp)  # sum pi pi K
    kk = np.diagonal(K)[None, None, :] + sign * 2.0 * Kp + pKp[..., None]
    jk = K[None, :, :] + sign * np.einsum("hjl,jl->hj", pi, K)[..., None]
    return K, kk, jk


def sample_stats(x: np.ndarray, w: np.ndarray, Q: np.ndarray, b: np.ndarray, eta: float) -> SampleStats:
    """The centre statistics of one sample and their certified upper bounds (module docstring)."""
    H, d = Q.shape[0], Q.shape[1]
    q, pi, m, y, C = _softmax_stats(x, w, Q, b)
    xa = np.abs(x)
    e1, e2, e3, e4 = (err_factor(eta, k) for k in (1, 2, 3, 4))
    xn = rnd._norm_up(x)
    Qn = np.array([_spectral_upper(Q[h], 0.0) for h in range(H)])
    qa = np.einsum("hab,jb->hja", np.abs(Q), xa) + np.abs(b)[:, None, :]  # |Q||x| + |b|
    qn = rnd._norm_up(q) + rnd.gamma(d + 2) * rnd._norm_up(qa)
    ma = np.einsum("hjk,ka->hja", pi, xa)  # abs companion of m (and of its error)
    mn = rnd._norm_up(m) + e1 * rnd._norm_up(ma)
    ya = xa[None, None, :, :] + ma[:, :, None, :]  # abs companion of y
    yn = rnd._norm_up(y) + e1 * rnd._norm_up(ma)[..., None]
    Ca = np.einsum("hjk,hjka,hjkb->hjab", pi, ya, ya)
    Cn = spec_up(C, e3 * np.sqrt(np.sum(Ca * Ca, axis=(-2, -1))))
    rho = np.sqrt(1.0 + xn * xn) * (1.0 + 4.0 * rnd.U)
    J = _jacobians(q, pi, y, C, Q)
    Ja = _jacobians(qa, pi, ya, Ca, np.abs(Q))
    Jfro = np.sqrt(np.sum(Ja * Ja, axis=(-2, -1)))
    alpha = np.sum(spec_up(J, e4 * Jfro), axis=-1)
    JR, JRa = np.einsum("j,hjkab->hkab", w, J), np.einsum("j,hjkab->hkab", w, Ja)
    beta = np.sum(spec_up(JR, e4 * np.sqrt(np.sum(JRa * JRa, axis=(-2, -1)))), axis=-1)
    mu = np.sqrt(np.mean(mn * mn, axis=0)) * (1.0 + 4.0 * rnd.U)
    # nu_hj^2 = lambda_max(sum_{k,l} K_kl J_hjk J_hjl^T)
    K, kk, jk = _kernel_terms(m, pi)
    Kab, kka, jka = _kernel_terms(np.abs(m) + e1 * ma, pi, sign=+1.0)
    Gnu = np.einsum("kl,hjkab,hjlcb->hjac", K, J, J)
    Gnua = np.einsum("kl,hjkab,hjlcb->hjac", Kab, Ja, Ja)
    nu = np.sqrt(spec_up(0.5 * (Gnu + np.swapaxes(Gnu, -1, -2)), err_factor(eta, 6)
                         * np.sqrt(np.sum(Gnua * Gnua, axis=(-2, -1))))) * (1.0 + 4.0 * rnd.U)
    # sigma^2 = |Q^T y|^2 K_jj + |q|^2 K^c_kk + 2 <Q^T y, q> K^c_jk (closed form of the dual norm)
    Qty = np.einsum("hba,hjkb->hjka", Q, y)
    Qtya = np.einsum("hba,hjkb->hjka", np.abs(Q), ya)
    a2 = np.sum(Qty * Qty, axis=-1) * np.diagonal(K)[None, :, None]
    b2 = np.sum(q * q, axis=-1)[..., None] * kk
    ab = 2.0 * np.einsum("hjka,hja->hjk", Qty, q) * jk
    absum = (np.sum(Qtya * Qtya, axis=-1) * np.diagonal(Kab)[None, :, None]
             + np.sum(qa * qa, axis=-1)[..., None] * kka + 2.0 * np.einsum("hjka,hja->hjk", Qtya, qa) * jka)
    sigma = np.sqrt(np.maximum(a2 + b2 + ab, 0.0) + err_factor(eta, 6) * absum) * (1.0 + 4.0 * rnd.U)
    muc = np.sqrt(np.maximum(kk, 0.0) + err_factor(eta, 4) * kka) * (1.0 + 4.0 * rnd.U)
    return SampleStats(
        x=x, w=w, q=q, pi=pi, m=m, y=y, C=C, J=J, eta=float(eta),
        pi_u=up(pi * (1.0 + e1)) + 2.0**-1000, yn_u=up(yn), xn_u=up(xn), rho_u=up(rho), qn_u=up(qn), Qn_u=up(Qn),
        mn_u=up(mn), mu_u=up(mu), sigma_u=up(sigma), muc_u=up(muc), alpha_u=up(alpha), beta_u=up(beta),
        gamma_u=up(Cn * rho[None, :]), nu_u=up(nu),
    )


def all_stats(xs: list[np.ndarray], ws: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> tuple[list[SampleStats], float]:
    """:func:`sample_stats` of every sample with the shared error margin (``None`` margin above 1e-6:
    the statistics would not be accurate enough to certify anything)."""
    from ..jacobian_bound import _error_margin

    eta = _error_margin(xs, Q, b)
    if not eta <= 1e-6 or not math.isfinite(eta):
        raise ValueError("float64 statistics not accurate enough")
    return [sample_stats(x, w, Q, b, eta) for x, w in zip(xs, ws, strict=True)], eta
