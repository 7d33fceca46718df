r"""Seed 003 (training infinitely deep and wide transformers), section 3: the claims.

Each claim checks its conclusion with an engine that does not use the claim itself:
Prop. 7 is checked against the exact rank of the joint cumulant tensors (not through
``decide``, which applies Prop. 7 internally); Prop. 9 and the families against
``decide(..., method="exact")`` (rank over Q, no sufficient-condition shortcut);
the NTK claims against the Gram of ``ntkcheck.gram``, which Prop. 5 is checked against
a Gram assembled here from the definition (theory/ntk-prop8.md).
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
#: of this size (the table of theory/ntk-prop8.md)
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
    """Exact rank of the joint cumulant tensors of orders 2..K (rows: samples), theory/cgf-independence.md."""
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

    From the singular values of the weighted feature matrix (theory/ntk-prop8.md: not by
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


def _toolkit_spectrum(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All eigenvalues (ascending) of the NTK Gram computed by ``ntkcheck.gram``."""
    _g = importlib.import_module("ntkcheck.gram")
    res = _g.gram(samples, _g.Heads(Q, b))
    return np.sort(np.asarray(res.eigenvalues, dtype=np.float64))


def _heads_for(samples: list[np.ndarray], seed: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    M = sum(x.shape[0] for x in samples)
    d = samples[0].shape[1]
    # H d >= 4 M: comfortably past the rank bound H d >= M (theory/ntk-prop8.md)
    H = max(8, -(-4 * M // d))
    rng = np.random.default_rng(seed)
    return rng.standard_normal((H, d, d)) * scale, rng.standard_normal((H, d)) * scale


def _gram_positive(inst: Instance) -> Check:
    lo, hi = _toolkit_gram(inst["samples"], inst["Q"], inst["b"])
    rel = lo / hi if hi > 0 else 0.0
    what = f"Gram lambda_min/lambda_max = {rel:.3e} (H = {inst['Q'].shape[0]})"
    if hi <= 0:
        return Check.failed(what + ": the Gram is zero")
    if rel >= POSITIVE_REL:
        return Check.held(what)
    # a float lambda_min near 0 does not prove a kernel (injective maps can be arbitrarily
    # ill-conditioned: nearly collinear tokens in d = 1 give 1e-14..1e-25): inconclusive,
    # counted against the claim's inconclusive budget
    return Check.inconclusive(what + (": at the float floor" if rel <= SINGULAR_REL else
                                      ": between the float floor and the positivity threshold"))


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
    # weakly independent token sets of every kind the hypothesis allows: i.i.d. tokens,
    # grid tokens (coincidences, repeated gaps), samples sharing atoms (Prop. 8's first half
    # does not ask for disjoint supports), single tokens and dimension 1 (the weak check
    # then skips what is dependent)
    dim = st.integers(1, 3) if dim is None else dim
    return st.one_of(
        nst.token_sets(n=st.integers(1, 3), sizes=st.integers(1, 4), dim=dim),
        nst.rational_token_sets(n=st.integers(1, 3), sizes=st.integers(1, 3), dim=dim, max_numerator=4, denominator=2),
        nst.shared_atom_token_sets(n=st.integers(2, 3), own=st.integers(1, 2), dim=dim, shared=st.integers(1, 2)).map(
            lambda r: r[0]),
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


def relation_dimension_is_one(samples: list[np.ndarray], dec: Any) -> bool:
    """Whether the weak relations among ``samples`` span exactly one dimension.

    ``decide`` certified a dependence (so the dimension is >= 1); the exact rank of a
    truncation (orders 2..K) of the cumulant rows is at most the rank of the full series,
    so ``n - rank == 1`` bounds the dimension by 1.
    """
    if _verdict(dec) != "dependent" or dec.null_vector is None:
        return False
    n = len(samples)
    return n - weak_rank_reference(samples, max(4, n + 3)) == 1


def _one_relation_no_overlap(inst: Instance) -> bool:
    """One weak relation c (dimension exactly one) and condition (34) fails for it."""
    xs = inst["samples"]
    dec = _decide(xs, "weak")
    if not relation_dimension_is_one(xs, dec) or dec.affine is None:
        return False
    c = [Fraction(v) if not isinstance(v, float) else v for v in dec.null_vector]
    support = [x for x, ci in zip(xs, c, strict=True) if ci != 0]
    common = {tuple(r) for r in support[0].tolist()}
    for x in support[1:]:
        common &= {tuple(r) for r in x.tolist()}
    need = 1 if all(Fraction(a) == 0 for a in dec.affine[0]) else 2
    inst_cache(inst)["overlap"] = (len(common), need)
    return len(common) < need


def _overlap_instances() -> st.SearchStrategy[Any]:
    return _with_heads(st.one_of(nst.two_point_products(dim=2, shared_origin=True),
                                 nst.translates(sizes=3, dim=2, overlap=True)))


@st.composite
def _one_relation_sets(draw: Any) -> list[np.ndarray]:
    """Token sets with a weak relation, with and without shared atoms, plus unrelated samples.

    A translate, a two-point product (each sample translated on its own), a single Dirac
    (at the origin or not) or several single Diracs (two or more relations: the cases
    that refute the converse without the one-relation hypothesis), plus zero to two
    random samples that take no part in the relation, in random order. Atoms on the grid
    (1/32) Z^d so that sums are exact in float64 (the relation is then exact); shifts of
    order 1 (far-apart samples saturate the softmax and push lambda_min towards the float
    floor: measured 1e-8..1e-16 at shift 8 against 1e-3..1e-7 at shift 1).
    """
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    d = draw(st.integers(1, 3))

    def grid(*shape: int) -> np.ndarray:
        return rng.integers(-48, 49, shape).astype(np.float64) / 32.0

    def nonzero() -> np.ndarray:
        # steps of at least 1/4 in some coordinate: nearly coincident atoms make the Gram
        # ill-conditioned beyond float64 (measured 1e-25 for steps of 1/32 in d = 1)
        v = rng.integers(-6, 7, d).astype(np.float64) / 4.0
        return v if np.any(v) else np.full(d, 0.5)

    def spaced(N: int) -> np.ndarray:
        x = grid(1, d) + np.cumsum([np.zeros(d)] + [nonzero() for _ in range(N - 1)], axis=0)
        return np.unique(x, axis=0)

    kind = draw(st.sampled_from(["translate", "product", "dirac", "diracs"]))
    shift = draw(st.sampled_from([0.0, 1.0]))  # 0: the samples may share atoms
    if kind == "translate":
        x = spaced(draw(st.integers(2, 3)))
        related = [x, x + nonzero() + shift]
    elif kind == "product":
        u, v = nonzero(), nonzero()
        p, q, t = grid(d) + shift, grid(d) - shift, grid(d) + 2 * shift
        related = [np.stack([p, p + u]), np.stack([q, q + v]), np.stack([t, t + u, t + v, t + u + v])]
    elif kind == "dirac":
        related = [grid(1, d) * draw(st.sampled_from([0.0, 1.0]))]
    else:
        related = [grid(1, d) for _ in range(draw(st.integers(2, 3)))]
    others = [spaced(draw(st.integers(2, 3))) for _ in range(draw(st.integers(0, 2)))]
    allx = related + others
    return [allx[k] for k in rng.permutation(len(allx))]


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
        from ..families import VandermondeForm

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


def ntk_form(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    r"""The NTK quadratic form :math:`\kappa_\rho(p) = \frac1H\sum_h \|G[p](Q_h, b_h)\|^2` from its definition.

    ``p`` holds one scalar adjoint per token slot, shape (M,) or a batch (k, M) (the
    ``R^d``-valued adjoint acts componentwise);
    :math:`G[p] = \sum_i \frac1{N_i}\sum_j p_{ij}\,\phi_i(x_{ij}; Q_h, b_h)` with the feature
    from :func:`scipy.special.softmax` (not :func:`ntkcheck.cgf.cgf_gradient`). Returns
    :math:`\kappa(p)`, shape () or (k,).
    """
    from scipy.special import softmax

    H, d = Q.shape[0], samples[0].shape[1]
    # phi[h, slot]: grad Lambda_i(Q_h x_ij + b_h), the softmax mean of sample i's tokens
    phi = np.stack([np.concatenate([softmax((x @ Q[h].T + b[h]) @ x.T, axis=1) @ x for x in samples])
                    for h in range(H)])
    w = np.concatenate([np.full(x.shape[0], 1.0 / x.shape[0]) for x in samples])
    P = np.atleast_2d(np.asarray(p, dtype=np.float64)) * w
    G = np.einsum("km,hmd->khd", P, phi.reshape(H, -1, d))
    kappa = np.einsum("khd,khd->k", G, G) / H
    return kappa if np.ndim(p) == 2 else kappa[0]


def _prop5_concl(inst: Instance) -> Check:
    samples, Q, b = inst["samples"], inst["Q"], inst["b"]
    ev_toolkit = _toolkit_spectrum(samples, Q, b)
    # the form's matrix on the token slots by polarisation of kappa (its definition), and the
    # L^2(mu_i) norms sum_i (1/N_i) sum_j p_ij^2 as the metric: lambda_min and lambda_max of
    # kappa(p) / |p|^2 are the extreme generalised eigenvalues of (B, W)
    w = np.concatenate([np.full(x.shape[0], 1.0 / x.shape[0]) for x in samples])
    M = w.size
    E = np.eye(M)
    iu = np.triu_indices(M, 1)
    vals = ntk_form(samples, Q, b, np.concatenate([E, E[iu[0]] + E[iu[1]]]))
    diag = vals[:M]
    B = np.diag(diag)
    B[iu] = 0.5 * (vals[M:] - diag[iu[0]] - diag[iu[1]])
    B[(iu[1], iu[0])] = B[iu]
    ev_def = np.linalg.eigvalsh(B / np.sqrt(np.outer(w, w)))
    # tolerance: two float64 routes to the spectrum of an O(1) matrix (polarisation loses
    # ~1e-15 of lambda_max per entry); 1e-9 lambda_max leaves six orders of margin
    tol = 1e-9 * max(ev_def[-1], 1e-300)
    ok = ev_toolkit.shape == ev_def.shape and bool(np.all(np.abs(ev_toolkit - ev_def) <= tol))
    worst = float(np.max(np.abs(ev_toolkit - ev_def))) if ev_toolkit.shape == ev_def.shape else float("inf")
    return Check.of(ok, f"toolkit (lambda_min, lambda_max) = ({ev_toolkit[0]:.6e}, {ev_toolkit[-1]:.6e}); "
                        f"the form's definition ({ev_def[0]:.6e}, {ev_def[-1]:.6e}); max eigenvalue gap {worst:.2e}")


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
                  "extreme eigenvalues of that form (theory/ntk-prop8.md).",
        hypothesis=lambda inst: True, conclusion=_prop5_concl, instances=_prop5_instances,
        examples=(_pin([[[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], [[1.0, 1.0]]]),),
        requires=("ntkcheck.gram",),
        min_held=10,
    ),
    Claim(
        id="003.prop7",
        seed="003", place="Prop. 7",
        statement="Strong independence (eq. 33) implies weak independence (eq. 32).",
        hypothesis=_prop7_hyp, conclusion=_prop7_concl, instances=_prop7_instances,
        examples=(lambda: {"samples": [np.asarray(s) for s in _RANDOM3]},),
        min_held=5,
    ),
    Claim(
        id="003.prop8.sufficiency",
        seed="003", place="Prop. 8 (first half)",
        statement="Compactly supported token laws with weakly independent CGFs and a head law whose support "
                  "contains an open set: the NTK map G is injective (the Gram is positive definite).",
        hypothesis=_weakly_independent, conclusion=_gram_positive, instances=lambda: _with_heads(_small_sets()),
        examples=(_pin(_RANDOM3),), requires=("ntkcheck.gram",), cost=2,
        min_held=5, max_inconclusive=0.25,
    ),
    Claim(
        id="003.prop8.converse_overlap",
        seed="003", place="Prop. 8 (second half, condition (34))",
        statement="If sum_i c_i Lambda_i = <alpha, a> + beta with c != 0 and the samples with c_i != 0 share an "
                  "atom (alpha = 0) or two atoms (alpha != 0), the NTK map G is not injective.",
        hypothesis=_overlap_ok, conclusion=_gram_singular, instances=_overlap_instances,
        examples=(_pin(_PRODUCT), _pin(_PROGRESSION)), requires=("ntkcheck.gram",), cost=2,
        min_held=5, max_inconclusive=0.1,
    ),
    Claim(
        id="003.prop8.no_overlap",
        seed="003", place="Prop. 8 (converse with one relation)",
        statement="If the weak relations among the samples form a one-dimensional space, spanned by c with "
                  "sum_i c_i Lambda_i = <alpha, a> + beta, and condition (34) fails for it (the samples with "
                  "c_i != 0 share no atom when alpha = 0, fewer than two when alpha != 0), the NTK map G is "
                  "injective: with one relation, Prop. 8's converse is an equivalence. (With two or more relations "
                  "it is not: three single Diracs in d = 2, or {0.5}, {1.5}, {2, 3} in d = 1, share no atom and G "
                  "is singular.)",
        hypothesis=_one_relation_no_overlap, conclusion=_gram_positive,
        instances=lambda: _with_heads(_one_relation_sets()),
        examples=(_pin(_PRODUCT_APART), _pin(_TRANSLATE_APART), _pin([[[0.5, 0.25]], [[1.0, 0.0], [0.0, 1.5]]])),
        requires=("ntkcheck.gram",), cost=2,
        min_held=5, max_inconclusive=0.25,
    ),
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
    Claim(
        id="003.ex6.diracs_gram",
        seed="003", place="Ex. 6 (single Diracs) with Prop. 8",
        statement="n > d single Diracs: the NTK Gram is singular (the features are the constant atoms).",
        hypothesis=lambda inst: len(inst["samples"]) > inst["samples"][0].shape[1], conclusion=_gram_singular,
        instances=lambda: _with_heads(nst.single_diracs(n=st.integers(2, 4), dim=st.integers(1, 3), more_than_dim=True)),
        examples=(_pin([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]]),), requires=("ntkcheck.gram",),
        min_held=10, max_inconclusive=0.1,
    ),
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
