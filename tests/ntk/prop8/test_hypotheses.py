"""Issue 30 item 2: seed 003 Prop. 8 is invoked only for a head law whose support contains an open
set of (Q, b); a law that pins b or Q to zero (or a heads file) gets the kernel proved from the data,
or "not decided".

References are independent of ntkcheck: the features of random heads of the law in mpmath at 50
digits from the exact token values (``tests/helpers.py`` ``ref_features``), the kernel vector written
down by hand from the issue (``2 e_(0,0) - e_(1,0)``), the head law's NTK in d = 1 by Gauss-Hermite
quadrature (``head_law_kernel_1d``), and kernel dimensions counted in Fraction arithmetic.
"""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction as F

import mpmath
import numpy as np
import pytest
from helpers import exact_rank, head_law_kernel_1d, ref_features, ref_law, ref_mean
from hypothesis import given, settings
from hypothesis import strategies as st

import ntkcheck as nk
import ntkcheck.screening as screening
from ntkcheck.cgf import as_laws
from ntkcheck.ntk.prop8.hypotheses import HeadLawSupport, constant_feature_kernel, law_support

DPS = 50
#: |F^T v| relative to |F| |v| for an exact kernel vector, features at 50 digits: rounding is ~1e-50
RESIDUAL = 1e-40

# the issue's case: {(0,0),(1,0)}, {(0,0),(2,0)} and a generic third sample (no atom at 0)
ISSUE = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 0.0], [2.0, 0.0]]),
         np.array([[0.375, -0.8125], [-1.25, 0.4375]])]
PROP8_SENTENCE = "injective (seed 003 Prop. 8)"


def _flat(text: str) -> str:
    """A report's text with its line wrapping undone."""
    return " ".join(text.split())


def _features(samples, Q, b) -> mpmath.matrix:
    """The (M, H d) feature matrix at DPS digits (ref_features, no ntkcheck)."""
    H, d = len(Q), len(Q[0])
    vals = ref_features(samples, Q, b, DPS)
    M = len(vals) // (H * d)
    with mpmath.workdps(DPS):
        return mpmath.matrix([vals[r * H * d:(r + 1) * H * d] for r in range(M)])


def _relative_residual(Fm: mpmath.matrix, v) -> float:
    """|F^T v| / (|F|_F |v|) at DPS digits."""
    with mpmath.workdps(DPS):
        vm = mpmath.matrix([mpmath.mpf(x) for x in v])
        r = Fm.T * vm
        return float(mpmath.norm(r) / (mpmath.mnorm(Fm, "f") * mpmath.norm(vm)))


def _heads(rng, H, d, *, zero_q=False, zero_b=False):
    Q = [[[0.0 if zero_q else float(v) for v in row] for row in rng.normal(size=(d, d))] for _ in range(H)]
    b = [[0.0 if zero_b else float(v) for v in rng.normal(size=d)] for _ in range(H)]
    return Q, b


def test_b_zero_kernel_of_the_issue_annihilates_every_head():
    """With b = 0 the atom x = 0 has query 0 for every head, so its feature is its sample's mean:
    v = 2 e_(0,0) - e_(1,0) (means (1/2, 0) and (1, 0), equal masses 1/2) has F^T v = 0 for every
    draw. Checked on 40 random heads at 50 digits; with b != 0 the same v is not annihilated
    (the law then has a density and Prop. 8 applies)."""
    rng = np.random.default_rng(7)
    v = [2, 0, -1, 0, 0, 0]  # rows: sample 0 atoms (0,0), (1,0); sample 1 atoms (0,0), (2,0); sample 2
    Q, b0 = _heads(rng, 40, 2, zero_b=True)
    assert _relative_residual(_features(ISSUE, Q, b0), v) < RESIDUAL
    _, b1 = _heads(rng, 40, 2)
    assert _relative_residual(_features(ISSUE, Q, b1), v) > 1e-6
    k = constant_feature_kernel(as_laws(ISSUE), zero_q=False, zero_b=True)
    assert k is not None and k.dimension == 1 and k.constraint == "b = 0"
    assert k.classes == ((0, (0,)), (1, (0,))) and k.relations[0] in ((F(-2), F(1)), (F(2), F(-1)))
    q = k.gram_vectors(as_laws(ISSUE))  # Gram coordinates: nu / sqrt(m)
    assert q.shape == (6, 1)
    assert _relative_residual(_features(ISSUE, Q, b0), q[:, 0].tolist()) < 1e-14  # q in float64: 1e-16 relative


def test_screen_b_zero_proves_the_kernel_and_never_invokes_prop8():
    """The report says 'singular for every head of this law, proved', not the Prop. 8 sentence; the
    outcome is 'certified singular' (the heads drawn satisfy b = 0 exactly); the head law's
    lambda_min is 0 exactly, without drawing."""
    r = nk.screen(ISSUE, b_scale=0.0, head_law_seconds=5)
    text = _flat(r.table())
    assert r.weak.independent  # the CGFs are weakly independent: Prop. 8 would have said 'injective'
    assert PROP8_SENTENCE not in text and PROP8_SENTENCE not in _flat(r.bottom_line)
    assert "singular for every head of this law, proved" in _flat(r.bottom_line)
    assert r.outcome == "certified singular"
    assert r.law_support is not None and not r.law_support.open_set and r.law_support.singular
    assert r.head_law is not None and r.head_law.status == "singular" and r.head_law.heads == 0
    assert r.crosscheck.statement == "not applicable" and r.crosscheck.agreement == "agrees"
    assert np.all(r.drawn_heads.b == 0)  # the heads drawn are the law's: the proof covers them


def test_cli_exit_status_b_zero(tmp_path):
    """``screen --b-scale 0``: exit 1 (certified singular; it was 3 with the Prop. 8 sentence), and the
    JSON carries law_support with the kernel's exact relation."""
    np.savez(tmp_path / "s.npz", **{f"sample_{i}": x for i, x in enumerate(ISSUE)})
    out = subprocess.run([sys.executable, "-m", "ntkcheck", "screen", "s.npz", "--b-scale", "0", "--no-progress"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    assert PROP8_SENTENCE not in _flat(out.stdout)
    assert "singular for every head of this law, proved" in _flat(out.stdout)


def test_b_zero_without_an_atom_at_zero_is_not_decided():
    """Generic samples and b = 0: nothing is proved, and the report says Prop. 8 does not apply and the
    CGFs do not decide the law's injectivity (never 'injective (seed 003 Prop. 8)')."""
    rng = np.random.default_rng(3)
    samples = [rng.normal(size=(3, 2)) for _ in range(3)]
    sup = law_support(as_laws(samples), b_scale=0.0)
    assert not sup.open_set and sup.kernel is not None and sup.kernel.dimension == 0 and not sup.singular
    r = nk.screen(samples, b_scale=0.0, head_law_seconds=2)
    assert r.weak.independent and PROP8_SENTENCE not in _flat(r.bottom_line)
    assert "does not apply" in _flat(r.bottom_line) and "do not decide whether its NTK is injective" in _flat(r.bottom_line)
    assert r.crosscheck.agreement == "no prediction"
    assert "does not apply" in _flat(r.crosscheck.message)


def test_density_law_keeps_the_prop8_sentence():
    """The control: positive scales give a density, the hypothesis holds, Prop. 8 is invoked."""
    rng = np.random.default_rng(3)
    samples = [rng.normal(size=(3, 2)) for _ in range(3)]
    assert law_support(as_laws(samples), q_scale=0.5, b_scale=2.0, dist="uniform").open_set
    r = nk.screen(samples, head_law_seconds=0)
    assert r.weak.independent and PROP8_SENTENCE in _flat(r.bottom_line)


def test_q_zero_kernel_is_zero_mass_per_sample():
    """Q = 0: every atom of sample i has the feature grad Lambda_i(b), so the kernel has dimension
    >= M - n; the vectors annihilate 30 random heads with Q = 0 at 50 digits."""
    laws = as_laws(ISSUE)
    k = constant_feature_kernel(laws, zero_q=True, zero_b=False)
    assert k is not None and k.dimension == 6 - 3
    Q, b = _heads(np.random.default_rng(1), 30, 2, zero_q=True)
    Fm = _features(ISSUE, Q, b)
    for col in k.gram_vectors(laws).T:
        assert _relative_residual(Fm, col.tolist()) < 1e-14
    both = constant_feature_kernel(laws, zero_q=True, zero_b=True)  # every feature is the sample's mean
    means = [ref_mean(ref_law(x)) for x in ISSUE]
    assert both.dimension == 6 - exact_rank([list(m) for m in means])


def test_heads_file_gets_no_prop8_sentence(tmp_path):
    """Explicit heads are an atomic law: Prop. 8 is not invoked; their NTK is their Gram. Given heads
    with b = 0 exactly (read from the file) prove the issue's kernel; with b != 0 nothing is proved."""
    rng = np.random.default_rng(5)
    Q = rng.normal(size=(16, 2, 2))
    r0 = nk.screen(ISSUE, heads=nk.Heads(Q, np.zeros((16, 2))))
    assert r0.law_support.given and r0.law_support.singular and r0.outcome == "certified singular"
    assert PROP8_SENTENCE not in _flat(r0.bottom_line)
    rng2 = np.random.default_rng(3)
    samples = [rng2.normal(size=(3, 2)) for _ in range(3)]
    r1 = nk.screen(samples, heads=nk.Heads(rng.normal(size=(24, 2, 2)), rng.normal(size=(24, 2))))
    assert r1.law_support.given and not r1.law_support.singular
    assert PROP8_SENTENCE not in _flat(r1.bottom_line) and "their NTK is their Gram" in _flat(r1.bottom_line)


def test_head_law_quadrature_sees_the_kernel_in_d1():
    """The head law's NTK itself (not a draw), in d = 1 by Gauss-Hermite quadrature with b = 0:
    samples {0, 1}, {0, 2}, {0.5, -1.25}: the Gram-coordinate kernel vector of ntkcheck has
    |K_rho q| <= 1e-12 |K_rho| |q| (quadrature in float64), while lambda_max is order 0.1."""
    samples = [[0.0, 1.0], [0.0, 2.0], [0.5, -1.25]]
    masses = [[0.5, 0.5]] * 3
    K = head_law_kernel_1d(samples, masses, 1.0, 0.0, 120, 1)
    laws = as_laws([np.array(s)[:, None] for s in samples])
    k = constant_feature_kernel(laws, zero_q=False, zero_b=True)
    q = k.gram_vectors(laws)[:, 0]
    lam_max = float(np.linalg.eigvalsh(K)[-1])
    assert lam_max > 0.05
    assert np.linalg.norm(K @ q) <= 1e-12 * lam_max * np.linalg.norm(q)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=4),
       st.integers(0, 2**31 - 1))
def test_b_zero_kernel_dimension_and_vectors(d, spec, seed):
    """For samples of 1-3 random atoms, some holding the origin, under b = 0: the kernel dimension is
    (#samples holding 0) - rank(their means) (Fraction, helpers), and every vector annihilates 6
    random heads with b = 0 at 50 digits."""
    rng = np.random.default_rng(seed)
    samples = []
    for has0, m in spec:
        x = np.round(rng.normal(size=(m, d)) * 8) / 8 + 0.0625  # dyadic, never exactly 0
        if has0:
            x = np.vstack([np.zeros((1, d)), x])
        samples.append(x)
    laws = as_laws(samples)
    k = constant_feature_kernel(laws, zero_q=False, zero_b=True)
    means = [list(ref_mean(ref_law(x))) for x, (has0, _) in zip(samples, spec, strict=True) if has0]
    want = len(means) - (exact_rank([[m[c] for m in means] for c in range(d)]) if means else 0)
    assert k.dimension == want
    if want:
        Q, b = _heads(rng, 6, d, zero_b=True)
        Fm = _features(samples, Q, b)
        for col in k.gram_vectors(laws).T:
            assert _relative_residual(Fm, col.tolist()) < 1e-14


def test_mutation_an_unchecked_hypothesis_is_caught(monkeypatch):
    """Mutation: the law's support taken to contain an open set whatever the scales (the old
    behaviour): the b = 0 report says 'injective (seed 003 Prop. 8)', which the tests above refuse."""
    monkeypatch.setattr(screening, "law_support", lambda laws, **kw: HeadLawSupport("planted", True))
    r = nk.screen(ISSUE, b_scale=0.0, head_law_seconds=0)
    assert PROP8_SENTENCE in _flat(r.bottom_line) and r.outcome != "certified singular"


@pytest.mark.parametrize("dist", ["gaussian", "uniform"])
def test_zero_scales_are_recognised_for_both_laws(dist):
    laws = as_laws(ISSUE)
    assert law_support(laws, dist=dist).open_set
    for q, b in ((0.0, 1.0), (1.0, 0.0), (0.0, 0.0)):
        sup = law_support(laws, q_scale=q, b_scale=b, dist=dist)
        assert not sup.open_set and sup.singular and "does not apply" in sup.sentence()
        assert HeadLawSupport.from_dict(sup.to_dict()) == sup
