"""The strategies as a user imports them: public names only, and ``st.from_type`` on the
family types through hypothesis's entry point (no explicit import of ntkcheck.strategies)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import Dirac, GaussianMixture2, Laplace, UniformCube
from ntkcheck.independence.decision import decide
from ntkcheck.strategies import dependent_constructions, token_sets, uniform_cubes


@settings(max_examples=10)
@given(token_sets(n=2, sizes=3, dim=2))
def test_user_can_draw_token_sets(samples):
    """Seed 003 Prop. 10: i.i.d. token sets are strongly independent (a.s.)."""
    assert decide(samples, "strong").verdict.value == "independent"


@settings(max_examples=5)
@given(uniform_cubes(n=2, dim=1, distinct=True))
def test_user_can_draw_families(cubes):
    """Seed 003 Ex. 3: distinct radii give strongly independent CGFs."""
    assert decide(cubes, "strong").verdict.value == "independent"


@settings(max_examples=5)
@given(dependent_constructions(dim=2, families=False))
def test_user_gets_the_null_vector(dep):
    """Seed 003 Ex. 6: the constructions are weakly dependent."""
    assert decide(list(dep.measures), "weak").verdict.value == "dependent"
    assert any(c != 0 for c in dep.null_vector)


@settings(max_examples=5)
@given(st.from_type(UniformCube), st.from_type(Laplace), st.from_type(GaussianMixture2), st.from_type(Dirac))
def test_from_type_draws_valid_families(cube, lap, mix, dirac):
    """st.from_type works for the family types once ntkcheck is installed (or its strategies imported)."""
    assert cube.radius > 0 and np.isfinite(float(lap.cgf(np.zeros(lap.dim))))
    assert mix.dim >= 1 and dirac.dim >= 1


def test_entry_point_registers_types_without_importing_strategies(tmp_path: Path):
    """The hypothesis entry point (pyproject.toml) registers the family types at ``import hypothesis``.

    A throwaway dist-info on sys.path declares the same entry point as pyproject.toml, so
    the test does not depend on how (or whether) the package is installed.
    """
    root = Path(__file__).resolve().parents[2]
    dist = tmp_path / "ntkcheck_ep_test-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ntkcheck-ep-test\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[hypothesis]\n_ = ntkcheck.strategies:_hypothesis_setup_hook\n")
    code = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(tmp_path)!r}, {str(root)!r}]
        import hypothesis.strategies as st
        assert "ntkcheck.strategies" in sys.modules, "the entry point did not run"
        from ntkcheck.cgf import UniformCube
        from hypothesis import given, settings

        @settings(max_examples=3, database=None)
        @given(st.from_type(UniformCube))
        def check(c):
            assert isinstance(c, UniformCube) and c.radius > 0

        check()
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_importing_strategies_first_is_not_circular():
    """``import ntkcheck.strategies`` before hypothesis (the entry point then loads the
    partly initialised module) must work and leave the types registered."""
    code = ("import ntkcheck.strategies as s; import hypothesis.strategies as st; "
            "from ntkcheck.cgf import UniformCube; s._hypothesis_setup_hook(); "
            "print(type(st.from_type(UniformCube)).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
