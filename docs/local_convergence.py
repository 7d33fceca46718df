"""Make docs/local_convergence.png, the local-convergence figure of the README.

The README example (bundled data, samples 0-3, 16 FixUp heads over 4 layers, readout loss) run
by ``ntkcheck.dynamics.local_convergence`` at ``eps = 0.001``, where the sharpened seed 002
Thm. 8.5 is certified: left, the measured loss beside the guaranteed envelope, eq. 31 and the
linearised rate; middle, the displacement of the heads inside the guaranteed radius; right,
the certificate's condition ``(sigma_0 - beta(r)) r >= sqrt(2 Loss(0))`` against the radius, with
the initial residuals of ``eps = 0.001`` (certified) and the default ``eps = 0.01`` (not).
Run from the repository root: ``python docs/local_convergence.py``.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ntkcheck.convergence import local_convergence  # noqa: E402
from ntkcheck.convergence.guarantee import _scan  # noqa: E402  (the certificate's own curve)
from ntkcheck.dynamics import default_samples, init_params  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "local_convergence.png"


def main(out: Path = DEFAULT_OUT) -> Path:
    samples, _ = default_samples()
    params = init_params(3, 16, seed=0)
    run = local_convergence(samples, params=params, layers=4, eps=1e-3, loss="readout", n_records=30, track_ntk=1)
    c = run.certificate
    print(c, f"; L_K found {run.lipschitz_lower:.4g}")
    s = np.array(run.flow.s)
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ax[0].semilogy(s, run.flow.loss, "o-", ms=3, label="measured loss")
    ax[0].semilogy(s, c.loss_initial * np.exp(-c.rate_guaranteed * s), "k-", lw=1.2,
                   label=f"guaranteed $e^{{-{c.rate_guaranteed:.3g}s}}L(0)$ (certified)")
    ax[0].semilogy(s, c.loss_initial * np.exp(-c.lambda_0 * s), "--", label=r"$e^{-\lambda_0 s}L(0)$ (eq. 31)")
    ax[0].semilogy(s, c.loss_initial * np.exp(-2 * c.lambda_0 * s), ":", label=r"$e^{-2\lambda_0 s}L(0)$ (linearised)")
    ax[0].set(title="loss along the flow (eps = 0.001)", xlabel="flow time s", ylabel="loss")
    ax[0].legend(fontsize=8)
    ax[1].plot(s, run.flow.displacement, "o-", ms=3, label="measured displacement")
    ax[1].axhline(c.displacement_bound, c="k", lw=1.2, label="guaranteed radius (certified)")
    ax[1].set(title="head displacement", xlabel="flow time s", ylabel=r"$D(\theta_s, \theta_0)$")
    ax[1].legend(fontsize=8)
    sigma0 = c.lambda_0**0.5
    sc = _scan(samples, params, 4, 1.0, "readout", sigma0, c.lambda_max_0)
    ok = sc.g > 0
    ax[2].loglog(sc.r[ok], sc.g[ok], "-", label=r"$(\sigma_0 - \beta(r))\,r$, certified $\beta$")
    lin = (sigma0 - sc.first_order * sc.r) * sc.r
    ax[2].loglog(sc.r[lin > 0], lin[lin > 0], ":", label="centre's second derivative only (no growth)")
    for eps, style in ((1e-3, "g--"), (1e-2, "r--")):
        ax[2].axhline(eps, ls="--", c=style[0], lw=0.8, label=f"$\\sqrt{{2L(0)}}$ at eps = {eps:g}")
    ax[2].set(title="the certificate's condition", xlabel="ball radius r", ylabel="margin (certified above a line)",
              xlim=(1e-4, 0.3), ylim=(1e-5, 5e-2))
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(main())
