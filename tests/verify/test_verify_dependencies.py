"""Issue 33: the standalone verifier runs with numpy and mpmath only; python-flint is optional and used
when present; a missing dependency is "cannot re-check here" (exit 3), never exit 1 "refuted".

Each test runs the verifier as a top-level package (``import verify`` with ``ntkcheck/`` on the path)
in a subprocess whose ``sys.modules`` hides a library (``sys.modules['flint'] = None`` makes
``import flint`` raise ImportError, as on a machine without it), on the writer's files of every kind
(tests/verify/verify_bases.py). Reference: the same files verified with python-flint in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from verify_bases import bases_sealed

from ntkcheck import verify

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("deps")
    out = {}
    for i, (name, rec) in enumerate(bases_sealed().items()):
        out[name] = d / f"c{i}.json"
        out[name].write_text(json.dumps(rec))
    return out


def _run_hidden(hidden: list[str], paths: list[Path]) -> tuple[dict[str, int], list[str]]:
    probe = (
        "import json, sys\n"
        f"for m in {hidden!r}: sys.modules[m] = None\n"
        f"sys.path.insert(0, {str(ROOT / 'ntkcheck')!r})\n"
        "import verify\n"
        f"codes = {{p: verify.verify_file(p)[0] for p in {[str(p) for p in paths]!r}}}\n"
        "loaded = sorted(m for m in ('flint', 'mpmath') if sys.modules.get(m) is not None)\n"
        "print(json.dumps([codes, loaded]))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 0, res.stderr
    codes, loaded = json.loads(res.stdout.strip().splitlines()[-1])
    return codes, loaded


def test_without_python_flint_every_file_is_verified(files):
    """With flint hidden, mpmath's intervals and pure-Python exact algebra re-check every file as
    python-flint does (exit 0 for each of the 18 kinds, the ball LDL^T below float64 resolution among them), and flint is never loaded."""
    with_flint = {name: verify.verify_file(p)[0] for name, p in files.items()}
    assert set(with_flint.values()) == {0}, with_flint
    codes, loaded = _run_hidden(["flint"], list(files.values()))
    assert loaded == ["mpmath"]
    assert {name: codes[str(p)] for name, p in files.items()} == with_flint


def test_without_flint_and_mpmath_nothing_is_refuted(files):
    """With both hidden, the claims that need ball arithmetic (a Gram's enclosure, a ball bound's
    sigma_min) are "cannot re-check here" (exit 3); the exact ones (equal scores among them) are still
    verified (exit 0); none
    is refuted (exit 1). Mutation: an ImportError reported as a failed proof would give exit 1."""
    codes, loaded = _run_hidden(["flint", "mpmath"], list(files.values()))
    assert loaded == []
    by_name = {name: codes[str(p)] for name, p in files.items()}
    assert 1 not in by_name.values(), by_name
    balls = {n for n in by_name if n.startswith(("gram: lower", "gram: bound", "screen")) or "ball bound" in n}
    assert {n for n, c in by_name.items() if c == 3} == balls, by_name
    assert all(c == 0 for n, c in by_name.items() if n not in balls), by_name
