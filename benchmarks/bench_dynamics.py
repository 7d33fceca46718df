"""Benchmark of ntkcheck.dynamics (issue 4).

Run: ``python benchmarks/bench_dynamics.py [--repeat R]``. Prints one table:

* one gradient evaluation (forward storing the cache + discrete adjoint) for n = 8 samples,
  N = 32 tokens, d = 8, H = 64, L = 16, as a ratio to the forward pass alone (no cache),
  timed in the same run (aim: under 3x), at V = 0 (FixUp) and V != 0 (same cost: the
  computation does not branch on V);
* the batched-seed adjoint used for NTK Jacobians (B seeds in one pass) per seed, against
  one gradient;
* wall time of the default experiment (``ntkcheck flow`` with no arguments: the first four
  bundled samples, readout loss, H = 16, L = 4, eps = 0.01) with and without NTK records;
* ``--issue11`` (issue 11): the flow at realistic size, 12 samples x 10 tokens in d = 64
  (H = 16, L = 4, readout and tokens loss, eps = 0.01, 4 decades of the slowest mode,
  rtol 1e-7): the exponential integrator (linear part = the NTK at FixUp, from the
  features) against ``solve_ivp``'s RK45 on the same run, in the same process (wall,
  gradients, loss error against DOP853 at rtol 1e-11); one NTK over all parameters away
  from FixUp (``V`` part by the kernel trick, ``Q, b`` from per-sample Jacobians) against
  the full dense Jacobian ``J J^T``; the model on distinct atoms against the same tokens
  kept as separate slots when every token appears 4 times; the bundled data with the
  per-token loss (a singular NTK: ends by its flow-time cap or the budget). Peak memory
  by tracemalloc (numpy reports its buffers to it).

* ``--limits`` (issue 15): each limit-theorem experiment (``ntkcheck experiment NAME``) at its
  default size against its small size, with verdicts and fitted slopes. Measured at load ~6
  (three other jobs running), 5 seeds each, default (small): chaos-tokens 15.0 s (5.4 s),
  heads-lln 6.6 s (1.3 s), depth-heads 13.3 s (1.8 s), langevin 13.3 s (2.1 s),
  low-temperature 15.6 s (1.5 s); every one under the 60 s aim and every verdict consistent.

Measured on the shared 2-core machine (``OPENBLAS_NUM_THREADS=1``, load ~1-2 from other
jobs; at load 5 every time doubles to triples):

* ``ntkcheck flow`` on that data (readout, defaults), before -> after issue 11: killed after
  150 s (RK45 took 7 s, then a dense NTK over 132k parameters at each of 20 records, ~15 s
  and ~1 GB each; the issue saw 1.9 GB and an ETA of hours) -> 13.9 s, 0.7 GB peak RSS, with
  the NTK at 2 records (start: free from the features; end: one dense NTK);
* integrator, readout: RK45 7.4 s, 176 gradients, loss error 1e-5; exponential 5.0 s, 119
  gradients, loss error 2e-8. Tokens loss (condition ~10, not stiff): RK45 10.4 s, 314
  gradients, 4e-6; exponential 14.5 s, 287 gradients, 4e-8 (its per-step work on the
  132k-parameter vectors is not free; it wins on stiff and singular spectra, where RK45
  needs ~lambda_max s_end steps);
* one NTK away from FixUp (readout, 768 x 768): full dense ``J J^T`` 10.4 s, 1986 MiB ->
  kernel trick + per-sample ``Q`` head by head 4.0 s, 515 MiB (agreement 2e-15);
* one gradient with every token 4 times: 86 ms on token slots -> 20 ms on atoms;
* bundled data, ``--loss tokens`` (singular NTK, kernel dimension 3, lambda_+ = 2e-5):
  ended by the 50 s budget at s = 3e4 of 2.3e5 (the CLI run completed in 36 s at load 1).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ntkcheck.convergence import local_convergence
from ntkcheck.dynamics import default_samples
from ntkcheck.dynamics.model import (
    _backward,
    _Batch,
    _forward,
    _loss_grad,
    init_params,
)


def best(f, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n, N, d, H, L = 8, 32, 8, 64, 16
    rng = np.random.default_rng(0)
    batch = _Batch.of(list(rng.standard_normal((n, N, d))))
    rows = []
    for label, vs in (("FixUp V=0", 0.0), ("V != 0", 1.0)):
        p = init_params(d, H, v_scale=vs, seed=0)
        Y = batch.X + 0.1 * rng.standard_normal(batch.X.shape)
        t_fwd = best(lambda p=p: _forward(batch, p, L, 1.0, keep=False), args.repeat)
        t_fwd_keep = best(lambda p=p: _forward(batch, p, L, 1.0, keep=True), args.repeat)
        t_grad = best(lambda p=p, Y=Y: _loss_grad(batch, p, Y, L, 1.0, "tokens"), args.repeat)
        rows.append((f"gradient, {label}", t_grad, t_grad / t_fwd))
        rows.append((f"forward with cache, {label}", t_fwd_keep, t_fwd_keep / t_fwd))
        rows.append((f"forward alone, {label}", t_fwd, 1.0))
    p = init_params(d, H, v_scale=1.0, seed=0)
    _, cache = _forward(batch, p, L, 1.0, keep=True)
    B = 16
    G = rng.standard_normal((B,) + batch.X.shape)
    t_b = best(lambda: _backward(cache, p, L, 1.0, G), max(1, args.repeat // 2))
    t_g = best(lambda: _loss_grad(batch, p, batch.X, L, 1.0, "tokens"), args.repeat)
    rows.append((f"batched adjoint, per seed (B={B})", t_b / B, (t_b / B) / t_g))

    print(f"one gradient evaluation: n={n}, N={N}, d={d}, H={H}, L={L}  (best of {args.repeat})")
    print(f"{'what':42s} {'time':>10s} {'ratio':>8s}")
    for name, t, r in rows:
        print(f"{name:42s} {t * 1e3:8.2f} ms {r:8.2f}x")
    print("(ratios: against the forward pass alone, except the batched adjoint: against one gradient)")

    samples, source = default_samples()
    print(f"\ndefault experiment ({source}; readout, H=16, L=4, eps=0.01, 20 records)")
    print(f"{'run':42s} {'wall':>10s} {'gradients':>10s} {'ms/grad':>8s}")
    for track in (False, True):
        t0 = time.perf_counter()
        r = local_convergence(samples, heads=16, layers=4, eps=1e-2, loss="readout", n_records=20, track_ntk=track,
                              progress=False)
        wall = time.perf_counter() - t0
        name = "flow + NTK lambda_min at every record" if track else f"flow only ({r.flow.method})"
        print(f"{name:42s} {wall:8.2f} s {r.flow.nfev:10d} {r.flow.wall[-1] / r.flow.nfev * 1e3:8.2f}")
    print(f"lambda_0 = {r.lambda_0:.5g}, rate_measured = {r.rate_measured:.5g} (2 lambda_0 = {2 * r.lambda_0:.5g})")


def _peak(f):
    """(result, seconds, peak MiB of numpy buffers) of one call."""
    import tracemalloc

    tracemalloc.start()
    t0 = time.perf_counter()
    out = f()
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, dt, peak


def issue11() -> None:
    """Rows of issue 11 (module docstring)."""
    import warnings

    import ntkcheck.dynamics._attention as A
    from ntkcheck.dynamics._experiment import _setup, _targets_from
    from ntkcheck.dynamics.flow import gradient_flow
    from ntkcheck.io.files import bundled_path, load_samples

    rng = np.random.default_rng(0)
    samples = list(rng.standard_normal((12, 10, 64)))
    p = init_params(64, 16, seed=0)
    print("\nissue 11: flow at d = 64, 12 samples x 10 tokens, H = 16, L = 4, eps = 0.01, rtol 1e-7")
    print(f"{'run':46s} {'wall':>9s} {'grads':>6s} {'ratio':>7s} {'loss err':>9s} {'peak':>8s}")
    for loss in ("readout", "tokens"):
        st = _setup(samples, p, 4, 1.0, loss)
        u = rng.standard_normal(len(st.evals))
        from ntkcheck.dynamics._experiment import _from_weighted
        from ntkcheck.dynamics.flow import flow_time

        y = _targets_from(st, st.z0 + 0.01 * _from_weighted(st, u / np.linalg.norm(u)))
        t_end = flow_time(st.evals, 4.0).time
        kw = dict(layers=4, time_end=t_end, loss=loss, n_records=20, track_ntk=False, progress=False)
        ref = gradient_flow(samples, p, y, method="DOP853", rtol=1e-11, atol=1e-14, **kw)
        base = None
        for method in ("RK45", "auto"):
            fl, dt, peak = _peak(lambda m=method, y=y, kw=kw: gradient_flow(samples, p, y, method=m, rtol=1e-7, **kw))
            err = float(np.max(np.abs(np.array(fl.loss) - ref.loss) / np.array(ref.loss)))
            base = dt if base is None else base
            print(f"{loss + ', ' + fl.method:46s} {dt:7.2f} s {fl.nfev:6d} {dt / base:6.2f}x {err:9.1e} {peak:6.0f} MiB")
    # one NTK over all parameters away from FixUp (readout: 768 x 768)
    batch = A._Batch.of(samples)
    pv = p.unflat(p.flat() + 1e-3 * rng.standard_normal(p.size))
    _, cache = A._forward(batch, pv, 4, 1.0, keep=True)
    K, dt_new, pk_new = _peak(lambda: A._ntk_dense(batch, pv, 4, 1.0, "readout", cache))

    def full():
        lin = A._dense_linear(batch, pv, 4, 1.0, "readout", cache, memory=1 << 32)
        return lin.Bd @ lin.Bd.T

    K_full, dt_old, pk_old = _peak(full)
    rel = float(np.max(np.abs(K - K_full)) / np.max(np.abs(K_full)))
    print(f"{'NTK (readout), dense J J^T over 132k params':46s} {dt_old:7.2f} s {'':6s} {1.0:6.2f}x {'':9s} {pk_old:6.0f} MiB")
    print(f"{'NTK (readout), kernel trick + per-sample Q':46s} {dt_new:7.2f} s {'':6s} {dt_new / dt_old:6.2f}x "
          f"{rel:9.1e} {pk_new:6.0f} MiB")
    # distinct atoms vs the same tokens as separate slots (every token 4 times)
    toks = [np.repeat(x[:8], 4, axis=0) for x in samples]
    b_atoms = A._Batch.of(toks)
    n, N, d = len(toks), 32, 64
    X = np.stack(toks)
    mask = np.ones((n, N), dtype=bool)
    b_slots = A._Batch(X, mask, np.full(n, N), np.full((n, N), 1.0 / N), np.full((n, 1, N), -np.log(N)),
                       tuple(np.arange(N) for _ in range(n)))
    pv1 = init_params(64, 16, v_scale=1.0, seed=1)
    Ya, Ys = np.zeros((n, d)), np.zeros((n, d))
    t_s = best(lambda: A._loss_grad(b_slots, pv1, Ys, 4, 1.0, "readout"), 3)
    t_a = best(lambda: A._loss_grad(b_atoms, pv1, Ya, 4, 1.0, "readout"), 3)
    ga = A._loss_grad(b_atoms, pv1, Ya, 4, 1.0, "readout")[1].flat()
    gs = A._loss_grad(b_slots, pv1, Ys, 4, 1.0, "readout")[1].flat()
    print(f"{'gradient, 32 token slots (8 tokens x 4 copies)':46s} {t_s * 1e3:6.1f} ms {'':6s} {1.0:6.2f}x")
    print(f"{'gradient, 8 distinct atoms with masses':46s} {t_a * 1e3:6.1f} ms {'':6s} {t_a / t_s:6.2f}x "
          f"{np.max(np.abs(ga - gs)) / np.max(np.abs(gs)):9.1e}")
    # the bundled data with the per-token loss: singular NTK, must end
    from ntkcheck.convergence.local import local_convergence

    bundled = load_samples(bundled_path("screen_default.npz"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r, dt, peak = _peak(lambda: local_convergence(bundled, loss="tokens", n_records=20, track_ntk=False,
                                                      time_budget=50.0, progress=False))
    print(f"{'bundled, --loss tokens (singular NTK)':46s} {dt:7.2f} s {r.flow.nfev:6d} {'':7s} {'':9s} {peak:6.0f} MiB")
    print(f"  {r.flow.message}; s = {r.flow.s[-1]:.3g} of {r.time_end:.3g}")
    print("(ratios: against the first row of each group; loss err: max relative difference of the recorded "
          "losses from DOP853 at rtol 1e-11, or of the NTK / gradient from the baseline route)")


def limits() -> None:
    """Issue 15: every limit-theorem experiment at its default size (aim: under 60 s each on this
    2-core machine), beside its small size (what the tests and the claims run) as the baseline of
    the same run; verdict and fitted slopes per experiment."""
    from ntkcheck.limits.rates import EXPERIMENTS, run_experiment

    print(f"{'experiment':16s} {'small':>8s} {'default':>9s} {'ratio':>7s} {'<60 s':>6s}  verdict (default): slopes")
    for name in EXPERIMENTS:
        t0 = time.perf_counter()
        run_experiment(name, size="small", seeds=5)
        t_small = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = run_experiment(name, size="default", seeds=5)
        t_def = time.perf_counter() - t0
        slopes = "; ".join(f"{f.variable}: {f.slope:+.2f} [{f.ci[0]:+.2f}, {f.ci[1]:+.2f}] vs "
                           f"{'decay' if f.theorem_slope is None else f'{f.theorem_slope:+.2f}'}" for f in res.fits)
        print(f"{name:16s} {t_small:7.1f}s {t_def:8.1f}s {t_def / t_small:6.1f}x {'yes' if t_def < 60 else 'NO':>6s}  "
              f"{res.verdict}: {slopes}")
    print("(ratio: default size against the small size of the same experiment, timed in this run; 5 seeds each)")


ISSUE31 = """
``--issue31`` (issue 31): convergence of the training run itself, each case in its own process:
the README example at --eps 0.1 and 1 (--time 80), and the random d = 8 (16 heads) and d = 64
(4 heads) models of ``_convergence_cases.py`` at eps 0.1 (--time 200): the hand-off (time, loss,
rate), the tube from FixUp (its radius, the room, int mu, int |delta|, what limits) and the wall
and CPU seconds of the whole command (``ntkcheck flow --max-seconds 900``).
"""


def _issue31_case(name: str) -> None:
    import resource

    from _convergence_cases import random_cases, readme_case

    if name.startswith("README"):
        eps = float(name.split()[-1])
        _, samples, params, _ = readme_case(eps)
        heads, time_end = 16, 80.0
    else:
        d = int(name.split("=")[1])
        _, samples, params, _ = [c for c in random_cases() if f"d={d}," in c[0]][0]
        eps, heads, time_end = 0.1, params.heads, 200.0
    from ntkcheck import _budget

    t0 = time.perf_counter()
    with _budget.scope(_budget.Budget(900.0)):
        res = local_convergence(samples, params=params, heads=heads, layers=4, eps=eps, loss="readout",
                                n_records=21, time_end=time_end, track_ntk=1, search_evaluations=0)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ho, fx = res.handoff, res.from_fixup
    line = f"{name:18s} wall {wall:6.0f}s cpu {ru.ru_utime + ru.ru_stime:6.0f}s  "
    if res.certificate is not None and res.certificate.certified:
        print(line + "certified at FixUp (no hand-off needed)")
        return
    if ho is None or not ho.found:
        print(line + f"no hand-off: {ho.message if ho else 'none'}")
        return
    c = ho.certificate
    line += f"hand-off s_k {ho.s:6.1f} Loss {c.loss_centre:.1e} rate {c.rate:.3g}; "
    if fx is None:
        print(line + "no tube")
        return
    print(line + f"from FixUp: {'PROVED' if fx.certified else 'not proved (' + fx.limiting + ')'}: e {fx.radius:.2e}, "
          f"room {fx.room:.2e}, int mu {fx.growth:.2f}, int |delta| {fx.defect:.1e}, tube {fx.tube.seconds:.0f}s")


def issue31_handoff() -> None:
    """The hand-off alone (no tube) on the README example at each ``--eps``: where the run converges, whether a
    hand-off is found, when, and its proved rate (``--time 200``, 41 records)."""
    from _convergence_cases import readme_case

    print("hand-off alone (issue 31 item 2), README example, --time 200, 41 records:")
    for eps in (0.01, 0.1, 0.3, 1.0, 2.0, 4.0):
        _, samples, params, _ = readme_case(eps)
        t0 = time.perf_counter()
        res = local_convergence(samples, params=params, heads=16, layers=4, eps=eps, loss="readout", n_records=41,
                                time_end=200.0, track_ntk=1, search_evaluations=0, tube=False)
        wall = time.perf_counter() - t0
        ho = res.handoff
        head = f"eps {eps:5g}: Loss {res.loss_initial:.1e} -> {res.loss_final:.1e} ({wall:4.0f} s); "
        if res.certificate is not None and res.certificate.certified:
            print(head + "certified at FixUp")
        elif ho is not None and ho.found:
            c = ho.certificate
            print(head + f"hand-off at s_k = {ho.s:.4g} (Loss {c.loss_centre:.1e}, rate {c.rate:.3g}, "
                  f"run obeys: {ho.holds_on_run})")
        else:
            print(head + f"no hand-off: {ho.message if ho else 'none'}")


def issue31() -> None:
    """Rows of issue 31 (``ISSUE31``): each case in a fresh interpreter."""
    import subprocess
    import sys
    from pathlib import Path

    print(ISSUE31)
    here = Path(__file__).resolve().parent
    for name in ("README --eps 0.1", "README --eps 1", "random d=8", "random d=64"):
        out = subprocess.run([sys.executable, str(here / "bench_dynamics.py"), "--issue31-case", name],
                             capture_output=True, text=True, cwd=here, timeout=3600)
        print(out.stdout.strip() or out.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    import sys

    if "--issue31-handoff" in sys.argv:
        issue31_handoff()
    elif "--issue31-case" in sys.argv:
        _issue31_case(sys.argv[sys.argv.index("--issue31-case") + 1])
    elif "--issue31" in sys.argv:
        issue31()
    elif "--issue11" in sys.argv:
        sys.argv.remove("--issue11")
        issue11()
    elif "--limits" in sys.argv:
        limits()
    else:
        main()
