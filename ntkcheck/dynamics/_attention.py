r"""The deep attention model on empirical laws: batch, forward pass, adjoint, NTK pieces.

Private to :mod:`ntkcheck.dynamics`; :mod:`~ntkcheck.dynamics.model` and :mod:`~ntkcheck.dynamics.flow`
document the model and the normalisations.
What lives here and why (derivations in ``theory/flow-numerics.md``):

* **Atoms with masses.** A sample is its empirical law :math:`\mu_i=\sum_a m_a\delta_{x_a}`
  (:class:`ntkcheck.cgf.empirical.Empirical`). Two copies of one token have the same position
  at every layer (the model is a function of the token and of the law), so the forward
  pass runs on the distinct atoms, with the masses entering the softmax as log-offsets,
  :math:`\mathrm{softmax}_a(\langle q, x_a\rangle + \log m_a)`, which is exactly the
  token-level softmax with the copies summed. The per-token loss weights an atom by its
  mass; the NTK is then the operator on :math:`L^2(\mu_i)` (seed 003 section 3), with no
  spurious zero eigenvalues from copies.
* **Large products.** Heads are folded into the rows of the matrices (``(S H, d)`` per
  sample, adjoint seeds too), so every step is a handful of GEMMs batched over samples
  instead of one tiny product per (seed, sample, head).
* **The NTK over all parameters** is :math:`K = m\,W^{1/2}(J_VJ_V^T + J_QJ_Q^T + J_bJ_b^T)W^{1/2}`.
  The ``V`` part is assembled by the kernel trick
  :math:`\langle\partial_V z_\alpha,\partial_V z_\beta\rangle = c^2\sum
  \Phi[(l,s),(l',s')]\langle G^l_\alpha[s], G^{l'}_\beta[s']\rangle` with :math:`\Phi` the
  Gram of the head outputs summed over heads (no ``(rows, H d^2)`` Jacobian); the
  ``Q, b`` parts from per-sample gradients.
* **At FixUp** the Jacobian is :math:`J_0\,\delta V = c\sum_{l,h}\delta V_{l,h}\phi_{l,h}`
  (features :math:`\phi = \nabla\Lambda_{\mu_i}(Q_h x + b_h)`), so
  :math:`B = \sqrt m W^{1/2}J_0` is a small matrix ``Fw`` of shape ``(rows, L_f H d)`` acting
  on ``V`` and :math:`K_0 = BB^T = (F_wF_w^T)\otimes I_d`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validate import as_token_set
from ..cgf import Empirical, as_laws
from ..errors import DomainError, InputError
from . import _sizes

#: the dense NTK (rows x parameters of Q and b) is assembled only below this many bytes
NTK_MEMORY = 1 << 30


# ----------------------------------------------------------------------------- batch


def _laws_and_maps(samples: Any) -> tuple[list[Empirical], list[np.ndarray]]:
    """The laws of the samples and, per sample, the atom index of each given token.

    A sample given as an :class:`Empirical` has its atoms as tokens (identity map).
    """
    laws = as_laws(samples)
    if isinstance(samples, Empirical):
        seq: list[Any] = [samples]
    else:
        seq = list(samples)
    maps = []
    for item, law in zip(seq, laws, strict=True):
        if isinstance(item, Empirical):
            maps.append(np.arange(law.n_atoms))
            continue
        x = np.ascontiguousarray(as_token_set(item), dtype=np.float64) + 0.0  # -0.0 -> 0.0, as Empirical does
        index = {row.tobytes(): a for a, row in enumerate(np.ascontiguousarray(law.atoms))}
        maps.append(np.fromiter((index[row.tobytes()] for row in x), dtype=np.intp, count=x.shape[0]))
    return laws, maps


@dataclass(frozen=True)
class _Batch:
    """Distinct atoms of every sample, padded to a common count ``S``.

    Padded atoms have mass 0 (bias ``-inf``): they never enter a softmax, and their
    adjoints stay exactly zero.
    """

    X: np.ndarray  # (n, S, d) atoms, zeros in the padding
    mask: np.ndarray  # (n, S) bool, True on real atoms
    counts: np.ndarray  # (n,) number of distinct atoms
    masses: np.ndarray  # (n, S) float masses (sum 1 per sample), 0 on padding
    bias: np.ndarray  # (n, 1, S): log mass on atoms, -inf on padding
    tokens: tuple[np.ndarray, ...]  # per sample: atom index of each given token

    @staticmethod
    def of(samples: Any) -> _Batch:
        laws, maps = _laws_and_maps(samples)
        n, d = len(laws), laws[0].dim
        S = max(law.n_atoms for law in laws)
        X = np.zeros((n, S, d))
        mask = np.zeros((n, S), dtype=bool)
        masses = np.zeros((n, S))
        for i, law in enumerate(laws):
            X[i, : law.n_atoms] = law.atoms
            mask[i, : law.n_atoms] = True
            masses[i, : law.n_atoms] = law.masses
        with np.errstate(divide="ignore"):
            bias = np.where(mask, np.log(np.where(mask, masses, 1.0)), -np.inf)[:, None, :]
        return _Batch(X, mask, mask.sum(axis=1), masses, bias, tuple(maps))

    @property
    def n_tokens(self) -> np.ndarray:
        return np.array([len(t) for t in self.tokens])

    def unpad(self, X: np.ndarray) -> list[np.ndarray]:
        """Per-sample atom arrays from a padded ``(n, S, d)`` array."""
        return [X[i, : self.counts[i]].copy() for i in range(X.shape[0])]

    def expand(self, X: np.ndarray) -> list[np.ndarray]:
        """Per-sample arrays over the given tokens (copies of an atom get its row)."""
        return [X[i, self.tokens[i]] for i in range(X.shape[0])]


def _check_layers(params: Any, layers: int) -> None:
    if params.per_layer and params.V.shape[0] != layers:
        raise InputError(f"per-layer parameters have {params.V.shape[0]} layers, the model has layers={layers}")


def _at(a: np.ndarray, params: Any, k: int) -> np.ndarray:
    return a[k] if params.per_layer else a


@dataclass
class _Cache:
    Xs: list[np.ndarray] = field(default_factory=list)  # X^k, (n, S, d), k = 0..L
    As: list[np.ndarray] = field(default_factory=list)  # queries Q_h x + b_h, (n, S H, d), rows (atom, head)
    Ps: list[np.ndarray] = field(default_factory=list)  # softmax weights, (n, S H, S)
    Ms: list[np.ndarray] = field(default_factory=list)  # grad Lambda (head outputs before V), (n, S H, d)


# ----------------------------------------------------------------------------- forward / adjoint


def _forward(batch: _Batch, params: Any, layers: int, T: float, keep: bool) -> tuple[np.ndarray, _Cache]:
    """``L`` Euler layers on the atoms; rows of the per-sample matrices are (atom, head)."""
    _check_layers(params, layers)
    H, d = params.heads, params.dim
    n, S, _ = batch.X.shape
    c = T / (layers * H)
    X = batch.X
    cache = _Cache()
    for k in range(layers):
        Q, V, b = _at(params.Q, params, k), _at(params.V, params, k), _at(params.b, params, k)
        # all heads' queries as one GEMM against the stacked (d, H d) matrix; rows (s, h)
        A = (X.reshape(n * S, d) @ Q.reshape(H * d, d).T + b.reshape(H * d)).reshape(n, S * H, d)
        P = A @ X.transpose(0, 2, 1)  # (n, S H, S) scores
        P += batch.bias  # log masses: softmax over atoms == softmax over tokens
        P -= P.max(axis=-1, keepdims=True)  # max-shift: scores of any size stay finite
        np.exp(P, out=P)
        P /= P.sum(axis=-1, keepdims=True)
        M = P @ X  # (n, S H, d): grad Lambda_mu(Q_h x + b_h)
        U = M.reshape(n * S, H * d) @ V.transpose(0, 2, 1).reshape(H * d, d)
        if keep:
            cache.Xs.append(X)
            cache.As.append(A)
            cache.Ps.append(P)
            cache.Ms.append(M)
        X = X + c * U.reshape(n, S, d)
    if keep:
        cache.Xs.append(X)
    return X, cache


@dataclass(frozen=True)
class _Grads:
    """Parameter gradients with a leading seed axis ``B``, or ``(n, B)`` per sample.

    Shapes: ``V, Q``: (B, [L,] H, d, d) or (n, B, [L,] H, d, d); ``b`` likewise without the
    last axis. ``adjoints[k]`` is the adjoint of ``X^{k+1}`` (the one that multiplies
    layer ``k``'s head outputs), (B, n, S, d).
    """

    V: np.ndarray | None
    Q: np.ndarray | None
    b: np.ndarray
    adjoints: list[np.ndarray]
    dA: np.ndarray | None = None  # per sample, shared heads, want_Q=False: (n, B, L S, H d) query adjoints
    Xcat: np.ndarray | None = None  # ... and the layer inputs (n, L S, d): gQ = dA^T Xcat per head


def _backward(
    cache: _Cache, params: Any, layers: int, T: float, G: np.ndarray, *, per_sample: bool = False,
    want_V: bool = True, keep_adjoints: bool = False, want_Q: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | _Grads:
    """Discrete adjoint of :func:`_forward` (backpropagation through the Euler layers).

    ``G``: (B, n, S, d), B adjoint seeds at the last layer. Without options returns the
    summed parameter gradients ``(gV, gQ, gb)`` of shapes (B, [L,] H, d, d) and (B, [L,] H, d);
    with ``per_sample``/``want_V``/``keep_adjoints`` a :class:`_Grads` (per sample: no sum
    over samples, leading axes ``(n, B)``).
    """
    H, d = params.heads, params.dim
    B, n, S, _ = G.shape
    c = T / (layers * H)
    lead = (n, B) if per_sample else (B,)
    shape = lead + ((layers,) if params.per_layer else ())
    gV = np.zeros(shape + (H, d, d)) if want_V else None
    stack = per_sample and not params.per_layer
    gQ = np.zeros(shape + (H, d, d)) if want_Q or not stack else None
    gb = np.zeros(shape + (H, d))
    adjoints: list[np.ndarray] = [np.empty(0)] * layers
    # per sample, shared heads: dL/dQ_h = sum_l dA_l^T X_l is one product over (layer, atom)
    dA_all = np.empty((n, B, layers * S, H * d)) if stack else None
    for k in range(layers - 1, -1, -1):
        X, A, P, M = cache.Xs[k], cache.As[k], cache.Ps[k], cache.Ms[k]
        Q, V = _at(params.Q, params, k), _at(params.V, params, k)
        if keep_adjoints:
            adjoints[k] = G
        sl = (slice(None),) * len(lead) + ((k,) if params.per_layer else ())
        if gV is not None:
            # dL/dV_h[a, e] = c sum_{i,s} G[i,s,a] M_h[i,s,e]: one GEMM over the atoms
            if per_sample:
                g = np.matmul(G.transpose(1, 0, 3, 2).reshape(n, B * d, S), M.reshape(n, S, H * d))
                gV[sl] += c * g.reshape(n, B, d, H, d).transpose(0, 1, 3, 2, 4)
            else:
                g = G.reshape(B, n * S, d).transpose(0, 2, 1).reshape(B * d, n * S) @ M.reshape(n * S, H * d)
                gV[sl] += c * g.reshape(B, d, H, d).transpose(0, 2, 1, 3)
        # adjoint of the head outputs: Gm[s, h] = c V_h^T G[s] (row vector G[s] times V_h)
        Gm = (G.reshape(B * n * S, d) @ (c * V.transpose(1, 0, 2).reshape(d, H * d))).reshape(B, n, S * H, d)
        if B > 1:
            Gm = np.ascontiguousarray(Gm.transpose(1, 0, 2, 3))  # (n, B, S H, d)
        else:
            Gm = Gm.reshape(n, 1, S * H, d)
        # softmax adjoint: dS_qk = P_qk (<Gm_q, x_k> - <Gm_q, M_q>)
        dS = (Gm.reshape(n, B * S * H, d) @ X.transpose(0, 2, 1)).reshape(n, B, S * H, S)
        dS -= np.einsum("nbqd,nqd->nbq", Gm, M)[..., None]
        dS *= P[:, None]
        dA = (dS.reshape(n, B * S * H, S) @ X).reshape(n, B, S, H * d)  # adjoint of the queries
        if stack:
            assert dA_all is not None
            dA_all[:, :, k * S : (k + 1) * S] = dA
            gb += dA.sum(axis=2).reshape(n, B, H, d)
        elif per_sample:
            gQ[sl] += np.matmul(dA.transpose(0, 1, 3, 2), X[:, None]).reshape(n, B, H, d, d)
            gb[sl] += dA.sum(axis=2).reshape(n, B, H, d)
        else:
            gq = X.reshape(n * S, d).T @ dA.transpose(1, 0, 2, 3).reshape(B, n * S, H * d)  # (B, d_e, H d_c)
            gQ[sl] += gq.reshape(B, d, H, d).transpose(0, 2, 3, 1)
            gb[sl] += dA.sum(axis=(0, 2)).reshape(B, H, d)
        # context derivative (through mu_l: the D_mu V . grad p mu term of seed 002 eq. 24):
        # through the softmax weights and through the scores, both summed over heads ...
        if B > 1:
            GmT = Gm.transpose(0, 2, 1, 3).reshape(n, S * H, B * d)
        else:
            GmT = Gm.reshape(n, S * H, d)
        dX = (P.transpose(0, 2, 1) @ GmT).reshape(n, S, B, d).transpose(2, 0, 1, 3)
        dX = dX + np.matmul(dS.transpose(0, 1, 3, 2), A[:, None]).transpose(1, 0, 2, 3)
        # ... and query derivative (through Q_h x + b_h)
        dX += (dA @ Q.reshape(H * d, d)).transpose(1, 0, 2, 3)
        G = G + dX
    if stack:
        assert dA_all is not None
        Xcat = np.concatenate(cache.Xs[:layers], axis=1)  # (n, L S, d), layer-major as dA_all
        if gQ is None:  # the caller forms the Q part head by head (memory: no (n, B, H d^2) array)
            return _Grads(gV, None, gb, adjoints, dA_all, Xcat)
        np.matmul(dA_all.transpose(0, 1, 3, 2), Xcat[:, None], out=gQ.reshape(n, B, H * d, d))
    if not (per_sample or keep_adjoints) and want_V:
        assert gV is not None and gQ is not None
        return gV, gQ, gb
    return _Grads(gV, gQ, gb, adjoints)


# ----------------------------------------------------------------------------- losses


def _targets_array(batch: _Batch, targets: Any, loss: str) -> tuple[np.ndarray, float]:
    """Targets on the atoms, and the part of the loss that no parameter can change.

    Token targets are averaged over the copies of each atom (their outputs are equal);
    the returned floor is :math:`\\frac1{2n}\\sum_i\\frac1{N_i}\\sum_j|y_{ij}-\\bar y_{a(j)}|^2`.
    """
    n, S, d = batch.X.shape
    if loss == "readout":
        y = np.asarray(targets, dtype=np.float64)
        if y.shape != (n, d):
            raise InputError(f"readout targets: expected shape ({n}, {d}) (one mean per sample), got {y.shape}")
        if not np.all(np.isfinite(y)):
            raise InputError("readout targets: have non-finite entries")
        return y, 0.0
    if isinstance(targets, np.ndarray) and targets.dtype != object and targets.ndim == 3:
        targets = list(targets)
    if not isinstance(targets, Sequence) or len(targets) != n:
        raise InputError(f"token targets: expected {n} arrays of shapes (N_i, {d}), got {type(targets).__name__}")
    Y = np.zeros((n, S, d))
    floor = 0.0
    for i, t in enumerate(targets):
        idx = batch.tokens[i]
        t = as_token_set(t, name=f"target {i}", dim=d)
        if t.shape[0] != idx.shape[0]:
            raise InputError(f"target {i}: has {t.shape[0]} tokens, sample {i} has {idx.shape[0]}")
        m = int(batch.counts[i])
        cnt = np.bincount(idx, minlength=m).astype(np.float64)
        mean = np.zeros((m, d))
        np.add.at(mean, idx, t)
        mean /= cnt[:, None]
        Y[i, :m] = mean
        if idx.shape[0] != m:  # copies: the spread of their targets is out of reach
            floor += 0.5 * float(np.sum((t - mean[idx]) ** 2)) / (n * idx.shape[0])
    return Y, floor


def _weights(batch: _Batch, loss: str) -> np.ndarray:
    """Loss weights of the outputs: (n, S) atom masses / n for tokens, (n,) ones for readout."""
    n = batch.X.shape[0]
    if loss == "readout":
        return np.ones(n)
    return batch.masses / n


def _outputs(batch: _Batch, XT: np.ndarray, loss: str) -> np.ndarray:
    if loss == "readout":
        return np.einsum("ns,nsd->nd", batch.masses, XT)
    return XT * batch.mask[..., None]


def _loss_value(batch: _Batch, z: np.ndarray, Y: np.ndarray, loss: str) -> tuple[float, np.ndarray]:
    """Loss (without the floor) and its adjoint seed dLoss/dx^L, (n, S, d)."""
    w = _weights(batch, loss)
    R = z - Y
    if loss == "readout":
        val = 0.5 * float(np.sum(w[:, None] * R * R))
        G = (w[:, None] * R)[:, None, :] * batch.masses[..., None]
    else:
        R = R * batch.mask[..., None]
        val = 0.5 * float(np.sum(w[..., None] * R * R))
        G = w[..., None] * R
    return val, np.ascontiguousarray(G)


def _loss_grad(batch: _Batch, params: Any, Y: np.ndarray, layers: int, T: float, loss: str) -> tuple[float, Any]:
    XT, cache = _forward(batch, params, layers, T, keep=True)
    val, G = _loss_value(batch, _outputs(batch, XT, loss), Y, loss)
    gV, gQ, gb = _backward(cache, params, layers, T, G[None])  # type: ignore[misc]
    return val, type(params)(gV[0], gQ[0], gb[0])


def _mobility(params: Any, layers: int, T: float) -> float:
    """Factor m in d theta/ds = -m grad Loss (module docstring of ntkcheck.dynamics.flow)."""
    return params.heads * layers / T if params.per_layer else float(params.heads)


def _displacement(params: Any, p0: np.ndarray, p: np.ndarray, layers: int, T: float) -> float:
    sq = float(np.sum((p - p0) ** 2))
    if params.per_layer:
        return math.sqrt(T * sq / (layers * params.heads))
    return math.sqrt(sq / params.heads)


# ----------------------------------------------------------------------------- NTK


def _rows_mask(batch: _Batch, loss: str) -> np.ndarray:
    """Which (sample, atom) rows are outputs: (n, S) for tokens, (n,) for readout."""
    return batch.mask if loss == "tokens" else np.ones(batch.X.shape[0], dtype=bool)


def _seeds(batch: _Batch, loss: str) -> np.ndarray:
    """Adjoint seeds whose per-sample gradients are the rows of :math:`W^{1/2}J`.

    Seed ``(s0, a)`` (tokens) or ``a`` (readout) acts on every sample at once; the gradient of
    sample ``i`` is row ``(i, s0, a)`` or ``(i, a)`` (samples never interact).
    """
    n, S, d = batch.X.shape
    w = _weights(batch, loss)
    if loss == "readout":
        seeds = np.zeros((d, n, S, d))
        for a in range(d):
            seeds[a, :, :, a] = np.sqrt(w)[:, None] * batch.masses
        return seeds
    seeds = np.zeros((S, d, n, S, d))
    for s0 in range(S):
        for a in range(d):
            seeds[s0, a, :, s0, a] = np.sqrt(w[:, s0])
    return seeds.reshape(S * d, n, S, d)


def ntk_dense_bytes(batch: _Batch, params: Any, loss: str) -> int:
    """Bytes of the per-sample ``Q`` Jacobian that :func:`_ntk_dense` holds."""
    n, S, d = batch.X.shape
    seeds = d if loss == "readout" else S * d
    return 8 * seeds * n * (params.Q.size + params.b.size)


def _ntk_dense(batch: _Batch, params: Any, layers: int, T: float, loss: str, cache: _Cache | None = None,
               memory: int | None = None) -> np.ndarray:
    """The NTK :math:`K = m W^{1/2} J J^T W^{1/2}` over all parameters, on the output rows."""
    memory = NTK_MEMORY if memory is None else memory
    need, S0 = ntk_dense_bytes(batch, params, loss), batch.X.shape[1]
    if need > memory:
        raise DomainError(f"the NTK over all parameters away from FixUp needs {need / 2**30:.1f} GiB "
                          f"(a Jacobian of the Q, b parameters per output row), over the {memory / 2**30:.1f} GiB "
                          "budget; use fewer samples or heads, the readout loss, or fewer NTK records (--ntk-records 0)")
    _sizes.check_ntk_work(*batch.X.shape, params.heads, layers, batch.X.shape[2] * (1 if loss == "readout" else S0))
    if cache is None:
        _, cache = _forward(batch, params, layers, T, keep=True)
    H, d = params.heads, params.dim
    n, S, _ = batch.X.shape
    c = T / (layers * H)
    seeds = _seeds(batch, loss)
    B = seeds.shape[0]
    g = _backward(cache, params, layers, T, seeds, per_sample=True, want_V=False, keep_adjoints=True,
                  want_Q=False)
    assert isinstance(g, _Grads)
    # Q and b parts: rows (sample, seed); the Q part head by head, K_Q = sum_h J_Qh J_Qh^T
    Jb = g.b.reshape(n * B, -1)
    K = Jb @ Jb.T
    if g.Q is not None:  # per-layer heads: the full per-sample Q gradient
        JQ = g.Q.reshape(n * B, -1)
        K += JQ @ JQ.T
    else:
        assert g.dA is not None and g.Xcat is not None
        LS = g.dA.shape[2]
        dA = g.dA.reshape(n, B, LS, H, d)
        for h in range(H):
            Ah = dA[:, :, :, h, :].transpose(0, 1, 3, 2).reshape(n, B * d, LS)  # rows (b, c)
            JQh = np.matmul(Ah, g.Xcat).reshape(n * B, d * d)  # row (i, b), column (c, e)
            K += JQh @ JQh.T
        del dA
    del Jb
    # V part by the kernel trick: Phi = Gram of the head outputs over (layer, atom), summed over heads
    Lc = layers
    Mc = np.stack([M.reshape(n, S, H * d) for M in cache.Ms])  # (L, n, S, H d)
    Mflat = Mc.transpose(1, 0, 2, 3).reshape(n * Lc * S, H * d)
    Phi = (Mflat @ Mflat.T).reshape(n, Lc, S, n, Lc, S)
    if params.per_layer:  # different layers, different V: no cross-layer terms
        Phi *= np.eye(Lc)[None, :, None, None, :, None]
    Gt = np.stack(g.adjoints)  # (L, B, n, S, d)
    del g
    Gi = np.ascontiguousarray(Gt.transpose(2, 1, 0, 3, 4)).reshape(n, B, Lc * S * d)  # per sample: (B, L S d)
    Gcols = np.ascontiguousarray(Gt.transpose(2, 0, 3, 1, 4)).reshape(n, Lc * S, B * d)  # per sample: (L S, B d)
    KV = np.empty((n, B, n, B))
    PhiM = Phi.reshape(n, Lc * S, n, Lc * S)
    for j in range(n):
        Yj = PhiM[:, :, j, :] @ Gcols[j]  # (n, L S, B d): Phi[(i, p), (j, q)] G_j[q, (b, c)]
        Yj = Yj.reshape(n, Lc * S, B, d).transpose(0, 1, 3, 2).reshape(n, Lc * S * d, B)
        KV[:, :, j, :] = np.matmul(Gi, Yj)  # (n, B, B)
    K += (c * c) * KV.reshape(n * B, n * B)
    K *= _mobility(params, layers, T)
    rows = _rows_mask(batch, loss)
    if loss == "tokens":
        keep = np.repeat(rows.reshape(n, S)[:, :, None], d, axis=2).reshape(-1)  # rows (i, s0, a)
        K = K[np.ix_(keep, keep)]
    return K


# ----------------------------------------------------------------------------- the linear part


@dataclass(frozen=True)
class _Linear:
    r"""The linearisation :math:`B = \sqrt m\,W^{1/2}J` at the initial parameters, and
    :math:`K = BB^T = k\otimes I_q` with the eigendecomposition of ``k``.

    FixUp form (``Fw`` given, ``q = d``): ``B`` reads the ``V`` part of a parameter vector,
    ``(B v)_{r,a} = sum_{(l,h,e)} Fw[r,(l,h,e)] V_{l,h}[a,e]``. Dense form (``Bd`` given,
    ``q = 1``): ``B = Bd``.
    """

    evals: np.ndarray  # (r,) ascending eigenvalues of k
    U: np.ndarray  # (r, r) eigenvectors (columns)
    q: int
    Fw: np.ndarray | None = None
    Bd: np.ndarray | None = None
    v_shape: tuple[int, ...] = ()

    @property
    def rows(self) -> int:
        return int(self.evals.shape[0])

    def apply(self, vec: np.ndarray) -> np.ndarray:
        """``B vec`` for a flat parameter vector; flat output vector (rows x q)."""
        if self.Bd is not None:
            return self.Bd @ vec
        assert self.Fw is not None
        nv = int(np.prod(self.v_shape))
        Lf, H, d = self.v_shape[0], self.v_shape[1], self.v_shape[2]
        Vmat = vec[:nv].reshape(Lf, H, d, d).transpose(0, 1, 3, 2).reshape(Lf * H * d, d)
        return (self.Fw @ Vmat).ravel()

    def apply_T(self, u: np.ndarray, size: int) -> np.ndarray:
        """``B^T u`` as a flat parameter vector of length ``size``."""
        if self.Bd is not None:
            return self.Bd.T @ u
        assert self.Fw is not None
        Lf, H, d = self.v_shape[0], self.v_shape[1], self.v_shape[2]
        out = np.zeros(size)
        Vmat = self.Fw.T @ u.reshape(self.rows, d)  # ((l,h,e), a)
        nv = Lf * H * d * d
        out[:nv] = Vmat.reshape(Lf, H, d, d).transpose(0, 1, 3, 2).ravel()
        return out

    def func(self, u: np.ndarray, g: np.ndarray) -> np.ndarray:
        """:math:`g(K)\\,u` for the values ``g`` of a function on :attr:`evals`."""
        um = u.reshape(self.rows, self.q)
        return (self.U @ (g[:, None] * (self.U.T @ um))).ravel()

    def coords(self, u: np.ndarray) -> np.ndarray:
        """Coordinates of ``u`` in the eigenbasis of ``K``, ordered as :meth:`full_evals`."""
        return (self.U.T @ u.reshape(self.rows, self.q)).ravel()

    def from_coords(self, c: np.ndarray) -> np.ndarray:
        return (self.U @ c.reshape(self.rows, self.q)).ravel()

    def full_evals(self) -> np.ndarray:
        """Eigenvalues of ``K`` (each of ``k`` repeated ``q`` times), ascending."""
        return np.repeat(self.evals, self.q)


def _is_fixup(params: Any) -> bool:
    return not np.any(params.V)


def _fixup_linear(batch: _Batch, params: Any, layers: int, T: float, loss: str, cache: _Cache) -> _Linear:
    """:math:`B` at a FixUp point from the features in ``cache`` (module docstring)."""
    H, d = params.heads, params.dim
    n, S, _ = batch.X.shape
    c = T / (layers * H)
    if params.per_layer:
        feats = np.stack([M.reshape(n, S, H * d) for M in cache.Ms])  # (L, n, S, H d)
        coef = c
    else:
        feats = cache.Ms[0].reshape(1, n, S, H * d)  # V = 0: every layer sees the same features
        coef = c * layers
    Lf = feats.shape[0]
    F = coef * feats.transpose(1, 2, 0, 3).reshape(n, S, Lf * H * d)  # rows (i, s), columns (l, h, e)
    w = _weights(batch, loss)
    m = _mobility(params, layers, T)
    if loss == "readout":
        Fw = math.sqrt(m) * np.einsum("ns,nsk->nk", batch.masses, F) * np.sqrt(w)[:, None]
    else:
        Fw = math.sqrt(m) * (np.sqrt(w)[..., None] * F)[batch.mask]
    with np.errstate(over="ignore", invalid="ignore"):
        k = Fw @ Fw.T
    if not np.all(np.isfinite(k)):
        raise DomainError(f"the NTK at FixUp overflows float64 (T = {T:g}); lower the depth T (--depth-t) or the scales")
    ev, U = np.linalg.eigh(k)
    return _Linear(ev, U, d, Fw=Fw, v_shape=(Lf, H, d, d))


def _dense_linear(batch: _Batch, params: Any, layers: int, T: float, loss: str, cache: _Cache,
                  memory: int | None = None) -> _Linear:
    """:math:`B` as the dense weighted Jacobian over all parameters (away from FixUp)."""
    memory = NTK_MEMORY if memory is None else memory
    n, S, d = batch.X.shape
    seeds = _seeds(batch, loss)
    need = 8 * seeds.shape[0] * n * params.size
    if need > memory:
        raise DomainError(f"the linear part of the flow away from FixUp needs a dense Jacobian of "
                          f"{need / 2**30:.1f} GiB (over the {memory / 2**30:.1f} GiB budget); "
                          "use method='RK45' or start from FixUp (V = 0)")
    g = _backward(cache, params, layers, T, seeds, per_sample=True)
    assert isinstance(g, _Grads) and g.V is not None
    B = seeds.shape[0]
    rows = [x.reshape(n * B, -1) for x in (g.V, g.Q, g.b)]
    J = np.concatenate(rows, axis=1) * math.sqrt(_mobility(params, layers, T))
    if loss == "tokens":
        keep = np.repeat(batch.mask[:, :, None], d, axis=2).reshape(-1)
        J = J[keep]
    ev, U = np.linalg.eigh(J @ J.T)
    return _Linear(ev, U, 1, Bd=J)


def linear_part(batch: _Batch, params: Any, layers: int, T: float, loss: str, cache: _Cache | None = None,
                memory: int | None = None) -> _Linear:
    """The linearisation at ``params``: the FixUp form when ``V = 0``, else dense."""
    if cache is None:
        _, cache = _forward(batch, params, layers, T, keep=True)
    if _is_fixup(params):
        return _fixup_linear(batch, params, layers, T, loss, cache)
    return _dense_linear(batch, params, layers, T, loss, cache, memory)


# ----------------------------------------------------------------------------- phi functions


def phi(k: int, z: np.ndarray) -> np.ndarray:
    r""":math:`\varphi_k(z)=\sum_{j\ge0} z^j/(j+k)!` for real ``z <= 0`` (exponential integrators).

    Series for :math:`|z|<1` (25 terms: error below :math:`1/25!`), the recurrence
    :math:`\varphi_{j+1}(z)=(\varphi_j(z)-1/j!)/z` from :math:`\varphi_0=e^z` otherwise.
    """
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    small = np.abs(z) < 1.0
    zs = z[small]
    term = np.full_like(zs, 1.0 / math.factorial(k))
    acc = term.copy()
    for j in range(1, 25):
        term = term * zs / (j + k)
        acc += term
    out[small] = acc
    zl = z[~small]
    p = np.exp(zl)
    for j in range(k):
        p = (p - 1.0 / math.factorial(j)) / zl
    out[~small] = p
    return out

