"""What proves a bound on the Gram: rounding radii of the float64 routes (``rounding``), the values
the user gave (``inputs``), the Arb, preconditioned and verified-Cholesky routes (``routes``,
``arb_fast``), the cascade that certifies :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` (``cascade``),
when a certified rate is useful (``useful_rate``), and matrices made elsewhere (``user_matrix``).

May import the Gram's inputs and linear algebra below it (``gram_matrix.features``, ``problem``,
``cholesky``, ``extremal``, ``accumulate``), never the pipeline above it.
"""

from __future__ import annotations

# certificates of the Gram
from .routes import GramCertificate as GramCertificate
from .routes import PositivityCertificate as PositivityCertificate
from .routes import certify_gram_enclosure as certify_gram_enclosure
from .routes import certify_lambda_min as certify_lambda_min
from .routes import certify_positive as certify_positive
from .routes import gram_matrix_arb as gram_matrix_arb

__all__ = [
    # certificates of the Gram
    "GramCertificate", "PositivityCertificate", "certify_gram_enclosure", "certify_lambda_min", "certify_positive",
    "gram_matrix_arb",
]
