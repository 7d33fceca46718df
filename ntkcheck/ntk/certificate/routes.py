r"""Certificate of positivity of the NTK Gram: :math:`\lambda_{\min}` bounded below in Arb.

The Gram :math:`W^{1/2} K W^{1/2} = F F^T` on distinct atoms (:mod:`ntkcheck.ntk.gram_matrix.pipeline`)
is assembled in ball arithmetic from the exact token, mass and head values
(:func:`gram_matrix_arb`); once ``arb_mat.inv`` encloses its inverse,
:math:`\lambda_{\min} \ge 1/\|G^{-1}\|_F` (:func:`certify_lambda_min`, :class:`GramCertificate`;
at most 256 distinct atoms). Where the relative :math:`\lambda_{\min}` is below float64's
resolution (``d = 2``), :func:`certify_lambda_min` first tries the faster preconditioned route of
:mod:`ntkcheck.ntk.certificate.arb_fast` (float64 features with a proved radius, a bound on
:math:`\sigma_{\min}(F)` through a preconditioner ``X`` with :math:`XF` nearly orthonormal), up to
``MAX_CERTIFY_TOKENS`` atoms.

At scale, :func:`certify_positive` proves :math:`\lambda_{\min}(G) \ge c > 0` at float64
speed and in the memory of one ``M x M`` Gram (accumulated over head blocks): a rigorous
enclosure of the float64 features (an error analysis of the queries, scores, max-shifted
exponentials, softmax and means, for any score range), the rounding of the Gram product
(:math:`\gamma_k` bounds on :math:`|F||F|^T`), and a floating-point Cholesky of :math:`G - tI`
with Rump's verified criterion, in place; Weyl's inequality joins them
(:class:`PositivityCertificate`).

References: seed 003 Prop. 5; ``theory/certificates.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from flint import arb, arb_mat, fmpq

from ... import _budget
from ..._precision import flint_prec
from ..._progress import progress_bar
from ..._records import restore
from ...cgf.empirical import Empirical, as_laws
from ...errors import InputError, PrecisionError
from ...independence._arb_cost import SMALL_N, arb_inverse_seconds
from ..gram_matrix.accumulate import accumulate
from ..gram_matrix.cholesky import SymmetricWork, U, rump_allowance
from ..gram_matrix.extremal import smallest
from ..gram_matrix.features import DEFAULT_CHUNK, Heads, _as_heads
from ..gram_matrix.problem import GramProblem
from .arb_fast import problem_bound
from .inputs import carried_over, rounding_radius
from .rounding import gram_radius

__all__ = [
    "GramCertificate",
    "gram_matrix_arb",
    "certify_lambda_min",
    "PositivityCertificate",
    "certify_positive",
    "certify_gram_enclosure",
]

#: certification (certify_lambda_min) is attempted only up to this many distinct atoms: the
#: preconditioned route of ntkcheck.ntk.certificate.arb_fast, ~8 M^3 flops (d = 2, H = M: 17-24 s at 2048, 49-82 s
#: at 4096 on 2 busy cores; benchmarks/bench_gram.py --arb-largest).
MAX_CERTIFY_TOKENS = 4096
#: the Arb inverse route (Python-level ball exponentials, arb_mat.inv) up to this many atoms.
MAX_ARB_TOKENS = 256
#: ``method="auto"`` tries Arb first when its ball exponentials (atoms x heads x largest law)
#: are at most this many: measured faster than the preconditioned route there (M = 8 at d = 2).
_ARB_FIRST_COST = 1 << 10


# ------------------------------------------------------------------------ certification


@dataclass(frozen=True)
class GramCertificate:
    r"""Result of the Arb certification of :math:`\lambda_{\min}(F F^T) > 0`.

    ``kind="float64-preconditioned"`` (:mod:`ntkcheck.ntk.certificate.arb_fast`): the float64 features
    with their proved radius :math:`\varepsilon_F`, a float preconditioner ``X`` and
    :math:`\lambda_{\min} \ge (\sqrt{\ell}/\|X\|_2 - \varepsilon_F)^2`, :math:`\ell \le \lambda_{\min}(XFF^TX^T)`,
    every product with a proved rounding bound (``bits = 53``; it assumes ``np.exp`` within 2 ulps,
    tested). ``kind="arb-inverse-frobenius"``: the Gram was built in ball arithmetic from the
    exact token and head values, ``arb_mat.inv`` succeeded (so every matrix in the ball,
    in particular the exact Gram, is invertible), and since the exact Gram is
    :math:`F F^T \succeq 0`, :math:`\lambda_{\min} = 1/\|G^{-1}\|_2 \ge 1/\|G^{-1}\|_F`,
    bounded below rigorously by ``lower_bound``. ``kind="inconclusive"``: no precision up
    to ``max_bits`` separated the Gram from singular matrices (as it must be when the
    Gram is singular); ``lower_bound`` is None. ``kind="exactly-singular"``: an exact proof that
    the Gram is singular (``detail``; :func:`ntkcheck.ntk.certificate.inputs.exactly_singular`).

    ``inputs_rounded``: some token or head was given at a value that is not a double; a float64
    bound then holds for the values given only through the proved effect of that rounding
    (:mod:`ntkcheck.ntk.certificate.inputs`), said in ``detail``. ``evidence``: a certificate for the float64
    view of such inputs that does not carry over to the values given (kept to show what was seen).
    """

    kind: str
    lower_bound: float | None
    bits: int
    detail: str
    inputs_rounded: bool = False
    evidence: GramCertificate | None = None
    #: ``float64-cholesky``: the ``t`` of the Cholesky of fl(G - tI) that proved the bound
    shift: float | None = None
    #: ``exactly-singular``: the sample ``i`` and its atoms ``a < b`` with equal scores under every head
    atoms: tuple[int, int, int] | None = None

    @property
    def positive(self) -> bool:
        return self.lower_bound is not None and self.lower_bound > 0

    @property
    def how(self) -> str:
        """How the bound was proved, in a few words (for reports)."""
        how = {"arb-inverse-frobenius": f"Arb ball arithmetic, {self.bits} bits",
               "float64-preconditioned": "float64 error bounds and a preconditioner",
               "float64-cholesky": "float64 error bounds and a verified Cholesky",
               "exactly-singular": "exact rational arithmetic"}.get(self.kind, self.kind)
        return how + (", with the rounding of the inputs to float64 bounded" if self.inputs_rounded and
                      self.kind.startswith("float64") else "")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "lower_bound": self.lower_bound, "bits": self.bits, "detail": self.detail,
                "inputs_rounded": self.inputs_rounded,
                "evidence": None if self.evidence is None else self.evidence.to_dict(),
                "shift": self.shift, "atoms": None if self.atoms is None else list(self.atoms)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GramCertificate:
        return restore(cls, d)

    def __repr__(self) -> str:
        if self.positive:
            return f"GramCertificate(lambda_min >= {self.lower_bound:.6g}, {self.kind}, {self.bits} bits)"
        if self.kind == "exactly-singular":
            return f"GramCertificate(singular, proved exactly: {self.detail})"
        return f"GramCertificate(inconclusive at {self.bits} bits: {self.detail})"


def gram_matrix_arb(samples: Any, heads: Heads, prec: int) -> arb_mat:
    r"""The Gram :math:`W^{1/2} K W^{1/2}` on distinct atoms as an Arb ball matrix at ``prec`` bits.

    Atoms, masses and heads enter at the exact values given (every double is a dyadic rational,
    the masses are exact rationals, a ``Fraction`` or long double becomes a ball around it); the
    softmax weights
    :math:`\pi_{a'} \propto m_{ia'} e^{\langle Q x_{ia} + b, x_{ia'}\rangle}` are evaluated in
    ball arithmetic with a shift by the float64 row maximum (any shift is exact algebra;
    this one keeps the exponentials bounded). Entry
    :math:`G_{(ia),(i'a')} = \sqrt{m_{ia} m_{i'a'}}\, H^{-1} \sum_h \langle\phi_{ia}^h, \phi_{i'a'}^h\rangle`.
    """
    laws = as_laws(samples)
    return _gram_arb(laws, _as_heads(heads, laws[0].dim), prec)


def _arb_q(q: Any) -> arb:
    """The exact rational ``q`` (Fraction) as a ball at the current precision."""
    return arb(fmpq(q.numerator, q.denominator))


def _gram_arb(laws: Sequence[Empirical], heads: Heads, prec: int) -> arb_mat:
    Fm = _features_arb(laws, heads, prec)
    with flint_prec(prec):
        return Fm * Fm.transpose()


def _features_arb(laws: Sequence[Empirical], heads: Heads, prec: int) -> arb_mat:
    r"""The feature matrix ``F`` (rows scaled by :math:`\sqrt{m_{ia}/H}`) as an Arb ball matrix."""
    H, d = heads.count, heads.dim
    with flint_prec(prec):
        rows: list[list[arb]] = []  # rows of F (without the weight), concatenated over heads
        sw: list[arb] = []
        # balls around the exact values given (a double exactly; 1/10 or a long double as a tight ball)
        if heads.rounded:
            Qa = [arb_mat([[_arb_q(v) for v in row] for row in heads.rational_Q(h)]) for h in range(H)]
            ba = [[_arb_q(v) for v in heads.rational_b(h)] for h in range(H)]
        else:  # the doubles are the values given: arb of a double is that double exactly (radius 0)
            Qa = [arb_mat(heads.Q[h].tolist()) for h in range(H)]  # not a Fraction per entry: d^2 per head
            ba = [[arb(v) for v in heads.b[h].tolist()] for h in range(H)]
        for law in laws:
            X = law.atoms
            XA = arb_mat([[_arb_q(v) for v in row] for row in law.rational_atoms()])
            mass = [_arb_q(q) for q in law.weights]
            N = X.shape[0]
            feats: list[list[arb]] = [[] for _ in range(N)]
            XT = XA.transpose()
            for h in range(H):
                _budget.checkpoint("the Arb features of the Gram")
                A = XA * Qa[h].transpose()  # rows: Q x_j (exact inputs, ball products)
                A = arb_mat([[A[j, k] + ba[h][k] for k in range(d)] for j in range(N)])
                Sc = A * XT  # scores <Q x_j + b, x_k>
                shift = (X @ heads.Q[h].T + heads.b[h]) @ X.T
                P = arb_mat(N, N)
                for j in range(N):
                    m = arb(float(shift[j].max()))
                    e = [mass[k] * (Sc[j, k] - m).exp() for k in range(N)]
                    tot = sum(e, arb(0))
                    for k in range(N):
                        P[j, k] = e[k] / tot
                Phi = P * XA  # (N, d): softmax-weighted means
                for j in range(N):
                    feats[j].extend(Phi[j, k] for k in range(d))
            rows.extend(feats)
            sw.extend([(mass[j] / H).sqrt() for j in range(N)])
        M = len(rows)
        return arb_mat([[sw[r] * v for v in rows[r]] for r in range(M)])


def _arb_upper(x: arb) -> float:
    """A float that is >= every point of the ball ``x`` (rounded outward)."""
    return float(np.nextafter(float(x.mid()) + float(x.rad()), np.inf)) * (1 + 2**-50)


def certify_lambda_min(samples: Any, heads: Heads, *, max_bits: int = 2048, start_bits: int = 128,
                       method: str = "auto") -> GramCertificate:
    r"""Rigorous lower bound on :math:`\lambda_{\min}(W^{1/2} K W^{1/2})`, or inconclusive.

    ``method="arb"`` (at most ``MAX_ARB_TOKENS`` = 256 distinct atoms): the Gram is assembled
    in Arb on distinct atoms (:func:`gram_matrix_arb`); the precision doubles from
    ``start_bits`` up to ``max_bits`` until ``arb_mat.inv`` certifies that the ball Gram is
    invertible; then :math:`\lambda_{\min} \ge 1/\|G^{-1}\|_F` (valid because the exact Gram is
    :math:`F F^T \succeq 0`). No assumption beyond Arb's enclosures.

    ``method="preconditioned"`` (at most ``MAX_CERTIFY_TOKENS`` atoms,
    :mod:`ntkcheck.ntk.certificate.arb_fast`): :math:`\lambda_{\min} \ge (\sqrt{\ell}/\|X\|_2 - \varepsilon_F)^2`
    from the float64 features (proved radius :math:`\varepsilon_F`), a float preconditioner ``X``
    and :math:`\ell \le \lambda_{\min}(X \hat F \hat F^T X^T)`, each product with a proved rounding
    bound; it resolves relative :math:`\lambda_{\min}` far below float64's ``u`` (the errors enter
    :math:`\sigma_{\min}(F)`, not :math:`\lambda_{\min}`), at BLAS-3 speed.

    ``method="auto"``: Arb where it is cheaper (tiny problems), else the preconditioned route,
    then Arb when that refuses and ``M <= 256``. A Gram singular in exact arithmetic is never
    certified (its ball contains singular matrices; :math:`\sigma_{\min}(\hat F) \le \varepsilon_F`).

    Examples
    --------
    >>> from ntkcheck.ntk import init_heads
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5], [-0.5, 1.0]])
    >>> certify_lambda_min([x], init_heads(4, 2, seed=0), method="preconditioned").kind
    'float64-preconditioned'
    """
    return _certify(GramProblem.of(samples, heads), max_bits=max_bits, start_bits=start_bits, method=method)


def _certify(problem: GramProblem, *, max_bits: int = 2048, start_bits: int = 128,
             method: str = "auto") -> GramCertificate:
    """:func:`certify_lambda_min` on a validated problem."""
    M = problem.M
    if method not in ("auto", "arb", "preconditioned"):
        raise InputError(f"certify: method must be 'auto', 'arb' or 'preconditioned', got {method!r}")
    cap = MAX_ARB_TOKENS if method == "arb" else MAX_CERTIFY_TOKENS
    if M > cap:
        raise PrecisionError(
            f"certify: {M} distinct atoms; the {'Arb' if method == 'arb' else 'rigorous'} certification is "
            f"limited to {cap} (below resolution at M = {M}: not attempted)"
        )
    if max_bits < 53:
        raise PrecisionError(f"certify: max_bits={max_bits} is below double precision (53)")
    if problem.by_size:  # rank F <= H d: never certified, by any route
        return GramCertificate("inconclusive", None, 53, f"H d = {problem.K} < M = {M}: "
                                                         "the Gram is singular by size")
    arb_cost = M * problem.H * int(problem.n_atoms.max())
    fast = None
    seen = None  # a float64 certificate of rounded inputs that did not carry over to the values given
    if method == "preconditioned" or (method == "auto" and arb_cost > _ARB_FIRST_COST):
        # ~2 M^2 K flops, measured 4-5x slower a flop than the timed product
        _budget.require(partial(_budget.dense_seconds, 2.0 * M * M * problem.K, 5.0),
                        f"the preconditioned bound (M = {M})")
        fast = _budget.run(partial(problem_bound, problem), f"the preconditioned bound (M = {M})")
        if fast.lower_bound is not None:
            got = _for_values_given(problem, GramCertificate("float64-preconditioned", fast.lower_bound, 53,
                                                             fast.statement))
            if got.positive or method == "preconditioned" or M > MAX_ARB_TOKENS:
                return got
            seen = got
        elif method == "preconditioned" or M > MAX_ARB_TOKENS:
            return GramCertificate("inconclusive", None, 53, f"preconditioned route: {fast.statement}")
    cert = _certify_arb(problem, max_bits, start_bits)  # on the exact values given
    if seen is not None and not cert.positive:
        return replace(seen, detail=f"{seen.detail}; Arb on the values given: {cert.detail}")
    if fast is not None and not cert.positive:
        return replace(cert, detail=f"preconditioned route: {fast.statement}; Arb: {cert.detail}")
    return cert


def _for_values_given(problem: GramProblem, cert: GramCertificate) -> GramCertificate:
    """A float64 certificate ``cert`` (proved for the nearest doubles of the inputs) as a statement
    about the values given: unchanged when they are doubles; else carried over through the proved
    rounding radius (:mod:`ntkcheck.ntk.certificate.inputs`), or inconclusive with ``cert`` as evidence."""
    return _carried_to_values_given(problem.laws, problem.heads, problem.rounded, cert)


def _carried_to_values_given(laws: Sequence[Empirical], heads: Heads, which: str | None,
                             cert: GramCertificate) -> GramCertificate:
    """:func:`_for_values_given` for laws and heads, ``which`` saying which of them are not doubles
    (:func:`~ntkcheck.ntk.gram_matrix.problem.rounded_inputs`)."""
    if which is None or not cert.positive:
        return cert
    assert cert.lower_bound is not None
    E = rounding_radius(laws, heads)
    lb = carried_over(cert.lower_bound, E)
    said = (f"{which}; the float64 routes computed with their nearest doubles, "
            f"whose Gram has lambda_min >= {cert.lower_bound:.4g} ({cert.how}); rounding the inputs moves "
            f"sigma_min(F) by at most {E:.3g} (proved)")
    if lb is not None:
        return GramCertificate(cert.kind, lb, cert.bits, f"{cert.detail}; {said}, so lambda_min >= "
                               f"(sqrt({cert.lower_bound:.4g}) - {E:.3g})^2 = {lb:.4g} for the values given",
                               inputs_rounded=True)
    return GramCertificate("inconclusive", None, cert.bits, f"{said}, not below sqrt(lambda_min): not a certificate "
                           "about the values given", inputs_rounded=True, evidence=cert)


def _certify_arb(problem: GramProblem, max_bits: int, start_bits: int) -> GramCertificate:
    M = problem.M
    bits = min(start_bits, max_bits)
    last = ""
    while True:
        G = _gram_arb(problem.laws, problem.heads, bits)
        if M >= SMALL_N:  # arb_mat.inv cannot be interrupted: estimated first (under a time budget)
            _budget.require(lambda b=bits: arb_inverse_seconds(M, b), f"the Arb inverse of the {M} x {M} Gram at {bits} bits")
        try:
            with flint_prec(bits):
                Ginv = G.inv()
                fro2 = sum((Ginv[r, c] ** 2 for r in range(M) for c in range(M)), arb(0))
                ub = _arb_upper(fro2.sqrt())
        except ZeroDivisionError:
            last = f"arb_mat.inv could not separate the Gram from singular matrices at {bits} bits"
            ub = None
        if ub is not None and math.isfinite(ub) and ub > 0:
            lb = float(np.nextafter(1.0 / ub, 0.0))
            return GramCertificate("arb-inverse-frobenius", lb, bits,
                                   f"lambda_min >= 1/||G^-1||_F with G^-1 enclosed at {bits} bits")
        if bits >= max_bits:
            return GramCertificate("inconclusive", None, bits, last or "the inverse ball was unbounded")
        bits = min(2 * bits, max_bits)


# ------------------------------------------------------------- certified positivity at scale


@dataclass(frozen=True)
class PositivityCertificate:
    r"""Result of :func:`certify_positive` / :func:`certify_gram_enclosure`.

    ``lower_bound`` (when ``positive``) holds in exact arithmetic:
    :math:`\lambda_{\min}(W^{1/2} K W^{1/2}) \ge` ``lower_bound`` ``> 0``. ``method``:
    ``"float64-cholesky"`` (enclosure + Rump's Cholesky criterion + Weyl),
    ``"arb-inverse-frobenius"`` (the Arb route, small ``M``), or ``"refused"`` (nothing
    proved; ``statement`` says what float64 saw and why it is not a proof).
    ``lambda_min_float`` is the float64 estimate of :math:`\lambda_{\min}` (Lanczos on the
    inverse through the Cholesky factor, an estimate from above), ``radius`` the proved bound on
    :math:`\|G - \mathrm{fl}(G)\|_2` plus the Cholesky criterion's allowance, ``M`` the rows,
    ``shift`` the ``t`` whose Cholesky of :math:`\mathrm{fl}(G - tI)` proved the bound (a verifier redoes it).
    ``evidence``: when tokens or heads were given at values that are not doubles, the certificate
    proved for their nearest doubles that does not carry over to the values given
    (:mod:`ntkcheck.ntk.certificate.inputs`); ``inputs_rounded`` says the statement accounts for that rounding.
    """

    positive: bool
    lower_bound: float | None
    method: str
    statement: str
    lambda_min_float: float | None
    radius: float | None
    M: int
    inputs_rounded: bool = False
    evidence: PositivityCertificate | None = None
    shift: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"positive": self.positive, "lower_bound": self.lower_bound, "method": self.method,
                "statement": self.statement, "lambda_min_float": self.lambda_min_float,
                "radius": self.radius, "M": self.M, "inputs_rounded": self.inputs_rounded,
                "evidence": None if self.evidence is None else self.evidence.to_dict(), "shift": self.shift}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PositivityCertificate:
        return restore(cls, d)

    def __repr__(self) -> str:
        if self.positive:
            return f"PositivityCertificate(lambda_min >= {self.lower_bound:.6g}, {self.method}, M={self.M})"
        return f"PositivityCertificate(not certified, M={self.M}: {self.statement})"


def _refused(M: int, statement: str, lam: float | None, radius: float | None) -> PositivityCertificate:
    return PositivityCertificate(False, None, "refused", statement, lam, radius, M)


def _certify_lower(G_lower: np.ndarray, radius: float, progress: bool = False) -> PositivityCertificate:
    """The Cholesky steps on ``fl(G)`` (lower triangle, Fortran order: consumed in place), with
    ``radius >= ||G_exact - fl(G)||_2``: one factorisation for the estimate, then one per shift tried."""
    M = G_lower.shape[0]
    gb = 8 * M * M / 1e9
    with progress_bar(3, desc="certify: Cholesky", unit="step", enabled=progress) as bar:
        bar.set_postfix_str(f"G {gb:.2f} GB in place: mirror")
        work = SymmetricWork(G_lower)
        bar.update(1)
        bar.set_postfix_str(f"G {gb:.2f} GB in place: Cholesky of fl(G)")
        ok = work.factor(0.0) is not None
        bar.update(1)
        lam = None
        if ok:
            bar.set_postfix_str(f"G {gb:.2f} GB in place: Lanczos on the inverse")
            pair = smallest(work)  # Lanczos on the inverse: a Rayleigh quotient, an estimate from above
            lam = pair.value if pair is not None and pair.value > 0 else None
            bar.update(1)
    if lam is None:
        return _refused(M, f"float64 Cholesky of the Gram fails: lambda_min is not positive at float64 "
                           f"resolution (below resolution at M = {M})", None, radius)
    return certify_factored(work, lam, radius, progress)


def certify_factored(work: SymmetricWork, lam: float, radius: float, progress: bool = False) -> PositivityCertificate:
    r"""Rump's criterion on the Gram of ``work`` (a :class:`~ntkcheck.ntk.gram_matrix.cholesky.SymmetricWork`, in
    any state) given a float estimate ``lam`` of its :math:`\lambda_{\min}` from above (a Lanczos
    Rayleigh quotient) and ``radius`` :math:`\ge \|G_\star - \hat G\|_2`: Cholesky of
    :math:`\mathrm{fl}(\hat G - tI)` at ``t = 0.9 lam`` (``0.5``, ``0.2`` only if it fails), in place.

    The float path of :func:`~ntkcheck.ntk.gram_matrix.pipeline.gram` has already factored :math:`\hat G`
    and run the Lanczos steps on the same array, so certifying costs one more Cholesky in the
    common case; ``work.factorizations`` counts them all."""
    M = work.n
    gb = 8 * M * M / 1e9
    tr = float(np.sum(work.diag))

    def err(t: float) -> float:  # Rump's allowance for fl(G - tI) (known before factorising) + radius
        d = work.diag - t
        return (rump_allowance(d) + U * float(d.max()) + radius) * (1.0 + 1e-10)

    # t - err(t) grows with t: try 0.9 lambda first, smaller only if that Cholesky fails
    fs = [f for f in (0.1, 0.5, 0.8) if lam * (1.0 - f) > err(lam * (1.0 - f))]
    if not fs and lam * 0.99 > err(lam * 0.99):
        fs = [0.01]
    with progress_bar(len(fs), desc="certify: shifted Cholesky", unit="step", enabled=progress and bool(fs)) as bar:
        for f in fs:
            t = lam * (1.0 - f)
            bar.set_postfix_str(f"G {gb:.2f} GB in place: Cholesky of fl(G) - {t:.3g} I")
            s = work.factor(t)
            bar.update(1)
            if s is None:
                continue
            e = (s + radius) * (1.0 + 1e-10)
            if t > e:
                lb = float(np.nextafter((t - e) * (1.0 - 4.0 * U), 0.0))
                return PositivityCertificate(
                    True, lb, "float64-cholesky",
                    f"lambda_min >= {lb:.6g} in exact arithmetic: Cholesky of fl(G) - {t:.6g} I succeeded "
                    f"(Rump's criterion allows {s:.3g}), ||G - fl(G)||_2 <= {radius:.3g} (Weyl); "
                    f"{work.factorizations} Cholesky factorisations",
                    lam, radius + s, M, shift=t)
    rad = err(lam)
    if fs:
        return _refused(M, f"float64 says positive (the Cholesky of fl(G) succeeds, lambda_min ~ {lam:.3g}), but "
                           f"every shifted Cholesky fl(G) - tI failed (t = {', '.join(f'{lam * (1 - f):.3g}' for f in fs)}):"
                           f" not certified (below resolution at M = {M})", lam, rad)
    return _refused(M, f"float64 says positive (the Cholesky of fl(G) succeeds, lambda_min ~ {lam:.3g}, "
                       f"{lam / tr:.2g} of the trace), but the proved rounding radius and Rump's allowance "
                       f"({rad:.3g}) are not below it: not certified, the exact Gram may be singular "
                       f"(below resolution at M = {M})", lam, rad)


def certify_gram_enclosure(G: np.ndarray, radius: float) -> PositivityCertificate:
    r"""Certify :math:`\lambda_{\min}(G_\star) > 0` for every symmetric :math:`G_\star` with
    :math:`\|G_\star - G\|_2 \le` ``radius``, or refuse.

    A floating-point Cholesky of :math:`\mathrm{fl}(G - tI)` that runs to completion proves
    :math:`\lambda_{\min}(G) \ge t - \frac{\gamma_{n+1}}{1 - \gamma_{n+1}}\operatorname{tr}(G - tI)
    - u \max_i |g_{ii} - t|` (Rump, "Verification of positive definiteness", BIT 46 (2006)
    433-452); Weyl's inequality subtracts ``radius``. One Cholesky of ``G`` gives a Lanczos
    estimate :math:`\hat\lambda` of :math:`\lambda_{\min}`; ``t = 0.9`` :math:`\hat\lambda` is
    factorised next, ``0.5`` and ``0.2`` :math:`\hat\lambda` only if that fails, and a shift whose
    known allowance already exceeds ``t`` is never factorised. ``G`` is copied (it is not
    modified) and must be exactly symmetric: the criterion reads one triangle, so a matrix whose
    triangles differ is refused with an :class:`~ntkcheck.errors.InputError` (symmetrise it and add
    :math:`\|(G - G^T)/2\|_2` to ``radius`` if that is what is meant).

    Examples
    --------
    >>> certify_gram_enclosure(np.eye(3), 1e-3).positive
    True
    """
    A = _enclosure_matrix(G)
    if not (np.all(np.isfinite(A)) and math.isfinite(radius) and radius >= 0):
        raise PrecisionError("certify_gram_enclosure: non-finite entries or a negative radius")
    return _certify_lower(np.asfortranarray(np.tril(A)), float(radius))  # a copy: G is not consumed


def _enclosure_matrix(G: Any) -> np.ndarray:
    """``G`` as a square, exactly symmetric float64 array, or an InputError saying why not."""
    try:
        A = np.asarray(G, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"certify_gram_enclosure: expected a real square matrix ({exc})") from None
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise PrecisionError(f"certify_gram_enclosure: expected a square matrix, got shape {A.shape}")
    if not np.array_equal(A, A.T, equal_nan=True):
        i, j = (int(v) for v in np.argwhere(A != A.T)[0])
        raise InputError(f"certify_gram_enclosure: G is not symmetric (G[{i}, {j}] = {float(A[i, j])!r}, G[{j}, {i}] = "
                         f"{float(A[j, i])!r}); the Cholesky criterion reads one triangle and would certify another "
                         "matrix: pass (G + G^T) / 2 with radius + ||G - G^T||_2 / 2")
    return A


def certify_positive(samples: Any, heads: Heads, *, arb: bool = True, max_bits: int = 1024,
                     progress: bool = False, chunk: int = DEFAULT_CHUNK) -> PositivityCertificate:
    r"""Rigorous lower bound on :math:`\lambda_{\min}(W^{1/2} K W^{1/2})` at float64 speed, or a refusal.

    1. :math:`\hat G = \mathrm{fl}(\sum_c \hat F_c \hat F_c^T)` accumulated over head blocks
       (``F`` is never whole), with
       :math:`\|\hat G - F F^T\|_2 \le \gamma_K \rho + 2 E \sqrt{\rho} + E^2`: ``K = H d``,
       :math:`\rho \ge \rho(|\hat F||\hat F|^T)` (Collatz-Wielandt, block by block), and
       :math:`E \ge \|\hat F - F\|_F` from an error analysis of the queries, scores, max-shifted
       exponentials (underflow included), softmax and means, valid for any score range
       (it needs the proved score rounding below 1);
    2. Rump's Cholesky criterion on :math:`\hat G - tI` and Weyl's inequality, in the Gram's own
       array: one Cholesky for a Lanczos estimate :math:`\hat\lambda` of
       :math:`\lambda_{\min}`, then one at :math:`t = 0.9 \hat\lambda` (smaller ``t`` only if it fails).

    When this refuses (the relative :math:`\lambda_{\min}` is below what float64 resolves,
    e.g. at ``d = 2``, or the exact Gram is singular) and ``arb`` is true and ``M <= 4096``,
    :func:`certify_lambda_min` (preconditioned, or Arb) is tried. Memory: one ``M x M`` float64 array
    (``8 M^2`` bytes) plus one column block of ``F`` (at most ``8 max(2^25, 256 M)`` bytes).
    ``progress`` shows the accumulation and the Cholesky steps (memory in the bar's postfix).

    References: seed 003 Prop. 5, 8; ``theory/certificates.md`` (certified positivity at scale).
    """
    problem = GramProblem.of(samples, heads, chunk=chunk, progress=progress)
    M = problem.M
    out = verified_cholesky(problem)
    if out.positive or not arb or M > MAX_CERTIFY_TOKENS:
        return out
    cert = _certify(problem, max_bits=max_bits)
    if cert.positive:
        return PositivityCertificate(True, cert.lower_bound, cert.kind,
                                     f"float64 route: {out.statement}; {cert.detail}",
                                     out.lambda_min_float, out.radius, M, cert.inputs_rounded)
    return replace(out, statement=f"{out.statement}; Arb route inconclusive at {cert.bits} bits")


def verified_cholesky(problem: GramProblem) -> PositivityCertificate:
    """Steps 1 and 2 of :func:`certify_positive` on a validated problem: one pass over the heads with
    its proved radius, Rump's criterion on the Gram in its own array, as a statement about the values
    given (:func:`_positivity_for_values_given`)."""
    acc = accumulate(problem, "certified Gram (features, syrk)")
    r = gram_radius(problem, np.diagonal(acc.G).copy())
    if r.why is not None:
        return _refused(problem.M, r.why, None, None)
    return _positivity_for_values_given(problem, _certify_lower(acc.G, r.radius, problem.progress))


def _positivity_for_values_given(problem: GramProblem, out: PositivityCertificate) -> PositivityCertificate:
    """:func:`_for_values_given` for a :class:`PositivityCertificate`."""
    return positivity_carried(problem.laws, problem.heads, problem.rounded, out)


def positivity_carried(laws: Sequence[Empirical], heads: Heads, which: str | None,
                       out: PositivityCertificate) -> PositivityCertificate:
    """A :class:`PositivityCertificate` proved for the nearest doubles of ``laws`` and ``heads`` as a
    statement about the values given (``which``: those that are not doubles, or None), as
    :func:`_for_values_given` carries a :class:`GramCertificate`; the distributed Gram's tiles use it too."""
    if not out.positive:
        return out
    got = _carried_to_values_given(laws, heads, which, GramCertificate(out.method, out.lower_bound, 53, out.statement))
    if got.positive:
        return replace(out, lower_bound=got.lower_bound, statement=got.detail, inputs_rounded=got.inputs_rounded)
    return PositivityCertificate(False, None, "refused", got.detail, out.lambda_min_float, out.radius, out.M,
                                 inputs_rounded=True, evidence=out)
