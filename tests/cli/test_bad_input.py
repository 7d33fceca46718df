"""The bad-input suite, the cases that run (issue 19 item 5, issue 25 items 3 and 6): every case ends
with one line, a documented exit status, within its budget + 5 s.

The cases, the child process that runs them and the assertions are in ``_bad_input_cases.py`` (read
its docstring). Here: the cases that may be answered or are cut by a budget of their own (a flow under
``--max-seconds``, a decision under ``--timeout``, the 400-sample Arb estimate), whose seconds are
what the budget bounds; they run one after another (the ``timing`` group of ``tests/suite_run.py``).
The refusals are in ``test_bad_input_refusals.py``, in parallel.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bad_input_cases import BY_ID, CASES, TIMED, Case, check, outcomes_of  # noqa: E402


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return outcomes_of(TIMED, tmp_path_factory.mktemp("bad_input"))


def test_the_suite_has_at_least_150_cases():
    """Issue 19: a bad-input suite of at least 150 CLI and API inputs."""
    assert len(CASES) >= 150 and len(BY_ID) == len(CASES), (len(CASES), len(BY_ID))
    assert sum(1 for c in CASES if c.api) >= 30 and sum(1 for c in CASES if c.memory) >= 15


@pytest.mark.parametrize("case", TIMED, ids=[c.id for c in TIMED])
def test_bad_input(case: Case, outcomes):
    check(case, outcomes[case.id])
