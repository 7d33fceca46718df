"""The public API after ``import ntkcheck`` (issue 13): names, no truthiness trap, strategies."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ntkcheck
from ntkcheck import strategies as nst

ROOT = Path(__file__).resolve().parents[1]


def test_entry_points_reachable_from_the_package():
    """screen and gram are reachable after ``import ntkcheck`` and are the module functions
    (the modules are named differently on purpose: ``screening``, ``gram_matrix``)."""
    from ntkcheck.ntk.gram_matrix.pipeline import gram
    from ntkcheck.screening import screen

    assert ntkcheck.screen is screen and ntkcheck.gram is gram
    assert ntkcheck.GramResult.__module__ == "ntkcheck.ntk.gram_matrix.result"


def test_all_is_explicit_and_clean():
    """``__all__`` lists what exists, nothing private, and not ``annotations`` (bound by
    ``from __future__ import annotations``); every public re-export in __init__.py is listed."""
    names = ntkcheck.__all__
    assert len(names) == len(set(names))
    assert "annotations" not in names and not hasattr(ntkcheck, "annotations")
    assert [n for n in names if not hasattr(ntkcheck, n)] == []
    assert [n for n in names if n.startswith("_") and n != "__version__"] == []
    tree = ast.parse((ROOT / "ntkcheck" / "__init__.py").read_text())
    reexported = {a.asname for node in tree.body if isinstance(node, ast.ImportFrom)
                  for a in node.names if a.asname is not None}
    assert reexported - set(names) == set()
    namespace: dict[str, object] = {}
    exec("from ntkcheck import *", namespace)
    assert "annotations" not in namespace and {"screen", "gram", "decide"} <= set(namespace)


def test_screen_without_data_uses_the_bundled_example_and_has_a_bottom_line():
    """screen() screens the bundled data; its bottom line says what the data is, what the
    verdict means for training and what to do next, in lines of at most 100 columns."""
    rep = ntkcheck.screen()
    lines = rep.bottom_line.splitlines()
    assert rep.bottom_line.startswith("Data: the bundled example")
    assert any(line.startswith("Training:") for line in lines) and any(line.startswith("Next:") for line in lines)
    assert max(len(line) for line in lines) <= 100
    assert "samples [4, 5, 6]" in rep.bottom_line  # the planted dependency is named
    assert rep.to_dict()["bottom_line"] == rep.bottom_line == rep.summary
    with pytest.raises(TypeError, match="ambiguous"):
        bool(rep)


def test_gram_with_an_int_matches_screen():
    X = list(np.random.default_rng(0).normal(size=(3, 4, 2)))
    g = ntkcheck.gram(X, 12, seed=5)
    assert g.lambda_min == ntkcheck.screen(X, heads=12, seed=5, certify=False).gram.lambda_min


# --- strategies: one dimension per list -------------------------------------------------

def test_from_type_lists_can_mix_dimensions():
    """Why the README's pattern exists: a bare ``st.lists(st.from_type(Laplace))`` draws each
    element with its own dimension, and decide refuses mixed dimensions."""
    seen = set()

    @given(st.lists(st.from_type(ntkcheck.Laplace), min_size=2, max_size=3))
    def collect(laws):
        seen.add(len({law.dim for law in laws}) > 1)

    collect()
    assert True in seen  # at least one mixed list was drawn: the trap is real
    with pytest.raises(ntkcheck.InputError, match="dimension"):
        ntkcheck.decide([ntkcheck.UniformCube(1, 1), ntkcheck.UniformCube(1, 2)])


@given(nst.laplaces(n=st.integers(2, 3), dim=st.integers(1, 2)))
def test_family_strategy_draws_one_dimension_per_list(laws):
    """The README pattern (1): the family strategies take ``n`` and ``dim`` and draw one
    dimension for the whole list; seed 003 Prop. 12: distinct Laplace scales are independent."""
    assert len({law.dim for law in laws}) == 1
    assert ntkcheck.decide(laws).verdict.value in ("independent", "dependent", "inconclusive")


@given(st.integers(1, 3).flatmap(lambda d: st.lists(nst.dirac(dim=d), min_size=2, max_size=3)))
def test_flatmap_pattern_draws_one_dimension_per_list(diracs):
    """The README pattern (2): draw the dimension first, then the list with ``flatmap``.
    Seed 003 Remark 5: Diracs have affine CGFs, so any two are dependent."""
    assert len({m.dim for m in diracs}) == 1
    assert ntkcheck.decide(diracs).verdict.value == "dependent"


def test_readme_tour_shows_the_current_bottom_line():
    """The README tour quotes the bundled example's bottom line verbatim (4-space block)."""
    readme = (ROOT / "README.md").read_text()
    block = "\n".join("    " + line for line in ntkcheck.screen().bottom_line.splitlines())
    assert block in readme


def test_every_result_with_a_verdict_refuses_truthiness():
    """Decision, GramResult, CrosscheckResult and ScreenReport all raise on bool(): a
    dataclass instance is otherwise always True, a dependent or disagreeing result included."""
    from ntkcheck.ntk.prop8.crosscheck import crosscheck

    X = [np.array([[0.0], [1.0]]), np.array([[5.0], [6.0]])]  # translates: dependent, no overlap
    results = [ntkcheck.decide(X), ntkcheck.gram(X, 4), crosscheck(X, ntkcheck.init_heads(4, 1)),
               ntkcheck.screen(X, heads=4, certify=False)]
    for res in results:
        with pytest.raises(TypeError, match="ambiguous"):
            bool(res)
