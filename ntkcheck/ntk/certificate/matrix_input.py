r"""A matrix or Jacobian made elsewhere, as the certificates read it: exact, scaled, with its error bound.

:func:`prepare` validates the array once into a :class:`PreparedMatrix` that every later step
of :func:`~ntkcheck.ntk.certificate.user_matrix.certify_matrix` and
:func:`~ntkcheck.ntk.certificate.jacobian.certify_jacobian` reads:

* **exact values.** float16/32/64 and integers up to :math:`2^{53}` become float64 exactly; other
  integers and long doubles are rounded, and the largest change (``rounding``) joins the error
  bound, so a verdict is about the numbers given;
* **a power-of-two scale.** An array whose largest entry is outside :math:`[2^{-400}, 2^{400})` is
  multiplied by :math:`2^{-E}` so that its largest entry lies in :math:`[1/2, 1)`: exact (a power
  of two), except for entries pushed into the subnormal range when :math:`E > 0`, whose rounding
  (at most :math:`2^{-1075}` each, checked entry by entry) joins the error bound. Every sum,
  product and Cholesky then stays far from overflow (``diag(1e308, 1e308)`` is an ordinary positive
  definite matrix), and results are scaled back by :math:`2^{E}` (eigenvalues of a matrix;
  :math:`2^{2E}` for the Gram of a Jacobian), rounded the safe way. Inside that range the array is
  used as it is (``diag(1e-300, 1e10)`` keeps its exact entries);
* **the error bound** ``e`` (entrywise): the user's ``abs_error`` when given; else 0 for float64
  and integer input (the numbers themselves) and :math:`64\,u\max|A|` for float32 (``u = 2^-24``)
  and float16 (``u = 2^-11``) input, an assumption said in the result: a float32 computation of
  :math:`JJ^T` has entry errors of at most :math:`\gamma_m |J_i|\cdot|J_j| \le m u \sqrt{A_{ii}A_{jj}}`
  for ``m`` parameters (Cauchy-Schwarz), a few dozen ``u`` for blocked or pairwise sums, and ``m``
  is not in the file. A float32 array whose entries all have sixteen zero low bits may hold
  bfloat16 values (``u = 2^-8``) that cannot be told from float32 ones: the result says so;
* **symmetry** (a matrix): a float :math:`JJ^T` summed in two orders is not exactly symmetric.
  The certificate covers every symmetric ``S`` with :math:`|S_{ij} - A_{ij}| \le e`, which exists
  only when the exact skew :math:`\max_{ij}|A_{ij} - A_{ji}| \le 2e`: without ``abs_error`` the bound
  is raised to half the skew (rounded up; no symmetric matrix lies closer to the file) when the skew
  is at the rounding level of the dtype (at most :math:`1024\,u \max|A|`); a larger skew, or an
  ``abs_error`` below half of it, is refused with the value that works. The comparison is exact (rationals
  where the float difference is within rounding of the boundary), never a float64 ``>``.

References: N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Sec. 3.1
(the :math:`\gamma_k` bounds); ``theory/certificates.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..._memory import require_memory
from ...errors import InputError

__all__ = ["PreparedMatrix", "prepare", "load_matrix", "DEFAULT_ULPS", "decimal_up", "round_fraction"]

U = 2.0**-53
#: the default entrywise error of a float32 / float16 array, in units of its rounding times max|A|
DEFAULT_ULPS = 64
#: unit roundoff of the dtypes whose default error bound is not 0
_UNIT = {"float16": 2.0**-11, "float32": 2.0**-24, "bfloat16": 2.0**-8}
#: a skew up to this many units of the dtype's rounding times max|A| is what two summation orders of a
#: float J J^T leave: taken into the error bound by default (larger ones need an explicit abs_error)
SKEW_ULPS = 1024
#: what ``precision`` may name
PRECISIONS = ("float64", "float32", "float16", "bfloat16")
#: how a .pt / .safetensors tensor is saved as an array this reads
_SAVE_HINT = ("save it with numpy.save('K.npy', tensor.detach().cpu().double().numpy()) (or ntkcheck certify reads "
              ".pt files written by torch.save when torch is installed)")


def load_matrix(path: str | Path) -> np.ndarray:
    """A matrix from ``.npy`` (one 2-D array) or ``.npz`` (exactly one array), never unpickled."""
    import zipfile

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such matrix file" if not p.exists() else f"{p}: not a regular file")
    if p.suffix.lower() in (".pt", ".pth", ".safetensors"):
        raise InputError(f"{p}: a {p.suffix} file is read by the command line (ntkcheck certify); here, {_SAVE_HINT}")
    try:
        z = np.load(p, allow_pickle=False)
    except ValueError:
        raise InputError(f"{p}: holds Python objects, not numbers: {_SAVE_HINT}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{p}: not a readable .npy or .npz matrix file ({exc})") from None
    if isinstance(z, np.ndarray):
        return z
    with z:
        if len(z.files) != 1:
            raise InputError(f"{p}: expected one array in the .npz file, found {len(z.files)}")
        try:
            return z[z.files[0]]
        except ValueError:
            raise InputError(f"{p}: the array holds Python objects, not numbers: {_SAVE_HINT}") from None


def decimal_up(x: Fraction | float) -> str:
    """The shortest decimal whose double is the smallest double at least ``x``: a value printed for the
    user to pass back that works when passed back (a comparison with it is exact).

    Examples
    --------
    >>> decimal_up(Fraction(1, 3))
    '0.33333333333333337'
    >>> decimal_up(2.0**-51)
    '4.440892098500626e-16'
    """
    return repr(round_fraction(Fraction(x), down=False))


def round_fraction(q: Fraction, *, down: bool) -> float:
    """The double next to the rational ``q`` on the safe side: the largest at most ``q`` (``down``) or the
    smallest at least ``q``; beyond the float64 range, the largest double or an infinity."""
    try:
        f = float(q)
    except OverflowError:
        big = float(np.finfo(np.float64).max)
        if q > 0:
            return big if down else math.inf
        return -math.inf if down else -big
    if down and Fraction(f) > q:
        f = float(np.nextafter(f, -np.inf))
    elif not down and Fraction(f) < q:
        f = float(np.nextafter(f, np.inf))
    return f


@dataclass(frozen=True)
class PreparedMatrix:
    r"""The array of a certificate, validated once.

    Attributes
    ----------
    A : (n, n) or (n, p) float64 array
        :math:`2^{-E}` times the array given (after the float64 conversion), its largest entry in
        :math:`[1/2, 1)` (all zero: unscaled).
    exponent : int
        ``E``.
    error : float
        The entrywise error bound in the scaled units (``e 2^{-E}``, rounded up; the conversion and
        scaling roundings included).
    abs_error : float
        The same in the units of the file (what the result reports).
    skew : float
        The exact :math:`\max|A_{ij} - A_{ji}|` of the file (rounded up; 0 for a Jacobian).
    rounding : float
        Largest change of an entry by the conversion to float64.
    dtype : str
        The dtype of the array given.
    notes : tuple of str
        How the error bound was set (a default, the skew, the rounding), in sentences.
    """

    A: np.ndarray
    exponent: int
    error: float
    abs_error: float
    skew: float
    rounding: float
    dtype: str
    notes: tuple[str, ...]

    def to_user(self, value: float | None, power: int = 1, *, down: bool | None = None) -> float | None:
        """``value 2^{power E}`` (an eigenvalue of the scaled matrix, ``power = 2`` for the Gram of a
        scaled Jacobian) in the file's units, rounded down (a lower bound), up (an upper bound) or to
        nearest (``down=None``: an estimate; beyond the float64 range, an infinity)."""
        if value is None:
            return None
        if down is None:
            try:
                return math.ldexp(value, power * self.exponent)
            except OverflowError:
                return math.copysign(math.inf, value)
        return _ldexp_safe(value, power * self.exponent, down=down)


def _ldexp_safe(value: float, k: int, *, down: bool) -> float:
    """``value 2^k`` as a double rounded down or up (beyond the float64 range: the largest double or inf)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round_fraction(Fraction(value) * Fraction(2) ** k, down=down)


def _as_float64(A: np.ndarray) -> tuple[np.ndarray, float]:
    """The array as float64 (no copy when it is one) and an upper bound on the largest entry moved
    by the conversion (0 when every entry is a double: float16/32/64 and integers up to 2^53)."""
    F = np.asarray(A, dtype=np.float64)
    r = 0.0
    if A.dtype.kind in "iu":
        flat = A.ravel()
        bad = np.nonzero((flat > 2**53) | (flat < -(2**53)))[0] if A.size else np.zeros(0, int)
        r = float(max((abs(int(flat[k]) - int(F.flat[k])) for k in bad), default=0))
    elif A.dtype.itemsize > 8:  # long double: the rounding error is exact in long double
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(A - F.astype(A.dtype))
        r = float(np.nanmax(err)) if np.any(err > 0) else 0.0
    return F, float(np.nextafter(np.float64(r), np.inf)) if r else 0.0


def _checked_array(matrix: Any, kind: str) -> np.ndarray:
    A = load_matrix(matrix) if isinstance(matrix, (str, Path)) else np.asarray(matrix)
    if A.dtype.kind not in "iuf":
        raise InputError(f"{kind}: expected real numbers, got dtype {A.dtype}")
    if kind == "matrix" and (A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0):
        raise InputError(f"matrix: expected a square n x n matrix, got shape {A.shape}")
    if kind == "jacobian" and (A.ndim != 2 or 0 in A.shape):
        raise InputError(f"jacobian: expected a 2-D array (outputs, parameters), got shape {A.shape}: reshape it "
                         "to one row per output (each token and output coordinate) and one column per parameter")
    require_memory(3.0 * A.size * 8, f"the {kind} as float64 ({' x '.join(map(str, A.shape))})",
                   "the size of the matrix (or raise NTKCHECK_MEMORY_LIMIT)")
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(A)
    if not finite.all():
        i, j = (int(v) for v in np.argwhere(~finite)[0])
        raise InputError(f"{kind}: entry ({i}, {j}) is {A[i, j]} ({int((~finite).sum())} non-finite entries): a "
                         "NaN or infinite kernel says the computation failed; nothing can be certified about it")
    return A


#: the array is scaled only when its largest entry is outside [2^-SCALE_RANGE, 2^SCALE_RANGE): sums of
#: n^2 products of such entries stay finite and normal, and a matrix in that range is used exactly
SCALE_RANGE = 400


def _scaled(F: np.ndarray) -> tuple[np.ndarray, int, float]:
    """``(2^-E F, E, r)``: ``E = 0`` unless the largest entry is outside ``[2^-400, 2^400)``, then the largest
    entry lands in [1/2, 1) (exact when scaling up); ``r`` bounds the rounding of entries that scaling down
    pushed below the normal range (0 when it is exact, checked entry by entry)."""
    top = max(float(np.max(F)), -float(np.min(F)))
    if top == 0 or 2.0**-SCALE_RANGE <= top < 2.0**SCALE_RANGE:
        return F, 0, 0.0
    E = math.frexp(top)[1]
    with np.errstate(under="ignore"):
        S = np.ldexp(F, -E)
    r = 0.0
    if E > 0:
        small = (S != 0) & (np.abs(S) < 2.0**-1022) | ((S == 0) & (F != 0))
        if np.any(small) and not np.array_equal(np.ldexp(S[small], E), F[small]):
            r = 2.0**-1074  # entries now subnormal: rounded by at most half their spacing 2^-1074
    return S, E, r


def _exact_skew(A: np.ndarray) -> Fraction:
    r"""The exact :math:`\max_{ij} |A_{ij} - A_{ji}|` of a float matrix with entries below :math:`2^{400}`: the
    float differences are within a relative ``u`` of the exact ones, so only those near the float maximum are
    recomputed in rationals."""
    with np.errstate(under="ignore"):
        D = np.abs(A - A.T)
    top = float(D.max())
    if top == 0:
        return Fraction(0)
    near = np.argwhere(D >= top * (1 - 4 * U))
    return max(abs(Fraction(float(A[i, j])) - Fraction(float(A[j, i]))) for i, j in near)


def _bfloat16_note(A: np.ndarray) -> tuple[str, ...]:
    if A.dtype != np.float32 or A.size < 4:
        return ()
    bits = A.view(np.uint32)
    if np.any(bits & 0xFFFF) or np.all(A == np.round(A)):
        return ()
    return ("every entry is a bfloat16 number (its 16 low bits are zero): if it was computed in bfloat16 "
            "(u = 2^-8), pass --abs-error for that precision; the float32 default assumes float32 arithmetic",)


def prepare(matrix: Any, abs_error: Any, kind: str, precision: str | None = None) -> PreparedMatrix:
    """Validate a matrix (``kind="matrix"``, square) or a Jacobian (``kind="jacobian"``, ``(n, p)``) and
    its error bound into a :class:`PreparedMatrix`, or raise :class:`~ntkcheck.errors.InputError`.
    ``precision`` names the arithmetic the values were computed in when the dtype does not say it
    (bfloat16 values held as float32): it sets the default error bound."""
    if precision is not None and precision not in PRECISIONS:
        raise InputError(f"precision: expected one of {', '.join(PRECISIONS)} or None, got {precision!r}")
    given = abs_error is not None
    if given:
        e_user = float(abs_error) if isinstance(abs_error, (int, float)) and not isinstance(abs_error, bool) else math.nan
        if not (math.isfinite(e_user) and e_user >= 0):
            raise InputError(f"abs_error: expected a finite number >= 0 or None, got {abs_error!r}")
    raw = _checked_array(matrix, kind)
    F, rounding = _as_float64(raw)
    if not np.all(np.isfinite(F)):
        raise InputError(f"{kind}: entries beyond the float64 range (about 1.8e308) cannot be certified here")
    A, E, r_scale = _scaled(F)
    notes: list[str] = []
    dtype = precision or str(raw.dtype)
    if given:
        e = Fraction(e_user)
    elif dtype in _UNIT:
        e = Fraction(DEFAULT_ULPS * _UNIT[dtype]) * Fraction(float(np.max(np.abs(A)))) * Fraction(2) ** E
        notes.append(f"abs_error defaults to {DEFAULT_ULPS} u max|A| = {float(e):.3g} for {dtype} input (u = "
                     f"2^{round(math.log2(_UNIT[dtype]))}: the error of a {dtype} computation is not in the file; pass "
                     "--abs-error to state it)")
        notes.extend(_bfloat16_note(raw) if precision is None else ())
    else:
        e = Fraction(0)
    e += Fraction(rounding)
    if rounding:
        notes.append(f"entries that are not float64 numbers were rounded to float64, moving none by more than "
                     f"{rounding:.3g}: abs_error includes that rounding, so the verdict covers the numbers given")
    skew = Fraction(0)
    if kind == "matrix":
        skew = _exact_skew(A) * Fraction(2) ** E
        if skew > 2 * e:
            top = Fraction(float(np.max(np.abs(A)))) * Fraction(2) ** E
            level = SKEW_ULPS * Fraction(_UNIT.get(dtype, U)) * top
            if given or skew > level:
                why = (f"> 2 x abs_error = {2 * e_user!r}" if given else
                       f"(relative {float(skew / top):.2g}), more than the rounding of a {dtype} computation leaves "
                       f"({SKEW_ULPS} u max|A|)")
                raise InputError(
                    f"matrix: not symmetric: the largest |A_ij - A_ji| is {decimal_up(skew)} {why}; pass abs_error >= "
                    f"{decimal_up(skew / 2 - Fraction(rounding))} (--abs-error) to count the skew as computation "
                    "error: the certificate then covers every symmetric matrix within that bound")
            notes.append(f"abs_error raised to half the largest skew |A_ij - A_ji| = {float(skew):.3g}: no symmetric "
                         "matrix lies closer to the file (the skew of a float J J^T is part of its error)")
            e = skew / 2 + Fraction(rounding)
    if r_scale:
        e += Fraction(r_scale) * Fraction(2) ** E
    return PreparedMatrix(A, E, round_fraction(e / Fraction(2) ** E, down=False), round_fraction(e, down=False),
                          round_fraction(skew, down=False), rounding, dtype, tuple(notes))
