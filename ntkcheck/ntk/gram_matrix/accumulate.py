r"""The Gram accumulated over head blocks: :math:`\hat G = \mathrm{fl}(\sum_c \hat F_c \hat F_c^T)`, ``F`` never whole.

The one pass over the heads of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram`: per block of ``c``
heads the features :math:`\hat F_c` (``M x c d``, :func:`~ntkcheck.ntk.gram_matrix.features._feature_columns`)
and one BLAS ``syrk`` into the ``M x M`` Gram, in place. ``syrk`` computes one triangle, half the
flops of a GEMM (numpy's ``F @ F.T`` dispatches to it too); a GEMM on the lower block triangle was
measured slower per flop here (``benchmarks/bench_gram.py``). Every entry of :math:`\hat G` is one
sum of ``K = H d`` products evaluated in some order, whatever the blocking, which is what the
certificate's product bound needs (:mod:`ntkcheck.ntk.certificate.rounding`).

The pass is the same with and without a certificate: the certificate's bound on the rounding of
the product needs only the diagonal of :math:`\hat G` (its trace bounds :math:`\rho(|\hat F||\hat F|^T)`,
:func:`~ntkcheck.ntk.certificate.rounding.radius_terms`), so certifying adds no work to the pass.

Memory: the ``8 M^2``-byte Gram (Fortran order, lower triangle: every consumer reads only that
triangle) plus one block of ``F`` of at most ``8 max(2^25, 256 M)`` bytes (at least 256 columns,
so the rank-k update runs at matmul speed), plus the tile workspace of the features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from .features import _feature_columns, _head_block, _progress
from .problem import GramProblem

__all__ = ["AccumulatedGram", "accumulate"]


@dataclass(frozen=True, eq=False)
class AccumulatedGram:
    r"""The pass over the heads: ``G`` (``M x M``, Fortran order, lower triangle) holds
    :math:`\hat G`, summed over ``blocks`` head blocks."""

    G: np.ndarray
    blocks: int


def accumulate(problem: GramProblem, desc: str | None = None) -> AccumulatedGram:
    r""":math:`\hat G` over head blocks by ``syrk`` (the module docstring). The same pass serves the
    float spectrum and the certificate: the certificate's bound on the product needs only the
    diagonal of :math:`\hat G` (:func:`~ntkcheck.ntk.certificate.rounding.radius_terms`). ``desc``
    names the pass in the progress bar (a certified Gram says so)."""
    M, H, d = problem.M, problem.H, problem.d
    c = _head_block(M, H, d)
    G = np.zeros((M, M), order="F")
    block = np.empty((M, c * d))
    nblocks = 0
    with _progress(M * H, problem.progress) as bar:
        if desc is not None:
            bar.set_description(desc)
        bar.set_postfix_str(f"G {8 * M * M / 1e9:.2f} GB + F block {8 * M * c * d / 1e9:.2f} GB")
        for h0 in range(0, H, c):
            h1 = min(H, h0 + c)
            B = block if h1 - h0 == c else np.empty((M, (h1 - h0) * d))
            _feature_columns(problem.groups, problem.heads, h0, h1, B, problem.chunk, bar)
            # B.T is Fortran-ordered (k, M): syrk(trans=1) forms B B^T without copying B.
            G = sla.blas.dsyrk(1.0, B.T, beta=1.0, c=G, trans=1, lower=1, overwrite_c=1)
            nblocks += 1
    return AccumulatedGram(G, nblocks)
