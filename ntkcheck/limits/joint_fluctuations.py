r"""Joint fluctuations in tokens and heads around the doubly mean-field limit (seed 002 section 10).

"A Mean-Field Theory of Transformers" (seed 002) proves the token limit (Thm. 4.2) and the head
limit (Thm. 5.1) one at a time; its section 10 says that a finite-size theory with *joint*
fluctuation rates in ``(N, H)`` around the doubly mean-field limit of Thm. 9.1 "remains to be
developed". No theorem is tested here: the experiment measures what the data say
(``theory/limits-joint-fluctuations.md``).

The setting (forward pass at a frozen head law, i.e. Thm. 9.1's state at one training time):
``d = 1``, :math:`\mu_0 = 0.5 + U[-1, 1]`, the head law :math:`\rho = \mathrm{Unif}\{a_k\}_{k<m}\otimes
\mathrm{Law}(\bar v + sU)` (score :math:`a_k = Q_kK_k/\sqrt d`, scalar value ``v``, ``U`` uniform on
``[-1, 1]``). ``N`` tokens drawn i.i.d. from :math:`\mu_0` move by the field of ``H`` heads drawn
i.i.d. from :math:`\rho` and of their own empirical law (eqs. 6, 10); heads on one atom add their
values, :math:`V_H(x, \mu) = \sum_k W_k\,m_k(x, \mu)` with :math:`W_k = \frac1H\sum_{r: k_r = k}v_r`
and :math:`m_k` the softmax mean of atom ``k``. The observable is the mean token at time ``T``,
:math:`\phi = \int x\,d\mu_T`. Its doubly mean-field limit (:math:`W_k = \bar v/m`, :math:`\mu_0`
by Gauss-Legendre quadrature carried by the flow) is the reference; ``N = inf`` (quadrature
tokens, ``H`` heads) and ``H = inf`` (``N`` tokens, the exact head average) are the edges of the
measured surface.

Measured, per seed (an independent repetition): the mean-square error
:math:`\mathrm{MSE}(N, H) = \mathbb E(\phi^{N,H} - \phi)^2` over ``reps`` systems per cell. Fitted:
the edges against ``N`` and ``H`` (log-log, beside the CLT slope -1, a conjecture), and the whole
surface against :math:`a N^{-\alpha} + b H^{-\beta}` (+ :math:`c/(NH)`), with intervals over the
seeds. Tested: Gaussianity of :math:`\sqrt N`- and :math:`\sqrt H`-scaled fluctuations at the
largest sizes (Shapiro-Wilk, family-wise level 1 % over the three samples).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats
from scipy.optimize import least_squares

from .._progress import progress_bar
from ..errors import NtkcheckError
from . import _chaos_tokens_ref as _ref
from .rates import LimitExperiment, fit_rate

__all__ = ["SIZES", "HeadLaw", "HEAD_LAW", "head_weights", "velocity", "token_means", "limit_means",
           "measure", "additive_fit", "gaussian_check", "run"]

#: sizes: token counts, head counts, systems per cell and seed, RK4 steps, quadrature nodes of the limit
SIZES: dict[str, dict[str, Any]] = {
    "small": {"Ns": (16, 32, 64), "Hs": (4, 16, 64, 256), "reps": 24, "steps": 10, "nodes": 24},
    "default": {"Ns": (16, 32, 64, 128, 256), "Hs": (4, 16, 64, 256, 1024), "reps": 40, "steps": 12, "nodes": 32},
}

#: horizon (continuous depth)
T = 2.0
#: mu_0 = LOC + U[-1, 1]: off-centre, so that the mean token feels the heads (for a symmetric mu_0 the
#: atom means are odd in x and the mean token does not move, whatever the heads)
LOC = 0.5
#: family-wise level of the three Gaussianity tests (Bonferroni: each at LEVEL / 3)
LEVEL = 0.01


@dataclass(frozen=True)
class HeadLaw:
    r""":math:`\rho = \mathrm{Unif}\{a_k\}\otimes\mathrm{Law}(\bar v + sU)`: scores ``a`` (m,), mean value, spread."""

    scores: tuple[float, ...]
    value: float
    spread: float

    @property
    def atoms(self) -> int:
        return len(self.scores)


HEAD_LAW = HeadLaw(scores=(1.0, -0.8, 0.4), value=-0.6, spread=0.5)


def head_weights(law: HeadLaw, H: int | None, count: int, rng: np.random.Generator) -> np.ndarray:
    r"""``count`` draws of the atom weights :math:`W_k = \frac1H\sum_{r: k_r=k}v_r` of ``H`` i.i.d. heads,
    shape (count, m); ``H = None``: the exact average :math:`\bar v/m`."""
    m = law.atoms
    if H is None:
        return np.full((count, m), law.value / m)
    k = rng.integers(0, m, (count, int(H)))
    v = law.value + law.spread * rng.uniform(-1.0, 1.0, (count, int(H)))
    return np.stack([np.where(k == j, v, 0.0).sum(axis=1) for j in range(m)], axis=1) / H


def _scaled_powers(X: np.ndarray, K: int) -> np.ndarray:
    """:math:`x^n/n!` for ``n = 0..K``, shape ``(K + 1, *X.shape)`` (one product per order: no ``pow``)."""
    P = np.empty((K + 1, *X.shape))
    P[0] = 1.0
    for n in range(1, K + 1):
        np.multiply(P[n - 1], X, out=P[n])
        P[n] /= n
    return P


def _series_means(X: np.ndarray, Y: np.ndarray, w: np.ndarray, a: np.ndarray) -> np.ndarray:
    r"""All atom means at once by the moment series of :mod:`ntkcheck.limits._chaos_tokens_ref`:
    :math:`m_k(x) = \sum_n \frac{(a_kx)^n}{n!}M_{n+1} / \sum_n \frac{(a_kx)^n}{n!}M_n`, :math:`M_n = \sum_j w_jy_j^n`
    (the moments are shared by the atoms). Returns (B, P, m)."""
    A = float(np.max(np.abs(a))) * float(np.max(np.abs(X))) * float(np.max(np.abs(Y)))
    K = _ref.series_terms(A)
    fact = np.array([math.factorial(n) for n in range(K + 2)], dtype=float)
    Yp = _scaled_powers(Y, K + 1)
    M = np.einsum("nbj,bj->bn", Yp, w) * fact  # (B, K + 2) moments
    Xp = Yp[: K + 1] if X is Y else _scaled_powers(X, K)
    an = a[None, :] ** np.arange(K + 1)[:, None]  # (K + 1, m)
    Z = np.einsum("nbp,bnk->bpk", Xp, M[:, :K + 1, None] * an[None], optimize=True)
    Nm = np.einsum("nbp,bnk->bpk", Xp, M[:, 1:K + 2, None] * an[None], optimize=True)
    return Nm / Z


def velocity(X: np.ndarray, Y: np.ndarray, w: np.ndarray, W: np.ndarray, law: HeadLaw) -> np.ndarray:
    r""":math:`\sum_k W_{bk}\,m_k(x, \mu_b)` at the points ``X`` (B, P) of the laws
    :math:`\mu_b = \sum_j w_{bj}\delta_{Y_{bj}}` (B, M), per-system weights ``W`` (B, m). The atom means
    by the moment series for the systems where it is exact to rounding (:func:`_series_means`), by the
    softmax of :mod:`ntkcheck.limits._chaos_tokens_ref` for the others."""
    a = np.asarray(law.scores, dtype=float)
    A = float(np.max(np.abs(a))) * np.max(np.abs(X), axis=1) * np.max(np.abs(Y), axis=1)
    series = A <= _ref.SERIES_MAX_A
    out = np.empty(X.shape)
    if series.any():
        i = np.flatnonzero(series)
        out[i] = np.einsum("bpk,bk->bp", _series_means(X[i], Y[i], w[i], a), W[i])
    if not series.all():
        i = np.flatnonzero(~series)
        out[i] = 0.0
        with np.errstate(divide="ignore"):
            for k, ak in enumerate(a):
                out[i] += W[i, k:k + 1] * _ref.field_direct(X[i], Y[i], np.log(w[i]), np.array([ak]), np.ones(1))
    return out


#: a system whose tokens leave this ball is frozen there (Lemma 3.2 bounds the true tokens by
#: 1.5 e^((|vbar| + s) T) < 14): a broken field cannot make the run slow or overflow
ESCAPE = 20.0


def _rk4_final(X0: np.ndarray, f: Any, steps: int) -> np.ndarray:
    """Classical RK4 on ``[0, T]``; systems (rows) that leave the ball of :data:`ESCAPE` stop there."""
    h = T / steps
    X = X0.copy()
    live = np.ones(len(X), dtype=bool)
    for _ in range(int(steps)):
        if not live.any():
            break
        Z = X[live]
        k1 = f(Z, live)
        k2 = f(Z + 0.5 * h * k1, live)
        k3 = f(Z + 0.5 * h * k2, live)
        k4 = f(Z + h * k3, live)
        Zn = Z + (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
        ok = np.all(np.abs(Zn) <= ESCAPE, axis=1)  # False on nan
        idx = np.flatnonzero(live)
        X[idx[ok]] = Zn[ok]
        live[idx[~ok]] = False
    return X


def token_means(X0: np.ndarray, W: np.ndarray, law: HeadLaw, steps: int) -> np.ndarray:
    """The mean token at ``T`` of ``B`` systems of ``N`` tokens (X0 (B, N)), each moved by the field of its
    heads (W (B, m)) and of its own empirical law (RK4)."""
    w = np.full(X0.shape, 1.0 / X0.shape[1])
    return _rk4_final(X0, lambda X, live: velocity(X, X, w[live], W[live], law), steps).mean(axis=1)


def limit_means(W: np.ndarray, law: HeadLaw, steps: int, nodes: int) -> np.ndarray:
    r"""The mean token at ``T`` for ``N = inf``: :math:`\mu_0 = 0.5 + U[-1, 1]` by a ``nodes``-point Gauss-Legendre
    rule carried by the flow as weighted particles, one law per row of ``W`` (B, m)."""
    xi, wq = _ref.gauss_legendre_uniform(int(nodes))
    X0 = np.broadcast_to(LOC + xi, (W.shape[0], len(xi))).copy()
    w = np.broadcast_to(wq, X0.shape)
    return _rk4_final(X0, lambda X, live: velocity(X, X, w[live], W[live], law), steps) @ wq


@dataclass(frozen=True)
class JointMeasurement:
    r"""What :func:`measure` measured.

    Attributes
    ----------
    Ns, Hs : tuple of int
        The finite sizes; the surface has one more row and column for ``inf``.
    mse : (seeds, len(Ns) + 1, len(Hs) + 1) array
        :math:`\mathrm{MSE}(N, H)`, the last row ``N = inf``, the last column ``H = inf`` (``nan`` at
        ``(inf, inf)``, the reference itself).
    token_sample, head_sample : (seeds * reps,) arrays
        :math:`\sqrt N(\phi^{N,\infty} - \phi)` at the largest ``N`` and :math:`\sqrt H(\phi^{\infty,H} - \phi)`
        at the largest ``H``.
    joint_sample : (seeds * reps,) array
        :math:`\phi^{N,H} - \phi` at the largest ``N`` and ``H``.
    reference, reference_error : float
        :math:`\phi` and its change at twice the nodes and steps.
    reps : int
    """

    Ns: tuple[int, ...]
    Hs: tuple[int, ...]
    mse: np.ndarray
    token_sample: np.ndarray
    head_sample: np.ndarray
    joint_sample: np.ndarray
    reference: float
    reference_error: float
    reps: int


def measure(cfg: dict[str, Any], *, seeds: int, seed: int, law: HeadLaw = HEAD_LAW,
            progress: bool | None = None) -> JointMeasurement:
    """The surface :math:`\\mathrm{MSE}(N, H)` of each seed: per finite ``N``, ``reps`` systems for every
    ``H`` (and ``H = inf``) sharing their initial tokens across ``H`` (common random numbers); the row
    ``N = inf`` from the quadrature limit with sampled heads."""
    Ns, Hs, R, steps, nodes = tuple(cfg["Ns"]), tuple(cfg["Hs"]), int(cfg["reps"]), int(cfg["steps"]), int(cfg["nodes"])
    exact = head_weights(law, None, 1, np.random.default_rng(0))
    ref = float(limit_means(exact, law, steps, nodes)[0])
    ref_err = abs(float(limit_means(exact, law, 2 * steps, 2 * nodes)[0]) - ref)
    mse = np.full((seeds, len(Ns) + 1, len(Hs) + 1), np.nan)
    tok, head, both = [], [], []
    cols: tuple[int | None, ...] = (*Hs, None)
    bar = progress_bar(seeds * (len(Ns) + 1), desc="joint-fluctuations", unit="size", enabled=progress)
    try:
        for s in range(seeds):
            rng = np.random.default_rng([22, 10, int(seed) + s])
            for i, N in enumerate(Ns):
                X0 = np.tile(LOC + rng.uniform(-1.0, 1.0, (R, N)), (len(cols), 1))
                W = np.concatenate([head_weights(law, H, R, rng) for H in cols])
                dev = (token_means(X0, W, law, steps) - ref).reshape(len(cols), R)
                mse[s, i] = np.mean(dev**2, axis=1)
                if N == Ns[-1]:
                    tok.append(math.sqrt(N) * dev[-1])
                    both.append(dev[-2])
                bar.update(1)
            W = np.concatenate([head_weights(law, H, R, rng) for H in Hs])
            dev = (limit_means(W, law, steps, nodes) - ref).reshape(len(Hs), R)
            mse[s, -1, :-1] = np.mean(dev**2, axis=1)
            head.append(math.sqrt(Hs[-1]) * dev[-1])
            bar.update(1)
    finally:
        bar.close()
    return JointMeasurement(Ns, Hs, mse, np.concatenate(tok), np.concatenate(head), np.concatenate(both), ref,
                            ref_err, R)


# ----------------------------------------------------------------------------- fits and tests


def _design(Ns: tuple[int, ...], Hs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``1/N`` and ``1/H`` of every cell of the surface (0 for ``inf``), shape (len(Ns) + 1, len(Hs) + 1)."""
    iN = np.array([1.0 / n for n in Ns] + [0.0])
    iH = np.array([1.0 / h for h in Hs] + [0.0])
    return np.broadcast_to(iN[:, None], (len(iN), len(iH))), np.broadcast_to(iH[None, :], (len(iN), len(iH)))


def additive_fit(mse: np.ndarray, Ns: tuple[int, ...], Hs: tuple[int, ...], *,
                 interaction: bool = False) -> tuple[np.ndarray, float]:
    r"""Least squares in ``log`` of one seed's surface against :math:`aN^{-\alpha} + bH^{-\beta}`
    (+ :math:`c/(NH)` with ``interaction``), over every cell but ``(inf, inf)``.

    Returns the parameters ``(a, alpha, b, beta[, c])`` and the root-mean-square log residual.
    """
    iN, iH = _design(Ns, Hs)
    ok = np.isfinite(mse)
    y = np.log(mse[ok])
    u, v = iN[ok], iH[ok]

    def model(p: np.ndarray) -> np.ndarray:
        val = math.exp(p[0]) * u ** p[1] + math.exp(p[2]) * v ** p[3]
        if interaction:
            val = val + p[4] * u * v
        return np.log(np.maximum(val, 1e-300))

    p0 = [math.log(float(np.max(mse[:-1, -1])) * Ns[0]), 1.0, math.log(float(np.max(mse[-1, :-1])) * Hs[0]), 1.0]
    if interaction:
        p0.append(0.0)
    with np.errstate(divide="ignore"):  # 0 ** alpha at the edges is 0, as it should be
        res = least_squares(lambda p: model(p) - y, p0, method="lm", xtol=1e-12, ftol=1e-12)
    p = np.array(res.x)
    p[0], p[2] = math.exp(p[0]), math.exp(p[2])
    return p, float(np.sqrt(np.mean(res.fun**2)))


def gaussian_check(sample: np.ndarray, level: float = LEVEL) -> tuple[bool, float]:
    """Shapiro-Wilk: ``(not rejected at level, p-value)``. Calibrated in the tests: an exactly Gaussian
    sample of the experiment's size is rejected in about ``level`` of trials."""
    x = np.asarray(sample, dtype=float)
    if not np.all(np.isfinite(x)) or np.ptp(x) == 0:  # a frozen or escaped run: nothing Gaussian about it
        return False, 0.0
    p = float(stats.shapiro(x).pvalue)
    return p >= level, p


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and Student-t 95 % interval over the seeds."""
    n = len(values)
    half = float(stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1) / math.sqrt(n))
    m = float(np.mean(values))
    return m, m - half, m + half


def _joint_summary(m: JointMeasurement) -> dict[str, Any]:
    """Per-seed additive fits (with and without the interaction term) and their intervals."""
    fits = [additive_fit(s, m.Ns, m.Hs) for s in m.mse]
    inter = [additive_fit(s, m.Ns, m.Hs, interaction=True) for s in m.mse]
    P = np.array([f[0] for f in fits])
    C = np.array([f[0][4] for f in inter])
    return {"alpha": _interval(P[:, 1]), "beta": _interval(P[:, 3]), "a": _interval(P[:, 0]), "b": _interval(P[:, 2]),
            "c": _interval(C), "rms_log_residual": [f[1] for f in fits],
            "rms_log_residual_interaction": [f[1] for f in inter],
            "noise_level": math.sqrt(2.0 / (m.reps - 1))}


def run(*, size: str = "default", seeds: int = 5, seed: int = 0, progress: bool | None = None,
        law: HeadLaw = HEAD_LAW) -> LimitExperiment:
    """The ``joint-fluctuations`` experiment at ``size`` over ``seeds`` independent repetitions."""
    if size not in SIZES:
        raise NtkcheckError(f"joint-fluctuations: unknown size {size!r}; known: {', '.join(SIZES)}")
    if int(seeds) != seeds or seeds < 2:
        raise NtkcheckError(f"joint-fluctuations: need at least 2 seeds for a confidence interval, got {seeds!r}")
    cfg = SIZES[size]
    t0 = time.perf_counter()
    m = measure(cfg, seeds=int(seeds), seed=int(seed), law=law, progress=progress)
    ref = m.reference_error
    fits = (
        fit_rate(m.Ns, m.mse[:, :-1, -1], variable="N", quantity="E (mean token - limit)^2 at H = inf",
                 theorem="1/N (CLT scaling; a conjecture, no theorem)", theorem_rate=lambda x: 1.0 / x,
                 reference_error=ref * ref),
        fit_rate(m.Hs, m.mse[:, -1, :-1], variable="H", quantity="E (mean token - limit)^2 at N = inf",
                 theorem="1/H (CLT scaling; a conjecture, no theorem)", theorem_rate=lambda x: 1.0 / x,
                 reference_error=ref * ref),
    )
    joint = _joint_summary(m)
    gauss = {name: gaussian_check(s, LEVEL / 3) for name, s in (("tokens", m.token_sample), ("heads", m.head_sample),
                                                                 ("both", m.joint_sample))}
    lev = f"Shapiro-Wilk at level {LEVEL / 3:.3g}, family-wise {LEVEL:g}, {len(m.token_sample)} samples"
    checks = {
        f"sqrt(N)-scaled fluctuation at N = {m.Ns[-1]}, H = inf: Gaussian not rejected ({lev})": gauss["tokens"][0],
        f"sqrt(H)-scaled fluctuation at N = inf, H = {m.Hs[-1]}: Gaussian not rejected ({lev})": gauss["heads"][0],
        f"fluctuation at N = {m.Ns[-1]}, H = {m.Hs[-1]}: Gaussian not rejected ({lev})": gauss["both"][0],
    }
    notes = _notes(m, joint, gauss)
    setting = (f"d = 1, mu_0 = {LOC:g} + U[-1, 1], head law uniform on scores {list(law.scores)} x value "
               f"{law.value:g} + {law.spread:g} U[-1, 1]; observable: the mean token at T = {T:g}; N in "
               f"{list(m.Ns)} + inf, H in {list(m.Hs)} + inf, {m.reps} systems per cell and seed; limit: "
               f"{cfg['nodes']}-node Gauss-Legendre mu_0 with the exact head average, RK4 {cfg['steps']} steps")
    data = {"Ns": list(m.Ns), "Hs": list(m.Hs),
            "mse": [[[None if np.isnan(v) else float(v) for v in row] for row in s] for s in m.mse], "reference": m.reference,
            "reference_error": ref, "joint": joint, "gaussian_p": {k: v[1] for k, v in gauss.items()},
            "samples": {"tokens": m.token_sample.tolist(), "heads": m.head_sample.tolist(),
                        "both": m.joint_sample.tolist()}}
    return LimitExperiment("joint-fluctuations", "seed 002 section 10 (open), around Thm. 9.1's limit", setting,
                           fits, checks, tuple(notes), time.perf_counter() - t0, data)


def _notes(m: JointMeasurement, joint: dict[str, Any], gauss: dict[str, tuple[bool, float]]) -> list[str]:
    """The joint fit, the interaction term, the Gaussianity p-values, the reference."""
    a, b, c = joint["alpha"], joint["beta"], joint["c"]
    res, noise = np.median(joint["rms_log_residual"]), joint["noise_level"]
    return [
        f"joint fit MSE ~ a N^-alpha + b H^-beta over every cell (5 seeds): alpha = {a[0]:.3f} [{a[1]:.3f}, "
        f"{a[2]:.3f}], beta = {b[0]:.3f} [{b[1]:.3f}, {b[2]:.3f}]; a = {joint['a'][0]:.3g}, b = {joint['b'][0]:.3g}; "
        f"median RMS log residual {res:.3f} against the sampling noise of a cell ~{noise:.3f}",
        f"interaction term c/(N H): c = {c[0]:.3g} [{c[1]:.3g}, {c[2]:.3g}] ("
        + ("its interval excludes 0: the data need it" if c[1] > 0 or c[2] < 0 else
           "its interval contains 0: the data do not need it") + ")",
        "Shapiro-Wilk p-values: " + ", ".join(f"{k} {v[1]:.3f}" for k, v in gauss.items()),
        f"limit: mean token {m.reference:.8f}, error {m.reference_error:.2g} (twice the nodes and steps)",
        "no theorem is tested: seed 002 section 10 leaves the joint (N, H) fluctuations open; the slopes are "
        "compared with the CLT scaling 1/N, 1/H of the mean-square error as a conjecture",
    ]
