"""Issue 30 item 6: ``sweep --one-gram`` holds ``--max-seconds``.

``sweep FILE --one-gram --certify --heads 6000 --workers 2 --max-seconds 3`` (M = 3200, d = 8)
answered after 34-38 s: its two product tasks (3000 heads on a 3200 x 3200 tile, half a minute each)
were neither estimated before they started nor abandoned at the deadline, and the close of the
cluster waited for them. Now every product task is estimated before any is submitted (none starts
that cannot finish in the time left), the client waits with the deadline and cancels what is pending,
and the worker processes of a cluster started for the call are killed on the way out. Only the
budget contract is timed (elapsed <= budget + 5 s, the contract of ``tests/cli/test_budgets.py``),
never a speed.

Mutations this file was run against (one run each, load 7 on 2 cores): without the estimates the
CLI case waits for the tasks (34-38 s, the issue); with the client's wait not bounded by the deadline
(plain ``as_completed``) the API case ends after 50.6 s instead of 12.1 s; without the kill of the
workers the close adds about 4 s (the nanny's own timeout: 16.2 s, inside the slack, so that
mutation is not caught here).
"""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest

pytest.importorskip("distributed")

import ntkcheck.distributed._deadline as deadline  # noqa: E402
from ntkcheck._budget import Budget, OutOfTime, scope  # noqa: E402
from ntkcheck.cgf import as_laws  # noqa: E402
from ntkcheck.cli import main  # noqa: E402
from ntkcheck.distributed import distributed_gram  # noqa: E402
from ntkcheck.ntk.gram_matrix.features import DEFAULT_CHUNK, init_heads  # noqa: E402

SLACK = 5.0


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """M = 3200 distinct atoms in d = 8 (32 samples of 100 tokens): the issue's size."""
    path = tmp_path_factory.mktemp("one_gram") / "m3200.npy"
    np.save(path, np.random.default_rng(0).standard_normal((32, 100, 8)) / np.sqrt(8))
    return str(path)


def test_the_issue_command_answers_within_its_budget(capsys, big):
    """Exit 3, the reason names the task estimated and not started (or the step cut), within 3 + 5 s."""
    t0 = time.perf_counter()
    code = main(["sweep", big, "--one-gram", "--certify", "--heads", "6000", "--workers", "2", "--max-seconds", "3"])
    elapsed = time.perf_counter() - t0
    out = capsys.readouterr().out
    assert elapsed <= 3 + SLACK, f"{elapsed:.1f} s"
    assert code == 3 and "not computed, not certified" in out, out
    assert "not started" in out or "abandoned" in out or "start-up" in out, out


def test_a_task_running_at_the_deadline_is_abandoned(big, monkeypatch):
    """With every estimate planted at 0 the tasks start (the budget of 12 s outlasts the cluster's
    start-up); a product task of 3000 heads takes half a minute or more. At the deadline the client
    cancels what is pending, the LocalCluster's worker processes are killed, and OutOfTime reaches
    the caller within 12 + 5 s; no worker process outlives the call."""
    monkeypatch.setattr(deadline, "tile_estimates", lambda blocks, heads, c, chunk: [0.0])
    monkeypatch.setattr(deadline, "start_vector_seconds", lambda *a, **k: 0.0)
    laws = as_laws(list(np.load(big)))
    t0 = time.perf_counter()
    with pytest.raises(OutOfTime) as got, scope(Budget(12.0), stoppable=True):
        distributed_gram(laws, 6000, workers=2, threads=1, certify=True)
    elapsed = time.perf_counter() - t0
    assert elapsed <= 12 + SLACK, f"{elapsed:.1f} s"
    assert "start-up" in got.value.stage or "Dask" in got.value.stage or "worker" in got.value.stage
    time.sleep(0.5)
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]


def test_estimates_scale_with_the_work():
    """The estimate of a product task grows with its heads and its tile (more columns, more rows):
    a check on the formula's inputs, not on a speed (both estimates come from the same timed rates)."""
    laws = as_laws(list(np.random.default_rng(1).standard_normal((8, 50, 4))))
    heads = init_heads(64, 4, seed=0)
    small = deadline.tile_estimates([laws[:4], laws[4:]], heads, 16, DEFAULT_CHUNK)
    assert len(small) == 3 * 4  # 3 tiles x 4 head blocks
    rate, threads = 1e-8, 1
    one = deadline.product_seconds(laws[:4], None, heads, 16, rate, threads)
    assert deadline.product_seconds(laws[:4], None, heads, 32, rate, threads) > one
    assert deadline.product_seconds(laws, None, heads, 16, rate, threads) > one
