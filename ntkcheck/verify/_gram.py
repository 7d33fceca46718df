r"""The Gram claims: a lower bound on :math:`\lambda_{\min}(F F^T)`, and two proofs of singularity.

The features are enclosed in Arb from the inputs at their exact values: doubles exactly, and
values that are not doubles (written as exact rationals) as balls ``arb(fmpq)`` around them, so
a bound is re-proved for the numbers given, never for their float64 view. Row ``(i, a)`` of
``F`` is :math:`\sqrt{m_{ia}/H}\,(\phi(x_{ia}; Q_h, b_h))_h` with
:math:`\phi(x; Q, b) = \sum_k \pi_k x_k`, :math:`\pi_k \propto m_k e^{\langle Q x + b, x_k\rangle}`.

Singularity: seed 003 Prop. 8 (a dependency with a signed measure :math:`\nu` on shared atoms
gives the kernel vector :math:`p_i = c_i\,d\nu/d\mu_i`), or two atoms of one sample with
:math:`Q_h (x - y) = 0` for every head (equal scores, so equal features and proportional rows).

References: seed 003 Prop. 5 and 8; theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, arb_mat, fmpq

from ._cgf import _product_identity
from ._common import Refuted, Unchecked, _q, exact
from ._matrix import _lower_bound
from ._precision import _workprec

#: ball operations the Arb enclosure of F may cost: H sum_i (N_i d^2 + N_i^2 (d + 1)) (about 10 s here)
MAX_ARB_OPS = 50_000_000


def _arb(v: Any) -> arb:
    """One input value as a ball at the current precision: a double exactly, a rational around it."""
    return arb(fmpq(v.numerator, v.denominator)) if isinstance(v, Fraction) else arb(float(v))


def _arb_matrix(A: np.ndarray) -> arb_mat:
    """A 2-D input array (float64, or exact ``Fraction``) as an Arb matrix at the current precision."""
    if not exact(A):
        return arb_mat(A.tolist())
    return arb_mat([[_arb(v) for v in row] for row in A.tolist()])


def _features_arb(laws: list[dict[str, Any]], Q: np.ndarray, b: np.ndarray) -> arb_mat:
    """``F`` (rows ``sqrt(m/H) phi(x; Q_h, b_h)``, softmax weights ``m_k exp<Q x + b, x_k>``) in Arb,
    from the exact atoms and heads."""
    H, d = Q.shape[0], Q.shape[1]
    QT = [_arb_matrix(Q[h]).transpose() for h in range(H)]
    bA = [[_arb(v) for v in row] for row in b.tolist()]
    rows: list[list[arb]] = []
    for law in laws:
        X = law["X"]
        N = X.shape[0]
        XA = _arb_matrix(X)
        mass = [arb(fmpq(m.numerator, m.denominator)) for m in law["masses"]]
        feats: list[list[arb]] = [[] for _ in range(N)]
        for h in range(H):
            A = XA * QT[h]
            S = arb_mat([[A[j, k] + bA[h][k] for k in range(d)] for j in range(N)]) * XA.transpose()
            P = arb_mat(N, N)
            for j in range(N):
                top = arb(max(float(S[j, k].mid()) for k in range(N)))  # any shift is exact algebra
                e = [mass[k] * (S[j, k] - top).exp() for k in range(N)]
                tot = sum(e, arb(0))
                for k in range(N):
                    P[j, k] = e[k] / tot
            Phi = P * XA
            for j in range(N):
                feats[j].extend(Phi[j, c] for c in range(d))
        rows.extend([v * (mass[j] / H).sqrt() for v in feats[j]] for j in range(N))
    return arb_mat(rows)


def _exact_inputs(laws: list[dict[str, Any]], Q: np.ndarray, b: np.ndarray) -> bool:
    return any(exact(law["X"]) for law in laws) or exact(Q) or exact(b)


def _gram(laws: list[dict[str, Any]], claim: dict[str, Any], Q: np.ndarray, b: np.ndarray) -> str:
    """``lambda_min(F F^T) >= lower_bound``, re-proved on the Arb enclosure of the exact Gram.

    A bound carried over from the float64 view of rounded inputs (``inputs_rounded``) was proved
    for other numbers and moved through a rounding radius; its recorded shift is the view's. It is
    re-proved here directly for the exact values (a shift chosen here, or the ball LDL^T)."""
    want = float(claim["lower_bound"])
    if any(law["kind"] != "empirical" for law in laws) or not want > 0:
        raise Refuted("a Gram claim needs empirical laws and a positive lower bound")
    if any(law["X"].shape[1] != Q.shape[1] for law in laws):
        raise Refuted(f"the tokens and the heads (d = {Q.shape[1]}) differ in dimension")
    rounded = bool(claim.get("inputs_rounded"))
    if rounded and not _exact_inputs(laws, Q, b):
        raise Unchecked("the bound is about values that are not doubles, but the file holds only their float64 "
                        "view: nothing to re-check it on")
    H, d = Q.shape[0], Q.shape[1]
    if (cost := sum(H * (N * d * d + N * N * (d + 1)) for N in (law["X"].shape[0] for law in laws))) > MAX_ARB_OPS:
        raise Unchecked(f"the Arb enclosure of F needs {cost:.3g} ball operations (> {MAX_ARB_OPS:.3g})")

    def gram_at(bits: int) -> arb_mat:
        with _workprec(bits):
            F = _features_arb(laws, Q, b)
            return F * F.transpose()
    try:
        how = _lower_bound(gram_at(128), want, [] if rounded else claim.get("shifts", []), gram_at)
    except Unchecked as exc:
        raise Unchecked(f"{exc}{'; carried over from the float64 view' if rounded else ''}") from None
    if rounded:
        return f"{how}, on the exact values given (the bound was carried over from their float64 view)"
    return how + (", on the exact values given" if _exact_inputs(laws, Q, b) else "")


def _gram_singular(laws: list[dict[str, Any]], claim: dict[str, Any]) -> str:
    c = [_q(v) for v in claim["c"]]
    alpha = [_q(v) for v in claim["alpha"]]
    _product_identity(laws, c, alpha, None)
    nu = {tuple(_q(v) for v in e["atom"]): _q(e["mass"]) for e in claim["nu"]}
    if not any(nu.values()) or (any(alpha) and sum(nu.values()) != 0):
        raise Refuted("nu is zero, or has non-zero total mass while alpha != 0")
    for ci, law in zip(c, laws):
        if ci and not set(nu) <= set(law["atoms"]):
            raise Refuted("nu charges an atom that a sample of the dependency does not have")
    return "identity re-expanded; nu on shared atoms: p_i = c_i dnu/dmu_i is a kernel vector (Prop. 8)"


def _gram_equal_scores(laws: list[dict[str, Any]], claim: dict[str, Any], Q: np.ndarray) -> str:
    """Two distinct atoms ``x, y`` of one sample with ``Q_h (x - y) = 0`` for every head, exactly."""
    i = int(claim["sample"])
    a, c = (int(v) for v in claim["atoms"])
    law = laws[i] if 0 <= i < len(laws) else {"kind": "none"}
    if law["kind"] != "empirical" or not (0 <= a < c < len(law["atoms"])):
        raise Refuted(f"sample {i} has no two atoms {a} < {c}")
    v = [p - q for p, q in zip(law["atoms"][a], law["atoms"][c])]
    if len(v) != Q.shape[1]:
        raise Refuted(f"the tokens and the heads (d = {Q.shape[1]}) differ in dimension")
    for h, Qh in enumerate(Q.tolist()):
        if any(sum((Fraction(q) * vk for q, vk in zip(row, v)), Fraction(0)) != 0 for row in Qh):
            raise Refuted(f"Q_{h} (x_{a} - x_{c}) != 0: the two atoms do not score alike under head {h}")
    return (f"Q_h (x_{a} - x_{c}) = 0 for all {Q.shape[0]} heads, exactly: equal scores, equal features, "
            "proportional rows of F")
