"""Tests of ntkcheck.ntk.gram_matrix.accumulate: the Gram summed over head blocks by syrk.
"""

from __future__ import annotations

import numpy as np
from gram_references import _random

from ntkcheck.cgf import as_laws
from ntkcheck.ntk.certificate.rounding import enclosed_gram
from ntkcheck.ntk.gram_matrix import features as features_module
from ntkcheck.ntk.gram_matrix.features import attention_features, init_heads
from ntkcheck.ntk.gram_matrix.spectrum import _extremal_eigh


def test_gram_accumulated_matches_formed_gram(monkeypatch):
    """F F^T summed over head blocks by syrk (the route above M = 4096) equals F @ F.T on
    its lower triangle; the upper triangle is never written."""
    monkeypatch.setattr(features_module, "_GRAM_BLOCK", 1)  # smallest blocks: 128 heads of d = 2
    S = _random(n=12, N=4, d=2, seed=9)
    heads = init_heads(300, 2, seed=4)
    F = attention_features(S, heads)
    G = enclosed_gram(as_laws(S), heads, 1 << 17, bound=False).G
    # sums of the same products in a different order: a few ulps of |G|
    np.testing.assert_allclose(np.tril(G), np.tril(F @ F.T), rtol=0, atol=1e-14 * np.abs(F @ F.T).max())
    assert not np.triu(G, 1).any()
    ext = _extremal_eigh(G)  # reads only the lower triangle
    ev = np.linalg.eigvalsh(F @ F.T)
    assert ext is not None
    np.testing.assert_allclose(ext, (ev[0], ev[-1]), rtol=1e-8)  # Lanczos tol 1e-12
