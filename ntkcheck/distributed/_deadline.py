r"""The time budget on a Dask cluster: tasks estimated before they start, futures abandoned at the deadline.

A task running on a worker cannot be interrupted, and the client that waits on it would wait
past any deadline. So every distributed route

* **estimates its tasks before submitting them** (:func:`require_tasks`): the largest task, and
  the whole wave over the cluster's threads, against the time left (:func:`ntkcheck._budget.require`:
  in a stoppable scope, :class:`~ntkcheck._budget.OutOfTime` is raised before anything starts);
* **waits with the deadline** (:func:`gather`, :func:`completed`): when the budget runs out, the
  futures still pending are cancelled and :class:`~ntkcheck._budget.OutOfTime` is raised (a
  stoppable scope; elsewhere the budget only bounds estimates and the wait goes on). A cluster
  started for the call then has its worker processes killed on the way out
  (:func:`ntkcheck.distributed._cluster.dask_client`), so the answer does not wait for a task
  already running either; on a cluster that outlives the call such a task runs to its end in the
  background, its result dropped.

A product task's time is its feature columns (per row and head, a softmax over the atoms of the
row's sample: timed on the client on a slice of the same data) plus its tile product
(:func:`ntkcheck._budget.dense_seconds` of its flops at the BLAS-3 rate of one thread: the workers
run one BLAS thread each).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .. import _budget
from ..cgf import Empirical
from ..ntk.gram_matrix.features import Heads
from ._accumulate import _block_features

__all__ = ["left", "gather", "completed", "require_tasks", "product_seconds", "blas_threads", "tile_estimates",
           "start_vector_seconds"]


def left() -> float | None:
    """Seconds left of the current budget (None: no limit)."""
    return _budget.capped(None)


def _expired(client: Any, pending: Sequence[Any], stage: str) -> None:
    """At the deadline: in a stoppable scope, cancel ``pending`` and raise ``OutOfTime``; else return."""
    try:
        _budget.checkpoint(stage)
    except _budget.OutOfTime:
        client.cancel(list(pending))
        raise


def gather(client: Any, futs: Sequence[Any], stage: str) -> list[Any]:
    """``client.gather(futs)``, given up at the deadline (the futures cancelled, ``OutOfTime`` raised).

    ``distributed.wait`` waits on the event loop of the *current* client; ``client.as_current()``
    makes that ``client`` (another client current in the caller's context, e.g. a ``with Client():``
    block, left the wait to notice the futures' end only 30-45 s late)."""
    from distributed import wait

    futs = list(futs)
    t = left()
    if t is not None:
        try:
            with client.as_current():
                wait(futs, timeout=max(t, 0.0) + 1e-3, return_when="ALL_COMPLETED")
        except TimeoutError:  # distributed raises it when the timeout passes first
            _expired(client, [f for f in futs if not f.done()], stage)  # not stoppable: wait on below
    return list(client.gather(futs))


def completed(client: Any, futs: list[Any], stage: str) -> Iterator[Any]:
    """The futures in the order they finish (``distributed.as_completed`` on ``client``'s event loop, not
    the current client's); at the deadline the ones still pending are cancelled and ``OutOfTime`` is
    raised (a stoppable scope)."""
    from distributed import as_completed

    t = left()
    pending = set(futs)
    it = as_completed(futs, loop=client.loop, timeout=None if t is None else max(t, 0.0) + 1e-3)
    while True:
        try:
            fut = next(it)
        except StopIteration:
            return
        except TimeoutError:
            _expired(client, list(pending), stage)
            it = as_completed(list(pending), loop=client.loop)  # not stoppable: wait on, without the deadline
            continue
        pending.discard(fut)
        yield fut


def blas_threads() -> int:
    """BLAS threads of this process (the client's product rate is divided by them to get one worker
    thread's; 1 when unknown)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return 1
    counts = [int(p.get("num_threads", 1)) for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(1, max(counts, default=1))


def _feature_rate(laws: Sequence[Empirical], heads: Heads, chunk: int) -> float:
    """Seconds per unit of feature work (row x head x atom of the row's sample), timed on a slice."""
    rows, take = 0, []
    for law in laws:
        take.append(law)
        rows += law.n_atoms
        if rows >= 256:
            break
    nh = min(heads.count, 8)
    t0 = time.perf_counter()
    _block_features(take, heads, heads.count, 0, nh, chunk)
    return max(time.perf_counter() - t0, 1e-6) / (nh * _work(take))


def _work(laws: Sequence[Empirical]) -> float:
    """Feature work per head: sum over rows of the atoms of the row's sample."""
    return float(sum(law.n_atoms * law.n_atoms for law in laws))


def product_seconds(laws_i: Sequence[Empirical], laws_j: Sequence[Empirical] | None, heads: Heads, nh: int,
                    rate: float, threads: int) -> float:
    """Estimated seconds of one product task: the feature columns of ``nh`` heads on the tile's rows
    (at ``rate`` seconds per unit) and the tile product (``syrk`` on the diagonal, ``gemm`` off it),
    ``dense_seconds`` of its flops times the client's BLAS ``threads`` (a worker runs one)."""
    Mi = sum(law.n_atoms for law in laws_i)
    feats = _work(laws_i) + (0.0 if laws_j is None else _work(laws_j))
    K = nh * heads.dim
    flops = Mi * Mi * K if laws_j is None else 2.0 * Mi * sum(law.n_atoms for law in laws_j) * K
    return rate * nh * feats + threads * _budget.dense_seconds(flops)


def require_tasks(seconds: Sequence[float], slots: int, stage: str) -> None:
    """Before submitting tasks of the estimated ``seconds`` to ``slots`` worker threads: refuse
    (``OutOfTime`` in a stoppable scope) when the largest would not finish in the time left, or the
    whole set (a lower bound: the largest, or the total over the threads) would not."""
    if not seconds:
        return
    top = max(seconds)
    _budget.require(top, f"{stage}: its largest task")
    _budget.require(max(top, math.fsum(seconds) / max(slots, 1)), f"{stage}: {len(seconds)} tasks on {slots} "
                    "worker thread(s)")


def tile_estimates(blocks: Sequence[Sequence[Empirical]], heads: Heads, c: int, chunk: int) -> list[float]:
    """The estimated seconds of every product task of the accumulation (``c`` heads a block)."""
    laws = [law for b in blocks for law in b]
    rate = _feature_rate(laws, heads, chunk)
    threads = blas_threads()
    H = heads.count
    out = []
    for i in range(len(blocks)):
        for j in range(i + 1):
            for h0 in range(0, H, c):
                nh = min(H, h0 + c) - h0
                out.append(product_seconds(blocks[i], None if i == j else blocks[j], heads, nh, rate, threads))
    return out


def start_vector_seconds(laws: Sequence[Empirical], heads: Heads, c0: int, chunk: int, rate: float | None = None) -> float:
    """The Collatz-Wielandt start vector's task: the features of the first ``c0`` heads on all rows and
    a few power steps (products with them)."""
    rate = _feature_rate(laws, heads, chunk) if rate is None else rate
    M = sum(law.n_atoms for law in laws)
    # 4 power steps, two matrix-vector products each (BLAS-2: about ten times the time per flop of BLAS-3)
    return rate * c0 * _work(laws) + blas_threads() * _budget.dense_seconds(10.0 * 16.0 * M * c0 * heads.dim)
