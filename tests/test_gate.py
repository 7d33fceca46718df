"""The screening gate (issue 25): a Gram certified positive below a useful rate is its own
conclusion, exit status 3, with the near-dependency named.

The reproducer of the issue: a product triple ``{0, u}, {0, v}, {0, u, v, u+v}`` whose ``u+v``
was computed in float64 (so ``mu_4`` is only within rounding of ``mu_2 * mu_3``), beside two
random samples. It used to read "certified positive", ``lambda_min = 3.6e-32``, "Next: train",
exit 0, and exit 0 again after a 1e-12 perturbation.
"""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest

from ntkcheck import screen
from ntkcheck.cgf import as_laws
from ntkcheck.cli import main
from ntkcheck.errors import InputError
from ntkcheck.ntk import init_heads
from ntkcheck.ntk.heads import law as head_law
from ntkcheck.screening import default_head_count


def _rounded_product(perturb: float = 0.0) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    u, v = rng.standard_normal(3), rng.standard_normal(3)
    w = u + v
    assert not np.array_equal(w - u, v)  # u + v was rounded: the triple is not an exact product
    z = np.zeros(3)
    S = [rng.standard_normal((6, 3)) for _ in range(2)] + [np.stack([z, u]), np.stack([z, v]), np.stack([z, u, v, w])]
    if perturb:
        S[4] = S[4] + perturb * rng.standard_normal((4, 3))
    return S


@pytest.fixture(scope="module")
def reports():
    """The two reproducers, screened once for the module. With the suite's short head-law budget:
    conftest's autouse fixture that sets it is per test, and a module fixture is set up before it
    (with the default 20 s, each screening of these data spent its whole 20 s on the head law)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(head_law, "DEFAULT_SECONDS", 0.3)
        return {p: screen(_rounded_product(p)) for p in (0.0, 1e-12)}


@pytest.mark.parametrize("perturb", [0.0, 1e-12])
def test_rounded_product_is_certified_but_below_a_useful_rate(reports, perturb):
    """Both reproducers of the issue: positivity is certified (true for these numbers), but the
    conclusion is not "certified positive", and the bottom line names samples 2, 3, 4."""
    r = reports[perturb]
    assert r.gram.certified_positive and r.weak.independent
    assert r.outcome == "certified positive, below a useful rate"
    assert r.gram.certified.lower_bound / r.gram.lambda_max < 1e-20  # measured 1.3e-32 and 2.3e-26
    assert r.near_dependency["samples"] == [2, 3, 4]
    assert "samples [2, 3, 4]" in r.bottom_line and "Next: train" not in r.bottom_line
    assert "below the useful rate 1e-12" in r.bottom_line


def test_the_rounding_note_of_decide_reaches_the_text_and_the_outcome(reports, tmp_path, capsys):
    """``decide`` notes the rounding-level coincidence; ``screen`` shows it (it used to drop it)."""
    r = reports[0.0]
    note = next(n for n in r.weak.notes if "rounding level" in n)
    assert note in r.near_dependency["rounding_notes"]
    assert "rounding level of float64 data" in r.bottom_line
    f = tmp_path / "prod.npz"
    np.savez(f, **{f"sample_{i}": x for i, x in enumerate(_rounded_product())})
    assert main(["screen", str(f)]) == 3
    out = capsys.readouterr().out
    assert "note (decide): the gap-condition certificate rests on differences" in out
    assert main(["screen", str(f), "--json"]) == 3
    o = json.loads(capsys.readouterr().out)["outcome"]
    assert o["conclusion"] == "certified positive, below a useful rate" and o["exit_code"] == 3
    assert note in o["notes"] and o["near_dependency"]["samples"] == [2, 3, 4]
    # gram takes the same route and reaches the same conclusion
    assert main(["gram", str(f), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["outcome"]["conclusion"] == "certified positive, below a useful rate"


def test_the_slowest_mode_is_the_prop8_kernel_vector(reports):
    """Independent reference: for the exact product, seed 003 Prop. 8 gives the kernel vector
    ``q_ia = c_i nu({x_ia}) / sqrt(m_ia)``, ``c = (1, 1, -1)`` on samples 2, 3, 4, ``nu = delta_0``:
    ``sqrt(2), sqrt(2), -2`` at the atom 0, so shares 2/8, 2/8, 4/8 of ``|q|^2``. The float64 slow
    mode of the rounded data matches it to 1e-6 (its error is ~u / gap, the gap ~1e-4)."""
    np.testing.assert_allclose(reports[0.0].slow_mode.shares, [0, 0, 0.25, 0.25, 0.5], atol=1e-6)


def test_the_gate_reads_the_true_lambda_min():
    """Independent computation of what the gate sees: the Gram of the rounded product in mpmath at
    60 digits (features with mpmath exponentials, eigenvalues by ``mp.eigsy``): its relative
    ``lambda_min`` is below 1e-28, far under the threshold, and positive (the data are not an exact
    product). Tolerance: 60 digits resolve relative eigenvalues to ~1e-55."""
    laws = as_laws(_rounded_product())
    H = default_head_count(sum(law.n_atoms for law in laws), 3)
    heads = init_heads(H, 3, seed=0)
    with mpmath.workdps(60):
        rows = []
        for law in laws:
            X = [[mpmath.mpf(float(v)) for v in x] for x in law.atoms]
            m = [mpmath.mpf(q.numerator) / q.denominator for q in law.weights]
            for a, x in enumerate(X):
                row = []
                for h in range(H):
                    Q, b = heads.Q[h], heads.b[h]
                    qx = [sum(mpmath.mpf(float(Q[i, j])) * x[j] for j in range(3)) + float(b[i]) for i in range(3)]
                    e = [m[k] * mpmath.exp(sum(qx[i] * y[i] for i in range(3))) for k, y in enumerate(X)]
                    row += [sum(e[k] * X[k][c] for k in range(len(X))) / sum(e) * mpmath.sqrt(m[a] / H)
                            for c in range(3)]
                rows.append(row)
        F = mpmath.matrix(rows)
        ev = mpmath.eigsy(F * F.T, eigvals_only=True)
        rel = min(ev) / max(ev)
    assert 0 < rel < 1e-28


def test_healthy_data_pass_the_gate():
    """Calibration on data whose truth is known (random Gaussian tokens: independent, Gram
    well conditioned): 8 of 8 pass with exit-0 conclusions; the gate does not fire on them."""
    rng = np.random.default_rng(7)
    outs = [screen(list(rng.standard_normal((4, 5, 3)))).outcome for _ in range(8)]
    assert outs == ["certified positive"] * 8


def test_a_dependency_rounded_in_float32_is_caught():
    """Calibration on a false case: the product triple with ``u + v`` computed in float32 (the
    data are within float32 rounding of a dependency). Caught 5 of 5 draws, each naming samples
    2, 3, 4 (measured relative lambda_min 1e-18 to 6e-18)."""
    named = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        u, v = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
        w = (u + v).astype(np.float64)
        u, v, z = u.astype(np.float64), v.astype(np.float64), np.zeros(3)
        S = [rng.standard_normal((6, 3)) for _ in range(2)] + [np.stack([z, u]), np.stack([z, v]), np.stack([z, u, v, w])]
        r = screen(S)
        assert r.outcome == "certified positive, below a useful rate"
        named.append(r.near_dependency["samples"])
    assert named == [[2, 3, 4]] * 5


def test_the_threshold_decides_and_zero_turns_the_gate_off():
    """The same data pass with ``min_relative_lambda=0`` (the certificate is unchanged) and fail
    at a threshold above their certified relative bound."""
    S = _rounded_product()
    assert screen(S, min_relative_lambda=0).outcome == "certified positive"
    rng = np.random.default_rng(3)
    healthy = list(rng.standard_normal((3, 4, 3)))
    r = screen(healthy)
    rel = r.gram.certified.lower_bound / r.gram.lambda_max
    assert screen(healthy, min_relative_lambda=min(0.99, 2 * rel)).outcome == "certified positive, below a useful rate"


def test_a_gate_that_ignores_the_rate_is_caught(monkeypatch):
    """Mutation: with the rate check planted away (every certified Gram "useful"), the reproducer
    is "certified positive" again: the tests above would fail on it."""
    import ntkcheck.screening as scr

    monkeypatch.setattr(scr, "useful_rate", lambda g, r=0: True if g.certified_positive else None)
    assert screen(_rounded_product()).outcome == "certified positive"


@pytest.mark.parametrize("bad", [-1e-3, 1.0, float("nan"), "x", True])
def test_bad_thresholds_are_refused(bad, capsys):
    with pytest.raises(InputError, match="min_relative_lambda"):
        screen(_rounded_product(), min_relative_lambda=bad)
    with pytest.raises(SystemExit) as exc:  # argparse: a usage error, exit 2
        main(["screen", "--min-relative-lambda", "2"])
    assert exc.value.code == 2 and "expected a number in [0, 1)" in capsys.readouterr().err
