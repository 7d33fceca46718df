"""The claims registry: every claim meets its minimum of held instances on the real code, the
runner fails claims that are not exercised, and every claim family catches a plausible bug
(mutation tests: a deliberately broken engine makes ``ntkcheck claims`` exit 1)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import warnings
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import strategies as st

from ntkcheck import claims as C
from ntkcheck.claims import CLAIMS, Check, Claim, Outcome, check_instance, run_claim
from ntkcheck.claims._seed003_ntk import _features, _heads_for, relation_dimension_is_one
from ntkcheck.cli import main
from ntkcheck.errors import InputError

# ----------------------------------------------------------------------------- the real code


#: hypothesis budget of a claim below (``run_claim``'s ``examples``, divided by the claim's cost): 20,
#: the CLI's default, except where the draws alone would exceed the claim's minimum: 002.thm8.5 (cost 4,
#: 2 pinned cases, ~3 s per instance: a gradient flow and two convergence certificates) gets 2 draws, so
#: 4 instances = its ``min_held``, asserted below (20 drew 5: 7 instances). Its mutations (a slowed flow,
#: an unnormalised displacement) are caught below with 1 draw; tests/convergence checks the theorem itself.
EXAMPLES = {"002.thm8.5": 8}


@pytest.mark.parametrize("cid", [c.id for c in CLAIMS.values() if c.status == "open"])
def test_claim_meets_its_minimum_on_the_real_code(cid):
    """Tries to falsify the claim on its pinned cases and a hypothesis budget (fixed seed): no
    counterexample, at least ``min_held`` instances held, inconclusive within the budget."""
    claim = CLAIMS[cid]
    rep = run_claim(claim, examples=EXAMPLES.get(cid, 20), seed=0)
    assert rep.refuted == 0 and not rep.error, (rep.detail, rep.counterexample, rep.error)
    assert rep.held >= claim.min_held >= 1, rep.to_dict()
    assert rep.inconclusive <= claim.max_inconclusive * rep.tried, rep.to_dict()
    assert not rep.shortfall and not rep.unexpected


def test_registry_lists_the_required_claims():
    """Issue 5: at least these claims, each with a statement, a place, a strategy and a minimum."""
    need = ["003.prop7", "003.prop8.sufficiency", "003.prop8.converse_overlap", "003.prop8.no_overlap",
            "003.prop9.gap", "003.prop10", "003.prop11", "003.prop12", "003.ex3", "003.ex4", "003.ex5",
            "003.ex6.product", "003.ex6.translation", "003.ex6.diracs", "003.ex6.gaussian_shared_covariance",
            "003.ex6.many_gaussians", "003.remark5", "002.lemma3.1.i", "002.lemma3.1.ii", "002.lemma3.2",
            "002.thm8.5"]
    assert [n for n in need if n not in CLAIMS] == []
    for c in CLAIMS.values():
        assert c.statement and c.place and c.status in ("open", "refuted")
        assert c.status == "refuted" or c.min_held >= 4, c.id  # every open claim must be exercised
        json.dumps(c.to_dict())


@pytest.mark.parametrize("cid", [c.id for c in CLAIMS.values() if c.status == "refuted"])
def test_refuted_claims_reproduce_their_counterexample(cid):
    """A refuted claim stores its counterexample and its pinned case fails the conclusion."""
    claim = CLAIMS[cid]
    assert claim.counterexample is not None and claim.examples
    chk = claim.check(claim.examples[0]())
    assert chk.outcome is Outcome.FAILED
    rep = run_claim(claim, examples=2)
    assert rep.refuted == 1 and not rep.unexpected


def test_ex5_as_stated_is_found_and_shrunk_by_hypothesis():
    """Seed 003 Ex. 5 as extracted ("m_i pairwise distinct"): hypothesis finds m_2 = -m_1 unaided."""
    claim = dataclasses.replace(CLAIMS["003.ex5.as_stated"], examples=())
    rep = run_claim(claim, examples=40, seed=0)
    assert rep.refuted == 1
    ms = rep.counterexample["measures"]
    assert len(ms) == 2 and "GaussianMixture2" in ms[0]


# ----------------------------------------------------------------------------- the runner


def _toy(conclusion, hypothesis=lambda inst: True, strategy=None, **kw):
    return Claim("test.toy", "000", "toy", "toy statement", hypothesis, conclusion,
                 lambda: strategy if strategy is not None else st.integers(0, 100).map(lambda k: {"k": k}), **kw)


def test_all_skipped_claim_fails():
    """Issue 10 item 2: a claim whose instances all miss the hypotheses is reported, not passed."""
    rep = run_claim(_toy(lambda inst: Check.held(), hypothesis=lambda inst: False, min_held=3), examples=5)
    assert rep.refuted == 0 and rep.held == 0 and rep.skipped > 0
    assert rep.unexpected and "needs at least 3" in rep.shortfall


def test_inconclusive_over_budget_fails_and_within_budget_passes():
    half = _toy(lambda inst: Check.inconclusive() if inst["k"] % 2 else Check.held(), min_held=2)
    rep = run_claim(half, examples=30)
    assert rep.refuted == 0 and rep.inconclusive > 0 and rep.unexpected and "inconclusive" in rep.shortfall
    lenient = dataclasses.replace(half, max_inconclusive=0.9)
    assert not run_claim(lenient, examples=30).unexpected


def test_runner_draws_past_the_budget_until_the_minimum_holds():
    """A claim that skips most instances still gets min_held held ones when the budget is tiny."""
    rep = run_claim(_toy(lambda inst: Check.held(), hypothesis=lambda inst: inst["k"] % 3 == 0, min_held=4), examples=1)
    assert rep.held >= 4 and not rep.unexpected


def test_toolkit_error_is_a_failure():
    """An ntkcheck error on an instance the claim covers is a failure, not 'inconclusive'."""
    def refuses(inst):
        raise InputError("refused")

    assert check_instance(_toy(refuses), {"k": 1}).outcome is Outcome.FAILED
    rep = run_claim(_toy(refuses), examples=3)
    assert rep.refuted == 1 and rep.unexpected and "toolkit error" in rep.detail


def test_checker_bug_and_unsatisfiable_are_errors():
    def buggy(inst):
        raise ZeroDivisionError("bug")

    rep = run_claim(_toy(buggy), examples=3)
    assert rep.unexpected and "ZeroDivisionError" in rep.error
    rep = run_claim(_toy(lambda i: Check.held(), strategy=st.integers().filter(lambda k: False).map(lambda k: {"k": k})),
                    examples=3)
    assert rep.unexpected and "Unsatisfiable" in rep.error


def test_refuted_claim_that_stops_failing_is_unexpected():
    claim = dataclasses.replace(CLAIMS["003.ex5.as_stated"], conclusion=lambda inst: Check.held())
    rep = run_claim(claim, examples=3)
    assert rep.refuted == 0 and rep.unexpected


def test_runner_finds_a_wrong_constant():
    """A Lipschitz constant four times too small (D^3 R^2 / (4 sqrt d)) is refuted with a shrunk
    counterexample: the machinery that would report a wrong seed constant works."""
    from ntkcheck.claims._seed002 import _attention_instances, _in_ball, _lipschitz_ii

    def too_small(inst):
        chk = _lipschitz_ii(inst)
        ratio = float(chk.detail.rsplit("ratio ", 1)[1])
        return Check.of(ratio <= 0.25, chk.detail)

    claim = Claim("test.wrong", "002", "Lemma 3.1 (ii), constant / 8", "C_1 = D^3 R^2 / (4 sqrt d)",
                  _in_ball, too_small, _attention_instances)
    rep = run_claim(claim, examples=60, seed=0)
    assert rep.refuted == 1 and rep.unexpected
    assert set(rep.counterexample) >= {"x", "Y", "Q", "K", "V"}


# ----------------------------------------------------------------------------- the old no_overlap claim


def _gram_rel(samples):
    from ntkcheck.ntk.gram_matrix.features import Heads
    from ntkcheck.ntk.gram_matrix.pipeline import gram

    Q, b = _heads_for(samples, 0)
    g = gram(samples, Heads(Q, b))
    return g.lambda_min / g.lambda_max


@pytest.mark.parametrize("samples", [
    [np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([[1.0, 1.0]])],   # three Diracs, d = 2
    [np.array([[0.5]]), np.array([[1.5]]), np.array([[2.0], [3.0]])],          # d = 1
], ids=["three-diracs-d2", "diracs-and-pair-d1"])
def test_no_shared_atom_does_not_give_injectivity(samples):
    """The old 003.prop8.no_overlap ('all atoms distinct and dependent => positive Gram') is false:
    these share no atom, are weakly dependent, and the Gram is singular (features of a Dirac are
    its constant atom: n Diracs in d < n dimensions are linearly dependent, an exact kernel). The
    restated claim excludes them: their weak relations span two or more dimensions."""
    from ntkcheck.independence.decision import decide

    atoms = [tuple(r) for x in samples for r in x.tolist()]
    assert len(set(atoms)) == len(atoms)
    dec = decide(samples, "weak")
    assert dec.verdict.value == "dependent"
    assert _gram_rel(samples) < 1e-14  # exact kernel: float rounding only
    assert not relation_dimension_is_one(samples, dec)
    claim = CLAIMS["003.prop8.no_overlap"]
    Q, b = _heads_for(samples, 0)
    assert claim.check({"samples": samples, "Q": Q, "b": b}).outcome is Outcome.SKIPPED


def test_one_relation_without_overlap_is_injective():
    """The restated claim's own cases: a Dirac off the origin next to a generic pair (one
    relation, alpha != 0, no second atom to share) and the translated product hold."""
    claim = CLAIMS["003.prop8.no_overlap"]
    outcomes = [claim.check(make()).outcome for make in claim.examples]
    assert outcomes == [Outcome.HELD] * len(claim.examples)


# ----------------------------------------------------------------------------- mutations


def _cli_catches(cid, capsys, examples=10):
    """``ntkcheck claims --only cid`` exits 1 and names the claim as unexpected."""
    code = main(["claims", "--only", cid, "--examples", str(examples), "--json", "--no-shrink"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["unexpected"] == [cid], out["claims"][0]
    return out["claims"][0]


def _decide_ignoring_affine(measures, prop="weak", direction=None, **kw):
    """Weakened decide: linear independence of the CGFs themselves (orders >= 1), i.e. the
    affine part is not quotiented out."""
    D = sys.modules["ntkcheck.independence.decision"]
    from ntkcheck.claims._seed003_common import _exact_rank

    ms = D.as_measures(measures)
    d = ms[0].dim
    w = direction if direction is not None else [Fraction(k + 2) for k in range(d)]
    rows = [m.cumulants_1d(w, 2 * len(ms) + 2) for m in ms]  # orders 1..K: includes the mean
    ind = _exact_rank(rows) == len(ms)
    v = D.Verdict.INDEPENDENT if ind else D.Verdict.DEPENDENT
    return SimpleNamespace(verdict=v, method="mutant", precision="exact", direction=tuple(w),
                           null_vector=None, affine=None, trail=())


@pytest.mark.parametrize("cid", ["003.ex6.translation", "003.remark5", "003.ex6.gaussian_shared_covariance",
                                 "003.ex6.diracs", "003.ex6.many_gaussians", "003.prop7"])
def test_mutation_decide_without_affine_quotient_is_caught(monkeypatch, capsys, cid):
    """Seed 003 Ex. 6 and Prop. 7 catch a decide that forgets the quotient by affine functions."""
    monkeypatch.setattr(sys.modules["ntkcheck.independence.decision"], "decide", _decide_ignoring_affine)
    _cli_catches(cid, capsys, examples=20)


def test_mutation_truncation_too_short_for_symmetric_laws_is_caught(monkeypatch, capsys):
    """Ex. 3-5, Prop. 12 catch a truncation capped at n + 1 (enough for generic laws, structurally
    singular for symmetric ones: theory/certificates.md): undecided beyond the inconclusive budget."""
    D = sys.modules["ntkcheck.independence.decision"]
    real = D.decide

    def capped(measures, prop="weak", direction=None, method="auto", **kw):
        n = len(measures)
        return real(measures, prop, direction, method, **{**kw, "K": n + 1, "max_order": n + 1})

    monkeypatch.setattr(D, "decide", capped)
    for cid in ["003.ex3", "003.ex4", "003.ex5", "003.prop12"]:
        _cli_catches(cid, capsys)


def test_mutation_identity_search_disabled_is_caught(monkeypatch, capsys):
    """A refuted claim whose counterexample stops reproducing is reported: a decide that never
    proves dependence makes 003.ex5.as_stated fail to fail."""
    D = sys.modules["ntkcheck.independence.decision"]
    real = D.decide

    def no_identities(*a, **kw):
        dec = real(*a, **kw)
        return dataclasses.replace(dec, verdict=D.Verdict.INCONCLUSIVE) if dec.verdict is D.Verdict.DEPENDENT else dec

    monkeypatch.setattr(D, "decide", no_identities)
    _cli_catches("003.ex5.as_stated", capsys, examples=2)


def test_mutation_gram_without_weights_is_caught(monkeypatch, capsys):
    """Prop. 5 (Gram = NTK quadratic form on L^2(mu_i)) catches a Gram without the 1/N_i weights."""
    G = importlib.import_module("ntkcheck.ntk.gram_matrix.pipeline")

    def unweighted(samples, heads, **kw):
        F = _features([np.asarray(x) for x in samples], heads.Q, heads.b)
        N = np.concatenate([[x.shape[0]] * x.shape[0] for x in samples]).astype(float)
        ev = np.linalg.eigvalsh((F * np.sqrt(N)[:, None]) @ (F * np.sqrt(N)[:, None]).T)
        return SimpleNamespace(lambda_min=float(ev[0]), lambda_max=float(ev[-1]), eigenvalues=tuple(ev))

    monkeypatch.setattr(G, "gram", unweighted)
    _cli_catches("003.prop5.quadratic_form", capsys)


def test_mutation_gram_with_one_head_is_caught(monkeypatch, capsys):
    """Prop. 8 (sufficiency, and the one-relation converse) catch a Gram built from the first
    head only (rank <= d < M): undecided positivity beyond the inconclusive budget."""
    G = importlib.import_module("ntkcheck.ntk.gram_matrix.pipeline")
    real = G.gram

    def one_head(samples, heads, **kw):
        with warnings.catch_warnings():  # the Gram module warns about the rank deficit: the mutant ignores it
            warnings.simplefilter("ignore")
            return real(samples, G.Heads(heads.Q[:1], heads.b[:1]), **kw)

    monkeypatch.setattr(G, "gram", one_head)
    for cid in ["003.prop8.sufficiency", "003.prop8.no_overlap"]:
        rep = _cli_catches(cid, capsys)
        assert "inconclusive" in rep["shortfall"]


def test_mutation_gram_with_a_ridge_is_caught(monkeypatch, capsys):
    """Prop. 8's converse and Ex. 6 with Prop. 8 catch a Gram regularised by 1e-3 lambda_max
    (a kernel hidden by a ridge)."""
    G = importlib.import_module("ntkcheck.ntk.gram_matrix.pipeline")
    real = G.gram

    def ridge(samples, heads, **kw):
        g = real(samples, heads, **kw)
        ev = np.asarray(g.eigenvalues if g.eigenvalues is not None else [g.lambda_min, g.lambda_max]) + 1e-3 * g.lambda_max
        return SimpleNamespace(lambda_min=float(ev[0]), lambda_max=float(ev[-1]), eigenvalues=tuple(ev))

    monkeypatch.setattr(G, "gram", ridge)
    for cid in ["003.prop8.converse_overlap", "003.ex6.diracs_gram"]:
        _cli_catches(cid, capsys)


def test_mutation_gap_condition_without_distinctness_is_caught(monkeypatch, capsys):
    """Prop. 9 catches a gap condition that forgets 'pairwise distinct gaps'."""
    K = importlib.import_module("ntkcheck.independence.conditions")
    real = K.gap_condition

    def lax(samples, direction, *a, **kw):
        g = real(samples, direction, *a, **kw)
        ok = all(len({tuple(r) for r in np.asarray(x).tolist()}) >= 2 for x in samples)
        return dataclasses.replace(g, holds=ok)

    monkeypatch.setattr(K, "gap_condition", lax)
    _cli_catches("003.prop9.gap", capsys, examples=25)


def test_mutation_gap_condition_with_coarse_rounding_is_caught(monkeypatch, capsys):
    """Prop. 10 (random tokens meet the gap condition a.s.) catches a gap condition that
    compares projections rounded to one decimal (a tolerance bug: ties appear)."""
    K = importlib.import_module("ntkcheck.independence.conditions")
    real = K.gap_condition

    def coarse(samples, direction, *a, **kw):
        return real([np.round(np.asarray(x, dtype=float), 1) for x in samples], direction, *a, **kw)

    monkeypatch.setattr(K, "gap_condition", coarse)
    _cli_catches("003.prop10", capsys, examples=25)


def test_mutation_vandermonde_condition_for_positive_lambdas_only_is_caught(monkeypatch, capsys):
    """Prop. 11 catches a Vandermonde condition that assumes positive lambdas (true for Ex. 3-5,
    not in Prop. 11)."""
    K = importlib.import_module("ntkcheck.independence.conditions")
    real = K.vandermonde_condition

    def positive_only(measures, direction):
        v = real(measures, direction)
        return dataclasses.replace(v, holds=v.holds and all(lam > 0 for lam in v.lambdas))

    monkeypatch.setattr(K, "vandermonde_condition", positive_only)
    _cli_catches("003.prop11", capsys, examples=20)


def test_mutation_attention_bound_is_caught(monkeypatch, capsys):
    """Lemma 3.1 (i) catches an attention that drops the softmax normalisation (|A| can exceed D R)."""
    from ntkcheck.claims import _seed002 as S

    def unnormalised(x, Y, Q, K, V):
        xs = np.atleast_2d(x)
        w = np.exp((xs @ Q.T) @ (Y @ K.T).T / np.sqrt(Y.shape[1]))
        out = w @ Y @ V.T
        return out[0] if np.ndim(x) == 1 else out

    monkeypatch.setattr(S, "attention_002", unnormalised)
    _cli_catches("002.lemma3.1.i", capsys, examples=20)


def test_mutation_attention_without_temperature_is_caught(monkeypatch, capsys):
    """Lemma 3.1 (ii) catches an attention without the 1/sqrt(d) temperature (its Lipschitz
    constant grows by sqrt(d), past the seed's factor 2 from d = 5 on)."""
    from scipy.special import softmax

    from ntkcheck.claims import _seed002 as S

    def no_temperature(x, Y, Q, K, V):
        xs = np.atleast_2d(x)
        out = softmax((xs @ Q.T) @ (Y @ K.T).T, axis=1) @ Y @ V.T
        return out[0] if np.ndim(x) == 1 else out

    monkeypatch.setattr(S, "attention_002", no_temperature)
    _cli_catches("002.lemma3.1.ii", capsys, examples=20)


def test_mutation_heads_summed_is_caught(monkeypatch, capsys):
    """Lemma 3.2 catches a multi-head field that sums the heads instead of averaging them."""
    from ntkcheck.claims import _seed002 as S

    monkeypatch.setattr(S, "flow_field_002", lambda X, Qs, Ks, Vs: np.sum(
        [S.attention_002(X, X, Q, K, V) for Q, K, V in zip(Qs, Ks, Vs, strict=True)], axis=0))
    _cli_catches("002.lemma3.2", capsys, examples=20)


def test_mutation_slowed_flow_is_caught(monkeypatch, capsys):
    """Issue 10: a flow whose gradient is scaled by 0.55 (45 % too slow) still meets eq. 31's
    e^(-lambda_0 s) near initialisation (it decays at 1.1 lambda_0), but not the guaranteed rate
    2 (lambda_0 - L_K W) of the same proof: 002.thm8.5 catches it."""
    D = importlib.import_module("ntkcheck.dynamics.flow")
    real = D._loss_grad

    def slowed(*a, **kw):
        val, g = real(*a, **kw)
        return val, D.AttentionParams(0.55 * g.V, 0.55 * g.Q, 0.55 * g.b)

    monkeypatch.setattr(D, "_loss_grad", slowed)
    rep = _cli_catches("002.thm8.5", capsys, examples=4)
    assert "guaranteed rate" in rep["detail"]


def test_mutation_displacement_without_mean_field_normalisation_is_caught(monkeypatch, capsys):
    """002.thm8.5 checks the reported displacement against |theta_s - theta_0|_rho and the bound: a
    displacement summed over heads instead of averaged is caught."""
    D = importlib.import_module("ntkcheck.dynamics.flow")
    monkeypatch.setattr(D, "_displacement", lambda params, p0, p, layers, T: float(np.sqrt(np.sum((p - p0) ** 2))))
    rep = _cli_catches("002.thm8.5", capsys, examples=4)
    assert "displacement" in rep["detail"]


# ----------------------------------------------------------------------------- CLI


def test_cli_json_only(capsys):
    code = main(["claims", "--only", "003.ex6.translation", "--only", "002.lemma3.1.i", "--examples", "3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [c["id"] for c in out["claims"]] == ["003.ex6.translation", "002.lemma3.1.i"]
    assert all(c["held"] >= c["min_held"] and c["refuted"] == 0 and not c["shortfall"] for c in out["claims"])


def test_cli_table_and_prefix(capsys):
    code = main(["claims", "--only", "002.lemma3.1*", "--examples", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "002.lemma3.1.i" in out and "002.lemma3.1.ii" in out and "seed 002" in out
    assert "held/min" in out and "skipped" in out


def test_cli_known_refuted_claim_exits_zero(capsys):
    code = main(["claims", "--only", "003.ex5.as_stated", "--examples", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "known refuted" in out and "counterexample" in out


def test_cli_shortfall_exits_one(monkeypatch, capsys):
    """A claim that falls short of its minimum (here: every instance skipped) fails the run."""
    claim = dataclasses.replace(CLAIMS["003.ex6.translation"], hypothesis=lambda inst: False)
    monkeypatch.setitem(CLAIMS, "003.ex6.translation", claim)
    code = main(["claims", "--only", "003.ex6.translation", "--examples", "3"])
    out = capsys.readouterr().out
    assert code == 1 and "needs at least" in out


def test_cli_unknown_id_is_an_input_error(capsys):
    assert main(["claims", "--only", "nope"]) == 2
    assert "no such claim" in capsys.readouterr().err


def test_cli_list(capsys):
    assert main(["claims", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["claims"]
    assert [c["id"] for c in listed] == list(C.CLAIMS)
    assert all("min_held" in c and "max_inconclusive" in c for c in listed)
