r"""Named dependence structures among empirical laws, each verified exactly.

The CGFs :math:`\Lambda_i` of token samples are dependent modulo affine functions when
:math:`\sum_i c_i\Lambda_i(a) = \langle\alpha, a\rangle` for some :math:`c \ne 0` (seed 003,
Training Infinitely Deep and Wide Transformers, Def. 6 and Ex. 6). This module recognises the
structures that put vectors in the dependency space :math:`D`, each verified exactly
(float64 atoms compared as the rationals they are):

* **duplicates**: sample ``j`` has the same law as sample ``i`` (``c = e_j - e_i``, ``alpha = 0``);
* **translates**: :math:`\mu_j = \mu_i + s` (``c = e_j - e_i``, ``alpha = s``);
* **products**: :math:`\mu_k` is the law of :math:`X + Y` (up to a shift ``s``), ``X ~ mu_i``,
  ``Y ~ mu_j`` independent (``c = e_k - e_i - e_j``, ``alpha = s``);
* **single Diracs**: :math:`\Lambda_i(a) = \langle x_i, a\rangle` (``c = e_i``, ``alpha = x_i``);
  their relations :math:`\sum_i c_i x_i = 0` lie in :math:`D_0`.

The kernel of the NTK Gram they predict is counted in :mod:`ntkcheck.ntk.prop8.structure`.

References: seed 003 (Training Infinitely Deep and Wide Transformers) Def. 6, Ex. 6;
``theory/ntk-prop8.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..._records import restore
from ...cgf import as_laws
from .exact import _Laws

__all__ = ["Relation", "find_relations"]

#: float fingerprints (variance traces, third cumulants) of candidate translates and
#: products must agree to this relative tolerance: rounding of sums of O(m) products is
#: ~1e-15 relative; exact verification follows, so the filter only needs to keep true matches
_FINGERPRINT_RTOL = 1e-8


# ----------------------------------------------------------------------- exact atom tests


def _two_diff(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a - b`` as an unevaluated pair ``(hi, lo)`` with ``hi + lo = a - b`` exactly
    (Knuth's TwoSum on ``a + (-b)``; exact for finite doubles without overflow). Two
    differences are equal as rationals iff their pairs are equal."""
    nb = -b
    hi = a + nb
    bb = hi - a
    lo = (a - (hi - bb)) + (nb - bb)
    return hi, lo


def _translate_shift(L: _Laws, i: int, j: int) -> tuple[Fraction, ...] | None:
    r"""The exact ``s`` with :math:`\mu_j = \mu_i + s`, or None (equal atom counts and masses
    in lex order are checked by the caller)."""
    if L.laws[i].rounded or L.laws[j].rounded:  # values that are not doubles: compare them in Fraction
        Fi, Fj = L.sorted_exact(i), L.sorted_exact(j)
        s = tuple(b - a for a, b in zip(Fi[0], Fj[0], strict=True))
        ok = all(all(b - a == sk for a, b, sk in zip(x, y, s, strict=True)) for x, y in zip(Fi, Fj, strict=True))
        return s if ok else None
    Xi, _ = L.sorted(i)
    Xj, _ = L.sorted(j)
    hi, lo = _two_diff(Xj, Xi)
    if not (np.all(hi == hi[0]) and np.all(lo == lo[0])):
        return None
    return tuple(Fraction(float(h)) + Fraction(float(l_)) for h, l_ in zip(hi[0], lo[0], strict=True))


def _product_shift(L: _Laws, i: int, j: int, k: int) -> tuple[Fraction, ...] | None:
    r"""The exact ``s`` with :math:`\mu_k = \mu_i * \mu_j + s` (law of ``X + Y + s``), or None."""
    conv: dict[tuple[Fraction, ...], Fraction] = {}
    Fi, Fj = L.fractions(i), L.fractions(j)
    for wa, xa in zip(L.laws[i].weights, Fi, strict=True):
        for wb, yb in zip(L.laws[j].weights, Fj, strict=True):
            key = tuple(p + q for p, q in zip(xa, yb, strict=True))
            conv[key] = conv.get(key, Fraction(0)) + wa * wb
    if len(conv) != L.laws[k].n_atoms:
        return None
    cmin = min(conv)  # tuple order on rationals is the lex order
    Fk = L.fractions(k)
    zmin = min(Fk)
    s = tuple(z - c for z, c in zip(zmin, cmin, strict=True))
    for wc, zc in zip(L.laws[k].weights, Fk, strict=True):
        key = tuple(z - t for z, t in zip(zc, s, strict=True))
        if conv.get(key) != wc:
            return None
    return s


def _fingerprints(L: _Laws) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float translation-invariant cumulants, additive under independent sums: the variance
    trace, the third cumulant along a fixed generic direction, and a scale for tolerances."""
    rng = np.random.default_rng(12345)
    u = rng.standard_normal(L.d)
    u /= np.linalg.norm(u)
    var = np.empty(L.n)
    k3 = np.empty(L.n)
    scale = np.empty(L.n)
    # tokens beyond ~1e102 overflow the cubes: an inf or nan fingerprint filters nothing out (every
    # comparison with it is False), and each candidate it lets through is verified exactly
    with np.errstate(over="ignore", invalid="ignore"):
        for i, law in enumerate(L.laws):
            m = law.masses
            Xc = law.atoms - m @ law.atoms
            var[i] = float(m @ np.einsum("ad,ad->a", Xc, Xc))
            z = Xc @ u
            k3[i] = float(m @ z**3)
            scale[i] = float(np.max(np.abs(law.atoms))) if law.atoms.size else 0.0
    return var, k3, scale


# ----------------------------------------------------------------------------- relations


def _fmt_vec(v: Sequence[Any]) -> str:
    items = [f"{float(x):.6g}" for x in v]
    if len(items) > 6:
        return "(" + ", ".join(items[:5]) + f", ..., {items[-1]}) [{len(items)} entries]"
    return "(" + ", ".join(items) + ")"


@dataclass(frozen=True)
class Relation:
    r"""One verified linear relation :math:`\sum_i c_i\Lambda_i(a) = \langle\alpha, a\rangle`.

    Attributes
    ----------
    kind : str
        ``"duplicate"``, ``"translate"``, ``"product"``, ``"dirac"`` or ``"decide"`` (a null
        vector certified by :func:`~ntkcheck.independence.decision.decide` that is not a named structure).
    samples : tuple of int
        The samples involved: ``(i, j)`` for "sample j is sample i (translated)",
        ``(i, j, k)`` for "sample k is the law of X+Y, X ~ i, Y ~ j", ``(i,)`` for a Dirac.
    c : tuple of Fraction
        The coefficients (length ``n``).
    alpha : tuple of Fraction
        The linear part (length ``d``); ``beta = 0`` always (every :math:`\Lambda_i(0) = 0`).
    shift : tuple of Fraction or None
        The translation ``s`` of a translate or shifted product.
    sentence : str
        The structure in words ("sample 12 is sample 3 (equal laws)").
    """

    kind: str
    samples: tuple[int, ...]
    c: tuple[Fraction, ...]
    alpha: tuple[Fraction, ...]
    shift: tuple[Fraction, ...] | None
    sentence: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "samples": list(self.samples),
            "c": [str(v) for v in self.c],
            "alpha": [str(v) for v in self.alpha],
            "shift": None if self.shift is None else [float(v) for v in self.shift],
            "sentence": self.sentence,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Relation:
        return restore(cls, d)


def _unit(n: int, pairs: Sequence[tuple[int, int]]) -> tuple[Fraction, ...]:
    c = [Fraction(0)] * n
    for i, v in pairs:
        c[i] += v
    return tuple(c)


def _var_tol(L: _Laws, var: np.ndarray, scale: np.ndarray, *idx: int) -> float:
    """Tolerance of a variance-trace comparison: relative ``_FINGERPRINT_RTOL`` plus the
    cancellation of centring atoms far from the origin (~``d eps |x|^2`` each, generously)."""
    return (_FINGERPRINT_RTOL * max(max(var[i] for i in idx), 1e-300)
            + 1e-12 * L.d * max(scale[i] for i in idx) ** 2)


def _translation_classes(L: _Laws, idx: list[int], var: np.ndarray, scale: np.ndarray) -> list[Relation]:
    """Duplicates and translates among the laws ``idx`` (each compared with the first
    member of its class: translation is an equivalence relation)."""
    n = L.n
    buckets: dict[tuple[Any, ...], list[int]] = {}
    for i in idx:
        _, w = L.sorted(i)
        buckets.setdefault((L.laws[i].n_atoms, w), []).append(i)
    out: list[Relation] = []
    for members in buckets.values():
        if len(members) < 2:
            continue
        reps: list[int] = []
        for j in members:  # in sample order: the representative is the first
            for i in reps:
                if abs(var[j] - var[i]) > _var_tol(L, var, scale, i, j):
                    continue
                s = _translate_shift(L, i, j)
                if s is None:
                    continue
                c = _unit(n, [(j, 1), (i, -1)])
                if all(v == 0 for v in s):
                    out.append(Relation("duplicate", (i, j), c, s, s, f"sample {j} is sample {i} (equal laws)"))
                else:
                    out.append(Relation("translate", (i, j), c, s, s,
                                        f"sample {j} is sample {i} translated by {_fmt_vec(s)}"))
                break
            else:
                reps.append(j)
    return out


def _products(L: _Laws, idx: list[int], reps: list[int], var: np.ndarray, k3: np.ndarray,
              scale: np.ndarray) -> list[Relation]:
    """Laws ``k`` in ``idx`` that are (shifted) laws of ``X + Y`` with ``X, Y`` among ``reps``."""
    if len(reps) < 1 or len(idx) < 2:
        return []
    order = sorted(idx, key=lambda k: var[k])
    vs = np.array([var[k] for k in order])
    smax = np.float64(max(scale[k] for k in idx))  # numpy: huge tokens give inf tolerances, not OverflowError
    with np.errstate(over="ignore", invalid="ignore"):
        return _product_candidates(L, reps, order, vs, var, k3, scale, smax)


def _product_candidates(L: _Laws, reps: list[int], order: list[int], vs: np.ndarray, var: np.ndarray,
                        k3: np.ndarray, scale: np.ndarray, smax: np.float64) -> list[Relation]:
    """The loop of :func:`_products`: fingerprints (variance, third cumulant) first, then the exact check."""
    n = L.n
    out: list[Relation] = []
    for a, i in enumerate(reps):
        for j in reps[a:]:
            target = var[i] + var[j]
            tol = _FINGERPRINT_RTOL * max(target, 1e-300) + 1e-12 * L.d * smax**2
            lo = np.searchsorted(vs, target - tol, side="left")
            hi = np.searchsorted(vs, target + tol, side="right")
            for pos in range(int(lo), int(hi)):
                k = order[pos]
                if k in (i, j):
                    continue
                mk, mi, mj = L.laws[k].n_atoms, L.laws[i].n_atoms, L.laws[j].n_atoms
                if not (max(mi, mj) <= mk <= mi * mj):
                    continue
                s3 = np.float64(max(scale[i], scale[j], scale[k], 1e-300)) ** 3
                if abs(k3[k] - k3[i] - k3[j]) > 1e-7 * s3:
                    continue
                s = _product_shift(L, i, j, k)
                if s is None:
                    continue
                c = _unit(n, [(k, 1), (i, -1), (j, -1)])
                Y = f"sample {j}" if j != i else f"another copy of sample {i}"
                what = f"sample {k} is the law of X+Y, X ~ sample {i}, Y ~ {Y} independent"
                if any(v != 0 for v in s):
                    what += f", translated by {_fmt_vec(s)}"
                out.append(Relation("product", (i, j, k), c, s, s if any(v != 0 for v in s) else None, what))
    return out


def find_relations(samples: Any) -> tuple[Relation, ...]:
    r"""The named dependence structures among the samples, each verified exactly.

    Duplicates (equal laws), translates (with the shift), products (the law of ``X + Y``
    beside the laws of ``X`` and ``Y``, up to a shift) and single Diracs; see the module
    docstring. Products are searched with ``X`` and ``Y`` among the first member of each
    translation class (the others follow from the translate relations).

    Parameters
    ----------
    samples : list of Empirical or token arrays

    Returns
    -------
    tuple of Relation

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])
    >>> [r.sentence for r in find_relations([x, x + 1.0, x])]
    ['sample 1 is sample 0 translated by (1, 1)', 'sample 2 is sample 0 (equal laws)']
    """
    return _find(_Laws(as_laws(samples)))


def _find(L: _Laws) -> tuple[Relation, ...]:
    n = L.n
    diracs = [i for i, law in enumerate(L.laws) if law.n_atoms == 1]
    rich = [i for i in range(n) if i not in set(diracs)]
    out: list[Relation] = []
    for i in diracs:
        x = L.fractions(i)[0]
        out.append(Relation("dirac", (i,), _unit(n, [(i, 1)]), x, None,
                            f"sample {i} is a single Dirac at {_fmt_vec(x)} (its CGF is linear)"))
    if rich:
        var, k3, scale = _fingerprints(L)
        trans = _translation_classes(L, rich, var, scale)
        out.extend(sorted(trans, key=lambda r: r.samples[::-1]))
        followers = {r.samples[1] for r in trans}
        reps = [i for i in rich if i not in followers]
        out.extend(_products(L, rich, reps, var, k3, scale))
    return tuple(out)
