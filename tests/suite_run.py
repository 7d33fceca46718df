"""How the suite runs in parallel, and what a run costs: a pytest plugin registered by ``conftest.py``.

The README's test command runs the suite on every core with pytest-xdist (``-n auto``, ``--dist
loadgroup`` in ``pyproject.toml``). This plugin

* keeps what must stay together on one worker (:class:`GroupScheduling`, xdist's own
  ``pytest_xdist_make_scheduler`` hook): the tests of a module that defines a module- or
  class-scoped fixture (computed once, not once per worker), and every timing-sensitive module
  (:data:`TIMING`) in one group ``timing``: they run one after another on one worker, never two
  at once. Groups are found from the node ids on the controller, not from ``xdist_group`` marks:
  xdist 3.8 turns a mark into a group by rewriting the node id, which pytest 9.2 no longer reads
  (pytest-xdist issue 1386: the marks are silently ignored);
* gives each worker one BLAS thread (threadpoolctl, checked after it is set and again at the end):
  two workers each running a multi-threaded BLAS on two cores would oversubscribe them;
* prints, at the end of every run (serial or parallel), the wall time, the CPU time (user + sys of
  the controller, the workers and every subprocess they waited for) and the peak resident memory:
  ``ru_maxrss`` of the controller and of each worker (reported through xdist's ``workeroutput``),
  of the largest subprocess each started (``RUSAGE_CHILDREN``), and the tests that raised a
  process's peak the most (``ru_maxrss`` before and after each test). The slowest tests are
  printed by pytest itself (``--durations=25``).

Peak memory of processes that ran at the same time is not the sum of their peaks; the sum is
printed as an upper bound, the largest single process as a lower one.
"""

from __future__ import annotations

import ast
import functools
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: modules whose tests are timed or start Dask clusters (why, for the reader): one xdist group, run
#: one after another on one worker
TIMING = {
    "tests/cli/test_budgets.py": "time budgets: a run cut short ends within its budget + 5 s (the seconds asserted)",
    "tests/cli/test_bad_input.py": "the cases that run (answered, or cut by their own --timeout / --max-seconds) "
                                   "end within their budget + 5 s (a SIGALRM in the child); the refusals are "
                                   "in test_bad_input_refusals.py, in parallel",
    "tests/distributed/test_cluster.py": "starts Dask clusters of worker processes (5-15 s of start-up under "
                                         "load, beside no other heavy test) and signals their process group",
}
TIMING_GROUP = "timing"
#: modules whose tests read what an earlier test of the module recorded (why, for the reader): each
#: runs whole on one worker, in its order
ORDERED = {
    "tests/convergence/test_coercivity_split.py": "test_property_instances_mostly_certify counts the instances "
                                                  "the property test before it recorded",
}
#: fixture scopes that outlive one test: a module defining one runs whole on one worker
SHARED_SCOPES = frozenset({"module", "class", "package", "session"})

#: what a worker reports (``workeroutput``) and the controller reads
_KEYS = ("maxrss_kb", "children_maxrss_kb", "cpu_s", "children_cpu_s", "blas_threads")


@functools.cache
def defines_shared_fixture(path: Path) -> bool:
    """Whether the Python file ``path`` defines a fixture whose scope is in :data:`SHARED_SCOPES`
    (``@pytest.fixture(scope="module")`` or ``@fixture(scope=...)``; read with :mod:`ast`)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and any(
                        kw.arg == "scope" and isinstance(kw.value, ast.Constant) and kw.value.value in SHARED_SCOPES
                        for kw in dec.keywords):
                    return True
    return False


def group_of(nodeid: str, rootpath: Path) -> str | None:
    """The group of the test ``nodeid``: ``timing`` for the modules of :data:`TIMING`, the module's
    path for a module of :data:`ORDERED` or one that defines a shared fixture, else ``None`` (the test goes to whichever
    worker is free)."""
    module = nodeid.split("::", 1)[0]
    if module in TIMING:
        return TIMING_GROUP
    if module in ORDERED or (module.endswith(".py") and defines_shared_fixture(rootpath / module)):
        return module
    return None


def _scheduler_base():
    from xdist.scheduler import LoadGroupScheduling

    return LoadGroupScheduling


def make_scheduler(config: pytest.Config, log):
    """xdist's ``loadgroup`` scheduler, with the groups of :func:`group_of` added to any
    ``xdist_group`` mark xdist itself could still read. Work units are handed out largest first
    (xdist's ``loadscopereorder``), so the long groups start at once and the single tests fill in."""

    class GroupScheduling(_scheduler_base()):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            if scope != nodeid:  # an "@group" suffix xdist wrote
                return scope
            return group_of(nodeid, config.rootpath) or nodeid

    return GroupScheduling(config, log)


def _usage(who: int) -> tuple[float, float]:
    """``(peak RSS in kB, user + sys CPU seconds)`` of ``who`` (``RUSAGE_SELF`` / ``_CHILDREN``)."""
    ru = resource.getrusage(who)
    scale = 1 / 1024 if sys.platform == "darwin" else 1.0  # macOS reports bytes, Linux kilobytes
    return ru.ru_maxrss * scale, ru.ru_utime + ru.ru_stime


def limit_blas_threads() -> int:
    """One BLAS (and OpenMP) thread in this process, for every library loaded now (numpy's and
    scipy's own OpenBLAS are loaded first); returns the largest thread count threadpoolctl then
    sees, which must be 1."""
    import numpy  # noqa: F401  (loads numpy's BLAS)
    import scipy.linalg  # noqa: F401  (scipy ships its own OpenBLAS)
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(limits=1)
    return blas_threads(threadpool_info())


def blas_threads(info: list[dict]) -> int:
    """The largest ``num_threads`` among the thread pools ``info`` lists (0 if none)."""
    return max((int(lib.get("num_threads") or 0) for lib in info), default=0)


#: how many of the tests that raised a process's peak RSS the summary names
RAISERS_SHOWN = 5


@dataclass(eq=False)  # hashed by identity: pytest keeps its plugins in sets
class SuiteRun:
    """The plugin: grouping, the BLAS limit, and the end-of-run summary."""

    start: float = field(default_factory=time.perf_counter)
    workers: dict[str, dict] = field(default_factory=dict)
    #: ``(peak RSS after, its increase, node id)`` of every test that raised this process's peak
    raisers: list[tuple[float, float, str]] = field(default_factory=list)
    #: seconds of tests (setup + call + teardown) and tests run, by worker (the controller: xdist's reports)
    busy: dict[str, list[float]] = field(default_factory=dict)

    # ------------------------------------------------------------------ a worker (or a serial run)

    def pytest_configure(self, config: pytest.Config) -> None:
        if hasattr(config, "workerinput"):
            threads = limit_blas_threads()
            if threads != 1:
                raise pytest.UsageError(f"threadpoolctl left {threads} BLAS threads in an xdist worker, not 1")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        before = _usage(resource.RUSAGE_SELF)[0]
        yield
        after = _usage(resource.RUSAGE_SELF)[0]
        if after > before:  # this test (setup, call or teardown) raised the process's peak
            self.raisers.append((after, after - before, item.nodeid))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        config = session.config
        if hasattr(config, "workeroutput"):  # read before xdist sends workeroutput (after the yield)
            from threadpoolctl import threadpool_info

            rss, cpu = _usage(resource.RUSAGE_SELF)
            crss, ccpu = _usage(resource.RUSAGE_CHILDREN)
            config.workeroutput.update(maxrss_kb=rss, children_maxrss_kb=crss, cpu_s=cpu, children_cpu_s=ccpu,
                                       blas_threads=blas_threads(threadpool_info()),
                                       raisers=[list(r) for r in _largest(self.raisers)])
        yield

    # ------------------------------------------------------------------ the controller

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):
        if config.getvalue("dist") == "loadgroup":
            return make_scheduler(config, log)
        return None  # another --dist asked for: xdist's own

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        out = getattr(node, "workeroutput", None) or {}
        if all(k in out for k in _KEYS):
            self.workers[node.gateway.id] = {k: out[k] for k in (*_KEYS, "raisers")}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # set by xdist on the controller
        if node is not None:
            b = self.busy.setdefault(node.gateway.id, [0.0, 0])
            b[0] += report.duration
            b[1] += report.when == "call"

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config) -> None:
        if hasattr(config, "workerinput"):
            return
        for line in self.summary_lines(time.perf_counter() - self.start):
            terminalreporter.write_line(line)

    def summary_lines(self, wall: float) -> list[str]:
        """The run's cost, one fact a line (see the module docstring for what each counts)."""
        rss, cpu = _usage(resource.RUSAGE_SELF)
        crss, ccpu = _usage(resource.RUSAGE_CHILDREN)
        procs = {"controller": rss}
        # the controller's children are the workers (counted from their own report) or, serial, the
        # subprocesses of the tests
        total_cpu = cpu + (sum(w["cpu_s"] + w["children_cpu_s"] for w in self.workers.values())
                           if self.workers else ccpu)
        sub = {"controller": crss} if not self.workers else {}
        raisers = [(*r, "controller") for r in self.raisers]
        for name, w in sorted(self.workers.items()):
            procs[name] = w["maxrss_kb"]
            sub[name] = w["children_maxrss_kb"]
            raisers += [(*r, name) for r in w.get("raisers", ())]
        mb = 1 / 1024
        big = max(procs, key=procs.get)
        lines = [
            "=" * 30 + " suite run " + "=" * 30,
            f"wall {wall:.0f} s; CPU user+sys {total_cpu:.0f} s ({total_cpu / max(wall, 1e-9):.2f} cores busy on "
            f"average); {len(self.workers) or 'no'} xdist workers",
            "peak RSS (MB): " + ", ".join(f"{k} {v * mb:.0f}" for k, v in procs.items())
            + "; largest subprocess of each: " + ", ".join(f"{k} {v * mb:.0f}" for k, v in sub.items()),
            f"peak memory of the run: at least {procs[big] * mb:.0f} MB ({big}), at most "
            f"{(sum(procs.values()) + sum(sub.values())) * mb:.0f} MB (the sum of the peaks above; on Linux a "
            "subprocess's peak includes what its parent held when it forked)",
        ]
        if raisers:
            lines.append("tests that raised a process's peak RSS most (MB): " + "; ".join(
                f"{node} +{inc * mb:.0f} to {after * mb:.0f} ({who})" for after, inc, node, who in _largest(raisers)))
        if self.busy:  # how evenly the scheduler shared the work
            lines.append("time in tests by worker: " + ", ".join(
                f"{k} {v[0]:.0f} s ({v[1]} tests)" for k, v in sorted(self.busy.items())))
        if self.workers:
            threads = sorted({w["blas_threads"] for w in self.workers.values()})
            lines.append("BLAS threads per worker at the end (threadpoolctl): " + ", ".join(map(str, threads)))
        return lines


def _largest(raisers: list) -> list:
    """The :data:`RAISERS_SHOWN` entries with the largest increase of a peak (1 MB or more)."""
    return sorted((r for r in raisers if r[1] >= 1024), key=lambda r: -r[1])[:RAISERS_SHOWN]  # >= 1 MB
