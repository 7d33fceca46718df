r"""The result of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`: :class:`GramResult` and its report lines.

The last step of the pipeline (:func:`gram_result`): the float64 spectrum (:mod:`ntkcheck.ntk.gram_matrix.spectrum`)
with ``lambda_min`` clipped at 0 (rounding can make it negative), the status it supports, changed by
the certificate when there is one (:func:`status_with_certificate`: ``"positive"`` when it proves
positivity, ``"singular"`` when it proves singularity exactly), the notes saying how the samples
entered and which fallbacks ran, and, with ``keep_matrix``, the Gram itself and an orthonormal basis
of its observed kernel.

References: seed 003 section 3.1-3.2, Prop. 5; ``theory/ntk-prop8.md`` ("The finite-token Gram matrix").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ... import _budget
from ..._records import restore
from ...independence.results import no_truth_value
from ..certificate.routes import GramCertificate
from .problem import GramProblem, SampleSize
from .spectrum import POSITIVE_REL, Spectrum

__all__ = ["GramResult", "gram_result", "status_with_certificate"]


@dataclass(frozen=True)
class GramResult:
    r"""Spectrum summary of the NTK Gram :math:`W^{1/2} K W^{1/2} = F F^T` on distinct atoms.

    Attributes
    ----------
    lambda_min, lambda_max : float
        Extreme eigenvalues (float64; ``lambda_min`` is clipped at 0, rounding can make it
        slightly negative).
    lambda_min_tolerance, lambda_max_tolerance : float or None
        How far an eigenvalue of the float64 Gram may be from the reported value.
        ``"cholesky-lanczos"``: the residual bound :math:`\|\hat G v - \theta v\|` of the Ritz
        vector plus its rounding (proved: an eigenvalue of the float64 Gram lies within it);
        ``"eigvalsh"``, ``"svd"``: LAPACK's backward error, taken as ``M u lambda_max`` (for the
        SVD, through ``sigma^2``), an estimate. The exact Gram differs from the float64 one by the
        certificate's radius (``certify=True``).
    condition : float
        ``lambda_max / lambda_min`` (``inf`` when ``lambda_min == 0``).
    atoms : int
        ``M``, the size of the Gram: distinct atoms summed over the samples.
    tokens : int
        Tokens given (``>= atoms``; repeats inside a sample are merged).
    heads, dim : int
        ``H``, ``d``.
    eigenvalues : tuple of float or None
        All ``M`` eigenvalues, ascending, when computed (``spectrum="full"``, or ``lambda_min``
        near the rounding floor, or the Cholesky failed) and ``M <= 4096``; else None.
    rank_deficient_by_size : bool
        ``H d < M``: singular by rank, says nothing about the data.
    method : str
        ``"cholesky-lanczos"`` (the default: Cholesky of the Gram, Lanczos on its inverse and on
        the Gram), ``"eigvalsh"`` (every eigenvalue) or ``"svd"`` (singular values of ``F``): the
        route that gave the numbers.
    resolution : float
        Relative eigenvalue below which that route cannot tell an eigenvalue from 0 (the
        rounding floor).
    status : str
        ``"positive"`` (relative ``lambda_min`` above ``1e-12``, or certified),
        ``"singular by size"``, ``"singular"`` (proved exactly: ``certified.kind ==
        "exactly-singular"``), ``"below resolution"`` (singular to working precision),
        ``"small"`` (between the resolution and ``1e-12``: not claimed positive).
    certified : GramCertificate or None
    samples : tuple of SampleSize
        Per sample: tokens, distinct atoms, largest multiplicity.
    matrix : (M, M) float array or None
        The Gram :math:`W^{1/2} K W^{1/2}` itself, kept only when asked
        (``gram(..., keep_matrix=True)``, ``M <= 4096``). Rows and columns are the distinct
        atoms, sample by sample, each sample's atoms in the order of ``Empirical.atoms``.
    kernel_vectors : (M, k) float array or None
        With ``keep_matrix=True``: an orthonormal basis of the observed kernel, the
        eigenvectors of the ``k = kernel_observed`` eigenvalues at the rounding floor
        (``k = 0`` gives shape ``(M, 0)``). Entry ``(i, a)`` is a function value at atom
        ``x_{ia}`` times :math:`\sqrt{m_{ia}}` (the ``W^{1/2}`` scaling).

    Truth value: ``bool(result)`` raises ``TypeError``; test ``.positive`` or ``.status``.
    """

    lambda_min: float
    lambda_max: float
    condition: float
    atoms: int
    tokens: int
    heads: int
    dim: int
    eigenvalues: tuple[float, ...] | None
    rank_deficient_by_size: bool
    method: str
    resolution: float
    status: str
    certified: GramCertificate | None = None
    notes: tuple[str, ...] = field(default=())
    samples: tuple[SampleSize, ...] = field(default=())
    matrix: np.ndarray | None = field(default=None, repr=False, compare=False)
    kernel_vectors: np.ndarray | None = field(default=None, repr=False, compare=False)
    lambda_min_tolerance: float | None = None
    lambda_max_tolerance: float | None = None

    # a dataclass is always truthy: ``if gram(...):`` would read a singular Gram as success
    __bool__ = no_truth_value

    @property
    def relative_lambda_min(self) -> float:
        return self.lambda_min / self.lambda_max if self.lambda_max > 0 else 0.0

    @property
    def positive(self) -> bool:
        """True only when positivity is established (float64 above 1e-12 relative, or certified)."""
        return self.status == "positive"

    @property
    def certified_positive(self) -> bool:
        """True when a rigorous lower bound (Arb) proves ``lambda_min > 0``."""
        return self.certified is not None and self.certified.positive

    def report_lines(self) -> list[str]:
        """The Gram block of the ``screen`` and ``gram`` reports: extremal eigenvalues, condition,
        status, and the certificate (how it was proved, or why it did not conclude)."""
        return _report_lines(self)

    def status_text(self) -> str:
        """The status in words, saying whether positivity is certified or only seen in float64."""
        return _status_text(self)

    @property
    def floor(self) -> float:
        """The rounding floor ``resolution * lambda_max``: eigenvalues at or below it are zero
        to working precision."""
        return self.resolution * self.lambda_max

    @property
    def kernel_observed(self) -> int | None:
        """Number of eigenvalues at the rounding floor (the observed kernel dimension); None
        when the spectrum was not kept (``M > 4096``) and ``lambda_min`` is at the floor."""
        if self.eigenvalues is None:
            return 0 if self.lambda_min > self.floor else None
        return int(sum(1 for v in self.eigenvalues if v <= self.floor))

    @property
    def next_relative_eigenvalue(self) -> float | None:
        """The smallest eigenvalue above the floor, relative to ``lambda_max`` (the gap that
        separates the observed kernel from the rest), or None."""
        if self.lambda_max <= 0:
            return None
        if self.eigenvalues is None:
            return self.relative_lambda_min if self.lambda_min > self.floor else None
        above = [v for v in self.eigenvalues if v > self.floor]
        return min(above) / self.lambda_max if above else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "lambda_min": self.lambda_min,
            "lambda_max": self.lambda_max,
            "lambda_min_tolerance": self.lambda_min_tolerance,
            "lambda_max_tolerance": self.lambda_max_tolerance,
            "relative_lambda_min": self.relative_lambda_min,
            "condition": self.condition if math.isfinite(self.condition) else "inf",
            "atoms": self.atoms,
            "tokens": self.tokens,
            "heads": self.heads,
            "dim": self.dim,
            "rank_deficient_by_size": self.rank_deficient_by_size,
            "method": self.method,
            "resolution": self.resolution,
            "status": self.status,
            "certified": None if self.certified is None else self.certified.to_dict(),
            "status_text": self.status_text(),
            "kernel_observed": self.kernel_observed,
            "floor": self.floor,
            "next_relative_eigenvalue": self.next_relative_eigenvalue,
            "samples": [s.to_dict() for s in self.samples],
            "eigenvalues": None if self.eigenvalues is None else list(self.eigenvalues),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GramResult:
        """The result from its :meth:`to_dict` (a saved ``ntkcheck gram --json`` object too; the
        matrix and kernel vectors, never written, come back as None)."""
        return restore(cls, d)

    def __repr__(self) -> str:
        s = (f"GramResult({self.status}: lambda_min={self.lambda_min:.4g}, lambda_max={self.lambda_max:.4g}, "
             f"relative={self.relative_lambda_min:.3g}, M={self.atoms} atoms ({self.tokens} tokens), H={self.heads}, "
             f"d={self.dim}, {self.method}")
        if self.certified is not None:
            s += f", {self.certified!r}"
        return s + ")"


def _report_lines(r: GramResult) -> list[str]:
    """:meth:`GramResult.report_lines`."""
    tol = "" if r.lambda_min_tolerance is None else f", +/- {r.lambda_min_tolerance:.1g}"
    unc = max(r.floor, r.lambda_min_tolerance or 0.0)
    # no six digits on a value below its own uncertainty: what float64 saw is only an order of magnitude
    shown = (f"below resolution ({unc:.1g}; float64 sees {r.lambda_min:.1g})" if abs(r.lambda_min) <= unc else
             f"{r.lambda_min:.6g}   (relative {r.relative_lambda_min:.3g}{tol})")
    out = [f"  lambda_min          {shown}",
           f"  lambda_max          {r.lambda_max:.6g}",
           f"  condition           {r.condition:.3g}   (spectrum: {r.method})",
           f"  status              {r.status_text()}"]
    c = r.certified
    if c is not None:
        out.append(f"  certificate         lambda_min >= {c.lower_bound:.4g} ({c.how})" if c.positive else
                   f"  certificate         singular ({c.how}): {c.detail}" if c.kind == "exactly-singular" else
                   f"  certificate         inconclusive ({c.how}): {c.detail}")
    return out


def _status_text(r: GramResult) -> str:
    """:meth:`GramResult.status_text`."""
    if r.certified_positive:
        assert r.certified is not None
        return f"positive, certified: lambda_min >= {r.certified.lower_bound:.4g} ({r.certified.how})"
    if r.status == "singular":
        return "singular, certified (exact rational arithmetic)"
    if r.status == "positive":
        return (f"positive in float64 (relative lambda_min {r.relative_lambda_min:.3g} > {POSITIVE_REL:g}); "
                "not certified")
    return r.status



def status_with_certificate(status: str, float64_positive: bool, cert: GramCertificate) -> tuple[str, list[str]]:
    """A Gram's status once its certificate ``cert`` is known: ``"positive"`` when it proves positivity,
    ``"singular"`` when it proves singularity exactly, else ``status`` (what float64 saw); and the
    note that says so."""
    if cert.positive:
        return "positive", [f"positivity certified ({cert.how})"]
    if cert.kind == "exactly-singular":
        return "singular", [f"singular, proved: {cert.detail}"]
    return status, [f"certification inconclusive: {cert.detail}" +
                    ("; positivity is seen in float64 only" if float64_positive else "")]


def gram_result(problem: GramProblem, spec: Spectrum, cert: GramCertificate | None, notes: list[str]) -> GramResult:
    """The :class:`GramResult` of a spectrum: ``lambda_min`` clipped at 0 (rounding can make it
    negative), the status of the spectrum changed by the certificate ``cert`` (None: not asked, or
    singular by size), the notes, and the kept matrix when asked."""
    lmin, lmax = max(spec.lmin, 0.0), spec.lmax
    status, cert_notes = (spec.status, []) if cert is None else status_with_certificate(spec.status, False, cert)
    eig = spec.eig
    eigenvalues = tuple(float(max(v, 0.0)) for v in eig) if (eig is not None and problem.full_spectrum) else None
    kept, kernel = (_kept_matrix(problem, spec.features, eigenvalues, spec.resolution * lmax)
                    if problem.options.keep_matrix else (None, None))
    return GramResult(
        lambda_min=lmin,
        lambda_max=float(lmax),
        condition=(lmax / lmin) if lmin > 0 else math.inf,
        atoms=problem.M,
        tokens=int(sum(s.tokens for s in problem.sizes)),
        heads=problem.H,
        dim=problem.d,
        eigenvalues=eigenvalues,
        rank_deficient_by_size=problem.by_size,
        method=spec.method,
        resolution=spec.resolution,
        status=status,
        certified=cert,
        notes=(*notes, *spec.notes, *cert_notes),
        samples=problem.sizes,
        matrix=kept,
        kernel_vectors=kernel,
        lambda_min_tolerance=spec.tol_min,
        lambda_max_tolerance=spec.tol_max,
    )


def _kept_matrix(problem: GramProblem, F: np.ndarray | None, eigenvalues: tuple[float, ...] | None,
                 floor: float) -> tuple[np.ndarray, np.ndarray]:
    """The Gram ``F F^T`` (exactly symmetric) and an orthonormal basis of its observed kernel."""
    if F is None:
        F = problem.features()
    kept = F @ F.T
    kept = (kept + kept.T) / 2  # exactly symmetric for eigh
    # the observed kernel: as many eigenvectors as eigenvalues at the floor (the count
    # may come from the SVD; the subspace of a cluster separated by a gap is accurate)
    k = sum(1 for v in (eigenvalues or ()) if v <= floor)
    _budget.require(partial(_eigh_seconds, F.shape[0]), "eigh of the kept Gram")
    vectors = _budget.run(partial(np.linalg.eigh, kept), "eigh of the kept Gram")[1]
    return kept, vectors[:, :k].copy()


def _eigh_seconds(n: int) -> float:
    """Estimated seconds of ``eigh`` (with vectors) of order ``n``: three ``eigvalsh``."""
    return 3 * _budget.dense_seconds(4 / 3 * n**3, _budget.EIGVALSH)
