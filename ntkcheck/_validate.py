"""Validation of user data where it enters, and the exact value of every number given.

Input semantics (``theory/certificates.md``, "Inputs: exact, refused or rounded"): every
number a user gives has an exact rational value. Floats are dyadic rationals; Python ints,
``Fraction``, ``Decimal``, decimal strings (where text is read), numpy integer arrays and
``np.longdouble`` arrays are exact too, but not always doubles (int64 beyond 2^53, 1/10,
long doubles with 64-bit mantissas). :func:`real_values` returns the nearest doubles (the
float64 view the float routes compute with) together with the exact values whenever the two
differ; the exact engines and the certificates work with the exact values, and a result
built from a rounded float64 view says so.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from numbers import Rational, Real
from typing import Any, TypeVar

import numpy as np
from flint import fmpq

from ._budget import Budget, scope
from .errors import DomainError, InputError

__all__ = [
    "as_token_set", "as_token_values", "as_samples", "as_exact_samples", "check_score_range",
    "SCORE_LIMIT", "rational_direction", "as_arguments", "to_fraction", "to_fmpq", "real_values", "exact_rows",
    "as_budget", "within_time_budget",
]

_KINDS = {"c": "complex", "b": "boolean", "U": "string", "S": "bytes", "O": "object", "V": "structured",
          "M": "datetime", "m": "timedelta"}


def _is_real(v: Any) -> bool:
    return isinstance(v, (Real, Decimal, Fraction)) and not isinstance(v, (bool, np.bool_))


def real_values(raw: Any, name: str, what: str = "numbers") -> tuple[np.ndarray, np.ndarray | None]:
    """The float64 view of a real array and, when it differs from the values given, the exact values.

    Returns ``(view, exact)``: ``view`` holds the nearest doubles (correctly rounded); ``exact``
    is None when every value is a double (floats of any width up to 64 bits, integers up to
    2^53, dyadic ``Fraction``s), else an array of the same shape holding the exact values:
    the given ``np.longdouble`` or integer array itself, or an object array of ``Fraction``.
    Non-finite values are left in the view for the caller to report; complex, boolean,
    string and other non-numeric arrays are refused, as are values beyond the float64 range.
    """
    arr = raw if isinstance(raw, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(raw)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{name}: expected an array of {what}, got {type(raw).__name__} ({exc})") from None
    kind = arr.dtype.kind
    if kind == "O":
        return _object_values(arr, name, what)
    if kind not in "iuf":
        kind_name = _KINDS.get(kind, str(arr.dtype))
        raise InputError(f"{name}: expected real {what}, got a {kind_name} array (dtype {arr.dtype}); convert them first")
    with np.errstate(over="ignore", invalid="ignore"):
        view = arr.astype(np.float64, copy=False)
    if kind == "f":
        if arr.dtype.itemsize <= 8:
            return view, None
        _check_range(arr, view, name)
        finite = np.isfinite(arr)
        same = np.array_equal(view[finite].astype(arr.dtype), arr[finite])
        return view, None if same else arr.copy()
    if arr.dtype.itemsize <= 4 or arr.size == 0:
        return view, None
    big = np.abs(view) > 2.0**53
    if not np.any(big):
        return view, None
    exact = all(int(v) == int(f) for v, f in zip(arr[big].tolist(), view[big].tolist(), strict=True))
    return view, None if exact else arr.copy()


def _check_range(arr: np.ndarray, view: np.ndarray, name: str) -> None:
    over = np.isfinite(arr) & ~np.isfinite(view)
    if np.any(over):
        top = np.format_float_scientific(np.max(np.abs(arr[over])), precision=3)
        raise InputError(f"{name}: a value ({top}) is beyond the float64 range (1.8e308)")


def _object_values(arr: np.ndarray, name: str, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """An object array (Fractions, Python ints, Decimals, long doubles, floats): exact values and nearest doubles."""
    flat = arr.reshape(-1)
    if flat.size == 0 or not all(_is_real(v) for v in flat):
        bad = next((v for v in flat if not _is_real(v)), None)
        got = "an empty array" if flat.size == 0 else f"{type(bad).__name__} {bad!r}"
        raise InputError(f"{name}: expected real {what}, got {got} in an object array; convert them first")
    view = np.empty(flat.shape, dtype=np.float64)
    fracs = np.empty(flat.shape, dtype=object)
    rounded = False
    for k, v in enumerate(flat):
        if not _finite(v):
            view[k], fracs[k] = float(v), None
            continue
        f = to_fraction(v)
        try:
            x = float(f)  # int / int true division: correctly rounded
        except OverflowError:
            raise InputError(f"{name}: a value ({float(f) if abs(f) < 10**400 else 'above 1e400'}) is beyond the "
                             "float64 range (1.8e308)") from None
        view[k], fracs[k] = x, f
        rounded = rounded or Fraction(x) != f
    return view.reshape(arr.shape), fracs.reshape(arr.shape) if rounded else None


def exact_rows(exact: np.ndarray) -> list[tuple[Fraction, ...]]:
    """The rows of an exact array from :func:`real_values` as tuples of ``Fraction``."""
    return [tuple(to_fraction(v) for v in row) for row in exact.reshape(exact.shape[0], -1)]


def as_token_values(atoms: Any, name: str = "tokens", dim: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``atoms`` as a finite float64 array of shape ``(N, d)``, ``N >= 1``, and its exact values
    (None when the doubles are the values given; :func:`real_values`).

    A 1-D array of length ``N`` is read as ``N`` tokens in dimension 1 only when
    ``dim == 1``; otherwise it is ambiguous and rejected.
    """
    arr, exact = real_values(atoms, name, "numeric tokens")
    if arr.ndim == 1 and dim == 1:
        arr = arr[:, None]
        exact = None if exact is None else exact[:, None]
    if arr.ndim != 2:
        raise InputError(f"{name}: expected an array of shape (N, d), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise InputError(f"{name}: the sample is empty (shape {arr.shape}); every sample needs at least one token")
    if arr.shape[1] == 0:
        raise InputError(f"{name}: tokens have dimension 0 (shape {arr.shape})")
    if dim is not None and arr.shape[1] != dim:
        raise InputError(f"{name}: tokens have dimension {arr.shape[1]}, expected {dim}")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InputError(
            f"{name}: token {int(bad[0])} has a non-finite entry ({float(arr[tuple(bad)])} at coordinate {int(bad[1])})"
        )
    return arr, exact


def as_token_set(atoms: Any, name: str = "tokens", dim: int | None = None) -> np.ndarray:
    """Return ``atoms`` as a finite float64 array of shape ``(N, d)`` with ``N >= 1`` (the nearest
    doubles; :func:`as_token_values` also returns the exact values when they differ).

    A 1-D array of length ``N`` is read as ``N`` tokens in dimension 1 only when
    ``dim == 1``; otherwise it is ambiguous and rejected.
    """
    return as_token_values(atoms, name, dim)[0]


def as_samples(samples: Any) -> list[np.ndarray]:
    """Return a list of ``n >= 1`` validated token sets of one common dimension, as float64, for the
    float64 simulations (dynamics). A value that is not a double is refused rather than rounded
    silently (:func:`as_exact_samples` keeps such values for the exact engines).

    Accepts an array of shape ``(n, N, d)`` or a sequence of ``(N_i, d)`` arrays
    (ragged sample lengths are valid).
    """
    out = []
    for i, (x, ex) in enumerate(_sample_values(samples)):
        if ex is not None:
            k = next(k for k, (a, b) in enumerate(zip(x.reshape(-1), ex.reshape(-1), strict=True))
                     if Fraction(float(a)) != to_fraction(b))
            raise InputError(f"sample {i}: token value {ex.reshape(-1)[k]!r} is not a double and this computation runs "
                             "in float64; convert the tokens explicitly (np.asarray(x, dtype=float)) to accept their "
                             "nearest doubles")
        out.append(x)
    return out


def as_exact_samples(samples: Any) -> list[np.ndarray]:
    """:func:`as_samples` keeping every value given: a sample is float64 when its values are
    doubles, else its exact values (the given long-double or integer array, or an object array
    of ``Fraction``; :func:`real_values`)."""
    return [x if ex is None else ex for x, ex in _sample_values(samples)]


def _sample_values(samples: Any) -> list[tuple[np.ndarray, np.ndarray | None]]:
    if isinstance(samples, np.ndarray) and samples.dtype != object:
        if samples.ndim != 3:
            raise InputError(f"samples: expected shape (n, N, d) or a list of (N_i, d) arrays, got shape {samples.shape}")
        seq: Sequence[Any] = list(samples)
    elif isinstance(samples, Sequence) or isinstance(samples, np.ndarray):
        seq = list(samples)
    else:
        raise InputError(f"samples: expected a list of (N_i, d) arrays, got {type(samples).__name__}")
    if len(seq) == 0:
        raise InputError("samples: no samples were given (need at least one)")
    out = [as_token_values(s, name=f"sample {i}") for i, s in enumerate(seq)]
    dims = [s.shape[1] for s, _ in out]
    if len(set(dims)) > 1:
        d0 = dims[0]
        i = next(k for k, dk in enumerate(dims) if dk != d0)
        raise InputError(f"sample {i} has dimension {dims[i]}, the others have {d0}")
    return out


#: largest score bound accepted: leaves room for the sums inside a matmul below float64's 1.8e308
SCORE_LIMIT = 1e300


def check_score_range(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> None:
    """Refuse heads and tokens whose attention scores ``<Q x + b, y>`` could overflow float64.

    The scores are bounded by ``(max_h ||Q_h||_F R + max_h |b_h|) R`` with ``R`` the largest
    token norm; past :data:`SCORE_LIMIT` a matmul can produce inf and then NaN, so the
    input is rejected with the bound instead of a LinAlgError from deep inside numpy.
    """
    def max_norm(rows: np.ndarray) -> float:
        scale = float(np.max(np.abs(rows))) if rows.size else 0.0
        return 0.0 if scale == 0 else scale * float(np.max(np.linalg.norm(rows / scale, axis=1)))

    with np.errstate(over="ignore", invalid="ignore"):
        R = max(max_norm(s) for s in samples)
        q = max_norm(Q.reshape(Q.shape[0], -1))
        bn = max_norm(b.reshape(b.shape[0], -1))
        bound = (q * R + bn) * R
    if not np.isfinite(bound) or bound > SCORE_LIMIT:
        raise InputError(
            f"attention scores <Q x + b, y> can reach {bound:.1e} (token norm up to {R:.1e}, |Q| up to {q:.1e}), "
            "beyond float64; rescale the tokens or the heads"
        )


def _finite(v: Any) -> bool:
    if isinstance(v, Decimal):
        return v.is_finite()
    if isinstance(v, (float, np.floating)):
        return bool(np.isfinite(v))
    return True


def to_fraction(x: Any) -> Fraction:
    """The exact rational value of ``x``: a float (any numpy width, long double included) is the
    dyadic rational it is, a decimal string or ``Decimal`` its decimal value (``"0.1"`` is 1/10),
    an integer of any size itself. Raises ``TypeError`` for a value without an exact real value
    (complex numbers, ``None``) instead of rounding it through ``float``."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, fmpq):
        return Fraction(int(x.p), int(x.q))
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, str):
        return Fraction(x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return to_fraction(x[()])
    if isinstance(x, (float, np.floating, Decimal)):
        if not _finite(x):
            raise InputError(f"cannot take the exact value of the non-finite number {x!r}")
        return Fraction(*x.as_integer_ratio())
    if isinstance(x, Rational):
        return Fraction(int(x.numerator), int(x.denominator))
    if hasattr(x, "_mpf_"):  # an mpmath number: sign, mantissa, exponent
        import mpmath

        if not mpmath.isfinite(x):
            raise InputError(f"cannot take the exact value of the non-finite number {x!r}")
        man, exp = mpmath.mpf(x).man_exp
        return Fraction(int(man)) * Fraction(2) ** int(exp)
    if getattr(x, "is_Rational", False):  # a sympy Rational
        return Fraction(int(x.p), int(x.q))
    raise TypeError(f"{x!r} ({type(x).__name__}) has no exact real value; give an int, Fraction, float or "
                    "decimal string")


def to_fmpq(x: Any) -> fmpq:
    """The exact rational value of ``x`` as a FLINT ``fmpq``."""
    f = to_fraction(x)
    return fmpq(f.numerator, f.denominator)


def rational_direction(w: Any, dim: int) -> tuple[Fraction, ...]:
    """A non-zero direction of length ``dim`` as exact rationals (floats at their dyadic value,
    decimal strings like ``"1.01"`` exactly)."""
    try:
        raw = list(np.asarray(w, dtype=object).reshape(-1)) if not isinstance(w, (list, tuple)) else list(w)
        wf = tuple(to_fraction(v) for v in raw)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise InputError(f"direction: expected {dim} numbers, got {w!r} ({exc})") from None
    if len(wf) != dim:
        raise InputError(f"direction: has length {len(wf)}, the tokens have dimension {dim}")
    if all(v == 0 for v in wf):
        raise InputError("direction: has zero length; a direction must be non-zero")
    return wf


def as_arguments(a: Any, dim: int) -> tuple[np.ndarray, bool]:
    """CGF arguments ``a`` of shape ``(dim,)`` or ``(m, dim)`` as a finite ``(m, dim)`` array,
    and whether a single point was given."""
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"a: expected a float array of shape ({dim},) or (m, {dim}), got {a!r}") from None
    single = arr.ndim == 1
    arr2 = arr.reshape(1, -1) if single else arr
    if arr2.ndim != 2 or arr2.shape[1] != dim:
        raise InputError(f"a: expected shape ({dim},) or (m, {dim}), got {arr.shape}")
    if not np.all(np.isfinite(arr2)):
        raise InputError("a: has a non-finite entry")
    return arr2, single


def as_budget(time_budget: Any, name: str = "time_budget") -> Budget:
    """``time_budget`` as a :class:`~ntkcheck._budget.Budget` starting now: a positive finite number of
    seconds, ``None`` (no limit) or a ``Budget`` already running (shared by several calls)."""
    if isinstance(time_budget, Budget) or time_budget is None:
        return Budget(None) if time_budget is None else time_budget
    if isinstance(time_budget, bool) or not isinstance(time_budget, (int, float, np.integer, np.floating)):
        raise DomainError(f"{name}: expected a number of seconds, a Budget or None, got {time_budget!r}")
    t = float(time_budget)
    if not (t > 0 and np.isfinite(t)):
        raise DomainError(f"{name}: expected a positive finite number of seconds or None, got {time_budget!r}")
    return Budget(t)


_F = TypeVar("_F", bound=Callable[..., Any])


def within_time_budget(func: _F) -> _F:
    """Run ``func`` under its ``time_budget`` keyword (validated by :func:`as_budget`, its default
    when not given): one :func:`ntkcheck._budget.scope` shared by every step below it, so that a
    decision, a Gram or an optional step inside never runs past it."""
    default = inspect.signature(func).parameters["time_budget"].default

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with scope(as_budget(kwargs.get("time_budget", default))):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
