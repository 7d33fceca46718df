"""The theory/ write-ups stay in step with the code.

* every claim of the registry (``ntkcheck.claims``) is discussed on some theory page
  (its id written in backticks), and every claim id a page names exists;
* every relative link on every page resolves to a file or directory of the repository;
* a ``#symbol`` anchor on a link to a ``.py`` file names a ``def`` or ``class`` of that
  file; a ``#heading`` anchor on a link to a ``.md`` file names one of its headings;
* the index page links every page.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THEORY = ROOT / "theory"
INDEX = THEORY / "README.md"
PAGES = sorted(THEORY.glob("*.md"))

# [text](target) with no nested parentheses in the target; images too (![..](..))
_LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
# a claim id: "<seed>.<place>[.<part>...]", e.g. 003.prop8.sufficiency, 002.lemma3.1.ii, or
# "abstracts.<name>" for a paper known by its abstract only
_CLAIM_ID = re.compile(r"^(\d{3}|abstracts)\.[A-Za-z0-9_.\-]+$")


def _registry_ids() -> set[str]:
    from ntkcheck import claims

    for name in ("all_claims", "registry", "get_claims"):
        fn = getattr(claims, name, None)
        if callable(fn):
            return {c.id for c in fn()}
    for name in ("CLAIMS", "REGISTRY"):
        reg = getattr(claims, name, None)
        if reg is not None:
            items = reg.values() if isinstance(reg, dict) else reg
            return {c.id for c in items}
    raise AssertionError("ntkcheck.claims exposes no registry (all_claims(), registry(), CLAIMS or REGISTRY)")


def _links(page: Path) -> list[str]:
    return [m.group("target") for m in _LINK.finditer(page.read_text(encoding="utf-8"))]


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.\-]*:", target) and not target.startswith("#")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def _anchors_md(path: Path) -> frozenset[str]:
    out = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        if not in_fence and (m := re.match(r"^#{1,6}\s+(.*)$", line)):
            out.add(_slug(m.group(1)))
    return frozenset(out)


@cache
def _symbols_py(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(
        node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )


def test_theory_has_the_expected_pages():
    names = {p.name for p in PAGES}
    assert "README.md" in names
    # one page per claim family of issue 6 plus the index: a deleted page must be noticed
    assert len(PAGES) >= 7, sorted(names)


def test_every_claim_id_is_on_a_theory_page():
    ids = _registry_ids()
    assert ids, "the claims registry is empty"
    named = {s for p in PAGES for s in _CODE_SPAN.findall(p.read_text(encoding="utf-8"))}
    missing = sorted(ids - named)
    assert not missing, f"claims with no theory page (write their ids in backticks on a page): {missing}"


def test_every_claim_id_named_on_a_page_exists():
    ids = _registry_ids()
    stale = sorted(
        (p.name, s)
        for p in PAGES
        for s in _CODE_SPAN.findall(p.read_text(encoding="utf-8"))
        if _CLAIM_ID.match(s) and s not in ids
    )
    assert not stale, f"theory pages name claim ids the registry does not have: {stale}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path):
    bad = []
    for target in _links(page):
        if not _relative(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve()
        if not dest.exists():
            bad.append(f"{target}: {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest} does not exist")
            continue
        if not dest.is_relative_to(ROOT):
            bad.append(f"{target}: leaves the repository")
            continue
        if anchor and dest.suffix == ".py" and anchor not in _symbols_py(dest):
            bad.append(f"{target}: no def or class named {anchor!r} in {dest.relative_to(ROOT)}")
        if anchor and dest.suffix == ".md" and anchor not in _anchors_md(dest):
            bad.append(f"{target}: no heading with anchor {anchor!r} in {dest.relative_to(ROOT)}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_in_page_anchors_resolve(page: Path):
    bad = [t for t in _links(page) if t.startswith("#") and t[1:] not in _anchors_md(page)]
    assert not bad, f"{page.name}: anchors with no heading: {bad}"


def test_index_links_every_page():
    linked = {(INDEX.parent / t.partition("#")[0]).resolve() for t in _links(INDEX) if _relative(t)}
    missing = [p.name for p in PAGES if p != INDEX and p.resolve() not in linked]
    assert not missing, f"theory/README.md does not link: {missing}"


def test_every_page_links_code_and_tests():
    """A page that links no module and no test has drifted from the code it explains."""
    for page in PAGES:
        if page == INDEX:
            continue
        targets = [t for t in _links(page) if _relative(t)]
        assert any("ntkcheck/" in t for t in targets), f"{page.name} links no module"
        assert any("tests/" in t for t in targets), f"{page.name} links no test"


def test_slug_matches_github_rules():
    """The anchor rule used above, on headings of the form the pages use."""
    assert _slug("Proposition 7: strong implies weak") == "proposition-7-strong-implies-weak"
    assert _slug("The finite-token Gram matrix (how `lambda_min` is computed)") == (
        "the-finite-token-gram-matrix-how-lambda_min-is-computed"
    )


# ---------------------------------------------------------------- citations (issue 13)

#: what a user can see: the repository's own files (MATH.md is not one of them)
_USER_FACING = ("README.md", "pyproject.toml", "theory", "ntkcheck", "notebooks", "benchmarks", "docs", "tests")


def _text_files():
    for top in _USER_FACING:
        p = ROOT / top
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        for f in files:
            if f.suffix in (".py", ".md", ".toml", ".txt", ".json") and "__pycache__" not in f.parts:
                yield f


def test_no_reference_to_a_file_outside_the_repository():
    """Every former "MATH.md section n" reference points to a theory/ page: no file of the
    repository names MATH.md, which users never see."""
    this = Path(__file__).resolve()
    hits = [f"{f.relative_to(ROOT)}:{k}" for f in _text_files() if f.resolve() != this
            for k, line in enumerate(f.read_text(errors="replace").splitlines(), 1) if "MATH.md" in line]
    assert hits == []


@pytest.mark.parametrize("doc", ["README.md", "theory/README.md"])
def test_seeds_cited_by_title_and_fixup_defined(doc: str):
    """The seeds are cited once in full (title; arXiv number where known) where a reader
    meets them, and FixUp is defined (V = 0, the flow map is the identity)."""
    text = " ".join((ROOT / doc).read_text().split())
    assert '"A Mean-Field Theory of Transformers' in text and "seed 002" in text
    assert '"Training Infinitely Deep and Wide Transformers", arXiv:2605.17660' in text and "seed 003" in text
    assert "`V` starts at 0" in text or "`V = 0`" in text
    assert "identity" in text and "arXiv:1901.09321" in text


def test_seed_003_is_never_given_seed_002s_title():
    """Seed 003 is "Training Infinitely Deep and Wide Transformers" (its text has Prop. 8 and
    FixUp); a docstring that calls it "A Mean-Field Theory of Transformers" cites the wrong paper."""
    bad = re.compile(r"seed 003\W{0,3}\(?\"?A Mean-Field Theory", re.I)
    hits = [str(f.relative_to(ROOT)) for f in _text_files() if bad.search(" ".join(f.read_text(errors="replace").split()))]
    assert hits == []
