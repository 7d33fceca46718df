r"""The NTK over all parameters (``V``, ``Q``, ``b``) of the model of :mod:`ntkcheck.dynamics.model`.

:math:`K = m\,W^{1/2} J J^T W^{1/2}` with :math:`J = \partial z/\partial\theta` on the weighted
outputs, the kernel of the gradient flow (:mod:`ntkcheck.dynamics.flow`, which derives it and
gives its FixUp forms). At FixUp it is :math:`k\otimes I_d` with ``k`` from the features.

References: seed 002 Def. 8.4; seed 003 Thm. 4 and Prop. 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._records import restore
from . import _attention
from .model import AttentionParams, LossKind, _Batch, _Cache, _check_loss, _forward, _prepare

__all__ = [
    "NTKSpectrum",
    "ntk_spectrum",
]


@dataclass(frozen=True)
class NTKSpectrum:
    """Spectrum of the NTK :math:`K = m W^{1/2} J J^T W^{1/2}` on the output space.

    Attributes
    ----------
    eigenvalues : tuple of float
        Ascending, length = number of weighted outputs (``d`` times the number of distinct
        atoms for ``"tokens"``, ``n d`` for ``"readout"``).
    lambda_min, lambda_max : float
    loss : str
    """

    eigenvalues: tuple[float, ...]
    loss: str

    @property
    def lambda_min(self) -> float:
        return self.eigenvalues[0]

    @property
    def lambda_max(self) -> float:
        return self.eigenvalues[-1]

    def __repr__(self) -> str:
        return f"NTKSpectrum({self.loss}: lambda_min={self.lambda_min:.4g}, lambda_max={self.lambda_max:.4g}, size={len(self.eigenvalues)})"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NTKSpectrum:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {"loss": self.loss, "lambda_min": self.lambda_min, "lambda_max": self.lambda_max, "eigenvalues": list(self.eigenvalues)}


def _ntk_eigenvalues(batch: _Batch, params: AttentionParams, layers: int, T: float, loss: str,
                     cache: _Cache | None = None) -> np.ndarray:
    """Eigenvalues of K: at FixUp from the small matrix k of K = k (x) I_d, else dense."""
    if cache is None:
        _, cache = _forward(batch, params, layers, T, keep=True)
    if _attention._is_fixup(params):
        return _attention._fixup_linear(batch, params, layers, T, loss, cache).full_evals()
    return np.linalg.eigvalsh(_attention._ntk_dense(batch, params, layers, T, loss, cache))


def ntk_spectrum(samples: Any, params: AttentionParams, *, layers: int, T: float = 1.0, loss: LossKind = "tokens") -> NTKSpectrum:
    r"""Eigenvalues of the NTK at ``params`` over all parameter directions (``V``, ``Q``, ``b``).

    .. math::

        K = m\,W^{1/2} J J^T W^{1/2},\quad J = \partial z/\partial\theta,\qquad
        \frac{d}{ds}W^{1/2}(z - y) = -K\,W^{1/2}(z - y)

    along :func:`gradient_flow`. The outputs are the distinct atoms of each sample with
    their masses as weights (the operator on :math:`L^2(\mu_i)`; copies of a token are one
    point). At FixUp, tokens loss, shared heads: :math:`K = (T^2/n)\,F F^T\otimes I_d` with
    ``F`` the distinct-atom features of ``ntkcheck.ntk.gram_matrix.pipeline`` (weights = masses), computed from
    that small matrix; away from FixUp the dense NTK (``V`` part by a kernel trick, ``Q, b``
    parts from per-sample Jacobians).

    References: seed 002 Def. 8.4, seed 003 Thm. 4 and Prop. 5.
    """
    _check_loss(loss)
    batch = _prepare(samples, params, layers, T)
    ev = _ntk_eigenvalues(batch, params, int(layers), float(T), loss)
    return NTKSpectrum(tuple(float(v) for v in ev), loss)
