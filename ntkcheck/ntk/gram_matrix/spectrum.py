r"""The spectrum of the accumulated Gram: what :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` reports about
:math:`\hat G`, and the float64 status it supports.

1. **Extremal eigenvalues** (:mod:`ntkcheck.ntk.gram_matrix.extremal`): a Cholesky of the Gram in
   place (:class:`~ntkcheck.ntk.gram_matrix.cholesky.SymmetricWork`), Lanczos on its inverse for
   :math:`\lambda_{\min}` and on the Gram for :math:`\lambda_{\max}`, each with its residual tolerance.
   No ``eigvalsh``.
2. **The small-eigenvalue cluster only when the report needs it**: the full ``eigvalsh`` (up to
   ``MAX_EIGENVALUES`` atoms) when asked (``spectrum="full"``, ``keep_matrix``), when the Cholesky
   fails, or when :math:`\lambda_{\min}` may be within a factor ``NEAR_FLOOR`` of the rounding
   floor (where the observed kernel is counted); above ``MAX_EIGENVALUES`` a Cholesky of
   :math:`\hat G + \sigma I` and Lanczos give the cluster instead.
3. **The SVD of** ``F`` (recomputed) when the relative :math:`\lambda_{\min}` is below
   ``eigvalsh``'s resolution (``method="auto"``), or always (``method="svd"``, no pass over the
   heads before it): ``eigvalsh`` cannot resolve relative eigenvalues below ~1e-13, the SVD of
   ``F`` resolves them down to ~1e-28.

The factored work array (the Gram, its factor and the Lanczos estimate of :math:`\lambda_{\min}`)
is handed on to the certificate (:mod:`ntkcheck.ntk.certificate.cascade`), which reuses it.
Positivity is never claimed from a float64 number below ``POSITIVE_REL`` relative
(:func:`spectrum_status`).

References: ``theory/certificates.md`` (certified positivity at scale); B. N. Parlett, *The
Symmetric Eigenvalue Problem* (SIAM, 1998).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import scipy.linalg as sla

from ... import _budget
from ..._progress import progress_bar
from ...errors import TimeBudgetError
from .accumulate import AccumulatedGram
from .cholesky import SymmetricWork, U
from .extremal import RitzPair, largest, smallest, smallest_cluster
from .problem import GramProblem

__all__ = ["Spectrum", "Factored", "spectrum_of", "spectrum_status", "spectrum_budget", "RESOLUTION_EIGH",
           "RESOLUTION_SVD", "POSITIVE_REL"]

#: relative lambda_min below which the eigvalsh of the formed Gram is not trusted
#: (its floor is ~1e-13, measured in benchmarks/bench_gram.py; a factor 1000 of margin).
RESOLUTION_EIGH = 1e-10
#: relative lambda_min below which even the SVD of F (errors ~ (eps ||F||)^2) says nothing.
RESOLUTION_SVD = 1e-26
#: relative lambda_min above which float64 alone may report "positive" (the issue's standard).
POSITIVE_REL = 1e-12
#: the SVD fallback is attempted only if F fits in this many bytes.
SVD_MEMORY_LIMIT = 4 << 30
#: the full spectrum is computed when lambda_min - its tolerance is within this factor of the floor
NEAR_FLOOR = 4.0
#: eigenpairs computed for the cluster near zero above MAX_EIGENVALUES atoms
CLUSTER = 16


@dataclass(frozen=True, eq=False)
class Spectrum:
    """What the spectrum step found: all eigenvalues (ascending; None from Cholesky + Lanczos), the
    extremal ones (``lmin`` not yet clipped at 0) with their tolerances (an eigenvalue of the float64
    Gram lies within ``tol_min`` of ``lmin``, within ``tol_max`` of ``lmax``), the route and its
    resolution, the float64 ``status`` (:func:`spectrum_status`), the notes saying which fallback
    ran, and ``F`` when the route formed it (the SVD; ``keep_matrix`` reuses it)."""

    eig: np.ndarray | None
    lmin: float
    lmax: float
    method: str
    resolution: float
    status: str
    features: np.ndarray | None = field(default=None, repr=False)
    tol_min: float | None = None
    tol_max: float | None = None
    notes: tuple[str, ...] = ()


@dataclass(eq=False)
class Factored:
    """The Gram of the pass in its work array after the spectrum step, the Lanczos pair of
    :math:`\\lambda_{\\min}` when the Cholesky of the Gram succeeded, and the float estimate of
    :math:`\\lambda_{\\min}` the certificate's shift starts from (that pair's value, else the
    spectrum's): what the certificate reuses."""

    work: SymmetricWork
    small: RitzPair | None = None
    estimate: float | None = None


def spectrum_status(lmin: float, lmax: float, *, by_size: bool, resolution: float) -> str:
    """:attr:`~ntkcheck.ntk.gram_matrix.result.GramResult.status` from the extremal eigenvalues:
    ``"singular by size"`` when ``H d < M``, ``"positive"`` above ``POSITIVE_REL`` relative,
    ``"below resolution"`` under the route's ``resolution``, ``"small"`` in between."""
    rel = lmin / lmax if lmax > 0 else 0.0
    if by_size:
        return "singular by size"
    if rel > POSITIVE_REL:
        return "positive"
    return "below resolution" if rel < resolution else "small"


@contextlib.contextmanager
def spectrum_budget(atoms: int) -> Iterator[None]:
    """The float64 spectrum in a stoppable scope of the current time budget (:mod:`ntkcheck._budget`);
    when the budget runs out or a step would not fit, a :class:`~ntkcheck.errors.TimeBudgetError`
    with the stage and the option to raise: without the spectrum there is nothing to report."""
    try:
        with _budget.scope(stoppable=True) as b:
            yield
    except _budget.OutOfTime as exc:
        raise TimeBudgetError(f"the float64 spectrum of the Gram (M = {atoms} distinct atoms) does not fit in the "
                              f"time budget of {b.seconds:g} s: {exc.stage}; raise the budget (--max-seconds, "
                              "time_budget=) or lower the heads or the samples") from None


def spectrum_of(problem: GramProblem, acc: AccumulatedGram | None) -> tuple[Spectrum, Factored | None]:
    """The spectrum of the Gram of ``acc`` (the module docstring; ``acc`` is None on the ``"svd"``
    route, which makes no pass over the heads), and the factored work array the certificate reuses
    (None on the ``"svd"`` route)."""
    if acc is None:
        return _svd_spectrum(problem, None), None
    M = problem.M
    with progress_bar(3, desc="spectrum: Cholesky + Lanczos", unit="step", enabled=problem.progress) as bar:
        bar.set_postfix_str(f"G {8 * M * M / 1e9:.2f} GB in place: mirror")
        fac = Factored(SymmetricWork(acc.G))
        bar.update(1)
        bar.set_postfix_str(f"G {8 * M * M / 1e9:.2f} GB in place: Cholesky, Lanczos")
        pairs = None if problem.by_size else _extremal_pairs(fac.work)
        bar.update(1)
        full = pairs is None or (problem.want_full and problem.full_spectrum) or _near_floor(*pairs)
        notes: list[str] = []
        if full and not problem.full_spectrum and not problem.by_size:
            # above MAX_EIGENVALUES: the cluster near zero, not a full eigvalsh
            if pairs is None and (pairs := _cluster(fac.work, largest(fac.work))) is not None:
                notes.append(f"the Cholesky of the Gram failed (lambda_min at the rounding floor): lambda_min from "
                             f"Lanczos on (G + sigma I)^-1, sigma = {10 * RESOLUTION_EIGH:g} lambda_max")
            full = pairs is None
        if pairs is not None:
            fac.small = pairs[0]
        bar.set_postfix_str("eigvalsh" if full else "done")
        spec = (_full_spectrum(problem, fac.work) if full else
                _spectrum(problem, None, pairs[0].value, pairs[1].value, "cholesky-lanczos", RESOLUTION_EIGH, None,
                          pairs[0].tolerance, pairs[1].tolerance))
        bar.update(1)
    spec = _svd_fallback(problem, spec, notes)
    fac.estimate = fac.small.value if fac.small is not None else spec.lmin
    return spec, fac


def _spectrum(problem: GramProblem, eig: np.ndarray | None, lmin: float, lmax: float, method: str, resolution: float,
              F: np.ndarray | None, tol_min: float | None, tol_max: float | None,
              notes: tuple[str, ...] = ()) -> Spectrum:
    """A :class:`Spectrum` with its float64 status."""
    status = spectrum_status(max(lmin, 0.0), lmax, by_size=problem.by_size, resolution=resolution)
    return Spectrum(eig, lmin, lmax, method, resolution, status, F, tol_min, tol_max, notes)


def _svd_fallback(problem: GramProblem, spec: Spectrum, notes: list[str]) -> Spectrum:
    """``spec`` with ``notes``, or, when ``method="auto"`` and its relative :math:`\\lambda_{\\min}` is
    below ``eigvalsh``'s resolution, the spectrum from the SVD of ``F`` (when it fits in time and memory)."""
    if problem.options.method == "auto" and not problem.by_size and spec.lmax > 0 and \
            spec.lmin / spec.lmax < RESOLUTION_EIGH:
        if not _budget.fits(partial(svd_seconds, (problem.M, problem.K))):
            notes = [*notes, "lambda_min below the eigvalsh resolution; the SVD of F skipped: it would not fit in the "
                     "time budget"]
        elif 8 * problem.M * problem.K <= SVD_MEMORY_LIMIT:
            svd = _svd_spectrum(problem, None)
            return Spectrum(svd.eig, svd.lmin, svd.lmax, svd.method, svd.resolution, svd.status, svd.features,
                            svd.tol_min, svd.tol_max, ("eigvalsh could not resolve lambda_min (relative < 1e-10): "
                                                       "recomputed from the SVD of F",))
        else:
            notes = [*notes, "lambda_min below the eigvalsh resolution and F too large for the SVD fallback"]
    return Spectrum(spec.eig, spec.lmin, spec.lmax, spec.method, spec.resolution, spec.status, spec.features,
                    spec.tol_min, spec.tol_max, tuple(notes))


def _svd_spectrum(problem: GramProblem, F: np.ndarray | None) -> Spectrum:
    """The spectrum from the SVD of ``F`` (formed here unless given). Tolerance: the singular
    values' backward error ``M u sigma_max`` squared through (not a proof)."""
    if F is None:
        F = problem.features()
    eig = _svd_eigenvalues(F)
    lmin, lmax = float(eig[0]), float(eig[-1])
    e = F.shape[0] * U * math.sqrt(max(lmax, 0.0))
    tol_min = 2.0 * e * math.sqrt(max(lmin, 0.0)) + e * e
    return _spectrum(problem, eig, lmin, lmax, "svd", RESOLUTION_SVD, F, tol_min,
                     2.0 * e * math.sqrt(max(lmax, 0.0)) + e * e)


def _full_spectrum(problem: GramProblem, work: SymmetricWork) -> Spectrum:
    """Every eigenvalue by ``eigvalsh`` (on a copy: the work array keeps the Gram for the
    certificate). Tolerance: LAPACK's backward error, taken as ``M u lambda_max`` (not a proof)."""
    work.restore()
    _budget.require(partial(_budget.dense_seconds, 4 / 3 * work.n**3, _budget.EIGVALSH), "eigvalsh of the Gram")
    eig = _budget.run(partial(np.linalg.eigvalsh, work.A, UPLO="L"), "eigvalsh of the Gram")
    lmin, lmax = float(eig[0]), float(eig[-1])
    tol = work.n * U * abs(lmax)
    return _spectrum(problem, eig, lmin, lmax, "eigvalsh", RESOLUTION_EIGH, None, tol, tol)


def _near_floor(small: RitzPair, big: RitzPair) -> bool:
    """Whether :math:`\\lambda_{\\min}` may be within ``NEAR_FLOOR`` of the rounding floor."""
    return small.value - small.tolerance <= NEAR_FLOOR * RESOLUTION_EIGH * big.value


def _cluster(work: SymmetricWork, big: RitzPair) -> tuple[RitzPair, RitzPair] | None:
    r"""The smallest eigenpair of a Gram whose Cholesky failed, above ``MAX_EIGENVALUES`` atoms:
    Cholesky of :math:`\hat G + \sigma I` (:math:`\sigma` ten times the rounding floor, above the
    rounding of any Gram) and Lanczos on its inverse for the ``CLUSTER`` smallest pairs; the
    smallest Rayleigh quotient on :math:`\hat G` with its tolerance. None when even that fails."""
    sigma = 10.0 * RESOLUTION_EIGH * big.value
    if work.factor(-sigma) is None:
        return None
    pairs = smallest_cluster(work, CLUSTER)
    return (pairs[0], big) if pairs else None


def _extremal_pairs(work: SymmetricWork) -> tuple[RitzPair, RitzPair] | None:
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

    Only the lower triangle of ``G`` is read (as :func:`~ntkcheck.ntk.gram_matrix.accumulate.accumulate`
    fills it). A Fortran-ordered ``G`` is factorised in place and restored: on return its lower
    triangle and diagonal hold ``G`` again and its strict upper triangle holds the mirror image."""
    if not G.flags.f_contiguous:
        G = np.asfortranarray(G)
    work = SymmetricWork(G)
    try:
        pairs = _extremal_pairs(work)
    finally:
        work.restore()
    if pairs is None:
        return None
    return pairs[0].value, pairs[1].value


def svd_seconds(shape: tuple[int, ...]) -> float:
    """Estimated seconds of the singular values of a matrix of ``shape`` (:func:`ntkcheck._budget.dense_seconds`)."""
    m, k = min(shape), max(shape)
    return _budget.dense_seconds(4.0 * m * m * k, _budget.SVDVALS)


def _svd_eigenvalues(F: np.ndarray) -> np.ndarray:
    """All ``M`` eigenvalues of ``F F^T``, ascending, as the squared singular values of ``F``.

    ``F F^T`` is never formed, so relative eigenvalues down to ~1e-26 are resolved (the
    ``eigvalsh`` of the formed Gram stops at ~1e-13)."""
    M = F.shape[0]
    _budget.require(partial(svd_seconds, F.shape), "the SVD of F")
    s = _budget.run(partial(sla.svdvals, F, check_finite=False), "the SVD of F")
    ev = np.zeros(M)
    ev[M - s.shape[0]:] = np.sort(s) ** 2  # min(M, Hd) singular values; the rest are exact zeros
    return ev
