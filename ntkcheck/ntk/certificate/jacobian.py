r"""Certificates for the NTK from its Jacobian: :math:`\lambda_{\min}(J J^T) = \sigma_{\min}(J)^2`, never squared.

An empirical NTK is :math:`K = J J^T` for the Jacobian ``J`` (``n`` outputs, one row per token and
output coordinate, ``p`` parameters). Forming ``K`` in floating point squares the condition number:
a relative :math:`\lambda_{\min}(K)` of :math:`10^{-14}` is lost in the rounding of ``K``, while
:math:`\sigma_{\min}(J)/\|J\|` is :math:`10^{-7}`, far above the rounding of ``J``.
:func:`certify_jacobian` works on ``J``:

* **rows exceed columns** (``n > p``): :math:`\operatorname{rank}(J_\star J_\star^T) \le p < n` for every
  :math:`J_\star` of that shape, so the NTK is singular with a kernel of dimension at least ``n - p``,
  whatever the rounding (a 2880-row per-token NTK of a model with 1,088 parameters). No arithmetic:
  certified at once, for every error bound;
* **otherwise** the preconditioned bound of :func:`~ntkcheck.ntk.certificate.arb_fast.sigma_min_lower`:
  a float matrix ``X`` with :math:`XJ` nearly orthonormal rows (shifted Cholesky-QR rounds), Gershgorin
  on :math:`\mathrm{fl}((XJ)(XJ)^T) - I` with :math:`\gamma_k` rounding bounds, and :math:`\|X\|_2` bounded
  by a verified Cholesky; then :math:`\sigma_{\min}(J) \ge \sqrt{\ell}/\|X\|_2` and, for every
  :math:`J_\star` within ``e`` of ``J`` entry by entry, Weyl's inequality for singular values with
  :math:`\|J_\star - J\|_2 \le \|J_\star - J\|_F \le \sqrt{np}\,e`;
* **below resolution** with ``e = 0`` (the numbers themselves): the exact rank of ``J``, as that of the
  exact integer Gram of its shorter side (:math:`\operatorname{rank} J = \operatorname{rank} JJ^T =
  \operatorname{rank} J^TJ`), gives the kernel of the NTK exactly, when its estimated cost fits
  (:mod:`ntkcheck.ntk.certificate.exact_matrix`).

The error bound defaults as for a matrix (:mod:`ntkcheck.ntk.certificate.matrix_input`): 0 for
float64, :math:`64 u \max|J|` for float32 / float16 Jacobians, said in ``notes``.

References: seed 003 Prop. 5 (the NTK Gram is :math:`JJ^T`); N. J. Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., Sec. 3.1; S. M. Rump, "Verification of positive definiteness", BIT 46
(2006); Y. Fukaya et al., "Shifted Cholesky QR ...", SIAM J. Sci. Comput. 42 (2020).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ... import _budget
from ..._memory import require_memory
from ..._progress import StepBar
from . import exact_matrix as ex
from .arb_fast import sigma_min_lower
from .matrix_input import PreparedMatrix, prepare
from .user_matrix import MatrixCertificate, base_fields, diagnose, run_certificate

__all__ = ["certify_jacobian"]

U = 2.0**-53


def _by_size(prep: PreparedMatrix, known: dict[str, Any]) -> MatrixCertificate:
    n, p = prep.A.shape
    return MatrixCertificate(
        "certified singular", None, **known | {"max_rank": p}, method="rank-by-size",
        statement=f"J has {n} rows and {p} < {n} columns: rank(J J^T) <= {p} for every Jacobian of that shape, so the "
        f"NTK is singular with a kernel of dimension at least {n - p} (whatever the rounding and abs_error)")


def _float_view(prep: PreparedMatrix, bar: StepBar, known: dict[str, Any], skipped: list[str]) -> None:
    """What float64 sees: the squared extreme singular values (not a proof), when they fit the time left."""
    n, p = prep.A.shape
    seconds = _budget.dense_seconds(4.0 * n * n * p, _budget.SVDVALS)
    if not _budget.fits(seconds):
        skipped.append(f"float64 singular values: estimated at {seconds:.0f} s, more than the time left")
        return
    bar.start("float64 singular values", seconds)
    sv = _budget.run(lambda: np.linalg.svd(prep.A, compute_uv=False), "the float64 singular values")
    with np.errstate(under="ignore", over="ignore"):
        lo, hi = float(sv[-1]) ** 2, float(sv[0]) ** 2
    known.update(lambda_min_float=prep.to_user(lo, 2), lambda_max_float=prep.to_user(hi, 2))
    top = known["lambda_max_float"]
    if top is not None and math.isfinite(top):  # the floor of sigma^2 that a float64 SVD resolves, and the ball's
        known["resolution"] = (math.sqrt(n * p * top) * U + known["radius"]) ** 2
        known["below_resolution"] = bool(known["lambda_min_float"] <= known["resolution"])


def _exact_kernel(prep: PreparedMatrix, bar: StepBar, known: dict[str, Any],
                  skipped: list[str]) -> MatrixCertificate | None:
    """The exact rank of ``J`` (``abs_error = 0``), from the exact integer Gram of its shorter side."""
    n, p = prep.A.shape
    m = min(n, p)
    if prep.error != 0:
        skipped.append("exact rank: only for abs_error 0 (a ball of Jacobians has no single rank)")
        return None
    if m > ex.MAX_EXACT_RANK:
        skipped.append(f"exact rank: skipped above {ex.MAX_EXACT_RANK} rows (the shorter side of J is {m})")
        return None
    bits = 2 * ex.integer_bits(prep.A) + max(n, p).bit_length()
    seconds, nbytes = ex.rank_cost(m, bits)
    nbytes += n * p * (bits / 16 + 100)
    if not ex.rank_fits(seconds, nbytes, skipped):
        return None
    bar.start("exact rank of J", seconds)
    Z, _ = ex.exact_integers(prep.A)
    r = ex.exact_rank(Z * Z.transpose() if n <= p else Z.transpose() * Z)
    if r >= n:
        return None
    return MatrixCertificate("certified singular", None, **known | {"max_rank": r}, method="exact-rank", rank=r,
                             statement=f"the exact Jacobian (its values taken exactly) has rank {r} < {n}: the NTK "
                             f"J J^T has a kernel of dimension {n - r}")


def _preconditioned(prep: PreparedMatrix, bar: StepBar, known: dict[str, Any]) -> tuple[MatrixCertificate | None, str]:
    n, p = prep.A.shape
    require_memory(8.0 * (3 * n * p + 3 * n * n), f"the preconditioned bound on the {n} x {p} Jacobian",
                   "the size of the Jacobian (or raise NTKCHECK_MEMORY_LIMIT)")
    eps = math.sqrt(float(n) * float(p)) * prep.error * (1 + 1e-10) if prep.error else 0.0
    known["radius"] = prep.to_user(eps, down=False)
    bar.start("preconditioned sigma_min bound", _budget.dense_seconds(8.0 * n * n * p, _budget.CHOLESKY))
    fb = _budget.run(lambda: sigma_min_lower(prep.A, eps), "the preconditioned bound")
    if fb.lower_bound is None:
        return None, fb.statement
    lb = prep.to_user(fb.lower_bound, 2, down=True)
    tail = "" if lb > 0 else " (below the smallest double: rescale J)"
    ball = (f"J_* J_*^T for every J_* within {prep.abs_error:.3g} of J, entry by entry (||J_* - J||_2 <= "
            f"sqrt(n p) abs_error)" if prep.error else "J J^T of the Jacobian as given")
    scaled = f" on J times 2^{-prep.exponent} (exact)" if prep.exponent else ""
    how = fb.statement.replace("F^ - F", "J_* - J").replace("F^", "J")
    return MatrixCertificate("certified positive", lb, **known, method="float64-preconditioned",
                             statement=f"lambda_min >= {lb:.6g}{tail} for {ball}: sigma_min bounded{scaled}, "
                             f"never squared: {how}"), fb.statement


def _steps(prep: PreparedMatrix, bar: StepBar, known: dict[str, Any]) -> MatrixCertificate:
    n, p = prep.A.shape
    if n > p:
        skipped: list[str] = []
        out = _exact_kernel(prep, bar, known, skipped) if prep.error == 0 and p <= ex.MAX_EXACT_RANK else None
        if out is not None:
            stated = f"{out.statement} (and rank <= {p} < {n} columns: singular whatever the rounding)"
            return replace(out, statement=stated, skipped=tuple(skipped))
        if p > ex.MAX_EXACT_RANK:
            skipped.append(f"exact rank: skipped above {ex.MAX_EXACT_RANK} columns (the kernel has dimension at least "
                           f"{n - p} by size alone)")
        return replace(_by_size(prep, known), skipped=tuple(skipped))
    skipped = []
    out, why = _preconditioned(prep, bar, known)
    _float_view(prep, bar, known, skipped)
    if out is not None:
        return replace(out, **{k: known[k] for k in ("lambda_min_float", "lambda_max_float")}, skipped=tuple(skipped))
    out = _exact_kernel(prep, bar, known, skipped)
    if out is None:
        out = MatrixCertificate("not certified", None, **known, method="refused",
                                statement=f"sigma_min(J) is not proved positive: {why}")
    return replace(out, skipped=tuple(skipped))


def certify_jacobian(jacobian: Any, *, abs_error: float | None = None, tokens: Any = None,
                     progress: bool | None = False, time_budget: float | None = None,
                     precision: str | None = None) -> MatrixCertificate:
    r"""A rigorous lower bound on :math:`\lambda_{\min}(J J^T) = \sigma_{\min}(J)^2` from the Jacobian.

    Parameters
    ----------
    jacobian : (n, p) array, or the path of a ``.npy`` / ``.npz`` file
        One row per output (each token and output coordinate), one column per parameter, e.g.
        ``torch.func.jacrev`` flattened, or ``jax.jacobian``.
    abs_error : float or None
        Entrywise error bound on ``J``: the certificate covers :math:`J_\star J_\star^T` for every
        :math:`J_\star` with :math:`|J_\star - J| \le` ``abs_error``. None: 0 for float64, :math:`64u\max|J|`
        for float32 / float16 (said in ``notes``).
    tokens : token samples or None
        The data behind ``J``: adds the dependence diagnosis (as :func:`~ntkcheck.certify_matrix`).
    progress : bool or None
        A bar over the steps on stderr (None: when stderr is a terminal).
    time_budget, precision
        As for :func:`~ntkcheck.certify_matrix`.

    Returns
    -------
    MatrixCertificate
        With ``source = "jacobian"`` and ``parameters = p``.

    Examples
    --------
    >>> import numpy as np
    >>> J = np.random.default_rng(0).standard_normal((5, 9))
    >>> certify_jacobian(J).status
    'certified positive'
    >>> certify_jacobian(np.ones((6, 4)), abs_error=1e-3).method   # 6 outputs, 4 parameters
    'rank-by-size'
    """
    prep = prepare(jacobian, abs_error, "jacobian", precision)
    n, p = prep.A.shape
    known = base_fields(prep, n, "jacobian") | {"parameters": p}
    out = run_certificate(known, 4, lambda bar, k: _steps(prep, bar, k), progress=progress, time_budget=time_budget,
                          desc="certify --jacobian")
    return out if tokens is None else replace(out, diagnosis=diagnose(tokens, out))
