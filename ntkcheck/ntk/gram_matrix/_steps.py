"""Steps of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`: what passes between them and the linear algebra.

What passes between the steps (the validated arguments, :class:`_GramInputs`; what a spectrum
route found, :class:`_Spectrum`), the spectrum's resolutions, the heads drawn or checked, the
Gram ``F F^T`` accumulated over head blocks, its extremal eigenvalues by Cholesky + Lanczos, its
eigenvalues from the singular values of ``F``, and the kept matrix with its observed kernel.
The routing between these steps is :mod:`ntkcheck.ntk.gram_matrix.route`; callers import these
helpers from :mod:`ntkcheck.ntk.gram_matrix.pipeline`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np
import scipy.linalg as sla

from ... import _budget
from ..._records import restore
from ...cgf import Empirical
from ...errors import InputError, TimeBudgetError
from ..certificate import rounding as rnd
from ..certificate.routes import GramCertificate
from .extremal import RitzPair, largest, smallest
from .features import Heads, _as_heads, _features, init_heads

#: relative lambda_min below which the eigvalsh of the formed Gram is not trusted
#: (its floor is ~1e-13, measured in benchmarks/bench_gram.py; a factor 1000 of margin).
RESOLUTION_EIGH = 1e-10
#: relative lambda_min below which even the SVD of F (errors ~ (eps ||F||)^2) says nothing.
RESOLUTION_SVD = 1e-26
#: relative lambda_min above which float64 alone may report "positive" (the issue's standard).
POSITIVE_REL = 1e-12
#: the SVD fallback is attempted only if F fits in this many bytes.
SVD_MEMORY_LIMIT = 4 << 30

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


# ------------------------------------------------------------------------------ inputs


@dataclass(frozen=True, eq=False)
class _GramInputs:
    """The arguments of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` once validated: the laws, their
    heads, and the sizes that decide the route (``full_spectrum``: ``M <= MAX_EIGENVALUES``)."""

    laws: list[Empirical]
    heads: Heads
    chunk: int
    progress: bool
    sizes: tuple[SampleSize, ...]
    atoms: int
    full_spectrum: bool
    want_full: bool = False  # every eigenvalue asked for (spectrum="full", keep_matrix)

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
    extremal ones (``lmin`` not yet clipped at 0) with their tolerances (an eigenvalue of the
    float64 Gram lies within ``tol_min`` of ``lmin``, within ``tol_max`` of ``lmax``), the route and
    its resolution, and ``F`` when the route formed it (the SVD fallback and ``keep_matrix`` reuse it)."""

    eig: np.ndarray | None
    lmin: float
    lmax: float
    method: str
    resolution: float
    features: np.ndarray | None = field(default=None, repr=False)
    tol_min: float | None = None
    tol_max: float | None = None


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
    """``F F^T`` summed over head blocks without storing ``F`` (:func:`~ntkcheck.ntk.certificate.rounding.enclosed_gram`
    without the bound).

    Memory: ``8 M^2`` bytes for the Gram plus one column block of ``F`` of at most
    ``8 max(2^25, 256 M)`` bytes (at least 256 columns, so the rank-k update runs at
    matmul speed) plus the tile workspace of :func:`attention_features`. The update is
    BLAS ``syrk``, in place (no ``M x M`` temporary), and fills only the **lower
    triangle** of the Fortran-ordered result: every consumer (``eigvalsh``,
    :func:`_extremal_eigh`) reads only that triangle.
    """
    return rnd.enclosed_gram(laws, heads, chunk, progress, bound=False).G


def _gram_lower(F: np.ndarray) -> np.ndarray:
    """``F F^T`` by BLAS ``syrk``: half the work of a GEMM; lower triangle only (Fortran order)."""
    _budget.require(lambda: _budget.dense_seconds(float(F.shape[0]) ** 2 * F.shape[1]), "the float64 Gram F F^T")
    return _budget.run(lambda: sla.blas.dsyrk(1.0, np.ascontiguousarray(F).T, trans=1, lower=1), "F F^T")


# ---------------------------------------------------------------------------- spectrum


def _extremal_pairs(work: rnd.SymmetricWork) -> tuple[RitzPair, RitzPair] | None:
    """(smallest, largest) Ritz pairs of the Gram in ``work`` (Cholesky in place, then Lanczos on
    the inverse and on the Gram, :mod:`ntkcheck.ntk.gram_matrix.extremal`); None when the Gram is not
    numerically positive definite (its Cholesky fails)."""
    if work.factor(0.0) is None:
        return None
    small = smallest(work)
    if small is None or not small.value > 0:
        return None
    return small, largest(work)


def _extremal_eigh(G: np.ndarray) -> tuple[float, float] | None:
    """(lambda_min, lambda_max) of the Gram whose lower triangle ``G`` holds, by Cholesky + Lanczos
    (:func:`_extremal_pairs`); None when G is not numerically positive definite (then the caller
    uses the full eigvalsh).

    Only the lower triangle of ``G`` is read (as :func:`_gram_accumulated` fills it). A
    Fortran-ordered ``G`` is factorised in place and restored: on return its lower triangle and
    diagonal hold ``G`` again and its strict upper triangle holds the mirror image."""
    if not G.flags.f_contiguous:
        G = np.asfortranarray(G)
    work = rnd.SymmetricWork(G)
    try:
        pairs = _extremal_pairs(work)
    finally:
        work.restore()
    if pairs is None:
        return None
    return pairs[0].value, pairs[1].value


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
    kept = F @ F.T
    kept = (kept + kept.T) / 2  # exactly symmetric for eigh
    # the observed kernel: as many eigenvectors as eigenvalues at the floor (the count
    # may come from the SVD; the subspace of a cluster separated by a gap is accurate)
    k = sum(1 for v in (eigenvalues or ()) if v <= floor)
    _budget.require(lambda: 3 * _budget.dense_seconds(4 / 3 * F.shape[0] ** 3, _budget.EIGVALSH), "eigh of the kept Gram")
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
