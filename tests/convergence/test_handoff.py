"""Hand-off along the run (issue 31 item 2): the earliest record from whose computed state convergence is proved.

Held against independent computations: the flow from that computed state integrated by DOP853 at rtol 1e-10
on a complex-step field (``_flow_reference.py``) obeys the statement (loss envelope, displacement), on the README
example at --eps 0.1 and on random models (a hypothesis property: every one of its 6 examples must have a
hand-off, and the run and the reference must obey it). The mutation that triples the rate is contradicted by
the run (exit 1).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from _flow_reference import dop853_losses
from _memo import share
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.convergence import local_convergence


def _flow_json(capsys, args):
    from ntkcheck.cli import main

    code = main(["flow", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.usefixtures("shared_fixup")
def test_readme_eps_0p1_hands_off_and_the_run_obeys(capsys, monkeypatch):
    """README data at --eps 0.1 (82 times beyond the FixUp certificate) with --time 80 --max-seconds 600 (the
    README's command, with one NTK record and 17 records): a hand-off is found, the run after it obeys it, exit 0,
    the JSON is valid against the schema; mutation: a rate three times too fast is contradicted by the run
    (exit 1).

    Both runs skip the tube from FixUp (``tube=False``): what is checked is the hand-off and the exit it gives
    (the tube is checked against an independent integration in ``test_from_fixup.py``, its JSON in
    ``test_flow_certificate_cli.py``). The mutated command is the same run again: its flow and the centred
    certificates at the records it checks are those of the first run (memoised, ``_memo.py``), then tripled."""
    import functools

    import jsonschema

    import ntkcheck.convergence.handoff as ho
    import ntkcheck.convergence.local as local
    from ntkcheck.cli._args import load_schema

    share(monkeypatch, local, "gradient_flow", ignore=("time_budget", "progress"))
    real = share(monkeypatch, ho, "centred_certificate")
    monkeypatch.setattr(local, "local_convergence", functools.partial(local.local_convergence, tube=False))
    # --max-seconds 600 as in the README's command: under load the default 50 s can end the hand-off search
    args = ["--samples", "0,1,2,3", "--eps", "0.1", "--time", "80", "--max-seconds", "600", "--ntk-records", "1",
            "--records", "17"]
    code, d = _flow_json(capsys, args)
    jsonschema.validate(d, load_schema("flow"))
    h = d["handoff"]
    assert code == 0 and not d["certificate"]["certified"] and h["found"] and h["holds_on_run"] is True
    assert h["certificate"]["certified"] and h["s"] > 0 and h["certificate"]["lambda_min"] > 0

    def too_fast(*a, **k):
        c = real(*a, **k)
        return dataclasses.replace(c, rate=3 * c.rate)

    monkeypatch.setattr(ho, "centred_certificate", too_fast)
    code, d = _flow_json(capsys, args)
    assert code == 1 and d["handoff"]["holds_on_run"] is False


@settings(max_examples=6, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**6), eps=st.floats(0.05, 0.2))
def test_property_runs_obey_the_handoff(seed, eps):
    """Random data (two samples of three tokens in d = 2, three heads, two layers), targets eps away (beyond the FixUp certificate): the
    hand-off is found by s = 200, the run after it obeys it, and so does the flow from that computed state integrated
    independently (DOP853 on the complex-step field; tolerance 1e-8 relative, and the reference's own floor).
    The tube from FixUp, which nothing here reads, is not built (``tube=False``)."""
    rng = np.random.default_rng(seed)
    samples = [rng.standard_normal((3, 2)), rng.standard_normal((3, 2))]
    res = local_convergence(samples, heads=3, layers=2, eps=eps, loss="readout", n_records=11, time_end=200.0,
                            track_ntk=1, search_evaluations=0, seed=seed % 1000, tube=False)
    ho = res.handoff
    assert not res.certificate.certified  # eps >= 0.05 is beyond the FixUp certificate on these models
    assert ho.found and ho.holds_on_run is True, ho.message
    c = ho.certificate
    k = ho.index
    times = np.array(res.flow.s[k:]) - res.flow.s[k]
    ref, states = dop853_losses(samples, res.targets, res.flow.states[k], 3, 2, 2, times)
    # the reference stalls where its parameters carry its rtol: the loss of residuals 10 rtol |theta| on every
    # parameter, (1/2) lambda_max (P/H) (10 rtol max|theta|)^2, is its own floor
    ref_floor = 0.5 * c.lambda_max * (res.flow.states[k].size / 3) * (1e-9 * np.max(np.abs(states))) ** 2
    assert np.all(ref <= np.exp(-c.rate * times) * c.start_loss * (1 + 1e-8) + ref_floor)
    dist = np.linalg.norm(states - res.flow.states[k], axis=1) / math.sqrt(3)
    assert np.all(dist <= c.displacement_bound)


def test_gradient_descent_hands_off_with_its_own_certificate():
    """``step = 0.5`` on a small model at eps = 0.05: the flow's theorems are not held against the run, the
    discrete certificate hands off, the iterates after it obey it, and so does gradient descent from the
    hand-off iterate recomputed with the complex-step gradient (an independent implementation), step by step:
    ``Loss_j <= (1 - q)^j Loss_start`` with ``q = 1 - exp(-rate step)`` (tolerance: 1e-9 relative plus the
    rounding floor 1e-28)."""
    from _flow_reference import cs_field, loss_batch

    samples = [np.array([[0.3, -1.1], [1.7, 0.2]]), np.array([[1.2, 1.3], [-0.8, -0.6], [0.1, 0.9]])]
    step = 0.5
    res = local_convergence(samples, heads=3, layers=2, eps=0.05, loss="readout", n_records=11, time_end=150.0,
                            track_ntk=1, search_evaluations=0, step=step)
    ho = res.handoff
    assert res.comparison and res.guarantee_holds is None
    assert ho.found and ho.holds_on_run is True and ho.certificate.step == step
    c = ho.certificate
    assert step * c.smoothness < 2
    th = np.array(res.flow.states[ho.index])
    factor = math.exp(-c.rate * step)
    for j in range(60):
        L = float(loss_batch(samples, res.targets, th[None], 3, 2, 2)[0])
        assert L <= factor**j * c.start_loss * (1 + 1e-9) + 1e-28, j
        th = th + step * cs_field(samples, res.targets, th, 3, 2, 2)
    assert res.from_fixup is None  # the tube is for the flow only


@pytest.mark.usefixtures("shared_fixup")
def test_readme_step_1p4_is_not_certified_for_gradient_descent(capsys):
    """The README's ``--step 1.4`` (1.4 Lambda = 1.96): no record hands off for gradient descent, and the report
    says why (step x smoothness >= 2 or the loss too large); exit 0."""
    code, d = _flow_json(capsys, ["--samples", "0,1,2,3", "--step", "1.4", "--ntk-records", "1", "--records", "6"])
    h = d["handoff"]
    assert code == 0 and h is not None and not h["found"] and h["certificate"]["step"] == 1.4
    assert "not certified" in h["certificate"]["message"]
