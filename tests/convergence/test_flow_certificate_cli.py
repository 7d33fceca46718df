"""``ntkcheck flow`` with the certificate of the run (issue 31 item 4): JSON, plot, certificate file, budget.

A small model (2 heads, d = 2, 2 layers, 20 parameters) at eps = 0.3, beyond its FixUp certificate: the command
proves convergence from FixUp (hand-off + tube). Its JSON validates against the flow schema and carries the
hand-off and the tube; the plot has the tube panel and the hand-off on the loss panel (the lines drawn are the
certified numbers of the JSON); the certificate file is re-checked by the standalone verifier as a separate
process (exit 3: the centred claim verified, the tube reported unchecked, never verified). A tube with no time
left stops at once and says that the time budget stopped it (not "room" or "certificate").
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

SAMPLES = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6]])]  # conftest.SMALL_SAMPLES


@pytest.fixture
def run(beyond_fixup):
    """The command's run (``conftest.beyond_fixup``: ``flow TOKENS.npy --heads 2 --layers 2 --eps 0.3 --time 120
    --records 11 --ntk-records 1 --json --plot --certificate-out``, once per process)."""
    r = beyond_fixup
    return r.code, r.json, r.png, r.certificate


def test_json_validates_and_carries_the_statement_from_fixup(run):
    import jsonschema

    from ntkcheck.cli._args import load_schema

    code, d, _, cert = run
    jsonschema.validate(d, load_schema("flow"))
    fx, ho = d["from_fixup"], d["handoff"]
    assert code == 0 and not d["certificate"]["certified"] and ho["found"] and ho["holds_on_run"] is True
    assert fx["certified"] and fx["limiting"] == "" and 0 < fx["radius"] < fx["room"], fx["message"]
    assert fx["certificate"]["start_radius"] >= fx["radius"] and d["certificate_out"] == str(cert)
    tube = fx["tube"]
    assert tube["complete"] and tube["s"][0] == 0 and tube["s"][-1] == pytest.approx(fx["s_k"], rel=1e-12)


def test_plot_draws_the_tube_the_handoff_and_the_envelope(run, beyond_fixup):
    """The figure is redrawn (``_figure``) from the result object the command plotted and printed (recorded from
    its call of ``local_convergence``), and its lines compared with the JSON."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ntkcheck.cli.flow import _figure

    _, d, png, _ = run
    assert png.stat().st_size > 1000
    fig = _figure(beyond_fixup.result)
    assert len(fig.axes) == 4
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("hand-off s_k") for t in labels) and any("guaranteed after s_k" in t for t in labels)
    radius = [ln for ln in fig.axes[3].get_lines() if ln.get_label().startswith("tube radius")][0]
    assert radius.get_ydata()[-1] == d["from_fixup"]["tube"]["radius"][-1]
    room = [ln for ln in fig.axes[3].get_lines() if ln.get_label().startswith("room")][0]
    assert room.get_ydata()[0] == d["from_fixup"]["room"]
    plt.close(fig)


def test_the_certificate_file_is_rechecked_by_the_standalone_verifier(run):
    _, _, _, cert = run
    out = subprocess.run([sys.executable, "-m", "ntkcheck.verify", str(cert)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "convergence: verified" in out.stdout and "from FixUp: unchecked" in out.stdout, out.stdout


def test_a_spent_budget_stops_the_tube_and_says_so():
    from ntkcheck.convergence import local_convergence
    from ntkcheck.convergence.enclosure._model import model_of
    from ntkcheck.convergence.from_fixup import from_fixup
    from ntkcheck.dynamics import init_params

    res = local_convergence(SAMPLES, heads=2, layers=2, eps=0.3, loss="readout", n_records=11, time_end=120.0,
                            track_ntk=1, search_evaluations=0, tube=False)
    assert res.handoff.found and res.from_fixup is None
    p = init_params(2, 2, seed=0)  # the run's initialisation (seed 0)
    np.testing.assert_array_equal(p.flat(), res.flow.states[0])
    mdl = model_of(SAMPLES, 2, 2, res.targets, layers=2, T=1.0, loss="readout")
    fx = from_fixup(SAMPLES, p, mdl, layers=2, T=1.0, loss="readout", s_target=res.handoff.s, seconds=0.0)
    assert not fx.certified and fx.limiting == "time budget" and "time budget" in fx.message
    assert not fx.tube.complete and fx.tube.s[-1] < res.handoff.s
