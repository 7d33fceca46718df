r"""The certificate of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`: the cheapest sound route first.

1. A Gram float64 sees positive goes first to the **verified Cholesky** (Rump's criterion, Weyl's
   inequality; :func:`~ntkcheck.ntk.certificate.routes.certify_factored`) on the pass over the heads
   already made: the work array of the spectrum step holds :math:`\hat G` and its factor, the
   Lanczos estimate of :math:`\lambda_{\min}` chooses the shift, the radius of the accumulated Gram
   comes from :func:`~ntkcheck.ntk.certificate.rounding.gram_radius`: one more Cholesky in the common
   case, no second pass (``O(M^3)``, any ``M``). Without a pass (the ``"svd"`` route, or a result
   certified after the fact) the verified Cholesky makes its own
   (:func:`~ntkcheck.ntk.certificate.routes.verified_cholesky`).
2. When that refuses, or float64 did not see the Gram positive, and ``M <= MAX_CERTIFY_TOKENS``:
   the **preconditioned** bound on :math:`\sigma_{\min}(F)` or **Arb**
   (:func:`~ntkcheck.ntk.certificate.routes.certify_lambda_min`). Beyond that size a Gram below
   float64's resolution is refused ("below resolution at M = ...").
3. When nothing certifies, an **exact proof of singularity** is tried
   (:func:`~ntkcheck.ntk.certificate.inputs.exactly_singular`: ``kind="exactly-singular"``).

Every bound is about the values given (tokens or heads that are not doubles: a float64 bound
counts only through the proved effect of their rounding, else it is kept as ``evidence``;
:mod:`ntkcheck.ntk.certificate.inputs`). The whole step runs in a stoppable scope of the time
budget: a step that would not fit is not started, and a budget spent gives "not certified (time
budget spent)" with the stage, never a bound it did not finish.

References: seed 003 Prop. 5; ``theory/certificates.md`` (certified positivity at scale).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ... import _budget
from ..gram_matrix.cholesky import SymmetricWork
from ..gram_matrix.problem import GramProblem
from .inputs import exactly_singular
from .rounding import gram_radius
from .routes import (
    MAX_CERTIFY_TOKENS,
    GramCertificate,
    PositivityCertificate,
    _certify,
    _positivity_for_values_given,
    _refused,
    certify_factored,
    verified_cholesky,
)

__all__ = ["certify_gram", "certificate_within_budget", "TIME_SPENT"]

#: how a certificate cut short by the time budget begins its detail
TIME_SPENT = "not certified (time budget spent)"


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


@certificate_within_budget  # a step that would not fit in the time budget: "not certified (time budget spent)"
def certify_gram(problem: GramProblem, *, float64_positive: bool, work: SymmetricWork | None = None,
                 lam: float | None = None) -> GramCertificate:
    """A rigorous lower bound on ``lambda_min`` of the Gram of ``problem`` by the cheapest sound route,
    or why not (the module docstring). ``work`` and ``lam``: the work array of the float path (the
    Gram of its pass and its factor) and its estimate of :math:`\\lambda_{\\min}`; without them the
    verified Cholesky makes its own pass."""
    pc = _cholesky_on_the_pass(problem, work, lam) if float64_positive else None
    return _after_positivity(problem, pc)


def _cholesky_on_the_pass(problem: GramProblem, work: SymmetricWork | None, lam: float | None) -> PositivityCertificate:
    """Rump's criterion on ``work`` from the estimate ``lam`` (or, without a pass, on a pass made for
    it), as a statement about the values given. The radius of the Gram comes from its diagonal, which
    the work array saved before any factorisation (:func:`~ntkcheck.ntk.certificate.rounding.gram_radius`)."""
    if work is None or lam is None:
        return verified_cholesky(problem)
    r = gram_radius(problem, work.diag)
    if r.why is not None:
        return _refused(problem.M, r.why, None, None)
    # proved for the Gram of the float64 view: a statement about the values given only through
    # the proved effect of their rounding (certificate/inputs.py), else kept as evidence
    return _positivity_for_values_given(problem, certify_factored(work, lam, r.radius, problem.progress))


def _after_positivity(problem: GramProblem, pc: PositivityCertificate | None) -> GramCertificate:
    """The certificate once the verified Cholesky has run (``pc``, already a statement about the values
    given; None when float64 did not see the Gram positive): its bound, else the preconditioned or Arb
    route up to ``MAX_CERTIFY_TOKENS`` (on the values given); a float64 bound that does not carry over
    to them stays as ``evidence``; when nothing certifies, an exact proof of singularity is tried."""
    refused, seen = "", None
    if pc is not None:
        if pc.positive:
            return GramCertificate(pc.method, pc.lower_bound, 53, pc.statement, inputs_rounded=pc.inputs_rounded,
                                   shift=pc.shift)
        refused = f"{pc.statement}; "
        if pc.evidence is not None:
            seen = GramCertificate(pc.evidence.method, pc.evidence.lower_bound, 53, pc.evidence.statement)
    M = problem.M
    if M <= MAX_CERTIFY_TOKENS:
        cert = _certify(problem, max_bits=problem.options.max_bits)
    else:
        cert = GramCertificate("inconclusive", None, 53, f"{refused}the routes below float64's resolution stop at "
                               f"M = {MAX_CERTIFY_TOKENS} (below resolution at M = {M})")
    if cert.positive:
        return cert
    if seen is not None and cert.evidence is None:
        cert = replace(cert, detail=f"{refused}{cert.detail}", inputs_rounded=True, evidence=seen)
    proof = exactly_singular(problem.laws, problem.heads)
    return cert if proof is None else GramCertificate("exactly-singular", None, 0, proof[0], cert.inputs_rounded,
                                                      cert.evidence, atoms=proof[1])
