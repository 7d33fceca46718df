r"""Laws whose MGF is an exponential polynomial times a Gaussian factor, in exact arithmetic.

:math:`e^{\Lambda(a)} = P(a)\, e^{a^T Q a / 2}` with
:math:`P(a) = \sum_v p_v e^{\langle v, a\rangle}`: empirical laws, convolutions of
empirical laws, Diracs, Gaussians, two-point mixtures, zero-covariance Laplace laws, and
their translates and Gaussian convolutions (:func:`exp_gauss_form`). Exponential
polynomials are finite tables {frequency: coefficient} in rational arithmetic; the
product identity (:mod:`ntkcheck.independence.identities`) multiplies and compares them.

References: seed 003 Ex. 6 and Remark 5, theory/cgf-independence.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .._budget import UNLIMITED, Budget
from ..cgf import (
    Dirac,
    Empirical,
    EmpiricalConvolution,
    Family,
    Gaussian,
    GaussianConvolution,
    GaussianMixture2,
    Laplace,
    Translation,
)

__all__ = [
    "ExpGaussForm",
    "exp_gauss_form",
]


Vec = tuple[Fraction, ...]
Mat = tuple[tuple[Fraction, ...], ...]


@dataclass(frozen=True)
class ExpGaussForm:
    r"""A law with :math:`e^{\Lambda(a)} = \big(\sum_v p_v e^{\langle v, a\rangle}\big)\, e^{a^T Q a/2}`.

    Attributes
    ----------
    atoms : dict {frequency v (tuple of Fraction): p_v (Fraction)}
        The exponential polynomial (for an empirical law: atoms and masses).
    quad : tuple of tuples of Fraction
        ``Q`` (``d x d``, or ``1 x 1`` along a direction).
    """

    atoms: dict[Vec, Fraction]
    quad: Mat


def _fr(x: Any) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(float(x))


@functools.lru_cache(maxsize=16)
def _zero(d: int) -> Mat:
    """The ``d x d`` zero matrix: one shared (immutable) object per ``d``, so that a sum can skip it
    (``m is _zero(d)``); building ``384^2`` Fractions anew for each law took a second."""
    return tuple(tuple(Fraction(0) for _ in range(d)) for _ in range(d))


def _add_mat(a: Mat, b: Mat) -> Mat:
    return tuple(tuple(x + y for x, y in zip(r, s)) for r, s in zip(a, b))


def _project_form(f: ExpGaussForm, w: Sequence[Fraction]) -> ExpGaussForm:
    out: dict[Vec, Fraction] = {}
    for v, p in f.atoms.items():
        z = (sum((wk * vk for wk, vk in zip(w, v)), Fraction(0)),)
        out[z] = out.get(z, Fraction(0)) + p
    s = sum((w[i] * f.quad[i][j] * w[j] for i in range(len(w)) for j in range(len(w))), Fraction(0))
    return ExpGaussForm({k: v for k, v in out.items() if v != 0}, ((s,),))


def _empirical_form(m: Empirical, w: Sequence[Fraction] | None) -> ExpGaussForm:
    if w is not None:
        out: dict[Vec, Fraction] = {}
        for z, p in zip(m.projected(w), m.weights):
            out[(z,)] = out.get((z,), Fraction(0)) + p
        return ExpGaussForm(out, ((Fraction(0),),))
    atoms = dict(zip(m.rational_atoms(), m.weights, strict=True))  # the exact atoms, distinct
    return ExpGaussForm(atoms, _zero(m.dim))


def exp_gauss_form(m: Family, direction: Sequence[Fraction] | None = None) -> ExpGaussForm | None:
    """The :class:`ExpGaussForm` of ``m`` (along ``direction`` when given), or None if it has none.

    Exact for :class:`Empirical`, :class:`EmpiricalConvolution` (the convolution of the
    two tables, no float sums), :class:`Dirac`, :class:`Gaussian`,
    :class:`GaussianMixture2`, :class:`Laplace` with zero covariance (a Dirac at 0), and
    :class:`Translation` / :class:`GaussianConvolution` of any of these.
    """
    w = None if direction is None else [Fraction(v) for v in direction]
    if isinstance(m, Empirical):
        return _empirical_form(m, w)
    if isinstance(m, EmpiricalConvolution):
        a, b = exp_gauss_form(m.first, w), exp_gauss_form(m.second, w)
        assert a is not None and b is not None
        return ExpGaussForm(_mul(a.atoms, b.atoms), a.quad)
    full: ExpGaussForm | None = None
    d = m.dim
    if isinstance(m, Dirac):
        full = ExpGaussForm({tuple(m.point): Fraction(1)}, _zero(d))
    elif isinstance(m, Gaussian):
        full = ExpGaussForm({tuple(m.mean): Fraction(1)}, tuple(tuple(r) for r in m.cov))
    elif isinstance(m, GaussianMixture2):
        plus, minus = tuple(m.m), tuple(-v for v in m.m)
        atoms = {plus: Fraction(1, 2)}
        atoms[minus] = atoms.get(minus, Fraction(0)) + Fraction(1, 2)
        full = ExpGaussForm(atoms, tuple(tuple(r) for r in m.cov))
    elif isinstance(m, Laplace) and all(x == 0 for r in m.cov for x in r):
        full = ExpGaussForm({tuple(Fraction(0) for _ in range(d)): Fraction(1)}, _zero(d))
    elif isinstance(m, Translation):
        base = exp_gauss_form(m.base, None)
        if base is not None:
            full = ExpGaussForm({tuple(x + s for x, s in zip(v, m.shift)): p for v, p in base.atoms.items()}, base.quad)
    elif isinstance(m, GaussianConvolution):
        base = exp_gauss_form(m.base, None)
        if base is not None:
            full = ExpGaussForm(base.atoms, _add_mat(base.quad, tuple(tuple(r) for r in m.cov)))
    if full is None:
        return None
    return full if w is None else _project_form(full, w)


def _pow(p: dict, n: int, budget: Budget = UNLIMITED) -> dict:
    """``p ** n`` for ``n >= 1``: a one-term ``p`` (a Gaussian's or a Dirac's exponential) directly,
    ``{n a: u ** n}``, whatever ``n`` (an integer null vector of seven Gaussians has entries near
    ``10**6``: that many multiplications took 45 s); otherwise ``n - 1`` multiplications (squaring
    would cost more: ``p ** (n/2)`` has almost as many terms as ``p ** n`` when ``p`` has few)."""
    if n < 1:
        raise ValueError(f"_pow needs n >= 1, got {n}")
    if len(p) == 1:
        ((a, u),) = p.items()
        return {tuple(n * x for x in a): u**n}
    out = p
    for _ in range(n - 1):
        out = _mul(out, p, budget)
    return out


def _mul(p: dict, q: dict, budget: Budget = UNLIMITED) -> dict:
    out: dict = {}
    for count, (a, u) in enumerate(p.items()):
        if count % 256 == 0:
            budget.check("product identity: expanding the exponential polynomials")
        for b, v in q.items():
            key = tuple(x + y for x, y in zip(a, b))
            out[key] = out.get(key, 0) + u * v
    return {k: v for k, v in out.items() if v != 0}
