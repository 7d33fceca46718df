r"""The attention NTK at FixUp initialisation: the assembled Gram matrix and its spectrum.

At FixUp (:math:`V = 0` on every head) the flow map is the identity and only the
:math:`V`-derivatives of the attention survive. The NTK acts on
:math:`\bigoplus_i L^2(\mu_i)`, and a sample is its empirical law
:math:`\mu_i = \sum_a m_{ia}\,\delta_{x_{ia}}` over its **distinct atoms** :math:`x_{ia}`
with masses :math:`m_{ia}` (:class:`~ntkcheck.cgf.empirical.Empirical`; a token repeated
``c`` times in a sample of ``N`` tokens is one atom of mass ``c/N``: two copies of a token
are one point of :math:`L^2(\mu_i)`). With the feature

.. math::

    \phi_i(x; Q, b) = \nabla\Lambda_i(Qx + b)
        = \sum_a \pi_a\, x_{ia}, \qquad
    \pi_a \propto m_{ia}\exp\langle Qx + b, x_{ia}\rangle

(the softmax-weighted mean of sample :math:`i`'s atoms, scores max-shifted), rows indexed by
the atoms :math:`(i, a)` with weights :math:`w_{ia} = m_{ia}`, and :math:`H` heads
:math:`(Q_h, b_h)`, the NTK Gram matrix (one copy per output coordinate) is

.. math::

    W^{1/2} K W^{1/2} = F F^T, \qquad
    F_{(i,a),\,(h,:)} = \sqrt{m_{ia}/H}\; \phi_i(x_{ia}; Q_h, b_h),

a matrix of shape ``(M, H d)``, ``M = sum_i (distinct atoms of sample i)``. Its smallest
eigenvalue is the :math:`\lambda_{\min}(\rho)` of the NTK quadratic form restricted to the
finite heads. The token-slot assembly (one row per token, weight ``1/N_i``) is
:math:`P\,F F^T P^T` with ``P`` the isometry that copies an atom's value to its slots
scaled by :math:`1/\sqrt{c}`: the same non-zero spectrum, plus one spurious zero eigenvalue
per repeated copy (the functions that differ between copies of one point are the zero
function of :math:`L^2(\mu_i)`).

Spectrum (measured in ``benchmarks/bench_gram.py``): the product ``F F^T`` runs at matmul speed
(BLAS ``syrk``, accumulated over head blocks, ``F`` never whole); the reports need
:math:`\lambda_{\min}` and :math:`\lambda_{\max}`, which a Cholesky of the Gram and Lanczos steps
give with a stated tolerance (:mod:`ntkcheck.ntk.gram_matrix.extremal`) at a fraction of ``eigvalsh``'s cost.
The full spectrum is computed when asked (``spectrum="full"``), when ``lambda_min`` is near the
rounding floor (the observed kernel is counted there) and when the Cholesky fails. ``eigvalsh``
cannot resolve relative eigenvalues below ~1e-13, the SVD of ``F`` resolves them down to ~1e-28:
``method="auto"`` falls back to it when the relative :math:`\lambda_{\min}` falls below ``1e-10``.
Positivity is never claimed from a float64 number below ``1e-12`` relative: that needs
``certify=True`` (a rigorous lower bound: :mod:`ntkcheck.ntk.certificate.routes`), which reuses the pass
over the heads, the Cholesky and the Lanczos estimate (:mod:`ntkcheck.ntk.gram_matrix.route`).

The heads and the feature builder live in :mod:`ntkcheck.ntk.gram_matrix.features`, the Arb
certificate in :mod:`ntkcheck.ntk.certificate.routes`, the BLAS and Lanczos steps of :func:`gram` in
:mod:`ntkcheck.ntk.gram_matrix._steps` and :mod:`ntkcheck.ntk.gram_matrix.extremal`, their routing in
:mod:`ntkcheck.ntk.gram_matrix.route`.

References: seed 003 section 3.1-3.2, Prop. 5 (positivity of the NTK <=> injectivity of
``G``); ``theory/ntk-prop8.md`` ("The finite-token Gram matrix").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from ... import _budget
from ..._records import restore
from ..._validate import as_budget
from ...cgf import Empirical, as_laws
from ...errors import InputError, NtkcheckWarning
from ...independence.results import no_truth_value
from ..certificate.inputs import rounded_inputs, status_with_certificate
from ..certificate.routes import GramCertificate, certify_positive
from . import _sizes, route
from ._steps import (  # noqa: F401  (_extremal_eigh, _gram_accumulated, _gram_lower: imported from here)
    POSITIVE_REL,
    RESOLUTION_EIGH,
    RESOLUTION_SVD,
    SVD_MEMORY_LIMIT,
    SampleSize,
    _drawn_or_checked_heads,
    _extremal_eigh,
    _gram_accumulated,
    _gram_lower,
    _GramInputs,
    _kept_matrix,
    _Spectrum,
    certificate_within_budget,
    spectrum_within_budget,
)
from .features import _GRAM_BLOCK as _FEATURE_GRAM_BLOCK
from .features import (  # noqa: F401  (init_heads: used by the doctest of gram)
    DEFAULT_CHUNK,
    Heads,
    _as_chunk,
    _atom_count,
    init_heads,
)

__all__ = [
    "GramResult",
    "gram",
    "gram_certificate",
    "certify_result",
    "SampleSize",
    "merge_note",
    "RESOLUTION_EIGH",
    "RESOLUTION_SVD",
    "POSITIVE_REL",
]

#: full spectrum returned up to this many distinct atoms (rows of the Gram).
MAX_EIGENVALUES = 4096
#: entries of one column block of F in the accumulated Gram (256 MiB; see features._head_block).
_GRAM_BLOCK = _FEATURE_GRAM_BLOCK


# ------------------------------------------------------------------------------ result


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


def spectrum_status(lmin: float, lmax: float, *, by_size: bool, resolution: float) -> str:
    """:attr:`GramResult.status` from the extremal eigenvalues: ``"singular by size"`` when
    ``H d < M``, ``"positive"`` above ``POSITIVE_REL`` relative, ``"below resolution"`` under the
    route's ``resolution``, ``"small"`` in between."""
    rel = lmin / lmax if lmax > 0 else 0.0
    if by_size:
        return "singular by size"
    if rel > POSITIVE_REL:
        return "positive"
    return "below resolution" if rel < resolution else "small"


@certificate_within_budget  # a step that would not fit in the time budget: "not certified (time budget spent)"
def gram_certificate(laws: Sequence[Empirical], heads: Heads, *, float64_positive: bool, max_bits: int = 2048,
                     progress: bool = False, chunk: int = DEFAULT_CHUNK) -> GramCertificate:
    """A rigorous lower bound on ``lambda_min`` of the Gram by the cheapest sound route, or why not.

    A Gram float64 sees positive goes first to the verified Cholesky of the Gram accumulated over
    head blocks (:func:`~ntkcheck.ntk.certificate.routes.certify_positive`, ``O(M^3)``, any ``M``); when
    that refuses, or float64 did not see it positive, and ``M <= MAX_CERTIFY_TOKENS``, to the
    preconditioned bound on ``sigma_min(F)`` or Arb (:func:`~ntkcheck.ntk.certificate.routes.certify_lambda_min`).
    Beyond that size a Gram below float64's resolution is refused ("below resolution at M = ...").
    Every bound is about the values given (tokens or heads that are not doubles: a float64 bound
    counts only through the proved effect of their rounding, else it is kept as ``evidence``;
    :mod:`ntkcheck.ntk.certificate.inputs`). When nothing certifies, an exact proof of singularity is tried
    (:func:`~ntkcheck.ntk.certificate.inputs.exactly_singular`: ``kind="exactly-singular"``).
    """
    pc = certify_positive(laws, heads, arb=False, progress=progress, chunk=chunk) if float64_positive else None
    M = _atom_count(laws)
    g = _GramInputs(list(laws), heads, chunk, progress, (), M, M <= MAX_EIGENVALUES)
    return route.after_positivity(g, pc, max_bits)


def certify_result(laws: Sequence[Empirical], heads: Heads, g: GramResult, *, max_bits: int = 2048,
                   progress: bool = False, chunk: int = DEFAULT_CHUNK) -> GramResult:
    """``g`` with its certificate (:func:`gram_certificate`): ``status`` becomes ``"positive"``
    when it proves positivity; a Gram singular by size or already certified is returned as is."""
    if g.rank_deficient_by_size or g.certified is not None:
        return g
    cert = gram_certificate(laws, heads, float64_positive=g.positive, max_bits=max_bits, progress=progress, chunk=chunk)
    status, notes = status_with_certificate(g.status, g.positive, cert)
    return replace(g, certified=cert, status=status, notes=(*g.notes, *notes))


# ----------------------------------------------------------------------- steps of gram


def _gram_inputs(samples: Any, heads: Any, *, q_scale: float, b_scale: float,
                 dist: Literal["gaussian", "uniform"], seed: int, keep_matrix: bool, method: str,
                 progress: bool, chunk: Any, spectrum: str = "extremal") -> _GramInputs:
    """The arguments of :func:`gram` validated and normalised: the samples, the heads (drawn
    from the init law when counted), ``method``, ``spectrum``, ``chunk``, then the ``keep_matrix``
    size limit, in that order, so that the first bad argument is the one reported."""
    laws = as_laws(samples)
    _sizes.require_drawn_gram(laws, heads)  # a count of heads: heads and Gram estimated before drawing
    heads = _drawn_or_checked_heads(heads, laws[0].dim, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed)
    if method not in ("auto", "svd", "eigh"):
        raise InputError(f"method: expected 'auto', 'svd' or 'eigh', got {method!r}")
    if spectrum not in ("extremal", "full"):
        raise InputError(f"spectrum: expected 'extremal' or 'full', got {spectrum!r}")
    chunk = _as_chunk(chunk)
    sizes = tuple(SampleSize.of(law) for law in laws)
    M = _atom_count(laws)
    _sizes.check_gram_range(laws)
    _sizes.require_gram(M, heads.count, heads.dim)
    if keep_matrix and M > MAX_EIGENVALUES:
        raise InputError(f"keep_matrix: the Gram is kept only up to {MAX_EIGENVALUES} distinct atoms, got M = {M}")
    return _GramInputs(laws, heads, chunk, progress, sizes, M, full_spectrum=M <= MAX_EIGENVALUES,
                       want_full=spectrum == "full" or keep_matrix)


def _size_notes(g: _GramInputs) -> list[str]:
    """Notes on how the samples entered the Gram: merged repeated tokens, and a rank deficit
    ``H d < M``, also warned about since it is not a verdict about the data."""
    notes: list[str] = []
    if (merged := merge_note(g.sizes)) is not None:
        notes.append(merged)
    if (which := rounded_inputs(g.laws, g.heads)) is not None:
        notes.append(f"{which}: the spectrum is that of their nearest doubles; a certificate counts only for "
                     "the values given (theory/certificates.md)")
    if g.by_size:
        H, d, M = g.heads.count, g.heads.dim, g.atoms
        warnings.warn(
            f"H d = {H}*{d} = {H * d} < M = {M} distinct atoms: the Gram has rank at most {H * d} and is "
            "singular by rank; this is not a verdict about the data (use at least "
            f"{math.ceil(M / d)} heads)",
            NtkcheckWarning,
            stacklevel=3,  # called from gram: the warning names gram's caller
        )
        notes.append(f"singular by rank: H d = {H * d} < M = {M}")
    return notes


def _certified_status(g: _GramInputs, spec: _Spectrum, fac: route.Factored | None, *, certify: bool,
                      max_bits: int) -> tuple[str, GramCertificate | None, list[str]]:
    """The status of the spectrum (:func:`spectrum_status`) and, with ``certify``, the certificate
    (:func:`gram_certificate`, on the pass ``fac`` already made when there is one; none for a Gram
    singular by size), which may make it "positive"."""
    status = spectrum_status(max(spec.lmin, 0.0), spec.lmax, by_size=g.by_size, resolution=spec.resolution)
    if not certify or g.by_size:
        return status, None, []
    if fac is None:  # the "svd" route made no pass over the heads
        cert = gram_certificate(g.laws, g.heads, float64_positive=status == "positive", max_bits=max_bits,
                                progress=g.progress, chunk=g.chunk)
    else:
        cert = route.certificate(g, fac, spec, float64_positive=status == "positive", max_bits=max_bits)
    new_status, notes = status_with_certificate(status, False, cert)
    return new_status, cert, notes


def _gram_result(g: _GramInputs, spec: _Spectrum, fac: route.Factored | None, notes: list[str], *, certify: bool,
                 max_bits: int, keep_matrix: bool) -> GramResult:
    """The :class:`GramResult` of a spectrum: ``lambda_min`` clipped at 0 (rounding can make it
    negative), the status, certified when asked, and the kept matrix when asked."""
    lmin, lmax = max(spec.lmin, 0.0), spec.lmax
    status, cert, cert_notes = _certified_status(g, spec, fac, certify=certify, max_bits=max_bits)
    del fac  # the work array (the M x M Gram) is no longer needed
    eig = spec.eig
    eigenvalues = tuple(float(max(v, 0.0)) for v in eig) if (eig is not None and g.full_spectrum) else None
    kept, kernel = (_kept_matrix(g, spec.features, eigenvalues, spec.resolution * lmax) if keep_matrix
                    else (None, None))
    return GramResult(
        lambda_min=lmin,
        lambda_max=float(lmax),
        condition=(lmax / lmin) if lmin > 0 else math.inf,
        atoms=g.atoms,
        tokens=int(sum(s.tokens for s in g.sizes)),
        heads=g.heads.count,
        dim=g.heads.dim,
        eigenvalues=eigenvalues,
        rank_deficient_by_size=g.by_size,
        method=spec.method,
        resolution=spec.resolution,
        status=status,
        certified=cert,
        notes=(*notes, *cert_notes),
        samples=g.sizes,
        matrix=kept,
        kernel_vectors=kernel,
        lambda_min_tolerance=spec.tol_min,
        lambda_max_tolerance=spec.tol_max,
    )


def gram(
    samples: Any,
    heads: int | Heads,
    *,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    dist: Literal["gaussian", "uniform"] = "gaussian",
    seed: int = 0,
    keep_matrix: bool = False,
    certify: bool = False,
    method: Literal["auto", "svd", "eigh"] = "auto",
    progress: bool = False,
    chunk: int = DEFAULT_CHUNK,
    max_bits: int = 2048,
    spectrum: Literal["extremal", "full"] = "extremal",
    time_budget: float | None = None,
) -> GramResult:
    r"""Spectrum of the attention NTK Gram at FixUp on the samples' distinct atoms.

    .. math::

        W^{1/2} K W^{1/2} = F F^T, \qquad
        K_{(ia),(i'a')} = \frac1H \sum_h \langle \phi_i(x_{ia}; Q_h, b_h), \phi_{i'}(x_{i'a'}; Q_h, b_h)\rangle,
        \quad W = \mathrm{diag}(m_{ia}),

    the matrix of the NTK quadratic form on :math:`\bigoplus_i L^2(\mu_i)` (one row per
    distinct atom :math:`x_{ia}` with its mass :math:`m_{ia}`; :func:`attention_features`).

    Parameters
    ----------
    samples : list of Empirical, list of (N_i, d) float arrays, or (n, N, d) array
        Arrays are turned into laws once (:func:`~ntkcheck.cgf.empirical.as_laws`): repeated
        tokens of a sample become one atom with their summed mass.
    heads : int or Heads
        Explicit heads, or a head count ``H`` drawn by :func:`init_heads` from
        ``q_scale``, ``b_scale``, ``dist`` and ``seed`` (as :func:`ntkcheck.screen` does).
    q_scale, b_scale, dist, seed
        The init law of the drawn heads; ignored when ``heads`` is a ``Heads``.
    keep_matrix : bool
        Keep the ``(M, M)`` Gram and an orthonormal basis of its observed kernel in the
        result (``GramResult.matrix``, ``GramResult.kernel_vectors``): ``8 M^2`` bytes more
        and one ``eigh``; only for ``M <= 4096`` distinct atoms.
    certify : bool
        Attach a certificate (:func:`gram_certificate`): a rigorous lower bound on ``lambda_min``
        by the cheapest sound route, or the reason there is none. Without it, positivity is only
        what float64 saw (``certified_positive`` is False). It reuses the pass over the heads,
        the Cholesky and the Lanczos estimate: one more Cholesky in the common case.
    method : {"auto", "svd", "eigh"}
        ``"auto"``: the Gram ``F F^T`` accumulated over head blocks (``F`` never stored), its
        Cholesky and Lanczos steps for ``lambda_min`` and ``lambda_max`` (each with a residual
        tolerance), ``eigvalsh`` where the full spectrum is needed (``spectrum``), and the SVD of
        ``F`` as fallback below relative ``1e-10``; ``"svd"``: always ``svdvals(F)``; ``"eigh"``:
        never the SVD.
    spectrum : {"extremal", "full"}
        ``"extremal"``: ``lambda_min`` and ``lambda_max`` only, plus every eigenvalue when the
        report needs the observed kernel (``lambda_min`` near the rounding floor, or the
        Cholesky fails); ``"full"``: every eigenvalue (``GramResult.eigenvalues``, for
        ``M <= 4096``), by ``eigvalsh``.
    chunk : int
        Tile workspace bound of :func:`attention_features` (float64 entries). Peak memory
        of ``"auto"``: ``8 M^2`` bytes (the Gram; its Cholesky factor and the Lanczos steps share
        the array) plus one column block of ``F`` of at most ``8 max(2^25, 256 M)`` bytes, plus
        ``eigvalsh``'s copy when the full spectrum is computed (plus the SVD fallback's
        ``8 M H d`` if it is needed and fits in 4 GiB). ``M`` counts distinct atoms.
    time_budget : float, Budget or None
        Seconds for the call (None: none of its own, an enclosing screen's or command's applies): a certificate
        cut short is "not certified (time budget spent)"; a spectrum that cannot finish raises TimeBudgetError.

    Returns
    -------
    GramResult

    Warns
    -----
    NtkcheckWarning
        When ``H d < M``: the Gram is singular by rank, which is not a verdict about the data.

    References
    ----------
    Seed 003 (Training Infinitely Deep and Wide Transformers) section 3.1-3.2, Prop. 5;
    ``theory/ntk-prop8.md``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.standard_normal((3, 2)) for _ in range(3)]
    >>> X[0][2] = X[0][0]                     # a repeated token: one atom of mass 2/3
    >>> r = gram(X, init_heads(18, 2, seed=0))
    >>> r.status, r.atoms, r.tokens
    ('positive', 8, 9)
    >>> r = gram(X, 18, seed=0, keep_matrix=True)   # the same heads, drawn here
    >>> r.matrix.shape, r.kernel_vectors.shape
    ((8, 8), (8, 0))
    """
    g = _gram_inputs(samples, heads, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed,
                     keep_matrix=keep_matrix, method=method, progress=progress, chunk=chunk, spectrum=spectrum)
    notes = _size_notes(g)
    with _budget.scope(as_budget(time_budget)):
        spec, spectrum_notes, fac = spectrum_within_budget(lambda: route.spectrum(g, method, certify), g.atoms)
        return _gram_result(g, spec, fac, notes + spectrum_notes, certify=certify, max_bits=max_bits,
                            keep_matrix=keep_matrix)
