r"""Seed 003 (training infinitely deep and wide transformers), section 3: the claims.

Each claim checks its conclusion with an engine that does not use the claim itself:
Prop. 7 is checked against the exact rank of the joint cumulant tensors (not through
``decide``, which applies Prop. 7 internally); Prop. 9 and the families against
``decide(..., method="exact")`` (rank over Q, no sufficient-condition shortcut);
the NTK claims against the Gram of ``ntkcheck.gram``, which Prop. 5 is checked against
a Gram assembled here from the definition (MATH.md section 3).
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from typing import Any

import numpy as np
from flint import fmpq, fmpq_mat
from hypothesis import strategies as st

from .. import strategies as nst
from ..cgf import cgf_gradient, joint_cumulants
from ._core import Check, Claim, Instance

__all__ = ["CLAIMS_003", "reference_gram_eigenvalues", "POSITIVE_REL", "SINGULAR_REL"]

#: relative lambda_min above which a Gram counts as positive definite: far above the
#: float64 floor (~1e-16 relative) and below the 1e-4..1e-6 measured on positive cases
#: of this size (MATH.md section 3 table)
POSITIVE_REL = 1e-9
#: relative lambda_min below which a Gram counts as singular (a few hundred ulps)
SINGULAR_REL = 1e-12


# ----------------------------------------------------------------------------- engines


def _decide(measures: Any, prop: str, **kw: Any) -> Any:
    # looked up at call time, so that a monkeypatched ``ntkcheck.decide.decide`` is used
    # (through sys.modules: the package re-exports the function under the module's name)
    return importlib.import_module("ntkcheck.decide").decide(measures, prop, **kw)


def _conditions() -> Any:
    return importlib.import_module("ntkcheck.conditions")


def _verdict(dec: Any) -> str:
    return str(getattr(dec.verdict, "value", dec.verdict))


def _expect(dec: Any, expected: str) -> Check:
    v = _verdict(dec)
    what = f"decide -> {v} ({dec.method}, {dec.precision})"
    if v == "inconclusive":
        return Check.inconclusive(what)
    return Check.of(v == expected, what)


def _exact_rank(rows: list[list[Fraction]]) -> int:
    if not rows or not rows[0]:
        return 0
    return fmpq_mat(len(rows), len(rows[0]), [fmpq(v.numerator, v.denominator) for r in rows for v in r]).rank()


def weak_rank_reference(samples: list[np.ndarray], K: int) -> int:
    """Exact rank of the joint cumulant tensors of orders 2..K (rows: samples), MATH.md section 2."""
    rows = []
    for x in samples:
        idx, vals = joint_cumulants(x, K, exact=True)
        rows.append([v for a, v in zip(idx, vals, strict=True) if sum(a) >= 2])
    return _exact_rank(rows)


def _features(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""Rows :math:`\sqrt{w_{ij}/H}\,(\phi_i(x_{ij}; Q_h, b_h))_h`, shape (M, H d), from the definition."""
    H = Q.shape[0]
    rows = []
    for x in samples:
        N, d = x.shape
        A = np.einsum("hkl,jl->jhk", Q, x) + b[None, :, :]  # (N, H, d): Q_h x_j + b_h
        phi = cgf_gradient(x, A.reshape(N * H, d)).reshape(N, H * d)
        rows.append(phi * np.sqrt(1.0 / (N * H)))
    return np.concatenate(rows, axis=0)


def reference_gram_eigenvalues(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""Eigenvalues (ascending, length M) of :math:`W^{1/2} K W^{1/2}` assembled from the definition.

    From the singular values of the weighted feature matrix (MATH.md section 3: not by
    forming ``K``), padded with zeros when ``H d < M``.
    """
    F = _features(samples, Q, b)
    s = np.linalg.svd(F, compute_uv=False)
    ev = np.zeros(F.shape[0])
    ev[: min(F.shape)] = s[: min(F.shape)] ** 2
    return np.sort(ev)


def _toolkit_gram(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(lambda_min, lambda_max) of the NTK Gram computed by ``ntkcheck.gram``."""
    _g = importlib.import_module("ntkcheck.gram")
    res = _g.gram(samples, _g.Heads(Q, b))
    return float(res.lambda_min), float(res.lambda_max)


def _heads_for(samples: list[np.ndarray], seed: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    M = sum(x.shape[0] for x in samples)
    d = samples[0].shape[1]
    # H d >= 4 M: comfortably past the rank bound H d >= M (MATH.md section 3)
    H = max(8, -(-4 * M // d))
    rng = np.random.default_rng(seed)
    return rng.standard_normal((H, d, d)) * scale, rng.standard_normal((H, d)) * scale


def _gram_positive(inst: Instance) -> Check:
    lo, hi = _toolkit_gram(inst["samples"], inst["Q"], inst["b"])
    rel = lo / hi if hi > 0 else 0.0
    what = f"Gram lambda_min/lambda_max = {rel:.3e} (H = {inst['Q'].shape[0]})"
    if rel >= POSITIVE_REL:
        return Check.held(what)
    if rel <= SINGULAR_REL:
        return Check.failed(what + ": singular")
    return Check.inconclusive(what + ": between the float floor and the positivity threshold")


def _gram_singular(inst: Instance) -> Check:
    lo, hi = _toolkit_gram(inst["samples"], inst["Q"], inst["b"])
    rel = lo / hi if hi > 0 else 0.0
    what = f"Gram lambda_min/lambda_max = {rel:.3e} (H = {inst['Q'].shape[0]})"
    if rel <= SINGULAR_REL:
        return Check.held(what)
    if rel >= POSITIVE_REL:
        return Check.failed(what + ": positive definite")
    return Check.inconclusive(what)


# ----------------------------------------------------------------------------- instances


def _with_heads(samples_strategy: st.SearchStrategy[Any], scale: float = 1.0) -> st.SearchStrategy[dict[str, Any]]:
    def build(p: tuple[Any, int]) -> dict[str, Any]:
        samples, seed = p
        if hasattr(samples, "measures"):
            dep = samples
            samples = [np.asarray(m) for m in dep.measures]
            Q, b = _heads_for(samples, seed, scale)
            return {"samples": samples, "Q": Q, "b": b, "null_vector": dep.null_vector, "alpha": dep.alpha}
        Q, b = _heads_for(samples, seed, scale)
        return {"samples": samples, "Q": Q, "b": b}

    return st.tuples(samples_strategy, st.integers(0, 2**32 - 1)).map(build)


def _small_sets(dim: Any = None) -> st.SearchStrategy[list[np.ndarray]]:
    dim = st.integers(2, 3) if dim is None else dim
    return st.one_of(
        nst.token_sets(n=st.integers(1, 3), sizes=st.integers(2, 3), dim=dim),
        nst.rational_token_sets(n=st.integers(1, 3), sizes=st.integers(2, 3), dim=dim, max_numerator=4, denominator=2),
    )


def _pin(samples: list[list[list[float]]], seed: int = 0, **extra: Any) -> Any:
    def make() -> dict[str, Any]:
        xs = [np.asarray(s, dtype=np.float64) for s in samples]
        Q, b = _heads_for(xs, seed)
        return {"samples": xs, "Q": Q, "b": b, **extra}

    return make


_U, _V = [1.0, 0.0], [0.0, 1.0]
_PRODUCT = [[[0, 0], _U], [[0, 0], _V], [[0, 0], _U, _V, [1, 1]]]
_PRODUCT_APART = [[[3, 0], [4, 0]], [[0, 5], [0, 6]], [[-7, -7], [-6, -7], [-7, -6], [-6, -6]]]
_PROGRESSION = [[[0, 0], [1, 0], [2, 0]], [[1, 0], [2, 0], [3, 0]]]
_TRANSLATE_APART = [[[0, 0], [1, 0.5], [-0.5, 1]], [[5, 3], [6, 3.5], [4.5, 4]]]
_RANDOM3 = [[[0.3, -1.1], [1.7, 0.2], [-0.4, 0.9]], [[1.2, 1.3], [-0.8, -0.6], [0.1, 2.1]],
            [[-1.5, 0.4], [0.6, -0.7], [2.2, 1.0]]]


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


def inst_cache(inst: Instance) -> dict[str, Any]:
    # instances are dicts built per example: a private slot for values the hypothesis
    # checker computed and the conclusion reuses
    return inst.setdefault("_cache", {})  # type: ignore[attr-defined]


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


# ----------------------------------------------------------------------------- Prop. 8


def _weakly_independent(inst: Instance) -> bool:
    return _verdict(_decide(inst["samples"], "weak")) == "independent"


def _overlap_ok(inst: Instance) -> bool:
    """Weakly dependent with condition (34): shared atoms among the samples with c_i != 0."""
    dec = _decide(inst["samples"], "weak")
    if _verdict(dec) != "dependent" or dec.null_vector is None or dec.affine is None:
        return False
    c = [Fraction(v) if not isinstance(v, float) else v for v in dec.null_vector]
    alpha = dec.affine[0]
    support = [x for x, ci in zip(inst["samples"], c, strict=True) if ci != 0]
    common = {tuple(r) for r in support[0].tolist()}
    for x in support[1:]:
        common &= {tuple(r) for r in x.tolist()}
    need = 1 if all(Fraction(a) == 0 for a in alpha) else 2
    inst_cache(inst)["overlap"] = (len(common), need)
    return len(common) >= need


def _no_overlap_dependent(inst: Instance) -> bool:
    xs = inst["samples"]
    atoms = [tuple(r) for x in xs for r in x.tolist()]
    if len(set(atoms)) < len(atoms):
        return False
    return _verdict(_decide(xs, "weak")) == "dependent"


def _overlap_instances() -> st.SearchStrategy[Any]:
    return _with_heads(st.one_of(nst.two_point_products(dim=2, shared_origin=True),
                                 nst.translates(sizes=3, dim=2, overlap=True)))


@st.composite
def _no_overlap_sets(draw: Any) -> list[np.ndarray]:
    # two-point products translated apart, and disjoint translates (shifts of order 1:
    # far-apart samples saturate the softmax and push lambda_min towards the float
    # floor, measured 1e-8..1e-16 at shift 8 against 1e-3..1e-7 at shift 1); atoms on the grid
    # (1/32) Z^d so that sums are exact in float64 (the dependence is then exact) while
    # the configurations are otherwise unstructured
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    d = draw(st.integers(2, 3))

    def grid(*shape: int) -> np.ndarray:
        return rng.integers(-48, 49, shape).astype(np.float64) / 32.0

    if draw(st.booleans()):
        u, v = grid(d), grid(d)
        p, q, s = grid(d) + 1.0, grid(d) - 1.0, grid(d) + 2.0
        return [np.stack([p, p + u]), np.stack([q, q + v]), np.stack([s, s + u, s + v, s + u + v])]
    x = grid(draw(st.integers(2, 3)), d)
    return [x, x + grid(d) + 1.0]


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


def _prop11_concl(inst: Instance) -> Check:
    # f_i(t) = sum_m a_m lambda_i^m t^{2m}: modulo affine functions (orders 0, 1) the
    # functions are independent iff the coefficient rows of orders >= 2 are
    lams, a = inst["lambdas"], inst["a"]
    rows = [[a[m - 1] * lam**m for m in range(1, len(a) + 1)] for lam in lams]
    r = _exact_rank(rows)
    return Check.of(r == len(lams), f"exact rank {r} of {len(lams)} (orders 2..{2 * len(a)})")


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
    from ..families import GaussianMixture2

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
    ms = importlib.import_module("ntkcheck.decide").as_measures(list(inst["measures"]))
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


# ----------------------------------------------------------------------------- Prop. 5 (Gram = NTK form)


def _prop5_instances() -> st.SearchStrategy[Any]:
    return _with_heads(nst.token_sets(n=st.integers(1, 3), sizes=st.integers(1, 4), dim=st.integers(1, 3)))


def _prop5_concl(inst: Instance) -> Check:
    samples, Q, b = inst["samples"], inst["Q"], inst["b"]
    lo, hi = _toolkit_gram(samples, Q, b)
    ev = reference_gram_eigenvalues(samples, Q, b)
    # the Rayleigh quotient of the NTK form kappa(p) / sum_i ||p_i||^2_{L^2(mu_i)} at
    # random adjoints p bounds lambda_min from above and lambda_max from below
    F = _features(samples, Q, b)
    rng = np.random.default_rng(1)
    qs = []
    for _ in range(8):
        v = rng.standard_normal(F.shape[0])
        qs.append(float(np.sum((F.T @ v) ** 2) / np.sum(v**2)))
    # tolerance: float64 SVD of an O(1) matrix, relative to lambda_max
    tol = 1e-9 * ev[-1]
    ok = abs(lo - ev[0]) <= tol and abs(hi - ev[-1]) <= tol and lo <= min(qs) + tol and hi >= max(qs) - tol
    return Check.of(ok, f"toolkit (lambda_min, lambda_max) = ({lo:.6e}, {hi:.6e}); "
                        f"definition ({ev[0]:.6e}, {ev[-1]:.6e}); Rayleigh quotients in [{min(qs):.3e}, {max(qs):.3e}]")


# ----------------------------------------------------------------------------- the registry


def _fam(name: str) -> Any:
    from .. import families

    return getattr(families, name)


CLAIMS_003: list[Claim] = [
    Claim(
        id="003.prop5.quadratic_form",
        seed="003", place="Prop. 5 / Def. 4-5",
        statement="The smallest eigenvalue of the NTK is the infimum of the NTK quadratic form kappa_rho(p) / "
                  "sum_i ||p_i||^2_{L^2(mu_i)}: the assembled Gram W^{1/2} K W^{1/2} (w_ij = 1/N_i) has the "
                  "extreme eigenvalues of that form (MATH.md section 3).",
        hypothesis=lambda inst: True, conclusion=_prop5_concl, instances=_prop5_instances,
        examples=(_pin([[[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], [[1.0, 1.0]]]),),
        requires=("ntkcheck.gram",),
    ),
    Claim(
        id="003.prop7",
        seed="003", place="Prop. 7",
        statement="Strong independence (eq. 33) implies weak independence (eq. 32).",
        hypothesis=_prop7_hyp, conclusion=_prop7_concl, instances=_prop7_instances,
        examples=(lambda: {"samples": [np.asarray(s) for s in _RANDOM3]},),
    ),
    Claim(
        id="003.prop8.sufficiency",
        seed="003", place="Prop. 8 (first half)",
        statement="Compactly supported token laws with weakly independent CGFs and a head law whose support "
                  "contains an open set: the NTK map G is injective (the Gram is positive definite).",
        hypothesis=_weakly_independent, conclusion=_gram_positive, instances=lambda: _with_heads(_small_sets()),
        examples=(_pin(_RANDOM3),), requires=("ntkcheck.gram",), cost=2,
    ),
    Claim(
        id="003.prop8.converse_overlap",
        seed="003", place="Prop. 8 (second half, condition (34))",
        statement="If sum_i c_i Lambda_i = <alpha, a> + beta with c != 0 and the samples with c_i != 0 share an "
                  "atom (alpha = 0) or two atoms (alpha != 0), the NTK map G is not injective.",
        hypothesis=_overlap_ok, conclusion=_gram_singular, instances=_overlap_instances,
        examples=(_pin(_PRODUCT), _pin(_PROGRESSION)), requires=("ntkcheck.gram",), cost=2,
    ),
    Claim(
        id="003.prop8.no_overlap",
        seed="003", place="Prop. 8 (converse needs (34)); MATH.md section 3",
        statement="Without condition (34) the converse fails: weakly dependent token sets with no shared atom "
                  "(translated two-point products, disjoint translates) have a positive definite NTK Gram.",
        hypothesis=_no_overlap_dependent, conclusion=_gram_positive,
        instances=lambda: _with_heads(_no_overlap_sets()),
        examples=(_pin(_PRODUCT_APART), _pin(_TRANSLATE_APART)), requires=("ntkcheck.gram",), cost=2,
    ),
    Claim(
        id="003.prop9.gap",
        seed="003", place="Prop. 9 / Lemma 3 (condition (35), MATH.md section 4 form)",
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
    ),
    Claim(
        id="003.prop10",
        seed="003", place="Prop. 10",
        statement="Tokens drawn i.i.d. from a law with a density satisfy the gap condition, hence strong "
                  "independence, along a fixed direction w almost surely.",
        hypothesis=lambda inst: all(x.shape[0] >= 2 for x in inst["samples"]), conclusion=_prop10_concl,
        instances=_prop10_instances,
        examples=(lambda: {"samples": [np.asarray(s) for s in _RANDOM3], "w": (Fraction(1), Fraction(2))},),
    ),
    Claim(
        id="003.prop11",
        seed="003", place="Prop. 11",
        statement="Even functions f_i(t) = sum_{m>=1} a_m lambda_i^m t^{2m} with every a_m != 0 and pairwise "
                  "distinct non-zero lambda_i are linearly independent modulo affine functions.",
        hypothesis=_prop11_hyp, conclusion=_prop11_concl, instances=_prop11_instances,
        examples=(lambda: {"lambdas": [Fraction(1), Fraction(4)], "a": [Fraction(1, 6), Fraction(-1, 180), Fraction(1, 2835)]},),
    ),
    Claim(
        id="003.ex3",
        seed="003", place="Ex. 3",
        statement="Uniform laws on cubes [-r_i, r_i]^d with pairwise distinct radii have strongly independent CGFs.",
        hypothesis=_params_distinct(_cube_radius), conclusion=_family_independent,
        instances=lambda: _meas(nst.uniform_cubes(n=st.integers(1, 4), dim=st.integers(1, 2), distinct=True)),
        examples=(_pin_measures(lambda: [_fam("UniformCube")(1, 2), _fam("UniformCube")(2, 2)]),),
    ),
    Claim(
        id="003.ex4",
        seed="003", place="Ex. 4",
        statement="Symmetric multivariate Laplace laws whose variances s_i = w^T Sigma_i w are pairwise distinct "
                  "and non-zero have strongly independent CGFs.",
        hypothesis=_params_distinct(_laplace_s), conclusion=_family_independent,
        instances=lambda: _meas(nst.laplaces(n=st.integers(1, 3), dim=st.integers(1, 2), distinct=True)),
        examples=(_pin_measures(lambda: [_fam("Laplace")([[1]]), _fam("Laplace")([[2]])]),),
    ),
    Claim(
        id="003.ex5",
        seed="003", place="Ex. 5",
        statement="Mixtures (1/2) N(m_i, Sigma) + (1/2) N(-m_i, Sigma) with pairwise distinct non-zero "
                  "<w, m_i>^2 have strongly independent CGFs.",
        hypothesis=_params_distinct(_mixture_sep), conclusion=_family_independent,
        instances=lambda: _meas(nst.gaussian_mixtures(n=st.integers(1, 3), dim=st.integers(1, 2), distinct=True)),
        examples=(_pin_measures(lambda: [_fam("GaussianMixture2")([1], [[1]]), _fam("GaussianMixture2")([2], [[1]])]),),
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
    ),
    Claim(
        id="003.ex6.gaussian_shared_covariance",
        seed="003", place="Ex. 6 (Gaussians, one covariance)",
        statement="Gaussians N(m_i, Sigma) with a common covariance have weakly dependent CGFs (n >= 2).",
        hypothesis=lambda inst: len(inst["measures"]) >= 2, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.shared_covariance_gaussians(n=st.integers(2, 3), dim=st.integers(1, 2))),
        examples=(lambda: {"measures": [_fam("Gaussian")([0], [[1]]), _fam("Gaussian")([1], [[1]])],
                           "null_vector": (Fraction(1), Fraction(-1)), "alpha": (Fraction(-1),), "kind": "seed"},),
    ),
    Claim(
        id="003.ex6.many_gaussians",
        seed="003", place="Ex. 6 (n > d(d+1)/2 Gaussians)",
        statement="More than d(d+1)/2 Gaussians N(m_i, Sigma_i) have weakly dependent CGFs (quadratic CGFs).",
        hypothesis=lambda inst: len(inst["measures"]) > inst["measures"][0].dim * (inst["measures"][0].dim + 1) // 2,
        conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.many_gaussians(dim=st.integers(1, 2))),
    ),
    Claim(
        id="003.ex6.diracs",
        seed="003", place="Ex. 6 (single Diracs)",
        statement="Single Dirac masses have affine CGFs: any family of them is weakly dependent.",
        hypothesis=lambda inst: len(inst["measures"]) >= 1, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.single_diracs(n=st.integers(1, 4), dim=st.integers(1, 3))),
        examples=(_pin_dep([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]], [1, 0, 0], [1, 0], "seed"),),
    ),
    Claim(
        id="003.ex6.diracs_gram",
        seed="003", place="Ex. 6 (single Diracs) with Prop. 8",
        statement="n > d single Diracs: the NTK Gram is singular (the features are the constant atoms).",
        hypothesis=lambda inst: len(inst["samples"]) > inst["samples"][0].shape[1], conclusion=_gram_singular,
        instances=lambda: _with_heads(nst.single_diracs(n=st.integers(2, 4), dim=st.integers(1, 3), more_than_dim=True)),
        examples=(_pin([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]]),), requires=("ntkcheck.gram",),
    ),
    Claim(
        id="003.ex6.translation",
        seed="003", place="Ex. 6 (translates)",
        statement="A law and its translate by v: Lambda_2 = Lambda_1 + <v, a>, weakly dependent.",
        hypothesis=lambda inst: True, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.translates(dim=st.integers(1, 3))),
        examples=(_pin_dep(_PROGRESSION, [1, -1], [-1, 0], "seed"),),
    ),
    Claim(
        id="003.ex6.product",
        seed="003", place="Ex. 6 (products of two-point laws)",
        statement="mu_3 = mu_1 * mu_2 (two-point laws): Lambda_3 = Lambda_1 + Lambda_2, weakly dependent.",
        hypothesis=lambda inst: True, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.two_point_products(dim=st.integers(1, 3), shared_origin=True)),
        examples=(_pin_dep(_PRODUCT, [1, 1, -1], [0, 0], "seed"),),
    ),
    Claim(
        id="003.remark5",
        seed="003", place="Remark 5",
        statement="Distinct atoms are not enough: two-point laws and their convolution, translated so that no "
                  "atom is shared (all atoms distinct), are still weakly dependent.",
        hypothesis=_all_atoms_distinct, conclusion=_dependent_concl,
        instances=lambda: _dependent_instances(nst.two_point_products(dim=st.integers(1, 3), shared_origin=False)),
        examples=(_pin_dep(_PRODUCT_APART, [1, 1, -1], [10, 12], "seed"),),
    ),
]
