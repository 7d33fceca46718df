r"""Integrators of the gradient flow :math:`\dot\theta = f(\theta) = -m\nabla\mathcal L(\theta)`.

Private to :mod:`ntkcheck.dynamics.flow`. Three routes share one loop for records, the
wall-clock budget and the target loss:

* ``"exponential"`` (the default): an adaptive exponential integrator (ETDRK3 of Cox and
  Matthews, with an embedded second-order solution as error estimate). The flow is split as
  :math:`f(\theta) = A\theta + N(\theta)` with the stiff linear part
  :math:`A = -B^TB` (Gauss-Newton at the initial parameters, :math:`BB^T = K_0` the NTK),
  treated exactly through :math:`\varphi` functions of :math:`K_0`, and the small nonlinear
  remainder :math:`N` explicitly:

  .. math::

      a &= \theta_n + \tfrac h2\varphi_1(\tfrac h2A)f_n,\qquad
      b = \theta_n + h\varphi_1(hA)(f_n + 2D_a),\\
      \theta_{n+1} &= \theta_n + h\varphi_1(hA)f_n + h(4\varphi_2-8\varphi_3)(hA)D_a
                     + h(4\varphi_3-\varphi_2)(hA)D_b,

  :math:`D_y = N(y) - N(\theta_n)`; the embedded solution replaces the last two terms by
  :math:`2h\varphi_2(hA)D_a` (order 2),

  with :math:`\varphi_k(hA)v = v/k! - hB^T\varphi_{k+1}(-hK_0)Bv` (from
  :math:`(B^TB)^j = B^T K_0^{j-1} B`), so only functions of the small matrix :math:`K_0`
  are needed. Exact on the linearised flow, so the step is limited by the nonlinearity,
  not by :math:`\lambda_{\max}/\lambda_{\min}` (explicit steps must stay below
  :math:`2/\lambda_{\max}` while the flow lasts :math:`\sim 1/\lambda_{\min}`).
* any :mod:`scipy.integrate` ``OdeSolver`` by name (``"RK45"``, ``"DOP853"``, ...), stepped
  one step at a time so that the budget and the target loss can stop it;
* explicit gradient descent with a fixed step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..errors import DomainError
from ._attention import _Linear, phi

#: the vector field: parameters -> (loss, f(theta) = -m grad Loss)
Field = Callable[[np.ndarray], tuple[float, np.ndarray]]


class FlowStatus(Enum):
    """Why a gradient-flow run stopped (members read as sentences)."""

    COMPLETED = "reached the requested flow time"
    TARGET_LOSS = "reached the target loss"
    TIME_BUDGET = "stopped by the wall-clock budget"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class _Run:
    s: tuple[float, ...]
    states: tuple[np.ndarray, ...]
    walls: tuple[float, ...]
    nfev: int
    steps: int
    rejected: int
    status: FlowStatus
    method: str


class _Recorder:
    """Records, budget and target loss shared by the integrators."""

    def __init__(self, s_rec: np.ndarray, budget: float | None, loss_target: float | None,
                 progress: Callable[[float, float], None]) -> None:
        self.s_rec = s_rec
        self.next = 0
        self.budget = budget
        self.loss_target = loss_target
        self.progress = progress
        self.t0 = time.perf_counter()
        self.s: list[float] = []
        self.states: list[np.ndarray] = []
        self.walls: list[float] = []

    def wall(self) -> float:
        return time.perf_counter() - self.t0

    def store(self, s: float, state: np.ndarray) -> None:
        if self.s and s <= self.s[-1]:
            return
        self.s.append(float(s))
        self.states.append(state.copy())
        self.walls.append(self.wall())

    def pending(self) -> float | None:
        """Next record time not yet stored."""
        return float(self.s_rec[self.next]) if self.next < len(self.s_rec) else None

    def passed(self, s: float, state_at: Callable[[float], np.ndarray]) -> None:
        """Store every record time up to ``s`` (``state_at`` interpolates inside the last step)."""
        while self.next < len(self.s_rec) and self.s_rec[self.next] <= s * (1 + 1e-12):
            self.store(float(self.s_rec[self.next]), state_at(float(self.s_rec[self.next])))
            self.next += 1

    def stop(self, s: float, loss: float | None, steps: int) -> FlowStatus | None:
        """A reason to stop now, if any (the current state is then stored by the caller).

        Never before the first step: a run has at least two records."""
        if steps == 0:
            return None
        if self.loss_target is not None and loss is not None and loss <= self.loss_target:
            return FlowStatus.TARGET_LOSS
        if self.budget is not None and self.wall() >= self.budget:
            return FlowStatus.TIME_BUDGET
        return None

    def run(self, nfev: int, steps: int, rejected: int, status: FlowStatus, method: str) -> _Run:
        return _Run(tuple(self.s), tuple(self.states), tuple(self.walls), nfev, steps, rejected, status, method)


def _finite_or_raise(vec: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(vec)):
        raise DomainError(f"{what}: the parameters became non-finite; take a smaller step or a tighter tolerance")


#: relinearise when this many accepted steps in a row had h lambda_max below STIFF_STEP ...
RELINEARISE_AFTER = 8
#: ... (the frozen linear part no longer captures the stiffness: steps like an explicit method)
STIFF_STEP = 2.0


def exponential(field: Field, p0: np.ndarray, time_end: float, lin: _Linear, rec: _Recorder, *,
                rtol: float, atol: float, h0: float | None = None,
                relinearise: Callable[[np.ndarray], _Linear | None] | None = None) -> _Run:
    r"""Adaptive ETDRK3 with an embedded ETD2 (module docstring).

    The linear part ``lin`` is frozen; when the parameters have moved so far that the
    steps shrink to those of an explicit method (``RELINEARISE_AFTER`` accepted steps in a
    row with :math:`h\lambda_{\max} <` ``STIFF_STEP``), ``relinearise(theta)`` supplies
    the Gauss-Newton linear part at the current parameters (an exponential
    Rosenbrock-type update; the scheme only uses differences of ``N``, so the switch is
    seamless), or ``None`` if it is too expensive.
    """
    size = p0.shape[0]
    lam = lin.evals
    relinearised = 0
    stiff_run = 0
    t_last, relin_cost = 0.0, 0.0

    def phis(tau: float, terms: list[tuple[dict[int, float], np.ndarray]]) -> np.ndarray:
        # sum over terms of sum_k c_k phi_k(tau A) v, with phi_k(tau A) v = v/k! - tau B^T phi_{k+1}(-tau K) B v
        out = np.zeros(size)
        g_sum = None
        for coef, v in terms:
            out += sum(c / math.factorial(k) for k, c in coef.items()) * v
            g = lin.func(lin.apply(v), sum(c * phi(k + 1, -tau * lam) for k, c in coef.items()))
            g_sum = g if g_sum is None else g_sum + g
        assert g_sum is not None
        return out - tau * lin.apply_T(g_sum, size)

    def nonlinear_gap(fy: np.ndarray, f0: np.ndarray, dy: np.ndarray) -> np.ndarray:
        # N(y) - N(theta) with N = f - A theta, A = -B^T B
        return fy - f0 + lin.apply_T(lin.apply(dy), size)

    theta = p0.copy()
    loss, f = field(theta)
    nfev, steps, rejected = 1, 0, 0
    s = 0.0
    rec.passed(0.0, lambda _t: theta)
    lam_max = float(lam[-1]) if lam.size and lam[-1] > 0 else 1.0
    h = h0 if h0 is not None else 1.0 / lam_max
    status = FlowStatus.COMPLETED
    while s < time_end * (1 - 1e-12):
        why = rec.stop(s, loss, steps)
        if why is not None:
            status = why
            break
        target = rec.pending()
        limit = (target if target is not None and target > s else time_end) - s
        # equal steps up to the record (a record beyond 1e15 steps: step h, never an overflowing count)
        hs = limit / math.ceil(limit / h * (1 - 1e-9)) if h < limit < 1e15 * h else min(h, limit)
        # Cox-Matthews ETDRK3: stages at s + h/2 and s + h
        a = theta + (hs / 2) * phis(hs / 2, [({1: 1.0}, f)])
        la, fa = field(a)
        Da = nonlinear_gap(fa, f, a - theta)
        b = theta + hs * phis(hs, [({1: 1.0}, f + 2.0 * Da)])
        lb, fb = field(b)
        nfev += 2
        Db = nonlinear_gap(fb, f, b - theta)
        base = theta + hs * phis(hs, [({1: 1.0}, f)])
        new = base + hs * phis(hs, [({2: 4.0, 3: -8.0}, Da), ({2: -1.0, 3: 4.0}, Db)])
        # embedded second-order solution base + 2 h phi_2(hA) Da: their difference estimates the error
        err_vec = hs * phis(hs, [({2: 2.0, 3: -8.0}, Da), ({2: -1.0, 3: 4.0}, Db)])
        if not (np.all(np.isfinite(new)) and np.isfinite(la) and np.isfinite(lb)):
            rejected += 1
            h = hs / 10
            if h < 1e-14 * max(time_end, 1.0):
                _finite_or_raise(new, "exponential integrator")
            continue
        scale = atol + rtol * np.maximum(np.abs(theta), np.abs(new))
        err = math.sqrt(float(np.mean((err_vec / scale) ** 2)))
        fac = 5.0 if err == 0 else min(5.0, max(0.2, 0.9 * err ** (-1.0 / 3.0)))
        if err > 1.0:
            rejected += 1
            h = hs * min(fac, 0.9)
            continue
        steps += 1
        s = s + limit if hs >= limit else s + hs
        theta = new
        loss, f = field(theta)
        nfev += 1
        rec.passed(s, lambda _t, th=theta: th)
        rec.progress(s, loss)
        h = max(h, hs * fac) if hs < h else hs * fac
        stiff_run = stiff_run + 1 if h * lam_max < STIFF_STEP and hs < limit else 0
        if (relinearise is not None and stiff_run >= RELINEARISE_AFTER and (time_end - s) * lam_max > 10 * STIFF_STEP
                and rec.wall() - t_last > 2 * relin_cost):  # at most a third of the time on relinearising
            stiff_run = 0
            t0 = rec.wall()
            new_lin = relinearise(theta)
            t_last = rec.wall()
            relin_cost = t_last - t0
            if new_lin is None:
                relinearise = None  # too expensive: go on with the frozen part
            else:
                lin, lam = new_lin, new_lin.evals
                lam_max = float(lam[-1]) if lam.size and lam[-1] > 0 else 1.0
                relinearised += 1
    rec.store(s, theta)
    name = "exponential:etdrk3" + (f" ({relinearised} relinearisations)" if relinearised else "")
    return rec.run(nfev, steps, rejected, status, name)


def ode_solver(field: Field, p0: np.ndarray, time_end: float, rec: _Recorder, *, method: str,
               rtol: float, atol: float) -> _Run:
    """One :mod:`scipy.integrate` solver, stepped by hand (records from its dense output)."""
    import scipy.integrate as si

    cls = getattr(si, method, None)
    if not (isinstance(cls, type) and issubclass(cls, si.OdeSolver)):
        raise DomainError(f"method: expected 'auto', 'exponential' or a scipy.integrate solver "
                          f"(RK45, RK23, DOP853, Radau, BDF, LSODA), got {method!r}")
    last: dict[str, float] = {}
    nfev = 0

    def fun(t: float, y: np.ndarray) -> np.ndarray:
        nonlocal nfev
        nfev += 1
        loss, f = field(y)
        last["t"], last["loss"] = t, loss
        return f

    solver = cls(fun, 0.0, p0.copy(), time_end, rtol=rtol, atol=atol)
    rec.passed(0.0, lambda _t: p0)
    status = FlowStatus.COMPLETED
    steps = 0
    while solver.status == "running":
        loss = last["loss"] if last.get("t") == solver.t else None
        why = rec.stop(solver.t, loss, steps)
        if why is not None:
            status = why
            break
        msg = solver.step()
        if solver.status == "failed":
            raise DomainError(f"{method} failed at flow time {solver.t:.4g}: {msg}")
        steps += 1
        dense = solver.dense_output()
        rec.passed(solver.t, lambda t, dense=dense: dense(t))  # type: ignore[misc]
        rec.progress(solver.t, last.get("loss", float("nan")))
    rec.store(solver.t, solver.y)
    return rec.run(nfev, steps, 0, status, f"solve_ivp:{method}")


def descent(field: Field, p0: np.ndarray, time_end: float, rec: _Recorder, *, step: float) -> _Run:
    """Explicit gradient descent ``theta <- theta + step f(theta)``, ``s = k step``."""
    n_steps = int(math.ceil(time_end / step))
    rec_steps = set(np.clip(np.round(rec.s_rec / step), 0, min(n_steps, 2**62)).astype(np.int64).tolist())
    vec = p0.copy()
    status = FlowStatus.COMPLETED
    nfev = 0
    k = 0
    for k in range(n_steps + 1):
        if k in rec_steps:
            rec.store(k * step, vec)
        if k == n_steps:
            break
        loss, f = field(vec)
        nfev += 1
        why = rec.stop(k * step, loss, k)
        if why is not None:
            status = why
            break
        vec = vec + step * f
        if not np.all(np.isfinite(vec)):
            raise DomainError(f"gradient descent diverged at step {k} (step={step}); take a smaller step")
        rec.progress((k + 1) * step, loss)
    rec.store(k * step, vec)
    return rec.run(nfev, k, 0, status, f"gd:step={step:g}")
