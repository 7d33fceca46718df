"""Issue 30 item 6: a verdict at a given direction says what it is.

Seed 003 Def. 6, eq. 33: the CGFs are strongly independent when there EXISTS a direction ``w``
along which no non-zero combination of the ``Lambda_i(t w)`` is affine in ``t``. An identity
along one ``w`` therefore proves nothing about strong dependence (which needs every direction);
``decide --property strong --direction w`` used to certify "dependent" from it (exit 1) for data it
certifies strongly independent without ``--direction``. References: the Taylor coefficients of
``t -> Lambda_i(t w)`` in Fraction arithmetic (``tests/helpers.py``), no ntkcheck.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction as F

import numpy as np
from helpers import exact_rank, ref_law, ref_rows, ref_taylor_1d
from hypothesis import given, settings
from hypothesis import strategies as st

import ntkcheck as nk
import ntkcheck.independence.decision as decision_module
from ntkcheck import Verdict
from ntkcheck.cli import main

#: projections on e1 coincide ({0, 1} twice); along (1, 1) they are {0, 1} and {5, -2}
PAIR = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 5.0], [1.0, -3.0]])]


def _rank_along(samples, w, K=6) -> int:
    rows, _ = ref_rows([ref_law(s) for s in samples], [w], K)
    return exact_rank(rows)


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    """``python -m ntkcheck ARGS`` in a process of its own: the interpreter's exit status."""
    return subprocess.run([sys.executable, "-m", "ntkcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def _in_process(capsys, *args: str) -> tuple[int, str]:
    """``ntkcheck ARGS`` in this process (``cli.main``, which ``python -m ntkcheck`` exits with):
    ``(exit status, stdout)``; no Python start-up and ``import ntkcheck`` (1-2 s) per run."""
    code = main(list(args))
    return code, capsys.readouterr().out


def test_reference_dependent_along_e1_strongly_independent():
    """The reference facts the tests below rest on: along e1 the two rows of orders 2..6 are equal
    (rank 1: dependent along e1), along (1, 1) they have rank 2 (so strongly independent, eq. 33)."""
    assert _rank_along(PAIR, (F(1), F(0))) == 1
    c = [ref_taylor_1d(ref_law(s), (1, 0), 8)[2:] for s in PAIR]
    assert c[0] == c[1]
    assert _rank_along(PAIR, (F(1), F(1))) == 2


def test_api_dependence_along_one_direction_is_not_strong_dependence():
    dec = nk.decide(PAIR, "strong", direction=[1, 0])
    assert dec.verdict is Verdict.INCONCLUSIVE and not dec.dependent
    assert "Along w = (1, 0)" in dec.sentence and "decides nothing" in dec.sentence
    ev = dec.certificate.evidence
    assert len(ev) == 1 and ev[0].kind.endswith("-identity")
    found = nk.decide(PAIR, "strong")
    assert found.independent and "certified along w = " in found.sentence
    at = nk.decide(PAIR, "strong", direction=[1, 1])
    assert at.independent and "along w = (1, 1)" in at.sentence


def test_cli_exit_status_and_headline(tmp_path, capsys, monkeypatch):
    """``decide --property strong --direction 1,0``: exit 3 (was 1, 'dependent'), the headline names
    w; without --direction exit 0 with the direction found in the headline; at (1, 1) exit 0. The
    first run is an interpreter of its own (its exit status), the others ``cli.main`` in this process."""
    np.save(tmp_path / "p.npy", np.stack(PAIR))
    out = _cli("decide", "p.npy", "--property", "strong", "--direction", "1,0", cwd=tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    head = " ".join(out.stdout.split())
    assert "at the direction w = (1, 0) given" in head and "Along w = (1, 0)" in head
    monkeypatch.chdir(tmp_path)
    code, stdout = _in_process(capsys, "decide", "p.npy", "--property", "strong", "--direction", "1,0", "--json")
    d = json.loads(stdout)
    assert code == 3 and d["verdict"] == "inconclusive" and "Along w = (1, 0)" in d["sentence"]
    for extra, want in (([], 0), (["--direction", "1,1"], 0)):
        code, stdout = _in_process(capsys, "decide", "p.npy", "--property", "strong", *extra)
        assert code == want and "certified along w = (" in " ".join(stdout.split())


def test_translates_are_strongly_dependent_whatever_w(tmp_path, capsys, monkeypatch):
    """A translate is dependent along every direction (the shift only moves order 1): with a direction
    given, weak dependence is proved and the verdict is 'dependent' (exit 1), worded 'along every
    direction'. Reference: orders 2..6 equal along three directions (Fraction)."""
    A = np.array([[0.0, 0.0], [1.0, 0.5], [0.25, 2.0]])
    B = A + np.array([0.5, -1.0])
    for w in ((1, 0), (3, -2), (1, 7)):
        c = [ref_taylor_1d(ref_law(s), w, 6)[2:] for s in (A, B)]
        assert c[0] == c[1]
    dec = nk.decide([A, B], "strong", direction=[1, 0])
    assert dec.dependent and "along every direction" in dec.sentence
    np.save(tmp_path / "t.npy", np.stack([A, B]))
    monkeypatch.chdir(tmp_path)
    assert _in_process(capsys, "decide", "t.npy", "--property", "strong", "--direction", "3,-2")[0] == 1


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=3, unique=True),
                min_size=2, max_size=3),
       st.tuples(st.integers(-2, 2), st.integers(-2, 2)).filter(lambda w: w != (0, 0)))
def test_strong_verdict_at_w_is_sound(pts, w):
    """Seed 003 eq. 33 at a given w: 'independent' needs full rank along w (exact, orders 2..8);
    'dependent' needs dependence along every direction: the null vector annihilates orders 2..6
    along three other directions too (Fraction)."""
    samples = [np.array(p, dtype=float) / 2 for p in pts]
    dec = nk.decide(samples, "strong", direction=list(w), timeout=30)
    if dec.independent:
        assert _rank_along(samples, tuple(F(v) for v in w), 8) == len(samples)
    if dec.dependent:
        c = dec.null_vector
        for u in ((1, 0), (2, 3), (-1, 5)):
            coeffs = [ref_taylor_1d(ref_law(s), u, 6) for s in samples]
            assert all(sum(ci * co[k] for ci, co in zip(c, coeffs)) == 0 for k in range(2, 7))


def test_mutation_the_old_along_w_verdict_is_caught(monkeypatch):
    """Mutation: the identity along w returned as a strong 'dependent' (the old behaviour): the API
    test above refuses it (and the soundness property would, for data independent elsewhere)."""
    def old(run, w, proof, K):
        return decision_module._decision(run, "strong", Verdict.DEPENDENT, "identity", "exact", proof, w, proof, K=K)

    monkeypatch.setattr(decision_module, "_dependent_along", old)
    dec = nk.decide(PAIR, "strong", direction=[1, 0])
    assert dec.dependent  # what the test above refuses
    assert _rank_along(PAIR, (F(1), F(1))) == 2  # while a direction of independence exists
