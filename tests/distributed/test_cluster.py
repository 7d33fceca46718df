"""HPC conventions of the Dask routes (``ntkcheck.distributed._cluster``): one BLAS thread per
worker, scheduler files, and a Ctrl-C that stops the cluster with one line and status 130.

These tests start worker *processes* (what the command line does), so they are the slow ones
of the distributed suite (a process cluster starts in 5-15 s on the shared test machine).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")
threadpoolctl = pytest.importorskip("threadpoolctl")

import dask  # noqa: E402

from ntkcheck.distributed import dask_client  # noqa: E402
from ntkcheck.distributed._cluster import PLUGIN_NAME, scheduler_address  # noqa: E402
from ntkcheck.errors import InputError  # noqa: E402


def _blas_threads() -> list[int]:
    import numpy as np  # noqa: F401  (the BLAS is loaded with numpy)
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: every BLAS has one thread anyway")
def test_workers_get_one_blas_thread_from_the_plugin():
    """With the nanny's environment variables switched off, a worker's BLAS would use every core;
    the plugin ``dask_client`` registers brings it to 1, and unregistering it restores it (so it
    is the plugin, not the environment, that set it)."""
    with dask.config.set({"distributed.nanny.pre-spawn-environ": {}}), \
            dask_client(None, None, workers=1, threads=1, processes=True) as client:
        (threads,) = client.run(_blas_threads).values()
        assert threads and all(t == 1 for t in threads)
        client.unregister_worker_plugin(PLUGIN_NAME)
        (threads,) = client.run(_blas_threads).values()
        assert all(t > 1 for t in threads)


def test_scheduler_file_is_read_for_its_address(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"type": "Scheduler", "address": "tcp://10.0.0.7:8786", "workers": {}}))
    assert scheduler_address(f) == "tcp://10.0.0.7:8786"
    for content in ("not json", json.dumps({"address": 3}), json.dumps([1])):
        f.write_text(content)
        with pytest.raises(InputError, match="not a Dask scheduler file"):
            scheduler_address(f)
    with pytest.raises(InputError, match="not both"), dask_client(None, "tcp://a:1", 1, 1, False, f):
        pass


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with open(task / "children") as fh:
            out |= {int(c) for c in fh.read().split()}
    return out


#: a grid no cluster finishes between a task's return and the signal: 5 x 5 scales x 8 seeds = 200
#: screenings (at most 15-25 per second on two workers of the shared 2-core test machine: 8 s or more),
#: short enough that a lost signal shows as the sweep run to its end (status 0, the bar at 100 %)
GRID_SEEDS = ",".join(str(s) for s in range(8))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to find the worker processes")
def test_ctrl_c_stops_the_cluster_with_one_line_and_status_130(tmp_path):
    """A Ctrl-C at the terminal signals the whole foreground process group: the command and its
    worker processes. Simulated with SIGINT to the group of ``ntkcheck sweep`` once a task has
    come back (the progress bar, shown at once, names the last row: the client is waiting in its
    loop over the tasks) and while the sweep is far from its end (200 tasks): exit status 130,
    the last line of stderr is the one message, no traceback or log record from any process, the
    bar never reached 100 %, no worker left running.

    The signal used to be sent a fixed second after the dashboard line; under load it once came
    after the sweep had ended (a SIGINT after the report, while the interpreter shuts down, leaves
    status 0 or ends the process by the signal): the test now waits for a finished task and leaves
    the sweep no time to end."""
    argv = [sys.executable, "-m", "ntkcheck", "sweep", "--progress", "--q-scales", "0.25,0.5,1,2,4",
            "--b-scales", "0.25,0.5,1,2,4", "--seeds", GRID_SEEDS]
    env = dict(os.environ, NTKCHECK_PROGRESS_DELAY="0")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         cwd=tmp_path, text=True, env=env)
    lines: list[str] = []
    running = threading.Event()

    def read() -> None:
        for line in p.stderr:  # tqdm's "\r" ends a line here too (universal newlines)
            lines.append(line)
            if "last: q" in line:  # the bar's postfix: a row has arrived
                running.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert running.wait(180), "no task came back: " + "".join(lines)[-2000:]
        assert p.poll() is None, "the sweep ended before the signal"
        workers = _children(p.pid)
        assert workers, "no worker processes"
        os.killpg(p.pid, signal.SIGINT)
        try:
            rc = p.wait(120)
        except subprocess.TimeoutExpired:
            pytest.fail("still running 120 s after the signal: " + "".join(lines)[-2000:])
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    reader.join(10)
    err = "".join(lines)
    assert rc == 130, err[-2000:]
    assert err.rstrip().splitlines()[-1] == "ntkcheck sweep: interrupted"
    assert "100%|" not in err, err[-2000:]  # stopped, not run to the end (tqdm's bar at its total)
    for bad in ("Traceback", "WARNING", "ERROR", "KeyboardInterrupt"):
        assert bad not in err, err[-2000:]
    time.sleep(0.5)
    assert not [w for w in workers if Path(f"/proc/{w}").exists()
                and "zombie" not in Path(f"/proc/{w}/status").read_text().lower()]
