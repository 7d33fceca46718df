r"""Certificates for a symmetric matrix made elsewhere: an NTK from neural-tangents, torch.func or JAX.

:func:`certify_matrix` proves a rigorous lower bound on :math:`\lambda_{\min}` of every symmetric
matrix ``S`` with :math:`|S_{ij} - A_{ij}| \le e` for the matrix ``A`` given (its float64 values
taken exactly) and an entrywise error bound ``e`` on how it was computed (``abs_error``, default
0: the numbers themselves). Such an ``S`` exists only when :math:`|A_{ij} - A_{ji}| \le 2e`;
otherwise the input is refused. The route is the package's verified Cholesky
(:func:`~ntkcheck.ntk.certificate.routes.certify_gram_enclosure`: Rump's criterion on
:math:`\mathrm{fl}(C - tI)`, ``C`` the symmetric part, and Weyl's inequality with
:math:`\|S - C\|_2 \le \|S - C\|_F \le n e` plus the rounding of ``C``).

Below float64 resolution (a :math:`\lambda_{\min}` under about :math:`(n+1) u \operatorname{tr} A`,
``u = 2^-53``) nothing positive can be proved this way, and the result says so. What can be
proved the other way, exactly:

* **singular** (``e = 0`` only): the exact rank of ``A`` (FLINT, on the integers
  :math:`2^s A`) is below ``n``. A float matrix is rarely exactly singular; rounding usually
  leaves it regular or indefinite;
* **indefinite**: a vector ``x`` (the float eigenvector of the smallest eigenvalue) with
  :math:`x^T A x + e \|x\|_1^2 < 0` in integer arithmetic: every ``S`` in the ball has a
  negative eigenvalue, so none is a Gram matrix :math:`J J^T` of real features: the
  computation's error exceeds ``e``.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flint import fmpz_mat

from ..._records import restore
from ...cgf import as_laws
from ...errors import InputError
from ..gram_matrix.features import _atom_count
from .routes import certify_gram_enclosure

__all__ = ["MatrixCertificate", "MatrixDiagnosis", "certify_matrix", "load_matrix", "MATRIX_STATUSES"]

U = 2.0**-53
#: what :func:`certify_matrix` can conclude
MATRIX_STATUSES = ("certified positive", "certified singular", "certified indefinite", "not certified")
#: the exact rank is tried up to this many rows
MAX_EXACT_RANK = 400


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
    r"""Result of :func:`certify_matrix`.

    Attributes
    ----------
    status : str
        One of :data:`MATRIX_STATUSES`.
    lower_bound : float or None
        ``certified positive``: :math:`\lambda_{\min}(S) \ge` ``lower_bound`` ``> 0`` for every
        symmetric ``S`` within ``abs_error`` of the matrix, entry by entry.
    lambda_min_float, lambda_max_float : float
        What ``eigvalsh`` of the symmetric part sees (not a proof).
    n : int
    abs_error : float
    skew : float
        :math:`\max_{ij} |A_{ij} - A_{ji}|` (at most ``2 abs_error``).
    radius : float
        The proved :math:`\|S - C\|_2` bound used with Weyl's inequality.
    below_resolution : bool
        The float64 :math:`\lambda_{\min}` is under the rounding level :math:`(n+1)u\,\mathrm{tr}|A|`
        that a float64 Cholesky resolves.
    method : str
        ``"float64-cholesky"``, ``"exact-rank"``, ``"exact-rayleigh"`` or ``"refused"``.
    statement : str
    shift : float or None
        The ``t`` of the successful Cholesky of :math:`\mathrm{fl}(C - tI)`.
    rank : int or None
        The exact rank (``certified singular``).
    vector : (n,) float array or None
        ``x`` with :math:`x^T S x < 0` for every ``S`` (``certified indefinite``).
    diagnosis : MatrixDiagnosis or None
    rounding : float
        Largest change of an entry by the conversion to float64 (integers beyond :math:`2^{53}`,
        long doubles); included in ``abs_error``, so the verdict is about the numbers given.
    """

    status: str
    lower_bound: float | None
    lambda_min_float: float
    lambda_max_float: float
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

    @property
    def positive(self) -> bool:
        return self.status == "certified positive"

    @property
    def relative_lambda_min(self) -> float:
        return self.lambda_min_float / self.lambda_max_float if self.lambda_max_float > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "lower_bound": self.lower_bound, "lambda_min_float": self.lambda_min_float,
                "lambda_max_float": self.lambda_max_float, "relative_lambda_min": self.relative_lambda_min,
                "n": self.n, "abs_error": self.abs_error, "skew": self.skew, "radius": self.radius,
                "below_resolution": self.below_resolution, "method": self.method, "statement": self.statement,
                "shift": self.shift, "rank": self.rank, "rounding": self.rounding,
                "vector": None if self.vector is None else [float(v) for v in self.vector],
                "diagnosis": None if self.diagnosis is None else self.diagnosis.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MatrixCertificate:
        return restore(cls, d, vector=lambda v: None if v is None else np.asarray(v, dtype=np.float64))

    def lines(self) -> list[str]:
        """The report of ``ntkcheck certify``, line by line."""
        out = [f"  size n              {self.n}   (entrywise error bound {self.abs_error:g}, largest "
               f"|A_ij - A_ji| {self.skew:.3g})",
               f"  lambda_min          {self.lambda_min_float:.6g}   (float64 eigvalsh; relative "
               f"{self.relative_lambda_min:.3g})",
               f"  lambda_max          {self.lambda_max_float:.6g}",
               f"  status              {self.status} ({self.method})", f"  certificate         {self.statement}"]
        if self.below_resolution:
            out.append("  resolution          below float64 resolution: lambda_min is under (n+1) u tr|A|, where a "
                       "float64 Cholesky cannot tell it from 0")
        if self.diagnosis is not None:
            out.append(f"  data                {self.diagnosis.sentence}")
            out.extend(f"  note (decide): {n}" for n in self.diagnosis.notes)
        return out


def load_matrix(path: str | Path) -> np.ndarray:
    """A matrix from ``.npy`` (one 2-D array) or ``.npz`` (exactly one array), never unpickled."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such matrix file")
    try:
        z = np.load(p, allow_pickle=False)
        if isinstance(z, np.ndarray):
            return z
        with z:
            if len(z.files) != 1:
                raise InputError(f"{p}: expected one array in the .npz file, found {z.files}")
            return z[z.files[0]]
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{p}: not a readable .npy or .npz matrix file ({exc})") from None


def _as_float64(A: np.ndarray) -> tuple[np.ndarray, float]:
    """The matrix as float64 and an upper bound on the largest entry moved by that conversion (0 when
    every entry is a float64 already: float16/32/64 and integers up to 2^53 convert exactly)."""
    F = A.astype(np.float64)
    if A.dtype.kind in "iu":
        bad = np.nonzero((A.ravel() > 2 ** 53) | (A.ravel() < -2 ** 53))[0] if A.size else np.zeros(0, int)
        r = max((abs(int(A.flat[k]) - int(F.flat[k])) for k in bad), default=0)
    elif A.dtype.itemsize > 8:  # long double: the rounding error is exact in long double
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(A - F.astype(A.dtype))
        r = float(np.nextafter(np.float64(np.nanmax(err)), np.inf)) if np.any(err > 0) else 0
    else:
        r = 0
    return F, float(np.nextafter(np.float64(r), np.inf)) if r else 0.0


def _checked(matrix: Any, abs_error: Any) -> tuple[np.ndarray, float, float, float]:
    """The matrix as float64, the error bound (the user's plus what the conversion to float64 moved), the
    largest skew, and that conversion's rounding; or InputError."""
    A = load_matrix(matrix) if isinstance(matrix, (str, Path)) else np.asarray(matrix)
    if A.dtype.kind not in "iuf":
        raise InputError(f"matrix: expected real numbers, got dtype {A.dtype}")
    A, rounding = _as_float64(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise InputError(f"matrix: expected a square n x n matrix, got shape {A.shape}")
    bad = np.argwhere(~np.isfinite(A))
    if bad.size:
        i, j = bad[0]
        raise InputError(f"matrix: entry ({i}, {j}) is {A[i, j]} ({len(bad)} non-finite entries): a NaN or infinite "
                         "kernel says the computation failed; nothing can be certified about it")
    e = float(abs_error) if isinstance(abs_error, (int, float)) and not isinstance(abs_error, bool) else math.nan
    if not (math.isfinite(e) and e >= 0):
        raise InputError(f"abs_error: expected a finite number >= 0, got {abs_error!r}")
    if rounding:
        e = float(np.nextafter(np.float64(e + rounding), np.inf))
    S = np.abs(A - A.T)
    skew = float(S.max())
    if skew > 2 * e:
        i, j = np.unravel_index(int(np.argmax(S)), S.shape)
        raise InputError(f"matrix: not symmetric: |A[{i},{j}] - A[{j},{i}]| = {skew:.3g} > 2 x abs_error = {2 * e:.3g}; "
                         f"pass abs_error >= {skew / 2:.3g} (--abs-error) to count the skew part as computation "
                         "error: the certificate then covers every symmetric matrix within that bound")
    return A, e, skew, rounding


def _integers(A: np.ndarray) -> tuple[fmpz_mat, int]:
    """``2^s A`` as an exact integer matrix (every double is an integer times a power of two)."""
    nz = A[A != 0]
    s = 0 if nz.size == 0 else max(0, 52 - int(np.frexp(nz)[1].min()) + 1)
    return fmpz_mat([[int(math.ldexp(v, s)) for v in row] for row in A.tolist()]), s


def _indefinite(A: np.ndarray, e: float, x: np.ndarray) -> bool:
    """Whether :math:`x^T A x + e\\|x\\|_1^2 < 0` exactly (integers over a common power of two)."""
    Ai, s = _integers(A)
    xi, t = _integers(x.reshape(-1, 1))
    q = (xi.transpose() * Ai * xi)[0, 0]  # = 2^(s + 2t) x^T A x, exactly
    l1 = sum(abs(int(v)) for v in xi.entries())  # = 2^t ||x||_1
    from fractions import Fraction

    return Fraction(int(q), 2 ** (s + 2 * t)) + Fraction(e) * Fraction(l1 * l1, 2 ** (2 * t)) < 0


def _not_positive(A: np.ndarray, e: float, lam: np.ndarray, vecs: np.ndarray, base: dict[str, Any],
                  refused: str) -> MatrixCertificate:
    """What can be proved when positivity is not: indefinite (a vector), singular (exact rank)."""
    n = A.shape[0]
    if lam[0] < 0 and _indefinite(A, e, vecs[:, 0]):
        return MatrixCertificate("certified indefinite", None, **base, method="exact-rayleigh", vector=vecs[:, 0],
                                 statement=f"x^T S x < 0 for every symmetric S within {e:g} of the matrix (x the float "
                                 "eigenvector of lambda_min, checked in exact arithmetic): not positive semidefinite")
    if e == 0 and n <= MAX_EXACT_RANK and abs(lam[0]) <= (n + 1) * U * float(np.sum(np.abs(lam))) * 4:
        r = _integers(A)[0].rank()
        if r < n:
            return MatrixCertificate("certified singular", None, **base, method="exact-rank", rank=int(r),
                                     statement=f"the exact matrix (its float64 values taken exactly) has rank {r} < {n}")
    return MatrixCertificate("not certified", None, **base, method="refused", statement=refused)


def certify_matrix(matrix: Any, *, abs_error: float = 0.0, tokens: Any = None) -> MatrixCertificate:
    r"""A rigorous lower bound on :math:`\lambda_{\min}` of a symmetric matrix computed elsewhere.

    Parameters
    ----------
    matrix : (n, n) array, or the path of a ``.npy`` / ``.npz`` file
        E.g. an empirical NTK :math:`J J^T` from neural-tangents, ``torch.func`` or JAX.
    abs_error : float
        An entrywise bound on the error of how it was computed: the certificate covers every
        symmetric ``S`` with :math:`|S_{ij} - A_{ij}| \le` ``abs_error``. 0: the numbers given.
    tokens : token samples or None
        The data the matrix was computed from (list of ``(N_i, d)`` arrays or laws): adds the
        dependence diagnosis (:class:`MatrixDiagnosis`).

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
    """
    A, e, skew, converted = _checked(matrix, abs_error)
    n = A.shape[0]
    C = (A + A.T) / 2  # exact when A is symmetric (a + a = 2a); else rounded: counted below
    rounding = 0.0 if skew == 0 else n * U * float(np.abs(C).max())
    radius = (n * e + rounding) * (1 + 1e-10)
    lam, vecs = np.linalg.eigh(C)
    resolution = (n + 1) * U * float(np.sum(np.abs(np.diagonal(C))))
    base = {"lambda_min_float": float(lam[0]), "lambda_max_float": float(lam[-1]), "n": n, "abs_error": e,
            "skew": skew, "radius": radius, "below_resolution": bool(lam[0] <= resolution + radius),
            "rounding": converted}
    pc = certify_gram_enclosure(C, radius)
    if pc.positive:
        out = MatrixCertificate("certified positive", pc.lower_bound, **base, method=pc.method, shift=pc.shift,
                                statement=f"lambda_min >= {pc.lower_bound:.6g} for "
                                + (f"every symmetric matrix within {e:g} of the matrix, entry by entry"
                                   if e else "the matrix as given") + f": {pc.statement}")
    else:
        out = _not_positive(A, e, lam, vecs, base, pc.statement)
    from dataclasses import replace

    if converted:
        out = replace(out, statement=f"{out.statement} (entries that are not float64 numbers were rounded to "
                      f"float64, moving none by more than {converted:.3g}: abs_error includes that rounding, so "
                      "the verdict covers the numbers given)")
    if tokens is None:
        return out

    return replace(out, diagnosis=diagnose(tokens, out))


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
