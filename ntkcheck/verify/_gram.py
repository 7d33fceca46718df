r"""The Gram claims: a lower bound on :math:`\lambda_{\min}(F F^T)`, and two proofs of singularity.

The features are enclosed in balls from the inputs at their exact values: doubles exactly, and
values that are not doubles (written as exact rationals) as balls around them, so a bound is
re-proved for the numbers given, never for their float64 view. Row ``(i, a)`` of ``F`` is
:math:`\sqrt{m_{ia}/H}\,(\phi(x_{ia}; Q_h, b_h))_h` with :math:`\phi(x; Q, b) = \sum_k \pi_k x_k`,
:math:`\pi_k \propto m_k e^{\langle Q x + b, x_k\rangle}`.

Singularity: seed 003 Prop. 8 (an identity :math:`\sum_i c_i\Lambda_i = \langle\alpha,\cdot\rangle`
on :math:`\mathbb R^d` and a signed measure :math:`\nu \ne 0` on atoms every sample with
:math:`c_i \ne 0` has, with :math:`\nu(\mathbb R^d) = 0` unless :math:`\alpha = 0`, give the
non-zero kernel vector :math:`p_i = c_i\,(d\nu/d\mu_i)\,u` for every head), or two atoms of one
sample with :math:`Q_h (x - y) = 0` for every head (equal scores, so equal features and
proportional rows).

References: seed 003 Prop. 5 and 8; theory/certificates.md, "Re-checkable certificates".
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ._balls import balls, speed
from ._common import Checked, Refuted, Unchecked, _integer, _q, _vector, exact, short
from ._identity import product_identity
from ._matrix import lower_bound

#: ball operations the enclosure of F may cost with python-flint: H sum_i (N_i d^2 + N_i^2 (d + 1))
#: (about 10 s here); divided by the backend's slowness without it
MAX_BALL_OPS = 50_000_000


def _features(B: Any, laws: list[dict[str, Any]], Q: np.ndarray, b: np.ndarray) -> list[list[Any]]:
    """``F`` (rows ``sqrt(m/H) phi(x; Q_h, b_h)``, softmax weights ``m_k exp<Q x + b, x_k>``) in balls,
    from the exact atoms and heads."""
    H, d = Q.shape[0], Q.shape[1]
    QT = [[[B.q(Q[h][i][j]) for i in range(d)] for j in range(d)] for h in range(H)]
    bA = [[B.q(v) for v in row] for row in b.tolist()]
    rows: list[list[Any]] = []
    for law in laws:
        XA = [[B.q(v) for v in row] for row in law["X"].tolist()]
        XT = [list(col) for col in zip(*XA)]
        N = len(XA)
        mass = [B.q(m) for m in law["masses"]]
        feats: list[list[Any]] = [[] for _ in range(N)]
        for h in range(H):
            A = B.matmul(XA, QT[h])
            S = B.matmul([[A[j][k] + bA[h][k] for k in range(d)] for j in range(N)], XT)
            P = []
            for j in range(N):
                top = B.q(max(B.mid(S[j][k]) for k in range(N)))  # any shift is exact algebra
                e = [mass[k] * B.exp(S[j][k] - top) for k in range(N)]
                tot = sum(e[1:], e[0])
                P.append([v / tot for v in e])
            Phi = B.matmul(P, XA)
            for j in range(N):
                feats[j].extend(Phi[j])
        rows.extend([v * B.sqrt(mass[j] / H) for v in feats[j]] for j in range(N))
    return rows


def _exact_inputs(laws: list[dict[str, Any]], Q: np.ndarray, b: np.ndarray) -> bool:
    return any(exact(law["X"]) for law in laws) or exact(Q) or exact(b)


def _heads_for(laws: list[dict[str, Any]], inputs: Any) -> tuple[np.ndarray, np.ndarray]:
    if inputs.Q is None:
        raise Refuted("a Gram claim needs the heads, and the file has none")
    if not laws or any(law["kind"] != "empirical" for law in laws):
        raise Refuted("a Gram claim is about empirical laws (token samples)")
    if inputs.dim != inputs.Q.shape[1]:
        raise Refuted(f"the tokens (d = {inputs.dim}) and the heads (d = {inputs.Q.shape[1]}) differ in dimension")
    return inputs.Q, inputs.b


def check_bound(claim: dict[str, Any], inputs: Any, scope: Any) -> Checked:
    """``lambda_min(F F^T) >= lower_bound``, re-proved on the ball enclosure of the exact Gram.

    A bound carried over from the float64 view of rounded inputs (``inputs_rounded``) was proved
    for other numbers and moved through a rounding radius; its recorded shift is the view's. It is
    re-proved here directly for the exact values (a shift chosen here, or the ball LDL^T)."""
    laws = scope.laws
    Q, b = _heads_for(laws, inputs)
    want = float(_q(claim["lower_bound"]))
    if not want > 0:
        raise Refuted("a Gram bound is a positive lower bound on lambda_min")
    rounded = claim.get("inputs_rounded") is True
    if rounded and not _exact_inputs(laws, Q, b):
        raise Unchecked("the bound is about values that are not doubles, but the file holds only their float64 "
                        "view: nothing to re-check it on")
    H, d = Q.shape[0], Q.shape[1]
    cost = sum(H * (N * d * d + N * N * (d + 1)) for N in (law["X"].shape[0] for law in laws))
    if cost > MAX_BALL_OPS / speed():
        raise Unchecked(f"the ball enclosure of F needs {cost:.3g} ball operations (> {MAX_BALL_OPS / speed():.3g} "
                        "with the ball arithmetic available here)")

    def gram(B: Any) -> list[list[Any]]:
        F = _features(B, laws, Q, b)
        return B.matmul(F, [list(col) for col in zip(*F)])

    with balls(128) as B:
        G = gram(B)
        n = len(G)
        C = np.array([[B.mid(G[i][j]) for j in range(n)] for i in range(n)])
        C = (C + C.T) / 2
        R = np.array([[B.upper_abs(G[i][j] - B.q(float(C[i, j]))) for j in range(n)] for i in range(n)])
    radius = float(np.sqrt(np.sum(R * R))) * (1 + 1e-8)  # ||G - C||_F, C after its own rounding
    try:
        how = lower_bound(C, radius, want, [] if rounded else claim.get("shifts") or [], gram)
    except Unchecked as exc:
        raise Unchecked(f"{exc}{'; carried over from the float64 view' if rounded else ''}") from None
    given = ", on the exact values given" if _exact_inputs(laws, Q, b) else ""
    if rounded:
        given += " (the file's bound was carried over from their float64 view)"
    return Checked(f"the Gram F F^T of {scope.who} with the {H} heads of the file has lambda_min >= {want:.6g} > 0: "
                   "positive definite", how + given)


def _nu(claim: dict[str, Any], d: int) -> dict[tuple[Fraction, ...], Fraction]:
    entries = claim["nu"]
    if not isinstance(entries, list):
        raise ValueError("nu must be a list of atoms and masses")
    nu = {tuple(_vector(e["atom"], d, "an atom of nu")): _q(e["mass"]) for e in entries}
    if len(nu) != len(entries):
        raise Refuted("nu names an atom twice")
    return nu


def check_singular(claim: dict[str, Any], inputs: Any, scope: Any) -> Checked:
    """Seed 003 Prop. 8: the identity on R^d and a measure nu on shared atoms give a kernel vector."""
    laws = scope.laws
    _heads_for(laws, inputs)
    d = inputs.dim
    c = _vector(claim["c"], len(laws), "the dependency c")
    alpha = _vector(claim["alpha"], d, "alpha")
    if not any(c):
        raise Refuted("c is zero: p_i = c_i dnu/dmu_i is the zero vector, not a kernel vector")
    nu = _nu(claim, d)
    if not any(nu.values()):
        raise Refuted("nu is zero: p_i = c_i dnu/dmu_i is the zero vector, not a kernel vector")
    if any(alpha) and sum(nu.values()) != 0:
        raise Refuted("nu has non-zero total mass while alpha != 0: G[p] = u alpha^T nu(R^d) is not 0")
    for ci, law in zip(c, laws):
        if ci and not set(nu) <= set(law["atoms"]):
            raise Refuted("nu charges an atom that a sample with c_i != 0 does not have")
    product_identity(laws, c, alpha, None)
    support = [i for i, ci in enumerate(c) if ci]
    who = scope.name(support)
    return Checked(f"the Gram of {who} (and of any samples including them) is singular for every choice of heads, "
                   f"so for the {inputs.Q.shape[0]} heads of the file: p_i = c_i (dnu/dmu_i) u is a non-zero kernel "
                   "vector (seed 003 Prop. 8)",
                   f"the identity sum_i c_i Lambda_i = <alpha, .> on R^d re-expanded exactly (c = {short(c)}); nu != 0 "
                   "on atoms shared by every sample with c_i != 0")


def check_equal_scores(claim: dict[str, Any], inputs: Any, scope: Any) -> Checked:
    """Two distinct atoms ``x, y`` of one sample with ``Q_h (x - y) = 0`` for every head, exactly."""
    if claim.get("samples") is not None:
        raise Refuted("an equal-scores claim names its one sample by 'sample', not 'samples'")
    i = _integer(claim["sample"], "sample", 0)
    a, c = (_integer(v, "an atom index", 0) for v in claim["atoms"])
    laws = inputs.laws
    law = laws[i] if i < len(laws) else {"kind": "none"}
    if law["kind"] != "empirical" or not (a < c < len(law["atoms"])):
        raise Refuted(f"sample {i} has no two atoms {a} < {c}")
    Q, _ = _heads_for([law], inputs)
    v = [p - q for p, q in zip(law["atoms"][a], law["atoms"][c], strict=True)]
    for h, Qh in enumerate(Q.tolist()):
        if any(sum((Fraction(q) * vk for q, vk in zip(row, v)), Fraction(0)) != 0 for row in Qh):
            raise Refuted(f"Q_{h} (x_{a} - x_{c}) != 0: the two atoms do not score alike under head {h}")
    H = Q.shape[0]
    return Checked(f"the Gram of the {H} heads of the file is singular on sample {i}: its atoms {a} and {c} score "
                   "alike under every head, so their features are equal and their rows of F proportional",
                   f"Q_h (x_{a} - x_{c}) = 0 for all {H} heads, exactly")
