r"""The empirical law of a token sample (:class:`Empirical`), the one sample type of the package.

What lives here: :func:`exact_masses` (token weights as exact rationals),
:class:`Empirical` (distinct atoms with exact masses) and :func:`as_laws` (token data as
laws, validated once where data enter).

References: seed 003 §3 (the NTK acts on :math:`L^2(\mu_i)`), theory/ntk-prop8.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp

from .._precision import mp_dps
from .._validate import as_token_values, exact_rows, real_values
from .._validate import rational_direction as _direction
from ..errors import DomainError, InputError
from . import core as _cgf
from ._series import _check_dps, _symbols
from .base import Family

__all__ = [
    "Empirical",
    "as_laws",
    "exact_masses",
    "require_float_view",
    "FLOAT_VIEW_MIN_NORM",
]

#: smallest largest-token norm ``R`` the float64 Gram routes accept: the Gram's entries are at most
#: ``R^2`` and its eigenvalues are resolved down to ``1e-26`` of the largest (the SVD of ``F``), so
#: below ``R^2 = tiny / 1e-26`` (``tiny = 2.2e-308``, the smallest normal double) what they resolve
#: falls into subnormals and zero
FLOAT_VIEW_MIN_NORM = float(np.sqrt(np.finfo(np.float64).tiny / 1e-26))


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


def _exact_float_key(ex: np.ndarray) -> np.ndarray:
    """An exact key of a wide float array (long double), as doubles: per value its binary exponent
    and the doubles whose sum is its mantissa. ``frexp`` never underflows, so ``1e-400`` and ``0``
    keep distinct keys (a split of the value itself into doubles rounds both to ``0.0``); each
    remainder is exact (a difference of nearby floats) and the mantissa's ``nmant + 1`` bits
    take at most ``ceil((nmant + 1) / 53)`` doubles (two on x86-64, three for IEEE quad)."""
    mant, exp = np.frexp(ex)
    parts = [exp.astype(np.float64)]
    rest = mant
    for _ in range(-(-(np.finfo(ex.dtype).nmant + 1) // 53) + 1):
        hi = rest.astype(np.float64)
        parts.append(hi)
        rest = rest - hi.astype(ex.dtype)
        if not np.any(rest):
            break
    return np.concatenate(parts, axis=1) + 0.0  # + 0.0: -0.0 is 0.0


#: samples of at most this many tokens find their distinct rows with a dict (np.unique's fixed cost
#: dominates there: 55 us against 10 us for 8 tokens, measured in ``as_laws`` of 128 samples)
_SMALL_SAMPLE = 64


def _distinct_rows(x: np.ndarray, ex: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The first index of each distinct row, in order of first appearance, and each row's slot
    among them; rows are compared exactly (the given values ``ex`` when they are not doubles)."""
    if ex is not None and ex.dtype == object:
        seen: dict[tuple[Any, ...], int] = {}
        slot_l = [seen.setdefault(r, len(seen)) for r in exact_rows(ex)]
        firsts: dict[int, int] = {}
        for j, s in enumerate(slot_l):
            firsts.setdefault(s, j)
        return np.array([firsts[s] for s in range(len(seen))], dtype=np.intp), np.array(slot_l, dtype=np.intp)
    if ex is None:
        key = x
    elif ex.dtype.kind == "f":  # long double: its exponent and the doubles that sum to its mantissa
        key = _exact_float_key(ex)
    else:
        key = ex
    key = np.ascontiguousarray(key)
    # each row as one opaque byte string: equal bytes <=> equal values once -0.0 is gone
    if key.shape[0] <= _SMALL_SAMPLE:  # a dict of the rows' bytes: 5x faster than np.unique here
        buf, width = key.tobytes(), key.dtype.itemsize * key.shape[1]
        slots: dict[bytes, int] = {}
        slot_s = [slots.setdefault(buf[j * width:(j + 1) * width], len(slots)) for j in range(key.shape[0])]
        first_of: dict[int, int] = {}
        for j, sl in enumerate(slot_s):
            first_of.setdefault(sl, j)
        return np.fromiter(first_of.values(), np.intp, len(first_of)), np.array(slot_s, dtype=np.intp)
    rows = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1])))
    _, first, inverse = np.unique(rows.reshape(-1), return_index=True, return_inverse=True)
    order = np.argsort(first)  # distinct rows in order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    return first[order], rank[inverse.reshape(-1)]


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
    atoms : (N, d) array of real numbers
        The tokens (repeats allowed): floats, integers of any size, ``Fraction``,
        ``Decimal`` or ``np.longdouble``, each read at its exact value. Complex, boolean and
        string arrays are refused.
    weights : (N,) sequence, optional
        Non-negative token weights, default ``1/N`` each; read exactly
        (:func:`exact_masses`).

    Attributes
    ----------
    atoms : (m, d) read-only float array
        The distinct atoms, in order of first appearance, as the nearest doubles: the
        float64 view the float routes compute with. Distinct atoms are found by exact
        equality, so ``1`` and ``1 + 2^-60`` are two atoms even though their doubles coincide.
    weights : tuple of Fraction
        Their exact masses (sum exactly one); zero-mass tokens are dropped.
    n_tokens : int
        Number of tokens given.
    counts : (m,) int array
        How many given tokens each atom merges.
    rounded : bool
        Whether ``atoms`` differs from the values given (then :meth:`rational_atoms` holds
        them, and every exact route uses them; theory/certificates.md).

    Examples
    --------
    >>> law = Empirical(np.array([[0.0], [1.0], [0.0], [0.0]]))
    >>> law.atoms[:, 0].tolist(), [str(m) for m in law.weights], law.n_tokens
    ([0.0, 1.0], ['3/4', '1/4'], 4)
    >>> from fractions import Fraction
    >>> law = Empirical([[Fraction(1, 10)], [Fraction(1, 5)]])
    >>> law.rounded, [str(x[0]) for x in law.rational_atoms()], law.projected([1])
    (True, ['1/10', '1/5'], [Fraction(1, 10), Fraction(1, 5)])
    """

    atoms: np.ndarray
    weights: Any = None
    n_tokens: int = field(init=False, repr=False, default=0)
    counts: np.ndarray = field(init=False, repr=False)
    _w: np.ndarray = field(init=False, repr=False)
    _proj: dict[tuple[Fraction, ...], list[Fraction]] = field(init=False, repr=False, default_factory=dict)
    _exact: np.ndarray | None = field(init=False, repr=False, default=None)
    _rational: list[tuple[Fraction, ...]] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        x, ex = as_token_values(self.atoms, "atoms")
        n_tok = x.shape[0]
        uniform = self.weights is None
        masses = exact_masses(self.weights, n_tok)
        keep = [j for j, mj in enumerate(masses) if mj != 0]
        x = x[keep] + 0.0  # + 0.0 maps -0.0 to 0.0: the two are one point
        ex = None if ex is None else ex[keep]
        masses = [masses[j] for j in keep]
        first, slot = _distinct_rows(x, ex)
        m = first.shape[0]
        counts = np.bincount(slot, minlength=m)
        if uniform:  # uniform tokens: an atom's mass is its count over N
            merged = [Fraction(int(c), n_tok) for c in counts]
        else:
            merged = [Fraction(0)] * m
            for j, s in enumerate(slot):
                merged[int(s)] += masses[j]
        atoms = np.ascontiguousarray(x[first])
        atoms.setflags(write=False)  # projections are memoised: the atoms must not change under them
        counts.setflags(write=False)
        object.__setattr__(self, "atoms", atoms)
        object.__setattr__(self, "weights", tuple(merged))
        object.__setattr__(self, "n_tokens", int(n_tok))
        object.__setattr__(self, "counts", counts)
        # the nearest doubles of the masses; count / N in float64 is correctly rounded (both exact below 2^53)
        w = counts / n_tok if uniform and n_tok < 2**53 else np.array([float(v) for v in merged])
        object.__setattr__(self, "_w", w)
        if ex is not None:
            exact = real_values(ex[first], "atoms")[1]  # None when the tokens that round were dropped
            if exact is not None:
                exact.setflags(write=False)
                object.__setattr__(self, "_exact", exact)

    @property
    def rounded(self) -> bool:
        """True when the float64 :attr:`atoms` are not the values given (some token is not a double)."""
        return self._exact is not None

    def rational_atoms(self) -> list[tuple[Fraction, ...]]:
        """The distinct atoms at their exact values, as tuples of ``Fraction`` (memoised)."""
        if self._rational is None:
            src = self._exact if self._exact is not None else self.atoms
            object.__setattr__(self, "_rational", exact_rows(src))
        assert self._rational is not None
        return self._rational

    def atom_keys(self) -> list[tuple[Any, ...]]:
        """One hashable key per distinct atom, equal for equal points (exact): float tuples when the
        atoms are doubles, else ``Fraction`` tuples (Python hashes equal numbers alike)."""
        if self._exact is not None:
            return list(self.rational_atoms())
        return [tuple(float(v) for v in row) for row in self.atoms]

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
        """Exact projections :math:`\\langle w, x_j\rangle` of the atoms, at their exact values
        (memoised per direction)."""
        wf = tuple(_direction(w, self.dim))
        got = self._proj.get(wf)
        if got is None:
            if self._exact is None:
                got = _cgf._project_exact(self.atoms, wf)
            else:
                got = [sum((wk * xk for wk, xk in zip(wf, row, strict=True) if wk), Fraction(0))
                       for row in self.rational_atoms()]
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
        return self.n_atoms == 1

    def cgf(self, a: Any) -> Any:
        return _cgf.log_mgf(self.atoms, a, self._w)

    def cgf_1d_mp(self, t: Any, w: Any, dps: int = 50) -> mpmath.mpf:
        _check_dps(dps)
        proj = self.projected(w)
        with mp_dps(dps + 10):
            tt = mpmath.mpf(t) if not isinstance(t, Fraction) else mpmath.mpf(t.numerator) / t.denominator
            s = [tt * (mpmath.mpf(zj.numerator) / zj.denominator) for zj in proj]
            m = max(s)
            tot = mpmath.fsum(mpmath.mpf(wj.numerator) / wj.denominator * mpmath.exp(sj - m)
                              for wj, sj in zip(self.weights, s, strict=True))
            val = m + mpmath.log(tot)
        with mp_dps(dps):
            return +val

    def exact_weights(self) -> list[Fraction]:
        """The masses of the distinct atoms as exact rationals summing to one."""
        return list(self.weights)

    def cgf_sympy(self, a: Sequence[sp.Symbol]) -> sp.Expr:
        syms = _symbols(a, self.dim)
        terms = []
        wts = [sp.Rational(v.numerator, v.denominator) for v in self.exact_weights()]
        for wj, row in zip(wts, self.rational_atoms(), strict=True):
            score = sp.Add(*[sp.Rational(xk.numerator, xk.denominator) * ak for xk, ak in zip(row, syms, strict=True)])
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


def _distinct_texts(a: tuple[Fraction, ...], b: tuple[Fraction, ...]) -> tuple[str, str]:
    """Two distinct points in as few significant digits (6 to 40) as tell them apart (their exponents
    may be far outside float64)."""
    for digits in (6, 12, 20, 30, 40):
        with mp_dps(digits + 10):
            ta, tb = (", ".join(mpmath.nstr(mpmath.mpf(v.numerator) / v.denominator, digits) for v in p) for p in (a, b))
        if ta != tb:
            break
    return ta, tb


def require_float_view(laws: Sequence[Empirical], what: str) -> None:
    """Refuse, with a sentence naming the problem, data whose float64 view cannot stand for them
    in the float64 routes ``what`` runs (the NTK Gram, its head search and the head law's bound).

    Two cases: distinct atoms of one sample with the same nearest double (``0`` and ``1e-400``:
    their float64 feature rows coincide, so the float64 Gram is singular by rounding, not by the
    data), and tokens so small that the Gram's entries (at most ``R^2``, ``R`` the largest token
    norm) leave no room for its resolution in float64 (``R <`` :data:`FLOAT_VIEW_MIN_NORM`,
    about ``1.5e-141``). The exact routes (``decide``, the dependence structure) take such data;
    data that are exactly zero are left to the routes, which prove their kernel.

    Raises
    ------
    InputError
    """
    for i, law in enumerate(laws):
        _, first, inverse = np.unique(law.atoms, axis=0, return_index=True, return_inverse=True)
        if first.shape[0] == law.n_atoms:
            continue
        inverse = inverse.reshape(-1)
        b = next(k for k in range(law.n_atoms) if first[inverse[k]] != k)
        a = int(first[inverse[b]])
        ex = law.rational_atoms()
        ta, tb = _distinct_texts(ex[a], ex[b])
        raise InputError(
            f"sample {i}: atoms {a} and {b} are distinct ({ta} and {tb} exactly) but have the same nearest doubles "
            f"({', '.join(repr(float(v)) for v in law.atoms[a])}); {what} runs in float64, where their rows of the "
            "Gram coincide and it is singular by this rounding, not by the data: give tokens whose nearest doubles "
            "are distinct (rescaled or recentred; the CGF verdicts of `ntkcheck decide` are exact and take them as "
            "they are)")
    with np.errstate(all="ignore"):
        scale = max(float(np.max(np.abs(law.atoms))) for law in laws)
        R = max(scale * float(np.max(np.linalg.norm(law.atoms / scale, axis=1))) for law in laws) if scale else 0.0
    if R >= FLOAT_VIEW_MIN_NORM:
        return
    nonzero = any(any(v != 0 for row in law.rational_atoms() for v in row) if law.rounded else bool(np.any(law.atoms))
                  for law in laws)
    if nonzero:
        raise InputError(
            f"the largest token norm is {R:.3g} as a double, below {FLOAT_VIEW_MIN_NORM:.2g}: {what} runs in float64, "
            f"where the Gram's entries (at most the squared norm) leave no room above the smallest normal double for "
            "its resolution; rescale the tokens (the CGF verdicts of `ntkcheck decide` are exact and take them as "
            "they are)")
