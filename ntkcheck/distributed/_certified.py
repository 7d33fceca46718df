r"""A certified lower bound on :math:`\lambda_{\min}` of one Gram kept in tiles on Dask workers.

The serial certificate (:func:`ntkcheck.ntk.certificate.routes.certify_positive`) in the memory of the
cluster: the same three rigorous steps, joined by Weyl's inequality, with the Gram never on
the client (derivations: ``theory/certificates.md``, "Certified positivity at scale" and "The
blocked Cholesky on the workers").

1. **Enclosure.** The radius of the serial route, term for term
   (:func:`~ntkcheck.ntk.certificate.rounding.radius_terms`): :math:`\rho \ge \rho(|\hat F||\hat F|^T)`
   from the trace of the tiles (their diagonal comes to the client), the feature radii
   :math:`E \ge \|\hat F - F\|_F` the serial ones (:func:`~ntkcheck.ntk.certificate.rounding.feature_radius_sq`,
   per law and head); radius :math:`\gamma_K \rho + 2 E \sqrt\rho + E^2`. (The product tasks still
   return the Collatz-Wielandt parts of an earlier, tighter bound on :math:`\rho`; they are not read.)
2. **Rump's criterion on the workers:** the blocked Cholesky of :math:`\mathrm{fl}(\hat G - tI)`
   (:func:`ntkcheck.distributed._tiled.cholesky`); when it runs to completion,
   :math:`\lambda_{\min}(\hat G) \ge t - \frac{\gamma_{n+1}}{1-\gamma_{n+1}}\operatorname{tr}(\hat G - tI)
   - u \max_i |\hat g_{ii} - t|` minus the underflow allowance (the same function as the serial
   route, :func:`~ntkcheck.ntk.gram_matrix.cholesky.rump_allowance`).
3. ``t`` **as the serial route chooses it:** one factorisation of :math:`\hat G`, a Lanczos
   estimate :math:`\hat\lambda` of :math:`\lambda_{\min}` (ARPACK on :math:`\hat G^{-1}` through
   the tiled factor, the serial starting vector and tolerance), then ``t = 0.9``, ``0.5``,
   ``0.2`` :math:`\hat\lambda` (never a shift whose known allowance already exceeds it).

The result is a :class:`~ntkcheck.ntk.certificate.routes.PositivityCertificate` with the serial
route's ``method`` and statement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from ..cgf import Empirical
from ..ntk.certificate import rounding as rnd
from ..ntk.certificate.routes import PositivityCertificate
from ..ntk.gram_matrix.features import Heads, _atom_count, _head_block
from . import _tiled
from ._accumulate import _block_features
from ._tiled import Tiles

__all__ = ["TiledEnclosure", "enclosure", "certify_tiles", "largest_eigenvalue"]

#: the fractions of the Lanczos estimate removed by the shifts tried, in order (the serial route's)
_SHIFT_FRACTIONS = (0.1, 0.5, 0.8)


# ---------------------------------------------------------------------- worker tasks


def _all_laws(blocks: Sequence[Sequence[Empirical]]) -> list[Empirical]:
    return [law for block in blocks for law in block]


def start_vector(blocks: Sequence[Sequence[Empirical]], heads: Heads, chunk: int) -> np.ndarray:
    """Task: the serial Collatz-Wielandt vector, power steps on :math:`|\\hat F_0|`, the first head
    block of the serial size (``_head_block(M, H, d)`` heads) on all rows."""
    laws = _all_laws(blocks)
    c = min(heads.count, _head_block(_atom_count(laws), heads.count, heads.dim))
    B = _block_features(laws, heads, heads.count, 0, c, chunk)
    np.abs(B, out=B)
    return rnd._perron_vector(B)


def feature_radii(blocks: Sequence[Sequence[Empirical]], heads: Heads) -> tuple[np.ndarray, float, float]:
    """Task: :func:`~ntkcheck.ntk.certificate.rounding.feature_radius_sq` on all rows (``O(n H)`` work)."""
    return rnd.feature_radius_sq(_all_laws(blocks), heads)


def first(parts: tuple[Any, ...]) -> Any:
    return parts[0]


def rest(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    return parts[1:]


# ------------------------------------------------------------------------ enclosure


@dataclass(frozen=True)
class TiledEnclosure:
    """``G`` (tiles on the workers) with :math:`\\|G - F F^T\\|_2 \\le` ``radius``; ``diag`` its
    diagonal; ``why`` a reason when no finite radius is proved (then ``radius`` is inf)."""

    G: Tiles
    diag: np.ndarray
    radius: float
    rounding: float
    features: float
    why: str | None


def enclosure(client: Any, G: Tiles, w_parts: dict[tuple[int, int], tuple[np.ndarray, np.ndarray | None]],
              v: np.ndarray, e2: np.ndarray, dmax: float, K: int, H: int) -> TiledEnclosure:
    r"""The radius of the serial route, term for term
    (:func:`~ntkcheck.ntk.certificate.rounding.radius_terms`): the rounding of the product bounded
    through the trace of ``G`` (its diagonal, gathered here) and the feature radii ``e2``, ``dmax``.
    ``w_parts`` and ``v``, the Collatz-Wielandt sums of an earlier bound, are not read."""
    diag = _tiled.diagonal(client, G)
    r = rnd.radius_terms(e2, dmax, diag, K)
    return TiledEnclosure(G, diag, r.radius, r.rounding, r.features, r.why)


# ---------------------------------------------------------------------- Lanczos


def smallest_eigenvalue(solve: Callable[[np.ndarray], np.ndarray], n: int) -> float | None:
    """Float estimate of lambda_min from solves with the factored matrix, as the serial route
    makes it (:func:`~ntkcheck.ntk.gram_matrix.extremal.smallest`, whose Lanczos is tighter: ``tol = 1e-10``):
    the dense inverse up to ``n = 256``, else ARPACK on the inverse (``tol = 1e-6``, a fixed starting
    vector), else 20 steps of inverse iteration; None when it is not positive."""
    if n <= 256:
        X = solve(np.eye(n))
        mu = float(np.linalg.eigvalsh((X + X.T) / 2.0)[-1])
        return 1.0 / mu if mu > 0 and math.isfinite(mu) else None
    v0 = np.random.default_rng(0).standard_normal(n)
    op = LinearOperator((n, n), matvec=lambda x: solve(np.ravel(x)), dtype=np.float64)
    try:
        mu = float(eigsh(op, k=1, which="LA", tol=1e-6, v0=v0, return_eigenvectors=False)[0])
        return 1.0 / mu if mu > 0 and math.isfinite(mu) else None
    except (ArpackError, ArpackNoConvergence):
        pass
    v = v0 / np.linalg.norm(v0)
    lam = None
    for _ in range(20):
        x = solve(v)
        q = float(v @ x)  # v^T G^-1 v <= 1 / lambda_min, increasing to it
        nx = float(np.linalg.norm(x))
        if not (q > 0 and nx > 0 and math.isfinite(nx)):
            return None
        lam = 1.0 / q
        v = x / nx
    return lam


def largest_eigenvalue(client: Any, G: Tiles) -> float:
    """Float lambda_max of the tiled ``G`` (ARPACK with products on the workers, ``tol = 1e-6``,
    8 Lanczos vectors: 9-13 products where the default 20 take 21; 30 power steps if it does not
    converge)."""
    n = G.n
    v0 = np.random.default_rng(1).standard_normal(n)
    op = LinearOperator((n, n), matvec=lambda x: _tiled.matvec(client, G, np.ravel(x)), dtype=np.float64)
    if n > 2:
        try:
            return float(eigsh(op, k=1, which="LA", tol=1e-6, v0=v0, ncv=min(n - 1, 8),
                               return_eigenvectors=False)[0])
        except (ArpackError, ArpackNoConvergence):
            pass
    v, lam = v0 / np.linalg.norm(v0), 0.0
    for _ in range(30):
        x = _tiled.matvec(client, G, v)
        lam = float(v @ x)
        nx = float(np.linalg.norm(x))
        if not (nx > 0 and math.isfinite(nx)):
            break
        v = x / nx
    return lam


# ----------------------------------------------------------------------- certificate


def _refused(M: int, statement: str, lam: float | None, radius: float | None) -> PositivityCertificate:
    return PositivityCertificate(False, None, "refused", statement, lam, radius, M)


@dataclass
class _Factoring:
    """Factorisations of ``fl(G - tI)`` on the workers, counted; the last factor is kept."""

    client: Any
    enc: TiledEnclosure
    factorizations: int = 0
    factor: Tiles | None = None

    def raw_allowance(self, t: float) -> float:
        """Rump's allowance for ``fl(G - tI)`` (known before factorising) and the shift's rounding."""
        d = self.enc.diag - t  # rounded once, as on the workers
        return rnd.rump_allowance(d) + rnd.U * float(d.max())

    def run(self, t: float) -> float | None:
        """Rump's ``s`` when the Cholesky of ``fl(G - tI)`` runs to completion, else None."""
        self.factor = None  # release the previous factor first: at most one on the workers
        self.factorizations += 1
        if not np.all(self.enc.diag - t > 0):
            return None
        self.factor = _tiled.cholesky(self.client, self.enc.G, t)
        return None if self.factor is None else self.raw_allowance(t) * rnd._SAFE

    def smallest(self) -> float | None:
        assert self.factor is not None
        L = self.factor
        return smallest_eigenvalue(lambda b: _tiled.solve(self.client, L, b), L.n)


def certify_tiles(client: Any, enc: TiledEnclosure, shift: float | None = None
                  ) -> tuple[PositivityCertificate, float | None, float | None, int]:
    """``(certificate, lam, t, factorisations)``: the serial route's steps on the tiled Gram (``t``
    the shift that certified, or None; ``lam`` the Lanczos estimate of :math:`\\lambda_{\\min}`).
    With ``shift`` given, one factorisation at that ``t`` (``lam`` is then ``t`` plus the Lanczos
    estimate of :math:`\\lambda_{\\min}(\\hat G - tI)`)."""
    if enc.why is not None:
        return _refused(enc.G.n, enc.why, None, None), None, None, 0
    work = _Factoring(client, enc)
    cert, lam, t = _at_shift(work, float(shift)) if shift is not None else _chosen_shift(work)
    return cert, lam, t, work.factorizations


def _chosen_shift(work: _Factoring) -> tuple[PositivityCertificate, float | None, float | None]:
    """One factorisation of ``fl(G)``, the Lanczos estimate, then the shifts the serial route tries."""
    enc = work.enc
    M, radius = enc.G.n, enc.radius
    lam = work.smallest() if work.run(0.0) is not None else None
    if lam is None:
        return _refused(M, f"float64 Cholesky of the Gram fails: lambda_min is not positive at float64 "
                           f"resolution (below resolution at M = {M})", None, radius), None, None
    tr = float(np.sum(enc.diag))

    def err(t: float) -> float:  # the allowance for fl(G - tI) + radius, as the serial route's
        return (work.raw_allowance(t) + radius) * (1.0 + 1e-10)

    fs = [f for f in _SHIFT_FRACTIONS if lam * (1.0 - f) > err(lam * (1.0 - f))]
    if not fs and lam * 0.99 > err(lam * 0.99):
        fs = [0.01]
    for f in fs:
        t = lam * (1.0 - f)
        s = work.run(t)
        if s is not None and (cert := _certificate(t, s, radius, lam, M, work.factorizations)) is not None:
            return cert, lam, t
    rad = err(lam)
    if fs:
        ts = ", ".join(f"{lam * (1 - f):.3g}" for f in fs)
        return _refused(M, f"float64 says positive (the Cholesky of fl(G) succeeds, lambda_min ~ {lam:.3g}), but "
                           f"every shifted Cholesky fl(G) - tI failed (t = {ts}): not certified (below resolution at "
                           f"M = {M})", lam, rad), lam, None
    return _refused(M, f"float64 says positive (the Cholesky of fl(G) succeeds, lambda_min ~ {lam:.3g}, "
                       f"{lam / tr:.2g} of the trace), but the proved rounding radius and Rump's allowance "
                       f"({rad:.3g}) are not below it: not certified, the exact Gram may be singular "
                       f"(below resolution at M = {M})", lam, rad), lam, None


def _certificate(t: float, s: float, radius: float, lam: float, M: int, n_fact: int) -> PositivityCertificate | None:
    """The certificate when ``t`` exceeds Rump's ``s`` plus the radius (the serial statement)."""
    e = (s + radius) * (1.0 + 1e-10)
    if not t > e:
        return None
    lb = float(np.nextafter((t - e) * (1.0 - 4.0 * rnd.U), 0.0))
    return PositivityCertificate(
        True, lb, "float64-cholesky",
        f"lambda_min >= {lb:.6g} in exact arithmetic: Cholesky of fl(G) - {t:.6g} I succeeded "
        f"(Rump's criterion allows {s:.3g}), ||G - fl(G)||_2 <= {radius:.3g} (Weyl); "
        f"{n_fact} Cholesky factorisations",
        lam, radius + s, M)


def _at_shift(work: _Factoring, t: float) -> tuple[PositivityCertificate, float | None, float | None]:
    """One factorisation at the shift the caller chose."""
    M, radius = work.enc.G.n, work.enc.radius
    s = work.run(t)
    if s is None:
        return _refused(M, f"the Cholesky of fl(G) - {t:.6g} I fails: lambda_min(fl(G)) is below the shift given "
                           "(not certified)", None, radius), None, None
    mu = work.smallest()  # lambda_min(G - tI) >= 0 estimated: lam = t + mu
    lam = None if mu is None else t + mu
    cert = _certificate(t, s, radius, lam if lam is not None else t, M, work.factorizations)
    if cert is not None:
        return cert, lam, t
    return _refused(M, f"the Cholesky of fl(G) - {t:.6g} I succeeds, but Rump's allowance and the proved radius "
                       f"({(s + radius):.3g}) are not below the shift: not certified", lam, s + radius), lam, None
