"""The package layout: imports point one way, no module imports itself back through a cycle.

The layers (lowest first) are the ones stated in ``ntkcheck/__init__.py`` and
``theory/README.md``. Every ``import``/``from ... import`` in the package is read with
:mod:`ast` (lazy imports inside functions included; imports under ``if TYPE_CHECKING:`` never
run and are not counted), resolved to the module it names, and checked: a module may import its
own subpackage and anything in a lower layer, never a higher or a sibling layer; and the import
graph has no cycle. Inside ``ntkcheck/ntk/`` the parts are ordered too (:data:`NTK_ORDER`), and no
package binds a name that hides one of its submodules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "ntkcheck"

#: component -> layer (lowest first). A component is a top-level module or subpackage.
LAYERS: dict[str, int] = {
    "errors": 0, "_budget": 0, "_text": 0, "_precision": 0,
    "verify": 0,  # the standalone certificate verifier (a package): imports nothing of the rest of ntkcheck
    "_validate": 1, "_records": 1, "_memory": 1, "_progress": 1, "_figures": 1,  # a bar's update checks the time budget
    "cgf": 2,
    "independence": 3,
    "ntk": 4,
    "io": 5,
    "certificate_files": 5,  # what --certificate-out writes: imports cgf and verify
    "dynamics": 6,
    "_report_text": 6,  # the sections of the screening report's text: below screening
    "_report_plot": 6,  # the screening report's picture (plot_report): below screening, which re-exports it
    "convergence": 7,  # the Thm. 8.5 certificate and the local-convergence runs: above the dynamics they bound
    "limits": 7,  # the limit-theorem experiments: above the dynamics they simulate
    "screening": 7,
    "gram_report": 7,  # what `ntkcheck gram` reports, as one result type: beside screening
    "distributed": 8,  # sweeps and the distributed Gram: import screening (7) and ntk (4)
    "strategies": 8,
    "claims": 9,
    "cli": 10,
    "__main__": 11,
}
#: not part of the import discipline: the root re-exports the public API; data/ holds a script
EXEMPT_COMPONENTS = {"", "data"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _is_package(mod: str) -> bool:
    return MODULES[mod].name == "__init__.py"


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (seen by type checkers, never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imports(mod: str) -> set[str]:
    """Modules of the package that ``mod`` imports (resolved, lazy imports included)."""
    tree = ast.parse(MODULES[mod].read_text())
    pkg = mod if _is_package(mod) else mod.rpartition(".")[0]
    skip = _type_checking_only(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("ntkcheck")]
            out.update(n for n in names if n in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("ntkcheck"):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in MODULES else target)
    out.discard(mod)
    return {m for m in out if m in MODULES}


def _component(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


GRAPH = {m: _imports(m) for m in MODULES}


def test_every_component_has_a_layer():
    """A new module or subpackage must be placed in the layer diagram."""
    missing = sorted({_component(m) for m in MODULES} - set(LAYERS) - EXEMPT_COMPONENTS)
    assert not missing, f"components without a layer: {missing}"


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if _component(m) not in EXEMPT_COMPONENTS))
def test_imports_point_down(mod):
    """A module imports only its own component and lower layers."""
    src = _component(mod)
    bad = []
    for tgt in sorted(GRAPH[mod]):
        c = _component(tgt)
        if c == src or c in EXEMPT_COMPONENTS and tgt == "ntkcheck":
            if c == "" and src != "":
                bad.append(f"{tgt} (the package root: import the module that defines the name)")
            continue
        if LAYERS.get(c, 99) >= LAYERS[src]:
            bad.append(f"{tgt} (layer {LAYERS.get(c)} >= {LAYERS[src]})")
    assert not bad, f"{mod} (layer {LAYERS[src]}) imports upward or sideways: {bad}"


def test_no_import_cycle():
    """Tarjan's strongly connected components of the import graph are all single modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            # a package importing its own submodules (re-exports) is not a cycle by itself
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    real = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert not real, f"import cycles: {real}"


def test_the_checker_sees_a_planted_cycle_and_an_upward_import():
    """The checker itself can fail: a planted edge from cgf up to ntk is caught."""
    planted = dict(GRAPH)
    planted["ntkcheck.cgf.core"] = GRAPH["ntkcheck.cgf.core"] | {"ntkcheck.ntk"}
    up = [t for t in planted["ntkcheck.cgf.core"] if LAYERS.get(_component(t), 99) > LAYERS["cgf"]]
    assert up == ["ntkcheck.ntk"]
    # and ntk imports cgf, so the planted edge closes a cycle
    assert any(_component(t) == "cgf" for m in MODULES if _component(m) == "ntk" for t in GRAPH[m])


#: what the standalone verifier may import besides the standard library and its own modules
VERIFIER_IMPORTS = {"numpy", "mpmath", "flint"}


def _verifier_imports_outside(source: str) -> list[str]:
    """Imports in the source of a module of ``ntkcheck/verify/`` that leave the verifier: a relative import above its
    own package, or an absolute one that is neither the standard library nor numpy, mpmath, flint."""
    import sys

    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level > 1:
                bad.append(f"{'.' * node.level}{node.module or ''}")
            continue
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        bad += [n for n in names if n.split(".")[0] not in VERIFIER_IMPORTS | set(sys.stdlib_module_names)]
    return bad


def test_the_verifier_imports_nothing_of_the_package():
    """``ntkcheck/verify/`` runs without the package (``import verify`` with ``ntkcheck/`` on the path):
    its modules import one another by relative imports, and otherwise only the standard library,
    numpy, mpmath and python-flint (statically here; at run time in tests/test_verify.py)."""
    mods = [p for m, p in MODULES.items() if _component(m) == "verify"]
    assert len(mods) >= 5 and all(p.parent.name == "verify" for p in mods)
    bad = {p.name: b for p in mods if (b := _verifier_imports_outside(p.read_text()))}
    assert not bad, f"the verifier imports outside itself: {bad}"
    # the checker itself can fail: an import of the package, relative or absolute, or of sympy is reported
    planted = "from .. import errors\nimport ntkcheck.cgf\nfrom ._common import digest\nimport sympy, json\n"
    assert _verifier_imports_outside(planted) == ["..", "ntkcheck.cgf", "sympy"]


def test_no_module_is_long():
    """Issues 12 and 26: no module over 600 lines."""
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 600}
    assert not long, f"modules over 600 lines: {long}"


#: longest function or method allowed, docstring included (issue 26: functions are named steps)
MAX_FUNCTION_LINES = 120


def _long_functions(tree: ast.AST, limit: int) -> list[tuple[str, int]]:
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > limit]


def test_no_function_is_long():
    """Issue 26: no function or method over 120 lines (split it into named steps)."""
    long = {m: f for m, p in MODULES.items() if (f := _long_functions(ast.parse(p.read_text()), MAX_FUNCTION_LINES))}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_length_checker_sees_a_long_function():
    """The checker itself can fail: a planted 121-line function is reported, a 120-line one is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(119))
    planted = ast.parse(f"def planted():\n{body}\n    return 0\n")
    assert _long_functions(planted, MAX_FUNCTION_LINES) == [("planted", 121)]
    assert _long_functions(planted, 121) == []


# ------------------------------------------------------------------ inside ntkcheck/ntk/

#: the parts of ``ntkcheck.ntk`` (lowest first, modules relative to ``ntkcheck.ntk``): a module may
#: import its own part and lower ones. ``gram_matrix`` holds two parts: the Gram's inputs and linear
#: algebra, which the certificate imports, and the pipeline of ``gram()``, which imports the certificate.
NTK_ORDER: list[tuple[str, set[str]]] = [
    ("the Gram's inputs and linear algebra", {"gram_matrix", "gram_matrix.features", "gram_matrix._sizes",
                                              "gram_matrix.problem", "gram_matrix.cholesky",
                                              "gram_matrix.extremal", "gram_matrix.accumulate"}),
    ("the certificate", {"certificate", "certificate.rounding", "certificate.inputs", "certificate.arb_fast",
                         "certificate.routes", "certificate.cascade", "certificate.useful_rate"}),
    ("the pipeline of gram()", {"gram_matrix.spectrum", "gram_matrix.result", "gram_matrix.pipeline"}),
    ("the heads", {"heads", "heads.rank", "heads.search", "heads.law", "heads.accumulate", "heads.draw_rounding",
                   "heads.head_range", "heads.preconditioner", "heads.rounds", "heads.span_reduction",
                   "heads.tail_bounds"}),
    ("seed 003 Prop. 8", {"prop8", "prop8.exact", "prop8.relations", "prop8.structure", "prop8.prediction",
                          "prop8.hypotheses", "prop8.crosscheck"}),
    # a matrix made elsewhere (or its Jacobian) is checked against the dependence structure of its samples
    ("matrices made elsewhere", {"certificate.matrix_input", "certificate.exact_matrix", "certificate.user_matrix",
                                 "certificate.jacobian"}),
    ("the face", {""}),
]


def _ntk_rank() -> dict[str, int]:
    return {f"ntkcheck.ntk{'.' + m if m else ''}": k for k, (_, mods) in enumerate(NTK_ORDER) for m in mods}


def _ntk_upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports inside ``ntkcheck.ntk`` that point to a higher part of :data:`NTK_ORDER`."""
    rank = _ntk_rank()
    return [f"{m} ({NTK_ORDER[rank[m]][0]}) imports {t} ({NTK_ORDER[rank[t]][0]})"
            for m in sorted(rank) for t in sorted(graph.get(m, ())) if t in rank and rank[t] > rank[m]]


def test_every_ntk_module_has_a_part():
    """A new module of ``ntkcheck/ntk/`` must be placed in :data:`NTK_ORDER` (and the order names no ghost)."""
    ntk = {m for m in MODULES if m == "ntkcheck.ntk" or m.startswith("ntkcheck.ntk.")}
    assert ntk == set(_ntk_rank())


def test_ntk_parts_import_down():
    """Inside ``ntk`` the parts form a DAG: features and the problem at the bottom, then the
    certificate, the pipeline of ``gram()``, the heads, Prop. 8 (and user matrices on top)."""
    assert _ntk_upward(GRAPH) == []


def test_the_ntk_order_catches_a_planted_upward_import():
    """The checker can fail: the features importing the certificate, or the certificate importing
    the pipeline (the cycle a face that imports both would close), are reported."""
    planted = {m: set(t) for m, t in GRAPH.items()}
    planted["ntkcheck.ntk.gram_matrix.features"].add("ntkcheck.ntk.certificate.routes")
    planted["ntkcheck.ntk.certificate.rounding"].add("ntkcheck.ntk.gram_matrix.pipeline")
    assert _ntk_upward(planted) == [
        "ntkcheck.ntk.certificate.rounding (the certificate) imports ntkcheck.ntk.gram_matrix.pipeline "
        "(the pipeline of gram())",
        "ntkcheck.ntk.gram_matrix.features (the Gram's inputs and linear algebra) imports "
        "ntkcheck.ntk.certificate.routes (the certificate)",
    ]


# ------------------------------------------------------------------ names that hide a module

#: packages outside ``ntk/`` that bind a submodule's name to something else (left to their owners;
#: the list may only shrink): ``ntkcheck.strategies.heads`` is the strategy, not the module, etc.
SHADOWED_ELSEWHERE = {
    "ntkcheck.strategies.heads", "ntkcheck.convergence.eps_sweep", "ntkcheck.convergence.lipschitz_search",
}


def _shadowed(modules: dict[str, object]) -> set[str]:
    """Submodules ``p.m`` whose package ``p`` has an attribute ``m`` that is not the module."""
    out = set()
    for name, mod in modules.items():
        parent, _, child = name.rpartition(".")
        if parent in modules and getattr(modules[parent], child, mod) is not mod:
            out.add(name)
    return out


def test_no_package_attribute_shadows_a_submodule():
    """A face that re-exports a function named like one of its modules (``prop8.crosscheck``)
    makes ``ntkcheck.ntk.prop8.crosscheck.X`` (monkeypatch strings, ``mock.patch``) resolve to
    the function: no package of ``ntk`` does it (elsewhere only the listed ones, which may shrink)."""
    import importlib
    import sys

    for m in sorted(MODULES):
        if not m.endswith("__main__"):  # a __main__ runs its command when imported
            importlib.import_module(m)
    loaded = {m: sys.modules[m] for m in MODULES if m in sys.modules}
    assert _shadowed(loaded) == SHADOWED_ELSEWHERE
    # the checker can fail: a face binding a function where a module of that name exists
    import types

    pkg, sub = types.ModuleType("p"), types.ModuleType("p.crosscheck")
    pkg.crosscheck = lambda: None  # type: ignore[attr-defined]
    assert _shadowed({"p": pkg, "p.crosscheck": sub}) == {"p.crosscheck"}
