r"""One large NTK Gram accumulated over head blocks on Dask workers (exported by :mod:`ntkcheck.distributed`).

The Gram of one screening at FixUp (seed 003 "Training Infinitely Deep and Wide Transformers"
Prop. 5) is a sum over heads,

.. math::

    W^{1/2} K W^{1/2} = F F^T = \sum_{c} F_c F_c^T, \qquad
    F_c = F[:, h_0 d : h_1 d] \ \text{(the feature columns of heads } h_0 \le h < h_1),

so it is accumulated over **head blocks** without ever forming ``F``, and, for memory at
large ``M``, over **tiles**: the samples are cut into ``p`` contiguous row blocks ``I`` (by
whole samples: a sample's atoms are contiguous rows) and a task computes one tile
:math:`(F_c)_I (F_c)_J^T`, ``J <= I`` (BLAS ``syrk`` on the diagonal, lower triangle only;
``gemm`` off it), for one head block. Per tile, the partial products of the head blocks
are summed **on the workers**: a pairwise tree of fixed shape (``reduce="tree"``, depth
:math:`\lceil\log_2 B\rceil` for ``B`` head blocks) or a left fold in head order
(``reduce="ordered"``, the order of the serial
:func:`~ntkcheck.ntk.gram_matrix._gram_accumulated`). The additions run at a higher
priority than the products (Dask runs ready tasks of higher priority first), so finished
partials are folded in as soon as their partner exists rather than after every product; only the ``p (p + 1) / 2`` summed tiles travel to the
client, one by one, into the lower triangle of ``G``. The laws (per row block) and the
heads are shipped once (``Client.scatter``); a task carries references and three integers,
and runs its head block in sub-blocks of the serial size, accumulating in place.

Rounding. Every entry of ``G`` is a sum of ``K = H d`` products; whatever the order
(BLAS blocking, tree, fold), :math:`|\mathrm{fl}(G) - F F^T| \le \gamma_K |F| |F|^T`
entrywise, :math:`\gamma_K = K u / (1 - K u)` (Higham, *Accuracy and Stability of Numerical
Algorithms*, Sec. 3.1). The fold reproduces the serial sum bit for bit when its blocks are
the serial ones (``chunk_heads`` the serial block size, one tile) and each block's product is
one uninterrupted BLAS dot product (block width ``<= 256`` columns on this OpenBLAS); the tree
differs from it by at most :math:`2 \gamma_K |F||F|^T`.

The spectrum is found on the client as :func:`~ntkcheck.ntk.gram_matrix.gram` finds it
(``eigvalsh`` up to ``M = 4096``, Cholesky + Lanczos above, the same status thresholds);
the SVD fallback of ``gram`` (below relative ``1e-10``) needs ``F`` whole and is not run.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.linalg as sla

from .._progress import progress_bar
from .._records import restore
from .._validate import check_score_range
from ..cgf import Empirical, as_laws
from ..errors import InputError, NtkcheckWarning
from ..ntk.features import (
    DEFAULT_CHUNK,
    Heads,
    _as_heads,
    _atom_count,
    _feature_columns,
    _groups,
    _head_block,
    init_heads,
)
from ..ntk.gram_matrix import (
    MAX_EIGENVALUES,
    RESOLUTION_EIGH,
    GramResult,
    SampleSize,
    _extremal_eigh,
    merge_note,
    spectrum_status,
)

__all__ = ["DistributedGram", "distributed_gram", "dask_client"]


@contextlib.contextmanager
def dask_client(client: Any, scheduler: str | None, workers: int, threads: int, processes: bool) -> Iterator[Any]:
    """``client`` as given (not closed), else a client of the scheduler at ``scheduler``, else a
    ``LocalCluster(workers, threads, processes)`` started here; closed on exit when opened here."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("this needs dask and distributed: pip install 'ntkcheck[dask]' (or run serially)") from None
    if client is not None:
        yield client
        return
    if not (isinstance(workers, int) and workers >= 1 and isinstance(threads, int) and threads >= 1):
        raise InputError(f"workers and threads: expected positive integers, got {workers!r}, {threads!r}")
    cluster = None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError(f"cannot connect to the Dask scheduler at {scheduler!r} ({exc})") from None
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=processes,
                               dashboard_address=":0")  # a free port: never clash with another cluster
        client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


@dataclass(frozen=True)
class DistributedGram:
    """Result of :func:`distributed_gram`: the spectrum summary ``gram`` (as
    :func:`~ntkcheck.ntk.gram_matrix.gram` reports it) and how the Gram was accumulated:
    ``chunk_heads`` heads a block, ``head_blocks`` blocks, ``tiles`` row blocks
    (``tiles (tiles + 1) / 2`` tiles of the lower triangle), ``tasks`` Dask tasks (products and
    additions), ``reduce`` (``"tree"`` or ``"ordered"``), ``mode`` (``"dask <address>"``), and the
    wall times of the accumulation (from a running cluster: its start-up is not counted) and of
    the spectrum (on the client)."""

    gram: GramResult
    mode: str
    chunk_heads: int
    head_blocks: int
    tiles: int
    tasks: int
    reduce: str
    seconds_gram: float
    seconds_spectrum: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DistributedGram:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "chunk_heads": self.chunk_heads, "head_blocks": self.head_blocks,
                "tiles": self.tiles, "tasks": self.tasks, "reduce": self.reduce, "seconds_gram": self.seconds_gram,
                "seconds_spectrum": self.seconds_spectrum, "gram": self.gram.to_dict()}

    def summary(self) -> str:
        g = self.gram
        return "\n".join([
            f"NTK Gram at FixUp on {g.atoms} distinct atoms, H = {g.heads} heads, d = {g.dim}",
            f"  accumulated on Dask ({self.mode}): {self.head_blocks} head blocks of <= {self.chunk_heads} heads x "
            f"{self.tiles * (self.tiles + 1) // 2} tiles, {self.tasks} tasks, {self.reduce} reduction, "
            f"{self.seconds_gram:.2f} s",
            f"  spectrum on this machine ({g.method}): {self.seconds_spectrum:.2f} s",
            f"  lambda_min {g.lambda_min:.6g}, lambda_max {g.lambda_max:.6g}, relative {g.relative_lambda_min:.3g}",
            f"  status: {g.status_text()}",
            *(f"  note: {n}" for n in g.notes),
        ])


# ------------------------------------------------------------------------------ tasks


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _block_features(laws: Sequence[Empirical], heads: Heads, H: int, h0: int, h1: int, chunk: int) -> np.ndarray:
    """Columns ``h0 d : h1 d`` of ``F`` on the rows of ``laws`` (row weights ``sqrt(m / H)``)."""
    out = np.empty((_atom_count(laws), (h1 - h0) * heads.dim))
    _feature_columns(_groups(laws, H), heads, h0, h1, out, chunk, _NoBar())
    return out


def _tile_product(laws_i: Sequence[Empirical], laws_j: Sequence[Empirical] | None, heads: Heads, h0: int, h1: int,
                  chunk: int) -> np.ndarray:
    """One task: ``(F_c)_I (F_c)_J^T`` for the heads ``h0:h1``; ``laws_j`` None is the diagonal
    tile ``I = J``, by ``syrk`` (lower triangle, Fortran order, as the serial accumulation).

    The heads are taken in sub-blocks of the serial block size (``_head_block`` of the tile's
    rows: at least 256 columns, at most ``2^25`` entries) and accumulated in place in that order,
    so a task's memory is one tile and two feature sub-blocks whatever ``h1 - h0``."""
    H, d = heads.count, heads.dim
    Mi = _atom_count(laws_i)
    Mj = Mi if laws_j is None else _atom_count(laws_j)
    step = _head_block(max(Mi, Mj), H, d)
    T = np.zeros((Mi, Mj), order="F")
    for a in range(h0, h1, step):
        b = min(h1, a + step)
        Bi = _block_features(laws_i, heads, H, a, b, chunk)
        if laws_j is None:  # Bi.T is Fortran-ordered: BLAS reads it without a copy
            T = sla.blas.dsyrk(1.0, Bi.T, beta=1.0, c=T, trans=1, lower=1, overwrite_c=1)
        else:
            Bj = _block_features(laws_j, heads, H, a, b, chunk)
            T = sla.blas.dgemm(1.0, Bi.T, Bj.T, beta=1.0, c=T, trans_a=1, overwrite_c=1)
    return T


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One reduction step (out of place: the inputs may still be held by the scheduler)."""
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


def _submit(client: Any, blocks: list[Any], heads_f: Any, H: int, c: int, chunk: int, reduce: str
            ) -> tuple[list[Any], dict[Any, tuple[int, int]]]:
    """Submit the products and the per-tile reductions; return every future (for progress) and
    the root future of each tile ``(I, J)``. No list of intermediate futures outlives this call,
    so a partial is released as soon as the addition that consumes it has run."""
    futs: list[Any] = []
    roots: dict[Any, tuple[int, int]] = {}
    p = len(blocks)
    for i in range(p):
        for j in range(i + 1):
            level = [client.submit(_tile_product, blocks[i], None if i == j else blocks[j], heads_f, h0,
                                   min(H, h0 + c), chunk, pure=False, priority=0) for h0 in range(0, H, c)]
            futs.extend(level)
            if reduce == "ordered":
                acc = level[0]
                for k, f in enumerate(level[1:]):
                    acc = client.submit(_add, acc, f, pure=False, priority=1 + k)
                    futs.append(acc)
                roots[acc] = (i, j)
                continue
            depth = 0
            while len(level) > 1:  # pairs (0, 1), (2, 3), ...; an odd last one waits a level
                depth += 1
                nxt = [client.submit(_add, level[k], level[k + 1], pure=False, priority=depth)
                       for k in range(0, len(level) - 1, 2)]
                futs.extend(nxt)
                level = nxt + level[len(level) - len(level) % 2:]
            roots[level[0]] = (i, j)
    return futs, roots


# --------------------------------------------------------------------------- spectrum


def _spectrum(G: np.ndarray, laws: Sequence[Empirical], heads: Heads, keep_matrix: bool,
              notes: list[str]) -> GramResult:
    """The summary :func:`~ntkcheck.ntk.gram_matrix.gram` reports, from the lower triangle of ``G``."""
    M, H, d = G.shape[0], heads.count, heads.dim
    sizes = tuple(SampleSize.of(law) for law in laws)
    by_size = H * d < M
    if (merged := merge_note(sizes)) is not None:
        notes.insert(0, merged)
    if by_size:
        warnings.warn(f"H d = {H}*{d} = {H * d} < M = {M} distinct atoms: the Gram is singular by rank; this is not "
                      f"a verdict about the data (use at least {math.ceil(M / d)} heads)", NtkcheckWarning, stacklevel=3)
        notes.append(f"singular by rank: H d = {H * d} < M = {M}")
    want_all = M <= MAX_EIGENVALUES
    ext = None if (want_all or by_size) else _extremal_eigh(G)
    eig = None
    if ext is not None:
        (lmin, lmax), method = ext, "cholesky-lanczos"
    else:
        eig = np.linalg.eigvalsh(G, UPLO="L")
        lmin, lmax, method = float(eig[0]), float(eig[-1]), "eigvalsh"
    lmin = max(lmin, 0.0)
    status = spectrum_status(lmin, lmax, by_size=by_size, resolution=RESOLUTION_EIGH)
    if status == "below resolution":
        notes.append("lambda_min below the eigvalsh resolution (relative < 1e-10); the SVD of F that `gram` falls "
                     "back to needs F whole and is not run on the distributed route")
    eigenvalues = tuple(float(max(v, 0.0)) for v in eig) if (eig is not None and want_all) else None
    kept = kernel = None
    if keep_matrix:
        kept = np.tril(G) + np.tril(G, -1).T  # the upper triangle mirrored from the computed lower one
        k = sum(1 for v in (eigenvalues or ()) if v <= RESOLUTION_EIGH * lmax)
        kernel = np.linalg.eigh(kept)[1][:, :k].copy()
    return GramResult(lambda_min=lmin, lambda_max=float(lmax), condition=(lmax / lmin) if lmin > 0 else math.inf,
                      atoms=M, tokens=int(sum(s.tokens for s in sizes)), heads=H, dim=d, eigenvalues=eigenvalues,
                      rank_deficient_by_size=by_size, method=method, resolution=RESOLUTION_EIGH, status=status,
                      certified=None, notes=tuple(notes), samples=sizes, matrix=kept, kernel_vectors=kernel)


# -------------------------------------------------------------------------------- API


def _positive(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise InputError(f"{name}: expected a positive integer, got {v!r}")
    return int(v)


def distributed_gram(
    samples: Any,
    heads: int | Heads,
    *,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    dist: Literal["gaussian", "uniform"] = "gaussian",
    seed: int = 0,
    client: Any = None,
    scheduler: str | None = None,
    workers: int = 2,
    threads: int = 1,
    processes: bool = True,
    chunk_heads: int | None = None,
    tiles: int = 1,
    reduce: Literal["tree", "ordered"] = "tree",
    keep_matrix: bool = False,
    chunk: int = DEFAULT_CHUNK,
    progress: bool = False,
) -> DistributedGram:
    r"""The NTK Gram of one screening, accumulated over head blocks on Dask workers, and its spectrum.

    .. math::

        W^{1/2} K W^{1/2} = \sum_{c} F_c F_c^T, \qquad
        F_{(i,a),\,(h,:)} = \sqrt{m_{ia}/H}\;\nabla\Lambda_i(Q_h x_{ia} + b_h)

    (seed 003 "Training Infinitely Deep and Wide Transformers" Prop. 5), one task per head
    block and tile, partial products summed on the workers (module docstring of
    ``ntkcheck.distributed.gram``), the spectrum on the client as
    :func:`~ntkcheck.ntk.gram_matrix.gram` reports it (float64; no certificate).

    Parameters
    ----------
    samples : list of Empirical, list of (N_i, d) arrays, or (n, N, d) array
    heads : int or Heads
        Explicit heads, or a count drawn by :func:`~ntkcheck.ntk.features.init_heads` from
        ``q_scale``, ``b_scale``, ``dist``, ``seed`` (as ``gram`` does).
    client, scheduler, workers, threads, processes
        An existing ``distributed.Client`` (not closed here); else a running scheduler's
        address; else a ``LocalCluster(workers, threads, processes)`` started and closed here.
    chunk_heads : int, optional
        Heads per block (per product task; a task runs its block in sub-blocks of the serial
        size, so its memory does not grow with it). Default: ``ceil(H / B)`` with
        ``B = ceil(threads / tiles)`` blocks, ``threads`` the workers' threads and ``tiles`` the
        ``p (p + 1) / 2`` tiles: one product task per thread, and no reduction at all when there
        are at least as many tiles as threads (every partial sum moved between workers costs a
        tile's bytes).
    tiles : int
        Row blocks ``p`` (whole samples, about ``M / p`` atoms each; at most the number of
        samples): ``p (p + 1) / 2`` tiles. Memory per task: ``8 (M / p)^2`` bytes for the tile
        plus two feature sub-blocks of at most ``8 max(2^25, 256 M / p)`` bytes each (a task
        runs its heads in sub-blocks of the serial size). With ``chunk_heads = H`` and
        ``p (p + 1) / 2 >= workers`` there is no reduction at all: one task per tile.
    reduce : {"tree", "ordered"}
        Pairwise tree on the workers, or a left fold in head order (the serial order: bit for
        bit equal to ``_gram_accumulated`` when the blocks are the same, ``tiles = 1`` and each
        block's product is one BLAS dot product).
    keep_matrix : bool
        Keep the symmetric ``(M, M)`` Gram (``M <= 4096``) in ``result.gram.matrix``.
    progress : bool
        A bar over the Dask tasks as they finish (``distributed.as_completed``).

    Returns
    -------
    DistributedGram
        Memory on the client: ``8 M^2`` bytes for ``G`` (plus the Cholesky factor above
        ``M = 4096``).
    """
    laws = as_laws(samples)
    d = laws[0].dim
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer, Heads, tuple)):
        raise InputError(f"heads: expected a positive integer or a Heads object, got {heads!r}")
    if isinstance(heads, (int, np.integer)):
        heads = init_heads(_positive("heads", heads), d, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed)
    heads = _as_heads(heads, d)
    H, M = heads.count, _atom_count(laws)
    if reduce not in ("tree", "ordered"):
        raise InputError(f"reduce: expected 'tree' or 'ordered', got {reduce!r}")
    p = _positive("tiles", tiles)
    chunk = _positive("chunk", chunk)
    c = None if chunk_heads is None else min(H, _positive("chunk_heads", chunk_heads))
    if keep_matrix and M > MAX_EIGENVALUES:
        raise InputError(f"keep_matrix: the Gram is kept only up to {MAX_EIGENVALUES} distinct atoms, got M = {M}")
    check_score_range([law.atoms for law in laws], heads.Q, heads.b)
    ranges = _row_blocks(laws, p)
    n_tiles = len(ranges) * (len(ranges) + 1) // 2
    with dask_client(client, scheduler, workers, threads, processes) as cl:
        from distributed import as_completed

        t0 = time.perf_counter()  # the cluster is up: its start-up is not counted
        if c is None:  # as many product tasks as worker threads (at least one per tile)
            slots = sum(w.get("nthreads", 1) for w in cl.scheduler_info()["workers"].values()) or 1
            c = -(-H // -(-slots // n_tiles))
        starts = list(range(0, H, c))
        blocks = cl.scatter([list(laws[a:b]) for a, b in ranges], broadcast=True, hash=False)
        heads_f = cl.scatter([heads], broadcast=True, hash=False)[0]
        futs, roots = _submit(cl, blocks, heads_f, H, c, chunk, reduce)
        n_tasks = len(futs)
        offsets = np.concatenate([[0], np.cumsum([sum(law.n_atoms for law in laws[a:b]) for a, b in ranges])])
        G = np.zeros((M, M), order="F")
        with progress_bar(n_tasks, desc=f"Gram on Dask ({len(starts)} head blocks)", unit="task",
                          enabled=bool(progress)) as bar:
            done = as_completed(futs)
            del futs
            for fut in done:
                bar.update(1)
                if fut.status == "error":
                    fut.result()  # raises the task's error here
                if fut in roots:
                    i, j = roots.pop(fut)
                    G[offsets[i]:offsets[i + 1], offsets[j]:offsets[j + 1]] = fut.result()
                del fut
        t1 = time.perf_counter()
        mode = f"dask {cl.scheduler.address}"
    notes = [f"Gram accumulated on Dask: {len(starts)} head blocks x {n_tiles} tiles, {reduce} reduction"]
    t2 = time.perf_counter()
    res = _spectrum(G, laws, heads, keep_matrix, notes)
    return DistributedGram(gram=res, mode=mode, chunk_heads=c, head_blocks=len(starts), tiles=len(ranges),
                           tasks=n_tasks, reduce=reduce, seconds_gram=t1 - t0, seconds_spectrum=time.perf_counter() - t2)
