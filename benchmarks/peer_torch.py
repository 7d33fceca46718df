"""The peer of ``bench_gram.py``: the same NTK Gram by autodiff, ``torch.func.jacrev`` (float64).

Run by ``bench_gram.py`` in its own process (torch's thread pool slows numpy's LAPACK when both
are loaded in one process). Reads ``X (n, N, d)``, ``Q (H, d, d)``, ``b (H, d)`` from an ``.npz``,
prints one JSON line: the seconds for the Jacobian, ``J J^T`` and ``eigvalsh``, and the extreme
eigenvalues (compared by the caller with ``ntkcheck.gram``).

What a torch.func user computes: the attention output at FixUp, ``out_i(x) = sum_h V_h
softmax(<Q_h x + b_h, x_k>)_k x_k / sqrt(H)`` weighted by ``sqrt(1/N)``, its Jacobian in ``V`` by
``jacrev``, the Gram ``J J^T`` and its spectrum. The NTK is ``(F F^T) (x) I_d`` (one copy per
output coordinate), so the Jacobian of output coordinate 0 in the first rows of the ``V_h``
(``M x H d``) is enough: the full one is ``d^2`` times larger (34 GB at ``M = 4096``).
Not a dependency of ntkcheck: ``pip install torch`` (CPU wheel) only to run this benchmark.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
from torch.func import jacrev


def main(path: str) -> None:
    z = np.load(path, allow_pickle=False)
    X = torch.from_numpy(z["X"])
    Q = torch.from_numpy(z["Q"])
    b = torch.from_numpy(z["b"])
    n, N, d = X.shape
    H = Q.shape[0]

    def out0(v0: torch.Tensor) -> torch.Tensor:  # v0 (H, d): the first rows of the V_h
        q = torch.einsum("hcd,njd->njhc", Q, X) + b  # queries (n, N, H, d)
        s = torch.einsum("njhc,nkc->njhk", q, X)  # scores against the sample's tokens
        p = torch.softmax(s, dim=-1)
        phi = torch.einsum("njhk,nkc->njhc", p, X)  # softmax means (n, N, H, d)
        o = torch.einsum("hc,njhc->nj", v0, phi) / np.sqrt(H * N)
        return o.reshape(n * N)

    v0 = torch.zeros(H, d, dtype=torch.float64)
    t0 = time.perf_counter()
    J = jacrev(out0)(v0).reshape(n * N, H * d)
    t1 = time.perf_counter()
    G = J @ J.T
    t2 = time.perf_counter()
    ev = torch.linalg.eigvalsh(G)
    t3 = time.perf_counter()
    print(json.dumps({"jacobian_s": t1 - t0, "product_s": t2 - t1, "eigvalsh_s": t3 - t2, "total_s": t3 - t0,
                      "lambda_min": float(ev[0]), "lambda_max": float(ev[-1]), "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main(sys.argv[1])
