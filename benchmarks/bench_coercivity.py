"""How loose is the split-region certificate? Each certified bound beside the worst value found on its region.

Run: ``python benchmarks/bench_coercivity.py [--evaluations 200]``. Cases: the README example
(bundled ``screen_default.npz`` samples 0-3, 16 heads, 4 layers, ``--eps 0.01``: Loss(0) = 5e-5) and
three random data sets of 4 samples of 5 tokens with ``d = 2, 8, 64`` (tokens ``N(0, 4/d)`` per
coordinate, heads with ``q_scale = b_scale = 1/sqrt(d)``; 16 heads for d = 2, 8 and 4 for d = 64,
the cases of ``bench_lipschitz.py``) at Loss(0) = 1e-7, or at half the certifiable loss when 1e-7 is
not certifiable (the column ``Loss(0)`` says which).

For each, on the certificate's region :math:`|V|_\\rho \\le r_V`, :math:`|\\psi - \\psi_0|_\\rho \\le r_q`
(:mod:`ntkcheck.convergence.coercivity.split`), the quantities that replace ``L_K`` in the split theorem,
certified / found (:func:`ntkcheck.convergence.lipschitz_search.region_search`):

* ``drop``: :math:`\\sigma_0 - \\sigma_{\\rm low}` against :math:`\\sigma_0 - \\min\\sigma_{\\min}(B_V)` found;
* ``kappa``: certified :math:`\\kappa` against the largest :math:`\\|B_\\psi\\|/|V|_\\rho` found;
* ``dev``: certified :math:`\\|B_V - B_{V0}\\|` bound against the largest found;
* ``K/r_V``: the certificate's centred ``L_K`` against the largest :math:`\\|K - K_0\\|/r_V` found.

All ratios are measured in the same run; the issue's aim is at most 30 each.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _convergence_cases import random_cases, readme_case

from ntkcheck.convergence.guarantee import certificate_from_spectrum
from ntkcheck.convergence.lipschitz_search import region_search
from ntkcheck.convergence.spectrum_bound import certified_spectrum

LAYERS = 4


def _cases() -> list[tuple[str, list[np.ndarray], object, float]]:
    return [readme_case(0.01), *random_cases()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--evaluations", type=int, default=200, help="Jacobians the search may compute per case")
    args = ap.parse_args()
    print(f"{'case':20} {'Loss(0)':>8} {'cert.':>5} {'route':>20} {'r_V':>8} {'r_q':>8} {'drop':>6} {'kappa':>6} "
          f"{'dev':>6} {'K/r_V':>6} {'s':>4}")
    for name, samples, p, L0 in _cases():
        t = time.perf_counter()
        spec = certified_spectrum(samples, p, layers=LAYERS)
        c = certificate_from_spectrum(samples, p, layers=LAYERS, lambda_min=spec.lambda_min_float,
                                      lambda_max=spec.lambda_max_float, loss_initial=L0)
        if not c.certified and c.threshold > 0:
            L0 = 0.5 * c.threshold
            c = certificate_from_spectrum(samples, p, layers=LAYERS, lambda_min=spec.lambda_min_float,
                                          lambda_max=spec.lambda_max_float, loss_initial=L0)
        sp = c.split
        if sp is None:
            print(f"{name:20} {L0:8.2g} {'yes' if c.certified else 'no':>5} {c.method:>20} (no split region)")
            continue
        f = region_search(samples, p, layers=LAYERS, radius_V=sp.radius_V, radius_psi=sp.radius_psi,
                          evaluations=args.evaluations, seconds=600.0)
        s0 = sp.sigma_0
        drop = (s0 - sp.sigma_low) / max(s0 - f.sigma_min, 1e-300)
        route = f"{sp.linear}/{sp.quadratic}"
        print(f"{name:20} {L0:8.2g} {'yes' if c.certified else 'no':>5} {route:>20} {sp.radius_V:8.3g} "
              f"{sp.radius_psi:8.3g} {drop:6.3g} {sp.kappa / f.kappa:6.3g} {c.deviation / f.deviation_V:6.3g} "
              f"{c.L_K / f.K_change:6.3g} {time.perf_counter() - t:4.0f}")


if __name__ == "__main__":
    main()
