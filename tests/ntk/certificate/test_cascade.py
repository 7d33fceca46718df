"""Tests of ntkcheck.ntk.certificate.cascade: which route certifies gram()'s Gram.
"""

from __future__ import annotations

import numpy as np

from ntkcheck.cgf import as_laws
from ntkcheck.ntk.gram_matrix.features import init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram


def test_gram_certify_above_the_arb_limit_uses_the_preconditioned_route():
    # M = 384 > 256 at d = 2, relative lambda_min ~ 5e-13: float64 says "small", the float64 Gram
    # certificate cannot resolve it; the preconditioned route (issue 14, tests/ntk/certificate/test_arb_fast.py)
    # proves it, with a bound below the SVD's lambda_min (accurate to ~1e-7 relative here).

    rng = np.random.default_rng(4)
    laws = as_laws([rng.standard_normal((8, 2)) / np.sqrt(2) for _ in range(48)])
    r = gram(laws, init_heads(384, 2, seed=4, q_scale=0.7, b_scale=0.7), certify=True)
    assert r.relative_lambda_min < 1e-12 and r.certified_positive
    assert r.certified.kind == "float64-preconditioned"
    assert 0 < r.certified.lower_bound <= r.lambda_min * (1 + 1e-6)
