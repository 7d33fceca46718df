r"""How large one head's Gram can be: the bound ``L`` on :math:`\lambda_{\max}(X_\theta)` for every head,
and the bound ``L_v`` on :math:`v^T X_\theta v` along one direction ``v``.

A feature of sample ``i`` is a convex combination of its atoms, so whatever the head law,

.. math::

    \lambda_{\max}(X_\theta) \le L = \min\Big(\sum_i R_i^2,\ \lambda_{\max}\big(\textstyle\sum_i Z_i^T Z_i\big)\Big),
    \qquad
    v^T X_\theta v \le L_v = \Big(\big|\textstyle\sum_i s_i \bar z_i\big| + \sum_i e_i\Big)^2,
    \quad e_i = \min\big(\|c_i\|_1 r_i,\ |s_i| r_i + \min(C_i^+, C_i^-) D_i\big),

``R_i`` the largest atom norm of sample ``i``, ``Z_i`` its atoms (rows), :math:`c_{ia} = \sqrt{m_{ia}} v_{ia}`,
:math:`s_i = \sum_a c_{ia}`, :math:`\bar z_i` any centre and :math:`r_i` the largest distance of an atom
from it, :math:`C_i^\pm` the sums of the positive and negative :math:`c_{ia}`, :math:`D_i` the diameter of
sample ``i``. Derived in ``theory/ntk-head-law.md`` ("The bound on one head"); these ranges are what the
tail bounds of :mod:`ntkcheck.ntk.heads.tail_bounds` need.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...cgf import Empirical
from ..certificate import rounding as rnd
from ..certificate.routes import certify_gram_enclosure

_U = 2.0**-53


def norms_up(X: np.ndarray) -> np.ndarray:
    """Upper bounds of the row norms of ``X``."""
    d = X.shape[1]
    return np.sqrt(np.sum(X * X, axis=1)) * (1.0 + (d + 3) * 2.0**-52)


def sample_radii(laws: Sequence[Empirical]) -> np.ndarray:
    """``R_i``: an upper bound of the largest atom norm of each law."""
    return np.array([float(np.max(norms_up(law.atoms))) for law in laws])


def head_bound(laws: Sequence[Empirical]) -> float:
    r""":math:`L \ge \lambda_{\max}(X_\theta)` for every head :math:`\theta`:
    :math:`\min(\sum_i R_i^2, \lambda_{\max}(\sum_i Z_i^T Z_i))` (a feature of sample ``i`` is a
    convex combination of its atoms, so :math:`\langle\phi, w\rangle^2 \le \max_z \langle z, w\rangle^2`).
    The second term is certified by a verified Cholesky of :math:`tI - \sum_i Z_i^T Z_i`."""
    L1 = float(np.sum(sample_radii(laws) ** 2)) * (1.0 + 4.0 * 2.0**-52)
    Z = np.concatenate([law.atoms for law in laws])
    K = Z.shape[0]
    C = Z @ Z.T if K <= Z.shape[1] else Z.T @ Z  # same nonzero eigenvalues
    # |fl(C) - C| <= gamma_k |Z||Z|^T entrywise, k the inner dimension; ||.||_2 <= ||.||_F <= gamma_k ||Z||_F^2
    radius = rnd.gamma(min(K, Z.shape[1]) + 2) * float(np.sum(Z * Z)) * (1.0 + 1e-10)
    lam = float(np.linalg.eigvalsh(C)[-1])
    t = lam * (1.0 + 1e-6) + 4.0 * radius + 1e-300
    cert = certify_gram_enclosure(t * np.eye(C.shape[0]) - C, radius)
    return min(L1, t) if cert.positive else L1


#: samples with more atoms than this use ``2 r_i`` for their diameter (the pairwise distances cost ``N^2 d``)
_DIAMETER_ATOMS = 512


def _diameter_up(X: np.ndarray) -> float:
    """An upper bound of the largest distance between two rows of ``X`` (the computed differences'
    norms inflated by their rounding), in slices of at most ``2^20`` entries."""
    n, d = X.shape
    step = max(1, (1 << 20) // max(n * d, 1))
    D = 0.0
    for a in range(0, n, step):
        diff = (X[a:a + step, None, :] - X[None, :, :]).reshape(-1, d)
        D = max(D, float(np.max(norms_up(diff))))
    return D * (1.0 + 2.0 * _U)


def direction_bound(laws: Sequence[Empirical], v: np.ndarray) -> float:
    r""":math:`L_v \ge v^T X_\theta v` for every head :math:`\theta` (``v`` of length ``M``, rows in law
    order).

    With :math:`c_{ia} = \sqrt{m_{ia}}\, v_{ia}`, the features :math:`\phi_{ia} \in \mathrm{conv}\, Z_i` and
    a centre :math:`\bar z_i` (the mean of the atoms) at distance at most :math:`r_i` from every atom, the
    atoms with :math:`c_{ia} > 0` contribute :math:`C_i^+ p` and the others :math:`-C_i^- n` with
    :math:`p, n \in \mathrm{conv}\, Z_i` (weighted means), :math:`C_i^\pm` the sums of the positive and
    negative parts, :math:`s_i = C_i^+ - C_i^-`. So
    :math:`\sum_a c_{ia}\phi_{ia} - s_i \bar z_i = C_i^+(p - \bar z_i) - C_i^-(n - \bar z_i)
    = s_i (p - \bar z_i) + C_i^-(p - n)` (or the same with ``n``), of norm at most
    :math:`e_i = \min(\|c_i\|_1 r_i,\ |s_i| r_i + \min(C_i^+, C_i^-) D_i)`, :math:`D_i` the diameter of the
    atoms, and :math:`|F_\theta^T v| \le |\sum_i s_i \bar z_i| + \sum_i e_i`. Evaluated with its rounding:
    :math:`C_i^\pm` inflated for the rounded masses (and deflated where they are subtracted), the signed sums
    charged :math:`\gamma_{M+2} \sum |c_{ia}| |\bar z_i|`, ``r_i`` and ``D_i`` from the computed differences
    inflated by their own rounding."""
    out = 0.0
    off = 0
    tot = np.zeros(laws[0].dim)
    slack = 0.0
    g = rnd.gamma(int(v.size) + laws[0].dim + 4)
    for law in laws:
        n = law.n_atoms
        c = np.sqrt(law.masses) * v[off:off + n]
        off += n
        up = 1.0 + 8.0 * _U + rnd.gamma(n + 2)
        lo = 1.0 - 8.0 * _U - rnd.gamma(n + 2)
        cp, cm = float(np.sum(c[c > 0])), float(-np.sum(c[c < 0]))
        ac = (cp + cm) * up
        zbar = law.atoms.mean(axis=0)
        r = float(np.max(norms_up(law.atoms - zbar))) * (1.0 + 2.0 * _U)
        e = ac * r
        if 1 < n <= _DIAMETER_ATOMS:
            D = _diameter_up(law.atoms)
            # |s_i| from above: the subtraction's rounding is at most u (cp + cm) in absolute terms
            s_up = max(cp * up - cm * lo, cm * up - cp * lo, 0.0) + 4.0 * _U * (cp + cm)
            e = min(e, (s_up * r + min(cp, cm) * up * D) * (1.0 + 4.0 * _U))
        tot += float(np.sum(c)) * zbar
        slack += ac * float(np.linalg.norm(zbar))
        out += e
    head = float(np.linalg.norm(tot)) * (1.0 + g) + 4.0 * g * slack
    return ((head + out * (1.0 + g)) * (1.0 + 1e-10)) ** 2
