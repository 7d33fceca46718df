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

Spectrum (measured in ``benchmarks/bench_gram.py``): the SVD of ``F``
resolves relative eigenvalues down to ~1e-28 but is 4-7x slower than ``eigvalsh`` of the
formed ``F F^T``, which cannot resolve relative eigenvalues below ~1e-13. ``method="auto"``
therefore forms ``F F^T`` and calls ``eigvalsh`` (or, when the full spectrum is not wanted,
a Cholesky factorisation plus Lanczos on the inverse for :math:`\lambda_{\min}`, 2-3x
faster again), and falls back to the SVD of ``F`` only when the relative
:math:`\lambda_{\min}` falls below ``1e-10`` (a factor 1000 above the ``eigvalsh``
floor). Positivity is never claimed from a float64 number below ``1e-12`` relative: that
needs ``certify=True`` (a rigorous lower bound: :mod:`ntkcheck.ntk.certificate`).

The heads and the feature builder live in :mod:`ntkcheck.ntk.features`, the Arb
certificate in :mod:`ntkcheck.ntk.certificate`.

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
import scipy.linalg as sla
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from .._validate import check_score_range
from ..cgf import Empirical, as_laws
from ..errors import InputError, NtkcheckWarning
from ..independence.results import no_truth_value
from .certificate import MAX_CERTIFY_TOKENS, GramCertificate, _certify, certify_positive
from .features import _GRAM_BLOCK as _FEATURE_GRAM_BLOCK
from .features import (  # noqa: F401  (init_heads: used by the doctest of gram)
    DEFAULT_CHUNK,
    Heads,
    _as_chunk,
    _as_heads,
    _atom_count,
    _feature_columns,
    _features,
    _groups,
    _head_block,
    _progress,
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

#: relative lambda_min below which the eigvalsh of the formed Gram is not trusted
#: (its floor is ~1e-13, measured in benchmarks/bench_gram.py; a factor 1000 of margin).
RESOLUTION_EIGH = 1e-10
#: relative lambda_min below which even the SVD of F (errors ~ (eps ||F||)^2) says nothing.
RESOLUTION_SVD = 1e-26
#: relative lambda_min above which float64 alone may report "positive" (the issue's standard).
POSITIVE_REL = 1e-12
#: full spectrum returned up to this many distinct atoms (rows of the Gram).
MAX_EIGENVALUES = 4096
#: entries of one column block of F in the accumulated Gram (256 MiB; see features._head_block).
_GRAM_BLOCK = _FEATURE_GRAM_BLOCK
#: the SVD fallback is attempted only if F fits in this many bytes.
SVD_MEMORY_LIMIT = 4 << 30


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
    return sla.blas.dsyrk(1.0, np.ascontiguousarray(F).T, trans=1, lower=1)


# ---------------------------------------------------------------------------- spectrum


def _extremal_eigh(G: np.ndarray) -> tuple[float, float] | None:
    """(lambda_min, lambda_max) by Cholesky + Lanczos on ``G^{-1}``; None when G is not
    numerically positive definite (then the caller uses the full eigvalsh).

    Only the lower triangle of ``G`` is read (as :func:`_gram_accumulated` fills it)."""
    if not G.flags.f_contiguous:
        G = np.asfortranarray(G)  # BLAS symv below takes it as is, without a copy per product
    try:
        c = sla.cho_factor(G, lower=True, check_finite=False)
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


# ------------------------------------------------------------------------------ result


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
    condition : float
        ``lambda_max / lambda_min`` (``inf`` when ``lambda_min == 0``).
    atoms : int
        ``M``, the size of the Gram: distinct atoms summed over the samples.
    tokens : int
        Tokens given (``>= atoms``; repeats inside a sample are merged).
    heads, dim : int
        ``H``, ``d``.
    eigenvalues : tuple of float or None
        All ``M`` eigenvalues, ascending, when ``M <= 4096``.
    rank_deficient_by_size : bool
        ``H d < M``: singular by rank, says nothing about the data.
    method : str
        ``"eigvalsh"``, ``"cholesky-lanczos"`` or ``"svd"``: the route that gave the numbers.
    resolution : float
        Relative eigenvalue below which that route cannot tell an eigenvalue from 0 (the
        rounding floor).
    status : str
        ``"positive"`` (relative ``lambda_min`` above ``1e-12``, or certified),
        ``"singular by size"``, ``"below resolution"`` (singular to working precision),
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
        out = [f"  lambda_min          {self.lambda_min:.6g}   (relative {self.relative_lambda_min:.3g})",
               f"  lambda_max          {self.lambda_max:.6g}",
               f"  condition           {self.condition:.3g}   (spectrum: {self.method})",
               f"  status              {self.status_text()}"]
        c = self.certified
        if c is not None:
            out.append(f"  certificate         lambda_min >= {c.lower_bound:.4g} ({c.how})" if c.positive else
                       f"  certificate         inconclusive ({c.how}): {c.detail}")
        return out

    def status_text(self) -> str:
        """The status in words, saying whether positivity is certified or only seen in float64."""
        if self.certified_positive:
            assert self.certified is not None
            return f"positive, certified: lambda_min >= {self.certified.lower_bound:.4g} ({self.certified.how})"
        if self.status == "positive":
            return (f"positive in float64 (relative lambda_min {self.relative_lambda_min:.3g} > {POSITIVE_REL:g}); "
                    "not certified")
        return self.status

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

    def __repr__(self) -> str:
        s = (f"GramResult({self.status}: lambda_min={self.lambda_min:.4g}, lambda_max={self.lambda_max:.4g}, "
             f"relative={self.relative_lambda_min:.3g}, M={self.atoms} atoms ({self.tokens} tokens), H={self.heads}, "
             f"d={self.dim}, {self.method}")
        if self.certified is not None:
            s += f", {self.certified!r}"
        return s + ")"


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


def gram_certificate(laws: Sequence[Empirical], heads: Heads, *, float64_positive: bool, max_bits: int = 2048,
                     progress: bool = False, chunk: int = DEFAULT_CHUNK) -> GramCertificate:
    """A rigorous lower bound on ``lambda_min`` of the Gram by the cheapest sound route, or why not.

    A Gram float64 sees positive goes first to the verified Cholesky of the Gram accumulated over
    head blocks (:func:`~ntkcheck.ntk.certificate.certify_positive`, ``O(M^3)``, any ``M``); when
    that refuses, or float64 did not see it positive, and ``M <= MAX_CERTIFY_TOKENS``, to the
    preconditioned bound on ``sigma_min(F)`` or Arb (:func:`~ntkcheck.ntk.certificate.certify_lambda_min`).
    Beyond that size a Gram below float64's resolution is refused ("below resolution at M = ...").
    """
    M = _atom_count(laws)
    refused = ""
    if float64_positive:
        pc = certify_positive(laws, heads, arb=False, progress=progress, chunk=chunk)
        if pc.positive:
            return GramCertificate(pc.method, pc.lower_bound, 53, pc.statement)
        refused = f"{pc.statement}; "
    if M <= MAX_CERTIFY_TOKENS:
        return _certify(laws, heads, max_bits=max_bits)
    return GramCertificate("inconclusive", None, 53, f"{refused}the routes below float64's resolution stop at "
                           f"M = {MAX_CERTIFY_TOKENS} (below resolution at M = {M})")


def certify_result(laws: Sequence[Empirical], heads: Heads, g: GramResult, *, max_bits: int = 2048,
                   progress: bool = False, chunk: int = DEFAULT_CHUNK) -> GramResult:
    """``g`` with its certificate (:func:`gram_certificate`): ``status`` becomes ``"positive"``
    when it proves positivity; a Gram singular by size or already certified is returned as is."""
    if g.rank_deficient_by_size or g.certified is not None:
        return g
    cert = gram_certificate(laws, heads, float64_positive=g.positive, max_bits=max_bits, progress=progress, chunk=chunk)
    note = (f"positivity certified ({cert.how})" if cert.positive else
            f"certification inconclusive: {cert.detail}" + ("; positivity is seen in float64 only" if g.positive else ""))
    return replace(g, certified=cert, status="positive" if cert.positive else g.status, notes=(*g.notes, note))


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
        what float64 saw (``certified_positive`` is False).
    method : {"auto", "svd", "eigh"}
        ``"auto"``: ``eigvalsh`` of ``F F^T`` (``M <= 4096``) or Cholesky + Lanczos
        (larger ``M``, ``F`` accumulated over head chunks and never stored), with the SVD
        of ``F`` as fallback below relative ``1e-10``; ``"svd"``: always ``svdvals(F)``;
        ``"eigh"``: never the SVD.
    chunk : int
        Tile workspace bound of :func:`attention_features` (float64 entries). Peak memory
        of ``"auto"``: ``8 M (H d + M)`` bytes for ``M <= 4096`` (``F`` and ``F F^T``), plus
        ``eigvalsh``'s copy; above, ``16 M^2`` bytes (the Gram and its Cholesky factor) plus
        one column block of ``F`` of at most ``8 max(2^25, 256 M)`` bytes (plus the SVD
        fallback's ``8 M H d`` if it is needed and fits in 4 GiB). ``M`` counts distinct
        atoms.

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
    laws = as_laws(samples)
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer, Heads, tuple)):
        raise InputError(f"heads: expected a positive integer or a Heads object, got {heads!r}")
    if isinstance(heads, (int, np.integer)):
        if heads < 1:
            raise InputError(f"heads: expected a positive integer or a Heads object, got {heads!r}")
        heads = init_heads(int(heads), laws[0].dim, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed)
    heads = _as_heads(heads, laws[0].dim)
    if method not in ("auto", "svd", "eigh"):
        raise InputError(f"method: expected 'auto', 'svd' or 'eigh', got {method!r}")
    chunk = _as_chunk(chunk)
    sizes = tuple(SampleSize.of(law) for law in laws)
    M = _atom_count(laws)
    if keep_matrix and M > MAX_EIGENVALUES:
        raise InputError(f"keep_matrix: the Gram is kept only up to {MAX_EIGENVALUES} distinct atoms, got M = {M}")
    H, d = heads.count, heads.dim
    by_size = H * d < M
    notes: list[str] = []
    if (merged := merge_note(sizes)) is not None:
        notes.append(merged)
    if by_size:
        warnings.warn(
            f"H d = {H}*{d} = {H * d} < M = {M} distinct atoms: the Gram has rank at most {H * d} and is "
            "singular by rank; this is not a verdict about the data (use at least "
            f"{math.ceil(M / d)} heads)",
            NtkcheckWarning,
            stacklevel=2,
        )
        notes.append(f"singular by rank: H d = {H * d} < M = {M}")
    want_all = M <= MAX_EIGENVALUES
    eig: np.ndarray | None = None
    F: np.ndarray | None = None
    svd_fits = 8 * M * H * d <= SVD_MEMORY_LIMIT

    def run_svd() -> np.ndarray:
        nonlocal F
        if F is None:
            F = _features(laws, heads, chunk, progress)
        s = sla.svdvals(F, check_finite=False)
        ev = np.zeros(M)
        ev[M - s.shape[0]:] = np.sort(s) ** 2  # min(M, Hd) singular values; the rest are exact zeros
        return ev

    if method == "svd":
        eig = run_svd()
        used, resolution = "svd", RESOLUTION_SVD
    else:
        if want_all:
            F = _features(laws, heads, chunk, progress)
            G = _gram_lower(F)
        else:
            G = _gram_accumulated(laws, heads, chunk, progress)
        ext = None if (want_all or by_size) else _extremal_eigh(G)
        if ext is not None:
            lmin, lmax = ext
            used, resolution = "cholesky-lanczos", RESOLUTION_EIGH
        else:
            eig = np.linalg.eigvalsh(G, UPLO="L")  # G holds its lower triangle only
            used, resolution = "eigvalsh", RESOLUTION_EIGH
            lmin, lmax = float(eig[0]), float(eig[-1])
        del G
        if method == "auto" and not by_size and lmax > 0 and lmin / lmax < RESOLUTION_EIGH:
            if svd_fits:
                eig = run_svd()
                used, resolution = "svd", RESOLUTION_SVD
                notes.append("eigvalsh could not resolve lambda_min (relative < 1e-10): recomputed from the SVD of F")
            else:
                notes.append("lambda_min below the eigvalsh resolution and F too large for the SVD fallback")
    if eig is not None:
        lmin, lmax = float(eig[0]), float(eig[-1])
    lmin = max(lmin, 0.0)
    status = spectrum_status(lmin, lmax, by_size=by_size, resolution=resolution)
    cert: GramCertificate | None = None
    if certify and not by_size:
        cert = gram_certificate(laws, heads, float64_positive=status == "positive", max_bits=max_bits,
                                progress=progress, chunk=chunk)
        if cert.positive:
            status = "positive"
            notes.append(f"positivity certified ({cert.how})")
        else:
            notes.append(f"certification inconclusive: {cert.detail}")
    eigenvalues = tuple(float(max(v, 0.0)) for v in eig) if (eig is not None and want_all) else None
    kept: np.ndarray | None = None
    kernel: np.ndarray | None = None
    if keep_matrix:
        if F is None:
            F = _features(laws, heads, chunk, progress)
        kept = F @ F.T
        kept = (kept + kept.T) / 2  # exactly symmetric for eigh
        # the observed kernel: as many eigenvectors as eigenvalues at the floor (the count
        # may come from the SVD; the subspace of a cluster separated by a gap is accurate)
        k = sum(1 for v in (eigenvalues or ()) if v <= resolution * lmax)
        kernel = np.linalg.eigh(kept)[1][:, :k].copy()
    return GramResult(
        lambda_min=lmin,
        lambda_max=float(lmax),
        condition=(lmax / lmin) if lmin > 0 else math.inf,
        atoms=M,
        tokens=int(sum(s.tokens for s in sizes)),
        heads=H,
        dim=d,
        eigenvalues=eigenvalues,
        rank_deficient_by_size=by_size,
        method=used,
        resolution=resolution,
        status=status,
        certified=cert,
        notes=tuple(notes),
        samples=sizes,
        matrix=kept,
        kernel_vectors=kernel,
    )
