"""What ``ntkcheck gram`` reports, as one result type: the Gram, its structure, kernel, head law and head search.

:func:`ntkcheck.gram` returns the Gram of heads given or drawn (:class:`~ntkcheck.ntk.gram_matrix.pipeline.GramResult`);
the command ``ntkcheck gram`` adds the named dependence structure, the kernel it predicts beside the kernel
observed, the certificate of the head law, the head search and its conclusion. :class:`GramReport` holds
all of them, so a saved ``ntkcheck gram --json`` object loads back without losing any
(``GramReport.from_dict(json.load(f))``) and writes the same values again; its :meth:`~GramReport.to_dict`
is that object without what only the command line knows (``schema``, ``path``, ``certificate_out``,
``provenance``) and validates against the same schema with those keys not required
(``ntkcheck.cli._args.load_schema("gram", api=True)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._records import plain, restore, structured
from .ntk.gram_matrix.pipeline import GramResult
from .ntk.heads.law import HeadLawBound
from .ntk.heads.search import HeadSearch
from .ntk.prop8.crosscheck import KernelComparison
from .ntk.prop8.hypotheses import HeadLawSupport
from .ntk.prop8.structure import DependenceStructure

__all__ = ["GramReport", "GRAM_CONCLUSIONS"]

#: what ``ntkcheck gram`` concludes, and its exit status
GRAM_CONCLUSIONS = {"certified positive": 0, "certified positive, below a useful rate": 3,
                    "singular by a named structure": 1, "proved singular": 1, "positive in float64 only": 3,
                    "not certified": 3}


@dataclass(frozen=True)
class GramReport:
    """The ``ntkcheck gram`` result: ``gram`` with the heads' description ``init``
    (``{kind, q_scale, b_scale, seed, count, file}``), the ``structure`` and ``kernel`` (None with
    ``--no-structure``), the ``head_law`` bound (None when skipped), the ``head_search`` and the
    ``outcome`` (``{exit_code, conclusion, min_relative_lambda, slow_mode}``)."""

    gram: GramResult
    init: dict[str, Any]
    outcome: dict[str, Any]
    structure: DependenceStructure | None = None
    kernel: KernelComparison | None = None
    head_law: HeadLawBound | None = None
    head_search: HeadSearch | None = field(default=None, compare=False)
    #: seed 003 Prop. 8's hypothesis on the head law, and the kernel proved where it fails
    law_support: HeadLawSupport | None = None

    @property
    def exit_code(self) -> int:
        return int(self.outcome["exit_code"])

    def to_dict(self) -> dict[str, Any]:
        return structured({**self.gram.to_dict(), "init": self.init, "structure": None if self.structure is None
                           else self.structure.to_dict(), "kernel": None if self.kernel is None else self.kernel.to_dict(),
                           "head_law": None if self.head_law is None else self.head_law.to_dict(),
                           "head_search": None if self.head_search is None else self.head_search.to_dict(),
                           "law_support": None if self.law_support is None else self.law_support.to_dict(),
                           "outcome": self.outcome})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GramReport:
        """The report from its :meth:`to_dict` or a saved ``ntkcheck gram --json`` object."""
        d = plain(d)
        g = GramResult.from_dict(d)
        hs = d.get("head_search")
        return restore(cls, {"gram": g, "init": d.get("init"), "outcome": d.get("outcome"),
                             "structure": d.get("structure"), "kernel": d.get("kernel"), "head_law": d.get("head_law"),
                             "head_search": hs, "law_support": d.get("law_support")},
                       gram=lambda v: v,
                       structure=lambda v: None if v is None else DependenceStructure.from_dict(v),
                       kernel=lambda v: None if v is None else KernelComparison.from_dict(v),
                       head_law=lambda v: None if v is None else HeadLawBound.from_dict(v),
                       head_search=lambda v: None if v is None else HeadSearch.from_dict(v, gram=g),
                       law_support=lambda v: None if v is None else HeadLawSupport.from_dict(v))
