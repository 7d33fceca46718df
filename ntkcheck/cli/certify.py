"""``ntkcheck certify MATRIX.npy``: a rigorous lower bound on lambda_min of a matrix made elsewhere.

Parses, calls :func:`ntkcheck.ntk.certificate.user_matrix.certify_matrix` (with the dependence diagnosis of
the token file given by ``--tokens``), prints the report or one JSON object of schema
``ntkcheck/certify/1``, and writes the certificate with ``--certificate-out``.
"""

from __future__ import annotations

import argparse
from typing import Any

from .._text import fit
from ._args import (
    EXIT_INCONCLUSIVE,
    EXIT_NEGATIVE,
    EXIT_OK,
    emit_json,
    exit_epilog,
    nonnegative_float,
)

#: exit status of each :attr:`~ntkcheck.ntk.certificate.user_matrix.MatrixCertificate.status`
_EXIT = {"certified positive": EXIT_OK, "certified singular": EXIT_NEGATIVE, "certified indefinite": EXIT_NEGATIVE,
         "not certified": EXIT_INCONCLUSIVE}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "certify",
        help="a rigorous lower bound on lambda_min of a symmetric matrix file (an NTK computed elsewhere)",
        description="Certify the smallest eigenvalue of a symmetric matrix computed elsewhere (an empirical NTK "
        "from neural-tangents, torch.func or JAX): a float64 Cholesky of the matrix minus a shift with Rump's "
        "criterion proves lambda_min >= a bound for every symmetric matrix within --abs-error of the file's "
        "entries. Non-symmetric input is refused unless --abs-error covers the skew part. Below float64 "
        "resolution it says so; singular only from an exact proof (the exact rank of the numbers given), "
        "indefinite from a vector with x^T S x < 0 in exact arithmetic. With --tokens, the dependence "
        "diagnosis of the data (seed 003 Prop. 8) tells a kernel of the data from rounding.",
        epilog=exit_epilog("certify"),
    )
    p.add_argument("matrix", metavar="MATRIX.npy", help=".npy file with one (n, n) array, or .npz with exactly one")
    p.add_argument("--abs-error", type=nonnegative_float, default=0.0, metavar="E",
                   help="entrywise bound on the error of how the matrix was computed: the certificate covers every "
                   "symmetric S with |S_ij - A_ij| <= E (default 0: the numbers in the file)")
    p.add_argument("--tokens", metavar="FILE", default=None,
                   help="the token file the matrix was computed from: adds the dependence diagnosis (decide and the "
                   "named structures), so a kernel of the data is told apart from rounding")
    p.add_argument("--certificate-out", metavar="FILE.json", default=None,
                   help="write the matrix, the bound, the shift and the error terms to FILE.json, re-checked by "
                   "`python -m ntkcheck.verify FILE.json`")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema ntkcheck/certify/1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..io.files import load_samples
    from ..ntk.certificate.user_matrix import certify_matrix, load_matrix

    A = load_matrix(args.matrix)
    tokens = None if args.tokens is None else load_samples(args.tokens)
    res = certify_matrix(A, abs_error=args.abs_error, tokens=tokens)
    code = _EXIT[res.status]
    if args.certificate_out:
        from ..certificate_files import matrix_certificate, write_certificate

        write_certificate(args.certificate_out, matrix_certificate(res, A, source=args.matrix))
    if args.json:
        emit_json("certify", {"path": str(args.matrix), "tokens": args.tokens, **res.to_dict(),
                              "certificate_out": args.certificate_out, "exit_code": code})
        return code
    lines = [f"ntkcheck certify: {args.matrix}", *res.lines()]
    if args.certificate_out:
        lines.append(f"  certificate         written to {args.certificate_out} (python -m ntkcheck.verify FILE)")
    print(fit(lines))
    return code
