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
# # 05 — The seeds' limit theorems, measured
#
# The mean-field theory of transformers rests on limits: many tokens, many heads, many
# layers, low temperature, long training. Each theorem bounds an error by a rate. Here
# every one of them is measured on simulated dynamics:
#
# | experiment | theorem | error against | theorem's rate |
# |---|---|---|---|
# | `chaos-tokens` | "A Mean-Field Theory of Transformers", Thm. 4.2 (propagation of chaos) | tokens `N` | `eps_N` (`N^(-1/4)`, `N^(-1/4) sqrt(log N)`, `N^(-1/d)` by dimension) |
# | `heads-lln` | same, Thm. 5.1 (law of large numbers over heads) | heads `H` | `H^(-1/2) sqrt(log H)` |
# | `depth-heads` | "Uniform Scaling Limits in AdamW-Trained Transformers" (abstract) | depth `L`, heads `H` | `L^(-1) + L^(-1/3) H^(-1/2)` |
# | `langevin` | "A Mean-Field Theory of Transformers", Prop. 8.2, Thm. 8.3 | training time | exponential |
# | `low-temperature` | "Quantifying Concentration Phenomena of Mean-Field Transformers in the Low-Temperature Regime" (abstract) | inverse temperature `beta`, time | `sqrt(log(beta+1)/beta) e^(Ct) + e^(-ct)` |
# | `stability` | "A Mean-Field Theory of Transformers", Thm. 4.1, Cor. 5.2, Thm. 6.2 | perturbations of the initial law and the head law | the theorems' Lipschitz constants |
# | `joint-fluctuations` | same, section 10 (open problem) | tokens `N` and heads `H` together | none (CLT scaling as a conjecture) |
#
# A theorem's rate is an **upper bound**: the measurement is consistent with it when the
# error is shown to decay, at least as fast as the rate. For each rate we fit the slope of
# `log error` per seed, report the mean slope with a 95% Student-t interval over the seeds,
# and compare it with the slope of the theorem's rate over the same range (so that
# `sqrt(log N)` factors count at the sizes measured): consistent when the whole interval is
# below 0, reaches the theorem's slope and is no wider than it. Every experiment is also
# `ntkcheck experiment NAME` on the command line and a claim of `ntkcheck claims`; each is
# written up in `theory/limits-<name>.md`.
#
# Set `NTKCHECK_NOTEBOOK_SMALL=1` for the small sizes the test suite uses (seconds each);
# the default sizes take under a minute each.

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

from ntkcheck.limits.rates import EXPERIMENTS, run_experiment

SIZE = "small" if SMALL else "default"
SEEDS = 5
results = {}


def show(name):
    """Run one experiment, print its report, draw and save its figure."""
    res = run_experiment(name, size=SIZE, seeds=SEEDS)
    results[name] = res
    print("\n".join(res.lines()))
    fig = res.plot()
    save(fig, f"05_{name}.png")
    return res


# %% [markdown]
# ## 1. Propagation of chaos in tokens
#
# `N` tokens drawn i.i.d. from `mu_0` move under the attention field of their own empirical
# measure; the mean-field (McKean–Vlasov) limit moves them under the field of the limit law
# `mu_t`. Started from the same points (synchronous coupling), the two trajectories stay
# within `eps_N`; so does the Wasserstein distance of the laws.

# %%
chaos = show("chaos-tokens")

# %% [markdown]
# In time: the coupling gap `max_i |x_i^N(t) - xbar_i(t)|` grows from 0 (the two systems start
# at the same points) and stays ordered by `N` at every time.

# %%
fig, ax = plt.subplots(figsize=(5.2, 3.6))
for n, row in zip(chaos.data["N"], chaos.data["gap_t"], strict=True):
    ax.plot(chaos.data["t"], row, label=f"N = {n}")
ax.set_yscale("log")
ax.set_xlabel("time t")
ax.set_ylabel("coupling gap (mean over seeds)")
ax.set_title("Tokens against their mean-field limit, in time")
ax.legend(fontsize=7)
fig.tight_layout()
save(fig, "05_chaos-tokens_time.png")

# %% [markdown]
# ## 2. Law of large numbers over heads
#
# `H` heads drawn i.i.d. from the head law `rho` against the `rho`-averaged velocity field:
# the trajectories differ by `O(H^(-1/2) sqrt(log H))`, uniformly in time, and the fields
# themselves converge uniformly over a ball.

# %%
heads = show("heads-lln")

# %% [markdown]
# ## 3. Depth and heads together, during AdamW training
#
# Hidden states and back-propagated variables of an `L`-layer, `H`-head model trained with
# AdamW against the forward–backward ODE limit: the error against `L` (at many heads) and
# against `H` (at fixed depth).

# %%
depth = show("depth-heads")

# %% [markdown]
# ## 4. Mean-field Langevin for one attention layer
#
# The single-layer risk is convex along linear interpolations of head measures (Prop. 8.2),
# and with a log-Sobolev inequality (Assumption 6) the noisy particle gradient flow with weight
# decay converges exponentially to the Gibbs state: the free energy at the rate
# `exp(-2 beta lambda_LSI s)` of eq. 28. Assumption 6 is proved here for heads that train
# their query scale only (Bakry–Émery and Holley–Stroock); for full `(q, k, v)` heads it is
# not, and their convergence is an observation.

# %%
langevin = show("langevin")

# %% [markdown]
# The free energy, where the log-Sobolev constant is proved: runs with independent noise at
# three temperatures, against the proved rate `2 max(kappa, lam e^(-omega/beta))` (dashed) and
# against the temperature-free reading `2 beta kappa` (dotted), which the data refute at
# `beta = 4`. The decay rate does not depend on the temperature.

# %%
fe = langevin.data["free_energy"]
fig, ax = plt.subplots(figsize=(5.6, 3.8))
for k, (b, row) in enumerate(zip(fe["betas"], fe["gap_mean"], strict=True)):
    ax.semilogy(fe["times"], row, "o-", color=f"C{k}", label=f"beta = {b:g}")
    r, rb = fe["proved_rates"][str(float(b))], 2 * b * fe["kappa"]
    ax.semilogy(fe["times"], [row[0] * np.exp(-r * (t - fe["times"][0])) for t in fe["times"]], "--", color=f"C{k}",
                lw=0.8, label=f"proved rate {r:.2f}")
    ax.semilogy(fe["times"], [row[0] * np.exp(-rb * (t - fe["times"][0])) for t in fe["times"]], ":", color=f"C{k}",
                lw=0.8, label=f"2 beta kappa = {rb:.2f}")
ax.set_xlabel("training time s")
ax.set_ylabel("F_beta(rho_s) - F_beta(rho*) (mean over seeds)")
ax.set_title("Free-energy decay (query-scale heads, independent noise)", fontsize=9)
ax.legend(fontsize=6, ncol=3)
fig.tight_layout()
save(fig, "05_langevin_free_energy.png")

# %% [markdown]
# For `(q, k, v)` heads, in time, at one temperature: two runs from different initial laws
# driven by the same Brownian increments forget where they started (the noise cancels in
# their difference, so this contraction says nothing about the temperature dependence of
# eq. 28); their observables meet the stationary values computed independently by
# quadrature of the Gibbs fixed point (dotted).

# %%
cur = langevin.data["curves_beta_fit"]
gibbs = langevin.data["gibbs"][f"{langevin.data['beta_fit']:g}"] if f"{langevin.data['beta_fit']:g}" in \
    langevin.data["gibbs"] else None
fig, axes = plt.subplots(1, 2, figsize=(9.2, 3.6))
axes[0].semilogy(cur["times"], cur["coupling"], color="C0", label="distance between the two runs")
axes[0].set_xlabel("training time s")
axes[0].set_ylabel("coupling distance (shared noise)")
axes[0].legend(fontsize=7)
for k, run in enumerate(cur["mean_output"]):
    axes[1].plot(cur["times"], run, color=f"C{k}", label=f"mean output, start {k + 1}")
if gibbs is not None:
    axes[1].axhline(gibbs["mean_output"], color="k", ls=":", label="Gibbs fixed point (quadrature)")
axes[1].set_xlabel("training time s")
axes[1].set_ylabel("mean output on the probe tokens")
axes[1].legend(fontsize=7)
fig.suptitle(f"Mean-field Langevin at temperature beta = {langevin.data['beta_fit']:g}", fontsize=10)
fig.tight_layout()
save(fig, "05_langevin_time.png")

# %% [markdown]
# ## 5. Token concentration at low temperature
#
# At inverse temperature `beta`, tokens quickly concentrate on the push-forward of their
# initial law under a projection set by the key, query and value matrices, stay there for
# times of order `log beta`, and then enter a terminal phase driven by the value matrix.

# %%
lowtemp = show("low-temperature")

# %% [markdown]
# In time: `W_2` to the projected law first falls with the zero-temperature flow (black),
# stays low through a window that lengthens with `beta`, and then rises in the terminal phase
# the value matrix drives.

# %%
fig, ax = plt.subplots(figsize=(5.2, 3.6))
for b, row in zip(lowtemp.data["betas"], lowtemp.data["W2_geomean"], strict=True):
    ax.plot(lowtemp.data["t"], row, label=f"beta = {b:g}")
ax.plot(lowtemp.data["t"], lowtemp.data["zero_temperature_W2"], "k--", label="zero temperature (closed form)")
ax.set_yscale("log")
ax.set_xlabel("time t")
ax.set_ylabel("W_2(mu_t, P # mu_0) (geometric mean over seeds)")
ax.set_title("Concentration, metastability, terminal phase")
ax.legend(fontsize=7)
fig.tight_layout()
save(fig, "05_low-temperature_time.png")

# %% [markdown]
# ## 6. Stability constants of the well-posedness theorems
#
# The token flow depends Lipschitz-continuously on its initial law (Thm. 4.1) and on its head
# law (Cor. 5.2), and so does the gradient of the training objective (Thm. 6.2), with
# constants built from the a-priori bounds of Lemmas 3.1-3.2. The experiment searches for the
# worst ratio on random problems (the exact worst case of small moves, from the flow's
# Jacobians) and divides it by the theorem's constant.

# %%
stability = show("stability")

# %%
kinds = ["initial", "head", "gradient"]
labels = ["Thm. 4.1\ninitial law", "Cor. 5.2\nhead law", "Thm. 6.2\ngradient"]
fig, ax = plt.subplots(figsize=(5.6, 3.6))
x = np.arange(len(kinds))
ax.bar(x - 0.2, [stability.data["worst"][k] for k in kinds], width=0.4, label="worst ratio found")
ax.bar(x + 0.2, [stability.data["constants"][k] for k in kinds], width=0.4, label="theorem's constant")
ax.set_xticks(x, labels, fontsize=8)
ax.set_yscale("log")
ax.set_ylabel("Lipschitz constant")
ax.set_title("The constants hold, loose by 4 to 10 orders of magnitude", fontsize=9)
ax.legend(fontsize=7)
fig.tight_layout()
save(fig, "05_stability_constants.png")

# %% [markdown]
# ## 7. Joint fluctuations in tokens and heads
#
# The seed proves the token and the head limits one at a time and leaves their joint
# fluctuations open. Measured: the mean-square error of the mean token over a grid of
# `(N, H)`, against the doubly mean-field limit; the edges `H = inf` and `N = inf` against the
# CLT scaling `1/N`, `1/H` (a conjecture, not a theorem).

# %%
joint = show("joint-fluctuations")

# %% [markdown]
# The surface (left: each row a token count, against `H`; the last row is `N = inf`) and the
# scaled fluctuations at the largest sizes against a Gaussian of the same variance (right).

# %%
Ns, Hs = joint.data["Ns"], joint.data["Hs"]
mse = np.array([[[np.nan if v is None else v for v in row] for row in s] for s in joint.data["mse"]], dtype=float)
logs = np.log(mse)  # nan where a seed has no value
seen = np.sum(~np.isnan(logs), axis=0)  # geometric mean over the seeds that have one, nan where none has
gm = np.exp(np.where(seen > 0, np.nansum(logs, axis=0) / np.maximum(seen, 1), np.nan))
fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8))
for i, n in enumerate([*Ns, "inf"]):
    axes[0].loglog(Hs, gm[i, :-1], "o-", label=f"N = {n}")
axes[0].set_xlabel("heads H")
axes[0].set_ylabel("E (mean token - limit)^2")
axes[0].set_title("error surface over (N, H)")
axes[0].legend(fontsize=6)
for k, (name, sample) in enumerate(joint.data["samples"].items()):
    z = np.asarray(sample) / np.std(sample)
    axes[1].hist(z, bins=20, density=True, histtype="step", color=f"C{k}",
                 label=f"{name} (p = {joint.data['gaussian_p'][name]:.2f})")
t = np.linspace(-4, 4, 200)
axes[1].plot(t, np.exp(-t * t / 2) / np.sqrt(2 * np.pi), "k:", label="N(0, 1)")
axes[1].set_xlabel("standardised fluctuation")
axes[1].set_ylabel("density")
axes[1].set_title("scaled fluctuations vs N(0, 1)")
axes[1].legend(fontsize=7)
fig.tight_layout()
save(fig, "05_joint-fluctuations_surface.png")

# %% [markdown]
# ## Summary

# %%
for name, res in results.items():
    print(f"{name:18s} {res.verdict:13s} " + "; ".join(
        f"{f.variable}: {f.slope:+.2f} [{f.ci[0]:+.2f}, {f.ci[1]:+.2f}] vs {f.theorem}" for f in res.fits))
all_ran = set(results) == set(EXPERIMENTS)
none_inconsistent = all(res.verdict != "inconsistent" for res in results.values())
all_consistent = all(res.verdict == "consistent" for res in results.values())
