"""Tests of the exact dependence proofs (ntkcheck.independence.identities)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck.cgf import (
    Dirac,
    Empirical,
    EmpiricalConvolution,
    Gaussian,
    GaussianMixture2,
    Laplace,
    Translation,
    UniformCube,
)
from ntkcheck.independence.exp_gauss import _mul, _pow, exp_gauss_form
from ntkcheck.independence.identities import (
    numerically_affine,
    product_identity,
    product_identity_decides,
    prove_dependence,
    symbolic_identity,
    term_identity,
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


def test_hyperbolic_vs_log_sum_exp_by_the_product_identity():
    """The two-point law {-1, 1} and the mixture (1/2)N(1, 0) + (1/2)N(-1, 0) are one law:
    log cosh = log-sum-exp. The mixture's MGF is the exponential polynomial (e^t + e^-t)/2,
    so the exact product identity proves it (no sympy)."""
    from ntkcheck.cgf import GaussianMixture2
    from ntkcheck.independence.decision import decide
    from ntkcheck.independence.results import Verdict

    dec = decide([Empirical(np.array([[-1.0], [1.0]])), GaussianMixture2([1], [[0]])])
    assert dec.verdict is Verdict.DEPENDENT and dec.certificate.kind == "product-identity"
    assert dec.null_vector == (F(1), F(-1)) and dec.affine == ((F(0),), F(0))


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


# ------------------------------------------------------------------ issue 9: exact and bounded


def _mp_lse(atoms, weights, a):
    """log sum_j w_j exp(<a, x_j>) in mpmath at the working precision (a reference)."""
    import mpmath

    tot = sum(weights)
    return mpmath.log(mpmath.fsum(mpmath.mpf(w.numerator) / w.denominator / (mpmath.mpf(tot.numerator) / tot.denominator)
                                  * mpmath.exp(mpmath.fsum(mpmath.mpf(float(ai)) * mpmath.mpf(float(xi)) for ai, xi in zip(a, x)))
                                  for x, w in zip(atoms, weights)))


def test_product_identity_on_convolutions_without_float_sums():
    """EmpiricalConvolution of non-dyadic tokens (0.1 + 0.2 is not a float sum): its exponential
    polynomial is convolved exactly, so [A, B, A * B] is proved dependent, and A * B against
    the rounded float sums (a different law) is not."""
    A = Empirical(np.array([[0.1], [0.7]]), weights=[2, 3])
    B = Empirical(np.array([[0.2], [-0.3], [1.1]]))
    AB = EmpiricalConvolution(A, B)
    p = product_identity([A, B, AB], [F(1), F(1), F(-1)])
    assert p is not None and p.alpha == (F(0),) and p.beta == 0
    rounded = AB.as_empirical(strict=False)
    assert product_identity([AB, rounded], [F(1), F(-1)]) is None
    assert product_identity_decides([AB, rounded], [F(1), F(-1)])
    # and the identity itself at 50 digits, from the atoms (weights 2/5, 3/5 and 1/3 each)
    import mpmath

    with mpmath.workdps(50):
        for a in ([0.3], [-1.7], [2.5]):
            lhs = _mp_lse(A.atoms, A.weights, a) + _mp_lse(B.atoms, B.weights, a)
            sums = [[Fraction(float(x[0])) + Fraction(float(y[0]))] for x in A.atoms for y in B.atoms]
            wts = [u * v for u in A.weights for v in B.weights]
            with mpmath.workdps(60):
                rhs = mpmath.log(mpmath.fsum(mpmath.mpf(w.numerator) / w.denominator * mpmath.exp(mpmath.mpf(a[0]) * (mpmath.mpf(s[0].numerator) / s[0].denominator)) for s, w in zip(sums, wts)))
            assert abs(lhs - rhs) < mpmath.mpf(10) ** -45


def test_gaussian_factors_must_cancel():
    """Gaussians: the product identity compares the quadratic forms exactly (sum_i k_i Sigma_i = 0)."""
    g1, g2, g3 = Gaussian([0], [[1]]), Gaussian([1], [[2]]), Gaussian([5], [[3]])
    p = product_identity([g1, g2, g3], [F(1), F(1), F(-1)])
    assert p is not None and p.alpha == (F(-4),)  # 0 + 1 - 5
    assert product_identity([g1, g2], [F(1), F(-1)]) is None
    assert product_identity_decides([g1, g2], [F(1), F(-1)])


def test_gaussian_identity_with_a_large_integer_null_vector():
    """Seven Gaussians in d = 3 are dependent (their quadratic forms live in a 6-dimensional space);
    the integer null vector of their covariances below has entries near 10**6, and the product
    identity raises each Gaussian's one-term exponential to that power directly (it took 45 s as
    that many multiplications, a hypothesis draw of the README's example test). The shift it finds
    is checked against ``sum_i c_i m_i``, computed here from the means alone: an exponent
    off by one factor (``(n - 1) a`` for ``a ** n``) moves it."""
    S = [((F(1, 2), F(1, 4), F(-1, 4)), (F(1, 4), F(3, 4), F(1, 2)), (F(-1, 4), F(1, 2), F(3))),
         ((F(5, 2), F(3, 2), F(-3, 4)), (F(3, 2), F(9, 4), F(1)), (F(-3, 4), F(1), F(15, 4))),
         ((F(5, 2), F(-9, 4), F(-3, 4)), (F(-9, 4), F(5, 2), F(3, 4)), (F(-3, 4), F(3, 4), F(15, 4))),
         ((F(5, 4), F(1), F(3, 2)), (F(1), F(5, 4), F(3, 2)), (F(3, 2), F(3, 2), F(23, 4))),
         ((F(5, 4), F(-1), F(-1, 2)), (F(-1), F(7, 2), F(-1)), (F(-1, 2), F(-1), F(5, 2))),
         ((F(5, 4), F(1), F(1)), (F(1), F(7, 2), F(1)), (F(1), F(1), F(9, 4))),
         ((F(5, 4), F(0), F(0)), (F(0), F(1, 2), F(-1, 2)), (F(0), F(-1, 2), F(9, 4)))]
    means = [(F(2), F(7, 4), F(1)), (F(5, 2), F(-7), F(4)), (F(1, 2), F(-2), F(3)), (F(1, 2), F(-1), F(-8)),
             (F(1, 2), F(7, 4), F(1)), (F(4), F(-3, 2), F(7, 2)), (F(1), F(3, 2), F(1))]
    c = [F(875210), F(-375664), F(75054), F(-554858), F(-485582), F(582841), F(708735)]
    # the null vector, checked here entry by entry: sum_i c_i Sigma_i = 0
    assert all(sum(ci * Si[r][s] for ci, Si in zip(c, S)) == 0 for r in range(3) for s in range(3))
    gs = [Gaussian(m, Si) for m, Si in zip(means, S)]
    p = product_identity(gs, c)
    assert p is not None
    assert p.alpha == tuple(sum(ci * m[j] for ci, m in zip(c, means)) for j in range(3))
    assert p.beta == 0
    assert product_identity(gs, [c[0] + 1, *c[1:]]) is None  # the quadratic forms no longer cancel


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.tuples(st.integers(-3, 3), st.integers(-3, 3)),
                       st.fractions(min_value=-2, max_value=2).filter(bool), min_size=1, max_size=3),
       st.integers(1, 7))
def test_power_of_an_exponential_polynomial_is_repeated_multiplication(poly, n):
    """``_pow(p, n)`` (a one-term ``p`` in closed form) equals ``n - 1`` multiplications by ``p``."""
    ref = poly
    for _ in range(n - 1):
        ref = _mul(ref, poly)
    assert _pow(poly, n) == ref


def test_term_identity_cubes_and_laplace_without_sympy(monkeypatch):
    """Equal cubes (and a translate of a Laplace law) cancel term by term; for distinct radii
    the answer 'not affine' is final (the named functions are independent), so sympy is
    never asked (simplify is replaced by a function that fails the test if called)."""
    import sympy as sp

    def boom(*a, **k):
        raise AssertionError("sympy.simplify was called")

    monkeypatch.setattr(sp, "simplify", boom)
    lap = Laplace([[1, 0], [0, 2]])
    p = prove_dependence([UniformCube(1, 2), Translation(lap, [1, 2]), UniformCube(1, 2), lap],
                         [F(1), F(1), F(-1), F(-1)])
    assert p is not None and p.kind == "term-identity" and p.alpha == (F(1), F(2))
    assert prove_dependence([UniformCube(1, 1), UniformCube(1 + F(1, 10**1300), 1)], [F(1), F(-1)]) is None
    assert term_identity([UniformCube(1, 1), UniformCube(2, 1)], [F(1), F(-1)]) is None


def test_symbolic_identity_sinhc_doubling():
    """sinh(2t)/(2t) = (sinh t / t) cosh t: a uniform cube of radius 2 is the convolution of
    the radius-1 cube and the two-point law {-1, 1} (seed 003 Ex. 6 in closed form). No
    exponential-polynomial or term identity sees it; sympy (bounded) proves it."""
    import mpmath

    from ntkcheck.independence.decision import decide
    from ntkcheck.independence.results import Verdict

    ms = [UniformCube(2, 1), UniformCube(1, 1), GaussianMixture2([1], [[0]])]
    dec = decide(ms, "weak", timeout=60)
    assert dec.verdict is Verdict.DEPENDENT and dec.certificate.kind == "symbolic-identity"
    c = [Fraction(v) for v in dec.null_vector]
    with mpmath.workdps(50):
        for t in (mpmath.mpf("0.3"), mpmath.mpf(-2), mpmath.mpf(7)):
            f = [mpmath.log(mpmath.sinh(2 * t) / (2 * t)), mpmath.log(mpmath.sinh(t) / t), mpmath.log(mpmath.cosh(t))]
            assert abs(mpmath.fsum(mpmath.mpf(ci.numerator) / ci.denominator * fi for ci, fi in zip(c, f))) < mpmath.mpf(10) ** -40


def test_symbolic_identity_is_bounded_by_an_alarm():
    """With a 1 ms alarm, simplify cannot finish: no proof (None), not a hang or an error."""
    ms = [UniformCube(2, 1), UniformCube(1, 1), GaussianMixture2([1], [[0]])]
    assert symbolic_identity(ms, [F(1), F(-1), F(-1)], seconds=1e-3) is None


def test_prove_dependence_respects_the_budget():
    from ntkcheck._budget import Budget, OutOfTime

    u, v = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    m1, m2 = Empirical(np.array([[0, 0], u])), Empirical(np.array([[0, 0], v]))
    m3 = Empirical(np.array([[0, 0], u, v, u + v]))
    spent = Budget(1e-9)
    import time

    time.sleep(1e-3)
    with pytest.raises(OutOfTime):
        prove_dependence([m1, m2, m3], [F(1), F(1), F(-1)], budget=spent)


def test_exp_gauss_forms():
    """The exponential-polynomial form of each law, against its definition."""
    assert exp_gauss_form(UniformCube(1, 1)) is None
    g = exp_gauss_form(GaussianMixture2([1, 2], [[1, 0], [0, 0]]))
    assert g.atoms == {(F(1), F(2)): F(1, 2), (F(-1), F(-2)): F(1, 2)} and g.quad == ((1, 0), (0, 0))
    t = exp_gauss_form(Translation(Dirac([1, 1]), [F(1, 3), 0]), [F(1), F(1)])
    assert t.atoms == {(F(7, 3),): F(1)} and t.quad == ((0,),)
    e = exp_gauss_form(EmpiricalConvolution(Empirical(np.array([[0.0], [1.0]])), Empirical(np.array([[0.0], [1.0]]))))
    assert e.atoms == {(F(0),): F(1, 4), (F(1),): F(1, 2), (F(2),): F(1, 4)}
