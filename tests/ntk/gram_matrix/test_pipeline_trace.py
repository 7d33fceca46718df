"""gram(certify=True) moves forward through its pipeline (issue 29), traced call by call.

The tracer is ``benchmarks/trace_gram.py`` (``sys.setprofile``: every call inside the package, from
the module of the nearest package frame to the module of the function called). Asserted on the
paths it defines: at most twice as many distinct module-to-module moves as modules and at most two
pairs of modules calling each other (the aim of issue 29), no call from a part of ``ntk`` into a
higher one (``NTK_ORDER`` of ``tests/test_layout.py``: a lower step never calls back into the
pipeline), and one call of each token range check on every path.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest
from test_layout import NTK_ORDER

from ntkcheck.ntk.gram_matrix import accumulate as accumulate_module
from ntkcheck.ntk.gram_matrix import spectrum as spectrum_module

_PATH = Path(__file__).resolve().parents[3] / "benchmarks" / "trace_gram.py"
_spec = importlib.util.spec_from_file_location("trace_gram", _PATH)
assert _spec is not None and _spec.loader is not None
tracer = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("trace_gram", tracer)  # its dataclasses look their module up
_spec.loader.exec_module(tracer)

#: part of ntk (index in NTK_ORDER) of each traced module path
_RANK = {f"ntkcheck/ntk/{m.replace('.', '/')}.py" if m else "ntkcheck/ntk/__init__.py": k
         for k, (_, mods) in enumerate(NTK_ORDER) for m in mods}


def _upward(t) -> list[tuple[str, str]]:
    """Moves from a module of ``ntk`` into a module of a higher part."""
    return sorted((a, b) for a, b in t.moves if a in _RANK and b in _RANK and _RANK[b] > _RANK[a])


@pytest.mark.parametrize("name", ["default (verified Cholesky)", "ARPACK (M = 384)"])
def test_gram_certify_moves_forward(name):
    """The aim of issue 29 on the certified path: moves <= 2 x modules, <= 2 two-way pairs, and no
    step calls back into a higher part of ntk (measured: 31 moves among 17 modules, none two-way;
    before the pipeline 37 moves among 14 modules, 4 two-way pairs)."""
    t = tracer.trace_path(name)
    assert len(t.moves) <= 2 * len(t.modules), sorted(t.moves)
    assert len(t.two_way) <= 2, t.two_way
    assert _upward(t) == []
    # the pipeline calls each step's module, and cgf/empirical.py is read only where the input is validated
    steps = {"problem", "accumulate", "spectrum", "result"}
    assert {b.rsplit("/", 1)[1][:-3] for a, b in t.moves if a.endswith("gram_matrix/pipeline.py")} >= steps
    assert {a for a, b in t.moves if b == "ntkcheck/cgf/empirical.py"} <= {
        "ntkcheck/ntk/gram_matrix/problem.py", "ntkcheck/ntk/gram_matrix/_sizes.py"}


@pytest.mark.parametrize("name", list(tracer.PATHS))
def test_one_token_range_check_on_every_path(name):
    """The samples and heads are checked for range once, when validated: the SVD, the kept matrix and
    the preconditioned route reuse the validated problem (before: up to three score checks a call)."""
    t = tracer.trace_path(name)
    assert t.range_checks == Counter({"check_gram_range": 1, "check_score_range": 1})
    assert _upward(t) == []


def test_the_trace_catches_a_planted_back_call(monkeypatch):
    """Mutation: the accumulation calls back into the spectrum step (a helper a lower stage calls
    back into). The trace sees the upward move; a mutual call is seen as a two-way pair."""
    real = accumulate_module._feature_columns

    def calls_back(*a, **kw):
        spectrum_module.spectrum_status(1.0, 2.0, by_size=False, resolution=1e-10)
        return real(*a, **kw)

    monkeypatch.setattr(accumulate_module, "_feature_columns", calls_back)
    t = tracer.trace_path("default (verified Cholesky)")
    assert _upward(t) == [("ntkcheck/ntk/gram_matrix/accumulate.py", "ntkcheck/ntk/gram_matrix/spectrum.py")]
    planted = tracer.Trace(Counter({**t.moves, ("ntkcheck/ntk/gram_matrix/spectrum.py",
                                                "ntkcheck/ntk/gram_matrix/accumulate.py"): 1}), t.range_checks)
    assert planted.two_way == [("ntkcheck/ntk/gram_matrix/accumulate.py", "ntkcheck/ntk/gram_matrix/spectrum.py")]
