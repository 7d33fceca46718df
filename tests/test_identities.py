"""Tests of the exact dependence proofs (ntkcheck.identities)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ntkcheck.families import Empirical, Gaussian, UniformCube
from ntkcheck.identities import (
    numerically_affine,
    product_identity,
    prove_dependence,
    symbolic_identity,
)

F = Fraction


def test_product_identity_products_and_translates():
    u, v = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    m1, m2 = Empirical(np.array([[0, 0], u])), Empirical(np.array([[0, 0], v]))
    m3 = Empirical(np.array([[0, 0], u, v, u + v]))
    p = product_identity([m1, m2, m3], [F(1), F(1), F(-1)])
    assert p is not None and p.alpha == (0, 0) and p.beta == 0
    t = product_identity([m1, Empirical(m1.atoms + np.array([0.5, -2.0]))], [F(1), F(-1)])
    assert t is not None and t.alpha == (F(-1, 2), F(2))


def test_product_identity_rejects_wrong_vector():
    """A wrong null vector must not be 'proved' (a weakened identity check would accept it)."""
    u, v = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    m1, m2 = Empirical(np.array([[0, 0], u])), Empirical(np.array([[0, 0], v]))
    m3 = Empirical(np.array([[0, 0], u, v, u + v]))
    assert product_identity([m1, m2, m3], [F(1), F(-1), F(1)]) is None
    assert product_identity([m1, m2, m3], [F(2), F(1), F(-1)]) is None
    assert prove_dependence([m1, m2, m3], [F(1), F(1), F(1)]) is None


def test_product_identity_weighted_atoms():
    """Weights enter the identity: a Bernoulli(1/4) law is not the convolution of two Bernoulli(1/2) laws."""
    a = Empirical(np.array([[0.0], [1.0]]))
    b = Empirical(np.array([[0.0], [1.0], [2.0]]), weights=np.array([1.0, 2.0, 1.0]))
    assert product_identity([a, a, b], [F(1), F(1), F(-1)]) is not None
    b2 = Empirical(np.array([[0.0], [1.0], [2.0]]))
    assert product_identity([a, a, b2], [F(1), F(1), F(-1)]) is None


def test_symbolic_identity_gaussians():
    ms = [Gaussian([0, 0], [[1, 0], [0, 1]]), Gaussian([1, 2], [[1, 0], [0, 1]])]
    p = symbolic_identity(ms, [F(1), F(-1)])
    assert p is not None and p.alpha == (-1, -2) and p.beta == 0
    assert symbolic_identity([UniformCube("1", 1), UniformCube("2", 1)], [F(1), F(-1)]) is None


def test_numerical_filter():
    assert numerically_affine([UniformCube("1", 1), UniformCube("1", 1)], [F(1), F(-1)])
    assert not numerically_affine([UniformCube("1", 1), UniformCube("2", 1)], [F(1), F(-1)])


def test_symbolic_identity_hyperbolic_vs_log_sum_exp():
    """The two-point law {-1, 1} and the mixture (1/2)N(1, 0) + (1/2)N(-1, 0) are one law: log cosh = log-sum-exp."""
    from ntkcheck.decide import Verdict, decide
    from ntkcheck.families import GaussianMixture2

    dec = decide([Empirical(np.array([[-1.0], [1.0]])), GaussianMixture2([1], [[0]])])
    assert dec.verdict is Verdict.DEPENDENT and dec.certificate.kind == "symbolic-identity"


def test_product_identity_extreme_exponents():
    """Exponents are compared on a common dyadic scale: zeros, 2^-1000 and 2^1000 coordinates stay exact."""
    x = np.array([[0.0, 2.0**-1000], [2.0**1000, 0.0], [2.0**999, 3 * 2.0**-1000]])
    shift = np.array([2.0**999, 2.0**-1000])  # every sum below is a float exactly
    m1, m2 = Empirical(x), Empirical(x + shift)
    p = product_identity([m1, m2], [F(1), F(-1)])
    assert p is not None and p.alpha == (-F(2) ** 999, -F(2) ** -1000)
    # and a perturbation by one ulp of one coordinate breaks it
    y = (x + shift).copy()
    y[2, 1] = np.nextafter(y[2, 1], 0)
    assert product_identity([m1, Empirical(y)], [F(1), F(-1)]) is None
