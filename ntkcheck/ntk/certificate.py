r"""Certificate of positivity of the NTK Gram: :math:`\lambda_{\min}` bounded below in Arb.

The Gram :math:`W^{1/2} K W^{1/2} = F F^T` on distinct atoms (:mod:`ntkcheck.ntk.gram_matrix`)
is assembled in ball arithmetic from the exact token, mass and head values
(:func:`gram_matrix_arb`); once ``arb_mat.inv`` encloses its inverse,
:math:`\lambda_{\min} \ge 1/\|G^{-1}\|_F` (:func:`certify_lambda_min`, :class:`GramCertificate`).
Small problems only (at most 256 distinct atoms).

References: seed 003 Prop. 5; ``theory/certificates.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb, arb_mat, ctx, fmpq

from ..cgf.empirical import Empirical, as_laws
from ..errors import PrecisionError
from .features import Heads, _as_heads, _atom_count

__all__ = ["GramCertificate", "gram_matrix_arb", "certify_lambda_min"]

#: certification is attempted only up to this many distinct atoms (Arb, Python-level exps).
MAX_CERTIFY_TOKENS = 256


# ------------------------------------------------------------------------ certification


@dataclass(frozen=True)
class GramCertificate:
    r"""Result of the Arb certification of :math:`\lambda_{\min}(F F^T) > 0`.

    ``kind="arb-inverse-frobenius"``: the Gram was built in ball arithmetic from the
    exact token and head values, ``arb_mat.inv`` succeeded (so every matrix in the ball,
    in particular the exact Gram, is invertible), and since the exact Gram is
    :math:`F F^T \succeq 0`, :math:`\lambda_{\min} = 1/\|G^{-1}\|_2 \ge 1/\|G^{-1}\|_F`,
    bounded below rigorously by ``lower_bound``. ``kind="inconclusive"``: no precision up
    to ``max_bits`` separated the Gram from singular matrices (as it must be when the
    Gram is singular); ``lower_bound`` is None.
    """

    kind: str
    lower_bound: float | None
    bits: int
    detail: str

    @property
    def positive(self) -> bool:
        return self.lower_bound is not None and self.lower_bound > 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "lower_bound": self.lower_bound, "bits": self.bits, "detail": self.detail}

    def __repr__(self) -> str:
        if self.positive:
            return f"GramCertificate(lambda_min >= {self.lower_bound:.6g}, {self.kind}, {self.bits} bits)"
        return f"GramCertificate(inconclusive at {self.bits} bits: {self.detail})"


def gram_matrix_arb(samples: Any, heads: Heads, prec: int) -> arb_mat:
    r"""The Gram :math:`W^{1/2} K W^{1/2}` on distinct atoms as an Arb ball matrix at ``prec`` bits.

    Atoms, masses and heads are converted exactly (every double is a dyadic rational, the
    masses are exact rationals); the softmax weights
    :math:`\pi_{a'} \propto m_{ia'} e^{\langle Q x_{ia} + b, x_{ia'}\rangle}` are evaluated in
    ball arithmetic with a shift by the float64 row maximum (any shift is exact algebra;
    this one keeps the exponentials bounded). Entry
    :math:`G_{(ia),(i'a')} = \sqrt{m_{ia} m_{i'a'}}\, H^{-1} \sum_h \langle\phi_{ia}^h, \phi_{i'a'}^h\rangle`.
    """
    laws = as_laws(samples)
    return _gram_arb(laws, _as_heads(heads, laws[0].dim), prec)


def _arb_q(q: Any) -> arb:
    """The exact rational ``q`` (Fraction) as a ball at the current precision."""
    return arb(fmpq(q.numerator, q.denominator))


def _gram_arb(laws: Sequence[Empirical], heads: Heads, prec: int) -> arb_mat:
    H, d = heads.count, heads.dim
    old = ctx.prec
    ctx.prec = int(prec)
    try:
        rows: list[list[arb]] = []  # rows of F (without the weight), concatenated over heads
        sw: list[arb] = []
        Qa = [arb_mat([[arb(float(v)) for v in row] for row in heads.Q[h]]) for h in range(H)]
        ba = [[arb(float(v)) for v in heads.b[h]] for h in range(H)]
        for law in laws:
            X = law.atoms
            XA = arb_mat([[arb(float(v)) for v in row] for row in X])
            mass = [_arb_q(q) for q in law.weights]
            N = X.shape[0]
            feats: list[list[arb]] = [[] for _ in range(N)]
            XT = XA.transpose()
            for h in range(H):
                A = XA * Qa[h].transpose()  # rows: Q x_j (exact inputs, ball products)
                A = arb_mat([[A[j, k] + ba[h][k] for k in range(d)] for j in range(N)])
                Sc = A * XT  # scores <Q x_j + b, x_k>
                shift = (X @ heads.Q[h].T + heads.b[h]) @ X.T
                P = arb_mat(N, N)
                for j in range(N):
                    m = arb(float(shift[j].max()))
                    e = [mass[k] * (Sc[j, k] - m).exp() for k in range(N)]
                    tot = sum(e, arb(0))
                    for k in range(N):
                        P[j, k] = e[k] / tot
                Phi = P * XA  # (N, d): softmax-weighted means
                for j in range(N):
                    feats[j].extend(Phi[j, k] for k in range(d))
            rows.extend(feats)
            sw.extend([(mass[j] / H).sqrt() for j in range(N)])
        M = len(rows)
        Fm = arb_mat([[sw[r] * v for v in rows[r]] for r in range(M)])
        return Fm * Fm.transpose()
    finally:
        ctx.prec = old


def _arb_upper(x: arb) -> float:
    """A float that is >= every point of the ball ``x`` (rounded outward)."""
    return float(np.nextafter(float(x.mid()) + float(x.rad()), np.inf)) * (1 + 2**-50)


def certify_lambda_min(samples: Any, heads: Heads, *, max_bits: int = 2048, start_bits: int = 128) -> GramCertificate:
    r"""Rigorous lower bound on :math:`\lambda_{\min}(W^{1/2} K W^{1/2})` in Arb, or inconclusive.

    The Gram is assembled on distinct atoms (:func:`gram_matrix_arb`). Doubles the
    precision from ``start_bits`` up to ``max_bits`` until ``arb_mat.inv`` certifies that
    the ball Gram is invertible; then :math:`\lambda_{\min} \ge 1/\|G^{-1}\|_F` (valid
    because the exact Gram is :math:`F F^T \succeq 0`). A singular Gram is never
    certified: its ball always contains singular matrices.
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    return _certify(laws, heads, max_bits=max_bits, start_bits=start_bits)


def _certify(laws: Sequence[Empirical], heads: Heads, *, max_bits: int = 2048, start_bits: int = 128) -> GramCertificate:
    M = _atom_count(laws)
    if M > MAX_CERTIFY_TOKENS:
        raise PrecisionError(
            f"certify: {M} distinct atoms; the Arb certification is limited to {MAX_CERTIFY_TOKENS} "
            "(it evaluates every softmax weight in ball arithmetic)"
        )
    if max_bits < 53:
        raise PrecisionError(f"certify: max_bits={max_bits} is below double precision (53)")
    bits = min(start_bits, max_bits)
    last = ""
    while True:
        G = _gram_arb(laws, heads, bits)
        old = ctx.prec
        ctx.prec = bits
        try:
            Ginv = G.inv()
            fro2 = sum((Ginv[r, c] ** 2 for r in range(M) for c in range(M)), arb(0))
            ub = _arb_upper(fro2.sqrt())
        except ZeroDivisionError:
            last = f"arb_mat.inv could not separate the Gram from singular matrices at {bits} bits"
            ub = None
        finally:
            ctx.prec = old
        if ub is not None and math.isfinite(ub) and ub > 0:
            lb = float(np.nextafter(1.0 / ub, 0.0))
            return GramCertificate("arb-inverse-frobenius", lb, bits,
                                   f"lambda_min >= 1/||G^-1||_F with G^-1 enclosed at {bits} bits")
        if bits >= max_bits:
            return GramCertificate("inconclusive", None, bits, last or "the inverse ball was unbounded")
        bits = min(2 * bits, max_bits)
