"""The data both convergence benchmarks measure on (``bench_lipschitz.py``, ``bench_coercivity.py``):
the README example (the bundled screening data, samples 0-3, 16 heads in d = 3) and three random
data sets (4 samples of 5 Gaussian tokens of norm about 2, heads at scale ``1 / sqrt(d)``)."""

from __future__ import annotations

import math

import numpy as np

from ntkcheck.dynamics import init_params


def readme_case(eps: float) -> tuple[str, list[np.ndarray], object, float]:
    """The README example at targets ``eps`` away: Loss(0) = eps^2 / 2."""
    from ntkcheck.io.files import bundled_path, load_samples

    readme = load_samples(bundled_path("screen_default.npz"))[:4]
    return (f"README, --eps {eps:g}", readme, init_params(3, 16, seed=0), 0.5 * eps**2)


def random_cases() -> list[tuple[str, list[np.ndarray], object, float]]:
    """d = 2, 8 (16 heads) and 64 (4 heads), Loss(0) = 1e-7."""
    out = []
    for d, H in ((2, 16), (8, 16), (64, 4)):
        rng = np.random.default_rng(d)
        samples = [rng.standard_normal((5, d)) * (2.0 / math.sqrt(d)) for _ in range(4)]
        s = 1.0 / math.sqrt(d)
        out.append((f"random d={d}, H={H}", samples, init_params(d, H, q_scale=s, b_scale=s, seed=0), 1e-7))
    return out
