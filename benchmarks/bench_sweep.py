"""Screening sweeps and one large Gram on Dask against the serial paths, and the per-block costs.

Run: ``python benchmarks/bench_sweep.py [--quick] [--workers 2] [--plot sweep.png]
[--parts sweep,gram,blocks,cert,tiles]``.

1. **Sweep (the issue's must-show).** The verb ``ntkcheck sweep`` on the bundled data over a
   5 x 5 grid of ``(q_scale, b_scale)`` in ``{0.25, 0.5, 1, 2, 4}`` x 3 seeds (75 screenings):
   ``ntkcheck sweep --serial --json --plot`` and ``ntkcheck sweep --workers W --json --plot``
   (a ``LocalCluster`` of ``W`` worker processes, 1 thread each, started by the verb: the
   default), both in this process. The per-task computation is identical, so the JSON rows
   are compared **exactly** (``==`` on every value but the per-task time); the time ratio
   dask / serial is printed, and the same grid once more through the API on an already
   running cluster gives the ratio without the cluster's start-up.
2. **One large Gram on Dask.** :func:`ntkcheck.distributed.distributed_gram` at ``M = 4096`` atoms
   (512 samples of N = 8 tokens, d = 8, ``H d = 2 M``) on a ``LocalCluster`` (``W`` processes x
   1 thread; Dask's nanny pins BLAS to one thread a worker), default head blocks (one product
   task per worker thread, at least one per tile), 1 and 3 row blocks (1 and 6 tiles),
   against the serial accumulation ``enclosed_gram(..., bound=False)`` and the serial ``gram`` (features,
   ``syrk``, ``eigvalsh``; BLAS on every core) in the same run: time ratios, and the
   lambda_min difference against the Weyl bound ``2 gamma_K || |F||F|^T ||_F`` (``K = H d``).
3. **Per-block costs.** For ``M`` atoms (d = 8, N = 8) and one block of ``c = 32`` heads
   (256 columns) it times the feature block ``F_c`` (``M N c`` exps) and the rank-256 update
   (BLAS ``syrk``, ``M^2 c d`` flops) at ``M = 4096`` and ``8192``, and the spectrum on one
   machine: Cholesky (``M^3 / 3`` flops, the first step of ``gram``'s Cholesky + Lanczos)
   at the same sizes and ``eigvalsh`` at ``M = 4096``. Fits ``t_feat = a M``,
   ``t_syrk = b M^2``, ``t_chol = e M^3`` and extrapolates to ``M = 65536``, ``H d = 2 M``
   (``theory/sweeps.md`` uses these numbers). Wall and CPU (core) seconds are both printed:
   on a shared machine the CPU time is the steadier measure of the work.
4. **The certified Gram on Dask** (``--parts cert``). ``distributed_gram(certify=True)`` at
   ``M = 8192`` (1024 samples of N = 8 tokens, d = 8, ``H d = 2 M``) on a ``LocalCluster`` of
   ``W`` worker processes x 1 thread, ``tiles = 8`` (tiles of 1024 rows): wall time of the
   accumulation and of the certificate (two blocked Cholesky factorisations, Lanczos), peak
   resident memory of each worker process (``getrusage`` ``ru_maxrss``, and its resident set
   before the run), the client's traced peak; against the serial ``certify_positive`` in this
   process in the same run (time ratio, lower bounds).
5. **Per-tile rates** (``--parts tiles``): one BLAS thread, tile size ``b`` = 1024 and 2048: a
   product task's feature block and ``gemm`` with the Collatz-Wielandt products, and the four
   Cholesky tasks (``dpotrf``, ``dtrsm``, ``dgemm`` and ``dsyrk`` updates), with the cost of the
   certified route at ``M = 65536`` on ``n`` one-thread workers extrapolated from them
   (``theory/sweeps.md``).
"""

# ruff: noqa: B023  (the timed lambdas run immediately, inside the loop iteration)

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import tempfile
import time

import numpy as np
import scipy.linalg as sla

from ntkcheck._text import fit
from ntkcheck.cgf import as_laws
from ntkcheck.cli import main as cli
from ntkcheck.distributed import distributed_gram, sweep
from ntkcheck.io.files import bundled_path
from ntkcheck.ntk.certificate.rounding import enclosed_gram
from ntkcheck.ntk.gram_matrix.features import DEFAULT_CHUNK, Heads, attention_features, init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram

SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)


def say(text: str = "") -> None:
    """Print ``text`` fitted to 100 columns (long sentences wrap with a hanging indent)."""
    print(fit([text]))


def _cli_json(argv: list[str]) -> tuple[dict, float]:
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = cli(argv)
    dt = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"ntkcheck {' '.join(argv)} exited {code}")
    return json.loads(out.getvalue()), dt


def _values(d: dict) -> list[tuple]:
    return [tuple(v for k, v in r.items() if k != "seconds") for r in d["rows"]]


def bench_sweep(workers: int, plot: str | None, scales: tuple[float, ...], seeds: tuple[int, ...]) -> None:
    from distributed import Client, LocalCluster

    grid = ["--q-scales", ",".join(map(str, scales)), "--b-scales", ",".join(map(str, scales)),
            "--seeds", ",".join(map(str, seeds))]
    tmp = tempfile.mkdtemp()
    plot = plot or os.path.join(tmp, "sweep.png")
    s, t_serial = _cli_json(["sweep", *grid, "--serial", "--json", "--plot", os.path.join(tmp, "serial.png")])
    d, t_dask = _cli_json(["sweep", *grid, "--workers", str(workers), "--json", "--plot", plot])
    n = len(s["rows"])
    equal = _values(s) == _values(d)
    say(f"ntkcheck sweep: bundled data, {len(scales)} x {len(scales)} (q_scale, b_scale) x {len(seeds)} seeds "
          f"= {n} screenings")
    say(f"  --serial                                   {t_serial:8.2f} s  ({t_serial / n * 1e3:.0f} ms a task)")
    say(f"  LocalCluster {workers} workers x 1 thread (default) {t_dask:8.2f} s  (start-up, sweep and shutdown)")
    say(f"  ratio dask / serial: {t_dask / t_serial:.2f}")
    say(f"  rows equal bit for bit: {equal}")
    if not equal:
        raise SystemExit("the Dask sweep differs from the serial sweep")
    for b in d["best"]:
        say(f"  best median lambda_min (outside the dependency): {b['median_lambda_min']:.4g} at q_scale "
              f"{b['q_scale']:g}, b_scale {b['b_scale']:g} ({b['certified_seeds']}/{b['seeds']} seeds certified)")
    say(f"  plot written to {plot}")
    t0 = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl) as client:
        t_start = time.perf_counter() - t0
        a = sweep(bundled_path(), client=client, q_scales=scales, b_scales=scales, seeds=seeds)
    same = [tuple(v for k, v in r.to_dict().items() if k != "seconds") for r in a.rows] == _values(s)
    say(f"  API on a running cluster: start-up {t_start:.2f} s (not counted), sweep {a.seconds:.2f} s, "
          f"ratio {a.seconds / t_serial:.2f} without start-up; rows equal: {same}")


def bench_distributed_gram(workers: int, M: int, d: int = 8, N: int = 8) -> None:
    from distributed import Client, LocalCluster

    rng = np.random.default_rng(0)
    laws = as_laws([0.5 * rng.standard_normal((N, d)) for _ in range(M // N)])
    H = 2 * M // d
    heads = init_heads(H, d, q_scale=0.5, b_scale=0.5, seed=1)
    t0 = time.perf_counter()
    enclosed_gram(laws, heads, DEFAULT_CHUNK, bound=False)
    t_acc = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = gram(laws, heads)
    t_serial = time.perf_counter() - t0
    F = attention_features(laws, heads)
    A = np.abs(F)
    K = F.shape[1]
    gamma = K * 2.0**-53 / (1 - K * 2.0**-53)
    weyl = 2 * gamma * float(np.linalg.norm(sla.blas.dsyrk(1.0, A.T, trans=1, lower=1)) * math.sqrt(2))
    del F, A
    say(f"\nOne Gram on Dask: M = {M} atoms, d = {d}, N = {N}, H = {H} (H d = 2 M)")
    say(f"  serial: the Gram accumulated over head blocks (enclosed_gram, no bound) {t_acc:.2f} s; gram() {t_serial:.2f} s "
          f"(features, syrk, {g.method}), lambda_min {g.lambda_min:.6g}")
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl) as client:
        for tiles in (1, 3):
            r = distributed_gram(laws, heads, client=client, tiles=tiles)
            t = r.seconds_gram + r.seconds_spectrum
            diff = abs(r.gram.lambda_min - g.lambda_min)
            say(f"  distributed_gram, {workers} workers, {r.head_blocks} blocks of {r.chunk_heads} heads, "
                  f"{tiles} row block(s), {r.tasks} tasks: Gram {r.seconds_gram:.2f} s (ratio "
                  f"{r.seconds_gram / t_acc:.2f} to the serial accumulation) + spectrum {r.seconds_spectrum:.2f} s = "
                  f"{t:.2f} s (ratio {t / t_serial:.2f} to gram()); |delta lambda_min| {diff:.2e} "
                  f"(Weyl bound {weyl:.2e})")


def _timed(fn, reps: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this process) over ``reps`` calls. CPU time (all
    threads) is the work in core-seconds and hardly moves when other jobs share the cores."""
    wall, cpu = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def bench_blocks(sizes: tuple[int, ...], d: int = 8, N: int = 8, cols: int = 256, reps: int = 3) -> None:
    c = cols // d
    rng = np.random.default_rng(0)
    heads = init_heads(c, d, q_scale=0.5, b_scale=0.5, seed=1)
    Hc = Heads(heads.Q, heads.b)
    rows = []
    for M in sizes:
        laws = as_laws([0.5 * rng.standard_normal((N, d)) for _ in range(M // N)])
        F = attention_features(laws, Hc)
        G = np.zeros((M, M), order="F")
        feat = _timed(lambda: attention_features(laws, Hc), reps)
        prod = _timed(lambda: sla.blas.dsyrk(1.0, F.T, beta=1.0, c=G, trans=1, lower=1, overwrite_c=1), reps)
        # a positive definite matrix of the same size for the spectrum step: G + M I
        G[np.diag_indices(M)] += M
        chol = _timed(lambda: sla.cho_factor(G, lower=True, check_finite=False), 1)
        eig = _timed(lambda: np.linalg.eigvalsh(G, UPLO="L"), 1) if M <= 4096 else None
        rows.append((M, feat, prod, chol, eig))
    say(f"\nPer-block cost: d = {d}, N = {N} tokens a sample, one block of c = {c} heads ({cols} columns); "
          f"wall / CPU (core) seconds, features and syrk best of {reps}, spectrum once")
    say(f"  {'M':>6} {'features':>15} {'syrk':>15} {'CPU GFLOP/s':>11} {'Cholesky':>15} {'CPU GFLOP/s':>11} "
          f"{'eigvalsh':>15}")
    for M, f, s, ch, e in rows:
        say(f"  {M:>6} {f[0]:>7.4f}/{f[1]:<7.4f} {s[0]:>7.4f}/{s[1]:<7.4f} {M * M * cols / s[1] / 1e9:>11.2f} "
              f"{ch[0]:>7.3f}/{ch[1]:<7.3f} {M**3 / 3 / ch[1] / 1e9:>11.2f} "
              f"{'-' if e is None else f'{e[0]:.2f}/{e[1]:.2f}':>15}")
    Ms = np.array([r[0] for r in rows], float)

    def fit(k: int, p: int, w: int) -> float:  # least squares t = coef M^p through the origin
        return float(np.dot(Ms**p, [r[k][w] for r in rows]) / np.dot(Ms**p, Ms**p))

    M = 65536
    H = 2 * M // d
    blocks = H // c
    for w, what in ((1, "CPU (core-hours)"), (0, "wall on this machine")):
        a, b, e = fit(1, 1, w), fit(2, 2, w), fit(3, 3, w)
        say(f"  fit, {what}: features {a * 1e9:.1f} ns per atom per block, syrk {b * 1e12:.2f} ps per atom^2 per "
              f"block, Cholesky {e * 1e12:.4f} ps per atom^3")
        say(f"    M = {M}, H = {H} (H d = 2 M), {blocks} blocks of {c} heads: features {a * M * blocks / 3600:.2f} h, "
              f"products {b * M**2 * blocks / 3600:.2f} h, Cholesky {e * M**3 / 3600:.2f} h")
    say(f"  memory at M = {M}: Gram {8 * M * M / 2**30:.0f} GiB (+ {8 * M * M / 2**30:.0f} GiB for the factor); "
          f"one feature block {8 * M * cols / 2**20:.0f} MiB")


def _worker_memory() -> tuple[float, float]:
    """(resident MiB now, peak resident MiB since the process started) of this process."""
    import resource

    with open("/proc/self/status") as f:
        rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
    return rss / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_certified(workers: int, M: int, tiles: int, d: int = 8, N: int = 8) -> None:
    import tracemalloc

    from distributed import Client, LocalCluster

    from ntkcheck.ntk.certificate.routes import certify_positive

    rng = np.random.default_rng(0)
    laws = as_laws([rng.standard_normal((N, d)) / math.sqrt(d) for _ in range(M // N)])
    H = 2 * M // d
    heads = init_heads(H, d, seed=1)
    print(f"\nCertified Gram on Dask: M = {M} atoms, d = {d}, N = {N}, H = {H} (H d = 2 M)")
    t0 = time.perf_counter()
    s = certify_positive(laws, heads, arb=False)
    t_serial = time.perf_counter() - t0
    print(f"  serial certify_positive (this process, BLAS on every core): {t_serial:.1f} s, {s!r}")
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl) as client:
        before = client.run(_worker_memory)
        tracemalloc.start()
        t0 = time.perf_counter()
        r = distributed_gram(laws, heads, client=client, tiles=tiles, certify=True)
        t_dist = time.perf_counter() - t0
        client_peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        after = client.run(_worker_memory)
    c = r.certificate
    print(f"  distributed_gram(certify=True), {workers} workers x 1 thread, {r.tiles} row blocks "
          f"({r.tiles * (r.tiles + 1) // 2} tiles), {r.tasks} accumulation tasks, {r.factorizations} factorisations:")
    print(f"    {t_dist:.1f} s = accumulation {r.seconds_gram:.1f} s + certificate {r.seconds_spectrum:.1f} s "
          f"(ratio {t_dist / t_serial:.2f} to the serial route); {c!r}")
    print(f"    lower bounds: {c.lower_bound:.6g} (Dask) vs {s.lower_bound:.6g} (serial), relative difference "
          f"{abs(c.lower_bound - s.lower_bound) / s.lower_bound:.1e}; Lanczos lambda_min {r.gram.lambda_min:.6g}")
    gram_mib = 8 * M * M / 2 / 2**20
    print(f"    memory: the Gram's lower tiles {gram_mib:.0f} MiB (+ one factor, as much), per worker "
          f"{gram_mib / workers:.0f} MiB of each; client traced peak {client_peak:.1f} MiB")
    for w in sorted(after):
        (rss0, _), (_, peak) = before[w], after[w]
        print(f"    worker {w}: resident {rss0:.0f} MiB before, peak {peak:.0f} MiB (+{peak - rss0:.0f} MiB)")


def _tile_task_rates(b: int, d: int = 8, N: int = 8, cols: int = 256, reps: int = 2) -> dict[str, float]:
    """Seconds of each task at tile size ``b`` on one BLAS thread (best of ``reps``): the feature
    block of ``b`` rows, a product task's sub-block of ``cols`` columns (two feature blocks, ``gemm``,
    the Collatz-Wielandt products), and the four tasks of the blocked Cholesky."""
    from threadpoolctl import threadpool_limits

    from ntkcheck.distributed import _tiled
    from ntkcheck.distributed._accumulate import _block_features, _tile_product

    rng = np.random.default_rng(0)
    laws_i = as_laws([rng.standard_normal((N, d)) / math.sqrt(d) for _ in range(b // N)])
    laws_j = as_laws([rng.standard_normal((N, d)) / math.sqrt(d) for _ in range(b // N)])
    c = cols // d
    heads = init_heads(2 * c, d, seed=1)  # the task runs heads 0:c (one sub-block of `cols` columns)
    v = np.ones(b)
    X = rng.standard_normal((b, b + 64))
    A = np.asfortranarray(X @ X.T)
    B = np.asfortranarray(rng.standard_normal((b, b)))
    out = {}
    with threadpool_limits(1, user_api="blas"):
        out["features"] = _timed(lambda: _block_features(laws_i, heads, heads.count, 0, c, DEFAULT_CHUNK), reps)[0]
        out["product"] = _timed(lambda: _tile_product(laws_i, laws_j, heads, 0, c, DEFAULT_CHUNK, v, v), reps)[0]
        L = _tiled._potrf(A)
        out["potrf"] = _timed(lambda: _tiled._potrf(A), reps)[0]
        out["trsm"] = _timed(lambda: _tiled._trsm(B, L), reps)[0]
        out["gemm"] = _timed(lambda: _tiled._gemm_update(A, B, B), reps)[0]
        out["syrk"] = _timed(lambda: _tiled._syrk_update(A, B), reps)[0]
    return out


def bench_tiles(sizes: tuple[int, ...], target_b: int, d: int = 8, cols: int = 256) -> None:
    """Per-task rates at two tile sizes, and the certified route at M = 65536 extrapolated from
    the larger: a product task's sub-block is two feature blocks (linear in ``b``) and the rest
    (``gemm`` and the Collatz-Wielandt products, quadratic in ``b``); Cholesky tasks at their
    per-flop rates."""
    print(f"\nPer-task cost on one BLAS thread (d = {d}, N = 8; a product task's sub-block = {cols} columns for both "
          "row blocks, gemm and the Collatz-Wielandt products); seconds (GFLOP/s)")
    fl = {"product": lambda b: 2 * b * b * cols, "potrf": lambda b: b**3 / 3, "trsm": lambda b: b**3,
          "gemm": lambda b: 2 * b**3, "syrk": lambda b: b**3}
    rates = {b: _tile_task_rates(b, d=d, cols=cols) for b in sizes}
    for b, t in rates.items():
        print(f"  b = {b:5d}: features {t['features']:.3f} s, " + ", ".join(
            f"{k} {t[k]:.3f} s ({fl[k](b) / t[k] / 1e9:.1f})" for k in fl))
    b2, t2 = max(rates.items())
    f = t2["features"] / b2  # per row of one feature block
    g = max(t2["product"] - 2 * t2["features"], 0.0) / b2**2  # per entry of the tile
    per_flop = {k: t2[k] / fl[k](b2) for k in ("potrf", "trsm", "gemm", "syrk")}
    M, H = 65536, 2 * 65536 // d
    b = target_b
    p = M // b
    n_tiles = p * (p + 1) // 2
    subs = H * d // cols
    prod = n_tiles * subs * (2 * f * b + g * b * b)  # the diagonal tiles counted as full ones: an upper estimate
    feats = n_tiles * subs * 2 * f * b
    gemms = sum((p - k - 1) * (p - k - 2) // 2 for k in range(p))
    syrks = sum(p - k - 1 for k in range(p))
    chol = (p * per_flop["potrf"] * fl["potrf"](b) + p * (p - 1) // 2 * per_flop["trsm"] * fl["trsm"](b)
            + gemms * per_flop["gemm"] * fl["gemm"](b) + syrks * per_flop["syrk"] * fl["syrk"](b))
    path = p * sum(per_flop[k] * fl[k](b) for k in ("potrf", "trsm", "gemm"))  # one step after the other
    print(f"  model from b = {b2}: product sub-block t(b) = 2 x {f * 1e6:.2f} us b (features) + {g * 1e9:.3f} ns b^2")
    print(f"  M = {M}, H = {H} (H d = 2 M), tiles of b = {b}: p = {p} row blocks, {n_tiles} tiles of "
          f"{8 * b * b / 2**20:.0f} MiB, {subs} sub-blocks a tile")
    print(f"    products {prod / 3600:.1f} core-h (of which features {feats / 3600:.1f}), one blocked Cholesky "
          f"{chol / 3600:.2f} core-h (two are run), critical path of one {path / 60:.1f} min")
    for n in (8, 32, 128):
        t_fact = max(chol / n, path)
        print(f"    n = {n:3d} one-thread workers: products {prod / n / 60:.0f} min + two factorisations "
              f"{2 * t_fact / 60:.0f} min; Gram + factor {2 * 8 * M * M / 2 / n / 2**30:.1f} GiB a worker")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 x 3 grid, 1 seed, small sizes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--plot", default=None)
    ap.add_argument("--parts", default="sweep,gram,blocks,cert,tiles",
                    help="comma-separated subset of sweep,gram,blocks,cert,tiles")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if "sweep" in parts:
        bench_sweep(args.workers, args.plot, (0.5, 1.0, 2.0) if args.quick else SCALES, (0,) if args.quick else (0, 1, 2))
    if "gram" in parts:
        bench_distributed_gram(args.workers, 512 if args.quick else 4096)
    if "blocks" in parts:
        bench_blocks((512, 1024) if args.quick else (4096, 8192))
    if "cert" in parts:
        bench_certified(args.workers, 1024 if args.quick else 8192, tiles=4 if args.quick else 8)
    if "tiles" in parts:
        bench_tiles((256, 512) if args.quick else (1024, 2048), 512 if args.quick else 4096)


if __name__ == "__main__":
    main()
