"""Tests of ntkcheck.strategies: every strategy draws valid, finite, bounded values with the
structure it promises (distinct or coinciding parameters, shared atoms, known null vectors)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck import strategies as nst
from ntkcheck.cgf.core import log_mgf
from ntkcheck.independence.decision import as_measures


def _finite_bounded(x: np.ndarray, bound: float) -> bool:
    return bool(np.all(np.isfinite(x)) and np.max(np.abs(x)) <= bound)


@given(nst.token_sets(n=st.integers(1, 4), sizes=st.integers(1, 5), dim=st.integers(1, 3), scale=2.0,
                      density="normal"))
def test_token_sets_shapes_and_bounds(samples):
    """Seed 003 Prop. 10 needs i.i.d. tokens from a density: finite, bounded, ties absent."""
    assert 1 <= len(samples) <= 4
    d = samples[0].shape[1]
    for x in samples:
        assert x.ndim == 2 and x.shape[1] == d and 1 <= x.shape[0] <= 5
        assert _finite_bounded(x, 16.0)
    atoms = [tuple(r) for x in samples for r in x.tolist()]
    assert len(set(atoms)) == len(atoms)  # ties have probability zero


@pytest.mark.parametrize("density", ["normal", "uniform", "laplace"])
def test_token_sets_densities(density):
    """Each density option draws from its law: uniform stays in [-scale, scale]."""

    @settings(max_examples=5)
    @given(nst.token_sets(n=1, sizes=5, dim=2, scale=0.5, density=density))
    def check(samples):
        x = samples[0]
        assert x.shape == (5, 2)
        if density == "uniform":
            assert np.max(np.abs(x)) <= 0.5

    check()


@given(nst.rational_token_sets(denominator=4, max_numerator=8))
def test_rational_token_sets_are_dyadic_and_distinct(samples):
    """Exact engines see the numbers as written: coordinates are k/4 exactly."""
    for x in samples:
        k = x * 4
        np.testing.assert_array_equal(k, np.round(k))  # exact: dyadic numbers are exact in float64
        assert np.max(np.abs(x)) <= 2.0
        assert len({tuple(r) for r in x.tolist()}) == x.shape[0]


@given(nst.shared_atom_token_sets(n=st.integers(2, 3), shared=st.integers(0, 2)))
def test_shared_atom_sets_share_exactly_the_common_atoms(result):
    """Condition (34) of seed 003 Prop. 8 counts the atoms common to the samples."""
    samples, common = result
    inter = {tuple(r) for r in samples[0].tolist()}
    for x in samples[1:]:
        inter &= {tuple(r) for r in x.tolist()}
    assert inter == {tuple(r) for r in common.tolist()}


@given(nst.directions(3))
def test_directions_nonzero(w):
    assert len(w) == 3 and any(v != 0 for v in w) and all(isinstance(v, Fraction) for v in w)


@settings(max_examples=10)
@given(nst.uniform_cubes(n=3, distinct=True), nst.uniform_cubes(n=3, distinct=False))
def test_cube_radii_distinct_or_coinciding(distinct, same):
    """Seed 003 Ex. 3 hypothesis (distinct radii) and its negation, on request."""
    assert len({m.radius for m in distinct}) == 3
    assert len({m.radius for m in same}) == 1
    assert all(0 < m.radius <= 2 for m in distinct + same)


@settings(max_examples=10)
@given(nst.laplaces(n=3, distinct=True))
def test_laplace_variances_distinct(ms):
    """Seed 003 Ex. 4: s_i = w^T Sigma_i w pairwise distinct (along e_1 here) and non-zero."""
    s = [m.cov[0][0] for m in ms]
    assert len(set(s)) == 3 and all(v > 0 for v in s)


@settings(max_examples=10)
@given(nst.gaussian_mixtures(n=3, distinct=True), nst.gaussian_mixtures(n=2, distinct=False))
def test_mixture_separations(distinct, same):
    """Seed 003 Ex. 5: <e_1, m_i>^2 pairwise distinct and non-zero, or coinciding."""
    assert len({m.m[0] ** 2 for m in distinct}) == 3 and all(m.m[0] != 0 for m in distinct)
    assert same[0].m == same[1].m


@settings(max_examples=10)
@given(nst.gaussians(n=3, shared_covariance=True), nst.gaussian_convolutions(n=2))
def test_gaussians_and_convolutions_valid(gs, convs):
    assert len({g.cov for g in gs}) == 1
    for g in gs:
        S = np.array([[float(v) for v in r] for r in g.cov])
        assert np.all(np.linalg.eigvalsh(S) > 0)  # positive definite: L L^T + I/4
    assert all(not c.compact for c in convs)


def _relation_spread(dep) -> float:
    """sum_i c_i Lambda_i(a) - <alpha, a> at random points, computed independently:
    log_mgf for token sets, the family's closed form for families."""
    ms = list(dep.measures)
    d = np.asarray(ms[0]).shape[1] if isinstance(ms[0], np.ndarray) else ms[0].dim
    rng = np.random.default_rng(3)
    pts = rng.uniform(-0.3, 0.3, (5, d))
    c = [float(v) for v in dep.null_vector]
    alpha = np.array([float(v) for v in dep.alpha])
    vals = []
    for a in pts:
        tot = 0.0
        for ci, m in zip(c, ms, strict=True):
            lam = float(log_mgf(m, a)) if isinstance(m, np.ndarray) else float(np.asarray(m.cgf(a)).reshape(-1)[0])
            tot += ci * lam
        vals.append(tot - alpha @ a)
    # relative to the size of the combination: the exact kernel vectors of many
    # Gaussians have integer entries up to ~1e3
    return float(np.ptp(vals)) / (1.0 + sum(abs(ci) for ci in c))


@settings(max_examples=20)
@given(nst.dependent_constructions(dim=st.integers(1, 3)))
def test_dependent_constructions_carry_their_null_vector(dep):
    """Seed 003 Ex. 6: sum_i c_i Lambda_i = <alpha, a> + beta for the returned null vector."""
    assert any(c != 0 for c in dep.null_vector)
    # float64 log-sum-exp of O(1) arguments, a handful of terms: 1e-12 absolute
    np.testing.assert_allclose(_relation_spread(dep), 0.0, atol=1e-12)


@settings(max_examples=10)
@given(nst.translates(overlap=True), nst.translates(overlap=False))
def test_translates_overlap_on_request(ov, disjoint):
    """Condition (34) with alpha != 0 needs two shared atoms; disjoint translates have none."""
    assert ov.shared_atoms >= 2
    assert disjoint.shared_atoms == 0


@settings(max_examples=10)
@given(nst.two_point_products(shared_origin=False))
def test_products_apart_have_distinct_atoms(dep):
    """Seed 003 Remark 5: the product example with all atoms distinct."""
    atoms = [tuple(r) for m in dep.measures for r in m.tolist()]
    assert dep.shared_atoms == 0 and len(set(atoms)) >= len(atoms) - 1  # u = -v repeats one slot of mu_3


@settings(max_examples=10)
@given(nst.single_diracs(more_than_dim=True), nst.many_gaussians())
def test_diracs_and_many_gaussians_sizes(dir_, gauss):
    """Seed 003 Ex. 6: n > d Diracs; more than d(d+1)/2 Gaussians."""
    d = dir_.measures[0].shape[1]
    assert len(dir_.measures) > d and all(m.shape == (1, d) for m in dir_.measures)
    dg = gauss.measures[0].dim
    assert len(gauss.measures) == dg * (dg + 1) // 2 + 1


@settings(max_examples=10)
@given(nst.heads(H=st.integers(1, 5), dim=2, q_scale=0.5))
def test_heads_shapes(h):
    assert h.Q.shape[1:] == (2, 2) and h.b.shape == (h.Q.shape[0], 2)
    assert np.all(np.isfinite(h.Q)) and np.all(np.isfinite(h.b))


@settings(max_examples=3)
@given(nst.heads(nst.HeadsSpec(H=3, dim=2, q_scale=2.0)))
def test_heads_from_spec(h):
    assert h.Q.shape == (3, 2, 2)


@pytest.mark.parametrize("bad", [
    lambda: nst.token_sets(n=0),
    lambda: nst.token_sets(scale=float("nan")),
    lambda: nst.token_sets(density="cauchy"),
    lambda: nst.rational_token_sets(denominator=0),
    lambda: nst.rationals(max_numerator=0),
])
def test_bad_arguments_raise(bad):
    with pytest.raises(ValueError):
        bad()


@settings(max_examples=10)
@given(st.one_of(nst.translates(), nst.two_point_products(), nst.single_diracs(), nst.shared_covariance_gaussians(),
                 nst.many_gaussians()))
def test_as_measures_accepts_every_drawn_dependent_kind(dep):
    """Every construction is accepted by the engines (token arrays or families)."""
    assert len(as_measures(list(dep.measures))) == len(dep.measures)
