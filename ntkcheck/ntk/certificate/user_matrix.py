r"""Certificates for a symmetric matrix made elsewhere: an NTK from neural-tangents, torch.func or JAX.

:func:`certify_matrix` proves a rigorous lower bound on :math:`\lambda_{\min}` of every symmetric
matrix ``S`` with :math:`|S_{ij} - A_{ij}| \le e` for the matrix ``A`` given (its values taken
exactly) and an entrywise error bound ``e`` on how it was computed (``abs_error``; its default,
the float64 conversion, the power-of-two scaling that keeps every step in range and the skew of a
matrix that is not exactly symmetric: :mod:`ntkcheck.ntk.certificate.matrix_input`). The route is
the package's verified Cholesky (:func:`~ntkcheck.ntk.certificate.routes.certify_gram_enclosure`:
Rump's criterion on :math:`\mathrm{fl}(C - tI)`, ``C`` the symmetric part, and Weyl's inequality
with :math:`\|S - C\|_2 \le \|S - C\|_F \le n e` plus the rounding of ``C``).

Below float64 resolution (a :math:`\lambda_{\min}` under about :math:`(n+1) u \operatorname{tr} A`,
``u = 2^-53``) the Cholesky proves nothing positive, and the result says so. What can be proved
otherwise, exactly (:mod:`ntkcheck.ntk.certificate.exact_matrix`):

* **indefinite**: a vector ``x`` (the float eigenvector of the smallest eigenvalue) with
  :math:`x^T A x + e \|x\|_1^2 < 0`, proved in floating point with a rounding bound (or, up to
  ``MAX_EXACT_RANK`` rows, in exact integers when the margin is below it): every ``S`` in the
  ball has a negative eigenvalue, so none is a Gram matrix :math:`J J^T` of real features;
* for ``e = 0`` (the numbers themselves), on the integers :math:`2^s A`: up to
  ``MAX_EXACT_MINORS`` rows, **positive** by Sylvester's criterion (every leading principal minor
  positive) with :math:`\lambda_{\min} \ge \det A / (\operatorname{tr} A)^{n-1}`, **singular** by the
  determinant and rank, **indefinite** by a negative determinant; up to ``MAX_EXACT_RANK`` rows,
  **singular** by the exact rank (estimated first, skipped with the reason when it does not fit
  the memory or the time left). A float matrix is rarely exactly singular.

A kernel that only the Jacobian shows (``J`` with fewer columns than rows: rank at most the
number of parameters) is proved by :func:`~ntkcheck.ntk.certificate.jacobian.certify_jacobian`;
the report of a matrix below resolution says so. Every step skipped is named in ``skipped``.

With ``tokens`` the dependence diagnosis runs on the data the matrix was computed from
(:func:`~ntkcheck.independence.decision.decide` and the named structures of seed 003 Prop. 8), so
"singular because of the data" (a certified dependency with shared atoms: a kernel whatever
the heads) is told apart from "singular because of rounding" (independent data: the exact NTK at
FixUp is injective, and a spectrum at the floor comes from rounding, too few heads or the
computation).

References: S. M. Rump, "Verification of positive definiteness", BIT 46 (2006) 433-452; seed 003
("Training Infinitely Deep and Wide Transformers", arXiv:2605.17660) Prop. 5, 8.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ... import _budget
from ..._memory import available_memory, format_bytes, require_memory
from ..._progress import StepBar
from ..._records import restore
from ...cgf import as_laws
from ..gram_matrix.features import _atom_count
from . import exact_matrix as ex
from .matrix_input import PreparedMatrix, load_matrix, prepare
from .routes import certify_gram_enclosure

__all__ = ["MatrixCertificate", "MatrixDiagnosis", "certify_matrix", "load_matrix", "MATRIX_STATUSES",
           "MAX_EXACT_RANK", "MAX_EXACT_MINORS"]

U = 2.0**-53
#: what :func:`certify_matrix` can conclude
MATRIX_STATUSES = ("certified positive", "certified singular", "certified indefinite", "not certified")
MAX_EXACT_RANK = ex.MAX_EXACT_RANK
MAX_EXACT_MINORS = ex.MAX_EXACT_MINORS


def _finite(v: float | None) -> float | None:
    """A float for strict JSON: None for NaN or an infinity (the reason is in the notes)."""
    return v if v is None or math.isfinite(v) else None


def _shown(v: float | None, resolution: float) -> str:
    """A float64 eigenvalue as what it is: six digits above its own uncertainty, else "below resolution"."""
    if v is None:
        return "not computed"
    if abs(v) <= resolution:
        return f"below resolution ({resolution:.2g}; float64 sees {v:.2g})"
    return f"{v:.6g}"


@dataclass(frozen=True)
class MatrixDiagnosis:
    """The dependence diagnosis of the data behind a matrix (``certify_matrix(..., tokens=...)``).

    ``weak`` is the CGF verdict, ``structure`` the named dependence structures, ``predicted_kernel``
    the Gram kernel they force (per output coordinate), ``size`` how the matrix's rows match the
    data, ``cause`` one of ``"data"``, ``"not the data"``, ``"undecided"``, and ``sentence`` the
    diagnosis in words."""

    weak: str
    structure: tuple[str, ...]
    predicted_kernel: int
    size: str
    cause: str
    sentence: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"weak": self.weak, "structure": list(self.structure), "predicted_kernel": self.predicted_kernel,
                "size": self.size, "cause": self.cause, "sentence": self.sentence, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MatrixDiagnosis:
        return restore(cls, d)


@dataclass(frozen=True)
class MatrixCertificate:
    r"""Result of :func:`certify_matrix` and :func:`~ntkcheck.ntk.certificate.jacobian.certify_jacobian`.

    Attributes
    ----------
    status : str
        One of :data:`MATRIX_STATUSES`.
    lower_bound : float or None
        ``certified positive``: :math:`\lambda_{\min}(S) \ge` ``lower_bound`` for every symmetric
        ``S`` within ``abs_error`` of the matrix, entry by entry (for a Jacobian: of
        :math:`J_\star J_\star^T` for every :math:`J_\star` within ``abs_error`` of ``J``). Positive,
        except when the bound proved is below the smallest double (the statement gives it).
    lambda_min_float, lambda_max_float : float or None
        What float64 sees (``eigvalsh`` of the symmetric part, or the squared singular values of a
        Jacobian; not a proof); None when not computed (``skipped`` says why) or beyond the
        float64 range.
    n : int
        Rows.
    abs_error : float
        The entrywise error bound the certificate covers (``notes`` say how it was set).
    skew : float
        :math:`\max_{ij} |A_{ij} - A_{ji}|` (at most ``2 abs_error``).
    radius : float
        The proved :math:`\|S - C\|_2` (or :math:`\|J_\star - J\|_2`) bound used with Weyl's inequality.
    below_resolution : bool
        The float64 :math:`\lambda_{\min}` is under ``resolution``.
    method : str
        ``"float64-cholesky"``, ``"float64-preconditioned"``, ``"exact-minors"``, ``"exact-rank"``,
        ``"exact-determinant"``, ``"exact-rayleigh"``, ``"rank-by-size"`` or ``"refused"``.
    statement : str
    shift : float or None
        The ``t`` of the successful Cholesky of :math:`\mathrm{fl}(C - tI)`.
    rank : int or None
        The exact rank (``certified singular`` by ``exact-rank``).
    vector : (n,) float array or None
        ``x`` with :math:`x^T S x < 0` for every ``S`` (``certified indefinite`` by ``exact-rayleigh``).
    diagnosis : MatrixDiagnosis or None
    rounding : float
        Largest change of an entry by the conversion to float64; included in ``abs_error``.
    source : str
        ``"matrix"`` or ``"jacobian"`` (the certificate is about :math:`J J^T`).
    parameters : int or None
        Columns of the Jacobian.
    max_rank : int or None
        A proved upper bound on the rank (the exact rank, or the columns of ``J``): the kernel has
        dimension at least ``n - max_rank``.
    resolution : float
        The uncertainty of ``lambda_min_float``: :math:`(n+1) u \operatorname{tr}|A|` plus ``radius``.
    dtype : str
        The dtype of the array given.
    notes : tuple of str
        How the error bound was set, and other facts the verdict rests on.
    skipped : tuple of str
        Every step not run, and why.
    """

    status: str
    lower_bound: float | None
    lambda_min_float: float | None
    lambda_max_float: float | None
    n: int
    abs_error: float
    skew: float
    radius: float
    below_resolution: bool
    method: str
    statement: str
    shift: float | None = None
    rank: int | None = None
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)
    diagnosis: MatrixDiagnosis | None = None
    rounding: float = 0.0
    source: str = "matrix"
    parameters: int | None = None
    max_rank: int | None = None
    resolution: float = 0.0
    dtype: str = "float64"
    notes: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    @property
    def positive(self) -> bool:
        return self.status == "certified positive"

    @property
    def relative_lambda_min(self) -> float | None:
        lo, hi = self.lambda_min_float, self.lambda_max_float
        if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
            return None
        return lo / hi if hi > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "lower_bound": _finite(self.lower_bound),
                "lambda_min_float": _finite(self.lambda_min_float), "lambda_max_float": _finite(self.lambda_max_float),
                "relative_lambda_min": _finite(self.relative_lambda_min), "n": self.n, "abs_error": self.abs_error,
                "skew": self.skew, "radius": self.radius, "below_resolution": self.below_resolution,
                "method": self.method, "statement": self.statement, "shift": self.shift, "rank": self.rank,
                "rounding": self.rounding, "source": self.source, "parameters": self.parameters,
                "max_rank": self.max_rank, "resolution": self.resolution, "dtype": self.dtype,
                "notes": list(self.notes), "skipped": list(self.skipped),
                "vector": None if self.vector is None else [float(v) for v in self.vector],
                "diagnosis": None if self.diagnosis is None else self.diagnosis.to_dict(),
                "outcome": {"exit_code": self.exit_code, "conclusion": self.status}, "exit_code": self.exit_code}

    @property
    def exit_code(self) -> int:
        """What ``ntkcheck certify`` exits with: 0 certified positive, 1 certified singular or indefinite,
        3 not certified."""
        return {"certified positive": 0, "certified singular": 1, "certified indefinite": 1}.get(self.status, 3)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MatrixCertificate:
        return restore(cls, d, vector=lambda v: None if v is None else np.asarray(v, dtype=np.float64))

    def lines(self) -> list[str]:
        """The report of ``ntkcheck certify``, line by line."""
        what = (f"J J^T of a {self.n} x {self.parameters} Jacobian" if self.source == "jacobian"
                else f"{self.n} x {self.n} matrix")
        out = [f"  size                {what}, {self.dtype}   (entrywise error bound {self.abs_error:.3g}"
               + (f", largest |A_ij - A_ji| {self.skew:.3g})" if self.source == "matrix" else ")"),
               f"  lambda_min          {_shown(self.lambda_min_float, self.resolution)}"
               + ("" if self.relative_lambda_min is None or self.below_resolution
                  else f"   (float64; relative {self.relative_lambda_min:.3g})"),
               f"  lambda_max          {_shown(self.lambda_max_float, 0.0)}",
               f"  status              {self.status} ({self.method})", f"  certificate         {self.statement}"]
        if self.below_resolution and self.source == "matrix":
            out.append("  resolution          below float64 resolution: lambda_min is under (n+1) u tr|A| + the "
                       "error radius, where a float64 Cholesky cannot tell it from 0")
        out.extend(f"  note                {n}" for n in self.notes)
        out.extend(f"  skipped             {s}" for s in self.skipped)
        if self.diagnosis is not None:
            out.append(f"  data                {self.diagnosis.sentence}")
            out.extend(f"  note (decide): {n}" for n in self.diagnosis.notes)
        return out


def base_fields(prep: PreparedMatrix, n: int, source: str = "matrix") -> dict[str, Any]:
    """The fields of a :class:`MatrixCertificate` known before any step: updated as the steps run."""
    return {"lambda_min_float": None, "lambda_max_float": None, "n": n, "abs_error": prep.abs_error,
            "skew": prep.skew, "radius": 0.0, "below_resolution": False, "rounding": prep.rounding,
            "source": source, "dtype": prep.dtype, "notes": prep.notes, "resolution": 0.0, "skipped": ()}


def run_certificate(known: dict[str, Any], steps: int, body: Callable[[StepBar, dict[str, Any]], MatrixCertificate],
                    *, progress: bool | None, time_budget: float | None, desc: str) -> MatrixCertificate:
    """``body(bar, known)`` under a stoppable time budget and a step bar; ``known`` holds the fields
    found so far, so a budget spent gives "not certified" naming the step it stopped in."""
    if time_budget is not None and not (isinstance(time_budget, (int, float)) and time_budget > 0):
        from ...errors import InputError

        raise InputError(f"time_budget: expected a number of seconds > 0 or None, got {time_budget!r}")
    with _budget.scope(None if time_budget is None else _budget.Budget(float(time_budget)), stoppable=True), \
            StepBar(steps, desc=desc, enabled=progress) as bar:
        try:
            return body(bar, known)
        except _budget.OutOfTime as exc:
            return MatrixCertificate("not certified", None, **known, method="refused",
                                     statement=f"not certified (time budget spent): {exc.stage}")


def _symmetric_part(prep: PreparedMatrix) -> tuple[np.ndarray, float]:
    """``fl((A + A^T)/2)`` (``A`` itself when exactly symmetric) and a bound on its rounding in the
    2-norm: :math:`n (u \\max|C| + 2^{-1074})` (each entry within a relative ``u``, subnormals aside)."""
    A = prep.A
    if prep.skew == 0:
        return A, 0.0
    with np.errstate(under="ignore"):
        C = (A + A.T) * 0.5
    n = A.shape[0]
    return C, n * (U * float(np.max(np.abs(C))) + 2.0**-1074)


def _estimate(flops: float, kind: float) -> float:
    return _budget.dense_seconds(flops, kind)


def _float_steps(prep: PreparedMatrix, C: np.ndarray, radius: float, bar: StepBar,
                 known: dict[str, Any]) -> tuple[np.ndarray, Any]:
    """The float64 eigenvalues and the verified Cholesky (scaled units); ``known`` gets what they saw."""
    import scipy.linalg as sla

    n = C.shape[0]
    seconds = _estimate(4 * n**3 / 3, _budget.EIGVALSH)
    _budget.require(seconds, "the float64 eigenvalues")
    bar.start("float64 eigenvalues", seconds)
    lam = _budget.run(lambda: sla.eigvalsh(C, check_finite=False), "the float64 eigenvalues")
    with np.errstate(over="ignore"):
        resolution = (n + 1) * U * float(np.sum(np.abs(np.diagonal(C)))) + radius
    known.update(lambda_min_float=prep.to_user(float(lam[0])), lambda_max_float=prep.to_user(float(lam[-1])),
                 radius=prep.to_user(radius, down=False), below_resolution=bool(abs(lam[0]) <= resolution),
                 resolution=prep.to_user(resolution, down=False))
    bar.start("verified Cholesky", _estimate(n**3, _budget.CHOLESKY))
    pc = _budget.run(lambda: certify_gram_enclosure(C, radius), "the verified Cholesky")
    return lam, pc


def _integers_fit(A: np.ndarray, skipped: list[str], what: str) -> bool:
    """Whether the exact integers of ``A`` fit in the available memory (else ``skipped`` says so)."""
    n = A.shape[0]
    bits = ex.integer_bits(A)
    need, avail = n * n * (bits / 8 + 100), available_memory()
    if need > avail:
        skipped.append(f"{what}: its {bits}-bit integers would need about {format_bytes(need)} of memory, more than "
                       f"the {format_bytes(avail)} available")
    return need <= avail


def _indefinite(prep: PreparedMatrix, C: np.ndarray, bar: StepBar, known: dict[str, Any],
                skipped: list[str]) -> MatrixCertificate | None:
    """Certified indefinite by the float eigenvector of lambda_min and a proved negative quadratic form."""
    import scipy.linalg as sla

    n = C.shape[0]
    bar.start("eigenvector of lambda_min", _estimate(4 * n**3 / 3, _budget.EIGVALSH))
    _, vec = _budget.run(lambda: sla.eigh(C, subset_by_index=[0, 0], check_finite=False), "the eigenvector")
    x = vec[:, 0]
    proved = ex.negative_form(prep.A, prep.error, x)
    if not proved and n > MAX_EXACT_RANK:
        skipped.append(f"exact quadratic form of the eigenvector of lambda_min: skipped above n = {MAX_EXACT_RANK} "
                       f"(n = {n}; its float64 value is within its rounding bound of 0)")
    elif not proved and _integers_fit(prep.A, skipped, "exact quadratic form"):
        bar.start("exact quadratic form")
        proved = ex.negative_form_exact(prep.A, prep.error, x)
    if not proved:
        return None
    return MatrixCertificate("certified indefinite", None, **known, method="exact-rayleigh", vector=x,
                             statement=("x^T A x < 0 for the matrix as given" if prep.error == 0 else
                                        f"x^T S x < 0 for every symmetric S within {prep.abs_error:.3g} of the matrix")
                             + " (x the float eigenvector of lambda_min; x^T A x + abs_error ||x||_1^2 < 0 proved with a "
                             "rounding bound): not positive semidefinite, so not a Gram matrix J J^T")


def _exact_small(prep: PreparedMatrix, M: Any, s: int, known: dict[str, Any]) -> MatrixCertificate:
    """Sylvester's criterion on the exact integers ``M = 2^s A`` (scaled units)."""
    n = M.nrows()
    inertia = ex.exact_inertia(M)
    if inertia.kind == "positive" and inertia.lower is not None:
        lb = ex.fraction_down(inertia.lower, prep.exponent - s)
        where = "" if lb > 0 else (f" (the bound {float(inertia.lower):.3g} x 2^{prep.exponent - s} is below the "
                                   "smallest double)")
        return MatrixCertificate("certified positive", lb, **known, method="exact-minors",
                                 statement=f"lambda_min >= {lb:.6g} for the matrix as given: {inertia.detail}{where}")
    if inertia.kind == "singular":
        r = ex.exact_rank(M)
        return MatrixCertificate("certified singular", None, **known | {"max_rank": r}, method="exact-rank", rank=r,
                                 statement=f"the exact matrix (its values taken exactly) has rank {r} < {n}: a "
                                 f"kernel of dimension {n - r}")
    return MatrixCertificate("certified indefinite", None, **known, method="exact-determinant",
                             statement=f"not positive semidefinite, exactly: {inertia.detail}")


def _exact_rank_step(prep: PreparedMatrix, bar: StepBar, known: dict[str, Any],
                     skipped: list[str]) -> MatrixCertificate | None:
    """The exact rank (``MAX_EXACT_MINORS < n <= MAX_EXACT_RANK``), after a rank modulo a prime and
    the cost estimate; None when not singular or skipped (then ``skipped`` says why)."""
    from flint import nmod_mat

    A = prep.A
    n = A.shape[0]
    bits = ex.integer_bits(A)
    if not _integers_fit(A, skipped, "exact rank"):
        return None
    bar.start("exact rank modulo a prime")
    M, _ = ex.exact_integers(A)
    if nmod_mat(M, (1 << 62) - 57).rank() == n:  # full rank modulo p, so over Q
        known["notes"] = (*known["notes"], "the numbers in the file form an exactly regular matrix (full rank "
                          "modulo a prime, hence over the rationals); if they approximate a singular J J^T, only the "
                          "Jacobian can show it")
        return None
    seconds, nbytes = ex.rank_cost(n, bits)
    if not ex.rank_fits(seconds, nbytes, skipped, f" ({bits}-bit integers)"):
        return None
    bar.start("exact rank", seconds)
    r = ex.exact_rank(M)
    if r >= n:
        return None
    return MatrixCertificate("certified singular", None, **known | {"max_rank": r}, method="exact-rank", rank=r,
                             statement=f"the exact matrix (its values taken exactly) has rank {r} < {n}: a kernel of "
                             f"dimension {n - r}")


def _exact_steps(prep: PreparedMatrix, lam: np.ndarray, bar: StepBar, known: dict[str, Any],
                 skipped: list[str]) -> MatrixCertificate | None:
    """What exact arithmetic proves about the numbers themselves (``abs_error = 0`` only)."""
    n = prep.A.shape[0]
    if prep.error != 0:
        skipped.append("exact rank and minors: only for abs_error 0 (a ball of matrices has no single rank)")
        return None
    if n <= MAX_EXACT_MINORS:
        if not _integers_fit(prep.A, skipped, "exact leading minors"):
            return None
        bar.start("exact leading minors")
        M, s = ex.exact_integers(prep.A)
        return _exact_small(prep, M, s, known)
    if abs(float(lam[0])) > 4 * (n + 1) * U * float(np.sum(np.abs(lam))):
        return None  # far from singular: no exact rank to look for
    if n > MAX_EXACT_RANK:
        skipped.append(f"exact rank: skipped above n = {MAX_EXACT_RANK} (n = {n}; its cost grows like n^4)")
        return None
    return _exact_rank_step(prep, bar, known, skipped)


def _jacobian_hint(n: int) -> str:
    return (f"if this is J J^T of a model with fewer than {n} parameters, it is singular (rank <= #parameters): "
            "ntkcheck certify --jacobian J.npy (certify_jacobian) proves that at once")


def _certify_steps(prep: PreparedMatrix, bar: StepBar, known: dict[str, Any]) -> MatrixCertificate:
    n = prep.A.shape[0]
    C, c_round = _symmetric_part(prep)
    # 1e-7: above the relative slack the standalone verifier adds to the same radius (its entrywise balls
    # are rounded up, then inflated by 1e-8), so a bound proved here is reproduced there
    radius = (n * prep.error + c_round) * (1 + 1e-7)
    # the array given, eigvalsh's copy, the Cholesky's triangle and its Fortran copy, one more for the
    # eigenvector or the mirror (measured: 345 MB at n = 2880, 66 MB per copy, with the interpreter)
    require_memory(8.0 * n * n * (5 if C is prep.A else 6), f"the float64 steps on the {n} x {n} matrix",
                   "the matrix size (or raise NTKCHECK_MEMORY_LIMIT)")
    lam, pc = _float_steps(prep, C, radius, bar, known)
    if pc.positive:
        lb = prep.to_user(pc.lower_bound, down=True)
        scaled = f" (on the matrix times 2^{-prep.exponent}, exactly)" if prep.exponent else ""
        return MatrixCertificate("certified positive", lb, **known, method=pc.method, shift=prep.to_user(pc.shift),
                                 statement=f"lambda_min >= {lb:.6g} for "
                                 + (f"every symmetric matrix within {prep.abs_error:.3g} of the matrix, entry by entry"
                                    if prep.error else "the matrix as given") + f"; verified Cholesky{scaled}: {pc.statement}")
    skipped: list[str] = []
    out = _indefinite(prep, C, bar, known, skipped) if lam[0] < 0 else None
    if out is None:
        out = _exact_steps(prep, lam, bar, known, skipped)
    if out is None:
        hint = [_jacobian_hint(n)] if known["below_resolution"] and n > 1 else []
        out = MatrixCertificate("not certified", None, **known, method="refused",
                                statement="; ".join([pc.statement, *hint]))
    return replace(out, skipped=tuple(skipped))


def certify_matrix(matrix: Any, *, abs_error: float | None = None, tokens: Any = None, progress: bool | None = False,
                   time_budget: float | None = None, precision: str | None = None) -> MatrixCertificate:
    r"""A rigorous lower bound on :math:`\lambda_{\min}` of a symmetric matrix computed elsewhere.

    Parameters
    ----------
    matrix : (n, n) array, or the path of a ``.npy`` / ``.npz`` file
        E.g. an empirical NTK :math:`J J^T` from neural-tangents, ``torch.func`` or JAX.
    abs_error : float or None
        An entrywise bound on the error of how it was computed: the certificate covers every
        symmetric ``S`` with :math:`|S_{ij} - A_{ij}| \le` ``abs_error``. None (default): 0 for
        float64 and integer input (the numbers themselves), :math:`64 u \max|A|` for float32 and
        float16 input, raised to half the largest skew :math:`|A_{ij} - A_{ji}|` of a matrix that is
        not exactly symmetric (:mod:`ntkcheck.ntk.certificate.matrix_input`; ``notes`` say which).
        A number below half the skew is refused.
    tokens : token samples or None
        The data the matrix was computed from (list of ``(N_i, d)`` arrays or laws): adds the
        dependence diagnosis (:class:`MatrixDiagnosis`).
    progress : bool or None
        A bar over the steps on stderr (None: when stderr is a terminal).
    time_budget : float or None
        Seconds; a step that cannot finish in what is left is not started ("not certified (time
        budget spent)", or named in ``skipped`` for the exact rank).
    precision : {"float64", "float32", "float16", "bfloat16"} or None
        The arithmetic the values were computed in, when the dtype does not say it (bfloat16 values
        held as float32): sets the default ``abs_error``. None: the dtype's.

    Returns
    -------
    MatrixCertificate

    Examples
    --------
    >>> import numpy as np
    >>> J = np.random.default_rng(0).standard_normal((5, 9))
    >>> certify_matrix(J @ J.T).status
    'certified positive'
    >>> certify_matrix(np.ones((3, 3))).status       # rank 1, exactly
    'certified singular'
    >>> certify_matrix(np.diag([1e-300, 1e10])).lower_bound > 0   # exact leading minors
    True
    """
    prep = prepare(matrix, abs_error, "matrix", precision)
    known = base_fields(prep, prep.A.shape[0])
    out = run_certificate(known, 5, lambda bar, k: _certify_steps(prep, bar, k), progress=progress,
                          time_budget=time_budget, desc="certify")
    return out if tokens is None else replace(out, diagnosis=diagnose(tokens, out))


def diagnose(tokens: Any, cert: MatrixCertificate) -> MatrixDiagnosis:
    """Why the matrix of ``cert`` is (or is not) singular, from the data: the CGF decision and the
    named dependence structures (seed 003 Prop. 8)."""
    from ...independence.decision import decide
    from ..prop8.structure import dependence_structure

    laws = as_laws(tokens)
    M, N, d = _atom_count(laws), sum(int(law.n_tokens) for law in laws), laws[0].dim
    sizes = {d * N: "d rows per token", d * M: "d rows per distinct atom", N: "one row per token",
             M: "one row per distinct atom"}  # later keys win: distinct atoms first when M = N
    size = sizes.get(cert.n, f"{cert.n} rows match neither the {M} distinct atoms nor the {N} tokens")
    weak = decide(laws, property="weak")
    st = dependence_structure(laws, weak=weak)
    notes = tuple(n for n in weak.notes if "rounding level" in n)
    k = st.predicted_kernel
    if weak.dependent and k > 0:
        cause = "data"
        sentence = (f"singular because of the data: {(st.lines() or ['a certified dependency'])[0]}; seed 003 "
                    f"Prop. 8 forces a Gram kernel of dimension {st.predicted_text} whatever the heads")
    elif weak.independent:
        cause = "not the data"
        near = (" (but decide's certificate rests on rounding-level differences: the data are within rounding of "
                "a dependency)" if notes else "")
        sentence = ("the CGFs are certified independent, so no dependency of the data forces a kernel (seed 003 "
                    f"Prop. 8){near}; a lambda_min at the rounding floor comes from rounding, too few heads "
                    "(H d < M) or the computation")
    else:
        cause = "undecided"
        sentence = (f"the CGF decision is {weak.verdict.value}"
                    + (" (dependent, but without shared atoms: Prop. 8 predicts no kernel)" if weak.dependent else ""))
    if cert.status == "certified positive" and cause == "data":
        sentence += "; yet the matrix is certified positive: it is not the FixUp NTK of these data"
    return MatrixDiagnosis(weak.verdict.value, tuple(st.lines()), k, size, cause, sentence, notes)
