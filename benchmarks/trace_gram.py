"""Trace the module-to-module moves of ``gram(samples, heads, certify=True)`` (issue 29).

Every Python call inside the package is recorded by :func:`sys.setprofile` as a move from the
module of the nearest ``ntkcheck`` frame below it (the caller: frames of numpy, scipy or the
standard library in between are skipped, so ARPACK calling back into the Gram's work array counts
as a move from the module that started ARPACK) to the module of the called function, when the
two modules differ. Printed per example:

* the distinct moves (caller module -> callee module) with how often each was made,
* the number of modules entered or left, and the pairs of modules that call each other both ways,
* how often each module was entered from another one,
* the calls of the token range checks (``check_score_range``, ``check_gram_range``).

The aim of issue 29: at most twice as many distinct moves as modules, at most 2 two-way pairs (a
loop over head blocks between the features and the accumulation is fine), one range check on every
path. ``tests/ntk/gram_matrix/test_pipeline_trace.py`` asserts those bounds with :func:`trace`.

Usage: ``python benchmarks/trace_gram.py [--quiet]`` (a small example, then a mid-size one above
the dense-eigh limit, where ARPACK runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

import ntkcheck

ROOT = os.path.dirname(os.path.abspath(ntkcheck.__file__)) + os.sep
RANGE_CHECKS = ("check_score_range", "check_gram_range")


@dataclass(frozen=True)
class Trace:
    """The moves of one traced call: ``moves[(a, b)]`` calls from module ``a`` into module ``b``,
    ``range_checks[name]`` calls of each range check."""

    moves: Counter
    range_checks: Counter

    @property
    def modules(self) -> set[str]:
        return {m for pair in self.moves for m in pair}

    @property
    def two_way(self) -> list[tuple[str, str]]:
        return sorted((a, b) for (a, b) in self.moves if a < b and (b, a) in self.moves)

    def entered(self) -> Counter:
        out: Counter = Counter()
        for (_, b), n in self.moves.items():
            out[b] += n
        return out


def _module(filename: str) -> str | None:
    if not filename.startswith(ROOT):
        return None
    return "ntkcheck/" + filename[len(ROOT):].replace(os.sep, "/")


def trace(call: Callable[[], Any]) -> Trace:
    """Run ``call()`` under :func:`sys.setprofile` and count its module-to-module moves."""
    moves: Counter = Counter()
    checks: Counter = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame.f_code.co_filename)
        if callee is None:
            return
        if frame.f_code.co_name in RANGE_CHECKS:
            checks[frame.f_code.co_name] += 1
        f = frame.f_back
        while f is not None and _module(f.f_code.co_filename) is None:
            f = f.f_back
        if f is None:
            return
        caller = _module(f.f_code.co_filename)
        if caller != callee:
            moves[(caller, callee)] += 1

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(old)
    return Trace(moves, checks)


def small_example() -> tuple[list[np.ndarray], Any]:
    """5 samples of 4 tokens in d = 3, one token repeated; 24 heads (H d = 72 >= M = 19)."""
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((4, 3)) for _ in range(5)]
    X[0][3] = X[0][0]
    return X, ntkcheck.init_heads(24, 3, seed=1)


def mid_example() -> tuple[list[np.ndarray], Any]:
    """48 samples of 8 tokens in d = 8 (M = 384, above the dense-eigh limit: ARPACK runs), H d = 4 M."""
    rng = np.random.default_rng(1)
    X = [rng.standard_normal((8, 8)) / 2 for _ in range(48)]
    return X, ntkcheck.init_heads(4 * 384 // 8, 8, seed=2)


def singular_example() -> tuple[list[np.ndarray], Any]:
    """A duplicated sample: the Gram is singular, so the Cholesky fails, the SVD runs, the
    preconditioned and Arb routes refuse and the exact proof of singularity is tried."""
    rng = np.random.default_rng(5)
    X = [rng.standard_normal((4, 3)) / np.sqrt(3) for _ in range(6)]
    return [*X, X[0]], ntkcheck.init_heads(60, 3, seed=1)


#: the paths of gram(certify=True) whose range checks are counted: name -> (example, keyword arguments)
PATHS: dict[str, tuple[Callable[[], tuple[list[np.ndarray], Any]], dict[str, Any]]] = {
    "default (verified Cholesky)": (small_example, {}),
    "ARPACK (M = 384)": (mid_example, {}),
    "method='svd'": (small_example, {"method": "svd"}),
    "keep_matrix": (small_example, {"keep_matrix": True}),
    "singular (SVD, preconditioned, Arb, exact)": (singular_example, {}),
    "singular by size (H d < M)": (small_example, {"heads": 4}),
}


def trace_path(name: str) -> Trace:
    """The trace of ``gram(certify=True)`` on the path ``name`` of :data:`PATHS` (run once before, so
    that imports and caches stay outside the trace)."""
    make, kw = PATHS[name]
    X, heads = make()
    kw = dict(kw)
    heads = kw.pop("heads", heads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # H d < M warns, by design
        ntkcheck.gram(X, heads, certify=True, **kw)
        return trace(partial(ntkcheck.gram, X, heads, certify=True, **kw))


def report(name: str, t: Trace, quiet: bool = False) -> None:
    mods = t.modules
    print(f"== {name}: {len(t.moves)} distinct moves among {len(mods)} modules, {len(t.two_way)} two-way pairs, "
          f"range checks {dict(t.range_checks) or 0}")
    if quiet:
        return
    for (a, b), n in sorted(t.moves.items()):
        print(f"   {a} -> {b}  x{n}")
    print("   two-way pairs:", ", ".join(f"{a} <-> {b}" for a, b in t.two_way) or "none")
    print("   entered:", ", ".join(f"{m} {n}" for m, n in t.entered().most_common()))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quiet", action="store_true", help="only the counts")
    a = p.parse_args(argv)
    for name in ("default (verified Cholesky)", "ARPACK (M = 384)"):
        report(f"{name} gram(certify=True)", trace_path(name), a.quiet)
    print("== range checks per gram(certify=True) call, by path:")
    for name in PATHS:
        t = trace_path(name)
        print(f"   {name}: {dict(t.range_checks)}; {len(t.moves)} distinct moves, {len(t.modules)} modules, "
              f"{len(t.two_way)} two-way pairs")


if __name__ == "__main__":
    main()
