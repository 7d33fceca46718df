r"""Certificate of positivity of the NTK Gram: :math:`\lambda_{\min}` bounded below in Arb.

The Gram :math:`W^{1/2} K W^{1/2} = F F^T` on distinct atoms (:mod:`ntkcheck.ntk.gram_matrix`)
is assembled in ball arithmetic from the exact token, mass and head values
(:func:`gram_matrix_arb`); once ``arb_mat.inv`` encloses its inverse,
:math:`\lambda_{\min} \ge 1/\|G^{-1}\|_F` (:func:`certify_lambda_min`, :class:`GramCertificate`).
Small problems only (at most 256 distinct atoms).

At scale, :func:`certify_positive` proves :math:`\lambda_{\min}(G) \ge c > 0` at float64
speed: a rigorous enclosure of the float64 features (an error analysis of the queries,
scores, softmax and means), the rounding of the Gram product (:math:`\gamma_k` bounds on
:math:`|F||F|^T`), and a floating-point Cholesky of :math:`G - tI` with Rump's verified
criterion; Weyl's inequality joins them (:class:`PositivityCertificate`).

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
from . import _rounding as rnd
from .features import Heads, _as_heads, _atom_count, _features

__all__ = [
    "GramCertificate",
    "gram_matrix_arb",
    "certify_lambda_min",
    "PositivityCertificate",
    "certify_positive",
    "certify_gram_enclosure",
]

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
    Fm = _features_arb(laws, heads, prec)
    old = ctx.prec
    ctx.prec = int(prec)
    try:
        return Fm * Fm.transpose()
    finally:
        ctx.prec = old


def _features_arb(laws: Sequence[Empirical], heads: Heads, prec: int) -> arb_mat:
    r"""The feature matrix ``F`` (rows scaled by :math:`\sqrt{m_{ia}/H}`) as an Arb ball matrix."""
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
        return arb_mat([[sw[r] * v for v in rows[r]] for r in range(M)])
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


# ------------------------------------------------------------- certified positivity at scale


@dataclass(frozen=True)
class PositivityCertificate:
    r"""Result of :func:`certify_positive` / :func:`certify_gram_enclosure`.

    ``lower_bound`` (when ``positive``) holds in exact arithmetic:
    :math:`\lambda_{\min}(W^{1/2} K W^{1/2}) \ge` ``lower_bound`` ``> 0``. ``method``:
    ``"float64-cholesky"`` (enclosure + Rump's Cholesky criterion + Weyl),
    ``"arb-inverse-frobenius"`` (the Arb route, small ``M``), or ``"refused"`` (nothing
    proved; ``statement`` says what float64 saw and why it is not a proof).
    ``lambda_min_float`` is the float64 estimate of :math:`\lambda_{\min}` (inverse
    iteration, an estimate from above), ``radius`` the proved bound on
    :math:`\|G - \mathrm{fl}(G)\|_2` plus the Cholesky criterion's allowance, ``M`` the rows.
    """

    positive: bool
    lower_bound: float | None
    method: str
    statement: str
    lambda_min_float: float | None
    radius: float | None
    M: int

    def to_dict(self) -> dict[str, Any]:
        return {"positive": self.positive, "lower_bound": self.lower_bound, "method": self.method,
                "statement": self.statement, "lambda_min_float": self.lambda_min_float,
                "radius": self.radius, "M": self.M}

    def __repr__(self) -> str:
        if self.positive:
            return f"PositivityCertificate(lambda_min >= {self.lower_bound:.6g}, {self.method}, M={self.M})"
        return f"PositivityCertificate(not certified, M={self.M}: {self.statement})"


def _refused(M: int, statement: str, lam: float | None, radius: float | None) -> PositivityCertificate:
    return PositivityCertificate(False, None, "refused", statement, lam, radius, M)


def _certify_lower(G_lower: np.ndarray, radius: float) -> PositivityCertificate:
    """The Cholesky step on ``fl(G)`` (lower triangle), with ``radius >= ||G_exact - fl(G)||_2``."""
    M = G_lower.shape[0]
    lam = rnd.smallest_eig_estimate(G_lower)
    if lam is None:
        return _refused(M, f"float64 Cholesky of the Gram fails: lambda_min is not positive at float64 "
                           f"resolution (below resolution at M = {M})", None, radius)
    tr = float(np.sum(np.diagonal(G_lower)))
    last = None
    for f in (0.05, 0.2, 0.5, 0.8):
        t = lam * (1.0 - f)
        s = rnd.cholesky_shift_bound(G_lower, t)
        if s is None:
            continue
        err = (s + radius) * (1.0 + 1e-10)
        last = err
        if t > err:
            lb = float(np.nextafter((t - err) * (1.0 - 4.0 * rnd.U), 0.0))
            return PositivityCertificate(
                True, lb, "float64-cholesky",
                f"lambda_min >= {lb:.6g} in exact arithmetic: Cholesky of fl(G) - {t:.6g} I succeeded "
                f"(Rump's criterion allows {s:.3g}), ||G - fl(G)||_2 <= {radius:.3g} (Weyl)",
                lam, radius + s, M)
    rad = last if last is not None else radius
    return _refused(M, f"float64 sees lambda_min ~ {lam:.3g} ({lam / tr:.2g} of the trace), but the proved "
                       f"rounding radius {rad:.3g} is not below it: below resolution at M = {M}", lam, rad)


def certify_gram_enclosure(G: np.ndarray, radius: float) -> PositivityCertificate:
    r"""Certify :math:`\lambda_{\min}(G_\star) > 0` for every symmetric :math:`G_\star` with
    :math:`\|G_\star - G\|_2 \le` ``radius``, or refuse.

    A floating-point Cholesky of :math:`\mathrm{fl}(G - tI)` that runs to completion proves
    :math:`\lambda_{\min}(G) \ge t - \frac{\gamma_{n+1}}{1 - \gamma_{n+1}}\operatorname{tr}(G - tI)
    - u \max_i |g_{ii} - t|` (Rump, "Verification of positive definiteness", BIT 46 (2006)
    433-452); Weyl's inequality subtracts ``radius``. ``t`` is tried at 95%, 80%, 50%, 20% of
    a float64 estimate of :math:`\lambda_{\min}`. ``G`` is read from its lower triangle.

    Examples
    --------
    >>> certify_gram_enclosure(np.eye(3), 1e-3).positive
    True
    """
    A = np.asarray(G, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise PrecisionError(f"certify_gram_enclosure: expected a square matrix, got shape {A.shape}")
    if not (np.all(np.isfinite(A)) and math.isfinite(radius) and radius >= 0):
        raise PrecisionError("certify_gram_enclosure: non-finite entries or a negative radius")
    return _certify_lower(np.asfortranarray(np.tril(A)), float(radius))


def certify_positive(samples: Any, heads: Heads, *, arb: bool = True, max_bits: int = 1024) -> PositivityCertificate:
    r"""Rigorous lower bound on :math:`\lambda_{\min}(W^{1/2} K W^{1/2})` at float64 speed, or a refusal.

    1. ``F`` in float64 (:func:`~ntkcheck.ntk.features.attention_features`) with a proved
       entrywise radius :math:`|\hat F - F| \le e_r` (an error analysis of the queries,
       scores, exponentials, softmax and means; valid while the a-priori score bound
       :math:`(\|Q_h\|_F R + \|b_h\|) R` is at most 200);
    2. :math:`\hat G = \mathrm{fl}(\hat F \hat F^T)` with
       :math:`\|\hat G - F F^T\|_2 \le \gamma_K \rho(|\hat F||\hat F|^T) + 2\|E\|\|\hat F\| + \|E\|^2`
       (``K = H d``, :math:`\|E\|_2 \le (K \sum_r e_r^2)^{1/2}`);
    3. :func:`certify_gram_enclosure` on :math:`\hat G` with that radius (Rump's Cholesky
       criterion and Weyl's inequality).

    When this refuses (the relative :math:`\lambda_{\min}` is below what float64 resolves,
    e.g. at ``d = 2``) and ``arb`` is true and ``M <= 256``, the Arb route
    (:func:`certify_lambda_min`) is tried. Memory: ``F``, ``|F|`` and two ``M x M`` matrices.

    References: seed 003 Prop. 5, 8; ``theory/certificates.md`` (certified positivity at scale).
    """
    laws = as_laws(samples)
    heads = _as_heads(heads, laws[0].dim)
    M = _atom_count(laws)
    B = rnd.score_bound(laws, heads)
    if B > rnd.SCORE_BOUND:
        out = _refused(M, f"attention scores can reach {B:.3g} > {rnd.SCORE_BOUND:g}: the float64 "
                          "enclosure of the features is not valid there", None, None)
    else:
        F = _features(laws, heads)
        e, _ = rnd.feature_radius(laws, heads)
        K = F.shape[1]
        nF2 = rnd.abs_gram_norm(F)
        E = math.sqrt(K * float(np.sum(e * e)) * (1.0 + rnd.gamma(M + 2)))
        radius = (rnd.gamma(K) * nF2 + 2.0 * E * math.sqrt(nF2) + E * E) * rnd._SAFE
        G = rnd.lower_gram(F)
        del F
        out = _certify_lower(G, radius)
    if out.positive or not arb or M > MAX_CERTIFY_TOKENS:
        return out
    cert = _certify(laws, heads, max_bits=max_bits)
    if cert.positive:
        return PositivityCertificate(True, cert.lower_bound, "arb-inverse-frobenius",
                                     f"float64 route: {out.statement}; {cert.detail}",
                                     out.lambda_min_float, out.radius, M)
    return _refused(M, f"{out.statement}; Arb route inconclusive at {cert.bits} bits",
                    out.lambda_min_float, out.radius)
