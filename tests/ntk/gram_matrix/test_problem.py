"""Tests of ntkcheck.ntk.gram_matrix.problem: the samples and heads of gram() validated once (bad
input refused with the argument named, heads drawn from a count, the token range, the size limits).
"""

from __future__ import annotations

import numpy as np
import pytest
from gram_references import _random

from ntkcheck.errors import InputError, NtkcheckWarning
from ntkcheck.ntk.gram_matrix import problem as problem_module
from ntkcheck.ntk.gram_matrix.features import init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram


@pytest.mark.parametrize(
    "samples, match",
    [
        ([np.zeros((2, 2)), np.zeros((2, 3))], "dimension"),
        ([np.array([[0.0, np.nan]])], "non-finite"),
        ([np.zeros((0, 2))], "empty"),
        ([], "no samples"),
    ],
)
def test_bad_samples(samples, match):
    with pytest.raises(InputError, match=match):
        gram(samples, init_heads(4, 2))


def test_overflowing_scores_are_refused():
    """Tokens of norm 1e300: the scores <Q x + b, y> cannot be formed in float64; a clear error, not a LinAlgError."""
    from ntkcheck.errors import InputError as _InputError

    x = [np.full((3, 2), 1e300), np.full((2, 2), -1e300)]
    with pytest.raises(_InputError, match="beyond float64"):
        gram(x, init_heads(4, 2))


def test_rank_deficient_by_size_warns():
    S = _random(n=3, N=3, d=2)
    with pytest.warns(NtkcheckWarning, match="singular by rank"):
        res = gram(S, init_heads(2, 2))
    assert res.rank_deficient_by_size and res.status == "singular by size" and not res.positive


def test_keep_matrix_refused_beyond_the_limit(monkeypatch):
    monkeypatch.setattr(problem_module, "MAX_EIGENVALUES", 4)
    with pytest.raises(InputError, match="keep_matrix"):
        gram(_random(n=3, N=2, d=2), 8, keep_matrix=True)


def test_heads_as_int_are_the_init_heads_screen_draws():
    """gram(samples, H, seed=s) draws init_heads(H, d, seed=s), as screen does: the same
    numbers bit for bit (same heads, same arithmetic)."""
    from ntkcheck.screening import screen

    S = _random(n=3, N=3, d=2, seed=1)
    by_int = gram(S, 9, q_scale=0.5, b_scale=2.0, seed=3)
    by_heads = gram(S, init_heads(9, 2, q_scale=0.5, b_scale=2.0, seed=3))
    assert (by_int.lambda_min, by_int.lambda_max, by_int.heads) == (by_heads.lambda_min, by_heads.lambda_max, 9)
    rep = screen(S, heads=9, q_scale=0.5, b_scale=2.0, seed=3, certify=False)
    assert rep.gram.lambda_min == by_int.lambda_min
    for bad in (0, -2, 2.5, "8", True):
        with pytest.raises(InputError, match="heads"):
            gram(S, bad)


def test_problem_carries_what_the_steps_read():
    """The problem is built once, frozen, with the sizes, offsets, masses and rounding facts every
    later step reads. References: distinct rows by numpy's unique (exact row equality), the masses as
    counts over N, and which inputs are not doubles from the values given (a decimal string)."""
    import dataclasses
    from fractions import Fraction

    rng = np.random.default_rng(2)
    X = [rng.standard_normal((4, 2)) for _ in range(3)]
    X[1][3] = X[1][0]  # one repeated token: 3 atoms of masses 2/4, 1/4, 1/4
    X[2] = X[2].astype(object)
    X[2][0, 0] = Fraction(1, 10)  # not a double: the laws round it, the problem says so
    heads = init_heads(6, 2, seed=0)
    p = problem_module.GramProblem.of(X, heads)
    atoms = [len(np.unique(np.asarray(x, dtype=float), axis=0)) for x in X]
    assert (p.M, p.H, p.d, p.K) == (sum(atoms), 6, 2, 12) and list(p.n_atoms) == atoms
    assert list(p.offsets) == [0, 4, 7, 11]
    assert sorted(p.masses[1].tolist()) == [0.25, 0.25, 0.5]
    assert list(p.law_rounded) == [False, False, True] and not p.heads_rounded
    assert p.rounded == "sample 2 holds values that are not doubles"
    assert [(s.tokens, s.atoms, s.max_multiplicity) for s in p.sizes] == [(4, 4, 1), (4, 3, 2), (4, 4, 1)]
    assert not p.by_size and p.full_spectrum and not p.want_full
    assert sum(g.rows.size for g in p.groups) == p.M
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.M = 3  # type: ignore[misc]
    assert any("not doubles" in n for n in p.notes())


def test_the_first_bad_argument_is_reported():
    """Validation runs in the order of the docstring: samples, heads, method, spectrum, chunk, then
    the size limits; with two bad arguments, the earlier one is named."""
    S = _random(n=2, N=2, d=2)
    with pytest.raises(InputError, match="samples"):
        gram([], 4, method="nope")
    with pytest.raises(InputError, match="heads"):
        gram(S, 0, method="nope")
    with pytest.raises(InputError, match="method"):
        gram(S, 4, method="nope", spectrum="nope", chunk=0)
    with pytest.raises(InputError, match="spectrum"):
        gram(S, 4, spectrum="nope", chunk=0)
    with pytest.raises(InputError, match="chunk"):
        gram(S, 4, chunk=0)
