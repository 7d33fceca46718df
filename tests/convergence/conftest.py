"""Fixtures of the convergence tests: what several tests of one process share (``_memo.py``)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest


@pytest.fixture
def shared_fixup(monkeypatch):
    """The loss-independent pieces of the FixUp certificate (proved spectrum, second-derivative scan, coercivity
    setup and profiles) computed once per process for each model (``_memo.share_fixup_certificate``): the README
    model's tests run it at a dozen initial losses, steps and integrators."""
    from _memo import share_fixup_certificate

    share_fixup_certificate(monkeypatch)


#: the small model beyond its FixUp certificate (2 heads, d = 2, 2 layers, 20 parameters) at eps = 0.3: the
#: command proves convergence from FixUp (hand-off + tube)
SMALL_SAMPLES = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]
SMALL_ARGS = ["--heads", "2", "--layers", "2", "--eps", "0.3", "--time", "120", "--records", "11", "--ntk-records",
              "1", "--max-seconds", "600"]


@dataclass(frozen=True)
class FlowRun:
    """One ``ntkcheck flow --json --plot --certificate-out`` run: its exit status, JSON, files, and the
    :class:`~ntkcheck.convergence.local.LocalConvergence` the command printed (recorded from the call)."""

    code: int
    json: dict
    png: Path
    certificate: Path
    result: Any


@pytest.fixture(scope="session")
def beyond_fixup(tmp_path_factory) -> FlowRun:
    """``ntkcheck flow TOKENS.npy`` with :data:`SMALL_ARGS` on :data:`SMALL_SAMPLES`, run in-process once per
    process for test_flow_certificate_cli, test_from_fixup and test_certificate_file (each checks its own part
    of the one result: JSON and plot, the tube against an independent integration, the certificate file)."""
    import ntkcheck.convergence.local as local
    from ntkcheck.cli import main

    d = tmp_path_factory.mktemp("flow")
    np.save(d / "toks.npy", np.stack(SMALL_SAMPLES))
    png, cert = d / "flow.png", d / "cert.json"
    seen = []
    real = local.local_convergence

    def record(*a, **k):
        seen.append(real(*a, **k))
        return seen[-1]

    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(buf):
        mp.setattr(local, "local_convergence", record)
        code = main(["flow", str(d / "toks.npy"), *SMALL_ARGS, "--json", "--plot", str(png), "--certificate-out",
                     str(cert)])
    assert len(seen) == 1
    return FlowRun(code, json.loads(buf.getvalue()), png, cert, seen[0])
