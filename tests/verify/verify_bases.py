"""The base certificate files of the forgery suite: one of every kind the package writes, on small
inputs, written by the package's own writer (``ntkcheck.certificate_files``)."""

from __future__ import annotations

import json
from fractions import Fraction as F

import numpy as np

import ntkcheck as nk
from ntkcheck import certificate_files as cf
from ntkcheck import verify
from ntkcheck.cgf import Gaussian, UniformCube, as_laws
from ntkcheck.ntk.certificate.user_matrix import certify_matrix
from ntkcheck.ntk.gram_matrix.features import Heads

X3 = [np.array([[0, 0], [1, 0.5], [0.25, -1]]), np.array([[0.5, 0.5], [-1, 0.75], [1.5, 0]]),
      np.array([[0, 1], [0.75, -0.5], [-0.5, -0.25]])]
TR = [np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[1.0, 1.0], [2.0, 1.0]]),
      np.array([[0.5, 0.25], [-0.75, 1.0], [0.25, 0.5]])]
SHARED = [np.array([[0.0, 0.0], [1.0, 0.5]]), np.array([[0.5, -0.25], [-0.5, 1.0], [1.0, 0.25]]),
          np.array([[1.0, 0.5], [0.0, 0.0]]), np.array([[0.25, 0.5], [-0.75, -1.0]])]
G2 = [Gaussian([0, 0], [[2, 0], [0, 1]]), Gaussian([0, 0], [[1, 0], [0, 2]])]
TENTHS = [[[F(0)], [F(1, 10)]], [[F(1, 5)], [F(3, 10)]], [[F(0)], [F(1, 3)], [F(1)]]]
Y = [np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 0.0], [0.0, 2.0]])]


def _singular_heads() -> Heads:
    c = F(1, 3)
    Q = [[[c * k, -3 * c * k], [c * (k + 1), -3 * c * (k + 1)]] for k in range(1, 4)]
    return Heads(np.array(Q, dtype=object), np.array([[F(k, 7), F(-k, 5)] for k in range(1, 4)], dtype=object))


def _thirds_heads(H: int, seed: int) -> Heads:
    """Heads at multiples of 1/3 and 1/7 (not doubles: written as exact rationals)."""
    rng = np.random.default_rng(seed)
    Q = [[[F(int(v), 3) for v in row] for row in rng.integers(-4, 5, size=(2, 2))] for _ in range(H)]
    b = [[F(int(v), 7) for v in rng.integers(-4, 5, size=2)] for _ in range(H)]
    return Heads(np.array(Q, dtype=object), np.array(b, dtype=object))


def _product() -> list[np.ndarray]:
    """Two generic samples and {0, u}, {0, v}, {0, u, v, u + v} (u + v rounded): a Gram whose
    lambda_min (~1e-34) lies below float64's resolution, proved by the ball LDL^T."""
    rng = np.random.default_rng(1)
    u, v, z = rng.standard_normal(3), rng.standard_normal(3), np.zeros(3)
    S = [rng.standard_normal((6, 3)) for _ in range(2)]
    return S + [np.stack([z, u]), np.stack([z, v]), np.stack([z, u, v, u + v])]


def bases() -> dict[str, dict]:
    """name -> the record the writer builds (not yet sealed)."""
    heads = nk.init_heads(6, 2, seed=0)
    heads8 = nk.init_heads(8, 3, seed=0)
    rng = np.random.default_rng(0)
    J = rng.standard_normal((4, 6))
    spd = J @ J.T
    J = rng.standard_normal((4, 2))
    indef = J @ J.T
    indef[0, 0] -= 1
    ones = np.ones((3, 3))
    sing = [np.array([[0, 0], [3, 1], [1, -1]])]

    def dec(samples, *a, **k):
        return cf.decide_certificate(nk.decide(samples, *a, **k), samples)

    def mat(A, e=0.0):
        return cf.matrix_certificate(certify_matrix(A, abs_error=e), A)
    return {
        "decide: gap condition (Prop. 7 wrapper)": dec(X3),
        "decide: exact minor (strong)": dec(X3, "strong", method="exact"),
        "decide: ball bound (Prop. 7 wrapper)": dec(X3, method="interval"),
        "decide: minor over several directions": dec(G2),
        "decide: structural": dec(G2, "strong"),
        "decide: product identity": dec(TR),
        "decide: weak-dependence wrapper": dec(TR, "strong"),
        "decide: term identity": dec([UniformCube(1, 2), UniformCube(1, 2)]),
        "decide: Vandermonde": dec([UniformCube(1, 1), UniformCube(F(3, 2), 1)], "strong"),
        "gram: lower bound": cf.gram_certificate_record(nk.gram(X3, heads, certify=True), as_laws(X3), heads),
        "screen: Prop. 8 and the complement": cf.screen_certificate(nk.screen(SHARED, heads=heads), SHARED, heads),
        "gram: bound on exact heads (carried over)": cf.gram_certificate_record(
            nk.gram(X3, _thirds_heads(6, 3), certify=True), as_laws(X3), _thirds_heads(6, 3)),
        "decide: translates at tenths (exact atoms)": dec(TENTHS),
        "gram: bound below float64 resolution (ball LDL^T)": cf.gram_certificate_record(
            nk.gram(_product(), heads8, certify=True), as_laws(_product()), heads8),
        "gram: equal scores": cf.gram_certificate_record(nk.gram(sing, _singular_heads(), certify=True),
                                                         as_laws(sing), _singular_heads()),
        "certify: bound": mat(spd, 1e-12),
        "certify: rank": mat(ones),
        "certify: indefinite": mat(indef),
    }


def seal(rec: dict) -> dict:
    """The record as ``write_certificate`` writes it (inline arrays, digest), without a file."""
    inputs = json.loads(json.dumps(cf._refs(rec["inputs"], {}, "")))
    return {"format": verify.FORMAT, "verb": rec["verb"], "arrays": None, "inputs": inputs,
            "digest": verify.digest(inputs, {}), "claims": json.loads(json.dumps(rec["claims"]))}


def bases_sealed() -> dict[str, dict]:
    """name -> the sealed record (what ``write_certificate`` would write, without a file)."""
    return {name: seal(rec) for name, rec in bases().items()}
