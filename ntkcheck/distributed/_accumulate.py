r"""The tasks that accumulate one NTK Gram over head blocks and tiles (module docstring of
:mod:`ntkcheck.distributed.gram`): feature blocks, tile products, reductions, row blocks.

Every function here runs on a Dask worker, except :func:`_row_blocks` and :func:`_submit`,
which plan and submit the graph from the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg as sla

from ..cgf import Empirical
from ..ntk.gram_matrix.features import Heads, _atom_count, _feature_columns, _groups, _head_block

__all__: list[str] = []


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _block_features(laws: Sequence[Empirical], heads: Heads, H: int, h0: int, h1: int, chunk: int) -> np.ndarray:
    """Columns ``h0 d : h1 d`` of ``F`` on the rows of ``laws`` (row weights ``sqrt(m / H)``)."""
    out = np.empty((_atom_count(laws), (h1 - h0) * heads.dim))
    _feature_columns(_groups(laws, H), heads, h0, h1, out, chunk, _NoBar())
    return out


def _tile_product(laws_i: Sequence[Empirical], laws_j: Sequence[Empirical] | None, heads: Heads, h0: int, h1: int,
                  chunk: int, vi: np.ndarray | None = None, vj: np.ndarray | None = None) -> Any:
    """One task: ``(F_c)_I (F_c)_J^T`` for the heads ``h0:h1``; ``laws_j`` None is the diagonal
    tile ``I = J``, by ``syrk`` (lower triangle, Fortran order, as the serial accumulation).

    The heads are taken in sub-blocks of the serial block size (``_head_block`` of the tile's
    rows: at least 256 columns, at most ``2^25`` entries) and accumulated in place in that order,
    so a task's memory is one tile and two feature sub-blocks whatever ``h1 - h0``.

    With the Collatz-Wielandt vector's blocks ``vi``, ``vj`` (the certified route) it returns
    ``(T, wi, wj)``: also :math:`w_I = |F_c|_I |F_c|_J^T v_J` and :math:`w_J = |F_c|_J |F_c|_I^T v_I`
    (``wj`` None on the diagonal), the tile's entrywise rounding bound applied to ``v``."""
    H, d = heads.count, heads.dim
    Mi = _atom_count(laws_i)
    Mj = Mi if laws_j is None else _atom_count(laws_j)
    step = _head_block(max(Mi, Mj), H, d)
    T = np.zeros((Mi, Mj), order="F")
    cw = vi is not None
    wi = np.zeros(Mi) if cw else None
    wj = np.zeros(Mj) if cw and laws_j is not None else None
    for a in range(h0, h1, step):
        b = min(h1, a + step)
        Bi = _block_features(laws_i, heads, H, a, b, chunk)
        if laws_j is None:  # Bi.T is Fortran-ordered: BLAS reads it without a copy
            T = sla.blas.dsyrk(1.0, Bi.T, beta=1.0, c=T, trans=1, lower=1, overwrite_c=1)
            if cw:
                np.abs(Bi, out=Bi)
                wi += Bi @ (Bi.T @ vi)
        else:
            Bj = _block_features(laws_j, heads, H, a, b, chunk)
            T = sla.blas.dgemm(1.0, Bi.T, Bj.T, beta=1.0, c=T, trans_a=1, overwrite_c=1)
            if cw:
                np.abs(Bi, out=Bi)
                np.abs(Bj, out=Bj)
                wi += Bi @ (Bj.T @ vj)
                wj += Bj @ (Bi.T @ vi)
    return (T, wi, wj) if cw else T


def _add(a: Any, b: Any) -> Any:
    """One reduction step (out of place: the inputs may still be held by the scheduler); on the
    certified route the parts ``(T, wi, wj)`` are added part by part."""
    if isinstance(a, tuple):
        return tuple(None if x is None else (np.add(x, y, order="F") if x.ndim == 2 else x + y)
                     for x, y in zip(a, b))
    return np.add(a, b, order="F")


def _row_blocks(laws: Sequence[Empirical], p: int) -> list[tuple[int, int]]:
    """Cut the laws into ``min(p, n)`` contiguous, non-empty ranges of about ``M / p`` atoms each."""
    cum = np.concatenate([[0], np.cumsum([law.n_atoms for law in laws])])
    n, M = len(laws), int(cum[-1])
    p = min(p, n)
    edges = [0]
    for k in range(1, p):  # the cut nearest k M / p, leaving room for the blocks still to come
        j = int(np.argmin(np.abs(cum[1:n] - k * M / p))) + 1
        edges.append(min(max(j, edges[-1] + 1), n - (p - k)))
    edges.append(n)
    return list(zip(edges[:-1], edges[1:]))


def _submit(client: Any, blocks: list[Any], heads_f: Any, H: int, c: int, chunk: int, reduce: str,
            v_blocks: list[Any] | None = None, owners: Sequence[str | None] = ()
            ) -> tuple[list[Any], dict[Any, tuple[int, int]]]:
    """Submit the products and the per-tile reductions; return every future (for progress) and
    the root future of each tile ``(I, J)``. No list of intermediate futures outlives this call,
    so a partial is released as soon as the addition that consumes it has run. ``v_blocks``: the
    Collatz-Wielandt vector's row blocks (the certified route); ``owners``: the worker of each
    row block, where the tasks of its tiles run (a preference)."""
    futs: list[Any] = []
    roots: dict[Any, tuple[int, int]] = {}
    p = len(blocks)
    for i in range(p):
        for j in range(i + 1):
            cw = () if v_blocks is None else (v_blocks[i], v_blocks[j])
            at = {"workers": [owners[i]], "allow_other_workers": True} if owners and owners[i] else {}
            level = [client.submit(_tile_product, blocks[i], None if i == j else blocks[j], heads_f, h0,
                                   min(H, h0 + c), chunk, *cw, pure=False, priority=0, **at)
                     for h0 in range(0, H, c)]
            futs.extend(level)
            if reduce == "ordered":
                acc = level[0]
                for k, f in enumerate(level[1:]):
                    acc = client.submit(_add, acc, f, pure=False, priority=1 + k, **at)
                    futs.append(acc)
                roots[acc] = (i, j)
                continue
            depth = 0
            while len(level) > 1:  # pairs (0, 1), (2, 3), ...; an odd last one waits a level
                depth += 1
                nxt = [client.submit(_add, level[k], level[k + 1], pure=False, priority=depth, **at)
                       for k in range(0, len(level) - 1, 2)]
                futs.extend(nxt)
                level = nxt + level[len(level) - len(level) % 2:]
            roots[level[0]] = (i, j)
    return futs, roots
