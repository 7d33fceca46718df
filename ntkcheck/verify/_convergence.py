r"""The convergence claim of ``ntkcheck flow --certificate-out``: the certificate centred at a parameter state.

The claim (``kind: convergence-centred``) says: for the attention model of the inputs (token laws, heads
``theta*`` = ``centre``, targets), every gradient-flow (or gradient-descent, ``step``) start within
``start_radius`` of ``theta*`` converges, :math:`\mathcal L(s) \le e^{-\text{rate}\,s}\,` ``start_loss`` and
stays within ``displacement_bound`` of ``theta*``. Re-derived here from the inputs, with code of this module:

* :math:`\mathcal L(\theta^*)` and the Jacobian :math:`\partial z/\partial\theta` at ``theta*`` in **interval
  arithmetic** (lower and upper endpoints, each operation rounded outward by one ulp; sums and products
  of ``n`` terms by :math:`\gamma_n`; ``exp`` within :math:`2^{-44}`), forward mode along every parameter;
* :math:`\lambda_{\min}(K) \ge` ``lambda_min`` and :math:`\lambda_{\max}(K) \le` ``lambda_max`` for
  :math:`K = H\,JJ^\top` (readout loss), by ball Cholesky factorisations of :math:`K - tI` and
  :math:`tI - K` over the interval matrix (ball :math:`LDL^T`: Arb, or mpmath's intervals without python-flint);
* the inequality chain of the theorem in exact rational arithmetic from the recorded numbers:
  :math:`\sigma_*^2 \le \lambda_{\min}`, :math:`\sigma^{*2} \ge \lambda_{\max}`,
  :math:`u_s \ge \sqrt{2\mathcal L(\theta^*)} + (\sigma^* + \beta(e))e`,
  :math:`\sigma_{\rm low} \le \sigma_* - \beta(r)`, :math:`c\,\sigma_{\rm low}(r - e) \ge u_s`, the rate and the
  displacement bound (gradient descent: :math:`\ell \ge (\sigma^* + \beta(r))^2 + u_s M_2(r)`,
  :math:`c = 1 - \eta\ell/2 > 0`).

* the second-derivative bound :math:`M_2` on balls around the centre (the propagated bound of
  ``theory/local-convergence.md``, "The propagated bound", from the norms of the heads and the token radii)
  at every radius of the recorded grid, and :math:`\beta(\cdot) = \sum_j M_2(r_j)(r_j - r_{j-1})` up to ``r``
  and up to ``e``: the recorded ``deviation``, ``beta_start``, ``hessian_bound`` must be at least these.

A claim whose bound came from the structured FixUp bound is reported unchecked (that bound is not re-derived
here). The validated tube of a claim "from FixUp" is not re-checked (its claim is written unchecked).

References: seed 002 Thm. 8.5; ``theory/local-convergence.md``, "The certificate at any centre".
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ._balls import balls
from ._common import Checked, Refuted, Unchecked

U = 2.0**-53
#: relative error allowed for ``np.exp`` (two orders of magnitude above what any libm shows)
U_EXP = 2.0**-44
#: parameters up to which the Jacobian is re-derived here (forward mode carries every direction)
MAX_PARAMS = 4096


def _g(n: int) -> float:
    return (n + 2) * U / (1.0 - (n + 2) * U) * (1.0 + 1e-10)


def _down(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, -np.inf)


def _upr(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, np.inf)


class _I:
    """Intervals ``[lo, hi]`` (arrays), outward rounded."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: Any, hi: Any) -> None:
        self.lo, self.hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)

    @staticmethod
    def point(x: Any) -> _I:
        a = np.asarray(x, dtype=np.float64)
        return _I(a, a)

    def __add__(self, o: _I) -> _I:
        return _I(_down(self.lo + o.lo), _upr(self.hi + o.hi))

    def __sub__(self, o: _I) -> _I:
        return _I(_down(self.lo - o.hi), _upr(self.hi - o.lo))

    def __mul__(self, o: _I) -> _I:
        c = [self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi]
        return _I(_down(np.minimum.reduce(c)), _upr(np.maximum.reduce(c)))

    def mid_rad(self) -> tuple[np.ndarray, np.ndarray]:
        m = 0.5 * (self.lo + self.hi)
        return m, _upr(np.maximum(self.hi - m, m - self.lo) * (1.0 + 4 * U))

    def dot(self, o: _I, spec: str, n: int) -> _I:
        """``einsum(spec)`` of two interval arrays summing ``n`` products per entry (midpoint-radius form)."""
        am, ar = self.mid_rad()
        bm, br = o.mid_rad()
        m = np.einsum(spec, am, bm)
        aa, ab = np.abs(am), np.abs(bm)
        r = np.einsum(spec, aa, br) + np.einsum(spec, ar, ab + br) + _g(n) * np.einsum(spec, aa, ab)
        r = _upr(r * (1.0 + _g(3 * n)) + 2.0**-900)
        return _I(_down(m - r), _upr(m + r))

    def total(self, axis: int) -> _I:
        n = self.lo.shape[axis]
        slack = _g(n) * np.maximum(np.abs(self.lo), np.abs(self.hi)).sum(axis=axis) + 2.0**-900
        return _I(_down(self.lo.sum(axis=axis) - slack), _upr(self.hi.sum(axis=axis) + slack))

    def exp(self) -> _I:
        return _I(_down(np.exp(self.lo) * (1.0 - U_EXP)), _upr(np.exp(self.hi) * (1.0 + U_EXP)))

    def recip(self) -> _I:
        if not np.all(self.lo > 0):
            raise Refuted("a softmax normaliser is not enclosed above 0 at the centre")
        return _I(_down(1.0 / self.hi), _upr(1.0 / self.lo))


def _frac_interval(q: Fraction) -> _I:
    f = float(q)
    lo = f if Fraction(f) <= q else float(np.nextafter(f, -np.inf))
    hi = f if Fraction(f) >= q else float(np.nextafter(f, np.inf))
    return _I(np.array(lo), np.array(hi))


def _layer(X: tuple[_I, _I], m: _I, V: _I, Q: _I, b: _I, c: _I) -> tuple[_I, _I]:
    """One layer for one sample: values ``(S, d)`` and tangents ``(P, S, d)`` of the tokens."""
    Xv, Xt = X
    H, d = Q.lo.shape[1], Q.lo.shape[2]
    Uv, Ut = None, None
    for h in range(H):
        Qh, bh, Vh = _I(Q.lo[:, h], Q.hi[:, h]), _I(b.lo[:, h], b.hi[:, h]), _I(V.lo[:, h], V.hi[:, h])
        # queries q_j = Q_h x_j + b_h, with tangents (direction axis first on Q, b, V: (1 + P, ...))
        qv = Xv.dot(_I(Qh.lo[0], Qh.hi[0]), "jd,cd->jc", d) + _I(bh.lo[0], bh.hi[0])
        qt = (Xt.dot(_I(Qh.lo[0], Qh.hi[0]), "pjd,cd->pjc", d) + Xv.dot(_I(Qh.lo[1:], Qh.hi[1:]), "jd,pcd->pjc", d)
              + _I(bh.lo[1:, None], bh.hi[1:, None]))
        sv = qv.dot(Xv, "jc,kc->jk", d)
        st = qt.dot(Xv, "pjc,kc->pjk", d) + qv.dot(Xt, "jc,pkc->pjk", d)
        shift = _I.point(0.5 * (sv.lo + sv.hi).max(axis=1, keepdims=True))
        e = (sv - shift).exp()
        w = e * _I(m.lo[None, :], m.hi[None, :])
        wt = _I(e.lo[None], e.hi[None]) * st * _I(m.lo[None, None, :], m.hi[None, None, :])
        z = w.total(1)
        zt = wt.total(2)
        inv = z.recip()
        pv = w * _I(inv.lo[:, None], inv.hi[:, None])
        # d(w / z) = (dw - p dz) / z
        pt = (wt - pv.__class__(pv.lo[None], pv.hi[None]) * _I(zt.lo[:, :, None], zt.hi[:, :, None])) * \
            _I(inv.lo[None, :, None], inv.hi[None, :, None])
        mv = pv.dot(Xv, "jk,kd->jd", Xv.lo.shape[0])
        mt = pt.dot(Xv, "pjk,kd->pjd", Xv.lo.shape[0]) + pv.dot(Xt, "jk,pkd->pjd", Xv.lo.shape[0])
        hv = mv.dot(_I(Vh.lo[0], Vh.hi[0]), "jc,ac->ja", d)
        ht = mt.dot(_I(Vh.lo[0], Vh.hi[0]), "pjc,ac->pja", d) + mv.dot(_I(Vh.lo[1:], Vh.hi[1:]), "jc,pac->pja", d)
        Uv = hv if Uv is None else Uv + hv
        Ut = ht if Ut is None else Ut + ht
    assert Uv is not None and Ut is not None
    return Xv + Uv * c, Xt + Ut * _I(c.lo[None], c.hi[None])


def _model(laws: list[dict[str, Any]], run: dict[str, Any]) -> tuple[_I, _I, int]:
    """The loss (an interval) and the Jacobian of the readout outputs (rows ``(i, a)``) at the centre."""
    mod = run["model"]
    H, d, L, T = int(mod["heads"]), int(mod["dim"]), int(mod["layers"]), Fraction(mod["T"])
    if mod["loss"] != "readout":
        raise Unchecked("the convergence claim is re-checked for the readout loss only")
    theta = run["centre"]
    P = theta.size
    if P != H * d * (2 * d + 1) or P > MAX_PARAMS:
        raise Unchecked(f"{P} parameters: not the model's {H * d * (2 * d + 1)}, or over {MAX_PARAMS}")
    Y = run["targets"].reshape(len(laws), d)
    tang = np.concatenate([theta[None], np.eye(P)])  # value, then every direction
    nv = H * d * d
    V = _I.point(tang[:, :nv].reshape(1 + P, H, d, d))
    Q = _I.point(tang[:, nv:2 * nv].reshape(1 + P, H, d, d))
    b = _I.point(tang[:, 2 * nv:].reshape(1 + P, H, d))
    c = _frac_interval(T / (L * H))
    loss_lo, loss_hi, rows = Fraction(0), Fraction(0), []
    for i, law in enumerate(laws):
        if law["kind"] != "empirical" or law["X"].dtype != np.float64:
            raise Unchecked("the convergence claim is re-checked for token laws with float64 atoms only")
        X0 = np.asarray(law["X"], dtype=np.float64)
        ms = [_frac_interval(q) for q in law["masses"]]
        m = _I(np.array([float(v.lo) for v in ms]), np.array([float(v.hi) for v in ms]))
        X = (_I.point(X0), _I.point(np.zeros((P,) + X0.shape)))
        for _ in range(L):
            X = _layer(X, m, V, Q, b, c)
        zv = X[0].dot(m, "ad,a->d", X0.shape[0])
        zt = X[1].dot(m, "pad,a->pd", X0.shape[0])
        r = zv - _I.point(Y[i])
        sq = (r * r).total(0)
        loss_lo += Fraction(float(sq.lo)) / 2
        loss_hi += Fraction(float(sq.hi)) / 2
        rows.append(zt)
    J = _I(np.concatenate([z.lo.T for z in rows]), np.concatenate([z.hi.T for z in rows]))
    return _I(np.array(float(loss_lo)), np.array(float(_upr(np.array(float(loss_hi)))))), J, H


def _positive(K: _I, t: float, sign: int) -> bool:
    """Whether ``K - tI`` (sign +1) or ``tI - K`` (sign -1) is positive definite for every symmetric ``K`` in the
    interval matrix: every such ``K`` is ``K_mid + E`` with ``|E| <= R`` entrywise, so
    ``||E||_2 <= max_i sum_j R_ij = rho`` (``R`` symmetric), and a ball :math:`LDL^T` (:mod:`._balls`: Arb, or
    mpmath's intervals) proves ``sign (K_mid - tI) - rho I`` positive definite."""
    km, kr = K.mid_rad()
    km = 0.5 * (km + km.T)  # the midpoint of a symmetric interval matrix is symmetric up to rounding: use its
    kr = _upr(np.maximum(kr, kr.T) + _upr(np.abs(K.mid_rad()[0] - km)))  # symmetric part, the difference in the radius
    n = km.shape[0]
    rho = float(_upr(np.max(kr.sum(axis=1)) * (1.0 + _g(n))))
    with balls(128) as B:
        G = [[B.q(sign * float(km[i, j])) - (B.q(sign * t) + B.q(rho) if i == j else B.q(0)) for j in range(n)]
             for i in range(n)]
        return bool(B.pd(G))


def _chain(cl: dict[str, Any]) -> None:
    """The theorem's inequalities between the recorded numbers, in exact rationals."""
    q = {k: Fraction(cl[k]) for k in ("lambda_min", "lambda_max", "loss_centre", "start_radius", "start_loss",
                                      "sigma_star", "sigma_up", "beta_start", "radius", "deviation", "hessian_bound",
                                      "sigma_low", "rate", "displacement_bound")}
    e, r, us = q["start_radius"], q["radius"], Fraction(cl["u_start"])
    checks = [
        (q["sigma_star"] > 0 and q["sigma_star"] ** 2 <= q["lambda_min"], "sigma_*^2 <= lambda_min"),
        (q["sigma_up"] ** 2 >= q["lambda_max"], "sigma^*^2 >= lambda_max"),
        (us - (q["sigma_up"] + q["beta_start"]) * e >= 0 and (us - (q["sigma_up"] + q["beta_start"]) * e) ** 2
         >= 2 * q["loss_centre"], "u_s >= sqrt(2 Loss) + (sigma^* + beta(e)) e"),
        (0 < q["sigma_low"] <= q["sigma_star"] - q["deviation"], "0 < sigma_low <= sigma_* - beta(r)"),
        (q["start_loss"] >= us * us / 2, "start_loss >= u_s^2 / 2"),
    ]
    step = cl.get("step")
    if step is None:
        c = Fraction(1)
        checks.append((q["rate"] <= 2 * q["sigma_low"] ** 2, "rate <= 2 sigma_low^2"))
    else:
        eta, ell = Fraction(step), Fraction(cl["smoothness"])
        c = 1 - eta * ell / 2
        checks.append((ell >= (q["sigma_up"] + q["deviation"]) ** 2 + us * q["hessian_bound"],
                       "l >= (sigma^* + beta(r))^2 + u_s M_2(r)"))
        qq = 2 * eta * c * q["sigma_low"] ** 2
        checks.append((c > 0 and 0 < qq < 1 and float(q["rate"]) * float(eta) <= -math.log1p(-float(qq)) * (1 - 1e-12),
                       "c > 0 and rate <= -ln(1 - 2 step c sigma_low^2) / step"))
    checks.append((c * q["sigma_low"] * (r - e) >= us, "c sigma_low (r - e) >= u_s"))
    checks.append(((q["displacement_bound"] - e) * c * q["sigma_low"] >= us, "displacement >= e + u_s / (c sigma_low)"))
    bad = [name for ok, name in checks if not ok]
    if bad:
        raise Refuted("the recorded bounds do not satisfy: " + "; ".join(bad))


def _propagated(laws: list[dict[str, Any]], run: dict[str, Any], r: float) -> float:
    r""":math:`M_2(r) \ge \sup_{D(\theta,\theta^*)\le r}\|D^2 z\|_\rho`: one layer's derivative bounds propagated
    through the layers (formulas of ``theory/local-convergence.md``, "The propagated bound"), readout outputs."""
    mod = run["model"]
    H, d, L, T = int(mod["heads"]), int(mod["dim"]), int(mod["layers"]), float(mod["T"])
    th = run["centre"]
    nv = H * d * d
    infl = 1.0 + 1e-12
    Vn = np.linalg.norm(th[:nv].reshape(H, d, d), ord=2, axis=(-2, -1)) * infl
    Qn = np.linalg.norm(th[nv:2 * nv].reshape(H, d, d), ord=2, axis=(-2, -1)) * infl
    bn = np.linalg.norm(th[2 * nv:].reshape(H, d), axis=-1) * infl
    one = math.sqrt(H) * r
    v_rho = math.sqrt(float(np.mean(Vn ** 2))) + r
    v_inf, q_max, b_max = float(Vn.max()) + one, float(Qn.max()) + one, float(bn.max()) + one
    tau = T / L
    total = 0.0
    for law in laws:
        R = float(np.linalg.norm(np.asarray(law["X"], dtype=np.float64), axis=1).max()) * infl
        s = t = 0.0
        for _ in range(L):
            R2, sq = R * R, math.sqrt(R * R + 1.0)
            c = 1.0 + 2.0 * R2 * q_max + R * b_max
            beta = math.sqrt(R2 + v_rho ** 2 * R2 * R2 * (R2 + 1.0))
            g_tt = R2 * sq + 2.0 * R * R2 * (R2 + 1.0) * v_inf
            e = R2 + sq * (2.0 * R + 4.0 * R * R2 * q_max + 2.0 * R2 * b_max)
            g_xt = math.sqrt(c * c + v_rho ** 2 * e * e)
            qq = R * q_max + b_max
            g_xx = v_rho * (2.0 * R * R2 * q_max ** 2 + 4.0 * R * q_max + 4.0 * R2 * qq * q_max + 3.0 * qq + 2.0 * R * qq ** 2)
            grow = 1.0 + tau * v_rho * c
            s, t = grow * s + tau * beta, grow * t + tau * (g_xx * s * s + 2.0 * g_xt * s + g_tt)
            R = R * (1.0 + tau * v_rho)
        total += (t * infl) ** 2
    return math.sqrt(total) * infl


def _betas(laws: list[dict[str, Any]], run: dict[str, Any], claim: dict[str, Any]) -> None:
    """The recorded ``deviation``, ``beta_start`` and ``hessian_bound`` against the propagated bound re-derived here."""
    if claim.get("method") != "ball, propagated":
        raise Unchecked(f"the second-derivative bound ({claim.get('method')}) is not re-derived here")
    grid = [float(v) for v in claim["grid"]]
    if not grid or any(b <= a for a, b in zip(grid, grid[1:])) or grid[0] <= 0:
        raise Refuted("the grid of radii is not increasing and positive")
    r, e = float(claim["radius"]), float(claim["start_radius"])
    if grid[-1] != r:
        raise Refuted("the grid does not end at the certificate's radius")
    beta, prev, at_e = 0.0, 0.0, None
    for x in grid:
        beta += _propagated(laws, run, x) * (x - prev)
        prev = x
        if at_e is None and x >= e:
            at_e = beta
    m2 = _propagated(laws, run, r)
    margin = 1.0 - 1e-9
    bad = [name for ok, name in [
        (float(claim["deviation"]) >= beta * margin, f"beta(r) >= {beta:.6g}"),
        (float(claim["hessian_bound"]) >= m2 * margin, f"M_2(r) >= {m2:.6g}"),
        (e == 0 or (at_e is not None and float(claim["beta_start"]) >= at_e * margin), f"beta(e) >= {at_e}")] if not ok]
    if bad:
        raise Refuted("the recorded second-derivative bounds are below the propagated bound: " + "; ".join(bad))


def check(claim: dict[str, Any], inputs: Any, scope: Any) -> Checked:
    """Re-derive a ``convergence-centred`` claim (module docstring); the statement printed is built here."""
    run = inputs.run
    if run is None:
        raise Refuted("the file has no centre, model and targets for its convergence claim")
    if scope.restricted:
        raise Refuted("a convergence claim is about every sample of the run, not a subset")
    laws = scope.laws
    loss, J, H = _model(laws, run)
    if not Fraction(float(loss.hi)) <= Fraction(claim["loss_centre"]):
        raise Refuted(f"the loss at the centre reaches {float(loss.hi):.6g} > the recorded {claim['loss_centre']:.6g}")
    K = J.dot(J, "ip,jp->ij", J.lo.shape[1]) * _I.point(np.array(float(H)))
    if not _positive(K, float(claim["lambda_min"]), +1):
        raise Refuted(f"lambda_min(K) >= {claim['lambda_min']:.6g} at the centre is not proved here")
    if not _positive(K, float(claim["lambda_max"]), -1):
        raise Refuted(f"lambda_max(K) <= {claim['lambda_max']:.6g} at the centre is not proved here")
    _betas(laws, run, claim)
    _chain(claim)
    obj = "the gradient flow" if claim.get("step") is None else f"gradient descent with step {claim['step']:g}"
    statement = (f"every start within {claim['start_radius']:.3g} of the centre converges under {obj}: Loss(s) <= "
                 f"exp(-{claim['rate']:.4g} s) {claim['start_loss']:.3e}, displacement <= "
                 f"{claim['displacement_bound']:.3g}")
    how = (f"loss and NTK spectrum at the centre re-derived in interval arithmetic (ball LDL^T), beta(r) = "
           f"{claim['deviation']:.3g} and M_2(r) = {claim['hessian_bound']:.3g} from the propagated bound re-derived "
           "here, the theorem's inequality chain in exact rationals")
    return Checked(statement, how)
