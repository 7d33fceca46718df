r"""What the experiments share: the default data, the overlap example, the model at initialisation.

``_Setup`` holds the outputs and the NTK :math:`K_0 = k\otimes I_q` at the initial
parameters with its eigenbasis; ``_weighted_flat`` / ``_from_weighted`` move between
outputs and the NTK's weighted coordinates :math:`u = W^{1/2}(z - y)`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cgf import as_laws
from . import _attention
from .model import (
    AttentionParams,
    _Batch,
    _check_loss,
    _forward,
    _outputs,
    _prepare,
    _weights,
    init_params,
)

__all__ = [
    "default_samples",
    "overlap_example",
]


def default_samples(seed: int = 0) -> tuple[list[np.ndarray], str]:
    """The CLI's default data and where it came from.

    The bundled ``screen_default.npz`` when the package ships it (its first four
    samples), else four seeded Gaussian samples of three tokens in ``d = 3`` generated
    here (``source`` says which).
    """
    from ..io.files import bundled_path, load_samples

    path = bundled_path("screen_default.npz")
    if path.exists():
        samples = load_samples(path)[:4]
        return samples, f"bundled {path.name} (first {len(samples)} samples)"
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3, 3)) for _ in range(4)], f"generated: 4 Gaussian samples of 3 tokens in d=3, seed {seed}"


def overlap_example(u: Sequence[float] = (2.0, 0.5), v: Sequence[float] = (-1.0, 2.0)) -> tuple[list[np.ndarray], np.ndarray]:
    r"""Row 1 of the Prop. 8 table in ``theory/ntk-prop8.md``: :math:`\{0,u\}, \{0,v\}, \{0,u,v,u+v\}` in ``d = 2``.

    :math:`\Lambda_3 = \Lambda_1 + \Lambda_2` (dependent, ``c = (1, 1, -1)``, ``alpha = 0``) and
    the three samples share the atom 0, so (seed 003 Prop. 8, condition (34)) the adjoint
    :math:`p_i = c_i\,d\delta_0/d\mu_i` is in the NTK kernel: ``p = (2, 0 | 2, 0 | -4, 0, 0, 0)``
    on the token slots (the atom 0 is listed first in every sample).

    Returns
    -------
    (samples, p) with ``p`` a (M,) array over the token slots in sample order.
    """
    u_, v_ = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    z = np.zeros(2)
    samples = [np.stack([z, u_]), np.stack([z, v_]), np.stack([z, u_, v_, u_ + v_])]
    p = np.array([2.0, 0.0, 2.0, 0.0, -4.0, 0.0, 0.0, 0.0])
    return samples, p


def _fit_slope(s: np.ndarray, y: np.ndarray) -> float:
    if len(s) < 2:
        return float("nan")
    return float(np.polyfit(s, y, 1)[0])


@dataclass(frozen=True)
class _Setup:
    """The model at initialisation: outputs, the NTK ``K_0 = k (x) I_q`` and its eigenbasis."""

    batch: _Batch
    params: AttentionParams
    layers: int
    T: float
    loss: str
    z0: np.ndarray
    lin: _attention._Linear
    evals: np.ndarray  # eigenvalues of K_0, ascending
    sqrtw: np.ndarray  # sqrt of the loss weights, broadcast to the outputs' shape

    @functools.cached_property
    def evecs(self) -> np.ndarray:
        """Eigenvectors of ``K_0`` as a dense matrix (columns, ordered as ``evals``).

        ``(rows d)^2`` entries at FixUp: prefer :meth:`coords` / :meth:`project`."""
        return np.kron(self.lin.U, np.eye(self.lin.q))

    def coords(self, u: np.ndarray) -> np.ndarray:
        """``evecs.T @ u`` without forming ``evecs``."""
        return self.lin.coords(u)

    def project(self, u: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Orthogonal projection of ``u`` on the eigenvectors where ``keep`` (over ``evals``) is True."""
        c = self.lin.coords(u)
        return self.lin.from_coords(np.where(keep, c, 0.0))


def _setup(samples: Any, params: AttentionParams, layers: int, T: float, loss: str) -> _Setup:
    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    layers, T = int(layers), float(T)
    XT, cache = _forward(batch, params, layers, T, keep=True)
    z0 = _outputs(batch, XT, loss)
    lin = _attention.linear_part(batch, params, layers, T, loss, cache)
    w = _weights(batch, loss)
    sqrtw = np.broadcast_to(np.sqrt(w)[..., None], z0.shape)
    return _Setup(batch, params, layers, T, loss, z0, lin, lin.full_evals(), sqrtw)


def _weighted_flat(st: _Setup, z: np.ndarray) -> np.ndarray:
    """Weighted outputs in the NTK's coordinates (rows of W^{1/2} J): real atoms only."""
    zw = st.sqrtw * z
    if st.loss == "readout":
        return zw.ravel()
    return zw[st.batch.mask].ravel()


def _from_weighted(st: _Setup, u: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_weighted_flat` (zero on padding)."""
    out = np.zeros(st.z0.shape)
    if st.loss == "readout":
        out[:] = u.reshape(st.z0.shape)
    else:
        out[st.batch.mask] = u.reshape(-1, st.z0.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(st.sqrtw > 0, out / np.where(st.sqrtw > 0, st.sqrtw, 1.0), 0.0)


def _targets_from(st: _Setup, z: np.ndarray) -> Any:
    """Targets for :func:`gradient_flow` from atom-level outputs (copies get their atom's)."""
    if st.loss == "readout":
        return z
    return st.batch.expand(z)


def _default_params(samples: Any, heads: int, layers: int, per_layer: bool, q_scale: float, b_scale: float, seed: int) -> AttentionParams:
    d = as_laws(samples)[0].dim
    return init_params(d, heads, layers=layers if per_layer else None, q_scale=q_scale, b_scale=b_scale, seed=seed)
