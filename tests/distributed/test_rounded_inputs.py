"""Issue 30 item 6: the distributed certificate honours inputs given at values that are not doubles.

The tiles hold the Gram of the inputs' nearest doubles; the certificate must be about the values
given: the bound proved on the tiles carried over through the proved rounding radius (or refused),
as the serial route does. Reference: lambda_min of the Gram from the exact decimals (and exact
long doubles), by mpmath at 40 and 80 digits (``tests/helpers.py``, no ntkcheck).
"""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from helpers import ref_gram_eigenvalues, ref_law

pytest.importorskip("distributed")

from distributed import Client, LocalCluster  # noqa: E402

import ntkcheck.distributed.gram as dgram  # noqa: E402
from ntkcheck.cgf import Empirical, as_laws  # noqa: E402
from ntkcheck.distributed import distributed_gram  # noqa: E402
from ntkcheck.errors import InputError  # noqa: E402
from ntkcheck.ntk.gram_matrix.features import init_heads  # noqa: E402

LD = np.longdouble


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cl, \
            Client(cl) as c:
        yield c


def _decimal_tokens(seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [[[F(int(v), 1000) for v in row] for row in rng.integers(-1500, 1500, size=(3, 2))] for _ in range(3)]


def _exact_lambda_min(tokens, heads) -> float:
    refs = [ref_gram_eigenvalues([ref_law(t) for t in tokens], heads.Q.tolist(), heads.b.tolist(), dps)[0]
            for dps in (40, 80)]
    assert abs(refs[0] - refs[1]) < 1e-30 * abs(refs[1])  # converged: the reference is lambda_min itself
    return float(refs[1])


@pytest.mark.parametrize("kind", ["decimals", "long doubles"])
def test_bound_is_for_the_values_given(client, kind):
    """Decimals 0.123 (Fraction) or long doubles with 64-bit mantissas: the distributed bound says the
    inputs were rounded, lies below the exact lambda_min, and below the bound the same tiles give for
    the doubles themselves (the carry-over (sqrt(l) - E)^2 < l)."""
    toks = _decimal_tokens(7)
    if kind == "long doubles":
        if np.finfo(LD).nmant < 63:
            pytest.skip("long double is double here")
        rng = np.random.default_rng(7)
        toks = [rng.integers(-1500, 1500, size=(3, 2)).astype(LD) / LD(1000) for _ in range(3)]
    laws = [Empirical(t) for t in toks]
    assert all(law.rounded for law in laws)
    heads = init_heads(8, 2, seed=2)
    r = distributed_gram(laws, heads, client=client, certify=True)
    assert r.certificate is not None and r.certificate.positive and r.certificate.inputs_rounded
    assert r.gram.certified is not None and r.gram.certified.inputs_rounded
    assert "not doubles" in r.certificate.statement
    lam = _exact_lambda_min(toks, heads)
    assert 0 < r.certificate.lower_bound <= lam
    view = distributed_gram(as_laws([law.atoms for law in laws]), heads, client=client, certify=True)
    assert view.certificate.positive and not view.certificate.inputs_rounded
    assert r.certificate.lower_bound < view.certificate.lower_bound


def test_mutation_without_the_carry_over_is_caught(client, monkeypatch):
    """Mutation: the tiles' bound reported as is (the old behaviour): it claims nothing about rounding,
    which the test above refuses."""
    monkeypatch.setattr(dgram, "_positivity_for_values_given", lambda laws, heads, pc: pc)
    laws = [Empirical(t) for t in _decimal_tokens(7)]
    r = distributed_gram(laws, init_heads(8, 2, seed=2), client=client, certify=True)
    assert r.certificate.positive and not r.certificate.inputs_rounded


def test_merged_doubles_are_refused(client):
    """Distinct atoms of one sample with one nearest double (1 and 1 + 2^-60): refused, not computed."""
    with pytest.raises(InputError, match="same nearest doubles"):
        distributed_gram([[[F(1)], [1 + F(1, 2**60)]]], 4, client=client, certify=True)
