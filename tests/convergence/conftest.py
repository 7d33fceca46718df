"""Fixtures of the convergence tests: what several tests of one process share (``_memo.py``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def shared_fixup(monkeypatch):
    """The loss-independent pieces of the FixUp certificate (proved spectrum, second-derivative scan, coercivity
    setup and profiles) computed once per process for each model (``_memo.share_fixup_certificate``): the README
    model's tests run it at a dozen initial losses, steps and integrators."""
    from _memo import share_fixup_certificate

    share_fixup_certificate(monkeypatch)
