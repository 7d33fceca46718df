"""Screening sweeps on Dask against the serial path, and the per-chunk cost of the Gram.

Run: ``python benchmarks/bench_sweep.py [--quick] [--workers 2] [--plot sweep.png]``.

1. **Sweep.** ``ntkcheck.sweep.sweep`` on the bundled data over a 5 x 5 grid of
   ``(q_scale, b_scale)`` x 3 seeds (75 screenings), serially and on a ``LocalCluster``
   (``--workers`` processes, 1 thread each). The per-task computation is identical, so the
   rows are compared **exactly** (``==`` on every float); the time ratio dask / serial is
   printed with and without the cluster's start-up. The heatmap of the median ``lambda_min``
   over seeds is written to ``--plot``.
2. **Gram chunk cost.** The Gram is accumulated over head chunks, ``G = sum_c F_c F_c^T``.
   For ``M`` atoms (``M / 8`` samples of N = 8 distinct tokens, d = 8) and one chunk of
   ``c`` heads (``c d = 256`` columns) it times the feature block ``F_c`` (``M N c`` exps,
   :func:`ntkcheck.ntk.features.attention_features`) and the rank-``c d`` update (BLAS
   ``syrk``, ``M^2 c d`` flops), at a few ``M``; fits ``t_feat = a M`` and ``t_syrk = b M^2``
   and extrapolates to ``M = 65536`` with ``H d = 2 M`` (``theory/sweeps.md`` uses these).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.linalg as sla

from ntkcheck.cgf import as_laws
from ntkcheck.io.files import bundled_path
from ntkcheck.ntk.features import Heads, attention_features, init_heads
from ntkcheck.sweep import sweep

SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)


def bench_sweep(workers: int, plot: str | None, scales: tuple[float, ...], seeds: tuple[int, ...]) -> None:
    from distributed import Client, LocalCluster

    grid = dict(q_scales=scales, b_scales=scales, seeds=seeds)
    t0 = time.perf_counter()
    s = sweep(bundled_path(), serial=True, **grid)
    t_serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl) as client:
        t_start = time.perf_counter() - t0
        d = sweep(bundled_path(), client=client, **grid)
    t_dask = time.perf_counter() - t0
    n = len(s.rows)
    equal = s.values() == d.values()
    print(f"sweep: bundled data, {len(scales)} x {len(scales)} (q_scale, b_scale) x {len(seeds)} seeds = {n} tasks")
    print(f"  serial                        {t_serial:8.2f} s   ({t_serial / n * 1e3:.0f} ms a task)")
    print(f"  LocalCluster {workers} workers x 1 thread {t_dask:8.2f} s   (of which start-up {t_start:.2f} s, "
          f"sweep {d.seconds:.2f} s)")
    print(f"  ratio dask / serial: {t_dask / t_serial:.2f} with start-up, {d.seconds / t_serial:.2f} without")
    print(f"  rows equal bit for bit: {equal}")
    if not equal:
        raise SystemExit("the Dask sweep differs from the serial sweep")
    for b in d.best():
        print(f"  best median lambda_min (outside the dependency): {b['median_lambda_min']:.4g} at q_scale "
              f"{b['q_scale']:g}, b_scale {b['b_scale']:g} ({b['certified_seeds']}/{b['seeds']} seeds certified)")
    if plot:
        d.plot(plot)
        print(f"  plot written to {plot}")


def bench_chunks(sizes: tuple[int, ...], d: int = 8, N: int = 8, cols: int = 256, reps: int = 3) -> None:
    c = cols // d
    rng = np.random.default_rng(0)
    heads = init_heads(c, d, q_scale=0.5, b_scale=0.5, seed=1)
    Hc = Heads(heads.Q, heads.b)
    rows = []
    for M in sizes:
        laws = as_laws([0.5 * rng.standard_normal((N, d)) for _ in range(M // N)])
        tf, ts = [], []
        G = np.zeros((M, M), order="F")
        for _ in range(reps):
            t0 = time.perf_counter()
            F = attention_features(laws, Hc)
            tf.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            G = sla.blas.dsyrk(1.0, F.T, beta=1.0, c=G, trans=1, lower=1, overwrite_c=1)
            ts.append(time.perf_counter() - t0)
        rows.append((M, min(tf), min(ts)))
    print(f"\nGram chunk cost: d = {d}, N = {N} tokens a sample, one chunk of c = {c} heads ({cols} columns), "
          f"best of {reps}")
    print(f"  {'M':>6} {'features s':>11} {'ns/(M N c)':>11} {'syrk s':>9} {'GFLOP/s':>8}")
    for M, f, s in rows:
        print(f"  {M:>6} {f:>11.4f} {f / (M * N * c) * 1e9:>11.2f} {s:>9.4f} {M * M * cols / s / 1e9:>8.2f}")
    # least-squares fits t_feat = a M, t_syrk = b M^2 on the measured sizes
    Ms = np.array([r[0] for r in rows], float)
    a = float(np.dot(Ms, [r[1] for r in rows]) / np.dot(Ms, Ms))
    b = float(np.dot(Ms**2, [r[2] for r in rows]) / np.dot(Ms**2, Ms**2))
    M = 65536
    H = 2 * M // d
    chunks = H // c
    t_f, t_s = a * M * chunks, b * M**2 * chunks
    print(f"  fit: features {a * 1e9:.1f} ns per atom per chunk, syrk {b * 1e12:.2f} ps per atom^2 per chunk")
    print(f"  extrapolation M = {M}, H = {H} (H d = 2 M), {chunks} chunks, one core: features {t_f / 3600:.2f} h, "
          f"product {t_s / 3600:.2f} h, Gram {8 * M * M / 2**30:.0f} GiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 x 3 grid, 1 seed, small chunk sizes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    if args.quick:
        bench_sweep(args.workers, args.plot, (0.5, 1.0, 2.0), (0,))
        bench_chunks((512, 1024))
    else:
        bench_sweep(args.workers, args.plot, SCALES, (0, 1, 2))
        bench_chunks((1024, 2048, 4096))


if __name__ == "__main__":
    main()
