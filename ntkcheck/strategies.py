r"""Hypothesis strategies for token sets, token distributions and attention heads.

Modelled on :mod:`hypothesis.extra.numpy`: every public function returns a
:class:`hypothesis.strategies.SearchStrategy`, takes its sizes as ints or strategies,
and draws values that are always finite and of bounded magnitude (no NaN, no inf, no
subnormal noise), so a property that fails on them fails for a mathematical reason.

Groups
------
* Token sets: :func:`token_sets` (i.i.d. from a density, seed 003 Prop. 10),
  :func:`rational_token_sets` (dyadic atoms: exact in float64, so the exact engines
  see the numbers you wrote), :func:`shared_atom_token_sets` (a controlled number of
  atoms common to every sample: the overlap of seed 003 condition (34)),
  :func:`directions`.
* Families with valid parameters (seed 003 Ex. 3-6, Prop. 12): :func:`dirac`,
  :func:`uniform_cubes`, :func:`laplaces`, :func:`gaussians`,
  :func:`gaussian_mixtures`, :func:`gaussian_convolutions`; pass
  ``distinct=True/False`` for pairwise distinct or coinciding radii, variances,
  separations.
* Dependent constructions (seed 003 Ex. 6, Remark 5), each returned as a
  :class:`Dependent` holding the measures *and* the known null vector:
  :func:`translates`, :func:`two_point_products`, :func:`single_diracs`,
  :func:`shared_covariance_gaussians`, :func:`many_gaussians`,
  :func:`dependent_constructions` (any of them).
* Attention heads :math:`(Q_h, b_h)` from an init spec: :func:`heads`.

Importing this module is cheap (numpy and hypothesis only); the families are imported
when a family strategy is built. The hypothesis entry point
``_hypothesis_setup_hook`` registers every family type, so after ``pip install``
``st.from_type(UniformCube)`` works in any test file.

Examples
--------
>>> from hypothesis import given
>>> from ntkcheck import strategies as nst
>>> @given(nst.token_sets(n=3, sizes=4, dim=2))
... def test_three_samples(samples):
...     assert len(samples) == 3 and samples[0].shape == (4, 2)
>>> test_three_samples()

References: seed 003 section 3.3 (the families), MATH.md sections 3-4.
"""

from __future__ import annotations

# The hypothesis entry point names ``_hypothesis_setup_hook`` in this module, and
# ``import hypothesis`` runs the entry points. When this module is the one importing
# hypothesis, it is only partly initialised at that moment: the hook must already
# exist, and it defers the registration to the end of the module.
_READY = False
_PENDING = False


def _hypothesis_setup_hook() -> None:
    """Register a strategy for every family type (hypothesis entry point, see pyproject.toml).

    After ``pip install ntkcheck``, ``st.from_type(UniformCube)`` draws valid instances
    in any test file, without importing this module.
    """
    global _PENDING
    if not _READY:
        _PENDING = True
        return
    _register_types()


from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from fractions import Fraction  # noqa: E402
from typing import Any, Literal  # noqa: E402

import numpy as np  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.strategies import SearchStrategy  # noqa: E402

__all__ = [
    "token_sets",
    "rational_token_sets",
    "shared_atom_token_sets",
    "directions",
    "rationals",
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
    "HeadsSpec",
    "heads",
]

IntOrStrategy = int | SearchStrategy[int]
Density = Literal["normal", "uniform", "laplace"]

# default sizes (module-level so that the defaults are shared, not rebuilt per call)
_INTS_1_16 = st.integers(1, 16)
_INTS_1_2 = st.integers(1, 2)
_INTS_1_3 = st.integers(1, 3)
_INTS_1_4 = st.integers(1, 4)
_INTS_2_3 = st.integers(2, 3)
_INTS_2_4 = st.integers(2, 4)
_INTS_2_5 = st.integers(2, 5)

#: largest |coordinate| any strategy here produces before scaling: keeps exp(<a, x>) and
#: the cumulant recursions far from overflow at the default scales.
_BOUND = 8.0


def _ints(x: IntOrStrategy, name: str, lo: int = 1) -> SearchStrategy[int]:
    if isinstance(x, SearchStrategy):
        return x
    if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or int(x) < lo:
        raise ValueError(f"{name}: expected an int >= {lo} or a strategy of ints, got {x!r}")
    return st.just(int(x))


def _check_scale(scale: float) -> float:
    s = float(scale)
    if not np.isfinite(s) or s <= 0 or s > 1e3:
        raise ValueError(f"scale: expected a finite number in (0, 1000], got {scale!r}")
    return s


# ----------------------------------------------------------------------------- token sets


@st.composite
def _iid_sets(draw: Any, n: SearchStrategy[int], sizes: SearchStrategy[int], dim: SearchStrategy[int],
              scale: float, density: str) -> list[np.ndarray]:
    nn, d = draw(n), draw(dim)
    Ns = [draw(sizes) for _ in range(nn)]
    # One integer seed per example: shrinking changes the draw, never the law, so the
    # sets stay "i.i.d. from a density" (ties have probability zero) while shrinking.
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for N in Ns:
        if density == "normal":
            x = rng.standard_normal((N, d))
        elif density == "uniform":
            x = rng.uniform(-1.0, 1.0, (N, d))
        else:
            x = rng.laplace(0.0, 1.0 / np.sqrt(2.0), (N, d))
        out.append(np.clip(x, -_BOUND, _BOUND) * scale)
    return out


def token_sets(
    *,
    n: IntOrStrategy = _INTS_1_4,
    sizes: IntOrStrategy = _INTS_2_5,
    dim: IntOrStrategy = _INTS_1_3,
    scale: float = 1.0,
    density: Density = "normal",
) -> SearchStrategy[list[np.ndarray]]:
    r"""Lists of ``n`` token sets, tokens i.i.d. from a law with a density.

    Parameters
    ----------
    n, sizes, dim : int or strategy of ints
        Number of samples, tokens per sample (drawn per sample: ragged sizes), dimension.
    scale : float
        Standard deviation of each coordinate (``"normal"``), half-width (``"uniform"``)
        or Laplace standard deviation; coordinates are clipped at ``8 * scale``.
    density : {"normal", "uniform", "laplace"}

    Returns
    -------
    strategy of list of (N_i, d) float64 arrays
        With probability one all atoms and all projected gaps are distinct, which is
        the situation of seed 003 Prop. 10.
    """
    if density not in ("normal", "uniform", "laplace"):
        raise ValueError(f"density: expected 'normal', 'uniform' or 'laplace', got {density!r}")
    return _iid_sets(_ints(n, "n"), _ints(sizes, "sizes"), _ints(dim, "dim"), _check_scale(scale), density)


def rationals(*, max_numerator: int = 16, denominators: Sequence[int] = (1, 2, 4, 8),
              nonzero: bool = False) -> SearchStrategy[Fraction]:
    """Small rationals ``p/q`` with ``|p| <= max_numerator`` and ``q`` from ``denominators``."""
    if max_numerator < 1 or not denominators or any(int(q) < 1 for q in denominators):
        raise ValueError(f"rationals: need max_numerator >= 1 and positive denominators, got {max_numerator}, {denominators}")
    lo = -max_numerator
    frac = st.builds(Fraction, st.integers(lo, max_numerator), st.sampled_from([int(q) for q in denominators]))
    return frac.filter(lambda f: f != 0) if nonzero else frac


@st.composite
def _rational_sets(draw: Any, n: SearchStrategy[int], sizes: SearchStrategy[int], dim: SearchStrategy[int],
                   max_numerator: int, denominator: int, distinct: bool) -> list[np.ndarray]:
    nn, d = draw(n), draw(dim)
    out = []
    for _ in range(nn):
        N = draw(sizes)
        cell = st.tuples(*[st.integers(-max_numerator, max_numerator)] * d)
        rows = draw(st.lists(cell, min_size=N, max_size=N, unique=distinct))
        out.append(np.asarray(rows, dtype=np.float64).reshape(N, d) / denominator)
    return out


def rational_token_sets(
    *,
    n: IntOrStrategy = _INTS_1_4,
    sizes: IntOrStrategy = _INTS_2_4,
    dim: IntOrStrategy = _INTS_1_3,
    max_numerator: int = 8,
    denominator: int = 4,
    distinct: bool = True,
) -> SearchStrategy[list[np.ndarray]]:
    """Token sets whose coordinates are ``k / denominator`` with ``|k| <= max_numerator``.

    With a power-of-two ``denominator`` every coordinate is exact in float64, so
    exact engines decide the numbers as written. Coincidences (shared atoms, repeated
    gaps) are frequent, which is what such sets are for. ``distinct=True`` keeps the
    atoms of each sample pairwise distinct.
    """
    if denominator < 1 or max_numerator < 1:
        raise ValueError(f"need denominator >= 1 and max_numerator >= 1, got {denominator}, {max_numerator}")
    return _rational_sets(_ints(n, "n"), _ints(sizes, "sizes"), _ints(dim, "dim"), max_numerator, denominator, distinct)


@st.composite
def _shared_sets(draw: Any, n: SearchStrategy[int], own: SearchStrategy[int], dim: SearchStrategy[int],
                 shared: SearchStrategy[int], scale: float) -> tuple[list[np.ndarray], np.ndarray]:
    nn, d, k = draw(n), draw(dim), draw(shared)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    common = np.clip(rng.standard_normal((k, d)), -_BOUND, _BOUND) * scale
    out = []
    for _ in range(nn):
        m = draw(own)
        x = np.clip(rng.standard_normal((m, d)), -_BOUND, _BOUND) * scale
        out.append(np.concatenate([common, x], axis=0))
    return out, common


def shared_atom_token_sets(
    *,
    n: IntOrStrategy = _INTS_2_3,
    own: IntOrStrategy = _INTS_1_3,
    dim: IntOrStrategy = _INTS_1_3,
    shared: IntOrStrategy = 1,
    scale: float = 1.0,
) -> SearchStrategy[tuple[list[np.ndarray], np.ndarray]]:
    """``n`` token sets sharing exactly ``shared`` atoms (a.s.), plus ``own`` i.i.d. atoms each.

    Returns ``(samples, common)`` with ``common`` the ``(shared, d)`` array of shared
    atoms (they come first in every sample). ``shared = 0`` gives disjoint supports.
    """
    sh = _ints(shared, "shared", lo=0)
    own_s = _ints(own, "own", lo=0)
    return _shared_sets(_ints(n, "n"), own_s, _ints(dim, "dim"), sh, _check_scale(scale)).filter(
        lambda r: all(s.shape[0] >= 1 for s in r[0]))


def directions(dim: IntOrStrategy, *, max_numerator: int = 8) -> SearchStrategy[tuple[Fraction, ...]]:
    """Non-zero directions ``w`` in :math:`\\mathbb Q^d` with small integer entries (exact, not normalised)."""
    d = _ints(dim, "dim")
    return d.flatmap(lambda k: st.tuples(*[st.builds(Fraction, st.integers(-max_numerator, max_numerator))] * k)
                     .filter(lambda w: any(v != 0 for v in w)))


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
    from .families import Dirac

    d = draw(dim)
    return Dirac(tuple(draw(st.lists(rationals(max_numerator=8, denominators=(1, 2, 4)), min_size=d, max_size=d))))


def dirac(*, dim: IntOrStrategy = _INTS_1_3) -> SearchStrategy[Any]:
    """A single Dirac mass at a rational point (its CGF is linear: seed 003 Ex. 6)."""
    return _dirac(_ints(dim, "dim"))


@st.composite
def _cubes(draw: Any, n: SearchStrategy[int], dim: SearchStrategy[int], distinct: Distinct) -> list[Any]:
    from .families import UniformCube

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
    from .families import Laplace

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
    from .families import Gaussian

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
    from .families import GaussianMixture2

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
    from .families import GaussianConvolution

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
        Token sets ((N_i, d) arrays) or :class:`~ntkcheck.families.Family` objects.
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
        # condition (34) with alpha != 0 (MATH.md section 3, "{0, e1, 2e1}")
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
    from .families import Gaussian

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


# ----------------------------------------------------------------------------- attention heads


@dataclass(frozen=True)
class HeadsSpec:
    """How to initialise ``H`` heads: i.i.d. Gaussian ``Q`` and ``b`` entries with standard
    deviations ``q_scale`` and ``b_scale`` (a law whose support contains an open set, as
    seed 003 Prop. 8 needs)."""

    H: int
    dim: int
    q_scale: float = 1.0
    b_scale: float = 1.0


@st.composite
def _heads(draw: Any, spec: SearchStrategy[HeadsSpec]) -> Any:
    sp_ = draw(spec)
    seed = draw(st.integers(0, 2**32 - 1))
    try:
        from .gram import init_heads
    except ImportError:  # pragma: no cover - gram is optional for the strategies
        rng = np.random.default_rng(seed)
        Q = rng.standard_normal((sp_.H, sp_.dim, sp_.dim)) * sp_.q_scale
        b = rng.standard_normal((sp_.H, sp_.dim)) * sp_.b_scale
        return Q, b
    return init_heads(sp_.H, sp_.dim, q_scale=sp_.q_scale, b_scale=sp_.b_scale, seed=seed)


def heads(spec: HeadsSpec | SearchStrategy[HeadsSpec] | None = None, *, H: IntOrStrategy = _INTS_1_16,
          dim: IntOrStrategy = _INTS_1_3, q_scale: float = 1.0, b_scale: float = 1.0) -> SearchStrategy[Any]:
    """Attention heads :math:`(Q_h, b_h)_{h \\le H}` drawn from an init spec (seed 003 eq. 1, FixUp ``V = 0``).

    Pass a :class:`HeadsSpec` (or a strategy of them), or ``H``, ``dim`` and the scales.
    Returns :class:`ntkcheck.gram.Heads` (``Q`` of shape (H, d, d), ``b`` of shape (H, d)).
    """
    if spec is None:
        qs, bs = _check_scale(q_scale), _check_scale(b_scale)
        spec_s: SearchStrategy[HeadsSpec] = st.builds(HeadsSpec, _ints(H, "H"), _ints(dim, "dim"), st.just(qs), st.just(bs))
    elif isinstance(spec, HeadsSpec):
        spec_s = st.just(spec)
    else:
        spec_s = spec
    return _heads(spec_s)


# ----------------------------------------------------------------------------- type registration


def _register_types() -> None:
    """``st.register_type_strategy`` for every family type of :mod:`ntkcheck.families`."""
    from . import families as fam

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


_READY = True
if _PENDING:
    _register_types()
