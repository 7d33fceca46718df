# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 — Local convergence of gradient flow from FixUp
#
# Seed 002 Thm. 8.5 (seed 003 Thm. 4): if the NTK at initialisation has
# `spec(K) in [lambda_0, Lambda]` and the initial loss is small, gradient flow over the
# heads converges linearly, `Loss(s) <= exp(-lambda_0 s) Loss(0)` (eq. 31), and the
# heads move at most `2 sqrt(2 Lambda + lambda_0) Loss(0)^{1/2} / lambda_0` in `W_2` (the seed
# prints `lambda_0 / L_K` in the square root: a slip, see `theory/local-convergence.md`), when
# `Loss(0) <= lambda_0^4 / (16 L_K^2 (2 Lambda + lambda_0))` (corrected eq. 30).
#
# ntkcheck *proves* a sharpened form for given data, heads and targets: with `sigma_0 =
# sqrt(lambda_0)` (proved) and `beta(r)` a certified bound on how far the Jacobian moves on the
# ball `D <= r`, if `(sigma_0 - beta(r)) r >= sqrt(2 Loss(0))` then `Loss(s) <= exp(-2 (sigma_0 -
# beta)^2 s) Loss(0)` and the heads stay within `sqrt(2 Loss(0)) / (sigma_0 - beta)`.
#
# Here we train `H` heads over `L` residual attention layers from FixUp (`V = 0`) with
# `ntkcheck.dynamics` and measure:
#
# 1. the loss against `exp(-lambda_0 s)` (and the linearised `exp(-2 lambda_0 s)`),
#    `lambda_min` of the NTK along the run, the displacement against the bound;
# 2. the dependent case with overlap (Prop. 8's converse): a residual in the NTK kernel
#    does not decay — a plateau;
# 3. what happens as the initial loss grows;
# 4. the certificate on the README example: certified at `eps = 0.001`, the guaranteed
#    envelope beside the measured loss, and the certified `L_K` beside the largest ratio a
#    search finds.
#
# Theory: `theory/local-convergence.md`. Set `NTKCHECK_NOTEBOOK_SMALL=1` for the small
# sizes the test suite uses.

# %%
# First: outside the project's environment this stops with the command to use instead.
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

if not any((Path(p or ".") / "_nbsetup.py").is_file() for p in sys.path):  # a kernel started in another folder
    try:  # the repository of an editable install, else the folders above this one
        import ntkcheck as _nk  # noqa: E402

        _roots = [Path(_nk.__file__).resolve().parents[1], Path.cwd(), *Path.cwd().parents]
    except ImportError:  # _nbsetup says how to run the notebooks then
        _roots = [Path.cwd(), *Path.cwd().parents]
    for _d in _roots:
        if (_d / "notebooks" / "_nbsetup.py").is_file():
            sys.path.insert(0, str(_d / "notebooks"))
            break
from _nbsetup import SMALL, save  # notebooks/_nbsetup.py  # noqa: E402

# isort: split

# %%
import matplotlib.pyplot as plt
import numpy as np

from ntkcheck.convergence import eps_sweep, local_convergence
from ntkcheck.dynamics import kernel_plateau
from ntkcheck.independence.decision import decide

# %% [markdown]
# ## The data and the model
#
# Four samples of three random tokens in `d = 2` (independent CGFs: Prop. 10), `H` heads
# shared across `L` layers, depth `T = 1`, the seed 002 readout loss
# `(1/2) sum_i |y_i - mean(mu_T^i)|^2`. Targets `y = z_0 + eps r` with a random unit
# direction `r`: `Loss(0) = eps^2 / 2` and, the NTK being positive, `Loss* = 0`.

# %%
rng = np.random.default_rng(0)
samples = [rng.standard_normal((3, 2)) for _ in range(4)]
print(decide(samples, property="weak"))

H, L = (16, 2) if SMALL else (32, 4)
common = dict(heads=H, layers=L, T=1.0, q_scale=2.0, b_scale=2.0, loss="readout", seed=0)

# %% [markdown]
# ## 1. Small initial loss: the linear rate

# %%
run = local_convergence(samples, eps=1e-2, decades=4.0, n_records=15 if SMALL else 40, **common)
print(run)
flow = run.flow
s = np.array(flow.s)
loss = np.array(flow.loss)

fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4))
ax1.semilogy(s, loss, "o-", ms=3, label="Loss(s)")
ax1.semilogy(s, loss[0] * np.exp(-run.lambda_0 * s), "k--", label="exp(-lambda_0 s) Loss(0)  (eq. 31)")
ax1.semilogy(s, loss[0] * np.exp(-2 * run.lambda_0 * s), "k:", label="exp(-2 lambda_0 s) Loss(0)  (linearised)")
ax1.set_xlabel("flow time s")
ax1.set_ylabel("Loss(s)")
ax1.set_title(f"loss, lambda_0 = {run.lambda_0:.3g}, measured rate {run.rate_measured:.3g}")
ax1.legend(fontsize=7)
ax2.plot(s, flow.lambda_min, "o-", ms=3, label="lambda_min(K_s)")
ax2.axhline(run.lambda_0 / 2, color="r", ls="--", lw=0.8, label="lambda_0 / 2 (the proof's floor)")
ax2.set_xlabel("flow time s")
ax2.set_ylabel("lambda_min(K_s)")
ax2.set_title("NTK lambda_min along the run")
ax2.legend(fontsize=7)
ax3.plot(s, flow.displacement, "o-", ms=3, label="displacement (>= W_2(rho_s, rho_0))")
ax3.axhline(run.displacement_bound, color="r", ls="--", lw=0.8, label="Thm. 8.5 bound (corrected)")
ax3.set_yscale("log")
ax3.set_xlabel("flow time s")
ax3.set_ylabel("displacement of the heads")
ax3.set_title("displacement of the heads")
ax3.legend(fontsize=7)
fig.tight_layout()
save(fig, "04_local_convergence.png")

print(f"eq. 31 holds on every record: {run.eq31_holds}")
print(f"measured rate / lambda_0 = {run.rate_measured / run.lambda_0:.3f} (eq. 31 needs >= 1)")
print(f"asymptotic rate / lambda_0 = {run.rate_asymptotic / run.lambda_0:.3f} (linearised flow: 2)")
print(f"lambda_min(K_s) / lambda_0 along the run: {min(flow.lambda_min) / run.lambda_0:.4f} .. "
      f"{max(flow.lambda_min) / run.lambda_0:.4f}")
print(f"largest relative deviation from the linearised flow: {run.linearisation_error:.2e}")
print(f"displacement {run.displacement_max:.3g} <= bound {run.displacement_bound:.3g}: "
      f"{run.displacement_max <= run.displacement_bound}")
print(f"largest Lipschitz ratio of the NTK found on the certificate's ball: {run.lipschitz_lower:.3g} "
      f"(certified L_K {run.certificate.L_K:.3g}, ratio {run.lipschitz_ratio:.3g})")
print(run.certificate)  # the sharpened Thm. 8.5 with proved constants

# %% [markdown]
# At this small `eps` the run is the linearised flow `du/ds = -K_0 u`: `lambda_min(K_s)`
# stays at `lambda_0` (far above the proof's floor `lambda_0 / 2`), the fast modes of
# `K_0` make the initial drop, and the slowest mode then decays at `2 lambda_0` (the
# asymptotic rate). The averaged rate `min_s -log(Loss(s)/Loss(0)) / s` that eq. 31
# bounds is above `2 lambda_0` because of the fast transient: eq. 31's `lambda_0` is a
# floor with a factor 2 of slack (its proof only keeps `lambda_min >= lambda_0 / 2`).
#
# ## 2. Dependent CGFs with overlap: the plateau
#
# `{0, u}, {0, v}, {0, u, v, u + v}`: `Lambda_3 = Lambda_1 + Lambda_2` and the samples
# share the atom 0, so `p = (2, 0 | 2, 0 | -4, 0, 0, 0)` (times a unit vector) is in the
# NTK kernel. The per-token residual is put partly along `p` and partly in the range of
# the NTK. The range part decays at the linear rate; the kernel part stays.

# %%
plateau = kernel_plateau(heads=8, layers=2, eps=1e-2, mix=0.5, decades=3.0, n_records=15 if SMALL else 40)
print(plateau)
ps = np.array(plateau.flow.s)
fig, ax = plt.subplots(figsize=(6, 4))
ax.semilogy(ps, plateau.kernel_loss, "o-", ms=3, label="kernel part of the loss")
ax.semilogy(ps, plateau.range_loss, "s-", ms=3, label="range part of the loss")
ax.semilogy(ps, plateau.range_loss[0] * np.exp(-2 * plateau.lambda_plus * ps), "k:",
            label="exp(-2 lambda_+ s) (slowest range mode)")
ax.set_xlabel("flow time s")
ax.set_ylabel("part of the per-token loss")
ax.set_title(f"Plateau: dependent CGFs with overlap, NTK kernel dimension {plateau.kernel_dim}", fontsize=10)
ax.legend(fontsize=7)
fig.tight_layout()
save(fig, "04_plateau.png")

# %% [markdown]
# ## 3. Growing the initial loss
#
# The guarantee asks for a small initial loss; how small depends on how fast the NTK can move
# (printed above with the certificate: where the initial loss is too large for a guarantee, by
# the factor shown). The threshold is conservative. Here the same heads and direction are run at
# growing `eps`; the rate is reported relative to `lambda_0`. `breakdown_eps` is the
# first `eps` at which eq. 31 fails on the run (`nan`: none in the range tried).

# %%
eps_values = (1e-2, 0.3, 3.0) if SMALL else (1e-2, 0.1, 0.3, 1.0, 3.0, 10.0)
sweep = eps_sweep(samples, eps_values, decades=4.0, n_records=10 if SMALL else 20, **common)
print(sweep)
fig, ax = plt.subplots(figsize=(6, 4))
ax.semilogx(sweep.eps, np.array(sweep.rate_measured) / sweep.lambda_0, "o-", label="measured rate / lambda_0")
ax.axhline(1.0, color="r", ls="--", lw=0.8, label="eq. 31 (rate lambda_0)")
ax.axhline(2.0, color="k", ls=":", lw=0.8, label="linearised (2 lambda_0)")
ax.set_xlabel("eps (Loss(0) = eps^2 / 2)")
ax.set_ylabel("measured rate / lambda_0")
ax.set_title("Growing the initial loss: the rate against eq. 31", fontsize=10)
ax.legend(fontsize=7)
fig.tight_layout()
save(fig, "04_eps_sweep.png")

# %% [markdown]
# ## 4. The certificate on the README example
#
# The bundled data (samples 0-3, `d = 3`), 16 FixUp heads over 4 layers: at `eps = 0.001` the
# guarantee is certified; the measured loss stays under the guaranteed envelope and the heads
# inside the guaranteed radius. `docs/local_convergence.py` draws the same run for the README.

# %%
from ntkcheck.dynamics import default_samples  # noqa: E402

readme, _ = default_samples()
cert_run = local_convergence(readme, heads=16, layers=4, eps=1e-3, loss="readout", n_records=12 if SMALL else 30,
                             track_ntk=1, search_evaluations=60 if SMALL else 200)
c = cert_run.certificate
print(c)
cs = np.array(cert_run.flow.s)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
ax1.semilogy(cs, cert_run.flow.loss, "o-", ms=3, label="Loss(s), measured")
ax1.semilogy(cs, c.loss_initial * np.exp(-c.rate_guaranteed * cs), "k-", lw=1,
             label=f"guaranteed exp(-{c.rate_guaranteed:.3g} s) Loss(0)")
ax1.semilogy(cs, c.loss_initial * np.exp(-c.lambda_0 * cs), "r--", lw=0.8, label="eq. 31, exp(-lambda_0 s) Loss(0)")
ax1.set_xlabel("flow time s")
ax1.set_ylabel("loss")
ax1.set_title("README example, eps = 0.001: certified")
ax1.legend(fontsize=7)
ax2.plot(cs, cert_run.flow.displacement, "o-", ms=3, label="displacement")
ax2.axhline(c.displacement_bound, color="k", lw=1, label="guaranteed radius")
ax2.set_xlabel("flow time s")
ax2.set_ylabel("displacement D(theta_s, theta_0)")
ax2.set_title(f"L_K certified {c.L_K:.3g}, found {cert_run.lipschitz_lower:.3g}")
ax2.legend(fontsize=7)
fig.tight_layout()
save(fig, "04_certificate.png")

# %% [markdown]
# ## Summary
#
# What the test suite checks: eq. 31 holds and the displacement stays under the bound
# for the small initial loss, and the slowest mode decays at the linearised `2 lambda_0`
# (within 10%); in the dependent case the kernel part of the loss stays
# (it keeps more than 90% of its value while the range part loses more than 99%); on the
# README example at `eps = 0.001` the guarantee is certified and the run obeys it.

# %%
theorem_ok = run.eq31_holds and run.displacement_max <= run.displacement_bound
linear_regime = abs(run.rate_asymptotic / (2 * run.lambda_0) - 1) < 0.1
plateau_seen = plateau.kernel_loss_ratio > 0.9 and plateau.range_loss_ratio < 1e-2
certified_ok = c.certified and cert_run.guarantee_holds is True
print("Thm. 8.5 on the run:", theorem_ok, "  slowest mode at 2 lambda_0:", linear_regime,
      "  plateau in the kernel direction:", plateau_seen, "  README example certified and obeyed:", certified_ok)
