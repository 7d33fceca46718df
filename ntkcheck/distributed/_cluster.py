"""Where the Dask work runs: a ``LocalCluster``, a scheduler address, or a scheduler file.

:func:`dask_client` opens (and on exit closes) the client every distributed route uses, with
the conventions of HPC users:

* ``scheduler_file``: the JSON file written by ``dask scheduler --scheduler-file FILE`` (or by
  ``dask-mpi``, or a batch job), read for the scheduler's address;
* **one BLAS thread per worker** (:class:`OneBlasThread`, a worker plugin: ``threadpoolctl``
  limits the BLAS already loaded in the worker process). A worker runs one task per thread;
  a multithreaded BLAS under each of them would oversubscribe the cores (Dask's nanny sets
  ``OMP_NUM_THREADS=1`` and friends for the processes it starts; the plugin also covers
  workers started without a nanny, or after numpy was loaded);
* **Ctrl-C stops the cluster cleanly**: a ``LocalCluster``'s worker processes are started with
  SIGINT ignored (they inherit that disposition, so a Ctrl-C at the terminal, which signals
  the whole foreground process group, reaches only this process), and on
  ``KeyboardInterrupt`` the client and the cluster are closed with Dask's shutdown messages
  silenced, so the command prints one line and exits with status 130. A Ctrl-C during the few
  seconds of the worker processes' start-up is not seen (SIGINT is ignored while they are
  spawned: blocking it instead loses it to the BLAS threads, and a fork server started with SIGINT
  ignored leaves its half-started children writing tracebacks); one before it (during the imports:
  :func:`ntkcheck.cli.main`) or after it is;
* **a spent time budget does not wait for a running task**: on ``OutOfTime`` (the deadline of
  :mod:`ntkcheck.distributed._deadline`) the worker processes of a ``LocalCluster`` started here are
  killed before it is closed (a graceful close waits for the task in hand to end).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._budget import OutOfTime
from ..errors import InputError

__all__ = ["dask_client", "OneBlasThread"]

#: name under which :class:`OneBlasThread` is registered (registering twice replaces it)
PLUGIN_NAME = "ntkcheck-one-blas-thread"


def _worker_plugin_base() -> type:
    try:
        from distributed import WorkerPlugin
    except ImportError:  # the class is still importable without dask; it is never registered then
        return object
    return WorkerPlugin


class OneBlasThread(_worker_plugin_base()):  # type: ignore[misc]
    """Dask worker plugin: limit the worker process's BLAS to ``threads`` threads (default 1).

    ``setup`` runs in each worker (now and when workers join later) and calls
    ``threadpoolctl.threadpool_limits(threads, user_api="blas")``; ``teardown`` restores the
    previous limits. Without ``threadpoolctl`` it sets ``OMP_NUM_THREADS``,
    ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS``, which only a BLAS loaded afterwards reads.
    Register it on your own client with ``client.register_plugin(OneBlasThread())``.
    """

    def __init__(self, threads: int = 1) -> None:
        self.threads = int(threads)
        self._limits: Any = None

    def setup(self, worker: Any = None) -> None:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            import os

            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = str(self.threads)
            return
        self._limits = threadpool_limits(limits=self.threads, user_api="blas")

    def teardown(self, worker: Any = None) -> None:
        if self._limits is not None:
            self._limits.restore_original_limits()
            self._limits = None


def _kill_workers(cluster: Any) -> None:
    """Kill the worker processes of a ``LocalCluster`` started here (the time budget is spent: a task
    running on a worker cannot be interrupted, and a graceful close would wait for it to end)."""
    sig = getattr(signal, "SIGKILL", signal.SIGTERM)
    for nanny in list(getattr(cluster, "workers", {}).values()):
        pid = getattr(getattr(getattr(nanny, "process", None), "process", None), "pid", None)
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)


def scheduler_address(scheduler_file: str | Path) -> str:
    """The ``address`` in a scheduler file (JSON written by ``dask scheduler --scheduler-file``)."""
    p = Path(scheduler_file)
    if not p.is_file():
        raise InputError(f"{p}: no such scheduler file (written by `dask scheduler --scheduler-file {p}`)")
    try:
        address = json.loads(p.read_text(encoding="utf-8"))["address"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{p}: not a Dask scheduler file (expected JSON with an 'address'; {exc})") from None
    if not isinstance(address, str) or not address:
        raise InputError(f"{p}: not a Dask scheduler file (its 'address' is {address!r})")
    return address


@contextlib.contextmanager
def _workers_ignore_sigint(enabled: bool) -> Iterator[None]:
    """While worker processes are spawned, SIGINT is ignored here, so they inherit the ignored
    disposition (``exec`` keeps it, and Python then installs no KeyboardInterrupt handler)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


_DASK_LOGGERS = ("distributed", "tornado", "asyncio")


def _quiet_dask_logs() -> None:
    """After a Ctrl-C: Dask's shutdown messages (tasks cancelled, workers killed) say nothing
    the user needs; the command prints its own one line."""
    for name in _DASK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextlib.contextmanager
def _quiet_shutdown() -> Iterator[None]:
    """While a cluster started here closes: its nanny's warnings ("worker process still alive
    after 4 seconds, killing", seen on a loaded machine) are about our own shutdown, not the
    user's work; errors still show."""
    loggers = [logging.getLogger(name) for name in _DASK_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.ERROR))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _connect(address: str, what: str) -> Any:
    from distributed import Client

    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot connect to the Dask scheduler {what} ({exc})") from None


@contextlib.contextmanager
def dask_client(client: Any, scheduler: str | None, workers: int, threads: int, processes: bool,
                scheduler_file: str | Path | None = None) -> Iterator[Any]:
    """``client`` as given (not closed), else a client of the scheduler at ``scheduler`` or named
    in ``scheduler_file``, else a ``LocalCluster(workers, threads, processes)`` started here;
    closed on exit when opened here. Clusters opened or connected to here get
    :class:`OneBlasThread` on every worker (not an in-process ``LocalCluster``, whose workers share
    this process's BLAS); a ``KeyboardInterrupt`` closes them quietly and propagates."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("this needs dask and distributed: pip install 'ntkcheck[dask]' (or run serially)") from None
    if client is not None:
        yield client
        return
    if scheduler is not None and scheduler_file is not None:
        raise InputError("give a scheduler address or a scheduler file, not both")
    if not (isinstance(workers, int) and workers >= 1 and isinstance(threads, int) and threads >= 1):
        raise InputError(f"workers and threads: expected positive integers, got {workers!r}, {threads!r}")
    cluster = None
    if scheduler_file is not None:
        client = _connect(scheduler_address(scheduler_file), f"of {str(scheduler_file)!r}")
    elif scheduler is not None:
        client = _connect(scheduler, f"at {scheduler!r}")
    else:
        with _workers_ignore_sigint(processes):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=processes,
                                   dashboard_address=":0")  # a free port: never clash with another cluster
        client = Client(cluster)
    try:
        if cluster is None or processes:
            client.register_plugin(OneBlasThread(), name=PLUGIN_NAME)
        yield client
    except KeyboardInterrupt:
        _quiet_dask_logs()
        if cluster is not None:  # our worker processes write to this terminal: the cancelled tasks too
            with contextlib.suppress(Exception):
                client.run(_quiet_dask_logs)
        raise
    except OutOfTime:
        if cluster is not None and processes:  # a task still running would hold the close until it ends
            _quiet_dask_logs()
            _kill_workers(cluster)
        raise
    finally:
        if cluster is None:  # a cluster that outlives this call: its workers get their BLAS back
            with contextlib.suppress(Exception):
                client.unregister_worker_plugin(PLUGIN_NAME)
            client.close()
        else:
            with _quiet_shutdown():
                client.close()
                cluster.close()
