"""``ntkcheck decide``: the independence verdict for a token file, a family, or the seed examples."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from typing import Any

from ..independence import decision as _decision  # decide looked up at call time (mutation tests patch it)
from ..independence.decision import DEFAULT_TIMEOUT
from ..independence.results import Decision, format_vector
from ..errors import InputError
from ..independence.examples import seed_examples
from ..cgf import Dirac, Family, Gaussian, GaussianMixture2, Laplace, UniformCube
from ..io.files import load_laws
from ._args import allow_negative_values, seconds

_FAMILIES = ("uniform-cube", "laplace", "gaussian-mixture", "gaussian", "dirac")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "decide",
        help="decide weak/strong independence of CGFs modulo affine functions",
        description="Decide whether the CGFs are linearly independent modulo affine functions (seed 003 Def. 6), "
        "with a certificate. With no PATH and no --family: the seed's examples (seed 003 section 3.3).",
    )
    p.add_argument("path", nargs="?", help="token file: .npy (n, N, d) or .npz (sample_0, sample_1, ... or tokens)")
    p.add_argument("--family", choices=_FAMILIES, help="a closed-form family instead of a token file")
    p.add_argument("--radii", help="uniform-cube: radii r_i, comma separated (exact decimals)")
    p.add_argument("--scales", help="laplace: covariances s_i * I, comma separated")
    p.add_argument("--separations", help="gaussian-mixture: m_i = sep_i * e_1, comma separated")
    p.add_argument("--variance", default="1", help="gaussian-mixture, gaussian: covariance variance * I (default 1)")
    p.add_argument("--points", help="dirac: atoms; gaussian: means. Semicolon-separated vectors, e.g. '0,0;1,2'")
    p.add_argument("--dim", type=int, default=1, help="dimension d for --family (default 1)")
    p.add_argument("--property", choices=("weak", "strong"), default="weak")
    p.add_argument("--direction", help="direction w for the strong property, comma separated")
    p.add_argument("--method", choices=("auto", "exact", "interval", "float"), default="auto")
    p.add_argument("--digits", type=int, default=None, help="highest working precision in decimal digits (ladder cap)")
    p.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"time budget of each decision (default {DEFAULT_TIMEOUT:g}); when it runs out the verdict is "
                   "inconclusive and says what was tried")
    p.add_argument("--json", action="store_true", help="print one JSON object")
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


def _family_measures(args: argparse.Namespace) -> list[Family]:
    d = args.dim
    if d < 1:
        raise InputError(f"--dim must be at least 1, got {d}")
    eye = lambda s: [[s if i == j else 0 for j in range(d)] for i in range(d)]  # noqa: E731
    if args.family == "uniform-cube":
        return [UniformCube(r, d) for r in _numbers(args.radii, "radii")]
    if args.family == "laplace":
        return [Laplace(eye(s)) for s in _numbers(args.scales, "scales")]
    var = _numbers(args.variance, "variance")[0]
    if args.family in ("gaussian", "dirac"):
        if not args.points:
            raise InputError("--points is required for this family")
        vecs = [_numbers(v, "points") for v in args.points.split(";") if v.strip()]
        for k, v in enumerate(vecs):
            if len(v) != d:
                raise InputError(f"--points: vector {k} has {len(v)} entries, --dim is {d}")
        return [Dirac(v) for v in vecs] if args.family == "dirac" else [Gaussian(v, eye(var)) for v in vecs]
    return [GaussianMixture2([m] + [0] * (d - 1), eye(var)) for m in _numbers(args.separations, "separations")]


def _max_bits(digits: int | None) -> int:
    if digits is None:
        return 4096
    if digits < 16:
        raise InputError(f"--digits {digits}: too low to mean anything; use at least 16")
    return int(digits * 3.3219280948873626) + 1


def _row(d: Decision) -> str:
    null = "" if d.null_vector is None else " c=(" + ", ".join(str(v) for v in d.null_vector) + ")"
    margin = "-" if d.margin is None else f"{d.margin:.1e}"
    return f"{d.verdict.value:13s} {d.method:14s} {d.precision:9s} {margin:9s} {d.certificate.kind}{null}"


def run(args: argparse.Namespace) -> int:
    direction = None
    if args.direction:
        direction = _numbers(args.direction, "direction")
    bits = _max_bits(args.digits)
    if args.path and args.family:
        raise InputError("give either a token file or --family, not both")
    if args.path is None and args.family is None:
        rows = []
        for ex in seed_examples():
            dec = _decision.decide(list(ex.measures), ex.property, method=args.method, max_bits=bits, timeout=args.timeout)
            rows.append((ex, dec))
        if args.json:
            print(json.dumps({"examples": [{**ex.to_dict(), **dec.to_dict(), "agrees": dec.verdict.value == ex.expected} for ex, dec in rows]}))
        else:
            print(f"{'example':48s} {'reference':32s} {'prop':6s} {'expected':12s} {'verdict':13s} {'method':14s} {'precision':9s} {'margin':9s} certificate")
            for ex, dec in rows:
                print(f"{ex.name[:48]:48s} {ex.reference[:32]:32s} {ex.property:6s} {ex.expected:12s} {_row(dec)}")
            bad = [ex.name for ex, dec in rows if dec.verdict.value not in (ex.expected, "inconclusive")]
            if bad:
                print(f"DISAGREES with the seed: {bad}")
        return 1 if any(dec.verdict.value not in (ex.expected, "inconclusive") for ex, dec in rows) else 0
    measures: list[Any] = _family_measures(args) if args.family else load_laws(args.path)
    dec = _decision.decide(measures, args.property, direction=direction, method=args.method, max_bits=bits,
                 timeout=args.timeout)
    if args.json:
        print(json.dumps(dec.to_dict()))
        return 0
    print(f"{len(measures)} measures in dimension {dec.dim}, {args.property} property")
    print(dec.verdict.sentence(args.property))
    print(f"verdict    {dec.verdict.value}\nmethod     {dec.method}\nprecision  {dec.precision}")
    print(f"margin     {'-' if dec.margin is None else f'{dec.margin:.3e}'}")
    if dec.direction is not None:
        print(f"direction  {format_vector(dec.direction)}")
    if dec.null_vector is not None:
        print(f"null vector c = {format_vector(dec.null_vector, head=16)}")
    if dec.affine is not None:
        print(f"affine part alpha = ({', '.join(str(v) for v in dec.affine[0])}), beta = {dec.affine[1]}")
    cert = dec.certificate.to_dict()
    print(f"certificate {cert.get('kind')}: {cert.get('statement', cert.get('suggestion', ''))}")
    for note in dec.notes:
        print(f"note: {note}")
    return 0
