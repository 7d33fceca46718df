r"""A symmetric matrix kept in tiles on Dask workers: blocked Cholesky, triangular solves, products.

The matrix is cut by the row blocks of :func:`~ntkcheck.distributed.gram.distributed_gram`
(``offsets``: whole samples, unequal sizes allowed) and only its lower tiles
:math:`A_{ij}`, :math:`j \le i`, exist, each a future on some worker (a diagonal tile is read
from its lower triangle). The client never holds a tile: it submits tasks and receives
vectors of length ``M``.

**Blocked right-looking Cholesky** (:func:`cholesky`), for ``k = 0, ..., p - 1``:

.. math::

    L_{kk} = \operatorname{chol}(A_{kk}), \qquad
    L_{ik} = A_{ik} L_{kk}^{-T} \ (i > k), \qquad
    A_{ij} \leftarrow A_{ij} - L_{ik} L_{jk}^T \ (k < j \le i),

LAPACK ``dpotrf`` on the diagonal tile, BLAS ``dtrsm`` for the panel and ``dgemm`` / ``dsyrk``
for the trailing update, each a task. Every entry :math:`l_{ij}` is still formed as
:math:`(a_{ij} - \sum_{k<j} l_{ik} l_{jk}) / l_{jj}` (or its square root on the diagonal),
only with the sum split into block partial sums: the rounding analysis of
``theory/certificates.md`` ("The blocked Cholesky on the workers") covers any such order.
A non-positive pivot makes ``dpotrf`` fail: that task returns None, every task that depends on it
passes None on (no error is raised on a worker: a Gram that float64 cannot factor is an answer,
not a fault), and :func:`cholesky` returns None.

**Placement: row blocks have owners.** Row block ``k`` belongs to one worker (round robin over
the workers, :func:`owners`), and every tile of that row is computed there and stays there
(``workers=`` a preference, ``allow_other_workers=True``: a lost worker does not stall the
graph). A step ``k`` of the factorisation then moves only the panel ``L_{ik}`` to the rows'
owners (the communication of a 1-D block-row distribution), and a solve or a product is one
task per row block, run where the row lives, with only vectors moving:

* :func:`solve` (``(L L^T)^{-1} b``): forward substitution, one task per row,
  :math:`y_k = L_{kk}^{-1}(b_k - \sum_{j<k} L_{kj} y_j)`; backward, one task per row that forms
  :math:`x_k = L_{kk}^{-T}(y_k - \sum_{i>k} L_{ik}^T x_i)` and at once its row's part
  :math:`L_{kj}^T x_k` of every earlier step: ``2 p`` tasks in sequence (at moderate ``M`` the
  latency of a task, not the flops, is the cost of a solve);
* :func:`matvec`: one task per row block. Partial results are summed in a fixed order, so the
  result does not depend on which worker ran what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla

from ._deadline import gather

__all__ = ["Tiles", "owners", "cholesky", "solve", "matvec", "diagonal"]

@dataclass(frozen=True)
class Tiles:
    """Lower tiles ``futures[(i, j)]``, ``j <= i``, of a symmetric ``M x M`` matrix; row block ``i``
    is ``offsets[i]:offsets[i + 1]`` and lives on the worker ``owner[i]`` (None: anywhere)."""

    futures: dict[tuple[int, int], Any]
    offsets: tuple[int, ...]
    owner: tuple[str | None, ...] = ()

    @property
    def p(self) -> int:
        return len(self.offsets) - 1

    @property
    def n(self) -> int:
        return self.offsets[-1]

    def block(self, x: np.ndarray, k: int) -> np.ndarray:
        return x[self.offsets[k]:self.offsets[k + 1]]

    def row(self, i: int) -> list[Any]:
        """The futures of row block ``i``: ``[A_i0, ..., A_ii]``."""
        return [self.futures[i, j] for j in range(i + 1)]

    def at(self, i: int) -> dict[str, Any]:
        """``submit`` keywords that run a task where row block ``i`` lives (a preference)."""
        w = self.owner[i] if self.owner else None
        return {} if w is None else {"workers": [w], "allow_other_workers": True}


def owners(client: Any, p: int) -> tuple[str | None, ...]:
    """Row block ``k`` to worker ``k mod n`` (workers sorted by address): block rows round robin."""
    workers = sorted(client.scheduler_info().get("workers", {}))
    return tuple(workers[k % len(workers)] for k in range(p)) if workers else (None,) * p


# ------------------------------------------------------------------------------ tasks


def _diag_of(T: np.ndarray) -> np.ndarray:
    return np.diagonal(T).copy()


def _shifted(T: np.ndarray, t: float) -> np.ndarray:
    """A diagonal tile with ``fl(a_ii - t)`` on its diagonal (a copy: ``T`` is still held)."""
    A = np.array(T, order="F", copy=True)
    i = np.arange(A.shape[0])
    A[i, i] = np.diagonal(T) - t
    return A


def _potrf(A: np.ndarray | None) -> np.ndarray | None:
    """The Cholesky factor of a pivot tile (LAPACK ``dpotrf``), None if a pivot is not positive."""
    if A is None:
        return None
    L, info = sla.lapack.dpotrf(A, lower=1, clean=1, overwrite_a=0)
    return L if info == 0 else None


def _trsm(A: np.ndarray | None, L: np.ndarray | None) -> np.ndarray | None:
    """``A L^{-T}``: the panel tile ``L_ik`` (BLAS ``dtrsm``, right side, lower, transposed)."""
    if A is None or L is None:
        return None
    return sla.blas.dtrsm(1.0, L, A, side=1, lower=1, trans_a=1)


def _gemm_update(A: np.ndarray | None, Li: np.ndarray | None, Lj: np.ndarray | None) -> np.ndarray | None:
    """``A - Li Lj^T`` (BLAS ``dgemm``, out of place)."""
    if A is None or Li is None or Lj is None:
        return None
    return sla.blas.dgemm(-1.0, Li, Lj, beta=1.0, c=A, trans_b=1, overwrite_c=0)


def _syrk_update(A: np.ndarray | None, Li: np.ndarray | None) -> np.ndarray | None:
    """``A - Li Li^T`` on the lower triangle (BLAS ``dsyrk``, out of place)."""
    if A is None or Li is None:
        return None
    return sla.blas.dsyrk(-1.0, Li, beta=1.0, c=A, lower=1, overwrite_c=0)


def _is_none(x: Any) -> bool:
    return x is None


def _forward_row(b: np.ndarray, row: list[np.ndarray], ys: list[np.ndarray]) -> np.ndarray:
    """``y_k = L_kk^{-1} (b_k - sum_j L_kj y_j)`` from the row ``[L_k0, ..., L_kk]`` (sums in order)."""
    rhs = b
    for L, y in zip(row[:-1], ys):
        rhs = rhs - L @ y
    return sla.solve_triangular(row[-1], rhs, lower=True, check_finite=False)


def _backward_row(row: list[np.ndarray], y: np.ndarray, k: int, later: list[tuple[Any, list[np.ndarray]]]
                  ) -> tuple[np.ndarray, list[np.ndarray]]:
    """``x_k = L_kk^{-T} (y_k - sum_{i>k} L_ik^T x_i)`` (``later``: the later rows' results, in
    order), and row ``k``'s part of every earlier step, ``[L_k0^T x_k, ..., L_k,k-1^T x_k]``."""
    rhs = y
    for _, parts in later:
        rhs = rhs - parts[k]
    x = sla.solve_triangular(row[-1], rhs, lower=True, trans="T", check_finite=False)
    return x, [L.T @ x for L in row[:-1]]


def _row_matvec(row: list[np.ndarray], xs: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Row ``i`` of ``A x``: ``(sum_{j<=i} A_ij x_j, [A_ij^T x_i for j < i])``, the diagonal tile
    read from its lower triangle (BLAS ``dsymv``)."""
    xi = xs[-1]
    y = sla.blas.dsymv(1.0, row[-1], xi, lower=1)
    for T, xj in zip(row[:-1], xs[:-1]):
        y = y + T @ xj
    return y, [T.T @ xi for T in row[:-1]]


# ---------------------------------------------------------------------------- drivers


def diagonal(client: Any, A: Tiles) -> np.ndarray:
    """The diagonal of ``A`` (``M`` floats)."""
    futs = [client.submit(_diag_of, A.futures[k, k], pure=False, **A.at(k)) for k in range(A.p)]
    return np.concatenate(gather(client, futs, "the diagonal of the tiled Gram"))


def cholesky(client: Any, A: Tiles, t: float) -> Tiles | None:
    """The lower tiles of the Cholesky factor of ``fl(A - t I)``, or None when a pivot block is
    not positive definite in float64. ``A`` is not modified (its futures stay valid); every
    task runs where its row block lives."""
    p = A.p
    W = dict(A.futures)
    for k in range(p):
        W[k, k] = client.submit(_shifted, W[k, k], float(t), pure=False, priority=3 * p, **A.at(k))
    L: dict[tuple[int, int], Any] = {}
    for k in range(p):
        base = 3 * (p - k)  # earlier steps first: they are on the critical path
        L[k, k] = client.submit(_potrf, W.pop((k, k)), pure=False, priority=base + 2, **A.at(k))
        for i in range(k + 1, p):
            L[i, k] = client.submit(_trsm, W.pop((i, k)), L[k, k], pure=False, priority=base + 1, **A.at(i))
        for i in range(k + 1, p):
            for j in range(k + 1, i + 1):
                args = (W[i, i], L[i, k]) if i == j else (W[i, j], L[i, k], L[j, k])
                W[i, j] = client.submit(_syrk_update if i == j else _gemm_update, *args, pure=False, priority=base,
                                        **A.at(i))
    failed = gather(client, [client.submit(_is_none, L[k, k], pure=False, **A.at(k)) for k in range(p)],
                    f"the blocked Cholesky of fl(G) - {t:.3g} I on the workers")
    if any(failed):
        return None
    return Tiles(L, A.offsets, A.owner)


def solve(client: Any, L: Tiles, b: np.ndarray) -> np.ndarray:
    """``(L L^T)^{-1} b`` (``b`` of shape ``(M,)`` or ``(M, k)``): forward then backward substitution,
    one task per row block and step, where the row lives."""
    p = L.p
    y: list[Any] = []
    for k in range(p):
        y.append(client.submit(_forward_row, L.block(b, k), L.row(k), y[:k], pure=False, **L.at(k)))
    x: dict[int, Any] = {}
    for k in reversed(range(p)):
        later = [x[i] for i in range(k + 1, p)]
        x[k] = client.submit(_backward_row, L.row(k), y[k], k, later, pure=False, **L.at(k))
    return np.concatenate([xk for xk, _ in gather(client, [x[k] for k in range(p)], "a tiled triangular solve")])


def matvec(client: Any, A: Tiles, x: np.ndarray) -> np.ndarray:
    """``A x`` for the symmetric ``A`` (the upper tiles are the transposes of the lower ones)."""
    futs = [client.submit(_row_matvec, A.row(i), [A.block(x, j) for j in range(i + 1)], pure=False, **A.at(i))
            for i in range(A.p)]
    y = np.zeros(A.n)
    for i, (yi, back) in enumerate(gather(client, futs, "a tiled product")):  # a fixed order of the sums
        y[A.offsets[i]:A.offsets[i + 1]] += yi
        for j, yj in enumerate(back):
            y[A.offsets[j]:A.offsets[j + 1]] += yj
    return y
