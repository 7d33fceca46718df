r"""Experiment (b): a target residual in the NTK kernel does not decay at the linear rate.

References: seed 003 Prop. 8 (necessity half, condition (34)), Thm. 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._records import restore
from ..cgf import as_laws
from ..errors import DomainError, InputError
from ._experiment import _from_weighted, _setup, _targets_from, _weighted_flat, overlap_example
from .flow import FlowResult, gradient_flow
from .model import init_params

__all__ = [
    "KernelPlateau",
    "kernel_plateau",
]


@dataclass(frozen=True)
class KernelPlateau:
    r"""Experiment (b): a target residual in the NTK kernel does not decay at the linear rate.

    The weighted residual :math:`u = W^{1/2}(z - y)` is split by the NTK at initialisation
    into its kernel part (eigenvalues below ``kernel_tol * lambda_max``) and its range part.

    Attributes
    ----------
    kernel_dim : dimension of the numerical kernel of :math:`K_0`
    lambda_min_0 : smallest eigenvalue (float64 zero, ~1e-17)
    lambda_plus : smallest eigenvalue on the range (the linear rate the range part gets)
    kernel_loss_ratio : :math:`\mathcal L_{ker}(s_{end})/\mathcal L_{ker}(0)` (plateau: close to 1)
    range_loss_ratio : :math:`\mathcal L_{rng}(s_{end})/\mathcal L_{rng}(0)`
    predicted_ratio : :math:`e^{-2\lambda_+ s_{end}}`, what the kernel part would reach at the range's slowest rate
    kernel_rate_measured : :math:`-\log(\text{kernel\_loss\_ratio})/s_{end}`
    """

    kernel_dim: int
    lambda_min_0: float
    lambda_plus: float
    lambda_max_0: float
    eps: float
    mix: float
    time_end: float
    kernel_loss_ratio: float
    range_loss_ratio: float
    predicted_ratio: float
    kernel_rate_measured: float
    kernel_loss: tuple[float, ...]
    range_loss: tuple[float, ...]
    flow: FlowResult = field(repr=False)
    kernel_source: str = "given"

    def __repr__(self) -> str:
        return (f"KernelPlateau(kernel_dim={self.kernel_dim}, lambda_plus={self.lambda_plus:.4g}: kernel loss x{self.kernel_loss_ratio:.4g}, "
                f"range loss x{self.range_loss_ratio:.3g} over s={self.time_end:.3g}; linear rate would give x{self.predicted_ratio:.3g})")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelPlateau:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d, flow=FlowResult.from_dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "kernel_dim", "lambda_min_0", "lambda_plus", "lambda_max_0", "eps", "mix", "time_end", "kernel_loss_ratio",
            "range_loss_ratio", "predicted_ratio", "kernel_rate_measured", "kernel_source")}
        out["kernel_loss"] = list(self.kernel_loss)
        out["range_loss"] = list(self.range_loss)
        out["flow"] = self.flow.to_dict()
        return out


def kernel_plateau(
    *,
    samples: Any = None,
    kernel_direction: np.ndarray | None = None,
    heads: int = 16,
    layers: int = 2,
    T: float = 1.0,
    eps: float = 1e-2,
    mix: float = 0.5,
    q_scale: float = 2.0,
    b_scale: float = 2.0,
    seed: int = 0,
    time_end: float | None = None,
    decades: float = 3.0,
    kernel_tol: float = 1e-10,
    n_records: int = 30,
    rtol: float = 1e-7,
    atol: float = 1e-12,
    progress: bool | None = None,
    time_budget: float | None = None,
) -> KernelPlateau:
    r"""Experiment (b), per-token loss: a residual in the NTK kernel (:func:`overlap_example` by default).

    The residual is :math:`z_0 - y = \varepsilon(\sqrt{1-\text{mix}^2}\,p\otimes e + \text{mix}\,r)`
    (weighted-normalised), ``p`` the kernel adjoint of seed 003 Prop. 8 (condition (34)),
    ``e`` a unit vector, ``r`` a random direction in the range of :math:`K_0`. At ``mix = 0``
    the initial point is stationary (the gradient vanishes exactly); ``mix > 0`` lets the
    parameters move, so the plateau is a property of the flow, not of a fixed point.

    ``kernel_direction``: one value per given token (copies of a token are averaged: the
    NTK acts on :math:`L^2(\mu_i)`) or per distinct atom. Omitted with custom ``samples``,
    the slowest eigenvector of :math:`K_0` is used when it is in the numerical kernel
    (eigenvalue below ``kernel_tol`` :math:`\lambda_{\max}`); ``kernel_source`` says which.

    References: seed 003 Prop. 8 (necessity half), Thm. 4 (its positivity assumption fails here).
    """
    if samples is None:
        samples, p = overlap_example()
        kernel_direction = p if kernel_direction is None else kernel_direction
    if not (0 <= mix < 1):
        raise DomainError(f"mix must be in [0, 1), got {mix!r}")
    if not (np.isfinite(eps) and eps > 0):
        raise DomainError(f"eps must be finite and > 0, got {eps!r}")
    d = as_laws(samples)[0].dim
    params = init_params(d, heads, q_scale=q_scale, b_scale=b_scale, seed=seed)
    st = _setup(samples, params, layers, T, "tokens")
    lamM = float(st.evals[-1])
    ker = st.evals < kernel_tol * lamM
    kdim = int(ker.sum())
    if kdim == 0:
        raise DomainError(f"the NTK at initialisation has no kernel (lambda_min / lambda_max = {st.evals[0] / lamM:.3g} "
                          f">= kernel_tol = {kernel_tol:g}): nothing plateaus; this is not a dependent-with-overlap case")
    lam_plus = float(st.evals[~ker][0])
    if kernel_direction is None:
        source = "computed"
        first = np.zeros(len(st.evals))
        first[0] = 1.0
        u_ker = st.lin.from_coords(first)  # the slowest eigenvector, in the kernel
    else:
        source = "given"
        pk = np.asarray(kernel_direction, dtype=np.float64).reshape(-1)
        n_tok, n_atoms = int(st.batch.n_tokens.sum()), int(st.batch.counts.sum())
        if pk.shape[0] == n_tok:  # per token: average the copies of each atom
            parts = np.split(pk, np.cumsum(st.batch.n_tokens)[:-1])
            pk = np.concatenate([np.bincount(t, weights=v, minlength=int(c)) / np.bincount(t, minlength=int(c))
                                 for t, v, c in zip(st.batch.tokens, parts, st.batch.counts)])
        elif pk.shape[0] != n_atoms:
            raise InputError(f"kernel_direction: expected {n_tok} values (one per token) or {n_atoms} "
                             f"(one per distinct atom), got {pk.shape[0]}")
        e = np.zeros(d)
        e[0] = 1.0
        # residual (z - y) proportional to p (x) e  <=>  u proportional to W^{1/2} p (x) e
        w_flat = st.sqrtw[..., 0][st.batch.mask]
        u_ker = np.kron(w_flat * pk, e)
        if not np.linalg.norm(u_ker) > 0:
            raise InputError("kernel_direction: is zero on every atom")
        u_ker /= np.linalg.norm(u_ker)
        off = float(np.linalg.norm(u_ker - st.project(u_ker, ker)))
        if off > 1e-6:
            raise DomainError(f"kernel_direction is not in the NTK kernel at initialisation (residual {off:.3g}); "
                              "check the shared atom and the coefficients")
    rng = np.random.default_rng(seed + 1)
    r = rng.standard_normal(len(st.evals))
    r -= st.project(r, ker)
    r /= np.linalg.norm(r)
    u0 = eps * (math.sqrt(1 - mix**2) * u_ker + mix * r)
    y = st.z0 - _from_weighted(st, u0)
    if time_end is None:
        time_end = decades * math.log(10.0) / (2.0 * lam_plus)
    flow = gradient_flow(samples, params, _targets_from(st, y), layers=layers, time_end=time_end, T=T, loss="tokens",
                         n_records=n_records, track_ntk=False, rtol=rtol, atol=atol, progress=progress,
                         time_budget=time_budget)
    kl, rl = [], []
    for z in flow.outputs:
        u = _weighted_flat(st, z - y)
        uk = st.project(u, ker)
        kl.append(0.5 * float(uk @ uk))
        rl.append(0.5 * float((u - uk) @ (u - uk)))
    s_end = flow.s[-1]
    kratio = kl[-1] / kl[0]
    rratio = rl[-1] / rl[0] if mix > 0 else float("nan")  # mix = 0: the range part is rounding noise
    return KernelPlateau(
        kdim, float(st.evals[0]), lam_plus, lamM, float(eps), float(mix), float(s_end), float(kratio), float(rratio),
        float(math.exp(-2 * lam_plus * s_end)), float(-math.log(kratio) / s_end), tuple(kl), tuple(rl), flow, source,
    )
