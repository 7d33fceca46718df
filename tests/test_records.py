"""Saved results load back (issue 25): every result type with ``to_dict`` has ``from_dict``, and
``type(r).from_dict(r.to_dict())`` writes the same dict again, after a trip through JSON (the
form a saved ``--json`` object has). Where the fields survive exactly, the objects are equal."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    from ntkcheck.ntk.certificate.useful_rate import slow_mode

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
    from ntkcheck.convergence.eps_sweep import eps_sweep
    from ntkcheck.convergence.lipschitz import lipschitz_bound
    from ntkcheck.convergence.local import local_convergence
    from ntkcheck.dynamics import init_params
    from ntkcheck.dynamics.depth import depth_convergence
    from ntkcheck.dynamics.ntk import ntk_spectrum
    from ntkcheck.dynamics.plateau import kernel_plateau

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


# ---------------------------------------------------------------- the head count and the head law


def _doubling_samples():
    """3 samples of 4 Gaussian tokens in d = 3 screened with b_scale 1000: the bias dominates the
    scores, every softmax is one-hot at some atoms, and --heads auto doubles 16 -> 32 -> 64 before
    the Gram is certified (a kernel predicted from saturated heads on the way)."""
    return list(np.random.default_rng(0).standard_normal((3, 4, 3)))


def _same_report(back, rep):
    """A loaded report says what the original said: its text, its conclusion, its dict."""
    assert back.table() == rep.table() and back.bottom_line == rep.bottom_line and back.outcome == rep.outcome
    assert back.head_law == rep.head_law and back.crosscheck.kernel == rep.crosscheck.kernel


def test_head_rank_records_round_trip():
    """AtomSpan, Saturation and HeadsKernel read back equal, ``dim``, ``atoms`` and
    ``structural_exact`` included; a Saturation with no score gap (single Diracs: inf, written as
    null) reads back as inf, not as None."""
    from ntkcheck.ntk import dependence_structure, init_heads
    from ntkcheck.ntk.heads.rank import (
        AtomSpan,
        HeadsKernel,
        Saturation,
        atom_span,
        heads_kernel,
        saturation,
    )

    S = _samples(5, n=3, N=4, d=2)
    span = atom_span(S)
    assert _trip(span) == span and isinstance(_trip(span), AtomSpan) and span.dim == 2
    diracs = saturation([np.array([[1.0, 2.0]]), np.array([[0.5, -1.0]])], init_heads(3, 2))
    assert diracs.smallest_gap == float("inf") and diracs.to_dict()["smallest_gap"] is None
    assert _trip(diracs) == diracs and isinstance(_trip(diracs), Saturation)
    hk = heads_kernel(S, init_heads(2, 2), dependence_structure(S))
    assert _trip(hk) == hk and isinstance(_trip(hk), HeadsKernel)
    assert _trip(hk).predicted == hk.predicted == 12 - (span.rank + span.directions)  # r + (H - 1) A, H = 2


def test_a_doubling_screen_round_trips():
    """--heads auto doubling: every attempt, the saturated-heads kernel and the slow mode read back;
    the loaded report prints the same table and bottom line. The heads are not saved: the loaded
    search has heads None, its count from the last attempt, the Gram and kernel of the report."""
    from ntkcheck.ntk.heads.search import HeadAttempt, HeadSearch

    rep = ntkcheck.screen(_doubling_samples(), b_scale=1000.0, head_law_seconds=0)
    hs = rep.head_search
    assert [a.heads for a in hs.attempts] == [16, 32, 64] and hs.mode == "auto"  # the case doubles
    assert hs.kernel.saturation is not None and rep.head_law is None  # saturation in play; head law skipped
    back = _trip(rep)
    _same_report(back, rep)
    bs = back.head_search
    assert bs.heads is None and back.drawn_heads is None and bs.count == hs.count == 64
    assert bs.attempts == hs.attempts and all(isinstance(a, HeadAttempt) for a in bs.attempts)
    assert bs.gram == rep.gram and bs.kernel == hs.kernel and bs.span == hs.span
    assert back.crosscheck.kernel.heads.saturation == hs.kernel.saturation
    alone = _trip(hs)  # without a report to take them from: no Gram, no kernel (never made up)
    assert alone.heads is alone.gram is alone.kernel is None and alone.sentence() == hs.sentence()
    with pytest.raises(ntkcheck.errors.InputError, match="last attempt"):
        HeadSearch.from_dict({**hs.to_dict(), "heads": 16})


def test_head_law_bounds_round_trip():
    """A positive head law in a report (its training clause in the bottom line), a fixed count that
    does not separate, and a budget too small to draw anything: each reads back equal."""
    from ntkcheck.ntk import HeadLawRound, head_law_bound

    x = [np.array([[-1.0], [1.0]])]  # lambda_min(K_rho) = 0.0925 at q 2, b 10 (tests/helpers.py)
    rep = ntkcheck.screen(x, q_scale=2.0, b_scale=10.0, head_law_seconds=10, delta=1e-3)
    assert rep.head_law.positive and rep.head_law.rounds and "lambda_min(K_rho) >=" in rep.bottom_line
    back = _trip(rep)
    _same_report(back, rep)
    assert all(isinstance(r, HeadLawRound) for r in back.head_law.rounds)
    few = head_law_bound(x, heads=2, delta=0.1, q_scale=2.0, b_scale=10.0)  # 2 heads never separate
    none = head_law_bound(x, seconds=1e-9, pilot=1e-9, q_scale=2.0, b_scale=10.0)
    assert few.status == "not separated" and few.rounds and not none.rounds and none.upper is None
    for hl in (few, none):
        assert _trip(hl) == hl and _trip(hl).statement() == hl.statement()


def test_saved_screen_and_gram_json_with_head_search_load_back(capsys, tmp_path):
    """``ntkcheck screen --json`` of a doubling search loads back into the report the text run
    printed; ``ntkcheck gram --json`` loads back section by section (its Gram, kernel comparison,
    head search and a positive head law)."""
    from ntkcheck.cli._screen_text import structured
    from ntkcheck.ntk import HeadLawBound, HeadSearch, KernelComparison

    f = tmp_path / "x.npy"
    np.save(f, np.stack(_doubling_samples()))
    argv = ["screen", str(f), "--b-scale", "1000", "--head-law-seconds", "0"]
    main([*argv, "--json"])
    d = json.loads(capsys.readouterr().out)
    rep = ScreenReport.from_dict(d)
    assert [a.heads for a in rep.head_search.attempts] == [16, 32, 64]
    mine = structured(rep.to_dict())
    assert {k: d[k] for k in mine if k != "heads"} == {k: v for k, v in mine.items() if k != "heads"}
    main(argv)
    out = capsys.readouterr().out.rstrip("\n")
    assert rep.table(title=out.splitlines()[0]) == out  # a separate run of the same command: same text
    x = tmp_path / "pm1.npy"
    np.save(x, np.array([[[-1.0], [1.0]]]))
    main(["gram", str(x), "--q-scale", "2", "--b-scale", "10", "--head-law-seconds", "10", "--json"])
    d = json.loads(capsys.readouterr().out)
    g, kc = GramResult.from_dict(d), KernelComparison.from_dict(d["kernel"])
    hs = HeadSearch.from_dict(d["head_search"], gram=g, kernel=kc.heads)
    hl = HeadLawBound.from_dict(d["head_law"])
    assert hl.positive and hs.count == g.heads and kc.heads.heads == g.heads
    assert (kc.to_dict(), hs.to_dict(), hl.to_dict()) == (d["kernel"], d["head_search"], d["head_law"])


def test_every_result_type_with_to_dict_has_from_dict():
    """Issue 25: a result type added with ``to_dict`` and no ``from_dict`` (the head-law types were)
    fails here. Not results, so not loaded back: a claim of the registry (it holds its checker), a
    row of the seed's example table and a hypothesis draw (both hold measures)."""
    import dataclasses
    import importlib
    import inspect
    import pkgutil

    inputs = {"ntkcheck.claims._core.Claim", "ntkcheck.independence.examples.SeedExample",
              "ntkcheck.strategies.families.Dependent"}
    found, missing = 0, []
    for m in pkgutil.walk_packages(ntkcheck.__path__, "ntkcheck."):
        if m.name.endswith("__main__"):
            continue
        mod = importlib.import_module(m.name)
        for obj in vars(mod).values():
            if inspect.isclass(obj) and obj.__module__ == m.name and dataclasses.is_dataclass(obj) \
                    and "to_dict" in vars(obj):
                found += 1
                if not hasattr(obj, "from_dict") and f"{m.name}.{obj.__qualname__}" not in inputs:
                    missing.append(f"{m.name}.{obj.__qualname__}")
    assert found > 40 and missing == []


# ------------------------------------------------------------- the API and the command line agree (issue 33)

_INVOCATION = {"schema", "path", "plot", "thm85", "certificate_out", "provenance", "tokens", "non_finite"}  # CLI only


def _strict(d):
    """``d`` after a strict JSON trip (what a reader that refuses NaN sees)."""
    from ntkcheck.cli._args import strict

    return json.loads(json.dumps(strict(d), allow_nan=False))


_tokens = st.lists(st.lists(st.lists(st.integers(-2, 2), min_size=2, max_size=2), min_size=1, max_size=3),
                   min_size=2, max_size=3)


@settings(deadline=None, max_examples=6)
@given(raw=_tokens)
def test_api_dicts_validate_and_round_trip(raw):
    """For small integer token sets (often dependent, sharing atoms, or singular Grams): ``screen`` and
    ``decide`` results write dicts that validate against the shipped schemas of ``ntkcheck screen`` /
    ``decide`` (the same keys as the command line's, ``outcome`` an object with ``exit_code``), and
    ``from_dict(...).to_dict()`` is lossless after a strict JSON trip, the structure, kernel, head law
    and head search included."""
    import jsonschema

    from ntkcheck.cli._args import load_schema

    samples = [np.array(s, dtype=float) for s in raw]
    rep = ntkcheck.screen(samples, heads=6, head_law_seconds=2, time_budget=60)
    d = _strict(rep.to_dict())
    jsonschema.validate(d, load_schema("screen", api=True))
    assert d["outcome"]["exit_code"] == rep.exit_code and d["heads"]["count"] == rep.gram.heads
    back = _strict(ScreenReport.from_dict(d).to_dict())
    assert back == d
    for key in ("structure", "kernel", "head_law", "head_search"):
        assert back[key] == d[key]
    dec = ntkcheck.decide(samples, timeout=20)
    dd = _strict(dec.to_dict())
    jsonschema.validate(dd, load_schema("decide", api=True))
    assert _strict(Decision.from_dict(dd).to_dict()) == dd


@settings(deadline=None, max_examples=25)
@given(n=st.integers(1, 6), seed=st.integers(0, 2**16), kind=st.sampled_from(["gram", "low", "indefinite", "f32"]))
def test_matrix_certificates_validate_and_round_trip(n, seed, kind):
    import jsonschema

    from ntkcheck.cli._args import load_schema

    rng = np.random.default_rng(seed)
    J = rng.standard_normal((n, max(1, n - (kind == "low"))))
    A = J @ J.T - (2.0 * np.eye(n) if kind == "indefinite" else 0.0)
    if kind == "f32":
        A = A.astype(np.float32)
    for cert in (ntkcheck.certify_matrix(A), ntkcheck.certify_jacobian(J)):
        d = _strict(cert.to_dict())
        jsonschema.validate(d, load_schema("certify", api=True))
        assert d["outcome"]["exit_code"] == d["exit_code"] == cert.exit_code
        assert _strict(MatrixCertificate.from_dict(d).to_dict()) == d


@pytest.mark.parametrize("verb", ["screen", "certify", "decide"])
def test_command_line_dicts_load_back_losslessly(verb, tmp_path, capsys):
    """The command line's ``--json`` object is the API's dict plus what only the command line knows: it
    loads back with ``from_dict`` and writes the same keys and values again."""
    rng = np.random.default_rng(3)
    f = tmp_path / "x.npy"
    if verb == "certify":
        J = rng.standard_normal((5, 7))
        np.save(f, J @ J.T)
        argv, cls = ["certify", str(f)], MatrixCertificate
    else:
        np.save(f, rng.standard_normal((3, 4, 2)))
        argv = [verb, str(f)] + (["--head-law-seconds", "0"] if verb == "screen" else [])
        cls = ScreenReport if verb == "screen" else Decision
    main([*argv, "--json"])
    cli = json.loads(capsys.readouterr().out)
    payload = {k: v for k, v in cli.items() if k not in _INVOCATION}
    assert _strict(cls.from_dict(cli).to_dict()) == payload


def test_a_saved_gram_json_loads_back_losslessly(tmp_path, capsys):
    """``ntkcheck gram --json`` is a :class:`~ntkcheck.gram_report.GramReport`: its structure, kernel, head law
    and head search load back (a GramResult alone dropped them) and the same values are written again;
    its ``to_dict`` validates against the gram schema."""
    import jsonschema

    from ntkcheck.cli._args import load_schema
    from ntkcheck.gram_report import GramReport

    f = tmp_path / "x.npy"
    np.save(f, np.random.default_rng(4).standard_normal((3, 4, 2)))
    main(["gram", str(f), "--json", "--head-law-seconds", "2"])
    cli = json.loads(capsys.readouterr().out)
    rep = GramReport.from_dict(cli)
    d = _strict(rep.to_dict())
    jsonschema.validate(d, load_schema("gram", api=True))
    assert d == {k: v for k, v in cli.items() if k not in _INVOCATION - {"tokens"}}  # a gram's token count
    assert rep.structure is not None and rep.kernel is not None and rep.head_search is not None
    assert rep.exit_code == cli["outcome"]["exit_code"]
