"""``ntkcheck flow [PATH]``: gradient flow from FixUp against seed 002 Thm. 8.5.

Parses, calls :func:`ntkcheck.convergence.local.local_convergence` (or, with ``--experiment
plateau``, :func:`ntkcheck.dynamics.plateau.kernel_plateau`), prints a summary or (``--json``)
exactly one JSON object, and optionally plots the run. Every run ends: at the flow time,
at ``--target-loss``, or after ``--max-seconds``; warnings of the run are printed as one
line each on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Iterator
from typing import Any

from .._text import fit
from ..errors import InputError
from ._args import (
    EXIT_NEGATIVE,
    EXIT_OK,
    add_depth_option,
    add_progress_options,
    emit_json,
    exit_epilog,
    nonnegative_int,
    positive_float,
    positive_int,
    seed_int,
)
from ._flow_budget import integration_budget
from ._paths import plot_path

#: default wall-clock budget of one ``ntkcheck flow`` run (seconds)
MAX_SECONDS = 50.0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "flow",
        help="train deep attention by gradient flow from FixUp; compare with Thm. 8.5 (rate, displacement)",
        description="Gradient flow d theta_h/ds = -H grad Loss from FixUp with targets y = z0 + eps r; "
        "reports lambda_0 of the NTK, the measured rate min_s -log(L(s)/L(0))/s (seed 002 eq. 31: >= lambda_0), "
        "the displacement against the Thm. 8.5 bound (corrected constants), and whether the corrected eq. 30 "
        "holds with a certified L_K (then the guaranteed rate and radius). Without PATH: the first "
        "four samples of the bundled screen_default.npz.",
        epilog=exit_epilog("flow"),
    )
    p.add_argument("path", nargs="?", default=None,
                   help=".npy (n, N, d) or .npz (sample_0, ...) token file (default: the first four samples of the "
                   "bundled screen_default.npz)")
    p.add_argument("--samples", default=None, help="comma-separated sample indices to use (default: all; bundled: 0,1,2,3)")
    p.add_argument("--heads", type=positive_int, default=None, help="heads per layer H (default 16)")
    p.add_argument("--heads-file", metavar="FILE.npz", default=None,
                   help="start from these heads (arrays Q (H, d, d), b (H, d), read exactly; e.g. from ntkcheck heads "
                   "or tokens --heads-out) at FixUp (V = 0) instead of drawn ones; not with --heads, --q-scale, "
                   "--b-scale, --per-layer")
    p.add_argument("--targets", metavar="FILE", default=None,
                   help="readout targets y, one row per sample (n, d) (.npy, .npz with one array, .safetensors, .pt): "
                   "the flow fits them instead of y = z0 + eps r; not with --eps or --loss tokens")
    p.add_argument("--layers", type=positive_int, default=4, help="Euler layers L (default 4)")
    add_depth_option(p, "depth horizon T (default 1)")
    p.add_argument("--per-layer", action="store_true", help="one head set per layer (default: shared over depth)")
    p.add_argument("--loss", choices=("readout", "tokens"), default=None,
                   help="readout: (1/2) sum_i |y_i - mean(mu_T^i)|^2 (seed 002, default); tokens: per-token targets")
    p.add_argument("--eps", type=positive_float, default=None, help="target offset y = z0 + eps r (default 0.01)")
    p.add_argument("--time", type=positive_float, default=None,
                   help="flow time (default: 4 decades of the slowest linearised mode, 4 ln10 / (2 lambda_0); "
                   "for a singular NTK, of the slowest mode above 1e-10 Lambda)")
    p.add_argument("--q-scale", type=positive_float, default=None,
                   help="scale of the Q entries: the standard deviation of each (Gaussian) entry of Q_h (default 1)")
    p.add_argument("--b-scale", type=positive_float, default=None,
                   help="scale of the b entries, as --q-scale (default 1)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of heads and target direction (default 0)")
    p.add_argument("--records", type=positive_int, default=20, help="number of records along the run (default 20)")
    p.add_argument("--ntk-records", type=nonnegative_int, default=None, metavar="K",
                   help="compute the NTK spectrum over all parameters at K evenly spaced records, first and last "
                   "included (default 2: start and end; 0: only lambda_0 at FixUp; each costs a dense Jacobian away from FixUp)")
    p.add_argument("--rtol", type=positive_float, default=None, help="integrator rtol (default 1e-7)")
    p.add_argument("--atol", type=positive_float, default=None, help="integrator atol (default 1e-12)")
    p.add_argument("--method", default=None,
                   help="integrator: auto (exponential integrator whose linear part is the NTK, default), "
                   "exponential, or a scipy.integrate solver (RK45, DOP853, ...)")
    p.add_argument("--step", type=positive_float, default=None,
                   help="explicit gradient descent with this step instead of an integrator (so not with --method, "
                   "--rtol, --atol; refused above the stability limit 2 / Lambda)")
    p.add_argument("--max-seconds", type=positive_float, default=MAX_SECONDS,
                   help=f"wall-clock budget of the run in seconds (default {MAX_SECONDS:g}): the flow stops there "
                   "and says so; raise it for long runs")
    p.add_argument("--target-loss", type=positive_float, default=None,
                   help="stop as soon as the loss is at most this value")
    p.add_argument("--experiment", choices=("local", "plateau"), default="local",
                   help="local: local convergence from FixUp (default); plateau: a residual in the NTK kernel "
                   "(seed 003 Prop. 8 with overlap): its loss plateaus while the range part decays. Without PATH "
                   "the plateau runs on {0,u}, {0,v}, {0,u,v,u+v}")
    p.add_argument("--mix", type=float, default=None,
                   help="plateau: weight of the range part of the residual, in [0, 1) (default 0.5)")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema ntkcheck/flow/1)")
    p.add_argument("--plot", metavar="FILE.png", type=plot_path, default=None,
                   help="plot loss, lambda_min and displacement to this file (.png, .pdf, .svg, ...; .png is added "
                   "to a name without suffix; default: no plot)")
    add_progress_options(p, "flow time")
    p.set_defaults(func=run)


#: options that only one experiment reads (with their defaults), and those that --step replaces
_ONLY = {"local": {"loss": "readout", "ntk_records": 2, "method": "auto", "step": None, "per_layer": False,
                   "target_loss": None, "heads_file": None, "targets": None},
         "plateau": {"mix": 0.5}}
_INTEGRATOR = {"method": "auto", "rtol": 1e-7, "atol": 1e-12}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _resolve_mode_options(args: argparse.Namespace) -> None:
    """Refuse options the chosen run would ignore (one line, exit 2), then fill in the defaults."""
    other = "plateau" if args.experiment == "local" else "local"
    ignored = [_flag(k) for k in _ONLY[other] if getattr(args, k) not in (None, False)]
    if ignored:
        raise InputError(f"{', '.join(ignored)} do(es) not apply to --experiment {args.experiment} (only to "
                         f"--experiment {other}); remove it")
    if args.step is not None:
        both = [_flag(k) for k in _INTEGRATOR if getattr(args, k) is not None]
        if both:
            raise InputError(f"--step runs explicit gradient descent, which has no {', '.join(both)}: give one or "
                             "the other")
    _given_inputs(args)
    for table in (_ONLY["local"], _ONLY["plateau"], _INTEGRATOR, _DRAWN):
        for k, v in table.items():
            if getattr(args, k) is None:
                setattr(args, k, v)


#: what the heads are drawn with, and the target offset, when neither --heads-file nor --targets gives them
_DRAWN = {"heads": 16, "q_scale": 1.0, "b_scale": 1.0, "eps": 1e-2}


def _given_inputs(args: argparse.Namespace) -> None:
    """Refuse the options that --heads-file and --targets replace (one line, exit 2)."""
    pairs = (("heads_file", ("heads", "q_scale", "b_scale", "per_layer")), ("targets", ("eps",)))
    for given, drawn in pairs:
        clash = [_flag(k) for k in drawn if getattr(args, given) is not None and getattr(args, k) not in (None, False)]
        if clash:
            raise InputError(f"{', '.join(clash)} do(es) not apply with {_flag(given)} (it gives what they set); "
                             "give one or the other")
    if args.targets is not None and args.loss == "tokens":
        raise InputError("--targets gives readout targets (one row per sample): not with --loss tokens")


def _params_and_targets(args: argparse.Namespace, samples: list[Any]) -> tuple[Any, Any]:
    """The heads of --heads-file as FixUp parameters (V = 0) and the --targets array (None when not given)."""
    import numpy as np

    params = targets = None
    if args.heads_file is not None:
        from ..dynamics.model import AttentionParams
        from ..io.heads import load_heads

        h = load_heads(args.heads_file)
        d = np.asarray(samples[0]).shape[-1]
        if h.dim != d:
            raise InputError(f"{args.heads_file}: heads of dimension {h.dim}, the tokens have d = {d}")
        params = AttentionParams(np.zeros_like(h.Q), h.Q, h.b)
        args.heads = h.count  # for the time estimate and the report
    if args.targets is not None:
        from ..io.arrays import load_array

        targets = np.asarray(load_array(args.targets, "targets").array, dtype=np.float64)
        if targets.ndim != 2 or targets.shape[0] != len(samples):
            raise InputError(f"{args.targets}: expected one target row per sample used, shape ({len(samples)}, d), "
                             f"got {targets.shape}")
    return params, targets


def _load(args: argparse.Namespace) -> tuple[list[Any], str]:
    import numpy as np

    from ..dynamics import default_samples
    from ..io.files import load_samples

    if args.path is None:
        samples, source = default_samples(args.seed)
        if args.samples is None:
            return samples, source
        from ..io.files import bundled_path

        if bundled_path("screen_default.npz").exists():
            samples, source = load_samples(bundled_path("screen_default.npz")), "bundled screen_default.npz"
    else:
        samples, source = load_samples(args.path), str(args.path)
    rounded = [i for i, s in enumerate(samples) if s.dtype != np.float64]
    if rounded:  # the flow runs in float64: say so rather than round silently
        samples = [np.asarray(s, dtype=np.float64) for s in samples]
        source += (f" (samples {rounded} hold values that are not doubles: rounded to their nearest doubles, "
                   "which the flow and its certificate are about)")
    if args.samples is not None:
        try:
            idx = [int(t) for t in args.samples.split(",") if t.strip()]
        except ValueError:
            raise InputError(f"--samples: expected comma-separated integers, got {args.samples!r}") from None
        bad = [i for i in idx if not 0 <= i < len(samples)]
        if not idx or bad:
            raise InputError(f"--samples: indices must be in 0..{len(samples) - 1}, got {args.samples!r}")
        twice = sorted({i for i in idx if idx.count(i) > 1})
        if twice:  # a sample twice is two equal laws: a dependency the user did not have
            raise InputError(f"--samples: sample {twice[0]} is listed twice ({args.samples!r}); each sample once")
        samples = [samples[i] for i in idx]
        source += f" samples {idx}"
    return samples, source


def run(args: argparse.Namespace) -> int:
    import warnings

    from ..convergence.local import local_convergence
    from ..dynamics.flow import SINGULAR_REL
    from ..errors import NtkcheckWarning

    start = time.perf_counter()
    _resolve_mode_options(args)
    if args.experiment == "plateau":
        return _run_plateau(args, start)
    samples, source = _load(args)
    params, targets = _params_and_targets(args, samples)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NtkcheckWarning)
        res = local_convergence(
            samples, heads=args.heads, layers=args.layers, T=args.depth_T, eps=args.eps, loss=args.loss,
            per_layer=args.per_layer, q_scale=args.q_scale, b_scale=args.b_scale, seed=args.seed, time_end=args.time,
            n_records=args.records, rtol=args.rtol, atol=args.atol, step=args.step,
            progress=args.progress, method=args.method, track_ntk=max(args.ntk_records, 1),
            time_budget=integration_budget(args, samples, start), loss_target=args.target_loss,
            params=params, targets=targets,
        )
    _notes(caught, args)
    singular = res.lambda_0 < SINGULAR_REL * res.lambda_max_0
    if singular:
        print(fit([f"ntkcheck flow: note: the NTK at FixUp is singular (lambda_0 = {res.lambda_0:.3g} < {SINGULAR_REL:g} "
                   f"Lambda = {SINGULAR_REL * res.lambda_max_0:.3g}): seed 002 Thm. 8.5 does not apply and no rate is "
                   f"guaranteed; the flow time {res.time_end:.4g} is set by the slowest resolved mode. Use "
                   "--experiment plateau to follow the part of the residual in the kernel."]), file=sys.stderr)
    if args.plot:
        _plot(res, args.plot)
    code = _exit_code(res)
    if args.json:
        out = res.to_dict()
        out["data"] = source
        out["plot"] = args.plot
        out["experiment"] = "local"
        out["exit_code"] = code
        emit_json("flow", out)
        return code
    with _fitted():
        print(f"data: {source}")
        print(f"model: H={res.heads}, L={res.layers}, T={res.T:g}, {'per-layer' if res.per_layer else 'shared'} heads, "
              f"loss={res.loss_kind}, eps={res.eps:g}, flow time {res.time_end:.4g} ({res.flow.method}, {res.flow.nfev} gradients, "
              f"{res.flow.wall[-1]:.2f} s)")
        print(f"NTK at FixUp: lambda_0 = {res.lambda_0:.6g}, Lambda = {res.lambda_max_0:.6g}"
              + (" (singular: Thm. 8.5 does not apply; see --experiment plateau)" if singular else ""))
        print(f"run: {_stopped(res.flow)}{res.flow.message}")
        print(f"loss: {res.loss_initial:.4e} -> {res.loss_final:.4e}")
        if singular:  # eq. 31 with lambda_0 ~ 0 says nothing: report the measurement only
            print(f"rate: measured {res.rate_measured:.6g} (min_s -log(L(s)/L0)/s); no theorem rate: the NTK is singular "
                  "and the part of the residual in its kernel need not decay")
        else:
            print(f"rate: measured {_measured(res)}, theorem (eq. 31) {res.rate_theorem:.6g}, linearised 2 lambda_0 = "
                  f"{res.rate_linearised:.6g}; eq. 31 {'holds' if res.eq31_holds else 'FAILS'} on the run")
        print(f"displacement: max {res.displacement_max:.4g} <= Thm. 8.5 bound 2 sqrt(2 Lambda + lambda_0) Loss(0)^(1/2) / "
              f"lambda_0 = {res.displacement_bound:.4g}: {'yes' if res.displacement_max <= res.displacement_bound else 'NO'}")
        _print_certificate(res, targets_given=args.targets is not None)
        if args.plot:
            print(f"plot: {args.plot}")
    return code


@contextlib.contextmanager
def _fitted() -> Iterator[None]:
    """Print what the block prints wrapped to 100 columns (:func:`ntkcheck._text.fit`)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield
    text = buf.getvalue()
    if text:
        print(fit(text.rstrip("\n").split("\n")))


def _exit_code(res: Any) -> int:
    """1 when the Thm. 8.5 guarantee is certified but the run contradicts it (the guaranteed rate or
    radius, or eq. 31 when the guaranteed rate implies it); 0 otherwise. Records at the rounding
    floor contradict nothing (``LocalConvergence.loss_floor_rounding``)."""
    cert = res.certificate
    if cert is not None and cert.certified:
        if res.guarantee_holds is False or (cert.eq31_guaranteed and not res.eq31_holds):
            return EXIT_NEGATIVE
    return EXIT_OK


def _print_certificate(res: Any, targets_given: bool = False) -> None:
    """The Thm. 8.5 certificate block (ntkcheck.convergence.guarantee): certified or by how much it misses,
    the certified L_K beside the best ratio found on the same ball, and the check against the run."""
    cert = res.certificate
    if cert is None:
        print("certificate: none (the certified bounds cover heads shared over depth; per-layer heads given)")
        return
    if cert.cut:
        print(fit([f"certificate (Thm. 8.5, sharpened): not certified (time budget spent): {cert.cut}; raise "
                   "--max-seconds for the certificate (the measured rate above is evidence only)"]))
        return
    how = "proved (ball arithmetic)" if cert.spectrum_proved else "float64 only, NOT proved"
    print(f"certificate (Thm. 8.5, sharpened): {'CERTIFIED' if cert.certified else 'not certified'}; lambda_0 >= "
          f"{cert.lambda_0:.6g}, Lambda <= {cert.lambda_max_0:.6g} ({how})")
    if cert.method == "split-region":
        _print_region(res, cert)
    else:
        print(f"  ball D <= {cert.radius:.3g}: Jacobian moves by at most {cert.deviation:.3g}, L_K <= {cert.L_K:.4g} "
              f"(certified); best ratio found {res.lipschitz_lower:.4g} (L_K / found = {res.lipschitz_ratio:.3g})")
    eps_max = (2.0 * cert.threshold) ** 0.5
    within = f"targets with |W^(1/2) (y - z0)| <= {eps_max:.4g}" if targets_given else f"--eps <= {eps_max:.4g}"
    print(f"  certifiable: Loss(0) <= {cert.threshold:.4e} ({within}); Loss(0) / that = "
          f"{cert.excess_factor:.4g} (the corrected eq. 30 alone: Loss(0) <= {cert.threshold_eq30:.3e})")
    if cert.certified:
        verdict = {True: "the run obeys both", False: "the run CONTRADICTS it", None: "not checked"}[res.guarantee_holds]
        print(f"  guaranteed: Loss(s) <= exp(-{cert.rate_guaranteed:.6g} s) Loss(0) (eq. 31 rate {cert.rate_eq31:.6g}"
              f"{'' if cert.eq31_guaranteed else ', not implied'}), displacement <= {cert.displacement_bound:.4g}: "
              f"{verdict}")
    else:
        print(fit([f"  no guarantee: the initial loss is {cert.excess_factor:.3g} times too large "
                   f"(targets {cert.excess_factor ** 0.5:.3g} times too far; the measured rate above is evidence only)"
                   + ("; the split region was not tried: --max-seconds was spent by the run"
                      if getattr(cert, "split_skipped", False) else "")]))


def _print_region(res: Any, cert: Any) -> None:
    """The split region's lines: its radii, the certified coercivity and deviations beside what the
    search found there (ntkcheck.convergence.lipschitz_search.region_search)."""
    sp = cert.split
    found = res.lipschitz_search
    drop = sp.sigma_0 - cert.sigma_low
    print(f"  region |V| <= {cert.radius:.3g}, |(Q, b) moved| <= {cert.radius_psi:.3g} (rho norms): sigma_min(B) >= "
          f"{cert.sigma_low:.4g} (sqrt(lambda_0) - {drop:.3g}), |B_V - B_V0| <= {cert.deviation:.3g}, "
          f"|B_psi| <= {sp.kappa:.3g} |V|, |K - K_0| / r_V <= {cert.L_K:.4g} (certified)")
    if found is not None and hasattr(found, "sigma_min"):
        fd = sp.sigma_0 - found.sigma_min
        ratio = drop / fd if fd > 0 else float("nan")
        print(f"  found there: sigma_min {found.sigma_min:.4g} (drop {fd:.3g}, certified / found {ratio:.3g}), "
              f"|B_V - B_V0| {found.deviation_V:.3g}, |B_psi| / |V| {found.kappa:.3g}, |K - K_0| / r_V "
              f"{found.K_change:.4g} (L_K / found = {res.lipschitz_ratio:.3g})")


def _measured(res: Any) -> str:
    """The measured rate, or why there is none: records at the rounding floor are not used."""
    import math

    floor = f"records at the rounding floor ({res.loss_floor_rounding:.2g}) not used"
    if math.isnan(res.rate_measured):
        return f"none (the loss reached the rounding floor {res.loss_floor_rounding:.2g} by the first record)"
    n = len(res.flow.s) - 1
    return f"{res.rate_measured:.6g} (min_s -log(L(s)/L0)/s{'' if res.rate_records == n else '; ' + floor})"


def _stopped(flow: Any) -> str:
    """Where an early stop happened, and which option to change."""
    name = flow.status.name
    if name == "TIME_BUDGET":
        return f"stopped at s = {flow.s[-1]:.4g} of {flow.time_requested:.4g} by --max-seconds (raise it to go on); "
    if name == "TARGET_LOSS":
        return f"stopped at s = {flow.s[-1]:.4g} of {flow.time_requested:.4g} by --target-loss; "
    return ""


def _notes(caught: list[Any], args: argparse.Namespace) -> None:
    """Warnings of the run as one line each on stderr (not Python's file:line format)."""
    for w in caught:
        msg = str(w.message)
        if "singular" in msg and "NTK" in msg:
            continue  # said once, with the CLI option, by run()
        msg = msg.replace("see kernel_plateau", "see --experiment plateau")
        print(fit([f"ntkcheck flow: warning: {msg}"]), file=sys.stderr)


def _run_plateau(args: argparse.Namespace, start: float) -> int:
    """``--experiment plateau``: :func:`ntkcheck.dynamics.plateau.kernel_plateau` on the data or the overlap example."""
    from ..dynamics.plateau import kernel_plateau

    if not 0 <= args.mix < 1:
        raise InputError(f"--mix: expected a number in [0, 1), got {args.mix!r}")
    if args.path is None and args.samples is None:
        samples, source = None, "the overlap example {0,u}, {0,v}, {0,u,v,u+v} (u=(2,0.5), v=(-1,2))"
    else:
        samples, source = _load(args)
    res = kernel_plateau(samples=samples, heads=args.heads, layers=args.layers, T=args.depth_T, eps=args.eps,
                         mix=args.mix, q_scale=args.q_scale, b_scale=args.b_scale, seed=args.seed, time_end=args.time,
                         n_records=args.records, rtol=args.rtol, atol=args.atol,
                         progress=args.progress, time_budget=integration_budget(args, samples, start))
    if args.plot:
        _plot_plateau(res, args.plot)
    if args.json:
        out = res.to_dict()
        out["data"] = source
        out["plot"] = args.plot
        out["experiment"] = "plateau"
        out["exit_code"] = EXIT_OK
        emit_json("flow", out)
        return EXIT_OK
    with _fitted():
        print(f"data: {source}")
        print(f"model: H={args.heads}, L={args.layers}, T={args.depth_T:g}, shared heads, loss=tokens, eps={args.eps:g}, "
              f"mix={res.mix:g}, flow time {res.time_end:.4g} ({res.flow.method}, {res.flow.nfev} gradients, "
              f"{res.flow.wall[-1]:.2f} s)")
        print(f"run: {_stopped(res.flow)}{res.flow.message}")
        print(f"NTK at FixUp: kernel dimension {res.kernel_dim} (eigenvalues < 1e-10 Lambda; lambda_min = "
              f"{res.lambda_min_0:.3g}), slowest range rate lambda_+ = {res.lambda_plus:.6g}, Lambda = {res.lambda_max_0:.6g}")
        print(f"kernel direction: {'given (seed 003 Prop. 8 adjoint)' if res.kernel_source == 'given' else 'computed (slowest eigenvector of K_0)'}")
        print(f"kernel part of the loss: x{res.kernel_loss_ratio:.6g} over the run (measured rate {res.kernel_rate_measured:.3g}; "
              f"the range's slowest linear rate would give x{res.predicted_ratio:.3g})")
        if res.mix > 0:
            print(f"range part of the loss: x{res.range_loss_ratio:.3g}")
        if args.plot:
            print(f"plot: {args.plot}")
    return EXIT_OK


def _plot_plateau(res: Any, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    s = np.array(res.flow.s)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.semilogy(s, res.kernel_loss, "o-", ms=3, label="kernel part")
    if res.mix > 0:
        ax.semilogy(s, res.range_loss, "s-", ms=3, label="range part")
    ax.semilogy(s, res.kernel_loss[0] * np.exp(-2 * res.lambda_plus * s), ":", label=r"$e^{-2\lambda_+ s}$")
    ax.set_xlabel("flow time s")
    ax.set_ylabel("loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot(res: Any, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = _figure(res)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _figure(res: Any) -> Any:
    """Loss, NTK spectrum and displacement along the run: every panel titled and labelled."""
    import matplotlib.pyplot as plt
    import numpy as np

    s = np.array(res.flow.s)
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].semilogy(s, res.flow.loss, "o-", ms=3, label="measured loss")
    ax[0].semilogy(s, res.loss_initial * np.exp(-res.lambda_0 * s), "--", label=r"$e^{-\lambda_0 s}L(0)$ (eq. 31)")
    ax[0].semilogy(s, res.loss_initial * np.exp(-2 * res.lambda_0 * s), ":", label=r"$e^{-2\lambda_0 s}L(0)$ (linearised)")
    cert = getattr(res, "certificate", None)
    if cert is not None and cert.certified:
        ax[0].semilogy(s, res.loss_initial * np.exp(-cert.rate_guaranteed * s), "-", c="k", lw=1,
                       label=f"guaranteed $e^{{-{cert.rate_guaranteed:.3g} s}}L(0)$ (certified)")
    floor = getattr(res, "loss_floor_rounding", 0.0)
    if floor > 0 and min(res.flow.loss) < 100 * floor:
        ax[0].axhline(floor, ls="-.", c="gray", lw=0.8, label="rounding floor")
    ax[0].set_title("loss along the flow")
    ax[0].set_xlabel("flow time s")
    ax[0].set_ylabel("loss L(s)")
    ax[0].legend()
    lmin = np.array(res.flow.lambda_min)
    if lmin.size and np.any(np.isfinite(lmin)):
        ok = np.isfinite(lmin)  # the NTK is computed at --ntk-records records only
        ax[1].plot(s[ok], lmin[ok], "o-", ms=3, label=r"$\lambda_{\min}$ of the NTK at the record")
    ax[1].axhline(res.lambda_0, ls="--", c="gray", label=r"$\lambda_0$ at initialisation")
    ax[1].set_title(r"NTK $\lambda_{\min}$ along the run")
    ax[1].set_xlabel("flow time s")
    ax[1].set_ylabel(r"$\lambda_{\min}$")
    ax[1].legend()
    ax[2].plot(s, res.flow.displacement, "o-", ms=3, label="measured displacement")
    ax[2].axhline(res.displacement_bound, ls="--", c="r", label="Thm. 8.5 bound (corrected)")
    if cert is not None and cert.certified:
        ax[2].axhline(cert.displacement_bound, ls="-", c="k", lw=1, label="guaranteed radius (certified)")
    ax[2].set_title("head displacement from initialisation")
    ax[2].set_xlabel("flow time s")
    ax[2].set_ylabel(r"$W_2(\rho_s, \rho_0)$")
    ax[2].legend()
    fig.tight_layout()
    return fig
