"""Independent references for the flow's certificates: the model written again, token by token.

Nothing here imports the package's model, adjoint or integrators:

* :func:`mp_loss`: the loss in mpmath at a given precision (exact masses as rationals, every token
  moved by every head at every layer), the reference for proved loss bounds;
* :func:`cs_field`: the flow field :math:`-H\\nabla\\mathcal L` by the complex step
  (:math:`\\partial_a\\mathcal L = \\mathrm{Im}\\,\\mathcal L(\\theta + ih e_a)/h`, exact to rounding), the
  parameter directions batched;
* :func:`dop853_losses`: the flow integrated by scipy's DOP853 on that field at ``rtol 1e-10``.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
from scipy.integrate import solve_ivp


def _split(theta, H, d):
    nv = H * d * d
    return theta[..., :nv].reshape(theta.shape[:-1] + (H, d, d)), \
        theta[..., nv:2 * nv].reshape(theta.shape[:-1] + (H, d, d)), theta[..., 2 * nv:].reshape(theta.shape[:-1] + (H, d))


def _atoms(x):
    """Distinct rows and their exact masses (the empirical law of the tokens)."""
    rows, masses = [], []
    for r in map(tuple, np.asarray(x, dtype=np.float64)):
        if r in rows:
            masses[rows.index(r)] += Fraction(1, len(x))
        else:
            rows.append(r)
            masses.append(Fraction(1, len(x)))
    return np.array(rows), masses


def _forward_batch(x, m, V, Q, b, layers, T):
    """Tokens of one sample (distinct atoms ``x``, masses ``m``) after ``layers`` layers, for a batch of
    parameter sets (leading axis); real or complex."""
    H = Q.shape[-3]
    X = np.broadcast_to(x, V.shape[:1] + x.shape).astype(V.dtype)
    for _ in range(layers):
        q = np.einsum("bhce,bje->bjhc", Q, X) + b[:, None]  # queries (batch, token, head, d)
        s = np.einsum("bjhc,bkc->bjhk", q, X)
        s = s - s.real.max(axis=-1, keepdims=True)
        w = np.exp(s) * m
        p = w / w.sum(axis=-1, keepdims=True)
        mh = np.einsum("bjhk,bkc->bjhc", p, X)
        X = X + (T / (layers * H)) * np.einsum("bhac,bjhc->bja", V, mh)
    return X


def loss_batch(samples, targets, theta, H, d, layers, T=1.0, loss="readout"):
    """The loss for a batch of flat parameter vectors ``theta`` (batch, P), real or complex."""
    V, Q, b = _split(theta, H, d)
    n = len(samples)
    tot = 0.0
    for i, x in enumerate(samples):
        xa, ms = _atoms(x)
        m = np.array([float(v) for v in ms])
        out = _forward_batch(xa, m, V, Q, b, layers, T)
        if loss == "readout":
            r = np.einsum("a,bad->bd", m, out) - targets[i]
            tot = tot + 0.5 * np.sum(r * r, axis=-1)
        else:
            r = out - targets[i]
            tot = tot + 0.5 * np.einsum("a,bad->b", m, r * r) / n
    return tot


def cs_field(samples, targets, theta, H, d, layers, T=1.0, loss="readout", h=1e-30):
    """:math:`-H\\nabla\\mathcal L(\\theta)` by the complex step."""
    P = theta.size
    batch = theta[None].astype(np.complex128) + 1j * h * np.eye(P)
    return -H * loss_batch(samples, targets, batch, H, d, layers, T, loss).imag / h


def dop853_losses(samples, targets, theta0, H, d, layers, times, T=1.0, loss="readout"):
    """Losses and states of the flow at ``times`` (DOP853, rtol 1e-10, atol 1e-14, complex-step field)."""
    sol = solve_ivp(lambda t, y: cs_field(samples, targets, y, H, d, layers, T, loss), (0.0, float(times[-1])),
                    np.asarray(theta0, dtype=np.float64), method="DOP853", rtol=1e-10, atol=1e-14, t_eval=times)
    states = sol.y.T
    return loss_batch(samples, targets, states, H, d, layers, T, loss), states


def mp_loss(samples, targets, theta, H, d, layers, T=1.0, loss="readout", dps=50):
    """The exact loss (to ``dps`` digits) at the float parameters ``theta``, token by token in mpmath."""
    with mpmath.workdps(dps):
        th = [mpmath.mpf(float(v)) for v in np.asarray(theta, dtype=np.float64)]
        nv = H * d * d
        V = [[[th[h * d * d + a * d + c] for c in range(d)] for a in range(d)] for h in range(H)]
        Q = [[[th[nv + h * d * d + a * d + c] for c in range(d)] for a in range(d)] for h in range(H)]
        b = [[th[2 * nv + h * d + c] for c in range(d)] for h in range(H)]
        Tm = mpmath.mpf(float(T))
        n = len(samples)
        tot = mpmath.mpf(0)
        for i, x in enumerate(samples):
            xa, ms = _atoms(x)
            m = [mpmath.mpf(v.numerator) / v.denominator for v in ms]
            X = [[mpmath.mpf(float(v)) for v in row] for row in xa]
            for _ in range(layers):
                new = [row[:] for row in X]
                for j in range(len(X)):
                    for h in range(H):
                        q = [sum(Q[h][c][e] * X[j][e] for e in range(d)) + b[h][c] for c in range(d)]
                        w = [m[k] * mpmath.exp(sum(q[c] * X[k][c] for c in range(d))) for k in range(len(X))]
                        z = sum(w)
                        mh = [sum(w[k] * X[k][c] for k in range(len(X))) / z for c in range(d)]
                        for a in range(d):
                            new[j][a] += Tm / (layers * H) * sum(V[h][a][c] * mh[c] for c in range(d))
                X = new
            y = np.asarray(targets[i], dtype=np.float64)
            if loss == "readout":
                for a in range(d):
                    r = sum(m[k] * X[k][a] for k in range(len(X))) - mpmath.mpf(float(y[a]))
                    tot += r * r / 2
            else:
                for k in range(len(X)):
                    for a in range(d):
                        r = X[k][a] - mpmath.mpf(float(y[k][a]))
                        tot += m[k] * r * r / (2 * n)
        return tot


def outputs_batch(samples, theta, H, d, layers, T=1.0):
    """Readout outputs :math:`z_i = \\sum_a m_a x^L_a` for a batch of parameter vectors, (batch, n, d)."""
    V, Q, b = _split(theta, H, d)
    out = []
    for x in samples:
        xa, ms = _atoms(x)
        m = np.array([float(v) for v in ms])
        out.append(np.einsum("a,bad->bd", m, _forward_batch(xa, m, V, Q, b, layers, T)))
    return np.stack(out, axis=1)


def cs_jacobian(samples, theta, H, d, layers, T=1.0, h=1e-30):
    """:math:`\\partial z/\\partial\\theta` (readout) by the complex step, rows ``(i, a)``, (n d, P)."""
    P = theta.size
    batch = theta[None].astype(np.complex128) + 1j * h * np.eye(P)
    z = outputs_batch(samples, batch, H, d, layers, T)
    return (z.imag / h).reshape(P, -1).T


def mp_eigenvalues(M, dps=30):
    """Eigenvalues of a symmetric float matrix (exact as given) in mpmath, ascending."""
    with mpmath.workdps(dps):
        E = mpmath.eigsy(mpmath.matrix(M.tolist()), eigvals_only=True)
        return sorted(E)
