"""``ntkcheck screen [PATH]`` and ``ntkcheck gram [PATH]``: initialisation screening and the NTK Gram.

Both parse, turn the token file into empirical laws once (repeated tokens of a sample
become one atom with their mass), call :func:`ntkcheck.screening.screen` /
:func:`ntkcheck.ntk.gram_matrix.pipeline.gram` (with the dependence structure of
:func:`ntkcheck.ntk.prop8.structure.dependence_structure`), and print a report that fits 100
columns (:mod:`ntkcheck.cli._screen_text`) or (``--json``) exactly one JSON object of
schema ``ntkcheck/screen/1`` / ``ntkcheck/gram/1``. The exit status says whether the Gram
is certified positive (0), certified singular (1) or not certified (3).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .._text import fit
from ..cgf import as_laws
from ..cgf.empirical import require_float_view
from ..errors import InputError
from ..io.files import bundled_path, load_samples
from ..ntk.certificate.useful_rate import DEFAULT_MIN_RELATIVE_LAMBDA
from ..ntk.gram_matrix._sizes import check_gram_range
from ..ntk.prop8.hypotheses import law_support
from ._args import (
    EXIT_INCONCLUSIVE,
    EXIT_NEGATIVE,
    EXIT_OK,
    add_budget_option,
    add_depth_option,
    add_progress_options,
    emit_json,
    exit_epilog,
    nonnegative_float,
    positive_float,
    positive_int,
    seed_int,
)
from ._paths import certificate_path, plot_path
from ._screen_text import gram_lines, heads_json

_PATH_HELP = (".npy (n, N, d) or .npz (sample_0, sample_1, ...) token file (default: the bundled example, "
              "screen_default.npz: 4 random samples and a product triple that makes the Gram singular)")


def _heads_arg(x: str) -> int | str:
    """``--heads``: a positive integer or ``auto``."""
    return "auto" if x == "auto" else positive_int(x)


def _probability(x: str) -> float:
    """``--delta``: a number in (0, 1)."""
    v = positive_float(x)
    if v >= 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability in (0, 1), got {x!r}")
    return v


def _head_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", default=None, help=_PATH_HELP)
    p.add_argument("--heads", type=_heads_arg, default=None,
                   help="number of heads H, or auto (default): start where the Gram's rank bound r + (H - 1) A "
                   "(r: dimension of the span of the atoms, A: of their differences within samples) reaches 4 M, "
                   "and double until the Gram is certified positive, or its kernel is the head law's, or the "
                   "budget is spent")
    p.add_argument("--delta", type=_probability, default=1e-6,
                   help="failure probability of the head-law certificate, over the heads it draws (default 1e-6)")
    p.add_argument("--head-law-seconds", type=nonnegative_float, default=None, metavar="SECONDS",
                   help="time budget of the certificate of the head law's NTK K_rho, lambda_min(K_rho) bounded "
                   "with probability >= 1 - delta (default 20; 0 skips it)")
    p.add_argument("--q-scale", type=nonnegative_float, default=None,
                   help="scale of the Q entries: the standard deviation (--dist gaussian) or half-width "
                   "(--dist uniform) of each entry of Q_h (default 1; 0 puts every head at Q = 0, a law without an "
                   "open set of (Q, b): seed 003 Prop. 8 is then not invoked, and the kernel this proves is reported)")
    p.add_argument("--b-scale", type=nonnegative_float, default=None,
                   help="scale of the b entries, as --q-scale (default 1; 0 puts every head at b = 0: Prop. 8 is not "
                   "invoked, and atoms at the origin, whose feature is then their sample's mean, prove a kernel)")
    p.add_argument("--dist", choices=("gaussian", "uniform"), default=None,
                   help="law of the head entries at initialisation (default gaussian)")
    p.add_argument("--seed", type=seed_int, default=None, help="seed of the head initialisation (default 0)")
    p.add_argument("--heads-file", metavar="FILE.npz", default=None,
                   help="explicit heads: arrays Q (H, d, d) and b (H, d), the score of token x against y being "
                   "<x, Q_h y + b_h>; from a trained layer Q_h = W_K^T W_Q / sqrt(d_h), b_h = W_K^T b_Q / "
                   "sqrt(d_h) (ntkcheck tokens --heads-out writes them); the heads drawn otherwise are then not used, so "
                   "--heads, --q-scale, --b-scale, --dist and --seed are refused with it")
    p.add_argument("--min-relative-lambda", type=_relative, default=DEFAULT_MIN_RELATIVE_LAMBDA, metavar="R",
                   help="smallest certified lambda_min / lambda_max called a useful rate (default "
                   f"{DEFAULT_MIN_RELATIVE_LAMBDA:g}: about 5e11 gradient steps per e-fold, and what a perturbation of "
                   "the data of relative size 1e-6 can change); a Gram certified positive below it exits 3 with the "
                   "near-dependency named; 0 turns the gate off")
    p.add_argument("--certificate-out", metavar="FILE.json", default=None, type=certificate_path,
                   help="write the certificates (the inputs and what a verifier needs) to FILE.json, re-checked by "
                   "`python -m ntkcheck.verify FILE.json`")
    p.add_argument("--spectrum", choices=("extremal", "full"), default="extremal",
                   help="extremal: lambda_min and lambda_max by Cholesky + Lanczos, every eigenvalue only where the "
                   "kernel is counted (lambda_min near the rounding floor); full: every eigenvalue (up to 4096 "
                   "atoms; default extremal, full with --plot)")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema ntkcheck/<command>/1)")
    add_progress_options(p, "Gram features, atoms x heads")
    add_budget_option(p, "screen", "a certificate cut short is 'not certified (time budget spent)' (exit 3); a "
                      "float64 Gram that cannot finish in it is refused with the estimate (exit 2)")


def _relative(x: str) -> float:
    """A number in [0, 1) (argparse ``type`` of ``--min-relative-lambda``)."""
    v = nonnegative_float(x)
    if v >= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {x!r}")
    return v


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "screen",
        help="screen token data at FixUp: CGF verdicts, NTK Gram, cross-check, NTK lambda_0",
        description="Screen token samples at FixUp initialisation (seed 003 Prop. 8, seed 002 Thm. 8.5): "
        "the CGF verdicts, the NTK Gram spectrum and its certificate, the Prop. 8 cross-check and what it "
        "means for training. Without PATH, screens the bundled example dataset.",
        epilog=exit_epilog("screen"),
    )
    _head_options(p)
    add_depth_option(p, "model depth T (the NTK scales by T; default 1)")
    p.add_argument("--plot", metavar="FILE.png", type=plot_path, default=None,
                   help="write the Gram spectrum and CGF plot to this file (.png, .pdf, .svg, ...; .png is added to a "
                   "name without suffix; default: no plot)")
    p.add_argument("--no-certify", action="store_true",
                   help="skip the certificate of the Gram (faster; the exit status is then 3 at best)")
    p.add_argument("--thm85", action="store_true",
                   help="also give the rate of seed 002 Thm. 8.5: lambda_min of the readout-loss NTK with heads "
                   "shared over depth T (T^2 G_r); guaranteed only below the corrected eq. 30 (see ntkcheck flow)")
    p.set_defaults(func=run)

    g = subparsers.add_parser(
        "gram",
        help="the attention NTK Gram at FixUp: lambda_min, lambda_max, condition",
        description="Spectrum of the NTK Gram W^1/2 K W^1/2 = F F^T at FixUp on the samples' distinct atoms "
        "(weights: their masses), the dependence structure (duplicates, translates, products, Diracs) and the "
        "kernel dimension it predicts beside the eigenvalues observed at the rounding floor. Without PATH, "
        "the bundled example dataset.",
        epilog=exit_epilog("gram"),
    )
    _head_options(g)
    cert = g.add_mutually_exclusive_group()
    cert.add_argument("--certify", action="store_true",
                      help="the default, kept for scripts: a rigorous lower bound on lambda_min by the route screen "
                      "takes (a verified Cholesky of the Gram, else a preconditioned float64 bound with proved error "
                      "terms up to M = 4096 distinct atoms, or Arb ball arithmetic up to 256), unless a named "
                      "dependence structure already proves the Gram singular")
    cert.add_argument("--no-certify", action="store_true",
                      help="skip the certificate (faster; a positive Gram is then only seen in float64: exit status 3)")
    g.add_argument("--no-structure", action="store_true",
                   help="skip the dependence structure and the predicted kernel dimension")
    g.set_defaults(func=run_gram)


#: exit status of ``ntkcheck screen`` for each :attr:`ntkcheck.screening.ScreenReport.outcome`
_EXIT = {"disagrees": EXIT_NEGATIVE, "certified positive": EXIT_OK, "certified singular": EXIT_NEGATIVE,
         "certified positive, below a useful rate": EXIT_INCONCLUSIVE,
         "positive in float64 only": EXIT_INCONCLUSIVE, "not certified": EXIT_INCONCLUSIVE}


#: the options that draw heads, with their defaults; none of them applies with --heads-file
_DRAW_DEFAULTS = {"heads": None, "q_scale": 1.0, "b_scale": 1.0, "dist": "gaussian", "seed": 0}


def _resolve_head_options(args: argparse.Namespace) -> None:
    """Refuse drawing options beside ``--heads-file`` (they would be ignored), then fill the defaults."""
    given = [f"--{k.replace('_', '-')}" for k in _DRAW_DEFAULTS if getattr(args, k) is not None]
    if args.heads_file is not None and given:
        raise InputError(f"--heads-file gives the heads; {', '.join(given)} draw heads and would be ignored: "
                         "give one or the other")
    for k, v in _DRAW_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)


def _path(args: argparse.Namespace) -> tuple[Any, str]:
    if args.path is not None:
        return args.path, str(args.path)
    return bundled_path("screen_default.npz"), "the bundled example"


def _heads_for(args: argparse.Namespace, laws: list) -> Any:
    """The heads of ``--heads-file``, else the count of ``--heads`` (or ``"auto"``)."""
    from ..screening import load_heads

    d = laws[0].dim
    if args.heads_file is not None:
        h = load_heads(args.heads_file)
        if h.dim != d:
            raise InputError(f"{args.heads_file}: heads have dimension {h.dim}, the tokens have dimension {d}")
        return h
    return args.heads


def run(args: argparse.Namespace) -> int:
    from ..screening import BUNDLED_DATA, plot_report, screen
    from ._args import progress_enabled

    _resolve_head_options(args)
    path, label = _path(args)
    samples = as_laws(load_samples(path))
    if not (math.isfinite(args.depth_T) and args.depth_T > 0):
        raise InputError(f"--depth-t: expected a positive number, got {args.depth_T}")
    # explicit heads from a file; otherwise let screen() draw them so the report names the init spec
    heads = _heads_for(args, samples)
    report = screen(samples, heads=heads, q_scale=args.q_scale, b_scale=args.b_scale, dist=args.dist, seed=args.seed,
                    depth_T=args.depth_T, certify=not args.no_certify, progress=progress_enabled(args),
                    source=BUNDLED_DATA if args.path is None else None, min_relative_lambda=args.min_relative_lambda,
                    delta=args.delta, head_law_seconds=args.head_law_seconds, time_budget=args.max_seconds,
                    spectrum="full" if args.plot else args.spectrum)
    if args.certificate_out:
        from ..certificate_files import screen_certificate, write_certificate

        write_certificate(args.certificate_out, screen_certificate(report, samples, source=path))
    if args.plot:
        plot_report(report, samples, args.plot)
    thm85 = _thm85(args, samples, report.head_search.heads) if args.thm85 else None
    code = _EXIT[report.outcome]
    if args.json:
        d = report.to_dict()  # the API's dict: the same keys, the same schema
        d["heads"] = heads_json(args, report.gram.heads)
        d["path"] = str(path)
        d["plot"] = args.plot
        d["thm85"] = thm85
        d["certificate_out"] = args.certificate_out
        emit_json("screen", d)
        return code
    extra = [] if thm85 is None else [
        f"Thm. 8.5 rate:        lambda_0 = T^2 lambda_min(G_r) = {thm85['lambda_0']:.4g}, Lambda = "
        f"{thm85['lambda_max_0']:.4g}  (readout loss, heads shared over depth T = {thm85['depth_T']:g})",
        "  guaranteed only when the initial loss is below lambda_0^4 / (16 L_K^2 (2 Lambda + lambda_0)) with a "
        "certified L_K (ntkcheck flow certifies it for given targets)"]
    if args.plot:
        extra.append(f"plot written to {args.plot}")
    if args.certificate_out:
        extra.append(f"certificates written to {args.certificate_out} (check: python -m ntkcheck.verify FILE)")
    print(report.table(title=f"ntkcheck screen: {label}", extra=tuple(extra)))
    return code


def _thm85(args: argparse.Namespace, laws: list, h: Any) -> dict[str, Any]:
    """Seed 002 Thm. 8.5's lambda_0 and Lambda at FixUp for the screen's heads (ntkcheck.convergence.lipschitz)."""
    from ..convergence.lipschitz import readout_ntk_fixup

    ev = readout_ntk_fixup(laws, h.Q, h.b, T=args.depth_T)
    return {"lambda_0": float(ev[0]), "lambda_max_0": float(ev[-1]), "loss": "readout", "heads": "shared over depth",
            "depth_T": float(args.depth_T),
            "caveat": "eq. 31 rate lambda_0 (the loss decays at 2 lambda_0 near FixUp); guaranteed only when the initial "
                      "loss is below lambda_0^4 / (16 L_K^2 (2 Lambda + lambda_0)) with a certified L_K: ntkcheck flow "
                      "reports that certificate for given targets"}


def _gram_conclusion(res: Any, st: Any, min_relative_lambda: float, sup: Any = None, kernel: Any = None) -> str:
    """What ``ntkcheck gram`` concludes: the rules of ``screen`` without the CGF decision."""
    from ..ntk.certificate.useful_rate import useful_rate
    from ..ntk.heads.search import proved_by_rank

    if res.certified_positive:
        return ("certified positive" if useful_rate(res, min_relative_lambda)
                else "certified positive, below a useful rate")
    if res.status == "singular" or (sup is not None and sup.singular) or proved_by_rank(kernel, res):
        return "proved singular"
    if st is not None and st.predicted_kernel > 0 and not res.positive:
        return "singular by a named structure"
    return "positive in float64 only" if res.positive else "not certified"


_GRAM_EXIT = {"certified positive": EXIT_OK, "singular by a named structure": EXIT_NEGATIVE,
              "proved singular": EXIT_NEGATIVE}


def run_gram(args: argparse.Namespace) -> int:
    from ..ntk.certificate.useful_rate import slow_mode
    from ..ntk.gram_matrix.features import _features
    from ..ntk.heads.search import search_heads
    from ..ntk.prop8.crosscheck import KernelComparison, subspace_residual
    from ..ntk.prop8.structure import dependence_structure
    from ..screening import CERTIFY_MAX_BITS
    from ._args import progress_enabled

    _resolve_head_options(args)
    path, label = _path(args)
    laws = as_laws(load_samples(path))
    require_float_view(laws, "ntkcheck gram")
    check_gram_range(laws)  # before the dependence structure's moments overflow: no warning ahead of the refusal
    st = None if args.no_structure else dependence_structure(laws)
    given = _heads_for(args, laws)
    sup = law_support(laws, q_scale=args.q_scale, b_scale=args.b_scale, dist=args.dist,
                      heads=None if isinstance(given, (int, str)) or given is None else given)
    search = search_heads(laws, given, structure=st, q_scale=args.q_scale, b_scale=args.b_scale,
                          dist=args.dist, seed=args.seed, certify=not args.no_certify,
                          max_bits=CERTIFY_MAX_BITS, progress=progress_enabled(args),
                          spectrum=args.spectrum, law_kernel=sup.kernel.dimension if sup.singular else 0)
    heads, res = search.heads, search.gram
    hl = _head_law(args, laws, search, st, sup)
    kc = None
    if st is not None:
        sub = (None if st.kernel_basis is None else
               subspace_residual(_features(laws, heads), st.kernel_basis, math.sqrt(res.lambda_max)))
        kc = KernelComparison.of(st, res, sub, search.kernel)
    conclusion = _gram_conclusion(res, st, args.min_relative_lambda, sup, search.kernel)
    slow = slow_mode(laws, heads) if conclusion == "certified positive, below a useful rate" else None
    code = _GRAM_EXIT.get(conclusion, EXIT_INCONCLUSIVE)
    if args.certificate_out:
        from ..certificate_files import gram_certificate_record, write_certificate

        write_certificate(args.certificate_out, gram_certificate_record(res, laws, heads, path, verb="gram"))
    if args.json:
        from ..gram_report import GramReport

        outcome = {"exit_code": code, "conclusion": conclusion, "min_relative_lambda": args.min_relative_lambda,
                   "slow_mode": None if slow is None else slow.to_dict()}
        # "heads" stays the count H, as in screen's "gram"; "init" describes them
        d = GramReport(res, heads_json(args, res.heads), outcome, st, kc, hl, search, sup).to_dict()
        d["path"] = str(path)
        d["certificate_out"] = args.certificate_out
        emit_json("gram", d)
        return code
    lines = gram_lines(res, st, kc, label)
    lines.insert(3, f"  head count          {search.sentence()}")
    if not sup.open_set:
        lines.append(f"  head law support    {sup.sentence()}")
    lines.append(f"  conclusion          {conclusion}" + (f" (relative {args.min_relative_lambda:g} required)"
                                                          if "below" in conclusion else ""))
    if slow is not None:
        lines.append(f"  near-dependency     {slow.sentence()}")
    if args.certificate_out:
        lines.append(f"  certificates        written to {args.certificate_out} (python -m ntkcheck.verify FILE)")
    print(fit(lines + ([] if hl is None else hl.report_lines())))
    return code


def _head_law(args: argparse.Namespace, laws: list, search: Any, st: Any, sup: Any) -> Any:
    """The certificate of the head law's NTK for ``gram`` (None with --head-law-seconds 0 or a heads file;
    exactly 0 without drawing where the law's kernel is proved, :mod:`ntkcheck.ntk.prop8.hypotheses`)."""
    from ..ntk.heads import law as head_law

    seconds = head_law.DEFAULT_SECONDS if args.head_law_seconds is None else args.head_law_seconds
    if not seconds or args.heads_file is not None:
        return None
    if sup.singular:
        return head_law.HeadLawBound("singular", args.delta, 0.0, 0.0, detail=sup.kernel.short())
    g = search.gram
    return head_law.head_law_bound(laws, q_scale=args.q_scale, b_scale=args.b_scale, dist=args.dist, seed=args.seed,
                                   delta=args.delta, seconds=seconds, pilot=g.lambda_min if g.positive else None,
                                   structure=st, span=search.span)
