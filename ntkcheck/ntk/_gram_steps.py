"""Steps of :func:`~ntkcheck.ntk.gram_matrix.gram` that read none of its module constants.

What passes between the steps (the validated arguments, :class:`_GramInputs`; what a spectrum
route found, :class:`_Spectrum`), the heads drawn or checked, the Gram ``F F^T`` formed from
``F`` or accumulated over head blocks, its extremal eigenvalues by Cholesky + Lanczos, its
eigenvalues from the singular values of ``F``, and the kept matrix with its observed kernel.

The routing between these steps reads ``MAX_EIGENVALUES``, ``SVD_MEMORY_LIMIT`` and the
resolutions, so it stays in :mod:`ntkcheck.ntk.gram_matrix`, where a patched constant is seen;
callers import these helpers from there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from .. import _budget
from .._records import restore
from .._validate import check_score_range
from ..cgf import Empirical
from ..errors import InputError, TimeBudgetError
from .certificate import GramCertificate
from .features import (
    Heads,
    _as_heads,
    _atom_count,
    _feature_columns,
    _features,
    _groups,
    _head_block,
    _progress,
    init_heads,
)

# ------------------------------------------------------------------------------ sizes


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


# ------------------------------------------------------------------------------ inputs


@dataclass(frozen=True, eq=False)
class _GramInputs:
    """The arguments of :func:`~ntkcheck.ntk.gram_matrix.gram` once validated: the laws, their
    heads, and the sizes that decide the route (``full_spectrum``: ``M <= MAX_EIGENVALUES``)."""

    laws: list[Empirical]
    heads: Heads
    chunk: int
    progress: bool
    sizes: tuple[SampleSize, ...]
    atoms: int
    full_spectrum: bool

    @property
    def by_size(self) -> bool:
        """``H d < M``: the Gram is singular by rank, whatever the data."""
        return self.heads.count * self.heads.dim < self.atoms

    def features(self) -> np.ndarray:
        """``F``, ``(M, H d)``: one row per distinct atom."""
        return _features(self.laws, self.heads, self.chunk, self.progress)


@dataclass(frozen=True, eq=False)
class _Spectrum:
    """What one route found: all eigenvalues (ascending; None from Cholesky + Lanczos), the
    extremal ones (``lmin`` not yet clipped at 0), the route and its resolution, and ``F``
    when the route formed it (the SVD fallback and ``keep_matrix`` reuse it)."""

    eig: np.ndarray | None
    lmin: float
    lmax: float
    method: str
    resolution: float
    features: np.ndarray | None = field(default=None, repr=False)


def _drawn_or_checked_heads(heads: Any, dim: int, *, q_scale: float, b_scale: float,
                            dist: Literal["gaussian", "uniform"], seed: int) -> Heads:
    """``heads`` as a :class:`Heads` of dimension ``dim``: a head count is drawn by :func:`init_heads`."""
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer, Heads, tuple)):
        raise InputError(f"heads: expected a positive integer or a Heads object, got {heads!r}")
    if isinstance(heads, (int, np.integer)):
        if heads < 1:
            raise InputError(f"heads: expected a positive integer or a Heads object, got {heads!r}")
        heads = init_heads(int(heads), dim, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed)
    return _as_heads(heads, dim)


# --------------------------------------------------------------------------------- gram


def _gram_accumulated(laws: Sequence[Empirical], heads: Heads, chunk: int, progress: bool) -> np.ndarray:
    """``F F^T`` summed over head blocks without storing ``F``.

    Memory: ``8 M^2`` bytes for the Gram plus one column block of ``F`` of at most
    ``8 max(2^25, 256 M)`` bytes (at least 256 columns, so the rank-k update runs at
    matmul speed) plus the tile workspace of :func:`attention_features`. The update is
    BLAS ``syrk``, in place (no ``M x M`` temporary), and fills only the **lower
    triangle** of the Fortran-ordered result: every consumer (``eigvalsh``,
    :func:`_extremal_eigh`) reads only that triangle.
    """
    check_score_range([law.atoms for law in laws], heads.Q, heads.b)
    M = _atom_count(laws)
    H, d = heads.count, heads.dim
    c = _head_block(M, H, d)
    groups = _groups(laws, H)
    G = np.zeros((M, M), order="F")
    block = np.empty((M, c * d))
    with _progress(M * H, progress) as bar:
        for h0 in range(0, H, c):
            h1 = min(H, h0 + c)
            B = block if h1 - h0 == c else np.empty((M, (h1 - h0) * d))
            _feature_columns(groups, heads, h0, h1, B, chunk, bar)
            # B.T is Fortran-ordered (k, M): syrk(trans=1) forms B B^T without copying B.
            G = sla.blas.dsyrk(1.0, B.T, beta=1.0, c=G, trans=1, lower=1, overwrite_c=1)
    return G


def _gram_lower(F: np.ndarray) -> np.ndarray:
    """``F F^T`` by BLAS ``syrk``: half the work of ``F @ F.T``; lower triangle only (Fortran order)."""
    _budget.require(lambda: _budget.dense_seconds(float(F.shape[0]) ** 2 * F.shape[1]), "the float64 Gram F F^T")
    return _budget.run(lambda: sla.blas.dsyrk(1.0, np.ascontiguousarray(F).T, trans=1, lower=1), "F F^T")


# ---------------------------------------------------------------------------- spectrum


def _extremal_eigh(G: np.ndarray) -> tuple[float, float] | None:
    """(lambda_min, lambda_max) by Cholesky + Lanczos on ``G^{-1}``; None when G is not
    numerically positive definite (then the caller uses the full eigvalsh).

    Only the lower triangle of ``G`` is read (as :func:`_gram_accumulated` fills it)."""
    if not G.flags.f_contiguous:
        G = np.asfortranarray(G)  # BLAS symv below takes it as is, without a copy per product
    _budget.require(lambda: _budget.dense_seconds(G.shape[0] ** 3 / 3, _budget.CHOLESKY), "the Cholesky of the Gram")
    try:
        c = _budget.run(lambda: sla.cho_factor(G, lower=True, check_finite=False), "the Cholesky of the Gram")
    except np.linalg.LinAlgError:
        return None
    n = G.shape[0]
    op = LinearOperator((n, n), matvec=lambda v: sla.cho_solve(c, v, check_finite=False), dtype=np.float64)
    try:
        mu = eigsh(op, k=1, which="LA", tol=1e-12, return_eigenvectors=False)[0]
        lop = LinearOperator((n, n), matvec=lambda v: sla.blas.dsymv(1.0, G, np.ravel(v), lower=1), dtype=np.float64)
        lmax = eigsh(lop, k=1, which="LA", tol=1e-12, return_eigenvectors=False)[0]
    except (ArpackError, ArpackNoConvergence):
        return None
    if not (mu > 0 and lmax > 0):
        return None
    return float(1.0 / mu), float(lmax)


def svd_seconds(shape: tuple[int, ...], vectors: bool = False) -> float:
    """Estimated seconds of the singular values (or, with ``vectors``, the thin SVD) of a matrix of
    ``shape`` (:func:`ntkcheck._budget.dense_seconds`)."""
    m, k = min(shape), max(shape)
    return _budget.dense_seconds(4.0 * m * m * k, _budget.SVD if vectors else _budget.SVDVALS)


def _svd_eigenvalues(F: np.ndarray) -> np.ndarray:
    """All ``M`` eigenvalues of ``F F^T``, ascending, as the squared singular values of ``F``.

    ``F F^T`` is never formed, so relative eigenvalues down to ~1e-26 are resolved (the
    ``eigvalsh`` of the formed Gram stops at ~1e-13)."""
    M = F.shape[0]
    _budget.require(lambda: svd_seconds(F.shape), "the SVD of F")
    s = _budget.run(lambda: sla.svdvals(F, check_finite=False), "the SVD of F")
    ev = np.zeros(M)
    ev[M - s.shape[0]:] = np.sort(s) ** 2  # min(M, Hd) singular values; the rest are exact zeros
    return ev


# ------------------------------------------------------------------------------ result


def _kept_matrix(g: _GramInputs, F: np.ndarray | None, eigenvalues: tuple[float, ...] | None,
                 floor: float) -> tuple[np.ndarray, np.ndarray]:
    """The Gram ``F F^T`` (exactly symmetric) and an orthonormal basis of its observed kernel."""
    if F is None:
        F = g.features()
    _budget.require(lambda: 3 * _budget.dense_seconds(4 / 3 * F.shape[0] ** 3, _budget.EIGVALSH), "eigh of the kept Gram")
    kept = F @ F.T
    kept = (kept + kept.T) / 2  # exactly symmetric for eigh
    # the observed kernel: as many eigenvectors as eigenvalues at the floor (the count
    # may come from the SVD; the subspace of a cluster separated by a gap is accurate)
    k = sum(1 for v in (eigenvalues or ()) if v <= floor)
    return kept, _budget.run(lambda: np.linalg.eigh(kept)[1][:, :k].copy(), "eigh of the kept Gram")


# --------------------------------------------------------------------------- time budget

_T = TypeVar("_T")


def spectrum_within_budget(compute: Callable[[], _T], atoms: int) -> _T:
    """``compute()`` (the float64 spectrum) in a stoppable scope of the current time budget
    (:mod:`ntkcheck._budget`); when the budget runs out or a step would not fit, a
    :class:`~ntkcheck.errors.TimeBudgetError` with the stage and the option to raise: without the
    spectrum there is nothing to report."""
    try:
        with _budget.scope(stoppable=True) as b:
            return compute()
    except _budget.OutOfTime as exc:
        raise TimeBudgetError(f"the float64 spectrum of the Gram (M = {atoms} distinct atoms) does not fit in the "
                              f"time budget of {b.seconds:g} s: {exc.stage}; raise the budget (--max-seconds, "
                              "time_budget=) or lower the heads or the samples") from None


def certificate_within_budget(func: Callable[..., GramCertificate]) -> Callable[..., GramCertificate]:
    """``func`` (a Gram certificate) in a stoppable scope of the current time budget: a step that
    would not fit is not started, and a budget spent gives an inconclusive certificate saying
    "not certified (time budget spent)" with the stage (never a bound it did not finish)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> GramCertificate:
        try:
            with _budget.scope(stoppable=True):
                return func(*args, **kwargs)
        except _budget.OutOfTime as exc:
            return GramCertificate("inconclusive", None, 53, f"{TIME_SPENT}: {exc.stage}")

    return wrapper


#: how a certificate cut short by the time budget begins its detail
TIME_SPENT = "not certified (time budget spent)"
