r"""The route of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`: one pass over the heads, then the spectrum
the report needs, then (``certify``) the certificate on the same array.

1. **One pass** (:func:`~ntkcheck.ntk.certificate.rounding.enclosed_gram`): the features, head block by head
   block, each block's ``syrk`` into the one ``M x M`` Gram and, when a certificate is asked for,
   the error terms of the certificate (the ``|F||F|^T`` bound, the feature radii). ``F`` is never
   whole.
2. **Extremal eigenvalues** (:mod:`ntkcheck.ntk.gram_matrix.extremal`): a Cholesky of the Gram in place, Lanczos
   on its inverse for :math:`\lambda_{\min}` and on the Gram for :math:`\lambda_{\max}`, each with
   its residual tolerance. No ``eigvalsh``.
3. **The small-eigenvalue cluster only when the report needs it**: the full ``eigvalsh`` (up to
   ``MAX_EIGENVALUES`` atoms) when asked (``spectrum="full"``, ``keep_matrix``), when the Cholesky
   fails, or when :math:`\lambda_{\min}` may be within a factor ``NEAR_FLOOR`` of the rounding
   floor (where the observed kernel is counted); above ``MAX_EIGENVALUES`` a Cholesky of
   :math:`\hat G + \sigma I` and Lanczos give the cluster instead. The SVD of ``F`` (recomputed)
   when the relative :math:`\lambda_{\min}` is below ``eigvalsh``'s resolution.
4. **Certificate at float cost** (:func:`certificate`): Rump's criterion on the same array, from the
   Lanczos estimate of step 2 (:func:`~ntkcheck.ntk.certificate.routes.certify_factored`): one more Cholesky
   in the common case, no second pass.

References: ``theory/certificates.md`` (certified positivity at scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ... import _budget
from ..._progress import progress_bar
from ..certificate import rounding as rnd
from ..certificate.inputs import exactly_singular
from ..certificate.routes import (
    MAX_CERTIFY_TOKENS,
    GramCertificate,
    PositivityCertificate,
    _certify,
    _positivity_for_values_given,
    certify_factored,
)
from ._steps import (
    RESOLUTION_EIGH,
    RESOLUTION_SVD,
    SVD_MEMORY_LIMIT,
    _extremal_pairs,
    _GramInputs,
    _Spectrum,
    _svd_eigenvalues,
    certificate_within_budget,
    svd_seconds,
)
from .extremal import RitzPair, largest, smallest_cluster

#: the full spectrum is computed when lambda_min - its tolerance is within this factor of the floor
NEAR_FLOOR = 4.0
#: eigenpairs computed for the cluster near zero above MAX_EIGENVALUES atoms
CLUSTER = 16


@dataclass(eq=False)
class Factored:
    """The Gram of the pass in its work array, with what the certificate reuses: the enclosure
    (its radius is ``inf`` when no bound was asked for) and the Lanczos :math:`\\lambda_{\\min}`."""

    work: rnd.SymmetricWork
    enclosure: rnd.GramEnclosure
    small: RitzPair | None = None


def _svd_spectrum(g: _GramInputs, F: np.ndarray | None) -> _Spectrum:
    """The spectrum from the SVD of ``F`` (formed here unless given). Tolerance: the singular
    values' backward error ``M u sigma_max`` squared through (not a proof)."""
    if F is None:
        F = g.features()
    eig = _svd_eigenvalues(F)
    lmin, lmax = float(eig[0]), float(eig[-1])
    e = F.shape[0] * rnd.U * math.sqrt(max(lmax, 0.0))
    tol_min = 2.0 * e * math.sqrt(max(lmin, 0.0)) + e * e
    return _Spectrum(eig, lmin, lmax, "svd", RESOLUTION_SVD, F, tol_min, 2.0 * e * math.sqrt(max(lmax, 0.0)) + e * e)


def _full_spectrum(work: rnd.SymmetricWork) -> _Spectrum:
    """Every eigenvalue by ``eigvalsh`` (on a copy: the work array keeps the Gram for the
    certificate). Tolerance: LAPACK's backward error, taken as ``M u lambda_max`` (not a proof)."""
    work.restore()
    _budget.require(lambda: _budget.dense_seconds(4 / 3 * work.n**3, _budget.EIGVALSH), "eigvalsh of the Gram")
    eig = _budget.run(lambda: np.linalg.eigvalsh(work.A, UPLO="L"), "eigvalsh of the Gram")
    lmin, lmax = float(eig[0]), float(eig[-1])
    tol = work.n * rnd.U * abs(lmax)
    return _Spectrum(eig, lmin, lmax, "eigvalsh", RESOLUTION_EIGH, None, tol, tol)


def _near_floor(small: RitzPair, big: RitzPair) -> bool:
    """Whether :math:`\\lambda_{\\min}` may be within ``NEAR_FLOOR`` of the rounding floor."""
    return small.value - small.tolerance <= NEAR_FLOOR * RESOLUTION_EIGH * big.value


def _cluster(work: rnd.SymmetricWork, big: RitzPair) -> tuple[RitzPair, RitzPair] | None:
    r"""The smallest eigenpair of a Gram whose Cholesky failed, above ``MAX_EIGENVALUES`` atoms:
    Cholesky of :math:`\hat G + \sigma I` (:math:`\sigma` ten times the rounding floor, above the
    rounding of any Gram) and Lanczos on its inverse for the ``CLUSTER`` smallest pairs; the
    smallest Rayleigh quotient on :math:`\hat G` with its tolerance. None when even that fails."""
    sigma = 10.0 * RESOLUTION_EIGH * big.value
    if work.factor(-sigma) is None:
        return None
    pairs = smallest_cluster(work, CLUSTER)
    return (pairs[0], big) if pairs else None


def spectrum(g: _GramInputs, method: str, certify: bool) -> tuple[_Spectrum, list[str], Factored | None]:
    """The spectrum by ``method`` (see the module docstring), the notes saying which fallback ran,
    and the factored Gram the certificate reuses (None on the ``"svd"`` route)."""
    if method == "svd":
        return _svd_spectrum(g, None), [], None
    enc = rnd.enclosed_gram(g.laws, g.heads, g.chunk, g.progress, bound=certify and not g.by_size)
    M = g.atoms
    with progress_bar(3, desc="spectrum: Cholesky + Lanczos", unit="step", enabled=g.progress) as bar:
        bar.set_postfix_str(f"G {8 * M * M / 1e9:.2f} GB in place: mirror")
        fac = Factored(rnd.SymmetricWork(enc.G), enc)
        del enc  # the work array is the Gram
        bar.update(1)
        bar.set_postfix_str(f"G {8 * M * M / 1e9:.2f} GB in place: Cholesky, Lanczos")
        pairs = None if g.by_size else _extremal_pairs(fac.work)
        bar.update(1)
        full = pairs is None or (g.want_full and g.full_spectrum) or _near_floor(*pairs)
        notes: list[str] = []
        if full and not g.full_spectrum and not g.by_size:
            # above MAX_EIGENVALUES: the cluster near zero, not a full eigvalsh
            if pairs is None and (pairs := _cluster(fac.work, largest(fac.work))) is not None:
                notes.append(f"the Cholesky of the Gram failed (lambda_min at the rounding floor): lambda_min from "
                             f"Lanczos on (G + sigma I)^-1, sigma = {10 * RESOLUTION_EIGH:g} lambda_max")
            full = pairs is None
        if pairs is not None:
            fac.small = pairs[0]
        bar.set_postfix_str("eigvalsh" if full else "done")
        spec = (_full_spectrum(fac.work) if full else
                _Spectrum(None, pairs[0].value, pairs[1].value, "cholesky-lanczos", RESOLUTION_EIGH, None,
                          pairs[0].tolerance, pairs[1].tolerance))
        bar.update(1)
    if method == "auto" and not g.by_size and spec.lmax > 0 and spec.lmin / spec.lmax < RESOLUTION_EIGH:
        if not _budget.fits(lambda: svd_seconds((g.atoms, g.heads.count * g.heads.dim))):
            return spec, [*notes, "lambda_min below the eigvalsh resolution; the SVD of F skipped: it would not "
                          "fit in the time budget"], fac
        if 8 * g.atoms * g.heads.count * g.heads.dim <= SVD_MEMORY_LIMIT:
            return (_svd_spectrum(g, None),
                    ["eigvalsh could not resolve lambda_min (relative < 1e-10): recomputed from the SVD of F"], fac)
        notes.append("lambda_min below the eigvalsh resolution and F too large for the SVD fallback")
    return spec, notes, fac


def after_positivity(g: _GramInputs, pc: PositivityCertificate | None, max_bits: int) -> GramCertificate:
    """The certificate once the verified Cholesky has run (``pc``, already a statement about the values
    given; None when float64 did not see the Gram positive): its bound, else the preconditioned or Arb
    route up to ``MAX_CERTIFY_TOKENS`` (on the values given); a float64 bound that does not carry over
    to them stays as ``evidence``; when nothing certifies, an exact proof of singularity is tried
    (:func:`~ntkcheck.ntk.certificate.inputs.exactly_singular`)."""
    refused, seen = "", None
    if pc is not None:
        if pc.positive:
            return GramCertificate(pc.method, pc.lower_bound, 53, pc.statement, inputs_rounded=pc.inputs_rounded,
                                   shift=pc.shift)
        refused = f"{pc.statement}; "
        if pc.evidence is not None:
            seen = GramCertificate(pc.evidence.method, pc.evidence.lower_bound, 53, pc.evidence.statement)
    M = g.atoms
    if M <= MAX_CERTIFY_TOKENS:
        cert = _certify(g.laws, g.heads, max_bits=max_bits)
    else:
        cert = GramCertificate("inconclusive", None, 53, f"{refused}the routes below float64's resolution stop at "
                               f"M = {MAX_CERTIFY_TOKENS} (below resolution at M = {M})")
    if cert.positive:
        return cert
    if seen is not None and cert.evidence is None:
        cert = replace(cert, detail=f"{refused}{cert.detail}", inputs_rounded=True, evidence=seen)
    proof = exactly_singular(g.laws, g.heads)
    return cert if proof is None else GramCertificate("exactly-singular", None, 0, proof[0], cert.inputs_rounded,
                                                      cert.evidence, atoms=proof[1])


@certificate_within_budget  # a step that would not fit in the time budget: "not certified (time budget spent)"
def certificate(g: _GramInputs, fac: Factored, spec: _Spectrum, *, float64_positive: bool,
                max_bits: int) -> GramCertificate:
    """:func:`~ntkcheck.ntk.gram_matrix.pipeline.gram_certificate` on the pass already made: the verified
    Cholesky runs on ``fac``'s array from its Lanczos estimate (no second product)."""
    pc = None
    if float64_positive:
        enc = fac.enclosure
        if enc.why is not None:
            pc = PositivityCertificate(False, None, "refused", enc.why, None, None, g.atoms)
        else:
            lam = fac.small.value if fac.small is not None else spec.lmin
            # proved for the Gram of the float64 view: a statement about the values given only through
            # the proved effect of their rounding (ntk/_inputs.py), else kept as evidence
            pc = _positivity_for_values_given(g.laws, g.heads, certify_factored(fac.work, lam, enc.radius, g.progress))
    return after_positivity(g, pc, max_bits)
