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

Importing this package is cheap (numpy and hypothesis only); the families are imported
when a family strategy is built. The hypothesis entry point
``_hypothesis_setup_hook`` registers every family type, so after ``pip install``
``st.from_type(UniformCube)`` works in any test file.

What lives here: ``tokens`` (token sets, rationals, directions), ``families`` (the
families, the dependent constructions and the registration of the family types),
``heads`` (attention heads), ``_common`` (argument checks, default sizes, bounds).
May import: every layer below (the families of :mod:`ntkcheck.cgf` and the heads of
:mod:`ntkcheck.ntk` are imported inside the strategies, when one is built).

Examples
--------
>>> from hypothesis import given
>>> from ntkcheck import strategies as nst
>>> @given(nst.token_sets(n=3, sizes=4, dim=2))
... def test_three_samples(samples):
...     assert len(samples) == 3 and samples[0].shape == (4, 2)
>>> test_three_samples()

References: seed 003 section 3.3 (the families); ``theory/ntk-prop8.md``, ``theory/seed-examples.md``.
"""

from __future__ import annotations

# The hypothesis entry point names ``_hypothesis_setup_hook`` in this package, and
# ``import hypothesis`` runs the entry points. When this package is the one importing
# hypothesis, it is only partly initialised at that moment: the hook must already
# exist, and it defers the registration to the end of the module.
_READY = False
_PENDING = False


def _hypothesis_setup_hook() -> None:
    """Register a strategy for every family type (hypothesis entry point, see pyproject.toml).

    After ``pip install ntkcheck``, ``st.from_type(UniformCube)`` draws valid instances
    in any test file, without importing this package.
    """
    global _PENDING
    if not _READY:
        _PENDING = True
        return
    _register_types()


# tokens
from .families import Dependent as Dependent  # noqa: E402

# the registration run by the hypothesis entry point
from .families import _register_types  # noqa: E402
from .families import dependent_constructions as dependent_constructions  # noqa: E402

# families
from .families import dirac as dirac  # noqa: E402
from .families import gaussian_convolutions as gaussian_convolutions  # noqa: E402
from .families import gaussian_mixtures as gaussian_mixtures  # noqa: E402
from .families import gaussians as gaussians  # noqa: E402
from .families import laplaces as laplaces  # noqa: E402
from .families import many_gaussians as many_gaussians  # noqa: E402
from .families import shared_covariance_gaussians as shared_covariance_gaussians  # noqa: E402
from .families import single_diracs as single_diracs  # noqa: E402
from .families import translates as translates  # noqa: E402
from .families import two_point_products as two_point_products  # noqa: E402
from .families import uniform_cubes as uniform_cubes  # noqa: E402

# heads
from .heads import HeadsSpec as HeadsSpec  # noqa: E402
from .heads import heads as heads  # noqa: E402
from .tokens import directions as directions  # noqa: E402
from .tokens import rational_token_sets as rational_token_sets  # noqa: E402
from .tokens import rationals as rationals  # noqa: E402
from .tokens import shared_atom_token_sets as shared_atom_token_sets  # noqa: E402
from .tokens import token_sets as token_sets  # noqa: E402

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


_READY = True
if _PENDING:
    _register_types()
