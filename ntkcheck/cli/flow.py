"""``ntkcheck flow [PATH]``: gradient flow from FixUp against seed 002 Thm. 8.5.

Parses, calls :func:`ntkcheck.dynamics.local_convergence`, prints a summary or (``--json``)
exactly one JSON object, and optionally plots the run.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import InputError
from ._args import positive_float, positive_int


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "flow",
        help="train deep attention by gradient flow from FixUp; compare with Thm. 8.5 (rate, displacement)",
        description="Gradient flow d theta_h/ds = -H grad Loss from FixUp with targets y = z0 + eps r; "
        "reports lambda_0 of the NTK, the measured rate min_s -log(L(s)/L(0))/s (seed 002 eq. 31: >= lambda_0), "
        "and the displacement against the Thm. 8.5 bound (L_K -> infinity limit). Without PATH: the first "
        "four samples of the bundled screen_default.npz.",
    )
    p.add_argument("path", nargs="?", default=None, help=".npy (n, N, d) or .npz (sample_0, ...) token file")
    p.add_argument("--samples", default=None, help="comma-separated sample indices to use (default: all; bundled: 0,1,2,3)")
    p.add_argument("--heads", type=positive_int, default=16, help="heads per layer H (default 16)")
    p.add_argument("--layers", type=positive_int, default=4, help="Euler layers L (default 4)")
    p.add_argument("--depth-T", type=positive_float, default=1.0, help="depth horizon T (default 1)")
    p.add_argument("--per-layer", action="store_true", help="one head set per layer (default: shared over depth)")
    p.add_argument("--loss", choices=("readout", "tokens"), default="readout",
                   help="readout: (1/2) sum_i |y_i - mean(mu_T^i)|^2 (seed 002, default); tokens: per-token targets")
    p.add_argument("--eps", type=positive_float, default=1e-2, help="target offset y = z0 + eps r (default 0.01)")
    p.add_argument("--time", type=positive_float, default=None,
                   help="flow time (default: 4 decades of the slowest linearised mode, 4 ln10 / (2 lambda_0))")
    p.add_argument("--q-scale", type=positive_float, default=1.0, help="std of the Q entries (default 1)")
    p.add_argument("--b-scale", type=positive_float, default=1.0, help="std of the b entries (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of heads and target direction (default 0)")
    p.add_argument("--records", type=positive_int, default=20, help="number of records along the run (default 20)")
    p.add_argument("--rtol", type=positive_float, default=1e-7, help="solve_ivp rtol (default 1e-7)")
    p.add_argument("--atol", type=positive_float, default=1e-12, help="solve_ivp atol (default 1e-12)")
    p.add_argument("--step", type=positive_float, default=None, help="explicit gradient descent with this step instead of solve_ivp")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE.png", default=None, help="plot loss, lambda_min and displacement")
    p.add_argument("--progress", action="store_true", help="progress bar")
    p.set_defaults(func=run)


def _load(args: argparse.Namespace) -> tuple[list[Any], str]:
    from ..dynamics import default_samples
    from ..io import load_samples

    if args.path is None:
        samples, source = default_samples(args.seed)
        if args.samples is None:
            return samples, source
        from ..io import bundled_path

        if bundled_path("screen_default.npz").exists():
            samples, source = load_samples(bundled_path("screen_default.npz")), "bundled screen_default.npz"
    else:
        samples, source = load_samples(args.path), str(args.path)
    if args.samples is not None:
        try:
            idx = [int(t) for t in args.samples.split(",") if t.strip()]
        except ValueError:
            raise InputError(f"--samples: expected comma-separated integers, got {args.samples!r}") from None
        bad = [i for i in idx if not 0 <= i < len(samples)]
        if not idx or bad:
            raise InputError(f"--samples: indices must be in 0..{len(samples) - 1}, got {args.samples!r}")
        samples = [samples[i] for i in idx]
        source += f" samples {idx}"
    return samples, source


def run(args: argparse.Namespace) -> int:
    from ..dynamics import local_convergence

    samples, source = _load(args)
    res = local_convergence(
        samples, heads=args.heads, layers=args.layers, T=args.depth_T, eps=args.eps, loss=args.loss,
        per_layer=args.per_layer, q_scale=args.q_scale, b_scale=args.b_scale, seed=args.seed, time_end=args.time,
        n_records=args.records, rtol=args.rtol, atol=args.atol, step=args.step, progress=True if args.progress else None,
    )
    if args.plot:
        _plot(res, args.plot)
    if args.json:
        out = res.to_dict()
        out["data"] = source
        print(json.dumps(out))
        return 0
    print(f"data: {source}")
    print(f"model: H={res.heads}, L={res.layers}, T={res.T:g}, {'per-layer' if res.per_layer else 'shared'} heads, "
          f"loss={res.loss_kind}, eps={res.eps:g}, flow time {res.time_end:.4g} ({res.flow.method}, {res.flow.nfev} gradients, "
          f"{res.flow.wall[-1]:.2f} s)")
    print(f"NTK at FixUp: lambda_0 = {res.lambda_0:.6g}, Lambda = {res.lambda_max_0:.6g}")
    print(f"loss: {res.loss_initial:.4e} -> {res.loss_final:.4e}")
    print(f"rate: measured {res.rate_measured:.6g} (min_s -log(L(s)/L0)/s), theorem (eq. 31) {res.rate_theorem:.6g}, "
          f"linearised 2 lambda_0 = {res.rate_linearised:.6g}; eq. 31 {'holds' if res.eq31_holds else 'FAILS'} on the run")
    print(f"displacement: max {res.displacement_max:.4g} <= Thm. 8.5 bound (L_K -> inf) {res.displacement_bound:.4g}: "
          f"{'yes' if res.displacement_max <= res.displacement_bound else 'NO'}")
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def _plot(res: Any, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    s = np.array(res.flow.s)
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].semilogy(s, res.flow.loss, "o-", ms=3, label="loss")
    ax[0].semilogy(s, res.loss_initial * np.exp(-res.lambda_0 * s), "--", label=r"$e^{-\lambda_0 s}L(0)$ (eq. 31)")
    ax[0].semilogy(s, res.loss_initial * np.exp(-2 * res.lambda_0 * s), ":", label=r"$e^{-2\lambda_0 s}L(0)$")
    ax[0].set_xlabel("flow time s")
    ax[0].legend()
    if res.flow.lambda_min:
        ax[1].plot(s, res.flow.lambda_min, "o-", ms=3)
    ax[1].axhline(res.lambda_0, ls="--", c="gray")
    ax[1].set_title(r"NTK $\lambda_{\min}$ along the run")
    ax[1].set_xlabel("flow time s")
    ax[2].plot(s, res.flow.displacement, "o-", ms=3, label="displacement")
    ax[2].axhline(res.displacement_bound, ls="--", c="r", label=r"Thm. 8.5 bound ($L_K\to\infty$)")
    ax[2].set_xlabel("flow time s")
    ax[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
