"""References for the Gram's tests, written without ntkcheck's kernels: the attention output and
its central differences in ``V``, the features by their definition, small random samples, and
symmetric work arrays built from a formed matrix.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import softmax

from ntkcheck.cgf import as_laws
from ntkcheck.ntk.gram_matrix.cholesky import SymmetricWork

# float64 evaluations of the same softmax means by two routes (batched matmul vs
# cgf_gradient): a few ulps times O(1) conditioning.
RTOL_FEATURES = 1e-12


def _random(n=3, N=3, d=2, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N + (i % 2), d)) for i in range(n)]


def _attention_output(samples, Q, b, V):
    """Multi-head attention at one layer, written independently of ntkcheck.ntk.gram_matrix.pipeline:
    y_ij = (1/H) sum_h V_h softmax_k(<Q_h x_ij + b_h, x_ik>) x_ik (seed 003 eq. 1)."""
    H = Q.shape[0]
    out = []
    for X in samples:
        for x in X:
            acc = np.zeros(X.shape[1])
            for h in range(H):
                pi = softmax(X @ (Q[h] @ x + b[h]))
                acc += V[h] @ (pi @ X)
            out.append(acc / H)
    return np.concatenate(out)


def _fd_jacobian_in_V(S, heads, step=1e-3):
    """Central differences of the attention output in every V_h entry at V = 0: (M d) x (H d^2)."""
    H, d = heads.count, heads.dim
    M = sum(len(X) for X in S)
    P = H * d * d
    J = np.empty((M * d, P))
    for k in range(P):
        E = np.zeros(P)
        E[k] = step
        J[:, k] = (_attention_output(S, heads.Q, heads.b, E.reshape(H, d, d))
                   - _attention_output(S, heads.Q, heads.b, -E.reshape(H, d, d))) / (2 * step)
    return J


def _reference_features(samples, Q, b):
    """F by the definition, one slot and one head at a time, independent of the tiled
    kernel: F[(i, j), h d:(h+1) d] = sqrt(1/(N_i H)) softmax_k(<Q_h x_ij + b_h, x_ik>) @ X_i
    (scipy's softmax max-shifts)."""
    H = Q.shape[0]
    rows = []
    for X in samples:
        for x in X:
            rows.append(np.concatenate([softmax(X @ (Q[h] @ x + b[h])) @ X for h in range(H)])
                        * np.sqrt(1.0 / (len(X) * H)))
    return np.array(rows)


def _laws(n, N, d, seed):
    rng = np.random.default_rng(seed)
    return as_laws([rng.standard_normal((N, d)) / math.sqrt(d) for _ in range(n)])


def _work(G: np.ndarray) -> SymmetricWork:
    return SymmetricWork(np.asfortranarray(np.tril(G)))


def _gram_of(F: np.ndarray) -> np.ndarray:
    return F @ F.T
