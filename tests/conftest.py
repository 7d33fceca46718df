"""Test configuration: one fixed hypothesis profile, so every run (CI or local) is reproducible, and
the plugin that runs the suite in parallel and prints what the run cost (``suite_run.py``)."""

from __future__ import annotations

import os

import mpmath
import pytest
from hypothesis import HealthCheck, settings

# derandomize=True: every example comes from a hash of the test, the same on every xdist worker and
# in every run; it also implies database=None, so parallel workers never race on .hypothesis/.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=25,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", derandomize=False, deadline=None, max_examples=100)
settings.load_profile(os.environ.get("NTKCHECK_HYPOTHESIS_PROFILE", "ci"))

# Plots are written to files only; never try to open a window.
os.environ.setdefault("MPLBACKEND", "Agg")

# Reports follow COLUMNS when it is narrower than their width (ntkcheck._text.report_width). The
# suite's text assertions are about the default width, so no ambient COLUMNS reaches them: xdist's
# workers get COLUMNS=80 LINES=24 from execnet, and a shell may export its own. The tests of the
# COLUMNS behaviour set it themselves (monkeypatch, or a subprocess's env).
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

pytest_plugins = ("pytester",)  # tests/test_suite_run.py runs the plugin in a pytest of its own


def pytest_configure(config: pytest.Config) -> None:
    from suite_run import SuiteRun

    config.pluginmanager.register(SuiteRun(), "ntkcheck-suite-run")


@pytest.fixture(autouse=True)
def _reset_mpmath_precision():
    """mpmath's precision is global state: every test starts and ends at the default."""
    mpmath.mp.dps = 15
    yield
    mpmath.mp.dps = 15


@pytest.fixture(autouse=True, scope="session")
def _short_head_law_budget_for_shared_fixtures():
    """The same short head-law budget (below) for the whole session: module- and session-scoped
    fixtures are set up before any per-test fixture, and with the default 20 s each ``screen`` or
    ``gram`` they ran spent its whole budget on the head law (the gate's and the verifier's fixtures:
    about 80 s of setup, in no assertion). Processes forked from a worker inherit it; a new
    interpreter (``subprocess`` of ``python -m ntkcheck``) does not: those runs pass
    ``--head-law-seconds`` where the head law is not what they test."""
    from ntkcheck.ntk.heads import law as head_law

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(head_law, "DEFAULT_SECONDS", 0.3)
        yield


@pytest.fixture(autouse=True)
def _short_head_law_budget(monkeypatch):
    """``screen`` and ``gram`` certify the head law's NTK within ``DEFAULT_SECONDS`` (20 s) unless told
    otherwise; the suite runs them with 0.3 s, so the code path runs everywhere (the pilot round at
    least; the rounds use their whole budget unless the bounds meet first) without costing minutes
    over the suite's ~200 screenings. The tests of the head law pass their own budget or head count."""
    from ntkcheck.ntk.heads import law as head_law

    monkeypatch.setattr(head_law, "DEFAULT_SECONDS", 0.3)
