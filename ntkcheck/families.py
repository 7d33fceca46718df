r"""Token distributions: empirical token sets and the closed-form families of seed 003 section 3.3.

Every family is a frozen dataclass implementing :class:`Family`: its CGF
:math:`\Lambda(a) = \log E e^{\langle a, Y\rangle}` in float64 (multivariate, batched),
along a direction in mpmath and in sympy, its exact or ball Taylor coefficients along a
direction, the domain of its MGF, whether its support is compact, and sampling.

Parameters given as ``Fraction``, ``int`` or decimal ``str`` are exact; a ``float`` is
read as the dyadic rational it is (``0.1`` is not 1/10). The CLI parses decimals
exactly, so ``--radii 1.01`` means 101/100.

References: seed 003 Ex. 3-6, Prop. 11-12, Remark 5; theory/seed-examples.md.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp
from flint import arb, arb_series, ctx, fmpq, fmpq_series

from . import cgf as _cgf
from ._validate import as_arguments, as_token_set
from ._validate import rational_direction as _direction
from .errors import DomainError, InputError, PrecisionError

__all__ = [
    "Family",
    "VandermondeForm",
    "Empirical",
    "as_laws",
    "exact_masses",
    "Dirac",
    "UniformCube",
    "Laplace",
    "Gaussian",
    "GaussianMixture2",
    "GaussianConvolution",
    "Translation",
    "EmpiricalConvolution",
    "FAMILY_NAMES",
    "family_from_name",
]


@dataclass(frozen=True)
class VandermondeForm:
    r"""The form of seed 003 Prop. 11 along a direction.

    :math:`\Lambda^w(t) = q(t) + \sum_{m \ge m_0} a_m \lambda^m t^{2m}` with ``q`` a polynomial
    of degree ``< 2 m0`` and coefficients :math:`a_m \ne 0` that depend only on ``tag``
    (the same for every member of the family along the same direction).
    """

    tag: str
    lam: Fraction
    m0: int


class Family(ABC):
    """A token distribution on :math:`\\mathbb R^d` with a computable CGF.

    Subclasses are frozen dataclasses. Directions ``w`` are sequences of numbers
    (rationals are kept exact); they are not normalised (the properties do not depend on
    the length of ``w``).
    """

    @property
    @abstractmethod
    def dim(self) -> int:
        """Dimension ``d`` of the tokens."""

    @property
    @abstractmethod
    def compact(self) -> bool:
        """Whether the support is compact (seed 003 Prop. 8 needs it)."""

    @property
    def quadratic(self) -> bool:
        """Whether the CGF is a polynomial of degree <= 2 (Dirac, Gaussian)."""
        return False

    @abstractmethod
    def cgf(self, a: Any) -> Any:
        """:math:`\\Lambda(a)` for ``a`` of shape (d,) (float) or (m, d) (array (m,))."""

    def cgf_1d(self, t: Any, w: Any) -> Any:
        """:math:`\\Lambda^w(t) = \\Lambda(t w)` for scalar or array ``t``."""
        # through _direction: decimal strings / Fractions accepted, length and zero checked
        wv = np.asarray([float(v) for v in _direction(w, self.dim)])
        tt = np.asarray(t, dtype=np.float64)
        out = self.cgf(tt.reshape(-1, 1) * wv[None, :])
        return out.reshape(tt.shape) if tt.ndim else float(np.asarray(out).reshape(-1)[0])

    @abstractmethod
    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        """:math:`\\Lambda^w(t)` in mpmath at ``dps`` digits."""

    @abstractmethod
    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        """:math:`\\Lambda(a)` as a sympy expression in the symbols ``a`` (length d)."""

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        """:math:`\\Lambda^w(t)` as a sympy expression in ``t``."""
        wf = _direction(w, self.dim)
        syms = sp.symbols(f"a0:{self.dim}")
        wq = [sp.Rational(v.numerator, v.denominator) for v in wf]
        return self.cgf_sympy(syms).subs({s: wk * t for s, wk in zip(syms, wq, strict=True)})

    @abstractmethod
    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        """Taylor coefficients ``c_0..c_K`` of :math:`\\Lambda^w(t)` (``c_k = kappa_k / k!``).

        ``exact=True``: FLINT ``fmpq`` (exact for the parameters as given).
        ``exact=False``: Arb balls at ``prec`` bits, rigorous enclosures.
        """

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        """The exact coefficients ``c_0..c_K`` of :math:`\\Lambda^w` reduced modulo the prime ``p``.

        Raises ZeroDivisionError when ``p`` divides a denominator (take another prime).
        The default reduces :meth:`taylor_1d`; closed forms override it with running
        products mod ``p`` (no long rationals).
        """
        return _reduce_modp(self.taylor_1d(w, K, exact=True), p)

    def cumulants_1d(self, w: Any, K: int) -> list[Fraction]:
        """Exact cumulants :math:`\\kappa_1..\\kappa_K` of :math:`\\langle w, Y\\rangle`."""
        c = self.taylor_1d(w, K, exact=True)
        out, fact = [], 1
        for k in range(1, K + 1):
            fact *= k
            out.append(Fraction(int(c[k].p), int(c[k].q)) * fact)
        return out

    def mgf_radius(self, w: Any) -> float:
        """Radius ``R`` with the MGF of :math:`\\langle w, Y\\rangle` finite for ``|t| < R`` (inf if entire)."""
        return float("inf")

    @abstractmethod
    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        """``N`` i.i.d. tokens, shape (N, d)."""

    def vandermonde_form(self, w: Any) -> VandermondeForm | None:
        """The Prop. 11 form along ``w``, or None when the family does not have one."""
        return None


def exact_masses(weights: Any, n_tokens: int, name: str = "weights") -> list[Fraction]:
    """Token weights as exact rationals summing to one.

    ``None`` gives ``1/N`` each. Integers, ``Fraction``, decimal strings (``"0.1"`` is
    exactly 1/10) and floats (read as the dyadic rationals they are) are accepted; the
    normalisation is done in rational arithmetic, so ``[2, 3]`` gives exactly 2/5 and 3/5.
    """
    if weights is None:
        return [Fraction(1, n_tokens)] * n_tokens
    raw = list(weights.reshape(-1)) if isinstance(weights, np.ndarray) else list(weights)
    if len(raw) != n_tokens:
        raise InputError(f"{name}: got {len(raw)} weights for {n_tokens} tokens")
    out: list[Fraction] = []
    for j, v in enumerate(raw):
        if isinstance(v, (bool, np.bool_)) or isinstance(v, complex) or np.iscomplexobj(v):
            raise InputError(f"{name}: weight {j} is {v!r}; weights must be real numbers")
        try:
            f = _cgf.to_fraction(v)
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise InputError(f"{name}: weight {j} is {v!r}, not a finite number ({exc})") from None
        if f < 0:
            raise InputError(f"{name}: weight {j} is negative ({v!r}); weights must be non-negative")
        out.append(f)
    tot = sum(out, Fraction(0))
    if tot == 0:
        raise InputError(f"{name}: all weights are zero")
    return [v / tot for v in out]


@dataclass(frozen=True, eq=False)
class Empirical(Family):
    r"""The empirical law :math:`\mu = \sum_j m_j \delta_{x_j}` of a token sample.

    A sample is its law: repeated tokens are merged into one atom whose mass is the sum
    of theirs (seed 003 §3: the NTK acts on :math:`L^2(\mu_i)`, where two copies of a
    token are one point). This is the one sample type of the package: built once where
    data enter (:func:`as_laws`), then taken by the decision engine, the Gram, the
    cross-check, screening and dynamics without re-validation.

    Parameters
    ----------
    atoms : (N, d) float array
        The tokens (repeats allowed). Complex, boolean, string and object arrays are
        refused.
    weights : (N,) sequence, optional
        Non-negative token weights, default ``1/N`` each; read exactly
        (:func:`exact_masses`).

    Attributes
    ----------
    atoms : (m, d) read-only float array
        The distinct atoms, in order of first appearance.
    weights : tuple of Fraction
        Their exact masses (sum exactly one); zero-mass tokens are dropped.
    n_tokens : int
        Number of tokens given.
    counts : (m,) int array
        How many given tokens each atom merges.

    Examples
    --------
    >>> law = Empirical(np.array([[0.0], [1.0], [0.0], [0.0]]))
    >>> law.atoms[:, 0].tolist(), [str(m) for m in law.weights], law.n_tokens
    ([0.0, 1.0], ['3/4', '1/4'], 4)
    """

    atoms: np.ndarray
    weights: Any = None
    n_tokens: int = field(init=False, repr=False, default=0)
    counts: np.ndarray = field(init=False, repr=False)
    _w: np.ndarray = field(init=False, repr=False)
    _proj: dict[tuple[Fraction, ...], list[Fraction]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        x = as_token_set(self.atoms, "atoms")
        n_tok = x.shape[0]
        masses = exact_masses(self.weights, n_tok)
        keep = [j for j, mj in enumerate(masses) if mj != 0]
        x = x[keep] + 0.0  # + 0.0 maps -0.0 to 0.0: the two are one point
        masses = [masses[j] for j in keep]
        # each row as one opaque byte string: equal bytes <=> equal floats once -0.0 is gone
        rows = np.ascontiguousarray(x).view(np.dtype((np.void, x.dtype.itemsize * x.shape[1])))
        _, first, inverse = np.unique(rows.reshape(-1), return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(first)  # distinct atoms in order of first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0])
        slot = rank[inverse]
        m = order.shape[0]
        counts = np.bincount(slot, minlength=m)
        if self.weights is None:  # uniform tokens: an atom's mass is its count over N
            merged = [Fraction(int(c), n_tok) for c in counts]
        else:
            merged = [Fraction(0)] * m
            for j, s in enumerate(slot):
                merged[int(s)] += masses[j]
        atoms = np.ascontiguousarray(x[first[order]])
        atoms.setflags(write=False)  # projections are memoised: the atoms must not change under them
        counts.setflags(write=False)
        object.__setattr__(self, "atoms", atoms)
        object.__setattr__(self, "weights", tuple(merged))
        object.__setattr__(self, "n_tokens", int(n_tok))
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "_w", np.array([float(v) for v in merged]))

    @property
    def n_atoms(self) -> int:
        """Number of distinct atoms."""
        return int(self.atoms.shape[0])

    @property
    def masses(self) -> np.ndarray:
        """The masses as a float64 vector (the nearest doubles of the exact :attr:`weights`)."""
        return self._w

    @property
    def max_multiplicity(self) -> int:
        """Largest number of given tokens merged into one atom."""
        return int(self.counts.max())

    def projected(self, w: Any) -> list[Fraction]:
        """Exact projections :math:`\\langle w, x_j\rangle` of the atoms (memoised per direction)."""
        wf = tuple(_direction(w, self.dim))
        got = self._proj.get(wf)
        if got is None:
            got = _cgf._project_exact(self.atoms, wf)
            self._proj[wf] = got
        return got

    @property
    def dim(self) -> int:
        return int(self.atoms.shape[1])

    @property
    def compact(self) -> bool:
        return True

    @property
    def quadratic(self) -> bool:
        # one distinct atom: the CGF is linear
        return bool(np.all(self.atoms == self.atoms[0]))

    def cgf(self, a: Any) -> Any:
        return _cgf.log_mgf(self.atoms, a, self._w)

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        proj = self.projected(w)
        with mpmath.workdps(dps + 10):
            tt = mpmath.mpf(t) if not isinstance(t, Fraction) else mpmath.mpf(t.numerator) / t.denominator
            s = [tt * (mpmath.mpf(zj.numerator) / zj.denominator) for zj in proj]
            m = max(s)
            tot = mpmath.fsum(mpmath.mpf(wj.numerator) / wj.denominator * mpmath.exp(sj - m)
                              for wj, sj in zip(self.weights, s, strict=True))
            val = m + mpmath.log(tot)
        with mpmath.workdps(dps):
            return +val

    def exact_weights(self) -> list[Fraction]:
        """The masses of the distinct atoms as exact rationals summing to one."""
        return list(self.weights)

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        terms = []
        wts = [sp.Rational(v.numerator, v.denominator) for v in self.exact_weights()]
        for wj, row in zip(wts, self.atoms, strict=True):
            score = sp.Add(*[sp.Rational(_cgf.to_fraction(float(xk)).numerator, _cgf.to_fraction(float(xk)).denominator) * ak for xk, ak in zip(row, syms, strict=True)])
            terms.append(wj * sp.exp(score))
        return sp.log(sp.Add(*terms))

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        z = self.projected(w)
        wts = self.exact_weights()
        if exact:
            return _cgf.series_log_mgf_exact(z, wts, K)
        return _cgf.series_log_mgf_arb(z, wts, K, prec)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        if N < 1:
            raise DomainError(f"N={N}: need at least one token")
        idx = rng.choice(self.atoms.shape[0], size=N, p=self._w)
        return self.atoms[idx].copy()

def as_laws(samples: Any, weights: Sequence[Any] | None = None) -> list[Empirical]:
    """Token data as a list of :class:`Empirical` laws of one dimension (validated once).

    Parameters
    ----------
    samples : (n, N, d) array, or a sequence of (N_i, d) arrays and/or :class:`Empirical`
        Ragged sample lengths are valid; laws are passed through unchanged.
    weights : sequence of n weight vectors (or None entries), optional

    Returns
    -------
    list of Empirical
        Repeated tokens merged into atoms with exact masses.
    """
    if isinstance(samples, Empirical):
        samples = [samples]
    if isinstance(samples, np.ndarray) and samples.dtype != object:
        if samples.ndim != 3:
            raise InputError(f"samples: expected shape (n, N, d) or a list of (N_i, d) arrays, got shape {samples.shape}")
        seq: list[Any] = list(samples)
    elif isinstance(samples, (Sequence, np.ndarray)) and not isinstance(samples, (str, bytes)):
        seq = list(samples)
    else:
        raise InputError(f"samples: expected a list of (N_i, d) arrays, got {type(samples).__name__}")
    if not seq:
        raise InputError("samples: no samples were given (need at least one)")
    if weights is not None and len(weights) != len(seq):
        raise InputError(f"weights: got {len(weights)} weight vectors for {len(seq)} samples")
    out: list[Empirical] = []
    for i, s in enumerate(seq):
        if isinstance(s, Empirical):
            out.append(s)
            continue
        wi = None if weights is None else weights[i]
        try:
            out.append(Empirical(s, wi))
        except InputError as exc:  # name the sample: the law's own messages say "atoms" / "weights"
            msg = str(exc)
            msg = f"sample {i}" + msg[len("atoms"):] if msg.startswith("atoms") else f"sample {i}: {msg}"
            raise InputError(msg) from None
    d0 = out[0].dim
    for i, law in enumerate(out):
        if law.dim != d0:
            raise InputError(f"sample {i} has dimension {law.dim}, the others have {d0}")
    return out


# ------------------------------------------------------------------ parameter handling


def _frac(x: Any, name: str) -> Fraction:
    """Exact rational value of a parameter (Fraction, int, decimal str, float, fmpq, sympy Rational)."""
    if isinstance(x, bool):
        raise InputError(f"{name}: expected a number, got the bool {x!r}")
    if isinstance(x, sp.Rational):
        return Fraction(int(x.p), int(x.q))
    try:
        return _cgf.to_fraction(x)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise InputError(
            f"{name}: expected a finite number (Fraction, int, decimal str or float), got {x!r}"
        ) from None


def _float(f: Fraction, name: str) -> float:
    try:
        v = float(f)
    except OverflowError:
        v = float("inf")
    if not np.isfinite(v):
        raise InputError(f"{name}: {f} does not fit in float64")
    return v


def _vector(v: Any, name: str, d: int | None = None) -> tuple[Fraction, ...]:
    if isinstance(v, (str, bytes)) or np.ndim(v) != 1:
        want = f"{d}" if d is not None else "d"
        raise InputError(f"{name}: expected a vector of {want} numbers, got {v!r}")
    out = tuple(_frac(x, f"{name}[{k}]") for k, x in enumerate(v))
    if len(out) == 0:
        raise InputError(f"{name}: is empty; expected at least one coordinate")
    if d is not None and len(out) != d:
        raise InputError(f"{name}: has length {len(out)}, expected {d} (the dimension of the tokens)")
    return out


def _matrix(m: Any, name: str, d: int | None = None) -> tuple[tuple[Fraction, ...], ...]:
    """A symmetric positive semidefinite d x d matrix, exactly (a scalar is read as 1 x 1)."""
    if isinstance(m, (str, bytes)) or np.ndim(m) == 0:
        rows: list[Any] = [[m]]
    elif np.ndim(m) == 2:
        rows = [list(r) for r in m]
    else:
        raise InputError(f"{name}: expected a square matrix (d x d), got {m!r}")
    n = len(rows)
    if n == 0 or any(len(r) != n for r in rows):
        raise InputError(f"{name}: expected a square matrix, got rows of lengths {[len(r) for r in rows]}")
    if d is not None and n != d:
        raise InputError(f"{name}: is {n} x {n}, expected {d} x {d} (the dimension of the tokens)")
    q = tuple(tuple(_frac(x, f"{name}[{i}][{j}]") for j, x in enumerate(r)) for i, r in enumerate(rows))
    for i in range(n):
        for j in range(i + 1, n):
            if q[i][j] != q[j][i]:
                raise DomainError(
                    f"{name}: is not symmetric: entry ({i},{j}) = {q[i][j]} but ({j},{i}) = {q[j][i]}"
                )
    if not _is_psd(q):
        lo = float(np.linalg.eigvalsh(np.array([[float(x) for x in r] for r in q]))[0])
        raise DomainError(
            f"{name}: is not positive semidefinite (smallest eigenvalue ~ {lo:.3g}); a covariance must be"
        )
    return q


def _is_psd(m: Sequence[Sequence[Fraction]]) -> bool:
    """Exact PSD test: symmetric elimination on positive diagonal pivots.

    A symmetric matrix with a positive pivot is PSD iff its Schur complement is; with a
    negative diagonal entry it is not; with a zero diagonal it is PSD iff it is zero.
    """
    a = [list(r) for r in m]
    idx = list(range(len(a)))
    while idx:
        if any(a[i][i] < 0 for i in idx):
            return False
        piv = next((i for i in idx if a[i][i] > 0), None)
        if piv is None:
            return all(a[i][j] == 0 for i in idx for j in idx)
        idx.remove(piv)
        p = a[piv][piv]
        for i in idx:
            f = a[i][piv] / p
            if f:
                for j in idx:
                    a[i][j] -= f * a[piv][j]
    return True


def _fmat(q: Sequence[Sequence[Fraction]], name: str) -> np.ndarray:
    return np.array([[_float(x, name) for x in r] for r in q], dtype=np.float64)


def _sqrt_factor(s: np.ndarray) -> np.ndarray:
    """``L`` with ``L L^T = S`` for a PSD ``S`` (eigen-decomposition: works when singular)."""
    lam, v = np.linalg.eigh(s)
    return v * np.sqrt(np.clip(lam, 0.0, None))[None, :]


def _is_zero(q: Sequence[Sequence[Fraction]]) -> bool:
    return all(x == 0 for r in q for x in r)


def _dot(u: Sequence[Fraction], v: Sequence[Fraction]) -> Fraction:
    return sum((x * y for x, y in zip(u, v, strict=True)), Fraction(0))


def _quad(w: Sequence[Fraction], s: Sequence[Sequence[Fraction]]) -> Fraction:
    return sum((w[i] * s[i][j] * w[j] for i in range(len(w)) for j in range(len(w))), Fraction(0))


def _sp(f: Fraction) -> sp.Rational:
    return sp.Rational(f.numerator, f.denominator)


def _fq(f: Fraction) -> fmpq:
    return fmpq(f.numerator, f.denominator)


def _t_fraction(t: Any) -> Fraction:
    """Exact value of an evaluation point (also an ``mpmath.mpf``)."""
    if isinstance(t, mpmath.mpf):
        if not mpmath.isfinite(t):
            raise InputError(f"t: must be finite, got {t}")
        man, exp = int(t.man), int(t.exp)  # mpmath's mantissa is unsigned
        return (-1 if t < 0 else 1) * Fraction(man) * (Fraction(2) ** exp)
    return _frac(t, "t")


def _mp(f: Fraction) -> mpmath.mpf:
    return mpmath.mpf(f.numerator) / f.denominator


def _check_dps(dps: int) -> None:
    if dps < 5:
        raise PrecisionError(f"dps={dps} is too low to mean anything; use at least 5")


def _check_K(K: int) -> None:
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise DomainError(f"K={K!r}: the truncation order must be an integer >= 1")


def _check_N(N: int) -> None:
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
        raise DomainError(f"N={N!r}: need at least one token")


def _symbols(a: Sequence[sp.Symbol], d: int) -> list[sp.Symbol]:
    syms = list(a)
    if len(syms) != d:
        raise InputError(f"a: got {len(syms)} symbols, the tokens have dimension {d}")
    return syms


def _args(a: Any, d: int) -> tuple[np.ndarray, bool]:
    return as_arguments(a, d)


def _finish(out: np.ndarray, single: bool, what: str) -> Any:
    if not np.all(np.isfinite(out)):
        raise InputError(f"{what}: the CGF overflows float64 at these arguments; rescale them")
    return float(out[0]) if single else out


def _quad_form(arr: np.ndarray, s: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.einsum("mi,ij,mj->m", arr, s, arr)


@contextmanager
def _arb_context(prec: int, K: int) -> Iterator[None]:
    """Arb working precision ``prec`` and a series cap of at least ``K + 1`` (restored on exit)."""
    if isinstance(prec, bool) or not isinstance(prec, (int, np.integer)) or prec < 20:
        raise PrecisionError(f"prec={prec!r} bits is too low to mean anything; use at least 20")
    with ctx.workprec(int(prec)):
        old_cap = ctx.cap
        ctx.cap = max(old_cap, K + 1)
        try:
            yield
        finally:
            ctx.cap = old_cap


def _arbq(f: Fraction) -> arb:
    """Ball containing ``f`` at the current Arb precision (exact when dyadic and short)."""
    if f.denominator == 1:
        return arb(f.numerator)
    return arb(f.numerator) / f.denominator


def _fmt(v: Any) -> str:
    if isinstance(v, Fraction):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def _repr(obj: Any, names: Sequence[str]) -> str:
    return f"{type(obj).__name__}(" + ", ".join(f"{n}={_fmt(getattr(obj, n))}" for n in names) + ")"


# --------------------------------------------------- even series log(sinh x / x), log cosh x


def _factorials(n: int) -> list[int]:
    out = [1]
    for k in range(1, n + 1):
        out.append(out[-1] * k)
    return out


@functools.lru_cache(maxsize=16)
def _even_log_series_exact(kind: str, M: int) -> tuple[fmpq, ...]:
    r"""Exact :math:`g_0..g_M` with :math:`\log f(x) = \sum_m g_m x^{2m}`, ``f = sinh x / x`` or ``cosh x``."""
    fac = _factorials(2 * M + 2)
    shift = 1 if kind == "sinhc" else 0
    coeffs = [fmpq(0)] * (2 * M + 1)
    for m in range(M + 1):
        coeffs[2 * m] = fmpq(1, fac[2 * m + shift])
    # FLINT truncates series operations at ctx.cap (default 10 terms), not at the series' prec
    old_cap = ctx.cap
    ctx.cap = max(old_cap, 2 * M + 1)
    try:
        c = fmpq_series(coeffs, prec=2 * M + 1).log().coeffs()
    finally:
        ctx.cap = old_cap
    return tuple(fmpq(c[2 * m]) if 2 * m < len(c) else fmpq(0) for m in range(M + 1))


@functools.lru_cache(maxsize=32)
def _even_log_series_arb_cached(kind: str, M: int, prec: int) -> tuple[arb, ...]:
    """:func:`_even_log_series_arb` at ``prec`` bits, memoised (every radius shares it)."""
    with _arb_context(prec, 2 * M + 1):
        return tuple(_even_log_series_arb(kind, M))


def _even_log_series_arb(kind: str, M: int) -> list[arb]:
    """Ball version of :func:`_even_log_series_exact`; call inside :func:`_arb_context`."""
    fac = _factorials(2 * M + 2)
    shift = 1 if kind == "sinhc" else 0
    coeffs = [arb(0)] * (2 * M + 1)
    for m in range(M + 1):
        coeffs[2 * m] = arb(1) / fac[2 * m + shift]
    c = arb_series(coeffs).log().coeffs()
    return [c[2 * m] if 2 * m < len(c) else arb(0) for m in range(M + 1)]


# Taylor coefficients of log(sinh x / x) up to x^40: the series converges for |x| < pi and
# its terms are ~ 1/(m pi^(2m)), below 1e-18 relative at |x| <= 1 from m = 17 on.
_SINHC_FLOAT = np.array([float(g) for g in _even_log_series_exact("sinhc", 20)[1:]][::-1])


def _log_sinhc(x: np.ndarray) -> np.ndarray:
    r""":math:`\log(\sinh x / x)` without overflow or cancellation (0 at 0)."""
    ax = np.abs(x)
    out = np.empty_like(ax)
    small = ax < 1.0
    y = ax[small] ** 2
    acc = np.zeros_like(y)
    for g in _SINHC_FLOAT:
        acc = acc * y + g
    out[small] = acc * y
    xb = ax[~small]
    # log(sinh x / x) = x + log(1 - e^{-2x}) - log(2x): no overflow for x up to 1e308
    out[~small] = xb + np.log1p(-np.exp(-2.0 * xb)) - np.log(2.0 * xb)
    return out


def _log_cosh(x: np.ndarray) -> np.ndarray:
    r""":math:`\log\cosh x` without overflow or cancellation."""
    ax = np.abs(x)
    out = np.empty_like(ax)
    small = ax < 1.0
    # cosh x - 1 = 2 sinh^2(x/2): keeps the x^2/2 digits near 0
    out[small] = np.log1p(2.0 * np.sinh(ax[small] / 2.0) ** 2)
    xb = ax[~small]
    out[~small] = xb + np.log1p(np.exp(-2.0 * xb)) - np.log(2.0)
    return out


def _mp_log_sinhc(x: mpmath.mpf) -> mpmath.mpf:
    if x == 0:
        return mpmath.mpf(0)
    ax = abs(x)
    # sinh(x)/x = 1 + x^2/6 + ...: 2 |log2 x| more bits keep the relative accuracy of the log
    extra = 2 * max(0, -int(mpmath.mag(ax))) + 10
    with mpmath.workprec(mpmath.mp.prec + extra):
        v = mpmath.log(mpmath.sinh(ax) / ax)
    return +v


def _mp_log_cosh(x: mpmath.mpf) -> mpmath.mpf:
    return mpmath.log1p(2 * mpmath.sinh(x / 2) ** 2)


def _reduce_modp(cs: Sequence[Any], p: int) -> list[int]:
    """Rationals (``fmpq`` or ``Fraction``) mod ``p`` with one modular inversion (Montgomery's trick)."""
    nums, dens = [], []
    for c in cs:
        if isinstance(c, Fraction):
            a, b = c.numerator, c.denominator
        else:
            a, b = int(c.p), int(c.q)
        nums.append(a % p)
        dens.append(b % p)
    if any(d == 0 for d in dens):
        raise ZeroDivisionError(f"denominator divisible by the prime {p}")
    prefix, acc = [], 1
    for d in dens:
        prefix.append(acc)
        acc = acc * d % p
    inv = pow(acc, -1, p)
    out = [0] * len(cs)
    for i in range(len(cs) - 1, -1, -1):
        out[i] = nums[i] * prefix[i] % p * inv % p
        inv = inv * dens[i] % p
    return out


def _qp(f: Fraction, p: int) -> int:
    return _cgf._modp(f, p)


@functools.lru_cache(maxsize=16)
def _even_log_series_modp(kind: str, M: int, p: int) -> tuple[int, ...]:
    return tuple(_reduce_modp(_even_log_series_exact(kind, M), p))


def _wstr(w: Sequence[Fraction]) -> str:
    return "(" + ", ".join(str(v) for v in w) + ")"


# ----------------------------------------------------------------------------- families


@dataclass(frozen=True, repr=False)
class Dirac(Family):
    r"""Point mass :math:`\delta_x`: :math:`\Lambda(a) = \langle x, a\rangle` (linear).

    Single Diracs are never independent modulo affine functions (seed 003 Ex. 6).

    Parameters
    ----------
    point : (d,) numbers (exact rationals)
    """

    point: tuple[Fraction, ...]
    _x: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        p = _vector(self.point, "point")
        object.__setattr__(self, "point", p)
        object.__setattr__(self, "_x", np.array([_float(v, "point") for v in p]))

    def __repr__(self) -> str:
        return _repr(self, ["point"])

    @property
    def dim(self) -> int:
        return len(self.point)

    @property
    def compact(self) -> bool:
        return True

    @property
    def quadratic(self) -> bool:
        return True

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr @ self._x
        return _finish(out, single, "Dirac")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        z = _dot(_direction(w, self.dim), self.point) * _t_fraction(t)
        with mpmath.workdps(dps):
            return _mp(z)

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return sp.Add(*[_sp(x) * s for x, s in zip(self.point, syms, strict=True)])

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        z = _dot(_direction(w, self.dim), self.point)
        if exact:
            return [fmpq(0), _fq(z)] + [fmpq(0)] * (K - 1)
        with _arb_context(prec, K):
            return [arb(0), _arbq(z)] + [arb(0)] * (K - 1)

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        return [0, _qp(_dot(_direction(w, self.dim), self.point), p)] + [0] * (K - 1)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return np.tile(self._x, (int(N), 1))


@dataclass(frozen=True, repr=False, init=False)
class UniformCube(Family):
    r"""Uniform law on the cube :math:`[-r, r]^d` (seed 003 Ex. 3).

    .. math::

        \Lambda(a) = \sum_{k=1}^d \log\frac{\sinh(r a_k)}{r a_k}, \qquad
        \Lambda^w(t) = \sum_{m\ge1} g_m \Big(\sum_k w_k^{2m}\Big) r^{2m} t^{2m},

    :math:`g_m = 2^{2m} B_{2m} / (2m (2m)!)` (all non-zero): the Prop. 11 form with
    :math:`\lambda = r^2`. Distinct radii give strongly independent CGFs.

    Parameters
    ----------
    radius : positive number (exact rational)
    dim : int >= 1
    """

    radius: Fraction
    _d: int
    _r: float = field(repr=False, compare=False)

    # explicit __init__: ``dim`` is the abstract property of Family, it cannot also be a field
    def __init__(self, radius: Any, dim: int) -> None:
        r = _frac(radius, "radius")
        if r <= 0:
            raise DomainError(f"radius: must be positive, got {r} (radius 0 is Dirac([0, ...]))")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise DomainError(f"dim: must be an integer >= 1, got {dim!r}")
        object.__setattr__(self, "radius", r)
        object.__setattr__(self, "_d", int(dim))
        object.__setattr__(self, "_r", _float(r, "radius"))

    def __repr__(self) -> str:
        return _repr(self, ["radius", "dim"])

    @property
    def dim(self) -> int:
        return self._d

    @property
    def compact(self) -> bool:
        return True

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            x = self._r * arr
        if not np.all(np.isfinite(x)):
            raise InputError("UniformCube: r * a overflows float64; rescale the arguments")
        return _finish(_log_sinhc(x).sum(axis=1), single, "UniformCube")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        with mpmath.workdps(dps + 10):
            val = mpmath.fsum(_mp_log_sinhc(_mp(self.radius * wk * tf)) for wk in wf)
        with mpmath.workdps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        r = _sp(self.radius)
        return sp.Add(*[sp.log(sp.sinh(r * s) / (r * s)) for s in _symbols(a, self.dim)])

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        # coordinates with w_k = 0 contribute log(1) = 0; substituting them would give 0/0
        r = _sp(self.radius)
        wf = _direction(w, self.dim)
        return sp.Add(*[sp.log(sp.sinh(r * _sp(wk) * t) / (r * _sp(wk) * t)) for wk in wf if wk != 0])

    def _scale(self, wf: Sequence[Fraction], m: int) -> Fraction:
        return self.radius ** (2 * m) * sum((wk ** (2 * m) for wk in wf), Fraction(0))

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        M = K // 2
        if exact:
            # r^{2m} sum_k w_k^{2m} by running products in FLINT rationals (one product per
            # order: the powers of a long rational are the cost, not the series)
            g = _even_log_series_exact("sinhc", M)
            out = [fmpq(0)] * (K + 1)
            r2, w2 = _fq(self.radius) ** 2, [_fq(wk) ** 2 for wk in wf]
            pr, pw = fmpq(1), [fmpq(1)] * len(w2)
            for m in range(1, M + 1):
                pr *= r2
                pw = [a * b for a, b in zip(pw, w2, strict=True)]
                out[2 * m] = g[m] * pr * sum(pw, fmpq(0))
            return out
        with _arb_context(prec, 2 * M + 1):
            ga = _even_log_series_arb_cached("sinhc", M, int(prec))
            outa = [arb(0)] * (K + 1)
            r2a, w2a = _arbq(self.radius) ** 2, [_arbq(wk) ** 2 for wk in wf]
            pra, pwa = arb(1), [arb(1)] * len(w2a)
            for m in range(1, M + 1):
                pra *= r2a
                pwa = [a * b for a, b in zip(pwa, w2a, strict=True)]
                outa[2 * m] = ga[m] * pra * sum(pwa, arb(0))
            return outa

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        M = K // 2
        g = _even_log_series_modp("sinhc", M, p)
        r2, w2 = _qp(self.radius**2, p), [_qp(wk * wk, p) for wk in wf]
        out = [0] * (K + 1)
        pr, pw = 1, [1] * len(w2)
        for m in range(1, M + 1):
            pr = pr * r2 % p
            pw = [a * b % p for a, b in zip(pw, w2, strict=True)]
            out[2 * m] = g[m] * pr % p * (sum(pw) % p) % p
        return out

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return rng.uniform(-self._r, self._r, size=(int(N), self.dim))

    def vandermonde_form(self, w: Any) -> VandermondeForm:
        wf = _direction(w, self.dim)
        return VandermondeForm(tag=f"uniform-cube:{_wstr(wf)}", lam=self.radius**2, m0=1)


class _CovMixin:
    """Shared handling of a covariance parameter ``cov`` (exact tuple, float copy, factor)."""

    cov: tuple[tuple[Fraction, ...], ...]
    _S: np.ndarray
    _L: np.ndarray

    def _set_cov(self, cov: Any, d: int | None) -> None:
        q = _matrix(cov, "cov", d)
        s = _fmat(q, "cov")
        object.__setattr__(self, "cov", q)
        object.__setattr__(self, "_S", s)
        object.__setattr__(self, "_L", _sqrt_factor(s))

    def _s(self, wf: Sequence[Fraction]) -> Fraction:
        return _quad(wf, self.cov)

    def _normal(self, N: int, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((int(N), self._S.shape[0])) @ self._L.T

    def _quad_sympy(self, syms: Sequence[sp.Symbol]) -> sp.Expr:
        n = len(syms)
        return sp.Add(*[_sp(self.cov[i][j]) * syms[i] * syms[j] for i in range(n) for j in range(n)])


@dataclass(frozen=True, repr=False)
class Laplace(_CovMixin, Family):
    r"""Symmetric multivariate Laplace law with covariance :math:`\Sigma` (seed 003 Ex. 4).

    :math:`Y = \sqrt{E} Z`, :math:`E \sim \mathrm{Exp}(1)`, :math:`Z \sim N(0, \Sigma)`:

    .. math::

        \Lambda(a) = -\log\Big(1 - \tfrac12 a^T\Sigma a\Big) \quad (a^T\Sigma a < 2), \qquad
        \Lambda^w(t) = \sum_{m\ge1} \frac{s^m}{m 2^m} t^{2m}, \quad s = w^T\Sigma w,

    finite for :math:`|t| < \sqrt{2/s}`. Prop. 11 form with :math:`\lambda = s`.
    The support is not compact (unless :math:`\Sigma = 0`).

    Parameters
    ----------
    cov : (d, d) symmetric positive semidefinite matrix (exact rationals)
    """

    cov: tuple[tuple[Fraction, ...], ...]
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._set_cov(self.cov, None)

    def __repr__(self) -> str:
        return _repr(self, ["cov"])

    @property
    def dim(self) -> int:
        return len(self.cov)

    @property
    def compact(self) -> bool:
        return _is_zero(self.cov)

    @property
    def quadratic(self) -> bool:
        return _is_zero(self.cov)

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        q = _quad_form(arr, self._S)
        if not np.all(q < 2.0):
            i = int(np.argmax(np.where(np.isfinite(q), q, np.inf)))
            raise DomainError(
                f"Laplace: a^T Sigma a = {q[i]:.6g} >= 2 at a = {arr[i].tolist()}; "
                "the MGF is finite only for a^T Sigma a < 2"
            )
        return _finish(-np.log1p(-q / 2.0), single, "Laplace")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        u = self._s(wf) * tf * tf / 2
        if u >= 1:
            raise DomainError(
                f"Laplace: t = {float(tf):.6g} is outside the MGF domain |t| < {self.mgf_radius(wf):.6g}"
            )
        with mpmath.workdps(dps + 10):
            val = -mpmath.log1p(-_mp(u))
        with mpmath.workdps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return -sp.log(1 - self._quad_sympy(syms) / 2)

    def _coef(self, s: Fraction, m: int) -> Fraction:
        return s**m / (m * 2**m)

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        s = self._s(_direction(w, self.dim))
        if exact:
            out = [fmpq(0)] * (K + 1)
            half, pw = _fq(s) / 2, fmpq(1)
            for m in range(1, K // 2 + 1):
                pw *= half  # (s/2)^m / m, by running products
                out[2 * m] = pw / m
            return out
        with _arb_context(prec, K):
            outa = [arb(0)] * (K + 1)
            halfa, pwa = _arbq(s) / 2, arb(1)
            for m in range(1, K // 2 + 1):
                pwa *= halfa
                outa[2 * m] = pwa / m
            return outa

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        half = _qp(self._s(_direction(w, self.dim)) / 2, p)
        out = [0] * (K + 1)
        pw = 1
        for m in range(1, K // 2 + 1):
            pw = pw * half % p
            out[2 * m] = pw * pow(m, -1, p) % p
        return out

    def mgf_radius(self, w: Any) -> float:
        s = self._s(_direction(w, self.dim))
        return float("inf") if s == 0 else float(Fraction(2) / s) ** 0.5

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        e = rng.exponential(size=int(N))
        return np.sqrt(e)[:, None] * self._normal(N, rng)

    def vandermonde_form(self, w: Any) -> VandermondeForm:
        return VandermondeForm(tag="laplace", lam=self._s(_direction(w, self.dim)), m0=1)


@dataclass(frozen=True, repr=False)
class Gaussian(_CovMixin, Family):
    r"""Gaussian :math:`N(m, \Sigma)`: :math:`\Lambda(a) = \langle m, a\rangle + \tfrac12 a^T\Sigma a`.

    Quadratic CGF, so modulo affine functions only :math:`\Sigma` counts: Gaussians
    sharing :math:`\Sigma` are never independent, and ``n > d(d+1)/2`` of them never are
    (seed 003 Ex. 6). Not compact (unless :math:`\Sigma = 0`).

    Parameters
    ----------
    mean : (d,) numbers
    cov : (d, d) symmetric positive semidefinite matrix
    """

    mean: tuple[Fraction, ...]
    cov: tuple[tuple[Fraction, ...], ...]
    _m: np.ndarray = field(init=False, repr=False, compare=False)
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = _vector(self.mean, "mean")
        object.__setattr__(self, "mean", m)
        object.__setattr__(self, "_m", np.array([_float(v, "mean") for v in m]))
        self._set_cov(self.cov, len(m))

    def __repr__(self) -> str:
        return _repr(self, ["mean", "cov"])

    @property
    def dim(self) -> int:
        return len(self.mean)

    @property
    def compact(self) -> bool:
        return _is_zero(self.cov)

    @property
    def quadratic(self) -> bool:
        return True

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr @ self._m + _quad_form(arr, self._S) / 2.0
        return _finish(out, single, "Gaussian")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        val = _dot(wf, self.mean) * tf + self._s(wf) * tf * tf / 2
        with mpmath.workdps(dps):
            return _mp(val)

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return sp.Add(*[_sp(x) * s for x, s in zip(self.mean, syms, strict=True)]) + self._quad_sympy(syms) / 2

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = [Fraction(0), _dot(wf, self.mean), self._s(wf) / 2] + [Fraction(0)] * max(0, K - 2)
        c = c[: K + 1]
        if exact:
            return [_fq(v) for v in c]
        with _arb_context(prec, K):
            return [_arbq(v) for v in c]

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = [0, _qp(_dot(wf, self.mean), p), _qp(self._s(wf) / 2, p)] + [0] * max(0, K - 2)
        return c[: K + 1]

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self._m[None, :] + self._normal(N, rng)


@dataclass(frozen=True, repr=False)
class GaussianMixture2(_CovMixin, Family):
    r"""Symmetric Gaussian mixture :math:`\tfrac12 N(m, \Sigma) + \tfrac12 N(-m, \Sigma)` (seed 003 Ex. 5).

    .. math::

        \Lambda(a) = \log\cosh\langle m, a\rangle + \tfrac12 a^T\Sigma a, \qquad
        \Lambda^w(t) = \tfrac{s}{2} t^2 + \sum_{m\ge1} h_m \mu^{2m} t^{2m},

    :math:`\mu = \langle w, m\rangle`, :math:`s = w^T\Sigma w`, :math:`h_m` the (non-zero)
    Taylor coefficients of :math:`\log\cosh`. Prop. 11 form with :math:`\lambda = \mu^2`
    from :math:`m_0 = 2` (the :math:`t^2` coefficient mixes in :math:`s`).

    Parameters
    ----------
    m : (d,) numbers, the mean of the first component
    cov : (d, d) symmetric positive semidefinite matrix
    """

    m: tuple[Fraction, ...]
    cov: tuple[tuple[Fraction, ...], ...]
    _m: np.ndarray = field(init=False, repr=False, compare=False)
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mv = _vector(self.m, "m")
        object.__setattr__(self, "m", mv)
        object.__setattr__(self, "_m", np.array([_float(v, "m") for v in mv]))
        self._set_cov(self.cov, len(mv))

    def __repr__(self) -> str:
        return _repr(self, ["m", "cov"])

    @property
    def dim(self) -> int:
        return len(self.m)

    @property
    def compact(self) -> bool:
        # Sigma = 0: the two-point law on {m, -m}
        return _is_zero(self.cov)

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            z = arr @ self._m
        if not np.all(np.isfinite(z)):
            raise InputError("GaussianMixture2: <m, a> overflows float64; rescale the arguments")
        return _finish(_log_cosh(z) + _quad_form(arr, self._S) / 2.0, single, "GaussianMixture2")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        with mpmath.workdps(dps + 10):
            val = _mp_log_cosh(_mp(_dot(wf, self.m) * tf)) + _mp(self._s(wf) * tf * tf / 2)
        with mpmath.workdps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        z = sp.Add(*[_sp(x) * s for x, s in zip(self.m, syms, strict=True)])
        return sp.log(sp.cosh(z)) + self._quad_sympy(syms) / 2

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        mu, s = _dot(wf, self.m), self._s(wf)
        M = K // 2
        if exact:
            h = _even_log_series_exact("cosh", M)
            out = [fmpq(0)] * (K + 1)
            mu2, pw = _fq(mu) ** 2, fmpq(1)
            for k in range(1, M + 1):
                pw *= mu2
                out[2 * k] = h[k] * pw
            if K >= 2:
                out[2] += _fq(s / 2)
            return out
        with _arb_context(prec, 2 * M + 1):
            ha = _even_log_series_arb_cached("cosh", M, int(prec))
            outa = [arb(0)] * (K + 1)
            mu2a, pwa = _arbq(mu) ** 2, arb(1)
            for k in range(1, M + 1):
                pwa *= mu2a
                outa[2 * k] = ha[k] * pwa
            if K >= 2:
                outa[2] += _arbq(s / 2)
            return outa

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        mu, s2 = _dot(wf, self.m), self._s(wf)
        M = K // 2
        h = _even_log_series_modp("cosh", M, p)
        mu2, pw = _qp(mu * mu, p), 1
        out = [0] * (K + 1)
        for k in range(1, M + 1):
            pw = pw * mu2 % p
            out[2 * k] = h[k] * pw % p
        if K >= 2:
            out[2] = (out[2] + _qp(s2 / 2, p)) % p
        return out

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        sign = rng.integers(0, 2, size=int(N)) * 2.0 - 1.0
        return sign[:, None] * self._m[None, :] + self._normal(N, rng)

    def vandermonde_form(self, w: Any) -> VandermondeForm:
        mu = _dot(_direction(w, self.dim), self.m)
        return VandermondeForm(tag="mixture", lam=mu * mu, m0=2)


def _base_modp(base: Family, wf: Sequence[Fraction], K: int, p: int) -> list[int]:
    """``base``'s coefficients mod ``p``; empirical laws straight from their atoms (no long rationals)."""
    if isinstance(base, Empirical):
        return list(_cgf.series_log_mgf_modp(base.projected(wf), base.exact_weights(), K, p))
    return list(base.taylor_1d_modp(wf, K, p))


def _check_base(base: Any, what: str) -> Family:
    if not isinstance(base, Family):
        raise InputError(f"{what}: base must be a Family, got {type(base).__name__}")
    return base


def _shift_coefficient(c: list[Any], k: int, v: Fraction, exact: bool, prec: int) -> list[Any]:
    out = list(c)
    if k < len(out):
        if exact:
            out[k] = out[k] + _fq(v)
        else:
            with _arb_context(prec, len(out) - 1):
                out[k] = out[k] + _arbq(v)
    return out


@dataclass(frozen=True, repr=False)
class GaussianConvolution(_CovMixin, Family):
    r"""The law of :math:`X + Z`, :math:`X \sim` ``base``, :math:`Z \sim N(0, \Sigma')` independent (seed 003 Prop. 12).

    .. math::

        \Lambda(a) = \Lambda_{\text{base}}(a) + \tfrac12 a^T\Sigma' a.

    Only the :math:`t^2` coefficient changes, so the base's Prop. 11 form survives from
    :math:`m_0 = \max(m_0^{\text{base}}, 2)` (powers :math:`\ge 4`). Not compact unless
    :math:`\Sigma' = 0`.

    Parameters
    ----------
    base : Family
    cov : (d, d) symmetric positive semidefinite matrix, ``d = base.dim``
    """

    base: Family
    cov: tuple[tuple[Fraction, ...], ...]
    _S: np.ndarray = field(init=False, repr=False, compare=False)
    _L: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_base(self.base, "GaussianConvolution")
        self._set_cov(self.cov, self.base.dim)

    def __repr__(self) -> str:
        return _repr(self, ["base", "cov"])

    @property
    def dim(self) -> int:
        return self.base.dim

    @property
    def compact(self) -> bool:
        return self.base.compact and _is_zero(self.cov)

    @property
    def quadratic(self) -> bool:
        return self.base.quadratic

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        out = np.asarray(self.base.cgf(arr), dtype=np.float64) + _quad_form(arr, self._S) / 2.0
        return _finish(out, single, "GaussianConvolution")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        b = self.base.cgf_1d_mp(tf, wf, dps + 10)
        with mpmath.workdps(dps + 10):
            val = b + _mp(self._s(wf) * tf * tf / 2)
        with mpmath.workdps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return self.base.cgf_sympy(syms) + self._quad_sympy(syms) / 2

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        wf = _direction(w, self.dim)
        return self.base.cgf_1d_sympy(t, wf) + _sp(self._s(wf)) * t**2 / 2

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = self.base.taylor_1d(wf, K, exact=exact, prec=prec)
        return _shift_coefficient(c, 2, self._s(wf) / 2, exact, prec)

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = _base_modp(self.base, wf, K, p)
        if K >= 2:
            c[2] = (c[2] + _qp(self._s(wf) / 2, p)) % p
        return c

    def mgf_radius(self, w: Any) -> float:
        return self.base.mgf_radius(w)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self.base.sample(N, rng) + self._normal(N, rng)

    def vandermonde_form(self, w: Any) -> VandermondeForm | None:
        f = self.base.vandermonde_form(w)
        return None if f is None else VandermondeForm(tag=f.tag, lam=f.lam, m0=max(f.m0, 2))


@dataclass(frozen=True, repr=False)
class Translation(Family):
    r"""The law of :math:`X + v`, :math:`X \sim` ``base``: :math:`\Lambda(a) = \Lambda_{\text{base}}(a) + \langle v, a\rangle`.

    Never independent of its base modulo affine functions (seed 003 Ex. 6); the
    Prop. 11 form (if any) is the base's.

    Parameters
    ----------
    base : Family
    shift : (d,) numbers, ``d = base.dim``
    """

    base: Family
    shift: tuple[Fraction, ...]
    _v: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_base(self.base, "Translation")
        v = _vector(self.shift, "shift", self.base.dim)
        object.__setattr__(self, "shift", v)
        object.__setattr__(self, "_v", np.array([_float(x, "shift") for x in v]))

    def __repr__(self) -> str:
        return _repr(self, ["base", "shift"])

    @property
    def dim(self) -> int:
        return self.base.dim

    @property
    def compact(self) -> bool:
        return self.base.compact

    @property
    def quadratic(self) -> bool:
        return self.base.quadratic

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.asarray(self.base.cgf(arr), dtype=np.float64) + arr @ self._v
        return _finish(out, single, "Translation")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        b = self.base.cgf_1d_mp(tf, wf, dps + 10)
        with mpmath.workdps(dps + 10):
            val = b + _mp(_dot(wf, self.shift) * tf)
        with mpmath.workdps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return self.base.cgf_sympy(syms) + sp.Add(*[_sp(x) * s for x, s in zip(self.shift, syms, strict=True)])

    def cgf_1d_sympy(self, t: sp.Symbol, w: Any) -> sp.Expr:
        wf = _direction(w, self.dim)
        return self.base.cgf_1d_sympy(t, wf) + _sp(_dot(wf, self.shift)) * t

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = self.base.taylor_1d(wf, K, exact=exact, prec=prec)
        return _shift_coefficient(c, 1, _dot(wf, self.shift), exact, prec)

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c = _base_modp(self.base, wf, K, p)
        c[1] = (c[1] + _qp(_dot(wf, self.shift), p)) % p
        return c

    def mgf_radius(self, w: Any) -> float:
        return self.base.mgf_radius(w)

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self.base.sample(N, rng) + self._v[None, :]

    def vandermonde_form(self, w: Any) -> VandermondeForm | None:
        return self.base.vandermonde_form(w)


@dataclass(frozen=True, eq=False, repr=False)
class EmpiricalConvolution(Family):
    r"""The law of :math:`X + Y`, :math:`X \sim` ``first``, :math:`Y \sim` ``second`` independent.

    .. math:: \Lambda = \Lambda_1 + \Lambda_2

    so :math:`\Lambda - \Lambda_1 - \Lambda_2 = 0`: the three are never weakly
    independent (seed 003 Ex. 6, Remark 5). ``cgf_sympy`` is literally the sum of the two
    expressions so that the identity cancels exactly in sympy.

    Parameters
    ----------
    first, second : Empirical of the same dimension
    """

    first: Empirical
    second: Empirical

    def __post_init__(self) -> None:
        for name in ("first", "second"):
            if not isinstance(getattr(self, name), Empirical):
                raise InputError(
                    f"EmpiricalConvolution: {name} must be an Empirical, got {type(getattr(self, name)).__name__}"
                )
        if self.first.dim != self.second.dim:
            raise InputError(
                f"EmpiricalConvolution: first has dimension {self.first.dim}, second has {self.second.dim}"
            )

    def __repr__(self) -> str:
        return (
            f"EmpiricalConvolution(first=<{self.first.atoms.shape[0]} atoms>, "
            f"second=<{self.second.atoms.shape[0]} atoms>, dim={self.dim})"
        )

    @property
    def dim(self) -> int:
        return self.first.dim

    @property
    def compact(self) -> bool:
        return True

    @property
    def quadratic(self) -> bool:
        return self.first.quadratic and self.second.quadratic

    def cgf(self, a: Any) -> Any:
        arr, single = _args(a, self.dim)
        out = np.asarray(self.first.cgf(arr)) + np.asarray(self.second.cgf(arr))
        return _finish(out, single, "EmpiricalConvolution")

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        wf = _direction(w, self.dim)
        tf = _t_fraction(t)
        with mpmath.workdps(dps + 10):
            val = self.first.cgf_1d_mp(tf, wf, dps + 10) + self.second.cgf_1d_mp(tf, wf, dps + 10)
        with mpmath.workdps(dps):
            return +val

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        return self.first.cgf_sympy(syms) + self.second.cgf_sympy(syms)

    def taylor_1d(self, w: Any, K: int, *, exact: bool = True, prec: int = 128) -> list[Any]:
        _check_K(K)
        wf = _direction(w, self.dim)
        c1 = self.first.taylor_1d(wf, K, exact=exact, prec=prec)
        c2 = self.second.taylor_1d(wf, K, exact=exact, prec=prec)
        if exact:
            return [x + y for x, y in zip(c1, c2, strict=True)]
        with _arb_context(prec, K):
            return [x + y for x, y in zip(c1, c2, strict=True)]

    def taylor_1d_modp(self, w: Any, K: int, p: int) -> list[int]:
        _check_K(K)
        wf = _direction(w, self.dim)
        a, b = _base_modp(self.first, wf, K, p), _base_modp(self.second, wf, K, p)
        return [(x + y) % p for x, y in zip(a, b, strict=True)]

    def sample(self, N: int, rng: np.random.Generator) -> np.ndarray:
        _check_N(N)
        return self.first.sample(N, rng) + self.second.sample(N, rng)

    def as_empirical(self, strict: bool = True) -> Empirical:
        r"""The same law as an :class:`Empirical` on the pairwise sums :math:`x_i + y_j`, weights :math:`w_i v_j`.

        The masses are exact rational products. ``strict=True`` raises
        :class:`~ntkcheck.errors.PrecisionError` when a sum is not exactly representable in
        float64, since the result would then be a different law than ``first * second`` and
        exact identities would fail.
        """
        x, y = self.first.atoms, self.second.atoms
        sums = (x[:, None, :] + y[None, :, :]).reshape(-1, self.dim)
        wts = [wi * vj for wi in self.first.weights for vj in self.second.weights]  # exact rationals
        if strict:
            n2 = y.shape[0]
            for i, xi in enumerate(x):
                for j, yj in enumerate(y):
                    s = sums[i * n2 + j]
                    for k in range(self.dim):
                        if Fraction(float(xi[k])) + Fraction(float(yj[k])) != Fraction(float(s[k])):
                            raise PrecisionError(
                                f"as_empirical: atom {i} + atom {j} (coordinate {k}: {xi[k]!r} + {yj[k]!r}) "
                                "is not exactly representable in float64; use dyadic tokens or strict=False"
                            )
        return Empirical(sums, wts)


# ------------------------------------------------------------------------- registry

#: name -> (class, required parameters, optional parameters)
_REGISTRY: dict[str, tuple[type[Family], tuple[str, ...], tuple[str, ...]]] = {
    "empirical": (Empirical, ("atoms",), ("weights",)),
    "dirac": (Dirac, ("point",), ()),
    "uniform-cube": (UniformCube, ("radius", "dim"), ()),
    "laplace": (Laplace, ("cov",), ()),
    "gaussian": (Gaussian, ("mean", "cov"), ()),
    "gaussian-mixture": (GaussianMixture2, ("m", "cov"), ()),
    "gaussian-convolution": (GaussianConvolution, ("base", "cov"), ()),
    "translation": (Translation, ("base", "shift"), ()),
    "empirical-convolution": (EmpiricalConvolution, ("first", "second"), ()),
}

#: The names :func:`family_from_name` accepts.
FAMILY_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def family_from_name(name: str, **params: Any) -> Family:
    """Build a family from its CLI name and keyword parameters.

    ===========================  =========================================================
    name                         parameters
    ===========================  =========================================================
    ``empirical``                ``atoms`` (N, d), optional ``weights`` (N,)
    ``dirac``                    ``point`` (d,)
    ``uniform-cube``             ``radius`` > 0, ``dim`` >= 1
    ``laplace``                  ``cov`` (d, d) PSD
    ``gaussian``                 ``mean`` (d,), ``cov`` (d, d) PSD
    ``gaussian-mixture``         ``m`` (d,), ``cov`` (d, d) PSD
    ``gaussian-convolution``     ``base`` (a Family), ``cov`` (d, d) PSD
    ``translation``              ``base`` (a Family), ``shift`` (d,)
    ``empirical-convolution``    ``first``, ``second`` (Empirical)
    ===========================  =========================================================

    Names are case-insensitive; ``_`` and ``-`` are interchangeable. Numbers may be
    ``Fraction``, ``int``, decimal ``str`` (exact) or ``float`` (its dyadic value).

    Examples
    --------
    >>> family_from_name("uniform-cube", radius="1/2", dim=2)
    UniformCube(radius=1/2, dim=2)
    """
    if not isinstance(name, str):
        raise DomainError(f"family name: expected a string, got {name!r}")
    key = name.strip().lower().replace("_", "-")
    if key not in _REGISTRY:
        raise DomainError(f"unknown family {name!r}; valid names: {', '.join(FAMILY_NAMES)}")
    cls, required, optional = _REGISTRY[key]
    missing = [p for p in required if p not in params]
    extra = [p for p in params if p not in required + optional]
    if missing or extra:
        expected = ", ".join(list(required) + [f"{p} (optional)" for p in optional])
        got = ", ".join(sorted(params)) or "nothing"
        raise InputError(f"family {key!r} takes parameters {expected}; got {got}")
    return cls(**params)
