"""Benchmark of the certificate of the head law's NTK (ntkcheck.ntk.heads.law), issues 20 and 32.

Rows ``M:d[:N]``: ``M / N`` samples of ``N`` Gaussian tokens (default ``N = 8``), ``x ~ N(0, I / d)``,
Gaussian heads with unit scales, ``delta = 1e-6``. Two tables, each from one run:

1. **Bounds against the draw.** The draw is what a screening reports: ``screen()`` itself (rows with
   ``M <= 64``, the head-law budget its default 20 s) or, above, the Gram of the screen's default
   head count. Printed: the draw's ``lambda_min``, the certified ``lower`` and ``upper`` and their
   ratios to it (the aims: ``lower >= 0.5`` and ``upper <= 2`` of the draw), the heads, rounds and
   seconds, and the heads (seconds) a factor-2 round would still need. ``fm/dr``: the mean of
   ``v^T X v`` over the heads of the best upper bound, against the draw: ``upper - form`` is the upper
   bound's statistical term (range and variance), ``form - lower`` bounds the direction's bias
   ``v^T K_rho v - lambda_min(K_rho)`` (plus the lower bound's own slack).
2. **Heads per second against the limit.** One block of heads through the features alone (the
   upper bound's heads) and through the preconditioned, truncated Gram (the lower bound's heads),
   timed; the limit is the flop count of one head at the rate of a GEMM of the same shape measured
   in the same run (``T F``: ``M x M`` by ``M x k d``; the features' small products at that rate too)
   plus its ``M N`` exponentials at the rate of ``np.exp`` on as many numbers.

Usage: ``python benchmarks/bench_head_law.py [--seconds S] [--rows M:d[:N] ...] [--rates-only]``. The
machine may be shared: every ratio is measured within one run.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from ntkcheck.cgf import as_laws
from ntkcheck.ntk import atom_span, default_head_count, gram, head_law_bound, init_heads
from ntkcheck.ntk.heads.accumulate import Lens, RoundSums, draw_block
from ntkcheck.ntk.heads.preconditioner import Estimate, make_lens


def _laws(M: int, d: int, N: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return as_laws(list(rng.standard_normal((M // N, N, d)) / math.sqrt(d)))


def _draw(laws: list, M: int, d: int, seconds: float) -> tuple[float, object, int]:
    """The draw's lambda_min and the head-law certificate: screen() itself for M <= 64."""
    if M <= 64:
        from ntkcheck import screen

        rep = screen(laws, head_law_seconds=seconds, certify=False)
        return rep.gram.lambda_min, rep.head_law, rep.gram.heads
    span = atom_span(laws)
    H0 = default_head_count(M, d, span)
    g = gram(laws, init_heads(H0, d, seed=0))
    return g.lambda_min, head_law_bound(laws, delta=1e-6, seconds=seconds, span=span, seed=0), H0


def bounds_row(M: int, d: int, N: int, seconds: float) -> None:
    laws = _laws(M, d, N)
    t = time.perf_counter()
    lam, hl, H0 = _draw(laws, M, d, seconds)
    secs = time.perf_counter() - t
    low = hl.lower or 0.0
    up = math.inf if hl.upper is None else hl.upper
    ups = [r for r in hl.rounds if r.side == "upper" and r.form is not None and r.upper == up]
    form = ups[-1].form if ups else math.nan  # the mean of v^T X v over the heads of the best upper bound
    need = "-" if hl.heads_estimate is None else f"{hl.heads_estimate:.3g}"
    need_s = "-" if hl.seconds_estimate is None else f"{hl.seconds_estimate:.3g}"
    print(f"{M:>5} {d:>4} {N:>3} {H0:>6} {lam:>9.3g} {low:>9.3g} {up:>9.3g} {low / lam:>6.2f} {up / lam:>6.2f} "
          f"{form / lam:>6.2f} "
          f"{hl.heads:>9} {len(hl.rounds):>3} {hl.seconds:>7.1f} {secs:>7.1f} {need:>9} {need_s:>7}  {hl.detail}",
          flush=True)


def _lens(laws: list, d: int) -> Lens:
    """A preconditioned lens from a pilot of 8 M / d heads (what the second round uses)."""
    M = sum(law.n_atoms for law in laws)
    pilot = max(256, 8 * M // d)
    sums = RoundSums(laws, Lens(None, 1.0, 1.0, 1e300))
    for k in range(0, pilot, sums.per_block()):
        Q, b = draw_block(k, min(sums.per_block(), pilot - k), d, q_scale=1.0, b_scale=1.0, dist="gaussian", seed=1)
        sums.add(Q, b, gram=True)
    est = Estimate(M)
    est.set(0, sums, None)
    import ntkcheck.ntk.heads.preconditioner as pc

    old, pc.CHOICE = pc.CHOICE, "preconditioned"
    try:
        Q, b = draw_block(0, 256, d, q_scale=1.0, b_scale=1.0, dist="gaussian", seed=2)
        lens, _ = make_lens(est, laws, 1e300, (Q, b), 10**4, 20.0)
    finally:
        pc.CHOICE = old
    return lens


def _gemm_rate(M: int, cols: int) -> float:
    """Multiply-adds per second of an ``M x M`` by ``M x cols`` GEMM (best of 3)."""
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((M, M)), rng.standard_normal((M, cols))
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        A @ B
        best = min(best, time.perf_counter() - t)
    return M * M * cols / best


def _exp_rate(n: int) -> float:
    x = np.random.default_rng(0).standard_normal(n)
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        np.exp(x)
        best = min(best, time.perf_counter() - t)
    return n / best


def rates_row(M: int, d: int, N: int) -> None:
    laws = _laws(M, d, N)
    lens = _lens(laws, d)
    out = []
    for gram_ in (False, True):
        sums = RoundSums(laws, lens, gram=gram_)
        k = sums.per_block(gram_)
        Q, b = draw_block(0, k, d, q_scale=1.0, b_scale=1.0, dist="gaussian", seed=3)
        sums.add(Q, b, gram=gram_)  # warm-up
        t = time.perf_counter()
        reps = 0
        while time.perf_counter() - t < 2.0 or reps < 2:
            sums.add(Q, b, gram=gram_)
            reps += 1
        secs = (time.perf_counter() - t) / (reps * k)
        feat = M * d * (d + 1 + 2 * N)  # queries, scores, softmax means (multiply-adds)
        madds = feat + (M * M * d * 1.5 + M * d * d if gram_ else 2 * M * d)
        limit = madds / _gemm_rate(M, k * d) + M * N / _exp_rate(M * N * k)
        out.append((1.0 / secs, 1.0 / limit, madds))
    (fs, fl, fm), (gs, gl, gm) = out
    print(f"{M:>5} {d:>4} {N:>3} {fm:>10.3g} {fs:>10.3g} {fl:>10.3g} {fl / fs:>6.2f} {gm:>10.3g} {gs:>10.3g} "
          f"{gl:>10.3g} {gl / gs:>6.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="head-law budget of each row (default 20)")
    ap.add_argument("--rows", nargs="*", default=["20:3:4", "64:8", "64:4", "256:8"],
                    help="M:d[:N] rows (default: 20:3:4 64:8 64:4 256:8)")
    ap.add_argument("--rates-only", action="store_true", help="only the heads-per-second table")
    args = ap.parse_args()
    rows = [tuple(int(v) for v in r.split(":")) for r in args.rows]
    rows = [(r[0], r[1], r[2] if len(r) > 2 else 8) for r in rows]
    if not args.rates_only:
        print("    M    d   N  draw H  draw lam     lower     upper  lo/dr  up/dr  fm/dr     heads ckp  hl s  total s"
              "  need(2x)  need s  stopped because")
        for M, d, N in rows:
            bounds_row(M, d, N, args.seconds)
    print("\nheads per second: features alone (upper-bound heads) and preconditioned Gram (lower-bound heads)")
    print("    M    d   N  feat madd   feat h/s  limit h/s  limit/  gram madd   gram h/s  limit h/s  limit/")
    for M, d, N in rows:
        rates_row(M, d, N)


if __name__ == "__main__":
    main()
