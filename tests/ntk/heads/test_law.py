"""Tests of ntkcheck.ntk.heads.law: the certificate of lambda_min of the head law's NTK K_rho.

The reference is a tensor Gauss-Hermite quadrature of K_rho in d = 1, where the head law is a
2-D Gaussian (tests/helpers.py, written from the definition without ntkcheck). The coverage
test draws many independent head sets and counts how often the certified interval misses the
quadrature value; mutations of the Bernstein bound (no variance term, delta for log(1/delta))
make it fail. The inversions of the tail bounds are checked against mpmath root finding, the
bound L and the rounding terms against the features computed from the definition.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from helpers import head_law_lambda_min_1d
from scipy.special import logsumexp
from scipy.stats import binom

from ntkcheck.errors import InputError
from ntkcheck.ntk import dependence_structure
from ntkcheck.ntk.heads import preconditioner, rounds
from ntkcheck.ntk.heads import tail_bounds as steps
from ntkcheck.ntk.heads.law import head_law_bound

# ------------------------------------------------------------ the coverage of the certificate

#: d = 1, one sample {-1, 1} with masses 1/2: features tanh(b - q), tanh(b + q); with b much
#: wider than q the bottom direction of K_rho is a near-Bernoulli variable (the bound is nearly
#: tight there, so a weakened bound is seen failing). lambda_min(K_rho) = 0.0925 by quadrature.
TIGHT = ([[-1.0, 1.0]], [[0.5, 0.5]], 2.0, 10.0)
#: a two-point sample and a Dirac: lambda_min(K_rho) = 0.0716
WITH_DIRAC = ([[-1.0, 0.5], [1.0]], [[0.5, 0.5], [1.0]], 1.0, 1.0)
#: two samples in d = 1 where L / lambda = 6500: the preconditioned lens is chosen, and 2000 heads
#: give a lower bound of about 0.65 lambda where the identity lens needs 8000 for a positive one
SPREAD = ([[-1.0, 0.5, 1.0], [-0.5, 0.25, 2.0]], [[1 / 3] * 3, [1 / 3] * 3], 1.0, 1.0)
#: seeds of the coverage test (per lens), heads per seed and the failure probability tested
SEEDS = {"identity": 400, "preconditioned": 200}
HEADS, DELTA = 2000, 0.1


def allowed(seeds):
    """Failures allowed: the 1 - 1e-6 quantile of Binomial(seeds, DELTA), so a correct bound fails the
    test with probability below 1e-6 (for the fixed seeds: never); a bound failing 30% of the time is
    caught with probability above 1 - 1e-6 (400 seeds: at most 71 of 400; 200 seeds: 42 of 200)."""
    return int(binom.isf(1e-6, seeds, DELTA))


@functools.cache
def _reference_of(samples, masses, q, b):
    return head_law_lambda_min_1d(samples, masses, q, b)


def _reference(case):
    """(lambda_min of K_rho, error estimate) by quadrature, computed once per case."""
    samples, masses, q, b = case
    return _reference_of(tuple(map(tuple, samples)), tuple(map(tuple, masses)), q, b)


def _coverage(case, lens="auto", seeds=400, heads=HEADS, delta=DELTA, stop_low=None):
    """(misses of the interval, misses of the lower bound, lower bounds / lambda, lenses used) over
    ``seeds`` head sets, the lens forced (``identity``, ``preconditioned``) or chosen (``auto``).
    ``stop_low``: stop once the lower bound has missed more often than this (the count only grows
    with the seeds, so ``low_miss > stop_low`` is then decided: the mutation tests)."""
    samples, _, q, b = case
    lam, err = _reference(case)
    X = [np.array(s)[:, None] for s in samples]
    miss = low_miss = 0
    ratios, kinds = [], set()
    old, preconditioner.CHOICE = preconditioner.CHOICE, lens
    try:
        for seed in range(seeds):
            hl = head_law_bound(X, heads=heads, delta=delta, q_scale=q, b_scale=b, seed=seed)
            low = hl.lower > lam + err
            low_miss += low
            miss += low or hl.upper < lam - err
            ratios.append(hl.lower / lam)
            kinds.add(hl.rounds[-1].kind)
            if stop_low is not None and low_miss > stop_low:
                break
    finally:
        preconditioner.CHOICE = old
    return miss, low_miss, np.array(ratios), kinds


@pytest.fixture(scope="module", params=["identity", "preconditioned"])
def tight_coverage(request):
    return request.param, _coverage(TIGHT, request.param, SEEDS[request.param])


def test_quadrature_reference_converged():
    """The reference's error estimate is far below the slack the coverage test needs (1e-3 of lambda)."""
    for case in (TIGHT, WITH_DIRAC, SPREAD):
        lam, err = _reference(case)
        assert err < 1e-5 * lam


def test_coverage_of_the_head_law_interval(tight_coverage):
    """With probability >= 1 - delta (delta = 0.1) lower <= lambda_min(K_rho) <= upper, for either lens:
    over independent head sets of 2000 heads (400 with the identity lens, 200 preconditioned) the
    interval misses the quadrature value at most allowed(seeds) times. Measured: 1 miss of 400, 1 of 200."""
    lens, (miss, _, _, kinds) = tight_coverage
    assert kinds == {"plain" if lens == "identity" else "preconditioned"}
    assert miss <= allowed(SEEDS[lens]), (miss, lens)


def test_the_lower_bound_is_not_vacuous(tight_coverage):
    """At 2000 heads every lower bound is within a factor 2 of the quadrature lambda_min (positive and
    at least lambda / 2) with either lens: the bound is certified, not empty (measured: at least 0.63)."""
    _, (_, _, ratios, _) = tight_coverage
    assert ratios.min() >= 0.5, ratios.min()


def test_coverage_with_a_dirac_sample():
    """The same coverage with two samples, one a single Dirac (200 seeds, quantile of Binomial(200, 0.1))."""
    miss, _, ratios, _ = _coverage(WITH_DIRAC, seeds=200)
    assert miss <= allowed(200)
    assert np.median(ratios) >= 0.5


def test_the_preconditioned_lens_needs_far_fewer_heads():
    """SPREAD (L / lambda = 6500): the lens chosen is the preconditioned one; at 2000 heads its interval
    covers the quadrature value (100 seeds, at most allowed(100) misses; measured 0) with a median lower
    bound above lambda / 2 (measured 0.65), where the identity lens gives no positive lower bound at all
    (it needs more than L t / (3 lambda) = 8000 heads)."""
    miss, _, ratios, kinds = _coverage(SPREAD, seeds=100)
    assert kinds == {"preconditioned"} and miss <= allowed(100)
    assert np.median(ratios) >= 0.5 and ratios.min() > 0
    _, _, plain, kinds = _coverage(SPREAD, "identity", seeds=3)
    assert kinds == {"plain"} and plain.max() == 0.0


@pytest.mark.parametrize("lens", ["identity", "preconditioned"])
@pytest.mark.parametrize("mutation", ["no variance term", "delta instead of log(1/delta)"])
def test_coverage_test_catches_a_weakened_bound(monkeypatch, mutation, lens):
    """Mutations of the Bernstein inversion are caught with either lens: without the variance term
    sqrt(2 L lambda t / H), or with t = delta / 2 instead of log(2 / delta), the lower bound exceeds
    lambda_min(K_rho) on more than allowed(seeds) of the head sets (measured, preconditioned without
    the variance term: 69 of 200)."""
    real = steps.bernstein_lower

    def weakened(c, L, H, t):
        if mutation == "no variance term":
            return max(0.0, c - L * t / (3.0 * H))
        return real(c, L, H, math.exp(-t))  # t = log(2 / delta) -> delta / 2

    monkeypatch.setattr(steps, "bernstein_lower", weakened)
    _, low_miss, _, _ = _coverage(TIGHT, lens, SEEDS[lens], stop_low=allowed(SEEDS[lens]))
    assert low_miss > allowed(SEEDS[lens]), (low_miss, lens)


def test_a_round_is_measured_through_a_lens_its_own_heads_never_chose(monkeypatch):
    """Independence behind both bounds: the preconditioner T, the range B and the direction v of a round
    depend only on earlier heads (the pilot and the calibration block). Replacing the certified round's
    heads by others leaves its lens unchanged bit for bit (a lens fitted to the round's heads, e.g. v its
    own bottom eigenvector, would change)."""
    x = [np.array(s)[:, None] for s in SPREAD[0]]
    lenses = []
    real_init = rounds.Round.__init__

    def spy(self, s, j, lens, plan, delta_j, stream, single=False):
        lenses.append((stream, lens))
        real_init(self, s, j, lens, plan, delta_j, stream, single)

    monkeypatch.setattr(rounds.Round, "__init__", spy)
    head_law_bound(x, heads=500, delta=0.1, seed=1)
    real_block = rounds.Setup.block  # the certified round draws from streams 2 and 3
    monkeypatch.setattr(rounds.Setup, "block",
                        lambda self, k, c, stream: real_block(self, k + (10**6 if stream in (2, 3) else 0), c, stream))
    head_law_bound(x, heads=500, delta=0.1, seed=1)
    (s1, a), (s2, b_) = [p for p in lenses if p[0] == 1]
    assert s1 == s2 == 1 and a.T is not None and a.v is not None
    assert np.array_equal(a.T, b_.T) and np.array_equal(a.v, b_.v) and a.B == b_.B


def test_the_upper_bound_covers_and_is_tight():
    """The upper side alone (the betting confidence sequence along the direction of the pilot): over 100 head
    sets of 2000 heads at delta = 0.1 (TIGHT, the bottom direction near-Bernoulli) upper >= lambda_min(K_rho)
    except at most allowed(100) times (measured: 1 miss), and within 1.5 lambda every time (measured: median
    1.15, largest 1.35; the better of the Chernoff-Hoeffding and second-moment bounds it replaced, on the
    same heads: median 1.21, largest 1.40)."""
    lam, err = _reference(TIGHT)
    samples, _, q, b = TIGHT
    X = [np.array(x)[:, None] for x in samples]
    ups = np.array([head_law_bound(X, heads=HEADS, delta=DELTA, q_scale=q, b_scale=b, seed=seed).upper
                    for seed in range(100)]) / lam
    assert int(np.sum(ups < 1.0 - err / lam)) <= allowed(100)
    assert ups.max() <= 1.5 and np.median(ups) <= 1.25, (ups.max(), np.median(ups))


def test_the_bets_of_a_block_are_fixed_before_its_heads(monkeypatch):
    """Ville's inequality needs each block's bet fixed before its heads are drawn: replacing only block 3 of the
    certified round's heads leaves the bets of blocks 0..3 unchanged bit for bit, and changes a later one (the
    bets do adapt to the heads before them). A bet read off its own block would change at block 3."""
    from ntkcheck.ntk.heads import accumulate

    monkeypatch.setattr(accumulate, "_BLOCK_ENTRIES", 512)
    monkeypatch.setattr(accumulate, "_MIN_COLUMNS", 512)  # blocks of 512 heads in d = 1
    samples, _, q, b = TIGHT  # the bets are below their cap 1/L_v here, set by the variance of the form
    x = [np.array(s)[:, None] for s in samples]
    runs = []
    real_add = accumulate.RoundSums.add

    def spy(self, Q, b_, gram, form=True):
        if form and self.lens.v is not None:
            runs[-1].append(self.bet_lambda)
        real_add(self, Q, b_, gram, form)

    monkeypatch.setattr(accumulate.RoundSums, "add", spy)
    real_block = rounds.Setup.block  # the certified round of heads=N draws its Gram (and form) from stream 2
    for shift in (0, 10**6):
        monkeypatch.setattr(rounds.Setup, "block", lambda self, k, c, stream, shift=shift: real_block(
            self, k + (shift if (stream, k) == (2, 3) else 0), c, stream))
        runs.append([])
        head_law_bound(x, heads=4096, delta=0.1, seed=1, q_scale=q, b_scale=b)
    one, two = runs
    assert len(one) == len(two) == 8 and max(one) < 1.0
    assert one[:4] == two[:4] and one[4:] != two[4:], (one, two)


def test_the_deadline_reads_the_upper_sequence_at_the_heads_drawn():
    """A round interrupted by the deadline reads its upper side's confidence sequence once more at the heads
    drawn (1000, between the checkpoints 1024 and 2048 of a base of 4096), at the side's delta_j / 2 (the
    sequence holds at every head count: no further failure probability), and that reading is the bound of
    those heads (the same as upper_at on them); the lower side gets no extra checkpoint."""
    import time

    from ntkcheck.cgf import as_laws
    from ntkcheck.ntk.heads.accumulate import Lens
    from ntkcheck.ntk.heads.head_range import direction_bound
    from ntkcheck.ntk.heads.law import _setup
    from ntkcheck.ntk.heads.rank import atom_span

    samples, _, q, b = TIGHT
    laws = as_laws([np.array(x)[:, None] for x in samples])
    s = _setup(laws, atom_span(laws), q_scale=q, b_scale=b, dist="gaussian", seed=3)
    v = np.array([1.0, -1.0]) / math.sqrt(2.0)
    lens = Lens(None, 1.0, 1.0, s.L, v, float(v @ v) * (1 - 1e-15), direction_bound(s.laws, v), 0.01)
    r = rounds.Round(s, 1, lens, rounds.Plan(64, 4096), 0.1, stream=5)
    assert r.advance(64, 1000, None)
    before = list(r.outs)
    assert not r.advance(64, 4096, time.perf_counter() - 1.0)
    new = r.outs[len(before):]
    assert [(o.side, o.heads, o.delta) for o in new] == [("upper", 1000, 0.05)]
    assert new[0].upper == rounds.upper_at(s, lens, r.sums, 0.05, 0.0).upper < math.inf
    assert all(o.heads < 1000 for o in before if o.side == "upper")


def test_adaptive_rounds_cover_and_stop_when_tight(monkeypatch):
    """Adaptive rounds: the pilot (identity lens) first, round j spending at most delta_j = delta / ((j+1)(j+2))
    over the checkpoints of its two sides (the upper side's all at delta_j / 2: one confidence sequence),
    the certificate the largest lower and smallest upper bound over the rounds, stopped once upper <= 2
    lower (TIGHT set to 2: the default 1.25 takes far longer without a budget); the interval covers the quadrature value (20 seeds at delta = 0.1: at most 8 misses, the
    1 - 1e-6 quantile of Binomial(20, 0.1)). One sample {-1, 1/2, 1} with q_scale = b_scale = 1
    (lambda_min(K_rho) = 0.0019, L = 1) needs thousands of heads."""
    case = ([[-1.0, 0.5, 1.0]], [[1 / 3] * 3], 1.0, 1.0)
    lam, err = _reference(case)
    monkeypatch.setattr(rounds, "TIGHT", 2.0)  # without a budget the rounds run until upper <= TIGHT lower
    miss = 0
    for seed in range(20):
        hl = head_law_bound([np.array(case[0][0])[:, None]], delta=DELTA, seed=seed, seconds=None)
        assert hl.rounds[0].kind == "plain" and hl.rounds[0].round == 0
        assert max(r.heads for r in hl.rounds if r.round == 0) == rounds.PILOT_HEADS
        for j in {r.round for r in hl.rounds}:  # each round spends less than delta_j over its checkpoints:
            # the lower side's add up, the upper side's read one confidence sequence (one event, delta_j / 2)
            ups = {r.delta for r in hl.rounds if r.round == j and r.side == "upper"}
            assert len(ups) <= 1 and ups <= {steps.round_delta(DELTA, j) / 2}
            spent = math.fsum(r.delta for r in hl.rounds if r.round == j and r.side == "lower") + sum(ups)
            assert spent < steps.round_delta(DELTA, j)
        assert hl.lower == max(r.lower for r in hl.rounds) and hl.upper == min(r.upper for r in hl.rounds)
        assert hl.status == "positive" and hl.upper <= rounds.TIGHT * hl.lower
        last = {r.round: r.heads for r in hl.rounds}  # checkpoints count the round's heads so far
        assert hl.heads == sum(last.values()) + rounds.CALIBRATION_HEADS * (len(last) - 1)
        miss += not (hl.lower <= lam + err and hl.upper >= lam - err)
    assert miss <= int(binom.isf(1e-6, 20, DELTA))


def test_a_short_budget_answers_with_the_rounds_it_finished():
    """A budget too short for a tight interval never refuses up front: the rounds that finished give the
    bounds, the report says how many more heads (and seconds) a factor 2 needs."""
    rng = np.random.default_rng(0)
    X = list(rng.standard_normal((5, 4, 3)) / math.sqrt(3))
    hl = head_law_bound(X, delta=1e-6, seconds=1.0)
    assert hl.rounds and hl.upper is not None and hl.seconds < 5.0
    assert hl.status in ("positive", "not separated")
    if hl.upper > 4 * (hl.lower or 0):
        assert hl.heads_estimate and any("more heads" in ln for ln in hl.report_lines())


# ------------------------------------------------------------------ the ingredients of the bound


def _features(X, masses, Q, b):
    """Rows sqrt(m_a) phi(x_a; Q, b) of one sample, from the definition (numpy)."""
    S = (X @ Q.T + b) @ X.T + np.log(masses)
    P = np.exp(S - logsumexp(S, axis=1, keepdims=True))
    return np.sqrt(masses)[:, None] * (P @ X)


def test_feature_perturbation_bounds_behind_eta():
    """The derivative bounds behind the rounding terms hold on random perturbations:
    |phi(Q, b) - phi(Q', b')| <= R^2 (R |Q - Q'|_F + |b - b'|) and, moving every atom by at most eps,
    |phi - phi~| <= eps (1 + 2 R^2 |Q|_F + R |b|) (R the largest norm at either end)."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        X = rng.standard_normal((5, 3))
        m = np.full(5, 0.2)
        Q, b = rng.standard_normal((3, 3)) * 2, rng.standard_normal(3) * 2
        R = np.max(np.linalg.norm(X, axis=1))
        dQ, db = rng.standard_normal((3, 3)) * 1e-3, rng.standard_normal(3) * 1e-3
        d1 = np.abs(_features(X, m, Q, b) - _features(X, m, Q + dQ, b + db)) / np.sqrt(m)[:, None]
        assert np.linalg.norm(d1, axis=1).max() <= R**2 * (R * np.linalg.norm(dQ) + np.linalg.norm(db)) * 1.0001
        E = rng.standard_normal((5, 3))
        E *= 1e-3 / np.linalg.norm(E, axis=1).max()
        R2 = max(R, np.max(np.linalg.norm(X + E, axis=1)))
        d2 = (_features(X, m, Q, b) - _features(X + E, m, Q, b)) / np.sqrt(m)[:, None]
        bound = 1e-3 * (1 + 2 * R2**2 * np.linalg.norm(Q) + R2 * np.linalg.norm(b))
        assert np.linalg.norm(d2, axis=1).max() <= bound * 1.0001


def test_gaussian_heads_see_only_the_span():
    """Atoms on a line of R^3 with Gaussian heads in d = 3 have the head law's NTK of their coordinates
    on the line with Gaussian heads in d = 1 (the reduction): the certificate drawn in the span covers the
    1-D quadrature value, and a plain Monte Carlo average of the d = 3 Gram agrees with it."""
    samples, masses, q, b = TIGHT
    lam, err = _reference(TIGHT)
    e = np.array([2.0, -1.0, 2.0]) / 3.0  # a unit vector with exact float coordinates
    X = [np.array(samples[0])[:, None] * e[None, :]]
    hl = head_law_bound(X, heads=4000, delta=0.1, q_scale=q, b_scale=b, seed=3)
    assert hl.reduced_dim == 1 and hl.eta < 1e-12
    assert hl.lower <= lam + err <= hl.upper + 2 * err
    assert hl.lower >= 0.5 * lam
    # independent Monte Carlo in d = 3 (numpy, no reduction): 20000 heads, 6 standard errors
    rng = np.random.default_rng(4)
    G = np.zeros((2, 2))
    vals = []
    for _ in range(20000):
        A = _features(X[0], np.array([0.5, 0.5]), rng.standard_normal((3, 3)) * q, rng.standard_normal(3) * b)
        Xh = A @ A.T
        G += Xh
        vals.append(Xh)
    G /= 20000
    u = np.linalg.eigh(G)[1][:, 0]
    sd = np.std([u @ v @ u for v in vals]) / np.sqrt(20000)
    assert abs(np.linalg.eigvalsh(G)[0] - lam) <= 6 * sd


def test_a_proved_kernel_needs_no_heads():
    """When the dependence structure proves a kernel (a duplicated sample), K_rho is singular exactly:
    status 'singular', bounds 0, nothing drawn, probability 1."""
    x = np.array([[0.0, 1.0], [1.0, 0.5], [-1.0, 0.25]])
    hl = head_law_bound([x, x], structure=dependence_structure([x, x]))
    assert (hl.status, hl.lower, hl.upper, hl.heads) == ("singular", 0.0, 0.0, 0)
    assert "exactly" in hl.statement()


def test_statement_states_delta_and_json_carries_it():
    """Every report line that uses delta states it; to_dict carries delta, the bounds and the rounds."""
    x = np.array([[-1.0], [1.0]])
    hl = head_law_bound([x], heads=500, delta=0.05, q_scale=2.0, b_scale=10.0)
    lines = hl.report_lines()
    assert "1 - 0.05" in lines[0] and all(len(ln) <= 140 for ln in lines)
    d = hl.to_dict()
    assert d["delta"] == 0.05 and d["lower"] == hl.lower and max(r["heads"] for r in d["rounds"]) == 500


@pytest.mark.parametrize("kw", [{"delta": 0.0}, {"delta": 1.0}, {"heads": 0}, {"seconds": -1.0},
                                {"dist": "cauchy"}, {"heads": True}])
def test_bad_arguments_are_refused(kw):
    with pytest.raises(InputError):
        head_law_bound([np.array([[0.0], [1.0]])], **kw)


# ------------------------------------------------------- data whose float64 view collapses (issue 30)


def test_tokens_below_the_float64_range_get_a_sentence_not_an_error():
    """Long-double tokens 1e-400 (every float64 view 0, the exact values distinct): the head-law step
    answers 'not run' with a sentence saying why, never a ZeroDivisionError; all-zero double tokens
    are singular exactly (every feature is 0)."""
    tiny = [np.array([[0.0], [np.longdouble("1e-400")]], dtype=np.longdouble),
            np.array([[np.longdouble("3e-400")], [np.longdouble("5e-400")]], dtype=np.longdouble)]
    hl = head_law_bound(tiny, seconds=2.0)
    assert hl.status == "not run" and hl.lower is None and "float64" in hl.statement()
    zero = head_law_bound([np.zeros((2, 1)), np.zeros((1, 1))], seconds=2.0)
    assert (zero.status, zero.lower, zero.upper) == ("singular", 0.0, 0.0)


def test_tokens_near_the_float64_range_get_a_sentence_and_no_numpy_warning():
    """A token of norm 1e149: one head's lambda_max bound is sum_i R_i^2 ~ 1e298 and the rounding term
    eta ~ R^6 overflows, so no number of heads can prove a bound. The step says so at once instead of
    drawing heads for its whole budget (it drew 9.6e6 heads in 20 s before), and no numpy warning leaks
    (warnings are errors here). Catches: the early answer removed (the budget then runs out, status
    'not separated'), or an unguarded power (a RuntimeWarning)."""
    import warnings

    S = [np.array([[1e149, 0.0], [0.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 0.0]]), np.array([[5.0, 1.0], [2.0, 2.0]])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hl = head_law_bound(S, seconds=5.0)
        st = dependence_structure(S)  # the float fingerprints of the Prop. 8 relations overflow too
    assert hl.status == "not run" and "not finite" in hl.statement() and hl.heads == 0
    assert st.predicted_kernel == 0
