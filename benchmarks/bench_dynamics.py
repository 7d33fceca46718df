"""Benchmark of ntkcheck.dynamics (issue 4).

Run: ``python benchmarks/bench_dynamics.py [--repeat R]``. Prints one table:

* one gradient evaluation (forward storing the cache + discrete adjoint) for n = 8 samples,
  N = 32 tokens, d = 8, H = 64, L = 16, as a ratio to the forward pass alone (no cache),
  timed in the same run (aim: under 3x), at V = 0 (FixUp) and V != 0 (same cost: the
  computation does not branch on V);
* the batched-seed adjoint used for NTK Jacobians (B seeds in one pass) per seed, against
  one gradient;
* wall time of the default experiment (``ntkcheck flow`` with no arguments: the first four
  bundled samples, readout loss, H = 16, L = 4, eps = 0.01) with and without NTK records.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ntkcheck.dynamics import (
    _backward,
    _Batch,
    _forward,
    _loss_grad,
    default_samples,
    init_params,
    local_convergence,
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
        name = "flow + NTK lambda_min at every record" if track else "flow only (solve_ivp RK45)"
        print(f"{name:42s} {wall:8.2f} s {r.flow.nfev:10d} {r.flow.wall[-1] / r.flow.nfev * 1e3:8.2f}")
    print(f"lambda_0 = {r.lambda_0:.5g}, rate_measured = {r.rate_measured:.5g} (2 lambda_0 = {2 * r.lambda_0:.5g})")


if __name__ == "__main__":
    main()
