r"""Seed 003 section 3, the NTK claims: Prop. 5 (the Gram is the NTK quadratic form), Prop. 8
(injectivity of the NTK map G and its converse) and Ex. 6's single Diracs with Prop. 8.

The NTK claims are checked against the Gram of ``ntkcheck.ntk.gram_matrix.pipeline``, which Prop. 5
is checked against a Gram assembled here from the definition (theory/ntk-prop8.md).
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import strategies as nst
from ..cgf.core import cgf_gradient
from ._core import Check, Claim, Instance
from ._seed003_common import (
    _PRODUCT,
    _PRODUCT_APART,
    _PROGRESSION,
    _RANDOM3,
    _TRANSLATE_APART,
    _decide,
    _verdict,
    inst_cache,
    weak_rank_reference,
)

__all__ = ["CLAIMS_003_NTK", "reference_gram_eigenvalues", "POSITIVE_REL", "SINGULAR_REL"]


#: relative lambda_min above which a Gram counts as positive definite: far above the
#: float64 floor (~1e-16 relative) and below the 1e-4..1e-6 measured on positive cases
#: of this size (the table of theory/ntk-prop8.md)
POSITIVE_REL = 1e-9
#: relative lambda_min below which a Gram counts as singular (a few hundred ulps)
SINGULAR_REL = 1e-12


# ----------------------------------------------------------------------------- engines


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
    """(lambda_min, lambda_max) of the NTK Gram computed by ``ntkcheck.ntk.gram_matrix.pipeline``."""
    _g = importlib.import_module("ntkcheck.ntk.gram_matrix.pipeline")
    _f = importlib.import_module("ntkcheck.ntk.gram_matrix.features")
    res = _g.gram(samples, _f.Heads(Q, b))
    return float(res.lambda_min), float(res.lambda_max)


def _toolkit_spectrum(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All eigenvalues (ascending) of the NTK Gram computed by ``ntkcheck.ntk.gram_matrix.pipeline``."""
    _g = importlib.import_module("ntkcheck.ntk.gram_matrix.pipeline")
    _f = importlib.import_module("ntkcheck.ntk.gram_matrix.features")
    res = _g.gram(samples, _f.Heads(Q, b), spectrum="full")
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


# ----------------------------------------------------------------------------- Prop. 5 (Gram = NTK form)


def _prop5_instances() -> st.SearchStrategy[Any]:
    return _with_heads(nst.token_sets(n=st.integers(1, 3), sizes=st.integers(1, 4), dim=st.integers(1, 3)))


def ntk_form(samples: list[np.ndarray], Q: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    r"""The NTK quadratic form :math:`\kappa_\rho(p) = \frac1H\sum_h \|G[p](Q_h, b_h)\|^2` from its definition.

    ``p`` holds one scalar adjoint per token slot, shape (M,) or a batch (k, M) (the
    ``R^d``-valued adjoint acts componentwise);
    :math:`G[p] = \sum_i \frac1{N_i}\sum_j p_{ij}\,\phi_i(x_{ij}; Q_h, b_h)` with the feature
    from :func:`scipy.special.softmax` (not :func:`ntkcheck.cgf.core.cgf_gradient`). Returns
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


#: the NTK claims of seed 003, in report order (``_seed003.CLAIMS_003`` places them among the others)
CLAIMS_003_NTK: list[Claim] = [
    Claim(
        id="003.prop5.quadratic_form",
        seed="003", place="Prop. 5 / Def. 4-5",
        statement="The smallest eigenvalue of the NTK is the infimum of the NTK quadratic form kappa_rho(p) / "
                  "sum_i ||p_i||^2_{L^2(mu_i)}: the assembled Gram W^{1/2} K W^{1/2} (w_ij = 1/N_i) has the "
                  "extreme eigenvalues of that form (theory/ntk-prop8.md).",
        hypothesis=lambda inst: True, conclusion=_prop5_concl, instances=_prop5_instances,
        examples=(_pin([[[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], [[1.0, 1.0]]]),),
        requires=("ntkcheck.ntk.gram_matrix.pipeline",),
        min_held=10,
    ),
    Claim(
        id="003.prop8.sufficiency",
        seed="003", place="Prop. 8 (first half)",
        statement="Compactly supported token laws with weakly independent CGFs and a head law whose support "
                  "contains an open set: the NTK map G is injective (the Gram is positive definite).",
        hypothesis=_weakly_independent, conclusion=_gram_positive, instances=lambda: _with_heads(_small_sets()),
        examples=(_pin(_RANDOM3),), requires=("ntkcheck.ntk.gram_matrix.pipeline",), cost=2,
        min_held=5, max_inconclusive=0.25,
    ),
    Claim(
        id="003.prop8.converse_overlap",
        seed="003", place="Prop. 8 (second half, condition (34))",
        statement="If sum_i c_i Lambda_i = <alpha, a> + beta with c != 0 and the samples with c_i != 0 share an "
                  "atom (alpha = 0) or two atoms (alpha != 0), the NTK map G is not injective.",
        hypothesis=_overlap_ok, conclusion=_gram_singular, instances=_overlap_instances,
        examples=(_pin(_PRODUCT), _pin(_PROGRESSION)), requires=("ntkcheck.ntk.gram_matrix.pipeline",), cost=2,
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
        requires=("ntkcheck.ntk.gram_matrix.pipeline",), cost=2,
        min_held=5, max_inconclusive=0.25,
    ),
    Claim(
        id="003.ex6.diracs_gram",
        seed="003", place="Ex. 6 (single Diracs) with Prop. 8",
        statement="n > d single Diracs: the NTK Gram is singular (the features are the constant atoms).",
        hypothesis=lambda inst: len(inst["samples"]) > inst["samples"][0].shape[1], conclusion=_gram_singular,
        instances=lambda: _with_heads(nst.single_diracs(n=st.integers(2, 4), dim=st.integers(1, 3), more_than_dim=True)),
        examples=(_pin([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]]),), requires=("ntkcheck.ntk.gram_matrix.pipeline",),
        min_held=10, max_inconclusive=0.1,
    ),
]
