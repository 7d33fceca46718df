r"""Families with valid parameters (seed 003 Ex. 3-6, Prop. 12), the dependent constructions
(seed 003 Ex. 6, Remark 5) with their known null vectors, and the registration of every
family type for ``st.from_type`` (run by the hypothesis entry point, see the package).

The families (:mod:`ntkcheck.cgf`) are imported when a family strategy is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ._common import _INTS_1_2, _INTS_1_3, _INTS_1_4, _INTS_2_4, IntOrStrategy, _ints
from .tokens import rationals, token_sets

__all__ = [
    "dirac",
    "uniform_cubes",
    "laplaces",
    "gaussians",
    "gaussian_mixtures",
    "gaussian_convolutions",
    "Dependent",
    "translates",
    "two_point_products",
    "single_diracs",
    "shared_covariance_gaussians",
    "many_gaussians",
    "dependent_constructions",
]


# ----------------------------------------------------------------------------- families

Distinct = bool | None


def _params(draw: Any, n: int, distinct: Distinct, pos: SearchStrategy[Fraction]) -> list[Fraction]:
    """``n`` parameters: pairwise distinct (True), all equal (False), or unconstrained (None)."""
    if distinct is False:
        v = draw(pos)
        return [v] * n
    return draw(st.lists(pos, min_size=n, max_size=n, unique=bool(distinct)))


def _positive(lo: int = 1, hi: int = 16, q: int = 8) -> SearchStrategy[Fraction]:
    return st.builds(Fraction, st.integers(lo, hi), st.just(q))


@st.composite
def _dirac(draw: Any, dim: SearchStrategy[int]) -> Any:
    from ..cgf import Dirac

    d = draw(dim)
    return Dirac(tuple(draw(st.lists(rationals(max_numerator=8, denominators=(1, 2, 4)), min_size=d, max_size=d))))


def dirac(*, dim: IntOrStrategy = _INTS_1_3) -> SearchStrategy[Any]:
    """A single Dirac mass at a rational point (its CGF is linear: seed 003 Ex. 6)."""
    return _dirac(_ints(dim, "dim"))


@st.composite
def _cubes(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int], distinct: Distinct) -> list[Any]:
    from ..cgf import UniformCube

    nn, d = draw(n), draw(dim)
    return [UniformCube(r, d) for r in _params(draw, nn, distinct, _positive(1, 16, 8))]


def uniform_cubes(*, n: IntOrStrategy = _INTS_1_4, dim: IntOrStrategy = _INTS_1_3,
                  distinct: Distinct = True) -> SearchStrategy[list[Any]]:
    """``n`` uniform laws on cubes :math:`[-r_i, r_i]^d` (seed 003 Ex. 3), radii in [1/8, 2].

    ``distinct=True``: pairwise distinct radii (independent); ``False``: one common radius.
    """
    return _cubes(_ints(n, "n"), _ints(dim, "dim"), distinct)


@st.composite
def _spd(draw: Any, d: int, max_entry: int = 3) -> tuple[tuple[Fraction, ...], ...]:
    """A rational symmetric positive definite matrix ``L L^T + I/4`` with small entries."""
    L = [[Fraction(draw(st.integers(-max_entry, max_entry)), 2) if j <= i else Fraction(0) for j in range(d)]
         for i in range(d)]
    S = [[sum((L[i][k] * L[j][k] for k in range(d)), Fraction(0)) + (Fraction(1, 4) if i == j else 0)
          for j in range(d)] for i in range(d)]
    return tuple(tuple(r) for r in S)


def _scaled(S: tuple[tuple[Fraction, ...], ...], c: Fraction) -> tuple[tuple[Fraction, ...], ...]:
    return tuple(tuple(c * v for v in r) for r in S)


@st.composite
def _laplaces(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int], distinct: Distinct) -> list[Any]:
    from ..cgf import Laplace

    nn, d = draw(n), draw(dim)
    base = draw(_spd(d))
    # Ex. 4 distinguishes Laplace laws by s_i = w^T Sigma_i w: scaling one SPD matrix by
    # distinct factors makes the s_i distinct along every direction.
    return [Laplace(_scaled(base, c)) for c in _params(draw, nn, distinct, _positive(1, 16, 4))]


def laplaces(*, n: IntOrStrategy = _INTS_1_4, dim: IntOrStrategy = _INTS_1_3,
             distinct: Distinct = True) -> SearchStrategy[list[Any]]:
    """``n`` symmetric multivariate Laplace laws (seed 003 Ex. 4) with covariances ``c_i S``.

    ``distinct=True``: the factors ``c_i`` are pairwise distinct, so the variances
    :math:`s_i = c_i w^T S w` are distinct along every direction.
    """
    return _laplaces(_ints(n, "n"), _ints(dim, "dim"), distinct)


@st.composite
def _gaussians(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int], shared: bool) -> list[Any]:
    from ..cgf import Gaussian

    nn, d = draw(n), draw(dim)
    vec = st.lists(rationals(max_numerator=8, denominators=(1, 2, 4)), min_size=d, max_size=d).map(tuple)
    if shared:
        S = draw(_spd(d))
        return [Gaussian(draw(vec), S) for _ in range(nn)]
    return [Gaussian(draw(vec), draw(_spd(d))) for _ in range(nn)]


def gaussians(*, n: IntOrStrategy = _INTS_1_4, dim: IntOrStrategy = _INTS_1_3,
              shared_covariance: bool = False) -> SearchStrategy[list[Any]]:
    """``n`` Gaussians :math:`N(m_i, \\Sigma_i)` with rational means and SPD covariances."""
    return _gaussians(_ints(n, "n"), _ints(dim, "dim"), shared_covariance)


@st.composite
def _mixtures(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int], distinct: Distinct) -> list[Any]:
    from ..cgf import GaussianMixture2

    nn, d = draw(n), draw(dim)
    S = draw(_spd(d))
    # m_i = c_i e_1 with distinct c_i > 0: <w, m_i>^2 = c_i^2 w_1^2 distinct iff w_1 != 0.
    cs = _params(draw, nn, distinct, _positive(1, 16, 4))
    return [GaussianMixture2(tuple([c] + [Fraction(0)] * (d - 1)), S) for c in cs]


def gaussian_mixtures(*, n: IntOrStrategy = _INTS_1_4, dim: IntOrStrategy = _INTS_1_3,
                      distinct: Distinct = True) -> SearchStrategy[list[Any]]:
    """``n`` symmetric two-component mixtures :math:`\\frac12 N(m_i,\\Sigma) + \\frac12 N(-m_i,\\Sigma)` (seed 003 Ex. 5).

    Means ``m_i = c_i e_1``; ``distinct=True`` makes the separations ``c_i`` pairwise
    distinct, so :math:`\\langle w, m_i\\rangle^2` are distinct for every ``w`` with
    ``w_1 != 0``.
    """
    return _mixtures(_ints(n, "n"), _ints(dim, "dim"), distinct)


@st.composite
def _convolutions(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int], distinct: Distinct) -> list[Any]:
    from ..cgf import GaussianConvolution

    base = draw(_cubes(n, dim, distinct))
    d = base[0].dim
    return [GaussianConvolution(b, draw(_spd(d))) for b in base]


def gaussian_convolutions(*, n: IntOrStrategy = _INTS_1_3, dim: IntOrStrategy = _INTS_1_2,
                          distinct: Distinct = True) -> SearchStrategy[list[Any]]:
    """``n`` laws :math:`\\mu_i * N(0, \\Sigma'_i)` with :math:`\\mu_i` uniform cubes (seed 003 Prop. 12)."""
    return _convolutions(_ints(n, "n"), _ints(dim, "dim"), distinct)


# ----------------------------------------------------------------------------- dependent constructions


@dataclass(frozen=True)
class Dependent:
    r"""Measures with a known linear relation of their CGFs modulo affine functions.

    .. math::

        \sum_i c_i \Lambda_i(a) = \langle \alpha, a\rangle + \beta .

    Attributes
    ----------
    kind : str
        Which construction (``"translate"``, ``"two-point product"``, ...).
    measures : tuple
        Token sets ((N_i, d) arrays) or :class:`~ntkcheck.cgf.base.Family` objects.
    null_vector : tuple of Fraction
        The coefficients ``c`` (not all zero).
    alpha : tuple of Fraction
        The linear part of the affine function.
    shared_atoms : int
        Number of atoms common to every measure with ``c_i != 0`` (empirical
        constructions; 0 for the families).
    """

    kind: str
    measures: tuple[Any, ...]
    null_vector: tuple[Fraction, ...]
    alpha: tuple[Fraction, ...]
    shared_atoms: int = 0

    @property
    def samples(self) -> list[Any]:
        return list(self.measures)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "measures": [m.tolist() if isinstance(m, np.ndarray) else repr(m) for m in self.measures],
            "null_vector": [str(c) for c in self.null_vector],
            "alpha": [str(a) for a in self.alpha],
            "shared_atoms": self.shared_atoms,
        }


def _frac_vec(x: np.ndarray) -> tuple[Fraction, ...]:
    return tuple(Fraction(float(v)) for v in np.asarray(x).reshape(-1))


def _count_shared(sets: Sequence[np.ndarray]) -> int:
    common = {tuple(r) for r in sets[0].tolist()}
    for s in sets[1:]:
        common &= {tuple(r) for r in s.tolist()}
    return len(common)


def _dyadic_vectors(d: int, max_numerator: int = 8, denominator: int = 4, nonzero: bool = False) -> SearchStrategy[np.ndarray]:
    v = st.lists(st.integers(-max_numerator, max_numerator), min_size=d, max_size=d)
    if nonzero:
        v = v.filter(lambda xs: any(xs))
    return v.map(lambda xs: np.asarray(xs, dtype=np.float64) / denominator)


@st.composite
def _translates(draw: Any, sizes: SearchStrategy[int], dim: SearchStrategy[int], overlap: bool | None) -> Dependent:
    d, N = draw(dim), draw(sizes)
    if overlap:
        # an arithmetic progression and its translate by the step share N - 1 >= 2 atoms:
        # condition (34) with alpha != 0 (theory/ntk-prop8.md, Prop. 8 table, "{0, e1, 2e1}")
        N = max(N, 3)
        x0 = draw(_dyadic_vectors(d))
        s = draw(_dyadic_vectors(d, nonzero=True))
        x = x0[None, :] + np.arange(N)[:, None] * s[None, :]
        v = s
    else:
        cell = st.tuples(*[st.integers(-8, 8)] * d)
        x = np.asarray(draw(st.lists(cell, min_size=N, max_size=N, unique=True)), dtype=np.float64).reshape(N, d) / 4
        v = draw(_dyadic_vectors(d, max_numerator=16, nonzero=True))
        if overlap is False:
            # shift far enough that the supports are disjoint
            v = v + np.sign(v + (v == 0)) * 5.0
    y = x + v[None, :]
    # Lambda_1 - Lambda_2 = -<v, a>
    return Dependent("translate", (x, y), (Fraction(1), Fraction(-1)), _frac_vec(-v), _count_shared([x, y]))


def translates(*, sizes: IntOrStrategy = _INTS_2_4, dim: IntOrStrategy = _INTS_1_3,
               overlap: bool | None = None) -> SearchStrategy[Dependent]:
    """A token set and its translate (seed 003 Ex. 6): :math:`\\Lambda_2 = \\Lambda_1 + \\langle v, a\\rangle`.

    ``overlap=True``: an arithmetic progression translated by its step (shares >= 2
    atoms); ``False``: disjoint supports; ``None``: whatever is drawn.
    Null vector ``(1, -1)``, ``alpha = -v``.
    """
    return _translates(_ints(sizes, "sizes"), _ints(dim, "dim"), overlap)


@st.composite
def _products(draw: Any, dim: SearchStrategy[int], shared_origin: bool) -> Dependent:
    d = draw(dim)
    u = draw(_dyadic_vectors(d, nonzero=True))
    v = draw(_dyadic_vectors(d, nonzero=True).filter(lambda v: not np.all(v == u)))
    if shared_origin:
        p = q = s = np.zeros(d)
    else:
        # translate each sample so that no atom is shared (Remark 5: all atoms distinct,
        # the CGFs still dependent)
        p = draw(_dyadic_vectors(d)) + 11.0
        q = draw(_dyadic_vectors(d)) - 11.0
        s = draw(_dyadic_vectors(d)) + 23.0
    m1 = np.stack([p, p + u])
    m2 = np.stack([q, q + v])
    m3 = np.stack([s, s + u, s + v, s + u + v])
    if len({tuple(r) for r in m3.tolist()}) < 4:
        # u = -v: two atoms coincide; the empirical law with repeated slots is still mu1 * mu2
        pass
    # Lambda_1 + Lambda_2 - Lambda_3 = <p + q - s, a>
    return Dependent("two-point product", (m1, m2, m3), (Fraction(1), Fraction(1), Fraction(-1)),
                     _frac_vec(p + q - s), _count_shared([m1, m2, m3]))


def two_point_products(*, dim: IntOrStrategy = _INTS_1_3, shared_origin: bool = True) -> SearchStrategy[Dependent]:
    r"""Two two-point laws and their convolution (seed 003 Ex. 6, Remark 5).

    :math:`\mu_1 = \{p, p+u\}`, :math:`\mu_2 = \{q, q+v\}`, :math:`\mu_3 = \{s, s+u, s+v, s+u+v\}`
    (uniform weights): :math:`\Lambda_1 + \Lambda_2 - \Lambda_3 = \langle p+q-s, a\rangle`.
    ``shared_origin=True``: ``p = q = s = 0`` (atom 0 shared, condition (34) holds);
    ``False``: translated apart, no shared atom.
    """
    return _products(_ints(dim, "dim"), shared_origin)


@st.composite
def _diracs(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int], more_than_dim: bool) -> Dependent:
    d = draw(dim)
    nn = draw(n)
    if more_than_dim:
        nn = max(nn, d + 1)
    pts = [draw(_dyadic_vectors(d)) for _ in range(nn)]
    sets = tuple(p[None, :] for p in pts)
    # every single Dirac has a linear CGF: c = e_1, alpha = x_1
    c = tuple(Fraction(1 if i == 0 else 0) for i in range(nn))
    return Dependent("single Diracs", sets, c, _frac_vec(pts[0]), 1 if nn == 1 else _count_shared(list(sets)))


def single_diracs(*, n: IntOrStrategy = _INTS_1_4, dim: IntOrStrategy = _INTS_1_3,
                  more_than_dim: bool = False) -> SearchStrategy[Dependent]:
    """``n`` one-token samples (single Diracs, seed 003 Ex. 6); ``more_than_dim`` forces ``n > d``.

    Null vector ``e_1`` (a single CGF is already linear), ``alpha = x_1``.
    """
    return _diracs(_ints(n, "n"), _ints(dim, "dim"), more_than_dim)


@st.composite
def _shared_cov(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int]) -> Dependent:
    gs = draw(_gaussians(n.map(lambda k: max(k, 2)), dim, True))
    m1, m2 = gs[0].mean, gs[1].mean
    c = tuple(Fraction(v) for v in [1, -1] + [0] * (len(gs) - 2))
    return Dependent("Gaussians with a shared covariance", tuple(gs), c,
                     tuple(Fraction(a) - Fraction(b) for a, b in zip(m1, m2, strict=True)))


def shared_covariance_gaussians(*, n: IntOrStrategy = _INTS_2_4,
                                dim: IntOrStrategy = _INTS_1_3) -> SearchStrategy[Dependent]:
    """``n >= 2`` Gaussians with one covariance (seed 003 Ex. 6). Null vector ``(1, -1, 0, ...)``."""
    return _shared_cov(_ints(n, "n"), _ints(dim, "dim"))


def _sym_nullvector(covs: Sequence[Any]) -> tuple[Fraction, ...]:
    import sympy as sp

    d = len(covs[0])
    cols = [[Fraction(S[i][j]) for i in range(d) for j in range(i, d)] for S in covs]
    M = sp.Matrix([[sp.Rational(col[r].numerator, col[r].denominator) for col in cols] for r in range(len(cols[0]))])
    ns = M.nullspace()
    v = ns[0]
    den = sp.ilcm(*[sp.fraction(x)[1] for x in v])
    return tuple(Fraction(int(x * den)) for x in v)


@st.composite
def _many_gaussians(draw: Any, dim: SearchStrategy[int]) -> Dependent:
    from ..cgf import Gaussian

    d = draw(dim)
    nn = d * (d + 1) // 2 + 1
    vec = st.lists(rationals(max_numerator=8, denominators=(1, 2, 4)), min_size=d, max_size=d).map(tuple)
    gs = [Gaussian(draw(vec), draw(_spd(d))) for _ in range(nn)]
    c = _sym_nullvector([g.cov for g in gs])
    alpha = tuple(sum((ci * Fraction(g.mean[k]) for ci, g in zip(c, gs, strict=True)), Fraction(0)) for k in range(d))
    return Dependent("more than d(d+1)/2 Gaussians", tuple(gs), c, alpha)


def many_gaussians(*, dim: IntOrStrategy = _INTS_1_3) -> SearchStrategy[Dependent]:
    """``d(d+1)/2 + 1`` Gaussians with distinct covariances (seed 003 Ex. 6).

    Their quadratic parts live in the ``d(d+1)/2``-dimensional space of symmetric
    matrices; the null vector is an exact rational kernel vector of the covariances.
    """
    return _many_gaussians(_ints(dim, "dim"))


def dependent_constructions(*, dim: IntOrStrategy = _INTS_1_3, families: bool = True) -> SearchStrategy[Dependent]:
    """Any of the dependent constructions above (``families=False``: token sets only)."""
    opts: list[SearchStrategy[Dependent]] = [
        translates(dim=dim),
        two_point_products(dim=dim, shared_origin=True),
        two_point_products(dim=dim, shared_origin=False),
        single_diracs(dim=dim),
    ]
    if families:
        opts += [shared_covariance_gaussians(dim=dim), many_gaussians(dim=dim)]
    return st.one_of(*opts)


# ----------------------------------------------------------------------------- type registration


def _register_types() -> None:
    """``st.register_type_strategy`` for every family type of :mod:`ntkcheck.cgf`."""
    from .. import cgf as fam

    def one(strategy_fn: Any) -> SearchStrategy[Any]:
        return strategy_fn(n=1).map(lambda xs: xs[0])

    table: dict[str, SearchStrategy[Any]] = {
        "UniformCube": one(uniform_cubes),
        "Laplace": one(laplaces),
        "Gaussian": one(gaussians),
        "GaussianMixture2": one(gaussian_mixtures),
        "GaussianConvolution": one(gaussian_convolutions),
        "Dirac": dirac(),
        "Empirical": token_sets(n=1).map(lambda xs: fam.Empirical(xs[0])),
    }
    if hasattr(fam, "Translation"):
        table["Translation"] = one(uniform_cubes).flatmap(
            lambda m: st.lists(rationals(), min_size=m.dim, max_size=m.dim).map(lambda v: fam.Translation(m, tuple(v))))
    if hasattr(fam, "EmpiricalConvolution"):
        table["EmpiricalConvolution"] = st.tuples(token_sets(n=1, dim=2), token_sets(n=1, dim=2)).map(
            lambda p: fam.EmpiricalConvolution(fam.Empirical(p[0][0]), fam.Empirical(p[1][0])))
    for name, strat in table.items():
        cls = getattr(fam, name, None)
        if cls is not None:
            st.register_type_strategy(cls, strat)
