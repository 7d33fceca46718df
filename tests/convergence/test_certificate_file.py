"""The certificate file of ``flow --certificate-out`` and its re-check by the standalone verifier (issue 31 item 4).

The verifier re-derives the loss and the NTK spectrum at the centre in its own interval arithmetic and the
theorem's inequality chain in exact rationals. A forgery suite: every recorded number nudged to the unsafe
side (a larger lambda_min, a smaller lambda_max or loss, a faster rate, a larger start radius, a smaller
displacement bound), and the centre moved with the digest recomputed (the claim is then about another point,
whose loss exceeds the recorded one): each is refused (exit 1). The true file verifies (exit 0), and with a
from-FixUp statement its tube is reported unchecked (exit 3), never verified.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from ntkcheck.certificate_files import write_certificate
from ntkcheck.convergence.certificate_record import flow_certificate_record
from ntkcheck.verify import digest, verify_file, verify_record

SAMPLES = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]


@pytest.fixture(scope="module")
def record(tmp_path_factory, beyond_fixup):
    """The record of the run of ``ntkcheck flow`` on these samples (``conftest.beyond_fixup``, once per process: the
    result of ``local_convergence(SAMPLES, heads=2, layers=2, eps=0.3, loss="readout", n_records=11,
    time_end=120.0, track_ntk=1)``)."""
    res = beyond_fixup.result
    assert res.heads == 2 and res.layers == 2 and res.eps == 0.3
    assert res.from_fixup is not None and res.from_fixup.certified
    path = tmp_path_factory.mktemp("cert") / "flow.json"
    write_certificate(path, flow_certificate_record(res, SAMPLES))
    return json.loads(path.read_text())


def test_the_written_claim_verifies_and_the_tube_is_unchecked(record, tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(record))
    code, rows = verify_file(p)
    status = {cid: st for cid, st, _ in rows}
    assert status["convergence"] == "verified" and status["from FixUp"] == "unchecked" and code == 3


@pytest.mark.parametrize("field, factor", [("lambda_min", 1.01), ("lambda_max", 0.99), ("loss_centre", 0.5),
                                           ("rate", 1.01), ("start_radius", 10.0), ("displacement_bound", 0.5),
                                           ("sigma_low", 1.5), ("u_start", 0.5), ("deviation", 0.5),
                                           ("hessian_bound", 0.5), ("beta_start", 0.5)])
def test_forged_numbers_are_refused(record, field, factor):
    """Each recorded number moved to the unsafe side (by the factor given) is refused: exit 1."""
    forged = copy.deepcopy(record)
    claim = forged["claims"][0]
    claim[field] = claim[field] * factor
    code, rows = verify_record(forged)
    assert code == 1 and rows[0][1] == "refuted", rows


def test_consistent_forgery_of_the_remainder_is_refused(record):
    """The Taylor remainder halved and sigma_low raised to match (a consistent chain promising a faster rate): the
    verifier re-derives beta(r) from the propagated bound and refuses it."""
    forged = copy.deepcopy(record)
    claim = forged["claims"][0]
    claim["deviation"] *= 0.5
    claim["sigma_low"] = claim["sigma_star"] - claim["deviation"]
    claim["rate"] = 2 * claim["sigma_low"] ** 2 * (1 - 1e-12)
    code, rows = verify_record(forged)
    assert code == 1 and "propagated" in rows[0][2], rows


def test_moved_centre_with_a_new_digest_is_refused(record):
    """The centre moved (digest recomputed, so the file is consistent): the recorded loss no longer bounds it."""
    forged = copy.deepcopy(record)
    c = forged["inputs"]["centre"]
    c["data"] = [v + 0.05 for v in c["data"]]
    forged["digest"] = digest(forged["inputs"], {})
    code, rows = verify_record(forged)
    assert code == 1 and rows[0][1] == "refuted", rows


@pytest.mark.parametrize("hidden, expected", [(["flint"], "verified"), (["flint", "mpmath"], "unchecked")])
def test_the_claim_without_python_flint(record, tmp_path, hidden, expected):
    """The verifier runs on its own (``ntkcheck/`` on ``sys.path``, nothing else of ntkcheck): without python-flint
    the spectrum is proved with mpmath's intervals (verified); without both libraries the claim is "unchecked",
    never refuted (exit 3). Mutation: an ImportError reported as a failed proof would give exit 1."""
    import subprocess
    import sys
    from pathlib import Path

    p = tmp_path / "c.json"
    p.write_text(json.dumps(record))
    root = Path(__file__).resolve().parents[2] / "ntkcheck"
    probe = (f"import json, sys\nfor m in {hidden!r}: sys.modules[m] = None\nsys.path.insert(0, {str(root)!r})\n"
             f"import verify\nprint(json.dumps(verify.verify_file({str(p)!r})))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    code, rows = json.loads(out.stdout.strip().splitlines()[-1])
    status = {cid: st for cid, st, _ in rows}
    assert code == 3 and status["convergence"] == expected, rows
