"""Generate ``screen_default.npz``, the dataset ``ntkcheck screen`` screens when given no path.

Samples 0-3: random token sets (6-8 i.i.d. Gaussian tokens in d = 3, seed 2024, rounded
to multiples of 1/64 so the file's values are short exact dyadics). Their CGFs are
weakly independent (seed 003 Prop. 10: almost surely).

Samples 4-6: the product construction of row 1 of the Prop. 8 table in theory/ntk-prop8.md, in d = 3:
mu_4 = {0, u}, mu_5 = {0, v}, mu_6 = {0, u, v, u + v} = mu_4 * mu_5, so
Lambda_6 = Lambda_4 + Lambda_5 (dependent, alpha = 0) and the three samples share the
atom 0: condition (34) holds and the NTK Gram is singular (seed 003 Prop. 8).

Run from the repository root: ``python ntkcheck/data/make_screen_default.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def build(seed: int = 2024) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for i, N in enumerate((6, 7, 8, 7)):
        out[f"sample_{i}"] = np.round(rng.standard_normal((N, 3)) * 64) / 64
    z = np.zeros(3)
    u = np.array([1.0, 0.5, 0.0])
    v = np.array([0.0, 1.0, -0.5])
    out["sample_4"] = np.stack([z, u])
    out["sample_5"] = np.stack([z, v])
    out["sample_6"] = np.stack([z, u, v, u + v])
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("screen_default.npz")
    np.savez(path, **build())
    print(f"wrote {path}")
