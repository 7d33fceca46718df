"""Time to a certified verdict, and the bits the ladder needed, against the naive routes.

Run: ``python benchmarks/bench_decide.py [--quick]``. Prints one table; ratios are
against sympy ``Matrix.rank`` on the same exact matrix and a float64 SVD, timed in the
same run (sympy is given ``--sympy-timeout`` seconds in a subprocess, then reported as
'>T s').
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from fractions import Fraction

import numpy as np
import scipy.linalg
import sympy as sp

from ntkcheck.decide import _exact_rows_all, candidate_directions, decide
from ntkcheck.families import Empirical, UniformCube


def _sympy_rank(rows, q):
    M = sp.Matrix([[sp.Rational(int(v.p), int(v.q)) for v in r] for r in rows])
    q.put(M.rank())


def sympy_rank_time(rows, timeout: float) -> str:
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=_sympy_rank, args=(rows, q))
    t0 = time.perf_counter()
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.terminate()
        p.join()
        return f">{timeout:.0f} s"
    return f"{time.perf_counter() - t0:.3f} s"


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="n = 8, 16 only")
    ap.add_argument("--sympy-timeout", type=float, default=20.0)
    args = ap.parse_args()
    sizes = [8, 16] if args.quick else [8, 16, 32, 64]
    rng = np.random.default_rng(0)
    print(f"{'case':24s} {'n':>3s} {'auto':>9s} {'exact':>9s} {'interval':>9s} {'bits':>5s} {'float SVD':>10s} {'sympy rank':>11s}  verdicts")
    for family in ("empirical N=16 d=4", "uniform radii [1,2]"):
        for n in sizes:
            if family.startswith("empirical"):
                ms = [Empirical(x) for x in rng.normal(size=(n, 16, 4))]
            else:
                ms = [UniformCube(1 + Fraction(k, n - 1), 1) for k in range(n)]
            a, ta = timed(lambda: decide(ms, "strong"))  # noqa: B023 (called at once)
            e, te = timed(lambda: decide(ms, "strong", method="exact"))  # noqa: B023
            i, ti = timed(lambda: decide(ms, "strong", method="interval"))  # noqa: B023
            w = e.direction or candidate_directions(ms[0].dim, 1)[0]
            rows = _exact_rows_all(ms, [w], max(6, 2 * n + 2))
            mid = np.array([[float(v) for v in r] for r in rows])
            _, tf = timed(lambda: scipy.linalg.svdvals(mid))  # noqa: B023
            ts = sympy_rank_time(rows, args.sympy_timeout) if n <= 16 else f">{args.sympy_timeout:.0f} s (skipped)"
            bits = i.precision.split()[0] if i.precision.endswith("bits") else "-"
            print(
                f"{family:24s} {n:3d} {ta:8.3f}s {te:8.3f}s {ti:8.3f}s {bits:>5s} {tf * 1e3:8.2f}ms {ts:>11s}  "
                f"{a.verdict.value}/{e.verdict.value}/{i.verdict.value} (auto by {a.method})"
            )


if __name__ == "__main__":
    main()
