"""The bad-input suite, the refusals: one line on stderr, exit status 2, within 10 + 5 s, and a
memory case refused by its estimate, under ``RLIMIT_AS`` in the child.

The cases, the child process and the assertions are in ``_bad_input_cases.py`` (read its docstring).
A refusal comes before any computation (a fraction of a second), so these run in parallel with the
other tests; the cases that run to an answer or to their own budget are in ``test_bad_input.py``,
timed one after another.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bad_input_cases import REFUSALS, Case, check, outcomes_of  # noqa: E402


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return outcomes_of(REFUSALS, tmp_path_factory.mktemp("bad_input_refusals"))


@pytest.mark.parametrize("case", REFUSALS, ids=[c.id for c in REFUSALS])
def test_bad_input(case: Case, outcomes):
    check(case, outcomes[case.id])
