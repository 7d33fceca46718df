r"""Screening sweeps: where should a user initialise?

One screening (:func:`ntkcheck.screening.screen`) answers for one initialisation law. A
user choosing that law wants many: a grid of scales ``q_scale x b_scale`` of the head
entries (:math:`Q_{h,jk} \sim N(0, q^2)`, :math:`b_{h,j} \sim N(0, b^2)`), several head
counts ``H``, several seeds, several data files. :func:`sweep` runs that grid, one
screening per task, either serially or as ``dask.distributed`` tasks:

* each data file is read and turned into empirical laws **once**
  (:func:`~ntkcheck.cgf.empirical.as_laws`: repeated tokens of a sample are one atom with their
  mass) and shipped to the workers once (``Client.scatter``); a task draws its own heads
  from ``(H, q_scale, b_scale, dist, seed)`` on the worker, so only five numbers travel;
* tasks in one worker process run one at a time (a lock: the arithmetic below sets
  process-global precision), so parallelism comes from worker processes, the
  ``LocalCluster`` default;
* a task runs exactly the serial computation, :func:`~ntkcheck.screening.screen`, on the same
  laws and heads, so the distributed and the serial sweep agree **bit for bit** (the per-task
  sums are the same sums in the same order; :mod:`tests.test_sweep` compares them with ``==``);
* results stream back as they finish (``distributed.as_completed``, which also drives the
  progress bar of :mod:`ntkcheck._progress`) and are gathered into one table
  (:meth:`SweepResult.table`), one JSON object (:meth:`SweepResult.to_dict`) and a heatmap of
  the median over seeds of :math:`\lambda_{\min}` over ``(q_scale, b_scale)``
  (:meth:`SweepResult.plot`).

The Gram of ONE very large screening is distributed differently, over head blocks and tiles
of the Gram: :func:`~ntkcheck.distributed.gram.distributed_gram`.

Each row reports the NTK Gram's :math:`\lambda_{\min}` at FixUp on the distinct atoms
(:math:`W^{1/2} K W^{1/2} = F F^T`, seed 003 "Training Infinitely Deep and Wide Transformers" Prop. 5),
whether positivity is *certified* (a rigorous lower bound) or only seen in float64,
and the cross-check against seed 003 Prop. 8. When the samples are dependent (the bundled
example is), the full Gram has a kernel at every scale; the row then also reports
:math:`\lambda_{\min}` on the samples outside the dependency, which is what the scales
change. Memory and time of a sweep, and of one Gram at large ``M`` on ``n`` workers, are
estimated from measured per-block costs in ``theory/sweeps.md``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._budget import scope
from .._figures import save_figure
from .._precision import PRECISION_LOCK
from .._progress import progress_bar
from .._records import restore
from .._text import fit
from .._validate import as_budget
from ..cgf import Empirical, as_laws
from ..errors import InputError, TimeBudgetError
from ..io.files import load_samples
from ..screening import default_head_count, screen
from ._cluster import dask_client

__all__ = ["SweepRow", "SweepResult", "sweep", "sweep_grid"]

#: screenings in one process run one at a time, under the package's precision lock (the exact
#: and ball arithmetic below them sets process-global precision: ``ntkcheck._precision``), so a
#: sweep on threaded workers and the user's own threads share one lock. Parallelism comes from
#: worker processes.
_SCREEN_LOCK = PRECISION_LOCK
#: seconds of ``sweep`` by default (``time_budget``; ``ntkcheck sweep --max-seconds``)
DEFAULT_TIME_BUDGET = 3600.0
#: seconds the client waits past the deadline for the screenings still running (each ends within its budget)
GRACE = 3.0


@dataclass(frozen=True)
class SweepRow:
    """One task of a sweep: the init law ``(q_scale, b_scale, heads, seed)`` on data ``file``.

    ``lambda_min`` / ``relative_lambda_min`` are those of the NTK Gram at FixUp on all the
    samples' distinct atoms; ``status`` is the Gram's status (``"positive"``, ``"below
    resolution"``, ...); ``certified`` is True only when a rigorous lower bound
    ``certified_lower_bound > 0`` proves positivity. ``crosscheck`` is the agreement with seed
    003 Prop. 8. ``complement_*`` describe the Gram on the samples outside the dependency found
    (None when the samples are independent or no complement was checked)."""

    file: str
    q_scale: float
    b_scale: float
    heads: int
    seed: int
    lambda_min: float
    relative_lambda_min: float
    status: str
    certified: bool
    certified_lower_bound: float | None
    crosscheck: str
    weak: str
    complement_lambda_min: float | None = None
    complement_relative_lambda_min: float | None = None
    complement_certified: bool | None = None
    seconds: float = field(default=0.0, compare=False)

    @property
    def key(self) -> tuple[str, int, float, float, int]:
        return (self.file, self.heads, self.q_scale, self.b_scale, self.seed)

    @property
    def screened_lambda_min(self) -> float:
        """``lambda_min`` of the part the scales act on: the complement's when the samples are
        dependent (the full Gram is singular there whatever the scales), else the full one."""
        return self.lambda_min if self.complement_lambda_min is None else self.complement_lambda_min

    @property
    def screened_relative_lambda_min(self) -> float:
        """``lambda_min / lambda_max`` of the same Gram as :attr:`screened_lambda_min`: what cells of
        different scales are ranked by (a larger ``q_scale`` scales the whole spectrum, not only
        ``lambda_min``)."""
        return (self.relative_lambda_min if self.complement_relative_lambda_min is None
                else self.complement_relative_lambda_min)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepRow:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class SweepResult:
    """Rows of :func:`sweep` sorted by ``(file, heads, q_scale, b_scale, seed)``; ``mode`` says
    where they ran (``"serial"`` or ``"dask <scheduler address>"``), ``seconds`` the wall time;
    ``not_run`` counts the tasks the time budget (``time_budget`` seconds) left without a row."""

    rows: tuple[SweepRow, ...]
    mode: str
    seconds: float
    dist: str = "gaussian"
    not_run: int = 0
    time_budget: float | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepResult:
        """The result from its :meth:`to_dict` (a saved JSON object)."""
        return restore(cls, d, rows=lambda rs: tuple(SweepRow.from_dict(r) for r in rs))

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "seconds": self.seconds, "dist": self.dist,
                "rows": [r.to_dict() for r in self.rows], "best": self.best(), "not_run": self.not_run,
                "time_budget": self.time_budget}

    def values(self) -> list[tuple[Any, ...]]:
        """Every row's key and results without the timing: what two runs must agree on."""
        return [tuple(v for k, v in r.to_dict().items() if k != "seconds") for r in self.rows]

    def median_grid(self, file: str, heads: int, relative: bool = False) -> tuple[list[float], list[float], np.ndarray]:
        """``(q_scales, b_scales, Z)`` with ``Z[i, j]`` the median over seeds of
        :attr:`SweepRow.screened_lambda_min` (``relative``: of :attr:`SweepRow.screened_relative_lambda_min`)
        at ``(q_scales[i], b_scales[j])`` (NaN if absent)."""
        sel = [r for r in self.rows if r.file == file and r.heads == heads]
        qs = sorted({r.q_scale for r in sel})
        bs = sorted({r.b_scale for r in sel})
        Z = np.full((len(qs), len(bs)), np.nan)
        for i, q in enumerate(qs):
            for j, b in enumerate(bs):
                v = [r.screened_relative_lambda_min if relative else r.screened_lambda_min
                     for r in sel if r.q_scale == q and r.b_scale == b]
                if v:
                    Z[i, j] = float(np.median(v))
        return qs, bs, Z

    def best(self) -> list[dict[str, Any]]:
        """Per ``(file, heads)``: the ``(q_scale, b_scale)`` with the largest median
        :attr:`SweepRow.screened_relative_lambda_min` over seeds (``lambda_min / lambda_max``: scales
        that only stretch the spectrum do not win), its median ``lambda_min``, how many of its seeds are certified
        positive, and what that ``lambda_min`` is of (``"lambda_min_of"``): ``"outside the
        dependency"`` (the Gram of the samples outside the dependency found, when the full Gram
        has its kernel at every cell) or ``"all samples"``."""
        out = []
        for f, h in list(dict.fromkeys((r.file, r.heads) for r in self.rows)):
            qs, bs, Z = self.median_grid(f, h)
            _, _, R = self.median_grid(f, h, relative=True)
            if np.all(np.isnan(R)):
                continue
            i, j = np.unravel_index(int(np.nanargmax(R)), R.shape)
            cell = [r for r in self.rows if r.key[:4] == (f, h, qs[i], bs[j])]
            cert = sum(1 for r in cell if (r.certified if r.complement_certified is None else r.complement_certified))
            outside = any(r.complement_lambda_min is not None for r in cell)
            out.append({"file": f, "heads": h, "q_scale": qs[i], "b_scale": bs[j], "median_lambda_min": float(Z[i, j]),
                        "median_relative_lambda_min": float(R[i, j]),
                        "lambda_min_of": "outside the dependency" if outside else "all samples",
                        "seeds": len(cell), "certified_seeds": cert})
        return out

    def best_lines(self) -> list[str]:
        """The summary lines of :meth:`table`: per ``(file, heads)`` the best cell, saying which
        ``lambda_min`` it is (at most 100 columns)."""
        out = []
        for b in self.best():
            name = Path(b["file"]).name
            name = name if len(name) <= 30 else name[:27] + "..."
            where = (f"at q_scale {b['q_scale']:g}, b_scale {b['b_scale']:g} ({b['certified_seeds']}/{b['seeds']} "
                     "seeds certified")
            if b["lambda_min_of"] == "outside the dependency":
                out.append(f"best median relative lambda_min outside the dependency (last column), {name}, H = "
                           f"{b['heads']}:")
                out.append(f"  {b['median_relative_lambda_min']:.3g} (lambda_min {b['median_lambda_min']:.4g}) {where}), "
                           "not the full Gram's")
            else:
                out.append(f"best median relative lambda_min, {name}, H = {b['heads']}: "
                           f"{b['median_relative_lambda_min']:.3g} (lambda_min {b['median_lambda_min']:.4g}) {where})")
        return out

    def table(self) -> str:
        """The human-readable table printed by ``ntkcheck sweep``."""
        # 99 columns (issue 25: 112): long file names are cut, the last column is "outside dep."
        out = [f"{'file':<18} {'H':>4} {'q_scale':>7} {'b_scale':>7} {'seed':>4} {'lambda_min':>10} {'relative':>8} "
               f"{'certified':>9} {'cross-check':>11} {'outside dep.':>12}"]
        for r in self.rows:
            comp = "-" if r.complement_lambda_min is None else (
                f"{r.complement_lambda_min:.3e}{'*' if r.complement_certified else ' '}")
            out.append(f"{Path(r.file).name[:18]:<18} {r.heads:>4} {r.q_scale:>7.3g} {r.b_scale:>7.3g} {r.seed:>4} "
                       f"{r.lambda_min:>10.3e} {r.relative_lambda_min:>8.2e} {'yes' if r.certified else 'no':>9} "
                       f"{r.crosscheck:>11} {comp:>12}")
        out.append("(* = positivity certified; otherwise seen in float64 only or below resolution)")
        out.extend(self.best_lines())
        out.append(f"{len(self.rows)} tasks, {self.mode}, {self.seconds:.2f} s")
        if self.not_run:
            out.append(f"{self.not_run} of {self.not_run + len(self.rows)} tasks not run: the time budget of "
                       f"{self.time_budget:g} s was spent (raise --max-seconds, or sweep fewer cells)")
        return fit(out)

    def plot(self, path: str | Path) -> Path:
        """Heatmaps of ``log10`` of the median over seeds of :attr:`SweepRow.screened_lambda_min`
        over ``(q_scale, b_scale)``, one panel per ``(file, heads)``; cells with no certified seed
        are hatched."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        panels = list(dict.fromkeys((r.file, r.heads) for r in self.rows))
        fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
        for ax, (f, h) in zip(axes[0], panels):
            qs, bs, Z = self.median_grid(f, h)
            with np.errstate(divide="ignore", invalid="ignore"):
                L = np.log10(np.where(Z > 0, Z, np.nan))
            im = ax.imshow(L, origin="lower", cmap="viridis", aspect="auto")
            fig.colorbar(im, ax=ax, label="log10 median lambda_min")
            for i, q in enumerate(qs):
                for j, b in enumerate(bs):
                    cell = [r for r in self.rows if r.key[:4] == (f, h, q, b)]
                    cert = all((r.certified if r.complement_certified is None else r.complement_certified)
                               for r in cell)
                    txt = "n/a" if np.isnan(L[i, j]) else f"{L[i, j]:.1f}"
                    ax.text(j, i, txt + ("" if cert else "?"), ha="center", va="center", fontsize=7, color="w")
            ax.set_xticks(range(len(bs)), [f"{b:g}" for b in bs])
            ax.set_yticks(range(len(qs)), [f"{q:g}" for q in qs])
            ax.set_xlabel("b_scale")
            ax.set_ylabel("q_scale")
            dep = any(r.complement_lambda_min is not None for r in self.rows if (r.file, r.heads) == (f, h))
            ax.set_title(f"{Path(f).name}, H={h}: lambda_min" + (" outside the dependency" if dep else ""),
                         fontsize=9)
        fig.suptitle("NTK Gram at FixUp, median over seeds (? = not every seed certified)", fontsize=10)
        fig.tight_layout()
        return save_figure(fig, path)


# ------------------------------------------------------------------------------ tasks


def sweep_grid(files: Sequence[str], q_scales: Sequence[float], b_scales: Sequence[float],
               heads: Sequence[int | None], seeds: Sequence[int]) -> list[tuple[str, int | None, float, float, int]]:
    """The tasks of a sweep, in the order of the result rows: ``(file, heads, q, b, seed)``."""
    return [(f, h, float(q), float(b), int(s)) for f in files for h in heads for q in q_scales for b in b_scales
            for s in seeds]


def _task(laws: list[Empirical], file: str, heads: int | None, q: float, b: float, seed: int,
          dist: str, certify: bool, deadline: float | None = None) -> SweepRow | None:
    """One screening; runs on a worker (or serially) on laws built once. ``deadline`` (``time.time()``,
    the sweep's time budget) bounds it; None when it has passed or the screening does not fit."""
    t0 = time.perf_counter()
    left = None if deadline is None else deadline - time.time()
    if left is not None and left <= 0:
        return None
    # one fixed draw per cell (None: H d >= 4 M, not screen's doubling), no head-law certificate
    H = heads if heads is not None else default_head_count(sum(law.n_atoms for law in laws), laws[0].dim)
    with _SCREEN_LOCK:
        try:
            r = screen(laws, heads=H, q_scale=q, b_scale=b, seed=seed, dist=dist, certify=certify, head_law_seconds=0,
                       time_budget=left)
        except TimeBudgetError:  # its float64 Gram does not fit in what is left
            return None
    g, c = r.gram, r.complement
    cg = None if c is None else c.gram
    return SweepRow(
        file=file, q_scale=q, b_scale=b, heads=g.heads, seed=seed,
        lambda_min=float(g.lambda_min), relative_lambda_min=float(g.relative_lambda_min), status=g.status,
        certified=bool(g.certified_positive),
        certified_lower_bound=(None if g.certified is None or g.certified.lower_bound is None
                               else float(g.certified.lower_bound)),  # an inconclusive certificate has none
        crosscheck=r.crosscheck.agreement, weak=r.weak.verdict.value,
        complement_lambda_min=None if cg is None else float(cg.lambda_min),
        complement_relative_lambda_min=None if cg is None else float(cg.relative_lambda_min),
        complement_certified=None if cg is None else bool(cg.certified_positive),
        seconds=time.perf_counter() - t0,
    )


def _scales(name: str, xs: Iterable[Any]) -> tuple[float, ...]:
    out = tuple(xs)
    if not out:
        raise InputError(f"{name}: expected at least one value")
    for x in out:
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not (
                math.isfinite(float(x)) and float(x) >= 0):
            raise InputError(f"{name}: expected finite numbers >= 0, got {x!r}")
    return tuple(float(x) for x in out)


def _data(data: Any) -> dict[str, list[Empirical]]:
    """``{name: laws}`` from a path, a sequence of paths, or a mapping ``{name: samples}``."""
    if isinstance(data, Mapping):
        items = [(str(k), v) for k, v in data.items()]
    elif isinstance(data, (str, Path)):
        items = [(str(data), load_samples(data))]
    elif isinstance(data, Sequence) and data and all(isinstance(p, (str, Path)) for p in data):
        items = [(str(p), load_samples(p)) for p in data]
    else:
        raise InputError("data: expected a token file path, a list of paths, or a mapping {name: samples}")
    if not items:
        raise InputError("data: no data files given")
    names = [k for k, _ in items]
    if len(set(names)) != len(names):
        raise InputError(f"data: repeated file names {names}")
    return {k: as_laws(v) for k, v in items}


def sweep(
    data: Any,
    *,
    q_scales: Sequence[float] = (1.0,),
    b_scales: Sequence[float] = (1.0,),
    heads: Sequence[int | None] = (None,),
    seeds: Sequence[int] = (0,),
    dist: str = "gaussian",
    certify: bool = True,
    serial: bool = False,
    client: Any = None,
    scheduler: str | None = None,
    scheduler_file: str | Path | None = None,
    workers: int = 2,
    threads: int = 1,
    processes: bool = True,
    progress: bool = False,
    on_row: Callable[[SweepRow, int, int], None] | None = None,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
) -> SweepResult:
    r"""Screen ``data`` over a grid of initialisation laws, serially or on a Dask cluster.

    Tasks: every ``(file, H, q_scale, b_scale, seed)`` of the grid; each runs
    :func:`~ntkcheck.screening.screen` with heads :math:`Q_h \sim N(0, q^2)^{d\times d}`,
    :math:`b_h \sim N(0, b^2)^d` (``dist="uniform"``: boxes) and reports the NTK Gram's
    :math:`\lambda_{\min}` at FixUp (seed 003 "Training Infinitely Deep and Wide Transformers" Prop. 5, 8).

    Parameters
    ----------
    data : path, list of paths, or mapping ``{name: samples}``
        Token files (``.npy`` / ``.npz``, :func:`ntkcheck.io.files.load_samples`) or samples;
        each becomes empirical laws once and is scattered to the workers once.
    q_scales, b_scales : sequences of float >= 0
    heads : sequence of int or None
        Head counts; None is :func:`~ntkcheck.screening.default_head_count` (``H d >= 4 M``).
    seeds : sequence of int
    certify : bool
        Passed to :func:`~ntkcheck.screening.screen` (certificates of the Grams float64 sees positive).
    serial : bool
        Run in this process, in grid order, without Dask.
    client : distributed.Client, optional
        An existing client (not closed here). Else ``scheduler`` (an address such as
        ``tcp://host:8786``) or ``scheduler_file`` (written by ``dask scheduler
        --scheduler-file FILE``) connects to a running cluster, and without them a
        ``LocalCluster(n_workers=workers, threads_per_worker=threads, processes=processes)``
        is started and closed here. Each task draws its heads from its own ``seed``: the rows
        do not depend on how many workers there are or which one ran a task.
    progress : bool
        A progress bar on stderr (:func:`ntkcheck._progress.progress_bar`) advanced as Dask reports
        each task finished (``distributed.as_completed``), the last row's numbers beside it.
    on_row : callable ``(row, k, n)``, optional
        Called with each row as it arrives (streaming).
    time_budget : float, Budget or None
        Seconds for the whole sweep (default 3600; None: no limit). Each task screens with what is
        left (a deadline on the wall clock, valid on every worker); once spent no task is started,
        the tasks still queued are cancelled, and ``not_run`` counts them.

    Returns
    -------
    SweepResult
        Rows sorted by ``(file, heads, q_scale, b_scale, seed)`` (files in the order given), whatever the
        completion order.

    Examples
    --------
    >>> from ntkcheck.io.files import bundled_path
    >>> r = sweep(bundled_path(), q_scales=(0.5, 1.0), b_scales=(1.0,), serial=True)
    >>> [(row.q_scale, row.crosscheck, row.complement_certified) for row in r.rows]
    [(0.5, 'agrees', True), (1.0, 'agrees', True)]
    """
    qs, bs = _scales("q_scales", q_scales), _scales("b_scales", b_scales)
    hs = tuple(heads)
    if not hs or any(h is not None and (isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1)
                     for h in hs):
        raise InputError(f"heads: expected positive integers or None, got {hs!r}")
    ss = tuple(seeds)
    if not ss or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in ss):
        raise InputError(f"seeds: expected integers >= 0, got {ss!r}")
    if dist not in ("gaussian", "uniform"):
        raise InputError(f"dist: expected 'gaussian' or 'uniform', got {dist!r}")
    budget = as_budget(time_budget)
    laws = _data(data)
    tasks = sweep_grid(list(laws), qs, bs, hs, ss)
    n = len(tasks)
    rows: list[SweepRow] = []

    t0 = time.perf_counter()
    with scope(budget) as tb, progress_bar(n, desc="sweep", unit="task", enabled=bool(progress)) as bar:
        deadline = None if tb.seconds is None else time.time() + tb.remaining()

        def arrived(row: SweepRow | None) -> None:
            if row is None:
                return
            rows.append(row)
            bar.update(1)
            bar.set_postfix_str(f"last: q {row.q_scale:g} b {row.b_scale:g} H {row.heads} seed {row.seed} "
                                f"lambda_min {row.lambda_min:.3g}", refresh=False)
            if on_row is not None:
                on_row(row, len(rows), n)

        if serial:
            for f, h, q, b, s in tasks:
                if tb.expired():
                    break
                arrived(_task(laws[f], f, h, q, b, s, dist, certify, deadline))
            mode = "serial"
        else:
            mode = _run_dask(laws, tasks, dist, certify, arrived, client, scheduler, workers, threads, processes,
                             progress, scheduler_file, deadline)
    order = {f: i for i, f in enumerate(laws)}  # files in the order given, not by path string
    rows.sort(key=lambda r: (order[r.file],) + r.key[1:])
    return SweepResult(rows=tuple(rows), mode=mode, seconds=time.perf_counter() - t0, dist=dist,
                       not_run=n - len(rows), time_budget=tb.seconds)


def _run_dask(laws: dict[str, list[Empirical]], tasks: list[tuple[str, int | None, float, float, int]], dist: str,
              certify: bool, arrived: Callable[[SweepRow], None], client: Any, scheduler: str | None,
              workers: int, threads: int, processes: bool, progress: bool,
              scheduler_file: str | Path | None = None, deadline: float | None = None) -> str:
    with dask_client(client, scheduler, workers, threads, processes, scheduler_file) as cl:
        from distributed import as_completed

        if progress:
            print(f"Dask dashboard: {cl.dashboard_link}", file=sys.stderr, flush=True)
        # ship each file's laws once to every worker; tasks carry only a reference and five numbers
        # (random keys: re-scattering equal data while an earlier run releases it loses the data)
        shipped = {f: cl.scatter([v], broadcast=True, hash=False)[0] for f, v in laws.items()}
        futures = [cl.submit(_task, shipped[f], f, h, q, b, s, dist, certify, deadline, pure=False)
                   for f, h, q, b, s in tasks]
        # a task past the deadline returns at once; the last ones started end within their own budget
        wait = None if deadline is None else max(0.0, deadline - time.time()) + GRACE
        try:
            for fut in as_completed(futures, loop=cl.loop, timeout=wait):  # cl's loop, not the current client's
                arrived(fut.result())
        except TimeoutError:
            cl.cancel([f for f in futures if not f.done()])
        return f"dask {cl.scheduler.address}"
