r"""Cumulant generating functions of empirical token distributions.

For an empirical law :math:`\mu = \sum_j w_j \delta_{x_j}` (weights summing to one),

.. math::

    \Lambda_\mu(a) = \log \sum_j w_j e^{\langle a, x_j\rangle}, \qquad
    \nabla\Lambda_\mu(a) = \sum_j \pi_j(a) x_j, \qquad
    \nabla^2\Lambda_\mu(a) = \sum_j \pi_j(a) (x_j - \bar x)(x_j - \bar x)^T,

with the tilted weights :math:`\pi_j(a) \propto w_j e^{\langle a, x_j\rangle}` (softmax of
the scores) and :math:`\bar x = \nabla\Lambda_\mu(a)`. Every evaluation subtracts the
largest score first, so scores of 1e4 and more do not overflow.

Taylor coefficients: :math:`\Lambda_\mu(t w) = \sum_{k\ge1} \kappa_k(\langle w, Y\rangle) t^k / k!`,
computed as the power series ``log(sum_j w_j exp(z_j t))`` exactly (FLINT ``fmpq_series``,
every float being a dyadic rational) or in Arb ball arithmetic (``arb_series``), which
measured faster and far more stable than the moment recursion (theory/cgf-independence.md).

References: seed 003 section 3.2 (the CGFs :math:`\Lambda_i`, :math:`\Lambda_i^w`), theory/cgf-independence.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction
from itertools import product as _iproduct
from math import gcd
from typing import Any

import mpmath
import numpy as np
from flint import arb, arb_series, fmpq, fmpq_series
from scipy.special import logsumexp

from .._precision import flint_cap, flint_prec, mp_dps
from .._validate import (
    as_arguments,
    as_token_set,
    as_token_values,
    exact_rows,
    rational_direction,
    to_fmpq,
    to_fraction,
)
from ..errors import DomainError, InputError, PrecisionError

__all__ = [
    "normalize_weights",
    "log_mgf",
    "cgf_gradient",
    "cgf_hessian",
    "log_mgf_mp",
    "taylor_1d_exact",
    "taylor_1d_arb",
    "series_log_mgf_exact",
    "series_log_mgf_arb",
    "cumulants_1d_exact",
    "joint_cumulants",
    "to_fraction",
    "to_fmpq",
]


# ----------------------------------------------------------------------------- helpers


def normalize_weights(weights: Any, n_atoms: int) -> np.ndarray:
    """Return ``weights`` as a float64 probability vector of length ``n_atoms``.

    ``None`` gives uniform weights ``1/N``. Weights must be finite, non-negative and not
    all zero; they are divided by their sum.
    """
    if weights is None:
        return np.full(n_atoms, 1.0 / n_atoms)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != n_atoms:
        raise InputError(f"weights: got {w.shape[0]} weights for {n_atoms} tokens")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError(f"weights: must be finite and non-negative, got {w.tolist()}")
    s = w.sum()
    if s <= 0:
        raise InputError("weights: all weights are zero")
    return w / s


def _scores(atoms: np.ndarray, a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        s = a @ atoms.T
    if not np.all(np.isfinite(s)):
        raise InputError(
            "the scores <a, x_j> overflow float64 (|a| |x| above ~1e308); rescale the tokens or the arguments"
        )
    return s


def _prepare(atoms: Any, a: Any, weights: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    x = as_token_set(atoms, "atoms")
    arr2, single = as_arguments(a, x.shape[1])
    w = normalize_weights(weights, x.shape[0])
    return x, arr2, w, single


# ------------------------------------------------------------------- float64 evaluation


def log_mgf(atoms: Any, a: Any, weights: Any = None) -> np.ndarray:
    r"""The CGF :math:`\Lambda_\mu(a) = \log\sum_j w_j e^{\langle a, x_j\rangle}` of an empirical law.

    Parameters
    ----------
    atoms : (N, d) float array
        The tokens :math:`x_j`.
    a : (d,) or (m, d) float array
        Argument(s).
    weights : (N,) float array, optional
        Non-negative weights, normalised to sum one (default ``1/N``).

    Returns
    -------
    float or (m,) float array

    Examples
    --------
    >>> import numpy as np
    >>> float(log_mgf(np.array([[0.0], [1.0]]), np.array([0.0])))
    0.0
    """
    x, arr, w, single = _prepare(atoms, a, weights)
    s = _scores(x, arr)
    out = logsumexp(s, axis=1, b=w[None, :])
    return out[0] if single else out


def _tilted(atoms: Any, a: Any, weights: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    x, arr, w, single = _prepare(atoms, a, weights)
    s = _scores(x, arr)
    with np.errstate(divide="ignore"):
        s = s + np.log(w)[None, :]
    s = s - s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)
    return x, p, single


def cgf_gradient(atoms: Any, a: Any, weights: Any = None) -> np.ndarray:
    r"""Gradient :math:`\nabla\Lambda_\mu(a)`: the softmax-weighted mean of the tokens.

    Returns (d,) for a single ``a``, (m, d) for a batch. Seed 003 eq. (1): this is the
    attention output before the value matrix.
    """
    x, p, single = _tilted(atoms, a, weights)
    g = p @ x
    return g[0] if single else g


def cgf_hessian(atoms: Any, a: Any, weights: Any = None) -> np.ndarray:
    r"""Hessian :math:`\nabla^2\Lambda_\mu(a)`: the covariance of the tokens under the tilted law.

    Returns (d, d) for a single ``a``, (m, d, d) for a batch.
    """
    x, p, single = _tilted(atoms, a, weights)
    mean = p @ x
    xc = x[None, :, :] - mean[:, None, :]
    h = np.einsum("mj,mjk,mjl->mkl", p, xc, xc)
    return h[0] if single else h


# -------------------------------------------------------------------- mpmath evaluation


def log_mgf_mp(atoms: Any, a: Any, weights: Any = None, dps: int = 50) -> mpmath.mpf:
    """:func:`log_mgf` at one point ``a`` in mpmath with ``dps`` decimal digits.

    The tokens, weights and ``a`` are taken at their exact binary values.
    """
    if dps < 5:
        raise PrecisionError(f"dps={dps} is too low to mean anything; use at least 5")
    x, ex = as_token_values(atoms, "atoms")
    try:
        av = [to_fraction(v) for v in np.asarray(a, dtype=object).reshape(-1)]
    except (TypeError, ValueError, InputError):
        av = []
    if len(av) != x.shape[1]:
        raise InputError(f"a: expected {x.shape[1]} finite numbers, got {a!r}")
    w = _exact_weights(weights, x.shape[0])

    def mpq(q: Fraction) -> mpmath.mpf:
        return mpmath.mpf(q.numerator) / q.denominator

    with mp_dps(dps + 10):
        scores = [mpmath.fsum(mpq(ak) * mpq(xk) for ak, xk in zip(av, row)) for row in exact_rows(x if ex is None else ex)]
        m = max(scores)
        if w is None:
            tot = mpmath.fsum(mpmath.exp(s - m) for s in scores) / len(scores)
        else:
            tot = mpmath.fsum(mpq(wj) * mpmath.exp(s - m) for wj, s in zip(w, scores)) / mpq(sum(w, Fraction(0)))
        val = m + mpmath.log(tot)
    with mp_dps(dps):
        return +val


# ------------------------------------------------------------ power series (exact / Arb)


def series_log_mgf_exact(z: Sequence[Any], weights: Sequence[Any] | None, K: int) -> list[fmpq]:
    r"""Exact Taylor coefficients ``c_0..c_K`` of :math:`t \mapsto \log\sum_j w_j e^{z_j t}`.

    ``z`` and ``weights`` are rationals (floats are read exactly); weights are normalised.
    """
    if K < 1:
        raise DomainError(f"K={K}: need at least order 1")
    zq = [to_fmpq(v) for v in z]
    if weights is None:
        wq = [fmpq(1, len(zq))] * len(zq)
    else:
        wq = [to_fmpq(v) for v in weights]
        tot = sum(wq, fmpq(0))
        wq = [v / tot for v in wq]
    # merge equal atoms: fewer exponentials, same series
    merged: dict[fmpq, fmpq] = {}
    for zj, wj in zip(zq, wq):
        if wj != 0:
            merged[zj] = merged.get(zj, fmpq(0)) + wj
    with flint_cap(K + 1):  # FLINT truncates every series at ctx.cap terms (default 10)
        acc = fmpq_series([0], prec=K + 1)
        for zj, wj in merged.items():
            acc += wj * fmpq_series([0, zj], prec=K + 1).exp()
        coeffs = acc.log().coeffs()
    return [fmpq(coeffs[k]) if k < len(coeffs) else fmpq(0) for k in range(K + 1)]


def series_log_mgf_arb(z: Sequence[Any], weights: Sequence[Any] | None, K: int, prec: int) -> list[arb]:
    r"""Ball enclosures of the Taylor coefficients ``c_0..c_K`` of :math:`\log\sum_j w_j e^{z_j t}`.

    The inputs are taken at their exact values (floats exactly, rationals as balls of
    radius below 2^-prec); the result is rigorous at working precision ``prec`` bits.
    """
    if prec < 20:
        raise PrecisionError(f"prec={prec} bits is too low to mean anything; use at least 20")
    with flint_prec(prec), flint_cap(K + 1):
        zq = [_arb_exact(v) for v in z]
        if weights is None:
            wq = [arb(1) / len(zq)] * len(zq)
        else:
            raw = [_arb_exact(v) for v in weights]
            tot = sum(raw, arb(0))
            wq = [v / tot for v in raw]
        acc = arb_series([0])
        for zj, wj in zip(zq, wq):
            acc += wj * arb_series([0, zj]).exp()
        coeffs = acc.log().coeffs()
        return [coeffs[k] if k < len(coeffs) else arb(0) for k in range(K + 1)]


def _arb_exact(v: Any) -> arb:
    if isinstance(v, arb):
        return v
    f = to_fraction(v)
    if f.denominator == 1:
        return arb(f.numerator)
    return arb(f.numerator) / f.denominator


def _project_exact(atoms: np.ndarray, w: Sequence[Any]) -> list[Fraction]:
    """Exact projections ``<w, x_j>`` of float atoms on a rational direction.

    Every float is ``M 2^s`` with an integer mantissa ``M``: the dot products are done in
    Python integers over a common power of two (Fractions would be 20x slower).
    """
    wf = [to_fraction(v) for v in w]
    D = 1
    for v in wf:
        D = D * v.denominator // gcd(D, v.denominator)
    W = [int(v * D) for v in wf]
    x = np.asarray(atoms, dtype=np.float64)
    mant, expo = np.frexp(x)
    M = (mant * 2.0**53).astype(np.int64)
    s = expo.astype(np.int64) - 53
    E = int(s[M != 0].min()) if np.any(M != 0) else 0
    shifts = (s - E).tolist()
    Ml = M.tolist()
    out = []
    for mrow, srow in zip(Ml, shifts):
        num = 0
        for mk, sk, wk in zip(mrow, srow, W):
            if mk and wk:
                num += (mk << sk) * wk
        out.append(Fraction(num, D << -E) if E < 0 else Fraction(num << E, D))
    return out


def _exact_weights(weights: Any, N: int) -> list[Fraction] | None:
    """Token weights at their exact values (normalised later, exactly, by the series), or None."""
    if weights is None:
        return None
    raw = list(np.asarray(weights, dtype=object).reshape(-1))
    if len(raw) != N:
        raise InputError(f"weights: got {len(raw)} weights for {N} tokens")
    try:
        out = [to_fraction(v) for v in raw]
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise InputError(f"weights: expected finite real numbers, got {raw!r} ({exc})") from None
    if any(v < 0 for v in out) or sum(out, Fraction(0)) == 0:
        raise InputError(f"weights: must be non-negative and not all zero, got {[str(v) for v in out]}")
    return out


def _projection(atoms: Any, w: Any) -> tuple[list[Fraction], int]:
    """Exact projections ``<w, x_j>`` of the tokens at their exact values, and the token count."""
    x, ex = as_token_values(atoms, "atoms")
    wv = list(rational_direction(w, x.shape[1]))
    if ex is None:
        return _project_exact(x, wv), x.shape[0]
    return [sum((wk * xk for wk, xk in zip(wv, row, strict=True)), Fraction(0)) for row in exact_rows(ex)], x.shape[0]


def taylor_1d_exact(atoms: Any, w: Any, K: int, weights: Any = None) -> list[fmpq]:
    r"""Exact Taylor coefficients ``c_0..c_K`` of :math:`\Lambda_\mu^w(t) = \Lambda_\mu(t w)`.

    The tokens, the weights and the direction are read at their exact values (floats as the
    dyadic rationals they are, ``Fraction``, integers and long doubles exactly), so this is
    the series of exactly the data given. ``c_k = kappa_k(<w, Y>) / k!``.
    """
    z, N = _projection(atoms, w)
    return series_log_mgf_exact(z, _exact_weights(weights, N), K)


def taylor_1d_arb(atoms: Any, w: Any, K: int, prec: int, weights: Any = None) -> list[arb]:
    """Ball enclosures of the Taylor coefficients ``c_0..c_K`` of ``Lambda_mu(t w)`` at ``prec`` bits
    (inputs at their exact values, as :func:`taylor_1d_exact`)."""
    z, N = _projection(atoms, w)
    return series_log_mgf_arb(z, _exact_weights(weights, N), K, prec)


def cumulants_1d_exact(atoms: Any, w: Any, K: int, weights: Any = None) -> list[Fraction]:
    r"""Exact cumulants :math:`\kappa_1, \dots, \kappa_K` of :math:`\langle w, Y\rangle`, ``Y ~ mu``.

    Examples
    --------
    >>> import numpy as np
    >>> [str(k) for k in cumulants_1d_exact(np.array([[0.0], [1.0]]), [1], 4)]
    ['1/2', '1/4', '0', '-1/8']
    """
    c = taylor_1d_exact(atoms, w, K, weights)
    out = []
    fact = 1
    for k in range(1, K + 1):
        fact *= k
        out.append(Fraction(int(c[k].p), int(c[k].q)) * fact)
    return out


# ------------------------------------------------------------------ joint cumulants


def _multi_indices(d: int, K: int) -> list[tuple[int, ...]]:
    """All multi-indices with ``1 <= |alpha| <= K`` in graded lexicographic order."""
    out: list[tuple[int, ...]] = []
    for k in range(1, K + 1):
        level = [alpha for alpha in _iproduct(range(k + 1), repeat=d) if sum(alpha) == k]
        out.extend(sorted(level, reverse=True))
    return out


def joint_cumulants(
    atoms: Any, K: int, weights: Any = None, exact: bool = False, max_terms: int = 20000
) -> tuple[list[tuple[int, ...]], list[Any]]:
    r"""Joint cumulants :math:`\kappa_\alpha = \partial^\alpha \Lambda_\mu(0)` for ``1 <= |alpha| <= K``.

    The symmetric cumulant tensors of orders ``1..K``, flattened to one entry per
    multi-index (the tensor entry at any index tuple with those multiplicities).
    Computed from the moments :math:`m_\alpha = E[Y^\alpha]/\alpha!` by the recursion
    :math:`\alpha_j m_\alpha = \sum_{0<\beta\le\alpha} \beta_j \ell_\beta m_{\alpha-\beta}`
    (the coefficients of :math:`\partial_j M = M \partial_j \Lambda`).

    Returns
    -------
    (indices, values) : the multi-indices in graded lexicographic order and the
        cumulants, as ``Fraction`` when ``exact`` else float.
    """
    x = as_token_set(atoms, "atoms")
    N, d = x.shape
    if K < 1:
        raise DomainError(f"K={K}: need at least order 1")
    idx = _multi_indices(d, K)
    if len(idx) > max_terms:
        raise DomainError(f"{len(idx)} multi-indices for d={d}, K={K} exceeds max_terms={max_terms}")
    wts = normalize_weights(weights, N)
    if exact:
        ex = as_token_values(atoms, "atoms")[1]
        X = exact_rows(x if ex is None else ex)
        raw_w = _exact_weights(weights, N)
        W = [Fraction(1, N)] * N if raw_w is None else [v / sum(raw_w, Fraction(0)) for v in raw_w]
        one, zero = Fraction(1), Fraction(0)
    else:
        X = x.tolist()
        W = wts.tolist()
        one, zero = 1.0, 0.0
    # Taylor coefficients of M: m_alpha = sum_j w_j prod_k x_jk^alpha_k / alpha_k!
    fact = [1]
    for k in range(1, K + 1):
        fact.append(fact[-1] * k)
    m: dict[tuple[int, ...], Any] = {tuple([0] * d): one}
    for alpha in idx:
        denom = 1
        for ak in alpha:
            denom *= fact[ak]
        tot = zero
        for wj, row in zip(W, X):
            term = wj
            for xk, ak in zip(row, alpha):
                if ak:
                    term = term * xk**ak
            tot = tot + term
        m[alpha] = tot / denom
    ell: dict[tuple[int, ...], Any] = {}
    for alpha in idx:
        j = next(k for k, ak in enumerate(alpha) if ak)
        acc = alpha[j] * m[alpha]
        for beta in _iproduct(*[range(ak + 1) for ak in alpha]):
            if beta == alpha or beta[j] == 0:
                continue
            rest = tuple(a_ - b_ for a_, b_ in zip(alpha, beta))
            acc = acc - beta[j] * ell[beta] * m[rest]
        ell[alpha] = acc / alpha[j]
    vals = []
    for alpha in idx:
        af = 1
        for ak in alpha:
            af *= fact[ak]
        vals.append(ell[alpha] * af)
    return idx, vals


# ------------------------------------------------------------------ modular series


def _modp(q: Fraction, p: int) -> int:
    if q.denominator % p == 0:
        raise ZeroDivisionError(f"denominator divisible by the prime {p}")
    return q.numerator * pow(q.denominator, -1, p) % p


def series_log_mgf_modp(z: Sequence[Fraction], weights: Sequence[Fraction] | None, K: int, p: int) -> list[int]:
    r"""Taylor coefficients ``c_0..c_K`` of :math:`\log\sum_j w_j e^{z_j t}` reduced modulo a prime ``p > K``.

    The exact rational coefficients reduced mod ``p`` (their denominators divide powers
    of the inputs' denominators times ``K!``): a minor non-zero mod ``p`` is non-zero over
    Q. Uses ``log M = integral(M' / M)`` with FLINT ``nmod_poly`` series arithmetic.
    Raises ZeroDivisionError if ``p`` divides a denominator (take another prime).
    """
    from flint import nmod_poly

    if p <= K + 1:
        raise ZeroDivisionError(f"the prime {p} must exceed K + 1 = {K + 1}")
    N = len(z)
    wq = [Fraction(1, N)] * N if weights is None else [to_fraction(v) for v in weights]
    tot = sum(wq, Fraction(0))
    zm = [_modp(to_fraction(v), p) for v in z]
    wm = [_modp(v / tot, p) for v in wq]
    # power sums s_k = sum_j w_j z_j^k: the coefficients of sum_j w_j / (1 - z_j t) = num / den,
    # summed by a product tree of nmod_poly fractions (all in C)
    parts = [(nmod_poly([wj], p), nmod_poly([1, (-zj) % p], p)) for wj, zj in zip(wm, zm) if wj]
    while len(parts) > 1:
        nxt = []
        for a in range(0, len(parts) - 1, 2):
            (n1, d1), (n2, d2) = parts[a], parts[a + 1]
            nxt.append((n1 * d2 + n2 * d1, d1 * d2))
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    num, den = parts[0]
    S = num.mul_low(den.inverse_series_trunc(K + 1), K + 1)
    sk = [int(c) for c in S.coeffs()] + [0] * (K + 1)
    inv_fact = _inverse_factorials(K, p)
    M = nmod_poly([sk[k] * inv_fact[k] % p for k in range(K + 1)], p)  # m_k = s_k / k!
    Minv = M.inverse_series_trunc(K + 1)
    L = M.derivative().mul_low(Minv, K).integral()
    coeffs = [int(c) for c in L.coeffs()]
    return [coeffs[k] if k < len(coeffs) else 0 for k in range(K + 1)]


@functools.lru_cache(maxsize=16)
def _inverse_factorials(K: int, p: int) -> tuple[int, ...]:
    """``1/k! mod p`` for ``k = 0..K`` (one modular inversion)."""
    fact = [1] * (K + 1)
    for k in range(1, K + 1):
        fact[k] = fact[k - 1] * k % p
    inv = [1] * (K + 1)
    inv[K] = pow(fact[K], -1, p)
    for k in range(K, 0, -1):
        inv[k - 1] = inv[k] * k % p
    return tuple(inv)
