"""How loose is the certified L_K? The certified constant beside the largest ratio found on the same ball.

Run: ``python benchmarks/bench_lipschitz.py [--evaluations 200]``. Cases: the README example
(bundled ``screen_default.npz`` samples 0-3, 16 heads, 4 layers, the flow's default heads) at
``--eps 0.01`` (not certifiable) and ``--eps 0.001`` (certified), and three random data sets of 4
samples of 5 tokens with ``d = 2, 8, 64`` (tokens ``N(0, 4/d)`` per coordinate, so ``|x| ~ 2`` as in
the bundled data; heads with ``q_scale = b_scale = 1/sqrt(d)``, the usual ``1/sqrt(d)``
attention scaling; 16 heads for d = 2, 8 and 4 heads for d = 64, whose dense NTK is otherwise
slow to search) at ``Loss(0) = 1e-7``.

For each: the certificate's ball radius, the certified ``L_K`` on it
(:mod:`ntkcheck.convergence.guarantee`), the largest ``||K(theta) - K(theta')|| / D`` found there
(:func:`ntkcheck.convergence.lipschitz_search.lipschitz_search`), their ratio (the looseness: the
aim of issue 21 is at most 30), and the same for the Jacobian deviation ``beta(r) / r`` against
the largest ``||B(theta) - B_0|| / D`` found. Both ratios are measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _convergence_cases import random_cases, readme_case

from ntkcheck.convergence.guarantee import certificate_from_spectrum
from ntkcheck.convergence.lipschitz_search import lipschitz_search
from ntkcheck.convergence.spectrum_bound import certified_spectrum


def _cases() -> list[tuple[str, list[np.ndarray], object, float]]:
    return [readme_case(0.01), readme_case(0.001), *random_cases()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--evaluations", type=int, default=200, help="NTKs the search may compute per case")
    args = ap.parse_args()
    print(f"{'case':22} {'lambda_0':>9} {'cert.':>5} {'radius':>9} {'L_K cert':>9} {'found':>7} {'ratio':>6} "
          f"{'beta/r':>7} {'found':>7} {'ratio':>6} {'excess':>8} {'s':>5}")
    for name, samples, p, L0 in _cases():
        t = time.perf_counter()
        spec = certified_spectrum(samples, p, layers=4)
        c = certificate_from_spectrum(samples, p, layers=4, lambda_min=spec.lambda_min_float,
                                      lambda_max=spec.lambda_max_float, loss_initial=L0)
        f = lipschitz_search(samples, p, layers=4, radius=c.radius, evaluations=args.evaluations, seconds=600.0)
        dev = c.deviation / c.radius
        print(f"{name:22} {c.lambda_0:9.4g} {'yes' if c.certified else 'no':>5} {c.radius:9.3g} {c.L_K:9.4g} "
              f"{f.best_ratio:7.4g} {c.L_K / f.best_ratio:6.3g} {dev:7.4g} {f.best_deviation:7.4g} "
              f"{dev / f.best_deviation:6.3g} {c.excess_factor:8.3g} {time.perf_counter() - t:5.0f}")


if __name__ == "__main__":
    main()
