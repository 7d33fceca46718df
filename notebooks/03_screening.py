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
# # 03 — Screening token data at FixUp initialisation
#
# `ntkcheck.screening` answers, for a set of token samples, everything the seeds let us say
# before training: are the CGFs weakly / strongly independent (with certificates), is the
# NTK Gram at FixUp positive for the heads we would draw, does that agree with Prop. 8,
# and what linear rate would seed 002 Thm. 8.5 promise.
#
# 1. the bundled example dataset (random token sets plus one dependent construction);
# 2. a token file of your own (here: written to a temporary directory first);
# 3. what changes with the initialisation scales of `Q` and `b`.
#
# Set `NTKCHECK_NOTEBOOK_SMALL=1` for the small sizes the test suite uses.

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
import tempfile
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ntkcheck.cli import main as ntkcheck_cli
from ntkcheck.errors import NtkcheckWarning
from ntkcheck.io.files import bundled_path, load_samples
from ntkcheck.screening import plot_report, screen

# %% [markdown]
# ## 1. The bundled dataset
#
# `ntkcheck screen` with no path screens this file. Four random token sets and a
# product construction (samples 4-6: `Lambda_6 = Lambda_4 + Lambda_5`, sharing an atom).
# The report shows both outcomes of Prop. 8: the whole dataset is dependent with overlap
# (Gram singular, predicted kernel vector annihilated), the samples outside the
# dependency are independent (Gram positive).

# %%
bundled = load_samples(bundled_path())
bundled_report = screen(spectrum="full")  # no data: the bundled example; every eigenvalue, for the plot
print(bundled_report.table())  # ends with the bottom line: the data, the verdict for training, what next

# %%
# The same report as a figure: the Gram spectrum, and the CGFs modulo affine functions
# with the certified dependency drawn in black (zero, as the certificate says).
fig = plot_report(bundled_report, bundled)
save(fig, "03_screen_report.png")

# %% [markdown]
# ## 2. Your own tokens
#
# A token file is a `.npy` of shape `(n, N, d)`, a `.npz` or `.safetensors` with arrays
# `sample_0`, `sample_1`, ... (ragged allowed), a `.pt` (with torch) or a `.csv` with
# columns `sample,token,x0,...` (one row per token). Here: six samples of 3-D tokens of different lengths,
# drawn from a density — Prop. 10 says they should come out strongly independent.
# From a shell the same thing is `ntkcheck screen my_tokens.npz` (`--json` for one JSON
# object, `--plot FILE.png` for the spectrum and the CGF curves).

# %%
rng = np.random.default_rng(2024)
lengths = [4, 5, 6, 4, 5, 6] if SMALL else [8, 10, 12, 9, 11, 8, 10, 12]
mine = {f"sample_{i}": rng.uniform(-1.0, 1.0, (N, 3)) for i, N in enumerate(lengths)}
workdir = Path(tempfile.mkdtemp(prefix="ntkcheck-notebook-"))
token_file = workdir / "my_tokens.npz"
np.savez(token_file, **mine)

user_samples = load_samples(token_file)
user_report = screen(user_samples, seed=1, head_law_seconds=5 if SMALL else 20)
print(user_report.table())

# %% [markdown]
# The Gram above is that of the heads drawn (`head count`: from the span of the atoms, doubled
# until certified). Seed 003 Prop. 8 is about the NTK of the head law, `K_rho` (infinitely many
# heads): the `head law (H = inf)` lines bound `lambda_min(K_rho)` with probability at least
# `1 - delta` over further heads drawn (theory/ntk-head-law.md). Training a model with these
# heads sees the draw's `lambda_0`; the mean-field limit sees `K_rho`.

# %%
print("\n".join(user_report.head_law.report_lines()))

# %%
# The CLI on the same file, in-process (exactly what `ntkcheck screen FILE` prints).
exit_code = ntkcheck_cli(["screen", str(token_file), "--seed", "1", "--no-certify", "--head-law-seconds", "2"])
print("exit code", exit_code)

# %% [markdown]
# ## 3. Initialisation scales of `Q` and `b`
#
# The feature of head `(Q, b)` is the softmax-weighted mean of the context with scores
# `<Q x + b, y>`. With `Q = 0` it does not depend on the query token `x`: any adjoint
# that sums to zero within a sample is in the kernel, whatever the data (Prop. 8 needs
# the support of the head law to contain an open set of `(Q, b)`). Small scales give
# nearly uniform attention and a Gram that is positive but badly conditioned — at
# `q_scale = 0.03` too badly for float64 to claim positivity (status "small"; `certify=True`
# would settle it in Arb). Sharper attention (larger `Q`) helps, especially in small
# dimension (theory/certificates.md, "The Gram matrix"); the `b` scale matters much less.

# %%
q_scales = [0.0, 0.1, 0.3, 1.0, 3.0] if SMALL else [0.0, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]
b_scales = [0.0, 1.0, 3.0] if SMALL else [0.0, 0.3, 1.0, 3.0]
rel = np.zeros((len(b_scales), len(q_scales)))
status = {}
for ib, bs in enumerate(b_scales):
    for iq, qs in enumerate(q_scales):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NtkcheckWarning)
            r = screen(user_samples, q_scale=qs, b_scale=bs, seed=1, certify=False, head_law_seconds=0)
        rel[ib, iq] = r.gram.relative_lambda_min
        status[(qs, bs)] = r.gram.status
for ib, bs in enumerate(b_scales):
    print(f"b_scale {bs:>4}: " + "  ".join(f"q={qs:<5g}{rel[ib, iq]:.1e} ({status[(qs, bs)]})"
                                            for iq, qs in enumerate(q_scales)))

fig, ax = plt.subplots(figsize=(6, 4))
qpos = [max(q, 0.01) for q in q_scales]  # q = 0 drawn at the left edge of the log axis
for ib, bs in enumerate(b_scales):
    ax.loglog(qpos, np.maximum(rel[ib], 1e-40), "o-", label=f"b_scale {bs:g}")
ax.axhline(1e-12, color="r", ls="--", lw=0.8, label="positivity threshold")
ax.set_xlabel("q_scale (q = 0 drawn at 0.01)")
ax.set_ylabel("lambda_min / lambda_max of the Gram")
ax.set_title("Gram conditioning against the init scales (your tokens)")
ax.legend(fontsize=8)
fig.tight_layout()
save(fig, "03_init_scales.png")

# %% [markdown]
# ## Summary
#
# What the test suite checks: the bundled data show both outcomes of Prop. 8 and agree
# with it; your tokens are independent with a positive Gram; `Q = 0` is singular at
# every `b` scale, no `Q > 0` scale is singular, and from `q_scale = 0.1` on the Gram is
# positive in float64 alone.

# %%
bundled_ok = (
    bundled_report.weak.verdict.value == "dependent"
    and bundled_report.crosscheck.agreement == "agrees"
    and bundled_report.complement is not None
    and bundled_report.complement.agreement == "agrees"
)
user_ok = user_report.weak.verdict.value == "independent" and user_report.gram.positive
q_zero_singular = all(status[(0.0, bs)] != "positive" for bs in b_scales)
# q > 0 is never singular; from q = 0.1 on float64 alone establishes positivity (below, the
# Gram is positive but "small": only certify=True, in Arb, would claim it)
q_positive_ok = all(status[(qs, bs)] != "below resolution" for qs in q_scales if qs > 0 for bs in b_scales) and all(
    status[(qs, bs)] == "positive" for qs in q_scales if qs >= 0.1 for bs in b_scales
)
print("bundled:", bundled_ok, " yours:", user_ok, " Q = 0 singular:", q_zero_singular,
      " Q > 0 positive:", q_positive_ok)
