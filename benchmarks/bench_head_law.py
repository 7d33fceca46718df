"""Benchmark of the certificate of the head law's NTK (ntkcheck.ntk.heads.law), issue 20.

For M = 64, 256, 1024 distinct atoms (samples of N = 8 Gaussian tokens of norm about 1,
``x ~ N(0, I / d)``), d = 8 and 384, Gaussian heads (``q_scale = b_scale = 1``),
``delta = 1e-6``:

* the pilot: the screen's default head count from the span of the atoms and the float64
  ``lambda_min`` of that draw's Gram (the estimate of ``lambda_min(K_rho)``);
* ``L``, the bound on one head's Gram, and ``L t / lambda``, what the number of heads scales with;
* the heads drawn and the seconds taken by ``head_law_bound`` within ``--seconds`` (default
  600), the lower and upper bounds, and the cost per head measured in the same run;
* the heads a lower bound of half the pilot's ``lambda_min`` needs (``5.25 L t / lambda``) and
  the seconds that takes at the measured rate.

Usage: ``python benchmarks/bench_head_law.py [--seconds S] [--rows M:d ...]``. The machine may be
shared: the per-head cost is measured in each row's own run.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from ntkcheck.cgf import as_laws
from ntkcheck.ntk import atom_span, default_head_count, gram, head_law_bound, init_heads
from ntkcheck.ntk.heads import tail_bounds


def _row(M: int, d: int, seconds: float, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    laws = as_laws(list(rng.standard_normal((M // 8, 8, d)) / math.sqrt(d)))
    span = atom_span(laws)
    H0 = default_head_count(M, d, span)
    g = gram(laws, init_heads(H0, d, seed=seed))
    pilot = g.lambda_min
    t = time.perf_counter()
    hl = head_law_bound(laws, delta=1e-6, seconds=seconds, pilot=pilot, span=span, seed=seed)
    secs = time.perf_counter() - t
    L = hl.L or float("nan")
    tt = math.log(2.0 / tail_bounds.round_delta(1e-6, 0))
    need = 5.25 * L * tt / pilot if pilot > 0 else float("inf")
    rate = hl.rounds[-1].seconds / hl.rounds[-1].heads if hl.rounds else float("nan")
    low = "-" if hl.lower is None else f"{hl.lower:.3g}"
    up = "-" if hl.upper is None else f"{hl.upper:.3g}"
    print(f"{M:>5} {d:>4} {span.rank:>4} {H0:>5} {pilot:>9.3g} {L:>8.3g} {L * tt / pilot:>9.3g} "
          f"{hl.heads:>9} {secs:>7.1f} {low:>9} {up:>9} {hl.status:>13} {rate * 1e3:>8.3g} {need:>10.3g} "
          f"{need * rate:>9.3g}  {hl.detail}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="budget of each certificate (default 600)")
    ap.add_argument("--rows", nargs="*", default=["64:8", "256:8", "1024:8", "64:384", "256:384", "1024:384"],
                    help="M:d pairs (default: M = 64, 256, 1024 at d = 8 and 384)")
    args = ap.parse_args()
    print("    M    d    r    H0     pilot        L   L t/lam     heads       s     lower     upper        status "
          "  ms/head  heads(1/2)  s(1/2)  stopped because")
    for row in args.rows:
        M, d = (int(v) for v in row.split(":"))
        _row(M, d, args.seconds)


if __name__ == "__main__":
    main()
