"""Validation of user token data. Every public entry point funnels its input through here."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from flint import fmpq

from .errors import InputError

__all__ = [
    "as_token_set", "as_samples", "as_direction", "check_score_range", "SCORE_LIMIT", "rational_direction", "as_arguments",
    "to_fraction", "to_fmpq",
]


def as_token_set(atoms: Any, name: str = "tokens", dim: int | None = None) -> np.ndarray:
    """Return ``atoms`` as a finite float64 array of shape ``(N, d)`` with ``N >= 1``.

    A 1-D array of length ``N`` is read as ``N`` tokens in dimension 1 only when
    ``dim == 1``; otherwise it is ambiguous and rejected.
    """
    raw = atoms if isinstance(atoms, np.ndarray) else None
    if raw is None:
        try:
            raw = np.asarray(atoms)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{name}: expected a numeric array of shape (N, d), got {type(atoms).__name__} ({exc})") from None
    if raw.dtype.kind not in "iuf" and not (raw.dtype == object and raw.size and _all_real(raw)):
        what = {"c": "complex", "b": "boolean", "U": "string", "S": "bytes", "O": "object"}.get(raw.dtype.kind, str(raw.dtype))
        raise InputError(f"{name}: expected real numeric tokens, got a {what} array (dtype {raw.dtype}); convert them first")
    try:
        with np.errstate(over="ignore"):
            arr = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"{name}: expected a numeric array of shape (N, d), got {type(atoms).__name__} ({exc})") from None
    if arr.ndim == 1 and dim == 1:
        arr = arr[:, None]
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
    return arr


def _all_real(arr: np.ndarray) -> bool:
    """An object array (ragged input, Fractions, Python ints) holding only real numbers."""
    from fractions import Fraction as _F
    from numbers import Real

    return all(isinstance(v, (Real, _F)) and not isinstance(v, (bool, np.bool_)) for v in arr.reshape(-1))


def as_samples(samples: Any) -> list[np.ndarray]:
    """Return a list of ``n >= 1`` validated token sets of one common dimension.

    Accepts an array of shape ``(n, N, d)`` or a sequence of ``(N_i, d)`` arrays
    (ragged sample lengths are valid).
    """
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
    out = [as_token_set(s, name=f"sample {i}") for i, s in enumerate(seq)]
    dims = [s.shape[1] for s in out]
    if len(set(dims)) > 1:
        d0 = dims[0]
        i = next(k for k, dk in enumerate(dims) if dk != d0)
        raise InputError(f"sample {i} has dimension {dims[i]}, the others have {d0}")
    return out


def as_direction(direction: Any, dim: int) -> np.ndarray:
    """Return ``direction`` as a finite non-zero float64 vector of length ``dim``."""
    try:
        w = np.asarray(direction, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"direction: expected {dim} numbers, got {direction!r}") from None
    if w.shape[0] != dim:
        raise InputError(f"direction: has length {w.shape[0]}, the tokens have dimension {dim}")
    if not np.all(np.isfinite(w)):
        raise InputError(f"direction: has a non-finite entry: {w.tolist()}")
    if not np.any(w != 0):
        raise InputError("direction: has zero length; a direction must be non-zero")
    return w


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


def to_fraction(x: Any) -> Fraction:
    """The exact rational value of ``x`` (a float is read as the dyadic rational it is)."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, fmpq):
        return Fraction(int(x.p), int(x.q))
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, str):
        return Fraction(x)
    xf = float(x)
    if not np.isfinite(xf):
        raise InputError(f"cannot take the exact value of the non-finite number {x!r}")
    return Fraction(xf)


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
