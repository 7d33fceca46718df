"""Tests of the time budget's abandoned calls (ntkcheck._budget.run).

A call that :func:`~ntkcheck._budget.run` stops waiting for at the deadline is abandoned: its result
is dropped, and its thread stops at the next checkpoint it passes. Before, such threads ran on: after
one budget-cut ``flow`` at d = 384 the process kept both cores busy (9.7 s of CPU in 5 s of sleep,
for more than 40 s), beside whatever the user (or the next test) did.

Each test waits for a thread with ``join(timeout=...)``: the timeouts are ten times or more what the
step between two checkpoints takes here (10 ms), so that a loaded machine does not fail them, and far
below the 30 s the unstopped work would take (the mutation: without the abandonment signal the
thread is still alive at the join's timeout).
"""

from __future__ import annotations

import threading
import time

import pytest

from ntkcheck import _budget

#: how long the work below would run if nothing stopped it
_WORK = 30.0


def _work(log: list[str]) -> str:
    """``_WORK`` seconds of 10 ms steps, a checkpoint between two steps; ``log`` says how it ended."""
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < _WORK:
            _budget.checkpoint("a step of the test's work")
            time.sleep(0.01)
    except _budget.OutOfTime as exc:
        log.append(str(exc))
        raise
    log.append("finished")
    return "done"


def _thread(prefix: str) -> threading.Thread:
    found = [t for t in threading.enumerate() if t.name.startswith(prefix)]
    assert len(found) == 1, [t.name for t in threading.enumerate()]
    return found[0]


def test_an_abandoned_call_stops_at_its_next_checkpoint():
    log: list[str] = []
    t0 = time.perf_counter()
    with _budget.scope(_budget.Budget(0.2), stoppable=True), pytest.raises(_budget.OutOfTime, match="abandoned"):
        _budget.run(lambda: _work(log), "the abandoned test work")
    assert time.perf_counter() - t0 < 0.2 + 5.0  # the caller got control back at the deadline
    worker = _thread("ntkcheck: the abandoned test work")
    worker.join(timeout=10.0)
    assert not worker.is_alive(), "the abandoned call ran on"
    assert len(log) == 1 and "abandoned" in log[0], log


def test_a_call_abandoned_inside_an_abandoned_call_stops_too():
    """The inner call's thread is told through the outer call's signal (its own caller, the outer
    thread, is itself stopped before the inner deadline)."""
    log: list[str] = []

    def outer() -> str:
        with _budget.scope(_budget.Budget(60.0), stoppable=True):
            return _budget.run(lambda: _work(log), "the inner test work")

    with _budget.scope(_budget.Budget(0.2), stoppable=True), pytest.raises(_budget.OutOfTime):
        _budget.run(outer, "the outer test work")
    inner = _thread("ntkcheck: the inner test work")
    inner.join(timeout=10.0)
    assert not inner.is_alive()
    assert log and "abandoned" in log[0], log
    for t in threading.enumerate():
        if t.name == "ntkcheck: the outer test work":  # it ends when the inner call does
            t.join(timeout=10.0)
            assert not t.is_alive()


def test_a_call_that_finishes_in_time_is_never_stopped():
    """The signal is sent only on abandonment: checkpoints of a call that returns before its deadline
    raise nothing, and its value comes back."""
    def short() -> str:
        for _ in range(5):
            _budget.checkpoint("a step of the short work")
            time.sleep(0.01)
        return "done"

    with _budget.scope(_budget.Budget(30.0), stoppable=True):
        assert _budget.run(short, "the short test work") == "done"
    # and outside any stoppable scope a checkpoint is nothing, in this thread or in another
    _budget.checkpoint("no scope")
    errors: list[BaseException] = []

    def other() -> None:
        try:
            _budget.checkpoint("another thread")
        except BaseException as exc:  # noqa: BLE001 (collected for the assertion)
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert not errors


def test_a_call_whose_caller_is_interrupted_is_abandoned_too(monkeypatch):
    """Ctrl-C while the caller waits (a KeyboardInterrupt out of the join, simulated here): the
    interrupt reaches the caller, and the call stops at its next checkpoint instead of running on
    (mutation: signalling only on the deadline leaves the thread alive at the join's timeout)."""
    log: list[str] = []
    real_join = threading.Thread.join

    def interrupted_join(self, timeout=None):
        if self.name == "ntkcheck: the interrupted test work":
            time.sleep(0.1)
            raise KeyboardInterrupt
        return real_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", interrupted_join)
    with _budget.scope(_budget.Budget(60.0), stoppable=True), pytest.raises(KeyboardInterrupt):
        _budget.run(lambda: _work(log), "the interrupted test work")
    monkeypatch.setattr(threading.Thread, "join", real_join)
    worker = _thread("ntkcheck: the interrupted test work")
    worker.join(timeout=10.0)
    assert not worker.is_alive(), "the interrupted call ran on"
    assert len(log) == 1 and "abandoned" in log[0], log
