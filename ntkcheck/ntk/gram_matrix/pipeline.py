r"""The attention NTK at FixUp initialisation: :func:`gram`, a pipeline read top-down.

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

:func:`gram` is one pipeline, each step in the module named after it and called once:

1. **problem** (:mod:`ntkcheck.ntk.gram_matrix.problem`): the samples and heads validated once into
   a :class:`~ntkcheck.ntk.gram_matrix.problem.GramProblem` (laws, heads, sizes, rounding facts,
   options; the one token range check);
2. **features -> accumulated Gram** (:mod:`ntkcheck.ntk.gram_matrix.accumulate`): one pass over
   the heads, block by block, the features (:mod:`ntkcheck.ntk.gram_matrix.features`) and a ``syrk``
   into the ``M x M`` Gram (``F`` never whole), with the certificate's error terms when it is asked for;
3. **spectrum** (:mod:`ntkcheck.ntk.gram_matrix.spectrum`): a Cholesky of the Gram in place and
   Lanczos steps (:mod:`ntkcheck.ntk.gram_matrix.extremal`) give :math:`\lambda_{\min}` and
   :math:`\lambda_{\max}` with stated tolerances at a fraction of ``eigvalsh``'s cost (measured in
   ``benchmarks/bench_gram.py``); the full spectrum when asked, near the rounding floor or when the
   Cholesky fails, and the SVD of ``F`` below ``eigvalsh``'s resolution;
4. **certificate** (``certify=True``; :mod:`ntkcheck.ntk.certificate.cascade`): a rigorous lower
   bound on :math:`\lambda_{\min}` on the same array (one more Cholesky in the common case), else
   the preconditioned or Arb routes, else an exact proof of singularity;
5. **result** (:mod:`ntkcheck.ntk.gram_matrix.result`): :class:`~ntkcheck.ntk.gram_matrix.result.GramResult`.

Positivity is never claimed from a float64 number below ``1e-12`` relative: that needs
``certify=True``.

References: seed 003 section 3.1-3.2, Prop. 5 (positivity of the NTK <=> injectivity of
``G``); ``theory/ntk-prop8.md`` ("The finite-token Gram matrix").
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any, Literal

from ... import _budget
from ..._validate import as_budget
from ...errors import NtkcheckWarning
from ..certificate.cascade import certify_gram
from .accumulate import accumulate
from .features import DEFAULT_CHUNK, Heads, init_heads  # noqa: F401  (init_heads: used by the doctest of gram)
from .problem import GramOptions, GramProblem, InitLaw
from .result import GramResult, gram_result, status_with_certificate
from .spectrum import spectrum_budget, spectrum_of

__all__ = ["gram", "certify_result"]

#: the progress bar's name of the pass over the heads when a certificate is asked for
_PASS = "certified Gram (features, syrk)"


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
        Attach a certificate (:func:`~ntkcheck.ntk.certificate.cascade.certify_gram`): a rigorous lower bound on ``lambda_min``
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
    problem = GramProblem.of(samples, heads, chunk=chunk, progress=progress,
                             init=InitLaw(q_scale, b_scale, dist, seed),
                             options=GramOptions(method, spectrum, keep_matrix, certify, max_bits))
    notes = problem.notes()
    if problem.by_size:
        warnings.warn(problem.rank_sentence(), NtkcheckWarning, stacklevel=2)  # names gram's caller
    with _budget.scope(as_budget(time_budget)):
        with spectrum_budget(problem.M):  # without the spectrum there is nothing to report
            acc = None if method == "svd" else accumulate(problem, _PASS if certify else None)
            spec, fac = spectrum_of(problem, acc)
        del acc  # the Gram lives on in the work array of fac
        cert = None  # not asked for, or singular by size
        if certify and not problem.by_size:  # on the pass made and its factor (None on the "svd" route)
            cert = certify_gram(problem, float64_positive=spec.status == "positive", work=fac and fac.work,
                                lam=fac and fac.estimate)
        del fac  # the M x M work array is no longer needed
        return gram_result(problem, spec, cert, notes)


def certify_result(laws: Any, heads: Heads, g: GramResult, *, max_bits: int = 2048, progress: bool = False,
                   chunk: int = DEFAULT_CHUNK) -> GramResult:
    """``g`` (the :class:`GramResult` of :func:`gram` on ``laws`` and ``heads``, made without a
    certificate) with its certificate (:func:`~ntkcheck.ntk.certificate.cascade.certify_gram`, one new
    pass over the heads): ``status`` becomes ``"positive"`` when it proves positivity; a Gram singular
    by size or already certified is returned as is."""
    if g.rank_deficient_by_size or g.certified is not None:
        return g
    problem = GramProblem.of(laws, heads, chunk=chunk, progress=progress, options=GramOptions(max_bits=max_bits))
    cert = certify_gram(problem, float64_positive=g.positive)
    status, notes = status_with_certificate(g.status, g.positive, cert)
    return replace(g, certified=cert, status=status, notes=(*g.notes, *notes))
