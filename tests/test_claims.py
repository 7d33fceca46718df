"""Every claim of the registry tried by hypothesis (CI profile), the seed's own cases pinned,
plus mutation checks: deliberately weakened engines must make the matching claims fail."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings

from ntkcheck import claims as C
from ntkcheck.claims import CLAIMS, Check, Claim, Outcome, run_claim
from ntkcheck.claims._seed003 import _features
from ntkcheck.cli import main


def _claim_test(claim: Claim):
    @settings(max_examples=max(2, 20 // claim.cost))
    @given(inst=claim.instances())
    def test(inst):
        chk = claim.check(inst)
        assert chk.outcome is not Outcome.FAILED, f"{claim.id}: {chk.detail}"

    for make in claim.examples:
        test = example(inst=make())(test)
    test.__doc__ = f'Tries to falsify {claim.reference}: "{claim.statement}"'
    return test


for _c in CLAIMS.values():
    if _c.status == "open":
        globals()[f"test_claim_{_c.id.replace('.', '_')}"] = _claim_test(_c)


def test_registry_lists_the_required_claims():
    """Issue 5: at least these claims, each with a statement, a place and a strategy."""
    need = ["003.prop7", "003.prop8.sufficiency", "003.prop8.converse_overlap", "003.prop8.no_overlap",
            "003.prop9.gap", "003.prop10", "003.prop11", "003.prop12", "003.ex3", "003.ex4", "003.ex5",
            "003.ex6.product", "003.ex6.translation", "003.ex6.diracs", "003.ex6.gaussian_shared_covariance",
            "003.ex6.many_gaussians", "003.remark5", "002.lemma3.1.i", "002.lemma3.1.ii", "002.lemma3.2",
            "002.thm8.5"]
    assert [n for n in need if n not in CLAIMS] == []
    for c in CLAIMS.values():
        assert c.statement and c.place and c.status in ("open", "refuted")
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


def test_inconclusive_is_not_a_failure(monkeypatch):
    """An engine that cannot decide gives 'inconclusive', never a refutation."""
    D = sys.modules["ntkcheck.decide"]

    def undecided(measures, prop="weak", **kw):
        return SimpleNamespace(verdict=D.Verdict.INCONCLUSIVE, method="none", precision="-", direction=None,
                               null_vector=None, affine=None, trail=())

    monkeypatch.setattr(D, "decide", undecided)
    rep = run_claim(CLAIMS["003.ex6.translation"], examples=4)
    assert rep.refuted == 0 and rep.inconclusive == rep.tried > 0


# ----------------------------------------------------------------------------- mutation checks


def _decide_ignoring_affine(measures, prop="weak", direction=None, **kw):
    """Weakened decide: linear independence of the CGFs themselves (orders >= 1), i.e. the
    affine part is not quotiented out."""
    D = sys.modules["ntkcheck.decide"]
    from ntkcheck.claims._seed003 import _exact_rank

    ms = D.as_measures(measures)
    d = ms[0].dim
    w = direction if direction is not None else [Fraction(k + 2) for k in range(d)]
    rows = [m.cumulants_1d(w, 2 * len(ms) + 2) for m in ms]  # orders 1..K: includes the mean
    ind = _exact_rank(rows) == len(ms)
    v = D.Verdict.INDEPENDENT if ind else D.Verdict.DEPENDENT
    return SimpleNamespace(verdict=v, method="mutant", precision="exact", direction=tuple(w),
                           null_vector=None, affine=None, trail=())


@pytest.mark.parametrize("cid", ["003.ex6.translation", "003.remark5", "003.ex6.gaussian_shared_covariance"])
def test_mutation_decide_without_affine_quotient_is_caught(monkeypatch, cid):
    """Seed 003 Ex. 6 (dependent modulo affine functions) catches a decide that forgets the quotient."""
    D = sys.modules["ntkcheck.decide"]

    monkeypatch.setattr(D, "decide", _decide_ignoring_affine)
    rep = run_claim(CLAIMS[cid], examples=10)
    assert rep.refuted == 1 and rep.unexpected
    assert "independent" in rep.detail


def test_mutation_gram_without_weights_is_caught(monkeypatch):
    """Prop. 5 (Gram = NTK quadratic form on L^2(mu_i)) catches a Gram without the 1/N_i weights."""
    G = importlib.import_module("ntkcheck.gram")

    def unweighted(samples, heads, **kw):
        F = _features([np.asarray(x) for x in samples], heads.Q, heads.b)
        N = np.concatenate([[x.shape[0]] * x.shape[0] for x in samples]).astype(float)
        ev = np.linalg.eigvalsh((F * np.sqrt(N)[:, None]) @ (F * np.sqrt(N)[:, None]).T)
        return SimpleNamespace(lambda_min=float(ev[0]), lambda_max=float(ev[-1]))

    monkeypatch.setattr(G, "gram", unweighted)
    rep = run_claim(CLAIMS["003.prop5.quadratic_form"], examples=10)
    assert rep.refuted == 1 and rep.unexpected


def test_mutation_gap_condition_without_distinctness_is_caught(monkeypatch):
    """Prop. 9 catches a gap condition that forgets 'pairwise distinct gaps'."""
    K = importlib.import_module("ntkcheck.conditions")

    real = K.gap_condition

    def lax(samples, direction, weights=None):
        g = real(samples, direction, weights)
        ok = all(len({tuple(r) for r in np.asarray(x).tolist()}) >= 2 for x in samples)
        return dataclasses.replace(g, holds=ok)

    monkeypatch.setattr(K, "gap_condition", lax)
    rep = run_claim(CLAIMS["003.prop9.gap"], examples=25)
    assert rep.refuted == 1 and rep.unexpected


def test_mutation_attention_bound_is_caught(monkeypatch):
    """Lemma 3.1 (i) catches an attention that drops the softmax normalisation (|A| can exceed D R)."""
    from ntkcheck.claims import _seed002 as S

    def unnormalised(x, Y, Q, K, V):
        xs = np.atleast_2d(x)
        w = np.exp((xs @ Q.T) @ (Y @ K.T).T / np.sqrt(Y.shape[1]))
        out = w @ Y @ V.T
        return out[0] if np.ndim(x) == 1 else out

    monkeypatch.setattr(S, "attention_002", unnormalised)
    rep = run_claim(CLAIMS["002.lemma3.1.i"], examples=20)
    assert rep.refuted == 1


# ----------------------------------------------------------------------------- CLI


def test_cli_json_only(capsys):
    code = main(["claims", "--only", "003.ex6.translation", "--only", "002.lemma3.1.i", "--examples", "3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [c["id"] for c in out["claims"]] == ["003.ex6.translation", "002.lemma3.1.i"]
    assert all(c["tried"] > 0 and c["refuted"] == 0 for c in out["claims"])


def test_cli_table_and_prefix(capsys):
    code = main(["claims", "--only", "002.lemma3.1*", "--examples", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "002.lemma3.1.i" in out and "002.lemma3.1.ii" in out and "seed 002" in out


def test_cli_known_refuted_claim_exits_zero(capsys):
    code = main(["claims", "--only", "003.ex5.as_stated", "--examples", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "known refuted" in out and "counterexample" in out


def test_cli_unexpected_failure_exits_one(monkeypatch, capsys):
    D = sys.modules["ntkcheck.decide"]

    monkeypatch.setattr(D, "decide", _decide_ignoring_affine)
    code = main(["claims", "--only", "003.ex6.translation", "--examples", "5", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["unexpected"] == ["003.ex6.translation"]
    assert out["claims"][0]["counterexample"] is not None


def test_cli_unknown_id_is_an_input_error(capsys):
    assert main(["claims", "--only", "nope"]) == 2
    assert "no such claim" in capsys.readouterr().err


def test_cli_list(capsys):
    assert main(["claims", "--list", "--json"]) == 0
    ids = [c["id"] for c in json.loads(capsys.readouterr().out)["claims"]]
    assert ids == list(C.CLAIMS)
