"""Saved results load back (issue 25): every result type with ``to_dict`` has ``from_dict``, and
``type(r).from_dict(r.to_dict())`` writes the same dict again, after a trip through JSON (the
form a saved ``--json`` object has). Where the fields survive exactly, the objects are equal."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ntkcheck
from ntkcheck import Decision, GramResult, MatrixCertificate, ScreenReport
from ntkcheck.cli import main


def _trip(obj):
    d = json.loads(json.dumps(obj.to_dict()))
    back = type(obj).from_dict(d)
    assert json.loads(json.dumps(back.to_dict())) == d
    return back


def _samples(seed=0, n=4, N=5, d=2):
    return list(np.random.default_rng(seed).standard_normal((n, N, d)))


@pytest.mark.parametrize("case", ["gap", "exact", "interval", "product", "term", "structural", "vandermonde",
                                  "inconclusive"])
def test_decisions_round_trip(case):
    cube = [ntkcheck.UniformCube(r, 2) for r in ("1", "3/2", "2")]
    args = {"gap": (_samples(), {}), "exact": (_samples(), {"method": "exact"}),
            "interval": (_samples(), {"method": "interval"}),
            "product": ([np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]]), np.array([[0.0], [1.0], [2.0], [3.0]])], {}),
            "term": ([ntkcheck.UniformCube(1, 2)] * 2, {}),
            "structural": ([ntkcheck.Dirac([0]), ntkcheck.Dirac([1])], {"property": "strong"}),
            "vandermonde": (cube, {"property": "strong"}),
            "inconclusive": (_samples(1, n=6, N=4, d=1), {"method": "float", "max_bits": 53})}[case]
    dec = ntkcheck.decide(args[0], **args[1])
    back = _trip(dec)
    assert back.verdict == dec.verdict and back.certificate.kind == dec.certificate.kind
    if case != "exact":  # an exact minor's determinant may be shortened for display
        assert back == dec


def test_gram_and_screen_round_trip():
    g = ntkcheck.gram(_samples(), 12, certify=True)
    assert _trip(g) == g and g.certified_positive
    for data in (None, _samples(2)):
        rep = ntkcheck.screen(data)
        back = _trip(rep)
        assert back.outcome == rep.outcome and back.bottom_line == rep.bottom_line
        assert back.weak == rep.weak and back.gram == rep.gram


def test_a_saved_screen_json_loads_back(capsys):
    """``ntkcheck screen --json`` (structured values: heads object, null coefficients, overlap
    object) reads back into a report with the same conclusion and bottom line."""
    assert main(["screen", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    rep = ScreenReport.from_dict(d)
    assert rep.outcome == d["outcome"]["conclusion"] and rep.bottom_line == d["outcome"]["bottom_line"]
    assert rep.involved == (4, 5, 6)
    main(["gram", "--json"])
    g = GramResult.from_dict(json.loads(capsys.readouterr().out))
    assert g.atoms == 36 and g.kernel_observed == 1  # the bundled data: 36 distinct atoms, one kernel vector
    main(["decide", "--family", "uniform-cube", "--radii", "1,2", "--json"])
    assert Decision.from_dict(json.loads(capsys.readouterr().out)).independent


def test_matrix_certificates_round_trip():
    J = np.random.default_rng(0).standard_normal((6, 3))
    for A, tokens in ((J @ J.T + np.eye(6), _samples(3, n=2, N=3)), (J @ J.T, None), (np.ones((3, 3)), None)):
        c = ntkcheck.certify_matrix(A, tokens=tokens)
        back = _trip(c)
        assert back.status == c.status and back.diagnosis == c.diagnosis
        if c.vector is not None:
            np.testing.assert_array_equal(back.vector, c.vector)  # floats through JSON: exact
    assert isinstance(back, MatrixCertificate)


def test_slow_mode_and_positivity_certificate_round_trip():
    from ntkcheck.ntk import certify_positive, init_heads
    from ntkcheck.ntk.useful_rate import slow_mode

    S = ntkcheck.cgf.as_laws(_samples())
    h = init_heads(12, 2, seed=0)
    assert _trip(slow_mode(S, h)) == slow_mode(S, h)
    pc = certify_positive(S, h)
    assert _trip(pc) == pc


def test_experiment_sweep_and_claims_round_trip(tmp_path):
    from ntkcheck.claims import CLAIMS, run_claim
    from ntkcheck.distributed import sweep
    from ntkcheck.distributed.gram import DistributedGram
    from ntkcheck.limits.rates import run_experiment

    exp = run_experiment("heads-lln", size="small", seeds=2)
    back = _trip(exp)
    assert back.verdict == exp.verdict and len(back.fits) == len(exp.fits)
    np.testing.assert_array_equal(back.fits[0].errors, exp.fits[0].errors)
    f = tmp_path / "x.npy"
    np.save(f, np.stack(_samples()))
    sw = sweep([str(f)], serial=True, certify=False)
    assert _trip(sw).rows == sw.rows
    dg = DistributedGram(ntkcheck.gram(_samples(), 12), "serial", 3, 4, 1, 4, "tree", 0.1, 0.2)
    assert _trip(dg) == dg
    rep = run_claim(CLAIMS["003.ex6.translation"], examples=2, seed=0)
    assert _trip(rep).held == rep.held


def test_dynamics_results_round_trip():
    from ntkcheck.dynamics import init_params
    from ntkcheck.dynamics.convergence import local_convergence
    from ntkcheck.dynamics.depth import depth_convergence
    from ntkcheck.dynamics.lipschitz import lipschitz_bound
    from ntkcheck.dynamics.ntk import ntk_spectrum
    from ntkcheck.dynamics.plateau import kernel_plateau
    from ntkcheck.dynamics.sweep import eps_sweep

    S = _samples(4, n=3, N=3)
    r = local_convergence(S, heads=4, layers=1, time_end=0.1, n_records=2, track_ntk=False, loss="readout")
    back = _trip(r)
    assert back.flow.loss == r.flow.loss and back.flow.status == r.flow.status
    assert _trip(kernel_plateau(mix=0.0, decades=0.5, n_records=3)).kernel_dim >= 1
    assert _trip(eps_sweep(S, eps_values=(1e-3,), loss="readout", heads=4, layers=1, n_records=3)).eps == (1e-3,)
    p = init_params(2, 4, seed=0)
    spec = ntk_spectrum(S, p, layers=1)
    assert _trip(spec) == spec
    lb = lipschitz_bound(S, p, layers=1, radius=0.1)
    assert _trip(lb) == lb
    dc = depth_convergence(S, heads=2, layers=(2, 4, 8), layers_ref=32)
    assert _trip(dc).forward_error == dc.forward_error  # (nan orders without training: nan != nan)


def test_bad_dicts_are_input_errors():
    from ntkcheck.errors import InputError

    with pytest.raises(InputError, match="missing"):
        GramResult.from_dict({"lambda_min": 1.0})
    with pytest.raises(InputError, match="unknown kind"):
        Decision.from_dict({**ntkcheck.decide(_samples()).to_dict(), "certificate": {"kind": "forged"}})


def test_repr_of_a_screen_report_says_where_the_text_is():
    """Issue 25: ``repr`` hid that the report's text is ``rep.table()``."""
    r = repr(ntkcheck.screen())
    assert r.startswith("ScreenReport(certified singular:") and ".table()" in r and ".bottom_line" in r
