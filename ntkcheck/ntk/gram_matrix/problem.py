r"""The Gram's inputs validated once: :class:`GramProblem`, what every later step reads.

:func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` turns the user's samples and heads into one frozen
:class:`GramProblem` before any work is done, in this order (the first bad argument is the one
reported): the samples become their empirical laws (:func:`~ntkcheck.cgf.empirical.as_laws`), a
head count is checked against memory and drawn (:func:`~ntkcheck.ntk.gram_matrix.features.init_heads`),
explicit heads are checked against the tokens' dimension, then ``method``, ``spectrum``, ``chunk``,
the **token range** (:func:`check_token_range`, the one range check of the call), the memory of
the Gram and the size limit of ``keep_matrix``. The problem carries what the features, the
accumulated Gram, its spectrum, its certificate and the result need: the laws and their arrays
(atoms, masses, row offsets, stacked by atom count for the features), the heads, the sizes ``M``,
``H``, ``d``, ``K = H d``, which inputs are not doubles (the rounding facts of
``theory/certificates.md``, "Inputs: exact, refused or rounded"), and the options of the call. On
the certified path no later step reads the laws through their properties again (the Arb route and
the exact checks read the exact values the laws keep).

References: seed 003 section 3.1 (a sample is its empirical law); ``theory/ntk-prop8.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..._records import restore
from ..._validate import check_score_range
from ...cgf.empirical import Empirical, as_laws
from ...errors import InputError
from . import _sizes
from .features import (
    DEFAULT_CHUNK,
    Heads,
    _as_chunk,
    _as_heads,
    _feature_matrix,
    _Group,
    _stack,
    init_heads,
)

__all__ = ["SampleSize", "GramOptions", "InitLaw", "GramProblem", "MAX_EIGENVALUES", "merge_note", "rounded_inputs",
           "check_token_range"]

#: full spectrum returned (and the Gram kept) up to this many distinct atoms (rows of the Gram)
MAX_EIGENVALUES = _sizes.MAX_EIGENVALUES


@dataclass(frozen=True)
class SampleSize:
    """How one sample entered the Gram: ``tokens`` given, ``atoms`` distinct, and the
    ``max_multiplicity`` (largest number of tokens merged into one atom)."""

    tokens: int
    atoms: int
    max_multiplicity: int

    @classmethod
    def of(cls, law: Empirical) -> SampleSize:
        return cls(int(law.n_tokens), law.n_atoms, law.max_multiplicity)

    def to_dict(self) -> dict[str, int]:
        return {"tokens": self.tokens, "atoms": self.atoms, "max_multiplicity": self.max_multiplicity}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SampleSize:
        return restore(cls, d)


def merge_note(sizes: Sequence[SampleSize]) -> str | None:
    """One sentence naming the samples whose repeated tokens were merged, or None."""
    merged = [i for i, s in enumerate(sizes) if s.atoms < s.tokens]
    if not merged:
        return None
    shown = ", ".join(f"{i} ({sizes[i].tokens} tokens on {sizes[i].atoms} atoms, largest multiplicity "
                      f"{sizes[i].max_multiplicity})" for i in merged[:4])
    more = f" and {len(merged) - 4} more" if len(merged) > 4 else ""
    return (f"repeated tokens merged into atoms with their masses (the NTK acts on L^2(mu_i), where copies of a "
            f"token are one point): sample{'s' if len(merged) > 1 else ''} {shown}{more}")


def rounded_inputs(laws: Sequence[Empirical], heads: Heads | None = None) -> str | None:
    """Which inputs hold values that are not doubles, as the start of a sentence ("samples 0, 3 and
    the heads hold values that are not doubles"), or None when every value given is a double."""
    idx = [i for i, law in enumerate(laws) if law.rounded]
    parts = []
    if idx:
        shown = ", ".join(str(i) for i in idx[:8]) + (f" and {len(idx) - 8} more" if len(idx) > 8 else "")
        parts.append(f"sample{'s' if len(idx) > 1 else ''} {shown}")
    if heads is not None and heads.rounded:
        parts.append("the heads")
    if not parts:
        return None
    one = len(parts) == 1 and len(idx) <= 1
    return f"{' and '.join(parts)} {'holds' if one and idx else 'hold'} values that are not doubles"


def check_token_range(laws: Sequence[Empirical], heads: Heads) -> None:
    """The token range check: refuse tokens whose Gram entries (bounded by ``R^2``, ``R`` the largest
    token norm) or whose attention scores ``<Q x + b, y>`` could overflow float64 (both with the bound
    that failed: :func:`~ntkcheck.ntk.gram_matrix._sizes.check_gram_range`,
    :func:`~ntkcheck._validate.check_score_range`)."""
    _sizes.check_gram_range(laws)
    check_score_range([law.atoms for law in laws], heads.Q, heads.b)


@dataclass(frozen=True)
class GramOptions:
    """What :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` is asked besides the samples and heads
    (checked by :meth:`GramProblem.of`): the spectrum ``method`` and extent (``spectrum``), whether to
    keep the matrix, to certify, and the Arb precision cap ``max_bits``."""

    method: Literal["auto", "svd", "eigh"] = "auto"
    spectrum: Literal["extremal", "full"] = "extremal"
    keep_matrix: bool = False
    certify: bool = False
    max_bits: int = 2048


@dataclass(frozen=True)
class InitLaw:
    """The law a head count is drawn from (:func:`~ntkcheck.ntk.gram_matrix.features.init_heads`)."""

    q_scale: float = 1.0
    b_scale: float = 1.0
    dist: Literal["gaussian", "uniform"] = "gaussian"
    seed: int = 0


@dataclass(frozen=True, eq=False)
class GramProblem:
    r"""The samples and heads of one Gram, validated, with what every step of the pipeline reads.

    Attributes
    ----------
    laws : tuple of Empirical
        The samples' empirical laws (a sample is its law: repeated tokens are one atom).
    heads : Heads
    M, H, d, K : int
        Distinct atoms (rows of the Gram), heads, token dimension, ``K = H d`` (columns of ``F``).
    n_atoms, offsets : (n,), (n + 1,) int arrays
        Distinct atoms per law and the first row of each law in ``F``.
    atoms, masses : tuple of (N_i, d) and (N_i,) float arrays
        Each law's atoms (the float64 view) and masses, in the order of :attr:`Empirical.atoms`.
    groups : tuple
        The laws stacked by atom count with their row weights :math:`\sqrt{m_{ia}/H}` (what the
        feature builder reads; :func:`~ntkcheck.ntk.gram_matrix.features._stack`).
    law_rounded : (n,) bool array; heads_rounded : bool
        Which laws, and whether the heads, hold values that are not doubles.
    rounded : str or None
        The same in words (:func:`rounded_inputs`), None when every value given is a double.
    sizes : tuple of SampleSize
    by_size : bool
        ``K < M``: the Gram is singular by rank, whatever the data.
    full_spectrum : bool
        ``M <= MAX_EIGENVALUES``: the full spectrum may be computed and kept.
    want_full : bool
        Every eigenvalue asked for (``spectrum="full"`` or ``keep_matrix``).
    chunk, progress, options
        The tile workspace of the features, whether to show progress, and :class:`GramOptions`.
    """

    laws: tuple[Empirical, ...]
    heads: Heads
    M: int
    H: int
    d: int
    K: int
    n_atoms: np.ndarray = field(repr=False)
    offsets: np.ndarray = field(repr=False)
    atoms: tuple[np.ndarray, ...] = field(repr=False)
    masses: tuple[np.ndarray, ...] = field(repr=False)
    groups: tuple[_Group, ...] = field(repr=False)
    law_rounded: np.ndarray = field(repr=False)
    heads_rounded: bool
    rounded: str | None
    sizes: tuple[SampleSize, ...]
    by_size: bool
    full_spectrum: bool
    want_full: bool
    chunk: int = DEFAULT_CHUNK
    progress: bool = False
    options: GramOptions = field(default_factory=GramOptions)

    @classmethod
    def of(cls, samples: Any, heads: Any, *, chunk: Any = DEFAULT_CHUNK, progress: bool = False,
           init: InitLaw | None = None, options: GramOptions | None = None) -> GramProblem:
        """Validate ``samples`` and ``heads`` once (the module docstring says in which order).

        ``heads`` is a :class:`Heads` or a tuple ``(Q, b)``; with ``init``, also a head count drawn
        from that law. ``options`` (those of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`) are
        checked after the heads, the token range after ``chunk``."""
        laws = as_laws(samples)
        d = laws[0].dim
        if init is not None:
            _sizes.require_drawn_gram(laws, heads)  # a count of heads: heads and Gram estimated before drawing
            heads = _drawn_or_checked_heads(heads, d, init)
        else:
            heads = _as_heads(heads, d)
        opts = _checked(options if options is not None else GramOptions())
        chunk = _as_chunk(chunk)
        n_atoms = np.array([law.n_atoms for law in laws], dtype=np.int64)
        M, H = int(n_atoms.sum()), heads.count
        check_token_range(laws, heads)
        _sizes.require_gram(M, H, d)
        if opts.keep_matrix and M > MAX_EIGENVALUES:
            raise InputError(f"keep_matrix: the Gram is kept only up to {MAX_EIGENVALUES} distinct atoms, got M = {M}")
        masses = tuple(law.masses for law in laws)
        atoms = tuple(law.atoms for law in laws)
        law_rounded = np.array([law.rounded for law in laws])
        return cls(tuple(laws), heads, M, H, d, H * d, n_atoms, np.concatenate([[0], np.cumsum(n_atoms)]), atoms,
                   masses, tuple(_stack(atoms, masses, [len(set(law.weights)) == 1 for law in laws], H)), law_rounded,
                   heads.rounded, rounded_inputs(laws, heads), tuple(SampleSize.of(law) for law in laws),
                   H * d < M, M <= MAX_EIGENVALUES, opts.spectrum == "full" or opts.keep_matrix, chunk,
                   bool(progress), opts)

    def features(self) -> np.ndarray:
        """``F``, ``(M, H d)``: one row per distinct atom (:func:`~ntkcheck.ntk.gram_matrix.features.attention_features`
        on the validated problem: no second range check)."""
        return _feature_matrix(self.groups, self.heads, self.M, self.chunk, self.progress)

    def notes(self) -> list[str]:
        """Notes on how the samples entered the Gram: merged repeated tokens, inputs that are not
        doubles, and a rank deficit ``H d < M`` (which :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`
        also warns about: it is not a verdict about the data)."""
        notes: list[str] = []
        if (merged := merge_note(self.sizes)) is not None:
            notes.append(merged)
        if self.rounded is not None:
            notes.append(f"{self.rounded}: the spectrum is that of their nearest doubles; a certificate counts only "
                         "for the values given (theory/certificates.md)")
        if self.by_size:
            notes.append(f"singular by rank: H d = {self.K} < M = {self.M}")
        return notes

    def rank_sentence(self) -> str:
        """Why a Gram with ``H d < M`` is singular, and how many heads would remove the rank deficit."""
        return (f"H d = {self.H}*{self.d} = {self.K} < M = {self.M} distinct atoms: the Gram has rank at most {self.K} "
                f"and is singular by rank; this is not a verdict about the data (use at least "
                f"{math.ceil(self.M / self.d)} heads)")


def _checked(opts: GramOptions) -> GramOptions:
    if opts.method not in ("auto", "svd", "eigh"):
        raise InputError(f"method: expected 'auto', 'svd' or 'eigh', got {opts.method!r}")
    if opts.spectrum not in ("extremal", "full"):
        raise InputError(f"spectrum: expected 'extremal' or 'full', got {opts.spectrum!r}")
    return opts


def _drawn_or_checked_heads(heads: Any, dim: int, init: InitLaw) -> Heads:
    """``heads`` as a :class:`Heads` of dimension ``dim``: a head count is drawn by :func:`init_heads`."""
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer, Heads, tuple)):
        raise InputError(f"heads: expected a positive integer or a Heads object, got {heads!r}")
    if isinstance(heads, (int, np.integer)):
        if heads < 1:
            raise InputError(f"heads: expected a positive integer or a Heads object, got {heads!r}")
        heads = init_heads(int(heads), dim, q_scale=init.q_scale, b_scale=init.b_scale, dist=init.dist,
                           seed=init.seed)
    return _as_heads(heads, dim)
