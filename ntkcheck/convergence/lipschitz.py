r"""A certified upper bound on :math:`L_K` propagated through the layers, and the FixUp readout NTK.

The model is the one :mod:`ntkcheck.dynamics.model` trains: ``H`` heads
:math:`\theta_h = (V_h, Q_h, b_h)` shared by ``L`` explicit Euler layers of step
:math:`\tau = T/L`, every token of sample ``i`` moved by

.. math::

    x^{l+1}_j = x^l_j + \frac{\tau}{H}\sum_h V_h\, m(Q_h x^l_j + b_h;\ X^l),\qquad
    m(q; X) = \sum_k \operatorname{softmax}_k(\langle q, x_k\rangle)\, x_k ,

with outputs :math:`z` (readout: :math:`z_i = \frac1{N_i}\sum_j x^L_{ij}`; tokens:
:math:`\sqrt{w_{ij}}\,x^L_{ij}`), the NTK :math:`K(\theta) = H\,J J^\top`,
:math:`J = \partial z/\partial\theta`, and the particle distance
:math:`D(\theta, \theta') = (\frac1H\sum_h|\theta_h - \theta'_h|^2)^{1/2}`, which bounds
:math:`W_2(\rho, \rho')` and is the metric in which the heads' flow moves.

**The bound** (derivation: ``theory/local-convergence.md``, section "A certified bound on
L_K"). With :math:`\|\cdot\|_\rho` the operator norms for :math:`D`, ``K = J J^*`` and

.. math::

    \|K(\theta) - K(\theta')\| \le \|J(\theta) - J(\theta')\|\,(\|J(\theta)\| + \|J(\theta')\|)
    \le 2 B_1 B_2\, D(\theta, \theta') ,

where on the ball :math:`D(\theta, \theta_0)\le r`, :math:`B_2 \ge \sup\|D^2_\theta z\|_\rho`
comes from explicit bounds on the first and second derivatives of one layer in the
tokens and the head parameters (softmax moments bounded by the token radius, seed 002
Lemma 3.1-type bounds with explicit constants), propagated through the ``L`` layers, and
:math:`B_1 = \min(\text{the propagated first-derivative bound}, \sqrt{\Lambda} + B_2 r)`.
``L_K = 2 B_1 B_2`` is certified: every step is a proved inequality evaluated in float64
on quantities (norms of the data and of the heads) whose rounding is covered by a relative
inflation of ``1e-12``.

This is the *propagated* bound: valid around any centre, far from sharp (at FixUp the bound of
:mod:`ntkcheck.convergence.jacobian_bound` uses the structure of the centre and is taken where it is
smaller); the certificate of seed 002 Thm. 8.5 that uses them is in :mod:`ntkcheck.convergence.guarantee`.

References: seed 002 ("A Mean-Field Theory of Transformers") Thm. 8.5, Assumption 7,
Lemma 3.1; seed 003 ("Training Infinitely Deep and Wide Transformers") Thm. 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._records import restore
from ..errors import DomainError, InputError

__all__ = [
    "LipschitzBound",
    "lipschitz_bound",
    "readout_ntk_fixup",
    "ROUNDING_MARGIN",
]

#: relative margin on the float64 spectrum of K_0 (lambda_0 lowered, Lambda raised by
#: ROUNDING_MARGIN * Lambda): the eigenvalues of the computed K_0 carry errors of a few
#: hundred ulps of lambda_max (sums of O(M) softmax products, then a backward-stable
#: eigvalsh; Weyl's inequality), far below this margin
ROUNDING_MARGIN = 1e-9
#: relative inflation of every float64 bound (a handful of operations on O(1) numbers)
_INFLATE = 1.0 + 1e-12


# ----------------------------------------------------------------------------- the bound


@dataclass(frozen=True)
class LipschitzBound:
    r"""A certified Lipschitz constant of :math:`\theta \mapsto K(\theta)` on a ball.

    Attributes
    ----------
    radius : float
        ``r``: the ball :math:`D(\theta, \theta_0) \le r` around the given parameters.
    L_K : float
        :math:`\|K(\theta) - K(\theta')\|_{op} \le L_K\,D(\theta, \theta')` for every
        :math:`\theta, \theta'` in the ball (``2 * jacobian_bound * hessian_bound``).
    jacobian_bound : float
        :math:`B_1 \ge \sup \|J\|_{\rho\to 2}` on the ball.
    hessian_bound : float
        :math:`B_2 \ge \sup \|D^2_\theta z\|_{\rho}` on the ball.
    lambda_max_0 : float
        The :math:`\Lambda` used in :math:`B_1 \le \sqrt\Lambda + B_2 r`.
    token_radius : tuple of float
        Per sample, the bound :math:`R_0 (1 + \tau v_\rho)^L` on the token norms over the ball.
    heads, layers, T, loss :
        The model.
    """

    radius: float
    L_K: float
    jacobian_bound: float
    hessian_bound: float
    lambda_max_0: float
    token_radius: tuple[float, ...]
    heads: int
    layers: int
    T: float
    loss: str

    def __repr__(self) -> str:
        return (f"LipschitzBound(L_K <= {self.L_K:.4g} on D <= {self.radius:.3g}; B1 = {self.jacobian_bound:.3g}, "
                f"B2 = {self.hessian_bound:.3g}; H={self.heads}, L={self.layers}, T={self.T:g}, {self.loss})")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LipschitzBound:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["token_radius"] = list(self.token_radius)
        return out


def _head_norms(params: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operator norms of V_h, Q_h and Euclidean norms of b_h, inflated for rounding."""
    V = np.linalg.norm(params.V, ord=2, axis=(-2, -1)) * _INFLATE
    Q = np.linalg.norm(params.Q, ord=2, axis=(-2, -1)) * _INFLATE
    b = np.linalg.norm(params.b, axis=-1) * _INFLATE
    return V, Q, b


def _sample_bounds(R0: float, *, layers: int, tau: float, v_rho: float, v_inf: float, q_max: float,
                   b_max: float) -> tuple[float, float, float]:
    r"""Per-sample bounds ``(s_L, t_L, R_L)``: first and second derivative of the tokens of
    the last layer in the head parameters (max over tokens, per unit :math:`|a|_\rho`), and
    the token radius. One layer's constants (``theory/local-convergence.md``):

    alpha = v_rho c,  c = 1 + 2 R^2 Q + R b                 (|D_X F|)
    beta  = sqrt(R^2 + v_rho^2 R^4 (R^2 + 1))               (|D_theta F|)
    g_tt  = R^2 sqrt(R^2+1) + 2 R^3 (R^2+1) v_inf           (|D^2_theta F|)
    g_xt  = sqrt(c^2 + v_rho^2 e^2),  e = R^2 + sqrt(R^2+1)(2R + 4R^3 Q + 2R^2 b)
    g_xx  = v_rho P,  P = 2R^3Q^2 + 4RQ + 4R^2 q Q + 3q + 2R q^2,  q = R Q + b
    """
    s = t = 0.0
    R = R0
    for _ in range(layers):
        R2 = R * R
        sq = math.sqrt(R2 + 1.0)
        c = 1.0 + 2.0 * R2 * q_max + R * b_max
        alpha = v_rho * c
        beta = math.sqrt(R2 + v_rho**2 * R2 * R2 * (R2 + 1.0))
        g_tt = R2 * sq + 2.0 * R * R2 * (R2 + 1.0) * v_inf
        e = R2 + sq * (2.0 * R + 4.0 * R * R2 * q_max + 2.0 * R2 * b_max)
        g_xt = math.sqrt(c * c + v_rho**2 * e * e)
        qq = R * q_max + b_max
        P = 2.0 * R * R2 * q_max**2 + 4.0 * R * q_max + 4.0 * R2 * qq * q_max + 3.0 * qq + 2.0 * R * qq**2
        g_xx = v_rho * P
        grow = 1.0 + tau * alpha
        s, t = grow * s + tau * beta, grow * t + tau * (g_xx * s * s + 2.0 * g_xt * s + g_tt)
        R = R * (1.0 + tau * v_rho)
    return s * _INFLATE, t * _INFLATE, R * _INFLATE


def _check_model(samples: Any, params: Any, layers: int, T: float, loss: str) -> list[np.ndarray]:
    """Validate the model arguments; return the atoms of each sample (the bound needs only their norms)."""
    from ..cgf import as_laws
    from ..dynamics.model import AttentionParams

    if loss not in ("readout", "tokens"):
        raise InputError(f"loss: expected 'readout' or 'tokens', got {loss!r}")
    if not isinstance(params, AttentionParams):
        raise InputError(f"params: expected ntkcheck.dynamics.model.AttentionParams, got {type(params).__name__}")
    if params.per_layer:
        raise DomainError("the L_K bound is for heads shared over depth (seed 002 Thm. 8.5's model); "
                          "got per-layer parameters")
    if int(layers) != layers or layers < 1:
        raise DomainError(f"layers must be a positive integer, got {layers!r}")
    if not (np.isfinite(T) and T > 0):
        raise DomainError(f"time horizon T must be finite and > 0, got {T!r}")
    atoms = [np.asarray(law.atoms, dtype=np.float64) for law in as_laws(samples)]
    if atoms[0].shape[1] != params.dim:
        raise InputError(f"tokens have dimension {atoms[0].shape[1]}, the heads have d={params.dim}")
    return atoms


def lipschitz_bound(
    samples: Any,
    params: Any,
    *,
    layers: int,
    radius: float,
    T: float = 1.0,
    loss: str = "readout",
    lambda_max_0: float | None = None,
) -> LipschitzBound:
    r"""Certified :math:`L_K` on the ball :math:`D(\theta, \theta_0) \le r` around ``params``.

    .. math::

        \|K(\theta) - K(\theta')\|_{op} \le 2 B_1 B_2\, D(\theta, \theta'),\qquad
        B_1 = \min\big(\textstyle\sqrt{\sum_i s_i^2},\ \sqrt{\Lambda} + B_2 r\big),\quad
        B_2 = \sqrt{\textstyle\sum_i t_i^2}

    (readout loss; tokens loss: means over samples instead of sums), with ``s_i, t_i`` the
    propagated first and second derivative bounds of sample ``i``.

    Parameters
    ----------
    samples : list of (N_i, d) arrays
    params : ntkcheck.dynamics.model.AttentionParams
        Heads shared over depth (the centre of the ball; FixUp or not).
    layers : int
        ``L``, Euler layers of step ``T / L``.
    radius : float
        ``r >= 0`` in the particle metric :math:`D`.
    T : float
        Depth horizon.
    loss : {"readout", "tokens"}
    lambda_max_0 : float, optional
        :math:`\lambda_{\max}(K(\theta_0))`; computed with :func:`ntkcheck.dynamics.ntk.ntk_spectrum`
        (plus the rounding margin) when omitted.

    Returns
    -------
    LipschitzBound

    References: seed 002 Assumption 7, Lemma 3.1; ``theory/local-convergence.md``.

    Examples
    --------
    >>> from ntkcheck.dynamics import init_params
    >>> x = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
    >>> b = lipschitz_bound(x, init_params(2, 4, seed=0), layers=2, radius=1e-3)
    >>> bool(b.L_K > 0)
    True
    """
    atoms = _check_model(samples, params, layers, T, loss)
    if not (np.isfinite(radius) and radius >= 0):
        raise DomainError(f"radius must be finite and >= 0, got {radius!r}")
    if lambda_max_0 is None:
        from ..dynamics.ntk import ntk_spectrum

        lam = ntk_spectrum(samples, params, layers=layers, T=T, loss=loss).lambda_max  # type: ignore[arg-type]
        lambda_max_0 = lam + ROUNDING_MARGIN * abs(lam)
    if not (np.isfinite(lambda_max_0) and lambda_max_0 >= 0):
        raise DomainError(f"lambda_max_0 must be finite and >= 0, got {lambda_max_0!r}")
    return _bound(atoms, params, int(layers), float(T), loss, float(radius), float(lambda_max_0))


def _bound(atoms: list[np.ndarray], params: Any, layers: int, T: float, loss: str, radius: float,
           lambda_max_0: float) -> LipschitzBound:
    H = params.heads
    Vn, Qn, bn = _head_norms(params)
    d_inf = math.sqrt(H) * radius  # one head can carry the whole budget: |theta_h - theta_h0| <= sqrt(H) r
    v_rho = math.sqrt(float(np.mean(Vn**2))) + radius
    v_inf = float(Vn.max()) + d_inf
    q_max = float(Qn.max()) + d_inf
    b_max = float(bn.max()) + d_inf
    tau = T / layers
    per = [_sample_bounds(float(np.linalg.norm(x, axis=1).max()) * _INFLATE, layers=layers, tau=tau, v_rho=v_rho,
                          v_inf=v_inf, q_max=q_max, b_max=b_max) for x in atoms]
    s = np.array([p[0] for p in per])
    t = np.array([p[1] for p in per])
    scale = 1.0 if loss == "readout" else 1.0 / len(atoms)  # tokens: weights summing to 1/n per sample
    B2 = math.sqrt(scale * float(np.sum(t * t))) * _INFLATE
    B1 = min(math.sqrt(scale * float(np.sum(s * s))), math.sqrt(lambda_max_0) + B2 * radius) * _INFLATE
    return LipschitzBound(radius, 2.0 * B1 * B2 * _INFLATE, B1, B2, lambda_max_0,
                          tuple(p[2] for p in per), H, layers, T, loss)


# ----------------------------------------------------------------------------- the Thm. 8.5 rate at FixUp


def readout_ntk_fixup(samples: Any, Q: np.ndarray, b: np.ndarray, *, T: float = 1.0) -> np.ndarray:
    r"""Eigenvalues of the readout NTK at FixUp, heads shared over depth (seed 002 Thm. 8.5's ``K_0``).

    At ``V = 0`` the tokens do not move and only the ``V`` directions act:
    :math:`\partial z_i/\partial V_h[\delta] = \frac{T}{H}\,\delta\,\bar\phi_{ih}` with
    :math:`\bar\phi_{ih} = \sum_j w_{ij} \nabla\Lambda_{\mu_i}(Q_h x_{ij} + b_h)` (``w_ij`` the
    masses of the atoms, ``1/N_i`` for distinct tokens), so with mobility ``H``

    .. math::

        K_0 = T^2\, G_r \otimes I_d,\qquad
        (G_r)_{ii'} = \frac1H \sum_h \langle \bar\phi_{ih}, \bar\phi_{i'h}\rangle ,

    independent of the number of layers. Its ``lambda_min`` is the rate of eq. 31; near
    initialisation the loss decays at twice it.

    Parameters
    ----------
    samples : list of (N_i, d) arrays or :class:`ntkcheck.cgf.empirical.Empirical` laws
    Q : (H, d, d) array
    b : (H, d) array
    T : float

    Returns
    -------
    (n,) array, ascending eigenvalues of :math:`T^2 G_r` (each has multiplicity ``d`` in ``K_0``).

    References: seed 002 Def. 8.4, Thm. 8.5; ``theory/local-convergence.md``.
    """
    from ..cgf import as_laws
    from ..cgf.core import cgf_gradient

    laws = as_laws(samples)
    Q, b = np.asarray(Q, dtype=np.float64), np.asarray(b, dtype=np.float64)
    d = laws[0].dim
    if Q.ndim != 3 or Q.shape[1:] != (d, d) or b.shape != (Q.shape[0], d):
        raise InputError(f"heads: expected Q (H, {d}, {d}) and b (H, {d}), got {Q.shape} and {b.shape}")
    if not (np.isfinite(T) and T > 0):
        raise DomainError(f"T must be finite and > 0, got {T!r}")
    H = Q.shape[0]
    rows = []
    for law in laws:
        x, w = np.asarray(law.atoms, dtype=np.float64), np.asarray(law.masses, dtype=np.float64)
        A = np.einsum("hkl,jl->jhk", Q, x) + b[None]  # (N, H, d): Q_h x_j + b_h
        phi = cgf_gradient(x, A.reshape(-1, d), w).reshape(x.shape[0], H, d)
        rows.append(np.einsum("j,jhk->hk", w, phi).reshape(-1))
    Phi = np.stack(rows) / math.sqrt(H)
    with np.errstate(over="ignore", invalid="ignore"):
        K = float(T) * float(T) * (Phi @ Phi.T)
    if not np.all(np.isfinite(K)):
        raise DomainError(f"T^2 G_r overflows float64 (T = {T:g}, so T^2 = {float(T) * float(T):.3g}); lower the depth T")
    return np.linalg.eigvalsh(K)
