r"""Seed 003 (training infinitely deep and wide transformers), section 3: the claims.

Each claim checks its conclusion with an engine that does not use the claim itself:
Prop. 7 is checked against the exact rank of the joint cumulant tensors (not through
``decide``, which applies Prop. 7 internally); Prop. 9 and the families against
``decide(..., method="exact")`` (rank over Q, no sufficient-condition shortcut).

This module holds the CGF-independence claims (Prop. 7, 9-12, Ex. 3-6, Remark 5) and the
registry ``CLAIMS_003`` in report order; the NTK claims (Prop. 5, 8, Ex. 6's Diracs with
Prop. 8) live in ``_seed003_ntk``, the shared engines and pinned instances in
``_seed003_common``.
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import strategies as nst
from ._core import Check, Claim, Instance
from ._seed003_common import (
    _PRODUCT,
    _PRODUCT_APART,
    _PROGRESSION,
    _RANDOM3,
    _conditions,
    _decide,
    _exact_rank,
    _expect,
    _verdict,
    inst_cache,
    weak_rank_reference,
)
from ._seed003_ntk import CLAIMS_003_NTK

__all__ = ["CLAIMS_003"]


# ----------------------------------------------------------------------------- Prop. 7


def _prop7_instances() -> st.SearchStrategy[Any]:
    return st.one_of(
        nst.token_sets(n=st.integers(1, 3), sizes=st.integers(2, 3), dim=st.integers(1, 2)),
        nst.rational_token_sets(n=st.integers(1, 3), sizes=st.integers(2, 3), dim=st.integers(1, 2)),
        nst.dependent_constructions(dim=st.integers(1, 2), families=False).map(lambda d: [np.asarray(m) for m in d.measures]),
    ).map(lambda s: {"samples": s})


def _prop7_hyp(inst: Instance) -> bool:
    dec = _decide(inst["samples"], "strong")
    inst_cache(inst)["strong"] = dec
    return _verdict(dec) == "independent"


def _prop7_concl(inst: Instance) -> Check:
    samples = inst["samples"]
    n = len(samples)
    dec = inst_cache(inst).get("strong")
    # decide's default truncation: a full-rank 1-D truncation along w is the image of
    # the joint truncation of the same orders, so this K is enough when Prop. 7 holds
    K = max(6, 2 * n + 2)
    r = weak_rank_reference(samples, K)
    w = [] if dec is None or dec.direction is None else [str(v) for v in dec.direction]
    return Check.of(r == n, f"strong independent at w = {w}; "
                            f"exact rank of the joint cumulants of orders 2..{K}: {r} of {n}")


# ----------------------------------------------------------------------------- Prop. 9, 10


@st.composite
def _gap_instances(draw: Any) -> dict[str, Any]:
    d = draw(st.integers(1, 2))
    samples = draw(st.one_of(
        nst.rational_token_sets(n=st.integers(1, 3), sizes=st.integers(2, 3), dim=d, max_numerator=6, denominator=2),
        nst.token_sets(n=st.integers(1, 3), sizes=st.integers(2, 3), dim=d),
    ))
    w = draw(nst.directions(d, max_numerator=3))
    return {"samples": samples, "w": w}


def _gap_hyp(inst: Instance) -> bool:
    return bool(_conditions().gap_condition(inst["samples"], inst["w"]).holds)


def _strong_exact_at_w(inst: Instance) -> Check:
    dec = _decide(inst["samples"], "strong", direction=inst["w"], method="exact")
    return _expect(dec, "independent")


def _prop10_instances() -> st.SearchStrategy[Any]:
    return st.tuples(
        st.integers(1, 2).flatmap(lambda d: st.tuples(
            st.sampled_from(["normal", "uniform", "laplace"]).flatmap(
                lambda dens: nst.token_sets(n=st.integers(1, 3), sizes=st.integers(2, 3), dim=d, density=dens)),
            nst.directions(d, max_numerator=5))),
    ).map(lambda t: {"samples": t[0][0], "w": t[0][1]})


def _prop10_concl(inst: Instance) -> Check:
    g = _conditions().gap_condition(inst["samples"], inst["w"])
    if not g.holds:
        return Check.failed(f"gap condition fails at w: {g.reason}")
    return _strong_exact_at_w(inst)


# ----------------------------------------------------------------------------- Prop. 11


@st.composite
def _prop11_instances(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 5))
    lams = draw(st.lists(nst.rationals(max_numerator=12, denominators=(1, 2, 3, 4), nonzero=True),
                         min_size=n, max_size=n))
    a = draw(st.lists(nst.rationals(max_numerator=6, denominators=(1, 2, 5, 7), nonzero=True),
                      min_size=n + 2, max_size=n + 2))
    return {"lambdas": lams, "a": a}


def _prop11_hyp(inst: Instance) -> bool:
    lams = inst["lambdas"]
    return all(v != 0 for v in lams) and len(set(lams)) == len(lams) and all(v != 0 for v in inst["a"])


class _Prop11Form:
    """A stand-in measure exposing only its Prop. 11 form (for ``conditions.vandermonde_condition``)."""

    def __init__(self, lam: Fraction) -> None:
        self.lam = lam

    def vandermonde_form(self, w: Any) -> Any:
        from ..cgf import VandermondeForm

        return VandermondeForm("prop11-claim", self.lam, 1)


def _prop11_concl(inst: Instance) -> Check:
    # independently of the coefficient form: evaluate the (finite) series
    # f_i(t) = sum_m a_m lambda_i^m t^{2m} exactly at 2 M + 3 rational points; the f_i are
    # independent modulo affine functions iff the rows f_i(t_k) together with the rows
    # 1 and t_k have full rank n + 2 (polynomials of degree 2M are determined by 2M + 1 values)
    lams, a = inst["lambdas"], inst["a"]
    M = len(a)
    ts = [Fraction(k, 3) for k in range(-(M + 1), M + 2)]
    rows = [[sum((a[m - 1] * lam**m * t ** (2 * m) for m in range(1, M + 1)), Fraction(0)) for t in ts] for lam in lams]
    rows += [[Fraction(1)] * len(ts), list(ts)]
    r = _exact_rank(rows)
    # the toolkit's condition (what decide uses for Ex. 3-5, Prop. 12) must accept the hypothesis
    cond = _conditions().vandermonde_condition([_Prop11Form(v) for v in lams], [Fraction(1)])
    ok = r == len(lams) + 2 and bool(cond.holds)
    return Check.of(ok, f"exact rank of (f_i(t_k); 1; t_k) at {len(ts)} points: {r} of {len(lams) + 2}; "
                        f"vandermonde_condition holds: {cond.holds} {getattr(cond, 'reason', '')}".rstrip())


# ----------------------------------------------------------------------------- families


def _params_distinct(attr: Any) -> Any:
    def hyp(inst: Instance) -> bool:
        vals = [attr(m) for m in inst["measures"]]
        return len(set(vals)) == len(vals) and all(v != 0 for v in vals)

    return hyp


def _family_independent(inst: Instance) -> Check:
    return _expect(_decide(list(inst["measures"]), "strong", method="exact"), "independent")


def _meas(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return strategy.map(lambda ms: {"measures": list(ms)})


def _pin_measures(build: Any) -> Any:
    return lambda: {"measures": build()}


def _cube_radius(m: Any) -> Fraction:
    return Fraction(m.radius)


def _laplace_s(m: Any) -> Fraction:
    # s_i along e_1 and the trace: distinct factors c_i S give distinct values of both
    return Fraction(m.cov[0][0])


def _mixture_sep(m: Any) -> Fraction:
    return Fraction(m.m[0]) ** 2


@st.composite
def _ex5_as_stated_instances(draw: Any) -> dict[str, Any]:
    from ..cgf import GaussianMixture2

    d = draw(st.integers(1, 2))
    n = draw(st.integers(2, 3))
    S = tuple(tuple(Fraction(int(i == j)) for j in range(d)) for i in range(d))
    ms = draw(st.lists(st.lists(nst.rationals(max_numerator=4, denominators=(1, 2)), min_size=d, max_size=d).map(tuple),
                       min_size=n, max_size=n))
    return {"measures": [GaussianMixture2(m, S) for m in ms], "w": tuple(Fraction(int(k == 0)) for k in range(d))}


def _ex5_as_stated_hyp(inst: Instance) -> bool:
    # the extracted statement: "Fix w and let [the separations] be pairwise distinct";
    # read as: the means m_i pairwise distinct and the projections <w, m_i> pairwise distinct
    ms = inst["measures"]
    proj = [sum((Fraction(a) * b for a, b in zip(m.m, inst["w"], strict=True)), Fraction(0)) for m in ms]
    return len({m.m for m in ms}) == len(ms) and len(set(proj)) == len(proj)


def _conv_radius(m: Any) -> Fraction:
    return Fraction(m.base.radius)


# ----------------------------------------------------------------------------- Ex. 6, Remark 5


def _dependent_instances(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return strategy.map(lambda dep: {"measures": list(dep.measures), "null_vector": dep.null_vector,
                                     "alpha": dep.alpha, "kind": dep.kind})


def _known_relation_holds(inst: Instance) -> tuple[bool, str]:
    """sum_i c_i Lambda_i(a) - <alpha, a> is constant: evaluated at random points (float)."""
    ms = importlib.import_module("ntkcheck.independence.decision").as_measures(list(inst["measures"]))
    c = np.array([float(v) for v in inst["null_vector"]])
    alpha = np.array([float(v) for v in inst["alpha"]])
    d = ms[0].dim
    rng = np.random.default_rng(0)
    # small arguments: inside every MGF domain (Laplace: |t| < sqrt(2/s))
    pts = rng.uniform(-0.2, 0.2, (6, d))
    vals = np.array([sum(ci * float(np.asarray(m.cgf(a)).reshape(-1)[0]) for ci, m in zip(c, ms, strict=True)) - alpha @ a for a in pts])
    spread = float(np.max(vals) - np.min(vals))
    scale = 1.0 + float(np.max(np.abs(vals)))
    # float64 evaluation of a few CGFs: 1e-10 relative is ~1e5 ulps of slack
    return spread <= 1e-10 * scale, f"known relation: spread of sum c_i Lambda_i - <alpha, a> = {spread:.2e}"


def _dependent_concl(inst: Instance) -> Check:
    ok, what = _known_relation_holds(inst)
    if not ok:
        return Check.failed(what)
    chk = _expect(_decide(list(inst["measures"]), "weak"), "dependent")
    return Check(chk.outcome, chk.detail + "; " + what)


def _all_atoms_distinct(inst: Instance) -> bool:
    atoms = [tuple(r) for x in inst["measures"] for r in np.asarray(x).tolist()]
    return len(set(atoms)) == len(atoms)


def _pin_dep(measures: list[Any], c: list[int], alpha: list[Any], kind: str) -> Any:
    def make() -> dict[str, Any]:
        ms = [np.asarray(m, dtype=np.float64) if isinstance(m, list) else m for m in measures]
        return {"measures": ms, "null_vector": tuple(Fraction(v) for v in c),
                "alpha": tuple(Fraction(v) for v in alpha), "kind": kind}

    return make


# ----------------------------------------------------------------------------- the registry


def _fam(name: str) -> Any:
    from .. import cgf as families

    return getattr(families, name)


#: the NTK claims by id, placed among the others in report order
_NTK = {c.id: c for c in CLAIMS_003_NTK}


CLAIMS_003: list[Claim] = [
    _NTK["003.prop5.quadratic_form"],
    Claim(
        id="003.prop7",
        seed="003", place="Prop. 7",
        statement="Strong independence (eq. 33) implies weak independence (eq. 32).",
        hypothesis=_prop7_hyp, conclusion=_prop7_concl, instances=_prop7_instances,
        examples=(lambda: {"samples": [np.asarray(s) for s in _RANDOM3]},),
        min_held=5,
    ),
    _NTK["003.prop8.sufficiency"],
    _NTK["003.prop8.converse_overlap"],
    _NTK["003.prop8.no_overlap"],
    Claim(
        id="003.prop9.gap",
        seed="003", place="Prop. 9 / Lemma 3 (condition (35), theory/discrete-gap.md form)",
        statement="If along w every sample has two distinct projected atoms and the gaps between the two "
                  "largest (or two smallest) projected atoms are pairwise distinct, the Lambda_i^w are "
                  "independent modulo affine functions (strong independence at w).",
        hypothesis=_gap_hyp, conclusion=_strong_exact_at_w, instances=_gap_instances,
        examples=(
            lambda: {"samples": [np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])], "w": (Fraction(1),)},
            # Remark 5's product: two distinct atoms everywhere but repeated gaps; the
            # hypothesis fails, and a condition that forgot "pairwise distinct" is refuted here.
            lambda: {"samples": [np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]]),
                                 np.array([[0.0], [1.0], [3.0], [4.0]])], "w": (Fraction(1),)},
        ),
        min_held=10,
    ),
    Claim(
        id="003.prop10",
        seed="003", place="Prop. 10",
        statement="Tokens drawn i.i.d. from a law with a density satisfy the gap condition, hence strong "
                  "independence, along a fixed direction w almost surely.",
        hypothesis=lambda inst: all(x.shape[0] >= 2 for x in inst["samples"]), conclusion=_prop10_concl,
        instances=_prop10_instances,
        examples=(lambda: {"samples": [np.asarray(s) for s in _RANDOM3], "w": (Fraction(1), Fraction(2))},),
        min_held=10,
    ),
    Claim(
        id="003.prop11",
        seed="003", place="Prop. 11",
        statement="Even functions f_i(t) = sum_{m>=1} a_m lambda_i^m t^{2m} with every a_m != 0 and pairwise "
                  "distinct non-zero lambda_i are linearly independent modulo affine functions.",
        hypothesis=_prop11_hyp, conclusion=_prop11_concl, instances=_prop11_instances,
        examples=(lambda: {"lambdas": [Fraction(1), Fraction(4)], "a": [Fraction(1, 6), Fraction(-1, 180), Fraction(1, 2835)]},),
        min_held=10,
    ),
    Claim(
        id="003.ex3",
        seed="003", place="Ex. 3",
        statement="Uniform laws on cubes [-r_i, r_i]^d with pairwise distinct radii have strongly independent CGFs.",
        hypothesis=_params_distinct(_cube_radius), conclusion=_family_independent,
        instances=lambda: _meas(nst.uniform_cubes(n=st.integers(1, 4), dim=st.integers(1, 2), distinct=True)),
        examples=(_pin_measures(lambda: [_fam("UniformCube")(1, 2), _fam("UniformCube")(2, 2)]),),
        min_held=10,
    ),
    Claim(
        id="003.ex4",
        seed="003", place="Ex. 4",
        statement="Symmetric multivariate Laplace laws whose variances s_i = w^T Sigma_i w are pairwise distinct "
                  "and non-zero have strongly independent CGFs.",
        hypothesis=_params_distinct(_laplace_s), conclusion=_family_independent,
        instances=lambda: _meas(nst.laplaces(n=st.integers(1, 3), dim=st.integers(1, 2), distinct=True)),
        examples=(_pin_measures(lambda: [_fam("Laplace")([[1]]), _fam("Laplace")([[2]])]),),
        min_held=10,
    ),
    Claim(
        id="003.ex5",
        seed="003", place="Ex. 5",
        statement="Mixtures (1/2) N(m_i, Sigma) + (1/2) N(-m_i, Sigma) with pairwise distinct non-zero "
                  "<w, m_i>^2 have strongly independent CGFs.",
        hypothesis=_params_distinct(_mixture_sep), conclusion=_family_independent,
        instances=lambda: _meas(nst.gaussian_mixtures(n=st.integers(1, 3), dim=st.integers(1, 2), distinct=True)),
        examples=(_pin_measures(lambda: [_fam("GaussianMixture2")([1], [[1]]), _fam("GaussianMixture2")([2], [[1]])]),),
        min_held=10,
    ),
    Claim(
        id="003.ex5.as_stated",
        seed="003", place="Ex. 5 (as extracted)",
        statement="Mixtures (1/2) N(m_i, Sigma) + (1/2) N(-m_i, Sigma) with pairwise distinct m_i (and pairwise "
                  "distinct <w, m_i>) have strongly independent CGFs. The proof needs <w, m_i>^2 pairwise distinct "
                  "and non-zero (Lemma 12 with lambda_i = <w, m_i>^2); the law is unchanged by m_i -> -m_i.",
        hypothesis=_ex5_as_stated_hyp, conclusion=_family_independent, instances=_ex5_as_stated_instances,
        status="refuted",
        counterexample={"measures": ["GaussianMixture2(m=(-1,), cov=((1,),))", "GaussianMixture2(m=(1,), cov=((1,),))"],
                        "w": ["1"], "why": "m_2 = -m_1: the two mixtures are the same law, Lambda_1 = Lambda_2"},
        examples=(lambda: {"measures": [_fam("GaussianMixture2")([-1], [[1]]), _fam("GaussianMixture2")([1], [[1]])],
                           "w": (Fraction(1),)},),
        min_held=0,
    ),
    Claim(
        id="003.prop12",
        seed="003", place="Prop. 12",
        statement="Convolving laws of the Prop. 11 form with centred Gaussians N(0, Sigma'_i) keeps strong "
                  "independence (uniform cubes with distinct radii, any Sigma'_i).",
        hypothesis=_params_distinct(_conv_radius), conclusion=_family_independent,
        instances=lambda: _meas(nst.gaussian_convolutions(n=st.integers(1, 3), dim=st.integers(1, 2), distinct=True)),
        examples=(_pin_measures(lambda: [_fam("GaussianConvolution")(_fam("UniformCube")(1, 1), [[1]]),
                                         _fam("GaussianConvolution")(_fam("UniformCube")(2, 1), [[3]])]),),
        cost=2,
        min_held=5,
    ),
    Claim(
        id="003.ex6.gaussian_shared_covariance",
        seed="003", place="Ex. 6 (Gaussians, one covariance)",
        statement="Gaussians N(m_i, Sigma) with a common covariance have weakly dependent CGFs (n >= 2).",
        hypothesis=lambda inst: len(inst["measures"]) >= 2, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.shared_covariance_gaussians(n=st.integers(2, 3), dim=st.integers(1, 2))),
        examples=(lambda: {"measures": [_fam("Gaussian")([0], [[1]]), _fam("Gaussian")([1], [[1]])],
                           "null_vector": (Fraction(1), Fraction(-1)), "alpha": (Fraction(-1),), "kind": "seed"},),
        min_held=10,
    ),
    Claim(
        id="003.ex6.many_gaussians",
        seed="003", place="Ex. 6 (n > d(d+1)/2 Gaussians)",
        statement="More than d(d+1)/2 Gaussians N(m_i, Sigma_i) have weakly dependent CGFs (quadratic CGFs).",
        hypothesis=lambda inst: len(inst["measures"]) > inst["measures"][0].dim * (inst["measures"][0].dim + 1) // 2,
        conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.many_gaussians(dim=st.integers(1, 2))),
        min_held=10,
    ),
    Claim(
        id="003.ex6.diracs",
        seed="003", place="Ex. 6 (single Diracs)",
        statement="Single Dirac masses have affine CGFs: any family of them is weakly dependent.",
        hypothesis=lambda inst: len(inst["measures"]) >= 1, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.single_diracs(n=st.integers(1, 4), dim=st.integers(1, 3))),
        examples=(_pin_dep([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]], [1, 0, 0], [1, 0], "seed"),
                  # a single Dirac alone is already dependent (its CGF is linear)
                  _pin_dep([[[0.75, 0.5]]], [1], [0.75, 0.5], "seed")),
        min_held=10,
    ),
    _NTK["003.ex6.diracs_gram"],
    Claim(
        id="003.ex6.translation",
        seed="003", place="Ex. 6 (translates)",
        statement="A law and its translate by v: Lambda_2 = Lambda_1 + <v, a>, weakly dependent.",
        hypothesis=lambda inst: True, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.translates(dim=st.integers(1, 3))),
        examples=(_pin_dep(_PROGRESSION, [1, -1], [-1, 0], "seed"),),
        min_held=10,
    ),
    Claim(
        id="003.ex6.product",
        seed="003", place="Ex. 6 (products of two-point laws)",
        statement="mu_3 = mu_1 * mu_2 (two-point laws): Lambda_3 = Lambda_1 + Lambda_2, weakly dependent.",
        hypothesis=lambda inst: True, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.two_point_products(dim=st.integers(1, 3), shared_origin=True)),
        examples=(_pin_dep(_PRODUCT, [1, 1, -1], [0, 0], "seed"),),
        min_held=10,
    ),
    Claim(
        id="003.remark5",
        seed="003", place="Remark 5",
        statement="Distinct atoms are not enough: two-point laws and their convolution, translated so that no "
                  "atom is shared (all atoms distinct), are still weakly dependent.",
        hypothesis=_all_atoms_distinct, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.two_point_products(dim=st.integers(1, 3), shared_origin=False)),
        examples=(_pin_dep(_PRODUCT_APART, [1, 1, -1], [10, 12], "seed"),),
        min_held=10,
    ),
]
