"""``ntkcheck certify MATRIX`` / ``ntkcheck certify --jacobian J``: a rigorous lower bound on lambda_min of an
NTK made elsewhere.

Parses, reads the array (:func:`ntkcheck.io.arrays.load_array`: ``.npy``, ``.npz``, ``.safetensors``, ``.pt``),
calls :func:`ntkcheck.ntk.certificate.user_matrix.certify_matrix` or
:func:`ntkcheck.ntk.certificate.jacobian.certify_jacobian` (with the dependence diagnosis of the token
file given by ``--tokens``), prints the report or one JSON object of schema ``ntkcheck/certify/1``,
and writes the certificate with ``--certificate-out``.
"""

from __future__ import annotations

import argparse
from typing import Any

from .._text import fit
from ._args import (
    EXIT_INCONCLUSIVE,
    EXIT_NEGATIVE,
    EXIT_OK,
    add_budget_option,
    add_progress_options,
    emit_json,
    exit_epilog,
    nonnegative_float,
    progress_enabled,
)
from ._paths import certificate_path

#: exit status of each :attr:`~ntkcheck.ntk.certificate.user_matrix.MatrixCertificate.status` (its ``exit_code``)
_EXIT = {"certified positive": EXIT_OK, "certified singular": EXIT_NEGATIVE, "certified indefinite": EXIT_NEGATIVE,
         "not certified": EXIT_INCONCLUSIVE}
_PRECISIONS = ("float64", "float32", "float16", "bfloat16")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "certify",
        help="a rigorous lower bound on lambda_min of an NTK made elsewhere: its matrix, or its Jacobian",
        description="Certify the smallest eigenvalue of an empirical NTK computed elsewhere (neural-tangents, "
        "torch.func, JAX). From the matrix K: a float64 Cholesky of K minus a shift with Rump's criterion proves "
        "lambda_min >= a bound for every symmetric matrix within --abs-error of the file's entries. From the "
        "Jacobian (--jacobian J, K = J J^T): a bound on sigma_min(J)^2 that never squares the condition number, "
        "and 'certified singular' at once when J has more rows than columns (rank <= the number of parameters). "
        "The error bound defaults to 0 for float64 files (the numbers themselves) and to 64 u max|A| for float32, "
        "float16 and bfloat16 ones, and is raised to half the skew of a matrix that is not exactly symmetric; the "
        "report says which. Singular only from an exact proof (an exact rank, or the shape of J), indefinite "
        "from a vector with x^T S x < 0 or an exact determinant; below float64 resolution it says so and names "
        "every step skipped. With --tokens, the dependence diagnosis of the data (seed 003 Prop. 8) tells a "
        "kernel of the data from rounding.",
        epilog=exit_epilog("certify"),
    )
    p.add_argument("matrix", metavar="MATRIX", nargs="?", default=None,
                   help="the symmetric (n, n) matrix: .npy, .npz with one array, .safetensors with one tensor, or "
                   ".pt (read with torch.load(weights_only=True) when torch is installed)")
    p.add_argument("--jacobian", metavar="J", default=None,
                   help="certify J J^T from the (n, p) Jacobian instead (one row per output, one column per "
                   "parameter), in the same file formats")
    p.add_argument("--abs-error", type=nonnegative_float, default=None, metavar="E",
                   help="entrywise bound on the error of how the matrix (or J) was computed: the certificate covers "
                   "every symmetric S with |S_ij - A_ij| <= E (default: 0 for float64, 64 u max|A| for float32, "
                   "float16 and bfloat16; raised to half the largest |A_ij - A_ji| when not given)")
    p.add_argument("--precision", choices=_PRECISIONS, default=None,
                   help="the arithmetic the values were computed in, when the file's dtype does not say (e.g. "
                   "bfloat16 values saved as float32): sets the default --abs-error")
    p.add_argument("--tokens", metavar="FILE", default=None,
                   help="the token file the matrix was computed from: adds the dependence diagnosis (decide and the "
                   "named structures), so a kernel of the data is told apart from rounding")
    p.add_argument("--certificate-out", metavar="FILE.json", default=None, type=certificate_path,
                   help="write the matrix, the bound, the shift and the error terms to FILE.json, re-checked by "
                   "`python -m ntkcheck.verify FILE.json` (a matrix only, not --jacobian)")
    add_budget_option(p, "certify", "a step that cannot finish in what is left is not started (the report says so)")
    add_progress_options(p, "the steps: eigenvalues, Cholesky, exact rank")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema ntkcheck/certify/1)")
    p.set_defaults(func=run)


def _arguments(args: argparse.Namespace) -> tuple[str, str]:
    """``(path, "matrix" | "jacobian")``, or a one-line usage error."""
    from ..errors import InputError

    if (args.matrix is None) == (args.jacobian is None):
        raise InputError("give the matrix (MATRIX) or its Jacobian (--jacobian J), not both" if args.matrix
                         else "give the matrix file MATRIX, or its Jacobian with --jacobian J (see ntkcheck certify "
                         "--help)")
    if args.jacobian is not None and args.certificate_out:
        raise InputError("--certificate-out writes a matrix certificate and the certificate file format has no "
                         "Jacobian claim yet: certify the matrix J J^T, or leave --certificate-out out")
    return (args.matrix, "matrix") if args.matrix is not None else (args.jacobian, "jacobian")


def run(args: argparse.Namespace) -> int:
    from ..io.arrays import load_array
    from ..io.files import load_samples
    from ..ntk.certificate.jacobian import certify_jacobian
    from ..ntk.certificate.user_matrix import certify_matrix

    path, kind = _arguments(args)
    tensor = load_array(path, kind)
    tokens = None if args.tokens is None else load_samples(args.tokens)
    precision = args.precision or (tensor.precision if tensor.precision == "bfloat16" else None)
    how = certify_matrix if kind == "matrix" else certify_jacobian
    res = how(tensor.array, abs_error=args.abs_error, tokens=tokens, progress=progress_enabled(args),
              time_budget=args.max_seconds, precision=precision)
    code = _EXIT[res.status]
    if args.certificate_out:
        from ..certificate_files import matrix_certificate, write_certificate

        write_certificate(args.certificate_out, matrix_certificate(res, tensor.array, source=path))
    if args.json:
        emit_json("certify", {"path": str(path), "tokens": args.tokens, **res.to_dict(),  # the API's dict, same schema
                              "certificate_out": args.certificate_out})
        return code
    lines = [f"ntkcheck certify{' --jacobian' if kind == 'jacobian' else ''}: {path}", *res.lines()]
    if args.certificate_out:
        lines.append(f"  certificate         written to {args.certificate_out} (python -m ntkcheck.verify FILE)")
    print(fit(lines))
    return code
