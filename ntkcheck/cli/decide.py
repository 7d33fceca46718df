"""``ntkcheck decide``: the independence verdict for a token file, a family, or the seed examples."""

from __future__ import annotations

import argparse
import time
from fractions import Fraction
from typing import Any

from .._budget import Budget
from .._memory import require_memory
from .._progress import ClockBar
from .._text import exact_vector, fit
from ..cgf import Dirac, Family, Gaussian, GaussianMixture2, Laplace, UniformCube
from ..errors import InputError
from ..independence import (
    decision as _decision,  # decide looked up at call time (mutation tests patch it)
)
from ..independence.decision import DEFAULT_TIMEOUT
from ..independence.examples import seed_examples
from ..independence.results import decision_sentence
from ..io.files import load_laws
from ._args import (
    EXIT_INCONCLUSIVE,
    EXIT_NEGATIVE,
    EXIT_OK,
    add_progress_options,
    allow_negative_values,
    emit_json,
    exit_epilog,
    positive_int,
    progress_enabled,
    seconds,
)
from ._paths import certificate_path

_FAMILIES = ("uniform-cube", "laplace", "gaussian-mixture", "gaussian", "dirac")

#: the family options and the families that read them (an option without its family is an error)
_FAMILY_OPTIONS = {"radii": ("uniform-cube",), "scales": ("laplace",), "separations": ("gaussian-mixture",),
                   "variance": ("gaussian-mixture", "gaussian"), "points": ("dirac", "gaussian"),
                   "dim": _FAMILIES}



def register(sub: Any) -> None:
    p = sub.add_parser(
        "decide",
        help="decide weak/strong independence of CGFs modulo affine functions",
        description="Decide whether the CGFs are linearly independent modulo affine functions (seed 003 Def. 6), "
        "with a certificate. With no PATH and no --family: the seed's examples (seed 003 section 3.3).",
        epilog=exit_epilog("decide"),
    )
    p.add_argument("path", nargs="?",
                   help="token file: .npy (n, N, d) or .npz (sample_0, sample_1, ... or tokens); repeated tokens of "
                   "a sample are one atom with their mass")
    p.add_argument("--family", choices=_FAMILIES,
                   help="a closed-form family instead of a token file (its parameters: --radii, --scales, "
                   "--separations, --points, --variance)")
    p.add_argument("--radii", help="uniform-cube: radii r_i > 0, comma separated (exact decimals or fractions)")
    p.add_argument("--scales", help="laplace: covariances s_i * I, comma separated")
    p.add_argument("--separations", help="gaussian-mixture: m_i = sep_i * e_1, comma separated")
    p.add_argument("--variance", default=None,
                   help="gaussian-mixture, gaussian: covariance variance * I (default 1)")
    p.add_argument("--points", help="dirac: atoms; gaussian: means. Semicolon-separated vectors, e.g. '0,0;1,2' "
                   "(their length is the dimension)")
    p.add_argument("--dim", type=positive_int, default=None,
                   help="dimension d for --family (default: the length of the --points vectors, else 1)")
    p.add_argument("--property", choices=("weak", "strong"), default="weak",
                   help="weak: independence modulo affine functions on R^d; strong: along one direction w "
                   "(seed 003 Def. 6; default weak)")
    p.add_argument("--direction", help="direction w for the strong property, comma separated (default: searched)")
    p.add_argument("--method", choices=("auto", "exact", "interval", "float"), default="auto",
                   help="engine: exact (rational identities and minors), interval (Arb ball bounds, precision "
                   "raised up to --digits), float (the same Arb ball bounds at 53 bits only: a rigorous certificate "
                   "when double precision resolves the truncation, else inconclusive), auto (cheapest certified "
                   "first; default auto). Every engine proves dependence only by an exact identity")
    p.add_argument("--digits", type=int, default=None,
                   help="highest working precision in decimal digits, at least 16 (default: about 1233, i.e. "
                   "4096 bits, the top of the precision ladder)")
    p.add_argument("--max-seconds", "--timeout", dest="timeout", type=seconds, default=DEFAULT_TIMEOUT,
                   metavar="SECONDS", help=f"time budget of each decision (default {DEFAULT_TIMEOUT:g}; --timeout is "
                   "the same option); when it runs out the verdict is inconclusive and says what was tried")
    p.add_argument("--certificate-out", metavar="FILE.json", default=None, type=certificate_path,
                   help="write the inputs and the certificate to FILE.json, re-checked by `python -m ntkcheck.verify "
                   "FILE.json` (a token file or --family)")
    add_progress_options(p, "the seconds spent against --max-seconds")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema ntkcheck/decide/1)")
    p.set_defaults(func=run)
    allow_negative_values(p)  # --radii -1,2 reaches the radius check


def _numbers(text: str | None, name: str) -> list[Fraction]:
    if not text:
        raise InputError(f"--{name} is required for this family")
    try:
        vals = [Fraction(v.strip()) for v in text.split(",") if v.strip()]
    except (ValueError, ZeroDivisionError):
        raise InputError(f"--{name}: expected comma-separated numbers, got {text!r}") from None
    if not vals:
        raise InputError(f"--{name}: no numbers given")
    return vals


def _check_family_options(args: argparse.Namespace) -> None:
    """``--radii 1,2`` without ``--family uniform-cube`` (or with another family) is an error."""
    for opt, families in _FAMILY_OPTIONS.items():
        if getattr(args, opt) is None:
            continue
        flag = f"--{opt}"
        if args.family is None:
            raise InputError(f"{flag} needs --family ({' or '.join(families)})")
        if args.family not in families:
            raise InputError(f"{flag} does not apply to --family {args.family} (it is for {', '.join(families)})")


def _points(args: argparse.Namespace) -> list[list[Fraction]]:
    if not args.points:
        raise InputError("--points is required for this family")
    return [_numbers(v, "points") for v in args.points.split(";") if v.strip()]


def _family_measures(args: argparse.Namespace, dim: int | None = None) -> list[Family]:
    vecs = _points(args) if args.family in ("gaussian", "dirac") else None
    d = dim if dim is not None else args.dim if args.dim is not None else (len(vecs[0]) if vecs else 1)
    if d < 1:
        raise InputError(f"--dim must be at least 1, got {d}")
    eye = lambda s: [[s if i == j else 0 for j in range(d)] for i in range(d)]  # noqa: E731
    if args.family == "uniform-cube":
        return [UniformCube(r, d) for r in _numbers(args.radii, "radii")]
    if args.family == "laplace":
        return [Laplace(eye(s)) for s in _numbers(args.scales, "scales")]
    var = _numbers(args.variance or "1", "variance")[0]
    if vecs is not None:
        what = "--dim is" if args.dim is not None else "vector 0 has"
        for k, v in enumerate(vecs):
            if dim is not None:  # a smaller dimension, to time the construction (_check_family_cost)
                v = (v + [Fraction(0)] * d)[:d]
                vecs[k] = v
            if len(v) != d:
                raise InputError(f"--points: vector {k} has {len(v)} entries, {what} {d}")
        return [Dirac(v) for v in vecs] if args.family == "dirac" else [Gaussian(v, eye(var)) for v in vecs]
    return [GaussianMixture2([m] + [0] * (d - 1), eye(var)) for m in _numbers(args.separations, "separations")]


#: the covariance families hold d x d exact entries (a Fraction each, ~100 bytes) and float64 work arrays
_COVARIANCE_FAMILIES = ("laplace", "gaussian", "gaussian-mixture")
_BYTES_PER_ENTRY = 136
#: dimension at which the construction of a covariance family is timed to predict a larger one
_TIMED_DIM = 96


def _check_family_cost(args: argparse.Namespace, budget: Budget) -> None:
    """Refuse ``--dim`` when the covariance families would not fit in memory or in ``--timeout``.

    Memory: :data:`_BYTES_PER_ENTRY` per exact entry. Time: the construction at
    :data:`_TIMED_DIM` is timed and scaled by ``(d / 96)^2``, the number of exact entries (their
    conversion and checks dominate the float64 eigendecomposition up to the sizes that fit in
    memory; the fixed costs of the small construction make it an over-estimate, by about 3x
    at d = 600 here).
    """
    d = args.dim
    if args.family not in _COVARIANCE_FAMILIES or d is None or d <= _TIMED_DIM:
        return
    count = len(_points(args)) if args.family == "gaussian" else len(
        _numbers(args.scales if args.family == "laplace" else args.separations,
                 "scales" if args.family == "laplace" else "separations"))
    require_memory(count * d * d * _BYTES_PER_ENTRY, f"{count} covariance matrices of {d} x {d} exact entries",
                   "--dim")
    t0 = time.perf_counter()
    _family_measures(args, dim=_TIMED_DIM)
    estimate = (time.perf_counter() - t0) * (d / _TIMED_DIM) ** 2
    if estimate > budget.remaining():
        raise InputError(f"--dim {d}: building {count} covariance matrices of {d} x {d} exact entries would take about "
                         f"{estimate:.0f} s, beyond the time budget (--timeout {args.timeout:g}); lower --dim or raise "
                         "--timeout")


def _max_bits(digits: int | None) -> int:
    if digits is None:
        return 4096
    if digits < 16:
        raise InputError(f"--digits {digits}: too low to mean anything; use at least 16")
    return int(digits * 3.3219280948873626) + 1


def _code(verdict: str) -> int:
    return {"independent": EXIT_OK, "dependent": EXIT_NEGATIVE}.get(verdict, EXIT_INCONCLUSIVE)


def _examples(args: argparse.Namespace, bits: int) -> int:
    rows = []
    for ex in seed_examples():
        dec = _decision.decide(list(ex.measures), ex.property, method=args.method, max_bits=bits, timeout=args.timeout)
        rows.append((ex, dec))
    bad = [ex.name for ex, dec in rows if dec.verdict.value not in (ex.expected, "inconclusive")]
    code = (EXIT_NEGATIVE if bad else
            EXIT_INCONCLUSIVE if any(dec.verdict.value == "inconclusive" for _, dec in rows) else EXIT_OK)
    if args.json:
        emit_json("decide", {"examples": [{**ex.to_dict(), **dec.to_dict(), "agrees": dec.verdict.value == ex.expected}
                                          for ex, dec in rows], "exit_code": code})
        return code
    w = max(len(ex.name) for ex, _ in rows)
    lines = [f"{'example':<{w}} {'prop':<6} {'expected':<11} {'verdict':<12} method"]
    for ex, dec in rows:
        mark = "" if dec.verdict.value in (ex.expected, "inconclusive") else "  DISAGREES"
        lines.append(f"{ex.name:<{w}} {ex.property:<6} {ex.expected:<11} {dec.verdict.value:<12} {dec.method}{mark}")
        null = "" if dec.null_vector is None else f", c = {exact_vector(dec.null_vector)}"
        lines.append(f"    {ex.reference}; certificate {dec.certificate.kind} ({dec.precision}){null}")
    lines.append("")
    lines.append(f"{len(rows)} examples of seed 003 section 3.3: "
                 + (f"DISAGREES with the seed: {', '.join(bad)}" if bad else "every certified verdict agrees with the seed"))
    print(fit(lines))
    return code


def run(args: argparse.Namespace) -> int:
    _check_family_options(args)
    direction = None
    if args.direction:
        direction = _numbers(args.direction, "direction")
    bits = _max_bits(args.digits)
    if args.path and args.family:
        raise InputError("give either a token file or --family, not both")
    if args.path is None and args.family is None:
        if direction is not None or args.property != "weak" or args.certificate_out:
            raise InputError("--property, --direction and --certificate-out need a token file or --family")
        return _examples(args, bits)
    budget = Budget(args.timeout)  # the construction of the measures counts against --timeout too
    if args.family:
        _check_family_cost(args, budget)
    measures: list[Any] = _family_measures(args) if args.family else load_laws(args.path)
    with ClockBar(budget.remaining(), desc="decide", enabled=progress_enabled(args)):
        dec = _decision.decide(measures, args.property, direction=direction, method=args.method, max_bits=bits,
                               timeout=max(budget.remaining(), 1e-9))
    code = _code(dec.verdict.value)
    if args.certificate_out:
        from ..certificate_files import decide_certificate, write_certificate

        write_certificate(args.certificate_out, decide_certificate(dec, measures, source=args.path))
    if args.json:
        emit_json("decide", {**dec.to_dict(), "exit_code": code, "certificate_out": args.certificate_out})
        return code
    given_w = f", at the direction w = {exact_vector(dec.direction)} given" if direction is not None else ""
    lines = [f"{len(measures)} measures in dimension {dec.dim}, {args.property} property{given_w}",
             decision_sentence(dec),
             f"verdict    {dec.verdict.value}", f"method     {dec.method}", f"precision  {dec.precision}",
             f"margin     {'-' if dec.margin is None else f'{dec.margin:.3e}'}"]
    if dec.direction is not None:
        lines.append(f"direction  {exact_vector(dec.direction)}")
    if dec.null_vector is not None:
        lines.append(f"null vector c = {exact_vector(dec.null_vector)}")
    if dec.affine is not None:
        lines.append(f"affine part alpha = {exact_vector(dec.affine[0])}, beta = {dec.affine[1]}")
    cert = dec.certificate.to_dict()
    statement = str(cert.get("statement", cert.get("suggestion", "")))
    if len(statement) > 300:  # statements may embed a whole vector: the full text is in --json
        statement = statement[:280] + " ... (full text: --json)"
    lines.append(f"certificate {cert.get('kind')}: {statement}")
    lines += [f"note: {note}" for note in dec.notes]
    if args.certificate_out:
        lines.append(f"certificate written to {args.certificate_out} (check: python -m ntkcheck.verify FILE)")
    print(fit(lines))
    return code
