r"""Certified extreme eigenvalues of the NTK at FixUp, :math:`K_0 = k \otimes I_d`.

At FixUp the NTK of the model of :mod:`ntkcheck.dynamics.model` (heads shared over depth) is
:math:`K_0 = T^2\,G_r\otimes I_d` for the readout loss, :math:`(G_r)_{ii'} = \frac1H\sum_h
\langle\bar\phi_{ih}, \bar\phi_{i'h}\rangle` (:func:`ntkcheck.convergence.lipschitz.readout_ntk_fixup`),
and :math:`K_0 = \frac{T^2}{n}\,G\otimes I_d` for the per-token loss, ``G`` the token Gram
:math:`W^{1/2}\mathcal K W^{1/2}` of ``theory/ntk-prop8.md``. Both come from the Gram that
:func:`ntkcheck.ntk.certificate.routes.gram_matrix_arb` encloses in ball arithmetic from the exact token,
mass and head values: :math:`G_r = P G P^\top` with :math:`P_{i,(i,a)} = \sqrt{m_{ia}}`. A Cholesky
factorisation of :math:`k - tI` (or :math:`tI - k`) in ball arithmetic whose every pivot is a
positive ball proves :math:`\lambda_{\min}(k) > t` (or :math:`\lambda_{\max}(k) < t`) for every
matrix in the ball, the exact one included.

References: seed 002 Def. 8.4, Thm. 8.5; ``theory/local-convergence.md``, "Certified spectrum".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._precision import flint_prec
from .._records import restore

__all__ = [
    "CertifiedSpectrum",
    "certified_spectrum",
]

#: working precision (bits) of the ball Gram and its Cholesky factorisations
_PREC = 128
#: relative gaps below the float64 eigenvalue tried for the lower bound (above, for the upper)
_GAPS = (1e-9, 1e-6, 1e-3, 0.1)


@dataclass(frozen=True)
class CertifiedSpectrum:
    r"""Proved bounds :math:`\lambda_{\min}(K_0) \ge` ``lower`` and :math:`\lambda_{\max}(K_0) \le` ``upper``.

    ``lower`` is 0 when no positive lower bound was proved; ``how`` says how the bounds were
    obtained (``"arb-cholesky"``: ball Gram and ball Cholesky; ``"float64 (not proved)"``: the
    float64 eigenvalues, used when the Gram is too large for the ball route or the centre is
    not FixUp).
    """

    lower: float
    upper: float
    lambda_min_float: float
    lambda_max_float: float
    proved: bool
    how: str
    #: the Arb ball matrix ``k`` of :math:`K_0 = k \otimes I_d` when proved (not written by ``to_dict``)
    kernel: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CertifiedSpectrum:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "kernel"}


def _ball_kernel(samples: Any, params: Any, T: float, loss: str) -> Any:
    """The small matrix ``k`` of :math:`K_0 = k\\otimes I_d` as an Arb ball matrix."""
    from flint import arb, arb_mat, fmpq

    from ..cgf import as_laws
    from ..ntk.certificate.routes import gram_matrix_arb
    from ..ntk.gram_matrix.features import Heads

    laws = as_laws(samples)
    G = gram_matrix_arb(laws, Heads(params.Q, params.b), _PREC)
    with flint_prec(_PREC):
        T2 = arb(fmpq(*float(T).as_integer_ratio())) ** 2
        if loss == "tokens":
            return G * (T2 / len(laws))
        M = G.nrows()
        P = arb_mat(len(laws), M)
        col = 0
        for i, law in enumerate(laws):
            for q in law.weights:
                P[i, col] = arb(fmpq(q.numerator, q.denominator)).sqrt()
                col += 1
        return (P * G * P.transpose()) * T2


def _cholesky_positive(A: Any, n: int) -> bool:
    """Whether the ball Cholesky of the symmetric ``A`` (``n x n``) has only positive pivots."""

    with flint_prec(_PREC):
        L = [[A[i, j] for j in range(n)] for i in range(n)]
        for j in range(n):
            piv = L[j][j] - sum((L[j][k] * L[j][k] for k in range(j)), 0 * L[j][j])
            if not piv > 0:
                return False
            piv = piv.sqrt()
            L[j][j] = piv
            for i in range(j + 1, n):
                L[i][j] = (L[i][j] - sum((L[i][k] * L[j][k] for k in range(j)), 0 * L[i][j])) / piv
    return True


def _shifted(k: Any, t: float, sign: int) -> Any:
    """``k - tI`` (sign +1) or ``tI - k`` (sign -1), with ``t`` exact."""
    from flint import arb, arb_mat, fmpq

    n = k.nrows()
    with flint_prec(_PREC):
        tt = arb(fmpq(*float(t).as_integer_ratio()))
        out = arb_mat(n, n)
        for i in range(n):
            for j in range(n):
                v = k[i, j] if sign > 0 else -k[i, j]
                out[i, j] = v - tt if (i == j and sign > 0) else (v + tt if i == j else v)
        return out


def certified_spectrum(samples: Any, params: Any, *, layers: int = 1, T: float = 1.0, loss: str = "readout",
                       max_atoms: int = 256) -> CertifiedSpectrum:
    r"""Proved bounds on :math:`\lambda_{\min}` and :math:`\lambda_{\max}` of the FixUp NTK :math:`K_0`.

    Parameters
    ----------
    samples : list of (N_i, d) arrays or Empirical laws
    params : ntkcheck.dynamics.model.AttentionParams
        Heads shared over depth with ``V = 0``; otherwise the float64 spectrum of the dense NTK
        is returned with ``proved=False``.
    layers : int
        ``L`` (at FixUp :math:`K_0` does not depend on it).
    T : float
        Depth horizon.
    loss : {"readout", "tokens"}
    max_atoms : int
        Distinct atoms up to which the ball Gram is built (its cost grows like atoms x heads x
        tokens per sample).

    Returns
    -------
    CertifiedSpectrum

    Examples
    --------
    >>> from ntkcheck.dynamics import init_params
    >>> x = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
    >>> s = certified_spectrum(x, init_params(2, 6, seed=0))
    >>> s.proved, bool(0 < s.lower <= s.lambda_min_float <= s.lambda_max_float <= s.upper)
    (True, True)
    """
    from ..cgf import as_laws
    from ..dynamics.ntk import ntk_spectrum

    spec = ntk_spectrum(samples, params, layers=layers, T=T, loss=loss)  # type: ignore[arg-type]
    lo_f, hi_f = spec.lambda_min, spec.lambda_max
    if params.per_layer or np.any(params.V) or sum(law.n_atoms for law in as_laws(samples)) > max_atoms:
        return CertifiedSpectrum(max(lo_f, 0.0), hi_f, lo_f, hi_f, False, "float64 (not proved)")
    k = _ball_kernel(samples, params, T, loss)
    n = k.nrows()
    lower = 0.0
    for gap in _GAPS:
        t = lo_f - gap * max(abs(lo_f), 1e-300) - 1e-15 * hi_f
        if t <= 0:
            break
        if _cholesky_positive(_shifted(k, t, +1), n):
            lower = float(np.nextafter(t, 0.0))
            break
    upper = math.inf
    for gap in _GAPS:
        t = hi_f * (1.0 + gap) + 1e-300
        if _cholesky_positive(_shifted(k, t, -1), n):
            upper = float(np.nextafter(t, np.inf))
            break
    proved = math.isfinite(upper)
    return CertifiedSpectrum(lower, upper if proved else hi_f, lo_f, hi_f, proved,
                             "arb-cholesky" if proved else "float64 (not proved)", k if proved else None)
