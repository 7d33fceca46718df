"""Progress bars (issue 13): one mechanism, real units, shown on a terminal, silenced by --no-progress."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from ntkcheck._progress import progress_bar

NTKCHECK = [sys.executable, "-m", "ntkcheck"]


def _stderr_on_a_terminal(args: list[str]) -> str:
    """Run ``ntkcheck ARGS`` with stderr on a pseudo-terminal; return what the terminal received."""
    master, slave = pty.openpty()
    # a real terminal has a size; a fresh pty is 0 x 0, where tqdm draws nothing
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = dict(os.environ, NTKCHECK_PROGRESS_DELAY="0", COLUMNS="100")
    proc = subprocess.Popen(NTKCHECK + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, env=env, cwd=Path(__file__).resolve().parents[2])
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_gram_shows_a_bar_in_atom_heads_on_a_terminal():
    """stderr is a terminal and nothing was asked: the feature bar shows, counted in atom-heads."""
    err = _stderr_on_a_terminal(["gram"])
    assert "attention features" in err and "atom-head" in err, err[-2000:]


def test_no_progress_silences_the_bar_on_a_terminal():
    err = _stderr_on_a_terminal(["gram", "--no-progress"])
    assert "attention features" not in err, err[-2000:]


def test_flow_time_prints_three_digits(capsys, monkeypatch):
    """The flow bar reads ``1.23/501 flow time``, never the raw float ``0/501.4227993182``."""
    monkeypatch.setenv("NTKCHECK_PROGRESS_DELAY", "0")
    bar = progress_bar(501.4227993182, desc="gradient flow", unit="flow time", enabled=True, fractional=True)
    bar.update(1.23456)
    bar.refresh()
    bar.close()
    err = capsys.readouterr().err
    assert "1.23/501 flow time" in err and "501.42" not in err, err


@pytest.mark.parametrize("enabled, shown", [(True, True), (False, False)])
def test_enabled_forces_the_bar(capsys, monkeypatch, enabled, shown):
    """``enabled`` overrides the terminal test: on in a pipe when asked, off when told."""
    monkeypatch.setenv("NTKCHECK_PROGRESS_DELAY", "0")
    with progress_bar(10, desc="claims", unit="claim", enabled=enabled) as bar:
        bar.update(3)
    assert ("claims" in capsys.readouterr().err) is shown


def test_flow_figure_panels_are_titled_labelled_and_explained():
    """Issue 13: every panel of ``flow --plot`` has a title, both axis labels and a legend
    that names each line (the dashed lines are lambda_0 and the Thm. 8.5 bound)."""
    from types import SimpleNamespace

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ntkcheck.cli.flow import _figure

    s = [0.0, 1.0, 2.0]
    flow = SimpleNamespace(s=s, loss=[1.0, 0.3, 0.1], lambda_min=[0.5, float("nan"), 0.48],
                           displacement=[0.0, 0.01, 0.015])
    res = SimpleNamespace(flow=flow, loss_initial=1.0, lambda_0=0.5, displacement_bound=0.1)
    fig = _figure(res)
    for ax in fig.axes:
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), ax
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(labels) == len(ax.get_lines()) and all(labels), labels
    plt.close(fig)
