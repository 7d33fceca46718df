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
:func:`~ntkcheck.ntk.gram_matrix.accumulate.accumulate`). The additions run at a higher
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

The spectrum is found on the client as :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` finds it
(``eigvalsh`` up to ``M = 4096``, Cholesky + Lanczos above, the same status thresholds);
the SVD fallback of ``gram`` (below relative ``1e-10``) needs ``F`` whole and is not run.

Inputs given at values that are not doubles (``Fraction``, decimals, long doubles) are computed
with their nearest doubles, as everywhere: the bound proved on the tiles is then carried over to
the values given through the proved rounding radius ``E`` of the features,
:math:`\lambda_{\min} \ge (\sqrt{\ell} - E)^2`, or refused when ``E`` eats it, exactly as the serial
certificate does (:func:`ntkcheck.ntk.certificate.inputs.rounding_radius`); data whose doubles merge
distinct atoms of a sample are refused (:func:`~ntkcheck.cgf.empirical.require_float_view`).

With ``certify=True`` the summed tiles stay on the workers (row block ``k`` on one worker) and
:math:`\lambda_{\min} \ge c > 0` is proved there (:mod:`ntkcheck.distributed._certified`: the
serial certificate's enclosure from per-tile Collatz-Wielandt products, Rump's criterion on a
blocked Cholesky of :math:`\mathrm{fl}(G) - tI`, :mod:`ntkcheck.distributed._tiled`); the client
holds vectors of length ``M`` only.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .. import _budget
from .._progress import progress_bar
from .._records import restore
from .._text import fit
from .._validate import check_score_range
from ..cgf import Empirical, as_laws
from ..cgf.empirical import require_float_view
from ..errors import InputError, NtkcheckWarning
from ..ntk.certificate.routes import (
    MAX_CERTIFY_TOKENS,
    GramCertificate,
    PositivityCertificate,
    positivity_carried,
)
from ..ntk.gram_matrix.features import (
    DEFAULT_CHUNK,
    Heads,
    _as_heads,
    _atom_count,
    _head_block,
    init_heads,
)
from ..ntk.gram_matrix.problem import MAX_EIGENVALUES, SampleSize, merge_note, rounded_inputs
from ..ntk.gram_matrix.result import GramResult
from ..ntk.gram_matrix.spectrum import RESOLUTION_EIGH, _extremal_eigh, spectrum_status
from . import _certified, _deadline, _tiled
from ._accumulate import _block_features as _block_features  # noqa: F401  (tests and the benchmark use it)
from ._accumulate import _row_blocks, _submit
from ._cluster import dask_client

__all__ = ["DistributedGram", "distributed_gram", "dask_client"]


@dataclass(frozen=True)
class DistributedGram:
    """Result of :func:`distributed_gram`: the spectrum summary ``gram`` (as
    :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` reports it) and how the Gram was accumulated:
    ``chunk_heads`` heads a block, ``head_blocks`` blocks, ``tiles`` row blocks
    (``tiles (tiles + 1) / 2`` tiles of the lower triangle), ``tasks`` Dask tasks (products and
    additions), ``reduce`` (``"tree"`` or ``"ordered"``), ``mode`` (``"dask <address>"``), and the
    wall times of the accumulation (from a running cluster: its start-up is not counted) and of
    the spectrum (on the client; with ``certify``, the factorisations and Lanczos on the workers).

    With ``certify=True``: ``certificate`` is the :class:`~ntkcheck.ntk.certificate.routes.PositivityCertificate`
    of the tiled Gram (also in ``gram.certified``, as ``gram(certify=True)`` reports it), ``shift``
    the ``t`` of the Cholesky of ``fl(G) - tI`` that proved it (None if nothing was proved), and
    ``factorizations`` the blocked Cholesky factorisations run on the workers."""

    gram: GramResult
    mode: str
    chunk_heads: int
    head_blocks: int
    tiles: int
    tasks: int
    reduce: str
    seconds_gram: float
    seconds_spectrum: float
    certificate: PositivityCertificate | None = None
    shift: float | None = None
    factorizations: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DistributedGram:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "chunk_heads": self.chunk_heads, "head_blocks": self.head_blocks,
                "tiles": self.tiles, "tasks": self.tasks, "reduce": self.reduce, "seconds_gram": self.seconds_gram,
                "seconds_spectrum": self.seconds_spectrum, "gram": self.gram.to_dict(),
                "certificate": None if self.certificate is None else self.certificate.to_dict(),
                "shift": self.shift, "factorizations": self.factorizations}

    def summary(self) -> str:
        g = self.gram
        where = "on the workers, blocked Cholesky" if self.certificate is not None else "on this machine"
        return fit([
            f"NTK Gram at FixUp on {g.atoms} distinct atoms, H = {g.heads} heads, d = {g.dim}",
            f"  accumulated on Dask ({self.mode}): {self.head_blocks} head blocks of <= {self.chunk_heads} heads x "
            f"{self.tiles * (self.tiles + 1) // 2} tiles, {self.tasks} tasks, {self.reduce} reduction, "
            f"{self.seconds_gram:.2f} s",
            f"  spectrum {where} ({g.method}): {self.seconds_spectrum:.2f} s",
            f"  lambda_min {g.lambda_min:.6g}, lambda_max {g.lambda_max:.6g}, relative {g.relative_lambda_min:.3g}",
            f"  status: {g.status_text()}",
            *(f"  note: {n}" for n in g.notes),
        ])


# --------------------------------------------------------------------------- spectrum


def _size_notes(laws: Sequence[Empirical], heads: Heads, M: int, notes: list[str]) -> tuple[tuple[SampleSize, ...], bool]:
    """The samples' sizes and whether ``H d < M`` (warned about: not a verdict about the data)."""
    H, d = heads.count, heads.dim
    sizes = tuple(SampleSize.of(law) for law in laws)
    if (merged := merge_note(sizes)) is not None:
        notes.insert(0, merged)
    by_size = H * d < M
    if by_size:
        warnings.warn(f"H d = {H}*{d} = {H * d} < M = {M} distinct atoms: the Gram is singular by rank; this is not "
                      f"a verdict about the data (use at least {math.ceil(M / d)} heads)", NtkcheckWarning, stacklevel=4)
        notes.append(f"singular by rank: H d = {H * d} < M = {M}")
    return sizes, by_size


def _spectrum(G: np.ndarray, laws: Sequence[Empirical], heads: Heads, keep_matrix: bool,
              notes: list[str]) -> GramResult:
    """The summary :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` reports, from the lower triangle of ``G``."""
    M, H, d = G.shape[0], heads.count, heads.dim
    sizes, by_size = _size_notes(laws, heads, M, notes)
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


def _certified_result(laws: Sequence[Empirical], heads: Heads, M: int, lam: float | None, lmax: float,
                      pc: PositivityCertificate | None, notes: list[str]) -> GramResult:
    """The summary ``gram(certify=True)`` reports, from the tiled route: ``lambda_min`` the Lanczos
    estimate through the blocked factor (0 when float64 cannot factor the Gram, or ``H d < M``),
    ``lambda_max`` Lanczos on the tiles, the certificate as
    :func:`~ntkcheck.ntk.gram_matrix.pipeline.certify_result` attaches it."""
    sizes, by_size = _size_notes(laws, heads, M, notes)
    lmin = 0.0 if (by_size or lam is None) else max(lam, 0.0)
    status = spectrum_status(lmin, lmax, by_size=by_size, resolution=RESOLUTION_EIGH)
    cert = None
    if pc is not None:
        if pc.positive:
            cert = GramCertificate(pc.method, pc.lower_bound, 53, pc.statement, inputs_rounded=pc.inputs_rounded)
            notes.append(f"positivity certified ({cert.how})")
            status = "positive"
        else:
            cert = GramCertificate("inconclusive", None, 53, f"{pc.statement}; the routes below float64's resolution "
                                   "(preconditioned, Arb) need F whole: `ntkcheck gram --certify` runs them up to "
                                   f"M = {MAX_CERTIFY_TOKENS}")
            notes.append(f"certification inconclusive: {cert.detail}"
                         + ("; positivity is seen in float64 only" if status == "positive" else ""))
    return GramResult(lambda_min=lmin, lambda_max=float(lmax), condition=(lmax / lmin) if lmin > 0 else math.inf,
                      atoms=M, tokens=int(sum(s.tokens for s in sizes)), heads=heads.count, dim=heads.dim,
                      eigenvalues=None, rank_deficient_by_size=by_size, method="cholesky-lanczos",
                      resolution=RESOLUTION_EIGH, status=status, certified=cert, notes=tuple(notes), samples=sizes)


# ------------------------------------------------------------------------ the two runs


def _follow(cl: Any, futs: list[Any], roots: dict[Any, tuple[int, int]], desc: str, progress: bool,
            on_root: Any = None) -> None:
    """Advance a bar as Dask reports each task finished; raise a task's error here; call
    ``on_root(future, (i, j))`` for each tile's root; at the deadline cancel what is pending and
    raise ``OutOfTime`` (:func:`ntkcheck.distributed._deadline.completed`)."""
    with progress_bar(len(futs), desc=desc, unit="task", enabled=bool(progress)) as bar:
        done = _deadline.completed(cl, list(futs), desc)
        futs.clear()  # the caller's list: a partial is released once consumed
        for fut in done:
            bar.update(1)
            if fut.status == "error":
                fut.result()  # raises the task's error here
            if fut in roots and on_root is not None:
                on_root(fut, roots.pop(fut))
            del fut


def _gathered_run(cl: Any, laws: Sequence[Empirical], heads: Heads, ranges: list[tuple[int, int]], blocks: list[Any],
                  heads_f: Any, c: int, chunk: int, reduce: str, progress: bool) -> tuple[np.ndarray, int]:
    """The float64 route: every summed tile travels to the client, into the lower triangle of ``G``."""
    futs, roots = _submit(cl, blocks, heads_f, heads.count, c, chunk, reduce)
    n_tasks = len(futs)
    offsets = _offsets(laws, ranges)
    G = np.zeros((offsets[-1], offsets[-1]), order="F")

    def put(fut: Any, ij: tuple[int, int]) -> None:
        i, j = ij
        G[offsets[i]:offsets[i + 1], offsets[j]:offsets[j + 1]] = fut.result()

    _follow(cl, futs, roots, f"Gram on Dask ({-(-heads.count // c)} head blocks)", progress, put)
    return G, n_tasks


def _offsets(laws: Sequence[Empirical], ranges: list[tuple[int, int]]) -> tuple[int, ...]:
    return tuple(int(x) for x in np.concatenate([[0], np.cumsum([sum(law.n_atoms for law in laws[a:b])
                                                                  for a, b in ranges])]))


def _tiled_run(cl: Any, laws: Sequence[Empirical], heads: Heads, ranges: list[tuple[int, int]], blocks: list[Any],
               heads_f: Any, c: int, chunk: int, reduce: str, progress: bool) -> tuple[Any, int]:
    """The certified route's accumulation: the summed tiles stay on the workers; their
    Collatz-Wielandt parts and the feature radii come to the client (vectors of length ``M``)."""
    H = heads.count
    offsets = _offsets(laws, ranges)
    c0 = min(H, _head_block(_atom_count(laws), H, heads.dim))
    _budget.require(lambda: _deadline.start_vector_seconds(laws, heads, c0, chunk),
                    "the Collatz-Wielandt start vector on a worker")
    v_f = cl.submit(_certified.start_vector, blocks, heads_f, chunk, pure=False)
    e2_f = cl.submit(_certified.feature_radii, blocks, heads_f, pure=False)
    v = _deadline.gather(cl, [v_f], "the Collatz-Wielandt start vector on a worker")[0]
    v_blocks = cl.scatter([v[offsets[k]:offsets[k + 1]] for k in range(len(ranges))], broadcast=True, hash=False)
    own = _tiled.owners(cl, len(ranges))  # each row block's tiles stay on one worker
    futs, roots = _submit(cl, blocks, heads_f, H, c, chunk, reduce, v_blocks, own)
    n_tasks = len(futs) + 2
    at = {ij: {"workers": [own[ij[0]]], "allow_other_workers": True} if own[ij[0]] else {} for ij in roots.values()}
    tiles = {ij: cl.submit(_certified.first, r, pure=False, **at[ij]) for r, ij in roots.items()}
    w_futs = {ij: cl.submit(_certified.rest, r, pure=False, **at[ij]) for r, ij in roots.items()}
    _follow(cl, futs, roots, f"Gram on Dask, tiles kept ({-(-H // c)} head blocks)", progress)
    keys = sorted(w_futs)
    w_parts = dict(zip(keys, _deadline.gather(cl, [w_futs[k] for k in keys], "the tiles' rounding bounds")))
    e2, _, dmax = _deadline.gather(cl, [e2_f], "the feature radii on a worker")[0]
    G = _tiled.Tiles(tiles, offsets, own)
    return _certified.enclosure(cl, G, w_parts, v, e2, dmax, H * heads.dim, H), n_tasks


def _positivity_for_values_given(laws: Sequence[Empirical], heads: Heads,
                                 pc: PositivityCertificate) -> PositivityCertificate:
    """The tiles' bound, proved for the inputs' nearest doubles, as a statement about the values given:
    carried over through the proved rounding radius or refused, as the serial route does
    (:func:`~ntkcheck.ntk.certificate.routes.positivity_carried`)."""
    return positivity_carried(laws, heads, rounded_inputs(laws, heads), pc)


def _certify_on_workers(cl: Any, laws: Sequence[Empirical], heads: Heads, enc: Any, shift: float | None,
                        notes: list[str]) -> tuple[GramResult, PositivityCertificate | None, float | None, int]:
    """Rump's criterion on the tiles (unless ``H d < M``), ``lambda_max`` by Lanczos, the result."""
    M = enc.G.n
    pc = lam = t = None
    n_fact = 0
    if heads.count * heads.dim >= M:
        pc, lam, t, n_fact = _certified.certify_tiles(cl, enc, shift)
        # the tiles hold the Gram of the inputs' nearest doubles: a bound about the values given is that
        # bound carried over through the proved rounding radius, as the serial route does (or refused)
        pc = _positivity_for_values_given(laws, heads, pc)
    lmax = _certified.largest_eigenvalue(cl, enc.G)
    notes.append(f"lambda_min by Lanczos on the inverse through the blocked Cholesky factor on the workers "
                 f"({enc.G.p} row blocks), lambda_max by Lanczos on the tiles")
    return _certified_result(laws, heads, M, lam, lmax, pc, notes), pc, t, n_fact


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
    scheduler_file: str | Path | None = None,
    workers: int = 2,
    threads: int = 1,
    processes: bool = True,
    chunk_heads: int | None = None,
    tiles: int = 1,
    reduce: Literal["tree", "ordered"] = "tree",
    keep_matrix: bool = False,
    certify: bool = False,
    shift: float | None = None,
    chunk: int = DEFAULT_CHUNK,
    progress: bool = False,
) -> DistributedGram:
    r"""The NTK Gram of one screening, accumulated over head blocks on Dask workers, and its spectrum.

    .. math::

        W^{1/2} K W^{1/2} = \sum_{c} F_c F_c^T, \qquad
        F_{(i,a),\,(h,:)} = \sqrt{m_{ia}/H}\;\nabla\Lambda_i(Q_h x_{ia} + b_h)

    (seed 003 "Training Infinitely Deep and Wide Transformers" Prop. 5), one task per head
    block and tile, partial products summed on the workers (module docstring of
    ``ntkcheck.distributed.gram``). Without ``certify``, the spectrum on the client as
    :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` reports it (float64). With ``certify=True`` the
    Gram stays in tiles on the workers and :math:`\lambda_{\min} \ge c > 0` is proved there as
    :func:`~ntkcheck.ntk.certificate.routes.certify_positive` proves it (enclosure, Rump's criterion on a
    blocked Cholesky of :math:`\mathrm{fl}(G) - tI`, Weyl; ``theory/certificates.md``).

    Parameters
    ----------
    samples : list of Empirical, list of (N_i, d) arrays, or (n, N, d) array
    heads : int or Heads
        Explicit heads, or a count drawn by :func:`~ntkcheck.ntk.gram_matrix.features.init_heads` from
        ``q_scale``, ``b_scale``, ``dist``, ``seed`` (as ``gram`` does), on the client: the
        heads do not depend on the workers.
    client, scheduler, scheduler_file, workers, threads, processes
        An existing ``distributed.Client`` (not closed here); else a running scheduler's
        address, or the scheduler file written by ``dask scheduler --scheduler-file FILE``;
        else a ``LocalCluster(workers, threads, processes)`` started and closed here
        (:func:`~ntkcheck.distributed._cluster.dask_client`: one BLAS thread per worker).
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
        bit equal to the serial ``accumulate`` when the blocks are the same, ``tiles = 1`` and each
        block's product is one BLAS dot product).
    keep_matrix : bool
        Keep the symmetric ``(M, M)`` Gram (``M <= 4096``) in ``result.gram.matrix`` (not with
        ``certify``: that Gram never leaves the workers).
    certify : bool
        Prove :math:`\lambda_{\min} > 0` on the workers (``result.certificate``, and
        ``result.gram.certified`` as ``gram(certify=True)`` reports it). Use ``tiles`` to spread
        the Gram: the factorisation's tasks are the ``p^3 / 6`` tile updates.
    shift : float, optional
        With ``certify``: the ``t`` of the one Cholesky of ``fl(G) - tI`` (default: as the serial
        route chooses it, ``0.9`` times a Lanczos estimate of :math:`\lambda_{\min}`, after one
        factorisation of ``fl(G)``).
    progress : bool
        A bar over the Dask tasks as they finish (``distributed.as_completed``).

    Returns
    -------
    DistributedGram
        Memory on the client: ``8 M^2`` bytes for ``G`` (plus the Cholesky factor above ``M = 4096``);
        with ``certify``, vectors of length ``M`` only, and on the workers the lower tiles of ``G`` and
        of one factor, ``8 M^2`` bytes in all, plus the tiles of a running update.
    """
    laws, heads, p, chunk, c = _inputs(samples, heads, q_scale, b_scale, dist, seed, tiles, chunk, chunk_heads,
                                       reduce, keep_matrix, certify, shift)
    H = heads.count
    ranges = _row_blocks(laws, p)
    local = client is None and scheduler is None and scheduler_file is None  # a LocalCluster: planned before it starts
    _within_budget(laws, heads, ranges, c, chunk, workers * threads, estimate=local)
    with dask_client(client, scheduler, workers, threads, processes, scheduler_file) as cl:
        t0 = time.perf_counter()  # the cluster is up: its start-up is not counted
        _budget.checkpoint("the start-up of the Dask cluster")  # which may have spent the whole budget
        c = _within_budget(laws, heads, ranges, c, chunk, sum(w.get("nthreads", 1) for w in cl.scheduler_info()[
            "workers"].values()) or 1, estimate=not local)
        blocks = cl.scatter([list(laws[a:b]) for a, b in ranges], broadcast=True, hash=False)
        heads_f = cl.scatter([heads], broadcast=True, hash=False)[0]
        notes = [f"Gram accumulated on Dask: {-(-H // c)} head blocks x {len(ranges) * (len(ranges) + 1) // 2} tiles, "
                 f"{reduce} reduction"]
        pc = t = None
        n_fact = 0
        if certify:
            enc, n_tasks = _tiled_run(cl, laws, heads, ranges, blocks, heads_f, c, chunk, reduce, progress)
            t1 = time.perf_counter()
            res, pc, t, n_fact = _certify_on_workers(cl, laws, heads, enc, shift, notes)
            t2 = time.perf_counter()
        else:
            G, n_tasks = _gathered_run(cl, laws, heads, ranges, blocks, heads_f, c, chunk, reduce, progress)
            t1 = time.perf_counter()
        mode = f"dask {cl.scheduler.address}"
    if not certify:
        res = _spectrum(G, laws, heads, keep_matrix, notes)
        t2 = time.perf_counter()
    return DistributedGram(gram=res, mode=mode, chunk_heads=c, head_blocks=-(-H // c), tiles=len(ranges),
                           tasks=n_tasks, reduce=reduce, seconds_gram=t1 - t0, seconds_spectrum=t2 - t1,
                           certificate=pc, shift=t, factorizations=n_fact)


def _within_budget(laws: Sequence[Empirical], heads: Heads, ranges: list[tuple[int, int]], c: int | None, chunk: int,
                   slots: int, *, estimate: bool = True) -> int:
    """The heads per product task (``c``, or one task per worker thread and at least one per tile),
    after every product task is estimated (``estimate``) against the time left: none starts that could
    not finish in it (:func:`ntkcheck.distributed._deadline.require_tasks`)."""
    H, n_tiles = heads.count, len(ranges) * (len(ranges) + 1) // 2
    if c is None:
        c = -(-H // -(-slots // n_tiles))
    if estimate and _deadline.left() is not None:
        _deadline.require_tasks(_deadline.tile_estimates([laws[a:b] for a, b in ranges], heads, c, chunk), slots,
                                f"the Gram on Dask ({-(-H // c)} head blocks of {c} heads x {n_tiles} tiles)")
    return c


def _inputs(samples: Any, heads: Any, q_scale: float, b_scale: float, dist: str, seed: int, tiles: Any, chunk: Any,
            chunk_heads: Any, reduce: str, keep_matrix: bool, certify: bool, shift: Any
            ) -> tuple[list[Empirical], Heads, int, int, int | None]:
    """The arguments of :func:`distributed_gram` checked, before any cluster starts."""
    if certify and keep_matrix:
        raise InputError("keep_matrix: with certify the Gram stays on the workers; it is not kept")
    if shift is not None and not (certify and isinstance(shift, (int, float, np.floating)) and not isinstance(
            shift, bool) and math.isfinite(shift) and shift > 0):
        raise InputError(f"shift: expected a finite number > 0 with certify=True, got {shift!r}")
    laws = as_laws(samples)
    require_float_view(laws, "the distributed Gram")  # it is computed from the nearest doubles
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
    return laws, heads, p, chunk, c
