"""Issue 30 item 7: bad input gets one line on stderr, never a numpy warning ahead of the refusal.

``screen`` on a token of norm 1e308 printed three "overflow encountered" lines (the dependence
structure's moments), then the error. The commands now refuse the data before any float64 step
runs on them. The CLI runs under ``python -W error`` (a warning raised as an exception would be
an internal error, exit 4) and its stderr is read whole: once as the issue's command in a fresh
interpreter, and for every command and case in-process under the same "error" filter. Why the refusal is right is checked
independently: the squared norm, in integers, exceeds the float64 maximum (the bound the Gram's
entries reach).
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

import ntkcheck as nk
import ntkcheck.screening as screening
from ntkcheck.errors import InputError

#: one sample with a token of norm 1e308 (the issue's case), and one at 1.4e200 (R^2 = 2e400)
CASES = {
    "norm-1e308": np.array([[[1e308, 0.0], [0.0, 1.0]], [[0.5, 0.5], [1.0, 1.0]]]),
    "norm-1e200": np.array([[[1e200, 1e200], [0.0, 1.0]], [[0.5, 0.5], [1.0, 1.0]]]),
}
COMMANDS = (["screen"], ["gram"], ["sweep", "--serial", "--heads", "8"])


def _squared_norm_exceeds_float64(x: np.ndarray) -> bool:
    """Exact: max_j |x_j|^2 (Fraction of the doubles) above the largest double."""
    top = max(sum(Fraction(float(v)) ** 2 for v in row) for s in x for row in s)
    return top > Fraction(np.finfo(np.float64).max)


def _assert_one_line_refusal(code: int, stderr: str, stdout: str) -> None:
    assert code == 2, stdout + stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and "beyond float64" in lines[0], stderr
    assert "warning" not in stderr.lower()


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_one_line_and_no_warning_before_the_refusal(name, cmd, tmp_path, capsys):
    """In-process (``ntkcheck.cli.main``, stderr captured whole) under an "error" filter for every
    warning, as ``python -W error`` sets it: a numpy warning on the way would be printed as a
    warning line by the CLI (it shows every warning as one line), or raised (an internal error, exit
    4); either fails here. The interpreter's own ``-W error`` run is the test below."""
    from ntkcheck.cli import main

    x = CASES[name]
    assert _squared_norm_exceeds_float64(x)  # the Gram's entries (up to R^2) are beyond float64
    np.save(tmp_path / "t.npy", x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main([*cmd, str(tmp_path / "t.npy")])
    out, err = capsys.readouterr()
    _assert_one_line_refusal(code, err, out)


def test_the_issue_command_under_python_w_error(tmp_path):
    """The issue's command itself, ``python -W error -m ntkcheck screen t.npy`` on the token of norm
    1e308, in a fresh interpreter: exit 2, one line, no warning (imports and argument parsing included)."""
    np.save(tmp_path / "t.npy", CASES["norm-1e308"])
    out = subprocess.run([sys.executable, "-W", "error", "-m", "ntkcheck", "screen", "t.npy"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    _assert_one_line_refusal(out.returncode, out.stderr, out.stdout)


def test_the_api_refuses_without_a_warning():
    """The API: screen raises InputError and no warning is emitted on the way (recorded, not shown)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(InputError, match="beyond float64"):
            nk.screen(list(CASES["norm-1e308"]), heads=8)
    assert not seen, [str(w.message) for w in seen]


def test_mutation_the_late_refusal_leaks_warnings(monkeypatch):
    """Mutation: without the early range check, the structure's moments overflow first (numpy
    RuntimeWarnings), and the refusal only comes from the Gram: the test above sees them."""
    monkeypatch.setattr(screening, "check_gram_range", lambda laws: None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(InputError):
            nk.screen(list(CASES["norm-1e308"]), heads=8)
    assert any(issubclass(w.category, RuntimeWarning) and "overflow" in str(w.message) for w in seen)
