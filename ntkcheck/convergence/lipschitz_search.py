r"""A search for the true local Lipschitz constant of the NTK on a ball: the other side of ``L_K``.

A certified :math:`L_K` is an upper bound; how loose it is can only be measured. This module
searches the ball :math:`D(\theta, \theta_0) \le r` for the largest ratio

.. math::

    \frac{\|K(\theta) - K(\theta')\|_2}{D(\theta, \theta')},\qquad
    D(\theta,\theta') = \Big(\frac1H\sum_h|\theta_h - \theta'_h|^2\Big)^{1/2},

with :math:`K` the NTK over all parameters (:func:`ntkcheck.dynamics.ntk.ntk_spectrum`'s matrix),
by random starts of several shapes (every parameter, one head, ``V`` only, one head's ``V``
with its ``Q, b``) and hill climbing with a shrinking step. Pairs are the centre and a point,
and two points close to each other (the local slope away from the centre). The best ratio
found is a *lower* bound on the true constant: it can refute a claimed ``L_K``, never prove one.

References: seed 002 ("A Mean-Field Theory of Transformers") Assumption 7;
``theory/local-convergence.md``, "How tight".
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._records import restore
from ..errors import DomainError

__all__ = [
    "LipschitzSearch",
    "RegionSearch",
    "lipschitz_search",
    "region_search",
]


@dataclass(frozen=True)
class LipschitzSearch:
    r"""The largest ratios found on the ball.

    Attributes
    ----------
    radius : float
    best_ratio : float
        Largest :math:`\|K(\theta) - K(\theta')\|/D(\theta, \theta')` over the pairs tried.
    best_centred : float
        Largest :math:`\|K(\theta) - K(\theta_0)\|/D(\theta, \theta_0)`.
    best_deviation : float
        Largest :math:`\|B(\theta) - B(\theta_0)\|_2/D(\theta,\theta_0)` (:math:`K = BB^\top`): what
        :math:`\beta(r)/r` of :mod:`ntkcheck.convergence.jacobian_bound` bounds.
    evaluations : int
        NTKs computed.
    seconds : float
    direction : (P,) array or None
        The displacement :math:`\theta - \theta_0` of the best centred ratio (``params.flat()`` layout).
    """

    radius: float
    best_ratio: float
    best_centred: float
    best_deviation: float
    evaluations: int
    seconds: float
    direction: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LipschitzSearch:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "direction"}


class _Objective:
    """``K`` and ``B`` at flat parameter vectors, counted."""

    def __init__(self, samples: Any, params: Any, layers: int, T: float, loss: str) -> None:
        from ..dynamics import _attention
        from ..dynamics.model import _prepare

        self.batch = _prepare(samples, params, layers, T)
        self.params, self.layers, self.T, self.loss = params, layers, T, loss
        self.v0 = params.flat()
        self.H = params.heads
        self.count = 0
        self._att = _attention
        self.B0 = self.B(self.v0)
        self.K0 = self.B0 @ self.B0.T

    def B(self, vec: np.ndarray) -> np.ndarray:
        p = self.params.unflat(vec)
        _, cache = self._att._forward(self.batch, p, self.layers, self.T, keep=True)
        self.count += 1
        return self._att._dense_linear(self.batch, p, self.layers, self.T, self.loss, cache).Bd  # type: ignore[return-value]

    def dist(self, a: np.ndarray, b: np.ndarray) -> float:
        return math.sqrt(float(np.sum((a - b) ** 2)) / self.H)


def _direction(obj: _Objective, rng: np.random.Generator, kind: int) -> np.ndarray:
    """A random direction of one of four shapes (every parameter, one head, V only, one head's V, Q, b)."""
    p = obj.params
    g = rng.standard_normal(p.size)
    if kind == 0:
        return g
    parts = p.unflat(g)
    V, Q, b = parts.V.copy(), parts.Q.copy(), parts.b.copy()
    if kind == 2:
        return type(p)(V, 0.0 * Q, 0.0 * b).flat()
    mask = np.zeros(p.heads)
    mask[rng.integers(p.heads)] = 1.0
    V, Q, b = V * mask[:, None, None], Q * mask[:, None, None], b * mask[:, None]
    if kind == 3:
        Q, b = Q * 3.0, b * 3.0  # the V-against-(Q, b) coupling of one head
    return type(p)(V, Q, b).flat()


def _scaled(obj: _Objective, g: np.ndarray, r: float) -> np.ndarray:
    n = math.sqrt(float(g @ g) / obj.H)
    return g * (r / n) if n > 0 else g


def _ascend(obj: _Objective, g: np.ndarray, r: float, score: Any, alive: Any, iters: int = 40) -> np.ndarray:
    r"""Ascent on the sphere :math:`D = r` for :math:`|u^\top(K(\theta_0 + g) - K_0)u|`, ``u`` the extreme
    eigenvector: the gradient of :math:`u^\top K u = |B^\top u|^2` is :math:`2\,\partial(B^\top u)[B^\top u]`,
    a Hessian-vector product of :math:`u\cdot z` (``B^T u`` is its gradient) taken by central differences;
    the step maximises its linearisation on the sphere (for small ``r``, a power iteration)."""
    best, f_best = g, score(g)
    for _ in range(iters):
        if not alive():
            break
        v = obj.v0 + g
        Bv = obj.B(v)
        w, U = np.linalg.eigh(Bv @ Bv.T - obj.K0)
        k = int(np.argmax(np.abs(w)))
        u = U[:, k]
        gu = Bv.T @ u
        n = float(np.linalg.norm(gu))
        if n == 0 or not alive():
            break
        h = 1e-5 * max(1.0, float(np.linalg.norm(v)) / math.sqrt(v.size))
        Hg = (obj.B(v + h * gu / n).T @ u - obj.B(v - h * gu / n).T @ u) * (n / (2.0 * h))
        step = _scaled(obj, np.sign(w[k]) * Hg, r)
        if not np.all(np.isfinite(step)) or not alive():
            break
        g = step
        f = score(g)
        if f > f_best:
            best, f_best = g, f
    return best


def lipschitz_search(samples: Any, params: Any, *, layers: int, radius: float, T: float = 1.0,
                     loss: str = "readout", evaluations: int = 300, seconds: float = 10.0,
                     seed: int = 0) -> LipschitzSearch:
    r"""Search the ball :math:`D(\theta, \theta_0) \le` ``radius`` for the largest Lipschitz ratio of the NTK.

    Parameters
    ----------
    samples : list of (N_i, d) arrays
    params : ntkcheck.dynamics.model.AttentionParams
        The centre (heads shared over depth or per layer).
    layers, T, loss :
        The model.
    radius : float
        ``r > 0``.
    evaluations, seconds : int, float
        Budget: NTKs computed, wall-clock seconds (whichever ends first).
    seed : int

    Returns
    -------
    LipschitzSearch

    Examples
    --------
    >>> from ntkcheck.dynamics import init_params
    >>> x = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
    >>> s = lipschitz_search(x, init_params(2, 3, seed=0), layers=2, radius=1e-3, evaluations=40)
    >>> bool(s.best_ratio > 0)
    True
    """
    if not (np.isfinite(radius) and radius > 0):
        raise DomainError(f"radius must be finite and > 0, got {radius!r}")
    start = time.perf_counter()
    obj = _Objective(samples, params, int(layers), float(T), loss)
    rng = np.random.default_rng(seed)
    best = {"pair": 0.0, "centred": 0.0, "dev": 0.0}
    where: list[np.ndarray] = []

    def score(g: np.ndarray) -> float:
        v = obj.v0 + g
        Bv = obj.B(v)
        D = obj.dist(v, obj.v0)
        c = float(np.linalg.norm(Bv @ Bv.T - obj.K0, 2)) / D
        if c > best["centred"]:
            where[:] = [g]
        best["centred"] = max(best["centred"], c)
        best["dev"] = max(best["dev"], float(np.linalg.norm(Bv - obj.B0, 2)) / D)
        best["pair"] = max(best["pair"], c)
        return c

    def alive() -> bool:
        return obj.count < evaluations and time.perf_counter() - start < seconds

    starts = [_scaled(obj, _direction(obj, rng, k % 4), radius) for k in range(8)]
    scored = sorted(((score(g), k, g) for k, g in enumerate(starts) if alive()), key=lambda t: -t[0])
    if not scored:  # the budget ended before the first start: report what the centre gave
        return LipschitzSearch(float(radius), 0.0, 0.0, 0.0, obj.count, time.perf_counter() - start)
    g = scored[0][2]
    for _, _, g0 in scored[:2]:
        g1 = _ascend(obj, g0, radius, score, alive)
        if score(g1) >= score(g):
            g = g1
    # pairs away from the centre: the slope at the best point found, both ways
    for h in (0.25, 0.05):
        if not alive():
            break
        e = _scaled(obj, _direction(obj, rng, 0), h * radius)
        a, b = obj.v0 + g * (1.0 - h), obj.v0 + g * (1.0 - h) + e
        Ka, Kb = obj.B(a), obj.B(b)
        best["pair"] = max(best["pair"], float(np.linalg.norm(Ka @ Ka.T - Kb @ Kb.T, 2)) / obj.dist(a, b))
    return LipschitzSearch(float(radius), best["pair"], best["centred"], best["dev"], obj.count,
                           time.perf_counter() - start, where[0].copy() if where else None)


# ----------------------------------------------------------------------------- the split region


@dataclass(frozen=True)
class RegionSearch:
    r"""What a search found on the region :math:`|V|_\rho \le r_V`, :math:`|\psi - \psi_0|_\rho \le r_q` of a
    split-region certificate (:mod:`ntkcheck.convergence.coercivity.split`): the other side of its bounds.

    Attributes
    ----------
    radius_V, radius_psi : float
    sigma_min : float
        Smallest :math:`\sigma_{\min}(B_V(\theta))` found (the certificate's ``sigma_low`` must be below).
    deviation_V : float
        Largest :math:`\|B_V(\theta) - B_V(\theta_0)\|_2` found (below the certified ``deviation``).
    kappa : float
        Largest :math:`\|B_\psi(\theta)\|_2 / |V|_\rho` found (below the certified :math:`\kappa`).
    K_change : float
        Largest :math:`\|K(\theta) - K_0\|_2 / r_V` found (below the certified centred ``L_K``).
    evaluations : int
    seconds : float
    """

    radius_V: float
    radius_psi: float
    sigma_min: float
    deviation_V: float
    kappa: float
    K_change: float
    evaluations: int
    seconds: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RegionSearch:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _project(obj: _Objective, g: np.ndarray, rV: float, rq: float) -> np.ndarray:
    """``g`` with its ``V`` part scaled to :math:`|\\cdot|_\\rho = r_V` and its ``(Q, b)`` part to ``r_q``."""
    nV = obj.params.V.size
    out = g.copy()
    for part, r in ((slice(0, nV), rV), (slice(nV, g.size), rq)):
        n = math.sqrt(float(out[part] @ out[part]) / obj.H)
        out[part] = out[part] * (r / n) if n > 0 else out[part]
    return out


def region_search(samples: Any, params: Any, *, layers: int, radius_V: float, radius_psi: float, T: float = 1.0,
                  loss: str = "readout", evaluations: int = 200, seconds: float = 10.0, seed: int = 0) -> RegionSearch:
    r"""Search the split region for the smallest :math:`\sigma_{\min}(B_V)` and the largest deviations.

    Random starts of the shapes of :func:`lipschitz_search` on the region's boundary, then
    projected steps along the gradient of the bottom singular value of :math:`B_V` (its derivative
    :math:`u^\top D B_V[\cdot]\,v` is a Hessian-vector product of :math:`u \cdot z`, by central
    differences) and of the top one of :math:`B_\psi`. Lower (or upper) bounds on the true extrema,
    never proofs.

    Examples
    --------
    >>> from ntkcheck.dynamics import init_params
    >>> x = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
    >>> s = region_search(x, init_params(2, 3, seed=0), layers=2, radius_V=1e-2, radius_psi=1e-3, evaluations=30)
    >>> bool(s.sigma_min > 0 and s.kappa > 0)
    True
    """
    if not (np.isfinite(radius_V) and radius_V > 0 and np.isfinite(radius_psi) and radius_psi >= 0):
        raise DomainError(f"radii must be finite, radius_V > 0, radius_psi >= 0; got {radius_V!r}, {radius_psi!r}")
    start = time.perf_counter()
    obj = _Objective(samples, params, int(layers), float(T), loss)
    rng = np.random.default_rng(seed)
    nV = params.V.size
    B0V = obj.B0[:, :nV]
    best = {"sigma": math.inf, "dev": 0.0, "kappa": 0.0, "K": 0.0}

    def alive() -> bool:
        return obj.count < evaluations and time.perf_counter() - start < seconds

    def score(g: np.ndarray) -> np.ndarray:
        B = obj.B(obj.v0 + g)
        BV, BQ = B[:, :nV], B[:, nV:]
        best["sigma"] = min(best["sigma"], float(np.linalg.svd(BV, compute_uv=False)[-1]))
        best["dev"] = max(best["dev"], float(np.linalg.norm(BV - B0V, 2)))
        vn = math.sqrt(float(g[:nV] @ g[:nV]) / obj.H)
        if vn > 0 and BQ.size:
            best["kappa"] = max(best["kappa"], float(np.linalg.norm(BQ, 2)) / vn)
        best["K"] = max(best["K"], float(np.linalg.norm(B @ B.T - obj.K0, 2)) / radius_V)
        return B

    def step(g: np.ndarray, which: str) -> np.ndarray:
        B = score(g)
        M = B[:, :nV] if which == "sigma" else B[:, nV:]
        U, S, Vt = np.linalg.svd(M, full_matrices=False)
        k = -1 if which == "sigma" else 0
        a = np.zeros(obj.v0.size)
        a[(slice(0, nV) if which == "sigma" else slice(nV, a.size))] = Vt[k]
        h = 1e-5 * max(1.0, float(np.linalg.norm(obj.v0 + g)) / math.sqrt(g.size))
        grad = (obj.B(obj.v0 + g + h * a) - obj.B(obj.v0 + g - h * a)).T @ U[:, k] / (2.0 * h)
        if which == "kappa":  # ||B_psi|| is first order in V: a power step on the sphere
            return _project(obj, np.sign(float(grad @ g) + 1e-300) * grad, radius_V, radius_psi)
        return _project(obj, g - 0.5 * _project(obj, grad, radius_V, radius_psi), radius_V, radius_psi)

    starts = [_project(obj, _direction(obj, rng, k % 4), radius_V, radius_psi) for k in range(8)]
    for g in starts:
        if not alive():
            break
        score(g)
    for k, which in enumerate(("sigma", "kappa", "sigma", "kappa")):
        g = starts[k % len(starts)]
        for _ in range(max(4, (evaluations - len(starts)) // 12)):
            if obj.count + 3 > evaluations or not alive():
                break
            g = step(g, which)
    return RegionSearch(float(radius_V), float(radius_psi), best["sigma"], best["dev"], best["kappa"], best["K"],
                        obj.count, time.perf_counter() - start)
