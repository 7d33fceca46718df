"""The plugin that runs the suite in parallel (``tests/suite_run.py``), run in a pytest of its own with
two xdist workers: what it groups lands on one worker, each worker has one BLAS thread, and the
summary at the end counts the memory a worker and a subprocess of a test really used.

Mutations this catches: with :func:`suite_run.group_of` returning ``None``, or the scheduler hook
not registered (xdist's own ``loadgroup`` then sees no group under pytest 9.2), the module's two
tests go to different workers; without the BLAS limit a worker sees the machine's thread count (on a
machine with more than one core); a summary that read the controller's own ``RUSAGE_CHILDREN``
in a parallel run, or forgot a worker's subprocesses, misses the 400 MB child; without the
per-test measure the 300 MB test is not named.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest.importorskip("xdist")

HERE = Path(__file__).resolve().parent
MB = 1 << 20

CONFTEST = """
import suite_run

suite_run.TIMING = {"test_timed_a.py": "timed", "test_timed_b.py": "timed"}


def pytest_configure(config):
    config.pluginmanager.register(suite_run.SuiteRun(), "suite-run")
"""

#: each test writes the worker it ran on into a file named after it
WHERE = """
import os
from pathlib import Path


def where(name):
    Path(os.environ["WHERE_DIR"], name).write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))
"""

MODULE_FIXTURE = """
import pytest
from where import where


@pytest.fixture(scope="module")
def shared():
    return 1


def test_first(shared):
    where("first")


def test_second(shared):
    where("second")
"""

TIMED = """
from where import where


def test_{name}():
    where("{name}")
"""

COSTS = """
import subprocess
import sys

import numpy as np
from threadpoolctl import threadpool_info
from where import where


def test_a_worker_allocates_300_mb():
    a = np.ones(300 * 2**20 // 8)  # touched: resident
    assert a.sum() > 0
    where("alloc")


def test_a_subprocess_allocates_400_mb():
    code = "b = bytearray(400 * 2**20); b[::4096] = b'x' * len(b[::4096])"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_blas_thread_in_a_worker():
    assert max(lib["num_threads"] for lib in threadpool_info()) == 1
"""


@pytest.fixture
def run(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    where = tmp_path / "where"
    where.mkdir()
    monkeypatch.setenv("WHERE_DIR", str(where))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), str(pytester.path)]))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(where=WHERE, test_0_module_fixture=MODULE_FIXTURE, test_costs=COSTS,
                        test_timed_a=TIMED.format(name="timed_a"), test_timed_b=TIMED.format(name="timed_b"))
    # without hypothesis's pytest plugin: it imports hypothesis, whose entry point imports ntkcheck, in the
    # controller and each worker (about 5 s of CPU of this test's 11), and no test here draws an example
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                                           "-p", "no:hypothesispytest")
    return result, {p.name: p.read_text() for p in where.iterdir()}


def _numbers(line: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(gw\d+|controller) (\d+)", line)}


def test_groups_workers_blas_and_the_summary(run):
    result, where = run
    result.assert_outcomes(passed=7)
    assert where["first"] == where["second"] != "none"  # the module fixture's tests on one worker
    assert where["timed_a"] == where["timed_b"]  # the timing group on one worker
    out = result.stdout.str()
    assert "2 xdist workers" in out
    assert "BLAS threads per worker at the end (threadpoolctl): 1" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("peak RSS (MB):"))
    workers, children = (_numbers(part) for part in line.split("; largest subprocess of each:"))
    assert set(workers) == {"controller", "gw0", "gw1"} and set(children) == {"gw0", "gw1"}
    assert workers[where["alloc"]] >= 300, line  # the worker that allocated 300 MB
    assert max(children.values()) >= 400, line  # the 400 MB subprocess, whichever worker ran it
    raised = next(ln for ln in out.splitlines() if ln.startswith("tests that raised"))
    inc = re.search(r"test_costs\.py::test_a_worker_allocates_300_mb \+(\d+) to", raised)
    assert inc and int(inc.group(1)) >= 250, raised  # the test that raised its worker's peak, named
    wall, cpu = map(float, re.search(r"wall (\d+) s; CPU user\+sys (\d+) s", out).groups())
    assert wall > 0 and cpu > 0


@pytest.mark.skipif(os.environ.get("NTKCHECK_HYPOTHESIS_PROFILE", "ci") != "ci", reason="another profile asked for")
def test_the_ci_profile_is_the_same_on_every_worker_and_writes_no_database():
    """The CI profile draws every example from a hash of the test (the same in every xdist worker
    and every run) and keeps no example database, which parallel workers would write at once."""
    from hypothesis import settings

    assert settings.default.derandomize and settings.default.database is None


def test_the_plugin_is_hashed_by_identity():
    """pytest keeps plugins in sets: a doctest under ntkcheck/ (outside tests/, so tests/conftest.py is
    removed from its hook proxy) made pluggy hash every plugin, and an ``eq=True`` dataclass is
    unhashable: the run ended in INTERNALERROR. Catches ``@dataclass`` without ``eq=False``."""
    from suite_run import SuiteRun

    a, b = SuiteRun(), SuiteRun()
    assert len({a, b}) == 2 and a != b


def test_every_ordered_module_exists_and_is_one_group():
    """A module whose tests read what an earlier test recorded runs whole on one worker: its group is
    its own path (else under xdist the later test lands on another worker and skips, which counts as
    not held). Catches ORDERED dropped from group_of, or a stale path in it."""
    from suite_run import ORDERED, group_of

    root = HERE.parent
    for module in ORDERED:
        assert (root / module).is_file(), module
        assert group_of(f"{module}::test_x", root) == module
