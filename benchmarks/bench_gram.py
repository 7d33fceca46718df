"""Benchmark of the NTK Gram at FixUp (ntkcheck.gram), issue 3.

For M token slots (N = 8 tokens a sample, M / 8 samples), d = 8 and 32, H d = 2 M heads:

* features: wall time of ``attention_features`` against a plain numpy matmul with the
  same FLOP count, timed in the same run (ratio; aim 3x), and the exp-bound
  ``max(flops / matmul_rate, exps / exp_rate)`` (MATH.md section 6: exponentials dominate);
* spectrum: the route ``gram(method="auto")`` takes (``eigvalsh`` of F F^T up to M = 4096,
  Cholesky + Lanczos above) against the baseline ``F @ F.T`` + ``numpy.linalg.eigvalsh``,
  and the SVD of F (the precise fallback) for reference;
* peak memory of ``gram()`` by tracemalloc (numpy reports its buffers to it).

Usage: ``python benchmarks/bench_gram.py [--quick] [--full]`` (quick: M <= 1024; default
M <= 4096; full adds M = 16384, ~30 min and ~8 GB).
"""

# ruff: noqa: B023  (the timed lambdas run immediately, inside the loop iteration)
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import scipy.linalg as sla

from ntkcheck.gram import _extremal_eigh, _gram_accumulated, attention_features, gram, init_heads

N_TOK = 8


def _best(f, repeat=1):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def _matmul_time(flops: float) -> float:
    n = max(8, int(round((flops / 2) ** (1 / 3))))
    a = np.random.default_rng(0).standard_normal((n, n))
    t, _ = _best(lambda: a @ a, repeat=3)
    return t * flops / (2.0 * n**3)


def _exp_rate() -> float:
    x = np.random.default_rng(0).standard_normal(1 << 22)
    t, _ = _best(lambda: np.exp(x), repeat=3)
    return x.size / t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args(argv)
    sizes = [256, 1024] if args.quick else [256, 1024, 4096]
    if args.full:
        sizes.append(16384)
    exp_rate = _exp_rate()
    print(f"np.exp rate: {exp_rate / 1e6:.0f} M/s")
    hdr = (f"{'M':>6} {'d':>3} {'H':>5} | {'feat s':>7} {'matmul s':>8} {'ratio':>6} {'vs bound':>8} | "
           f"{'spec s':>7} {'route':>16} {'eigh s':>7} {'ratio':>6} {'svd s':>7} | {'rel lmin':>9} {'peak MB':>8}")
    print(hdr)
    print("-" * len(hdr))
    rng = np.random.default_rng(0)
    for d in (8, 32):
        for M in sizes:
            H = 2 * M // d
            S = [rng.standard_normal((N_TOK, d)) / np.sqrt(d) for _ in range(M // N_TOK)]
            heads = init_heads(H, d, seed=1)
            flops = H * M * (4.0 * N_TOK * d + 2.0 * d * d)
            exps = H * M * N_TOK
            t_mm = _matmul_time(flops)
            bound = max(t_mm, exps / exp_rate)
            big = M > 4096
            if not big:
                t_feat, F = _best(lambda: attention_features(S, heads))
                t_spec, ev = _best(lambda: np.linalg.eigvalsh(F @ F.T))
                route = "eigvalsh"
                t_base = t_spec  # auto *is* the baseline at this size
                t_svd, s = _best(lambda: sla.svdvals(F)) if M <= 4096 else (np.nan, None)
                rel = ev[0] / ev[-1]
                del F
            else:
                t_feat, G = _best(lambda: _gram_accumulated(S, heads, 1 << 22, False))
                t_spec, ext = _best(lambda: _extremal_eigh(G))
                route = "cholesky-lanczos"
                t_base, ev = _best(lambda: np.linalg.eigvalsh(G))
                t_svd = np.nan
                rel = ext[0] / ext[1]
                del G
            tracemalloc.start()
            gram(S, heads, method="eigh")
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            print(f"{M:>6} {d:>3} {H:>5} | {t_feat:>7.2f} {t_mm:>8.3f} {t_feat / t_mm:>6.1f} {t_feat / bound:>8.1f} | "
                  f"{t_spec:>7.2f} {route:>16} {t_base:>7.2f} {t_spec / t_base:>6.2f} {t_svd:>7.2f} | {rel:>9.2e} {peak:>8.0f}",
                  flush=True)
    print("feat s: attention_features (for M > 4096: features + chunked F F^T accumulation);"
          " ratio = feat / matmul of equal FLOPs; vs bound = feat / max(flops/matmul rate, exps/exp rate)")


if __name__ == "__main__":
    main()
