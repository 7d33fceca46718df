r"""The attention model, its loss and its gradient flow field, evaluated in ball arithmetic.

Private to :mod:`ntkcheck.convergence.enclosure`. The same model as :mod:`ntkcheck.dynamics.model`
(heads shared over depth, ``L`` Euler layers, the softmax over the distinct atoms with their
masses), written once against the operations of :class:`~._series.Series` so that one code path
gives, for parameters that are a :class:`~._series.Taylor` series in the flow time, the Taylor
coefficients of the field along the path, and for a :class:`~._series.Dual` bundle, Jacobians and
the Hessian of the loss. Every input is exact or a ball around the exact value: the atoms (the
float64 data the flow runs on), their exact masses (rationals, enclosed), the targets (exact
floats; a token target averaged over copies is enclosed), the step ``T / (L H)`` (enclosed).

The softmax is shifted by a float constant per row, :math:`\pi_k \propto m_k e^{s_k - c}`, which
is exact in real arithmetic for any ``c``. Padding atoms (samples with fewer atoms) repeat the first
atom with mass 0, so their scores never exceed the row's largest real one.

The adjoint is the discrete adjoint of the Euler layers (``theory/flow-numerics.md``):
with :math:`G^L = \partial\mathcal L/\partial X^L`,
:math:`G^{l} = G^{l+1} + (\partial_X F_l)^\top G^{l+1}` and the parameter gradients
:math:`\sum_l\langle G^{l+1}, \partial_\theta F_l\rangle`, the same formulas as
:func:`ntkcheck.dynamics._attention._backward` (checked against it in the tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ... import _budget
from ._series import Series, Taylor, U

__all__ = ["Model", "model_of"]


@dataclass(frozen=True, eq=False)
class Model:
    """The exact model data (shared heads) for the ball evaluations.

    Attributes
    ----------
    X : (n, S, d) atoms, padding rows a copy of the sample's first atom
    mass_mid, mass_rad : (n, S) masses enclosed (0 on padding)
    Y_mid, Y_rad : targets on the outputs, (n, d) readout or (n, S, d) tokens, enclosed
    floor_up : an upper bound of the part of the loss no parameter changes (copies with different targets)
    layers, T, heads, dim, loss :
    c_mid, c_rad : the step :math:`T/(LH)` enclosed
    mobility : ``H`` (exact)
    """

    X: np.ndarray
    mass_mid: np.ndarray
    mass_rad: np.ndarray
    Y_mid: np.ndarray
    Y_rad: np.ndarray
    floor_up: float
    layers: int
    T: float
    heads: int
    dim: int
    loss: str
    c_mid: float
    c_rad: float

    @property
    def mobility(self) -> float:
        return float(self.heads)

    @property
    def n_params(self) -> int:
        H, d = self.heads, self.dim
        return H * d * (2 * d + 1)

    def split(self, theta: Series) -> tuple[Series, Series, Series]:
        """``(V, Q, b)`` from a flat parameter series laid out as ``AttentionParams.flat``."""
        H, d = self.heads, self.dim
        nv = H * d * d
        return (theta[..., :nv].reshape(*theta.shape[:-1], H, d, d),
                theta[..., nv : 2 * nv].reshape(*theta.shape[:-1], H, d, d),
                theta[..., 2 * nv :].reshape(*theta.shape[:-1], H, d))


def _mass_balls(laws: list[Any], S: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(laws)
    mid, rad = np.zeros((n, S)), np.zeros((n, S))
    for i, law in enumerate(laws):
        for a, q in enumerate(law.exact_weights()):
            f = float(q)
            mid[i, a] = f
            rad[i, a] = float(np.nextafter(float(abs(Fraction(f) - q)), np.inf))
    return mid, rad


def _token_targets(batch: Any, targets: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """Atom targets (the exact mean over copies, enclosed) and an upper bound of the floor (exact rationals)."""
    n, S, d = batch.X.shape
    Ym, Yr = np.zeros((n, S, d)), np.zeros((n, S, d))
    floor = Fraction(0)
    for i, t in enumerate(targets):
        t = np.asarray(t, dtype=np.float64)
        idx = batch.tokens[i]
        for a in range(int(batch.counts[i])):
            rows = t[idx == a]
            for k in range(d):
                vals = [Fraction(float(v)) for v in rows[:, k]]
                mean = sum(vals, Fraction(0)) / len(vals)
                Ym[i, a, k] = float(mean)
                Yr[i, a, k] = float(np.nextafter(float(abs(Fraction(Ym[i, a, k]) - mean)), np.inf))
                floor += sum(((v - mean) ** 2 for v in vals), Fraction(0)) / (2 * n * len(idx))
    return Ym, Yr, float(np.nextafter(float(floor), np.inf)) if floor else 0.0


def model_of(samples: Any, heads: int, dim: int, targets: Any, *, layers: int, T: float, loss: str) -> Model:
    """The :class:`Model` of ``samples`` (arrays or Empirical laws) with ``targets`` as the flow takes them."""
    from ...cgf import as_laws
    from ...dynamics._attention import _Batch

    batch = _Batch.of(samples)
    laws = as_laws(samples)
    n, S, d = batch.X.shape
    X = batch.X.copy()
    for i in range(n):
        X[i, batch.counts[i]:] = X[i, 0]
    mm, mr = _mass_balls(laws, S)
    if loss == "readout":
        Ym = np.asarray(targets, dtype=np.float64).reshape(n, d)
        Yr, floor = np.zeros_like(Ym), 0.0
    else:
        Ym, Yr, floor = _token_targets(batch, targets)
    c = float(T) / (int(layers) * int(heads))
    return Model(X, mm, mr, Ym, Yr, floor, int(layers), float(T), int(heads), int(dim), loss, c,
                 float(np.nextafter(U * c, np.inf)))


# ----------------------------------------------------------------------------- forward


def _const(like: Any, value: np.ndarray, rad: np.ndarray | None = None) -> Any:
    return like.const_like(value, rad)


def forward(mdl: Model, V: Series, Q: Series, b: Series) -> tuple[Series, list[tuple[Series, ...]]]:
    r"""``L`` layers :math:`X \leftarrow X + \frac{T}{LH}\sum_h V_h\,m(Q_h x + b_h; X)`; returns :math:`X^L` and,
    per layer, ``(X, A, P, M)`` (inputs, queries, softmax weights, head outputs; rows ``(atom, head)``)."""
    n, S, d = mdl.X.shape
    H = mdl.heads
    c = _const(V, np.float64(mdl.c_mid), np.float64(mdl.c_rad))
    mass = _const(V, mdl.mass_mid[:, None, :], mdl.mass_rad[:, None, :])
    X: Series = _const(V, mdl.X)
    Qs = Q.reshape(H * d, d).transpose(1, 0)
    bs = b.reshape(H * d)
    Vs = V.transpose(0, 2, 1).reshape(H * d, d)
    cache = []
    for _ in range(mdl.layers):
        _budget.checkpoint("a layer of the enclosure")  # stops an abandoned hand-off search here
        A = (X.reshape(n * S, d) @ Qs + bs).reshape(n, S * H, d)
        scores = A @ X.transpose(0, 2, 1)
        shift = scores.center().max(axis=-1, keepdims=True)
        E = (scores - _const(V, shift)).exp() * mass
        P = E * E.sum(-1, keepdims=True).recip()
        M = P @ X
        Uh = M.reshape(n, S, H * d) @ Vs
        cache.append((X, A, P, M))
        X = X + Uh * c
    return X, cache


def outputs(mdl: Model, XT: Series) -> Series:
    """Readout: :math:`z_i = \\sum_a m_{ia} x^L_{ia}`; tokens: the atoms' positions."""
    if mdl.loss == "readout":
        mass = _const(XT, mdl.mass_mid[..., None], mdl.mass_rad[..., None])
        return (XT * mass).sum(1)
    return XT


def _weights(mdl: Model, like: Series) -> Series:
    n = mdl.X.shape[0]
    if mdl.loss == "readout":
        return _const(like, np.ones((n, 1)))
    w = _const(like, mdl.mass_mid[..., None], mdl.mass_rad[..., None])
    return w.scale(1.0 / n) if n & (n - 1) == 0 else w * _const(like, np.float64(1.0 / n), np.float64(U / n))


def loss_and_seed(mdl: Model, z: Series) -> tuple[Series, Series]:
    r"""The loss :math:`\frac12\sum w|z - y|^2` (without the floor) and :math:`\partial\mathcal L/\partial X^L`."""
    r = z - _const(z, mdl.Y_mid, mdl.Y_rad)
    w = _weights(mdl, z)
    wr = r * w
    val = (wr * r).reshape(-1).sum(-1).scale(0.5)
    if mdl.loss == "readout":
        mass = _const(z, mdl.mass_mid[..., None], mdl.mass_rad[..., None])
        G = wr.reshape(z.shape[0], 1, z.shape[1]) * mass
    else:
        G = wr
    return val, G


# ----------------------------------------------------------------------------- adjoint


def backward(mdl: Model, cache: list[tuple[Series, ...]], V: Series, Q: Series, G: Series,
             per_sample: bool = False) -> tuple[Series, Series, Series]:
    r"""Parameter gradients for adjoint seeds ``G`` of shape ``(B, n, S, d)``: ``gV, gQ`` of shape
    ``(B, [n,] H, d, d)``, ``gb`` ``(B, [n,] H, d)`` (``per_sample``: not summed over samples)."""
    n, S, d = mdl.X.shape
    H = mdl.heads
    B = G.shape[0]
    c = _const(V, np.float64(mdl.c_mid), np.float64(mdl.c_rad))
    Vc = V.transpose(1, 0, 2).reshape(d, H * d)
    Qr = Q.reshape(H * d, d)
    gV = gQ = gb = None
    for X, A, P, M in reversed(cache):
        g = (G.transpose(0, 1, 3, 2) @ M.reshape(n, S, H * d)).reshape(B, n, d, H, d).transpose(0, 1, 3, 2, 4)
        Gm = ((G @ Vc) * c).reshape(B, n, S * H, d)
        dS = Gm @ X.transpose(0, 2, 1) - (Gm * M).sum(-1, keepdims=True)
        dS = dS * P
        dA = dS @ X
        dAr = dA.reshape(B, n, S, H * d)
        q = (dAr.transpose(0, 1, 3, 2) @ X).reshape(B, n, H, d, d)
        bb = dA.reshape(B, n, S, H, d).sum(2)
        gV = g if gV is None else gV + g
        gQ = q if gQ is None else gQ + q
        gb = bb if gb is None else gb + bb
        dX = P.transpose(0, 2, 1) @ Gm + dS.transpose(0, 1, 3, 2) @ A + dAr @ Qr
        G = G + dX
    assert gV is not None and gQ is not None and gb is not None
    gV = gV * c
    if not per_sample:
        gV, gQ, gb = gV.sum(1), gQ.sum(1), gb.sum(1)
    return gV, gQ, gb


def _flat(gV: Series, gQ: Series, gb: Series) -> Series:
    """Gradients ``(B, ...)`` as flat vectors ``(B, P)`` in the layout of ``AttentionParams.flat``."""
    B = gV.shape[0]
    return gV.reshape(B, -1).concat([gQ.reshape(B, -1), gb.reshape(B, -1)])


def field(mdl: Model, theta: Series, exact_seed: bool = True) -> tuple[Series, Series]:
    r"""The loss (without the floor) and the flow field :math:`f(\theta) = -H\nabla\mathcal L(\theta)` (flat).

    ``exact_seed=False`` (for :class:`~._series.Dual` bundles) keeps the residual's tangent out of the
    adjoint seed: the derivative of the result is then :math:`-H\sum_i r_i\nabla^2 z_i` (the part of the
    loss Hessian that is not :math:`J^\top WJ`)."""
    V, Q, b = mdl.split(theta)
    XT, cache = forward(mdl, V, Q, b)
    z = outputs(mdl, XT)
    val, G = loss_and_seed(mdl, z)
    if not exact_seed:
        G = G.value_only()
    gV, gQ, gb = backward(mdl, cache, V, Q, G.reshape(1, *G.shape))
    return val, _flat(gV, gQ, gb)[0].scale(-mdl.mobility)


def as_taylor(vec: np.ndarray) -> Taylor:
    """A point as a constant Taylor series (one coefficient, radius 0)."""
    return Taylor(np.asarray(vec, dtype=np.float64)[None].copy(), np.zeros((1,) + np.shape(vec)))


def sqrt_up(x: float) -> float:
    return math.sqrt(x) * (1.0 + 4.0 * U) + 2.0**-1000
