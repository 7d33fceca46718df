"""The cases of the bad-input suite and the child process that runs them (issue 19 item 5, issue 25
items 3 and 6), shared by ``test_bad_input.py`` (the cases that run: answered, or cut by their own
budget; timed one after another) and ``test_bad_input_refusals.py`` (the refusals, in parallel).

Each case is a command line or an API call that a new user, a red team or a typo produces:
corrupt, truncated, oversized and misnamed files, NaN/inf/huge tokens, empty and mixed
samples, every verb's numeric options at 0, -1, nan, inf and 1e308, negative, zero and huge
counts, wrong types, missing files, directories, a FIFO, output paths that cannot be
written, options that would be silently ignored. For each case :func:`check` asserts

* **no traceback**: stderr holds no ``Traceback``, every stderr line is ntkcheck's own one-line
  format (``ntkcheck VERB: error|warning|note: ...``), and an API call raises an
  :class:`~ntkcheck.errors.NtkcheckError` with a one-line message or returns;
* **a documented exit status** (README, "Exit status"): bad input exits 2, a valid extreme input
  is answered (0, 1 or 3) or refused with its reason (2); never 4 (an internal error) or a crash;
* **no hang**: the case ends within its budget + 5 s (its own ``--timeout`` / ``--max-seconds``,
  else 10 s for a refusal);
* **no allocation past the estimate**: the cases run in a child process under
  ``RLIMIT_AS`` = 4 GiB with ``NTKCHECK_MEMORY_LIMIT=1G``, so an allocation the estimates
  missed fails as ``MemoryError`` (reported as "out of memory", which fails the case) instead
  of taking the machine; the memory cases must be refused by an estimate ("would need about").

The cases run in one child process per test module (``ntkcheck.cli.main`` in-process there, output
captured), which reports one JSON line per case; a case that kills the child is reported as a crash
and the child restarts after it. Mutations the suite was run against: skipping the ``.npy``/``.npz``
header check fails 12 cases (BadZipFile tracebacks; a 72 TiB header and the zip bomb reach
``MemoryError``); skipping the Arb cost estimate fails the 400-sample case (past its budget
+ 5 s). Removing the error boundary itself is caught by ``test_cli_errors.py``: no case here
reaches it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

BAD = frozenset({2})  # refused: one line, exit 2
ANSWER = frozenset({0, 1, 3})  # answered: a verdict, a run, a list
EITHER = frozenset({0, 1, 2, 3})  # a valid extreme input: answered or refused with its reason
DOCUMENTED = frozenset({0, 1, 2, 3})

#: address space of the child (an allocation the estimates missed fails there, not on the machine)
CHILD_ADDRESS_SPACE = 4 << 30
#: what the child's estimates may use (NTKCHECK_MEMORY_LIMIT)
CHILD_MEMORY_LIMIT = "1G"
#: how the refusals by an estimate read (memory; a header larger than its file; the time of a run)
ESTIMATES = ("would need about", "the header claims", "needs at least about")
#: seconds a refusal may take (imports of optional packages included)
REFUSAL_BUDGET = 10.0


@dataclass(frozen=True)
class Case:
    """One input: ``argv`` for ``ntkcheck`` (``{d}`` is the files' directory) or ``api``, the name
    of a function below; the exit statuses allowed; the budget (s); whether it is a memory case."""

    id: str
    argv: tuple[str, ...] = ()
    api: str = ""
    expect: frozenset[int] = BAD
    budget: float = REFUSAL_BUDGET
    memory: bool = False


def cli(id: str, *argv: str, expect: frozenset[int] = BAD, budget: float = REFUSAL_BUDGET,
        memory: bool = False) -> Case:
    return Case(id, tuple(argv), "", expect, budget, memory)


def api(name: str, expect: frozenset[int] = BAD, budget: float = REFUSAL_BUDGET, memory: bool = False) -> Case:
    return Case(f"api:{name}", (), name, expect, budget, memory)


# ------------------------------------------------------------------------------------ files

FILE_CASES = [
    cli("decide-corrupt-npz", "decide", "{d}/corrupt.npz"),
    cli("screen-corrupt-npz", "screen", "{d}/corrupt.npz"),
    cli("gram-corrupt-npz", "gram", "{d}/corrupt.npz"),
    cli("flow-corrupt-npz", "flow", "{d}/corrupt.npz"),
    cli("sweep-corrupt-npz", "sweep", "{d}/corrupt.npz", "--serial"),
    cli("decide-corrupt-npy", "decide", "{d}/corrupt.npy"),
    cli("screen-truncated-npy", "screen", "{d}/truncated.npy"),
    cli("screen-huge-header", "screen", "{d}/huge_header.npy", memory=True),
    cli("decide-huge-header", "decide", "{d}/huge_header.npy", memory=True),
    cli("screen-zip-bomb", "screen", "{d}/bomb.npz", memory=True),
    cli("decide-zip-bomb", "decide", "{d}/bomb.npz", memory=True),
    cli("decide-nan", "decide", "{d}/nan.npy"),
    cli("screen-nan", "screen", "{d}/nan.npy"),
    cli("decide-inf", "decide", "{d}/inf.npy"),
    cli("gram-inf", "gram", "{d}/inf.npy"),
    cli("decide-empty-sample", "decide", "{d}/empty_sample.npz"),
    cli("screen-empty-sample", "screen", "{d}/empty_sample.npz"),
    cli("decide-mixed-dims", "decide", "{d}/mixed_dims.npz"),
    cli("screen-mixed-dims", "screen", "{d}/mixed_dims.npz"),
    cli("decide-ragged-valid", "decide", "{d}/ragged.npz", expect=ANSWER),
    cli("screen-ragged-valid", "screen", "{d}/ragged.npz", "--no-certify", expect=ANSWER),
    cli("decide-gap-keys", "decide", "{d}/gap_keys.npz"),
    cli("decide-wrong-keys", "decide", "{d}/wrong_keys.npz"),
    cli("decide-pickled-objects", "decide", "{d}/objects.npy"),
    cli("decide-strings", "decide", "{d}/strings.npy"),
    cli("decide-bools", "decide", "{d}/bools.npy"),
    cli("decide-complex-tokens", "decide", "{d}/complex.npy"),
    cli("decide-two-d", "decide", "{d}/two_d.npy"),
    cli("decide-scalar", "decide", "{d}/scalar.npy"),
    # int64 beyond 2^53 is read exactly (issue 19): two single Diracs at the same point, dependent (exit 1)
    cli("decide-int-beyond-2-53", "decide", "{d}/int_big.npy", expect=frozenset({1})),
    cli("screen-coordinate-1e308", "screen", "{d}/coord_1e308.npy", expect=EITHER, budget=60),
    cli("decide-coordinate-1e308", "decide", "{d}/coord_1e308.npy", "--timeout", "5", expect=EITHER, budget=5),
    cli("screen-e155-tiny-q", "screen", "{d}/e155.npy", "--q-scale", "1e-160", "--b-scale", "0", expect=EITHER,
        budget=60),
    cli("gram-e155-tiny-q", "gram", "{d}/e155.npy", "--q-scale", "1e-160", "--b-scale", "0", expect=EITHER),
    cli("decide-wrong-suffix", "decide", "{d}/tokens.txt"),
    cli("decide-no-suffix", "decide", "{d}/no_suffix"),
    cli("decide-directory", "decide", "{d}/dir.npz"),
    cli("screen-directory", "screen", "{d}/dir.npz"),
    cli("decide-fifo", "decide", "{d}/fifo.npy"),
    cli("decide-dev-null", "decide", "/dev/null"),
    cli("decide-corrupt-safetensors", "decide", "{d}/corrupt.safetensors"),
    cli("decide-pt", "decide", "{d}/tokens.pt"),
    cli("decide-missing", "decide", "{d}/missing.npz"),
    cli("screen-missing", "screen", "{d}/missing.npy"),
    cli("sweep-missing", "sweep", "{d}/missing.npz", "--serial"),
    cli("decide-csv-valid", "decide", "{d}/good.csv", expect=ANSWER),
    cli("decide-csv-bad-header", "decide", "{d}/bad_header.csv"),
    cli("decide-csv-not-numbers", "decide", "{d}/not_numbers.csv"),
    cli("decide-csv-gap-ids", "decide", "{d}/gap_ids.csv"),
    cli("decide-csv-empty", "decide", "{d}/empty.csv"),
    cli("decide-csv-short-row", "decide", "{d}/short_row.csv"),
    cli("screen-heads-file-valid", "screen", "{d}/good.npz", "--heads-file", "{d}/heads.npz", "--no-certify",
        expect=ANSWER),
    cli("screen-heads-file-dims", "screen", "{d}/good.npz", "--heads-file", "{d}/heads_d2.npz"),
    cli("screen-heads-file-keys", "screen", "{d}/good.npz", "--heads-file", "{d}/heads_keys.npz"),
    cli("screen-heads-file-shape", "screen", "{d}/good.npz", "--heads-file", "{d}/heads_shape.npz"),
    cli("screen-heads-file-nan", "screen", "{d}/good.npz", "--heads-file", "{d}/heads_nan.npz"),
    cli("screen-heads-file-none", "screen", "{d}/good.npz", "--heads-file", "{d}/heads_none.npz"),
    cli("screen-heads-file-corrupt", "screen", "{d}/good.npz", "--heads-file", "{d}/heads_corrupt.npz"),
    cli("gram-heads-file-corrupt", "gram", "{d}/good.npz", "--heads-file", "{d}/heads_corrupt.npz"),
    cli("screen-heads-file-missing", "screen", "{d}/good.npz", "--heads-file", "{d}/missing.npz"),
    cli("screen-heads-file-directory", "screen", "{d}/good.npz", "--heads-file", "{d}/dir.npz"),
    cli("tokens-missing-texts", "tokens", "{d}/missing.txt", "-o", "{d}/out.npz"),
    cli("tokens-blank-texts", "tokens", "{d}/blank.txt", "-o", "{d}/out.npz"),
    cli("tokens-binary-texts", "tokens", "{d}/binary.txt", "-o", "{d}/out.npz"),
    cli("tokens-output-missing-dir", "tokens", "{d}/texts.txt", "-o", "{d}/missing/dir/o.npz"),
    cli("tokens-output-is-dir", "tokens", "{d}/texts.txt", "-o", "{d}/dir.npz"),
    cli("tokens-heads-out-missing-dir", "tokens", "{d}/texts.txt", "-o", "{d}/o.npz", "--heads-out",
        "{d}/missing/h.npz"),
    cli("tokens-model-dir-missing", "tokens", "{d}/texts.txt", "-o", "{d}/o.npz", "--model-dir", "{d}/nomodel"),
    cli("tokens-layer-out-of-range", "tokens", "{d}/texts.txt", "-o", "{d}/o.npz", "--heads-out", "{d}/h.npz",
        "--layer", "99"),
]

# ---------------------------------------------------------------------- numeric options

#: (verb and fixed arguments, option, {value: expected}); every value of 0, -1, nan, inf, 1e308
_FAM = ("decide", "--family", "uniform-cube", "--radii", "1,2")
_SCREEN = ("screen", "{d}/good.npz", "--no-certify")
_GRAM = ("gram", "{d}/good.npz")
#: a flow that runs is cut at 1 s: the cases below test the other option's value, and the budget's
#: contract (the case ends within its budget + 5 s) is the same at 1 s as at 3 s
_FLOW = ("flow", "--max-seconds", "1", "--ntk-records", "0")
_V = ("0", "-1", "nan", "inf", "1e308")


def _grid(base: tuple[str, ...], option: str, outcomes: dict[str, frozenset[int]], budget: float = REFUSAL_BUDGET,
          memory: bool = False) -> list[Case]:
    verb = base[0]
    return [cli(f"{verb}{option}={v}", *base, option, v, expect=outcomes[v], budget=budget, memory=memory)
            for v in _V if v in outcomes]


def _all_bad(*extra: str) -> dict[str, frozenset[int]]:
    out = dict.fromkeys(_V, BAD)
    for v in extra:
        out[v] = EITHER
    return out


NUMERIC_CASES = [
    *_grid(_FAM, "--timeout", {**_all_bad(), "1e308": ANSWER}),
    *_grid(_FAM, "--digits", _all_bad()),
    *_grid(_FAM, "--dim", _all_bad()),
    *_grid(("decide", "--family", "uniform-cube"), "--radii", {**_all_bad(), "1e308": ANSWER}, budget=60),
    # a zero covariance is a Dirac: valid (two Diracs at 0 are the same law: dependent)
    *_grid(("decide", "--family", "laplace"), "--scales", {**_all_bad(), "0": ANSWER, "1e308": ANSWER}, budget=60),
    *_grid(("decide", "--family", "gaussian-mixture"), "--separations",
           {"nan": BAD, "inf": BAD, "0": ANSWER, "-1": ANSWER, "1e308": ANSWER}, budget=60),
    *_grid(("decide", "--family", "gaussian", "--points", "0;1"), "--variance",
           {**_all_bad(), "0": ANSWER, "1e308": ANSWER},
           budget=60),
    *_grid(("decide", "{d}/good.npz", "--property", "strong"), "--direction",
           {"0": BAD, "nan": BAD, "inf": BAD, "-1": BAD}),
    *_grid(_SCREEN, "--heads", {**_all_bad()}),
    *_grid(_SCREEN, "--q-scale", {**_all_bad(), "0": ANSWER, "1e308": EITHER}, budget=60),
    *_grid(_SCREEN, "--b-scale", {**_all_bad(), "0": ANSWER, "1e308": EITHER}, budget=60),
    *_grid(_SCREEN, "--seed", {**_all_bad(), "0": ANSWER}),
    *_grid(_SCREEN, "--depth-t", {**_all_bad(), "1e308": EITHER}, budget=60),
    *_grid(_GRAM, "--heads", _all_bad()),
    *_grid(_GRAM, "--seed", {**_all_bad(), "0": ANSWER}),
    *_grid(_GRAM, "--q-scale", {"-1": BAD, "nan": BAD, "inf": BAD}),
    *_grid(_FLOW, "--heads", _all_bad()),
    *_grid(_FLOW, "--layers", _all_bad()),
    *_grid(_FLOW, "--depth-t", {**_all_bad(), "1e308": EITHER}, budget=8),
    *_grid(_FLOW, "--eps", {**_all_bad(), "1e308": EITHER}, budget=8),
    *_grid(_FLOW, "--time", {**_all_bad(), "1e308": ANSWER}, budget=8),
    *_grid(_FLOW, "--q-scale", {**_all_bad(), "1e308": EITHER}, budget=8),
    *_grid(_FLOW, "--seed", {**_all_bad(), "0": ANSWER}, budget=8),
    *_grid(_FLOW, "--records", _all_bad()),
    *_grid(_FLOW, "--rtol", {**_all_bad(), "1e308": EITHER}, budget=8),
    *_grid(_FLOW, "--step", {**_all_bad(), "1e308": EITHER}, budget=8),
    *_grid(_FLOW, "--max-seconds", {"0": BAD, "-1": BAD, "nan": BAD, "inf": BAD}),
    *_grid(_FLOW, "--target-loss", {"-1": BAD, "nan": BAD, "inf": BAD, "1e308": ANSWER}, budget=8),
    *_grid(("flow", "--experiment", "plateau", "--max-seconds", "3"), "--mix",
           {"-1": BAD, "nan": BAD, "inf": BAD, "1e308": BAD}),
    *_grid(("claims", "--only", "003.prop7"), "--examples", _all_bad()),
    *_grid(("claims", "--list"), "--seed", {"-1": BAD, "nan": BAD, "inf": BAD}),
    *_grid(("experiment", "heads-lln", "--size", "small"), "--seeds", _all_bad()),
    *_grid(("experiment", "heads-lln", "--size", "small"), "--seed", {"-1": BAD, "nan": BAD, "inf": BAD}),
    *_grid(("sweep", "--serial"), "--q-scales", {"-1": BAD, "nan": BAD, "inf": BAD}),
    *_grid(("sweep", "--serial"), "--heads", _all_bad()),
    *_grid(("sweep", "--serial"), "--seeds", {"-1": BAD, "nan": BAD, "inf": BAD}),
    *_grid(("sweep",), "--workers", _all_bad()),
    *_grid(("sweep",), "--threads", _all_bad()),
]

# ------------------------------------------------------------------- counts and options

OPTION_CASES = [
    cli("screen-heads-1e9", "screen", "{d}/good.npz", "--heads", "1000000000", memory=True),
    cli("gram-heads-1e9", "gram", "{d}/good.npz", "--heads", "1000000000", memory=True),
    cli("flow-heads-1e9", "flow", "--heads", "1000000000", memory=True),
    cli("flow-layers-1e9", "flow", "--layers", "1000000000", memory=True),
    cli("flow-layers-1e6", "flow", "--layers", "1000000", memory=True),
    cli("flow-records-1e9", "flow", "--records", "1000000000", memory=True),
    cli("flow-records-1e9-long-budget", "flow", "--records", "1000000000", "--max-seconds", "1e9", memory=True),
    # --max-seconds is the command's budget: 3000 layers take ~1 s a forward pass, 5 s cannot hold a run
    cli("flow-layers-3000-max-seconds-5", "flow", "--layers", "3000", "--max-seconds", "5", "--ntk-records", "0",
        expect=frozenset({0, 2}), budget=5),
    cli("flow-plateau-layers-2000-max-seconds-6", "flow", "--experiment", "plateau", "--layers", "2000",
        "--max-seconds", "6", expect=frozenset({0, 2}), budget=6),
    cli("flow-per-layer-1e7", "flow", "--layers", "10000000", "--per-layer", memory=True),
    cli("decide-laplace-dim-1e5", "decide", "--family", "laplace", "--scales", "1,2", "--dim", "100000", memory=True),
    cli("decide-laplace-dim-1e4", "decide", "--family", "laplace", "--scales", "1,2", "--dim", "10000", memory=True),
    cli("decide-laplace-dim-3000-budget", "decide", "--family", "laplace", "--scales", "1,2", "--dim", "3000",
        "--timeout", "10", expect=frozenset({2, 3}), budget=10),
    # issue 19 item 4: the Arb step of 400 samples cannot be interrupted; its cost is estimated first
    cli("decide-400-samples-interval-timeout-8", "decide", "{d}/many.npy", "--property", "strong", "--method",
        "interval", "--timeout", "8", expect=frozenset({0, 3}), budget=8),
    cli("decide-cube-dim-1e5", "decide", "--family", "uniform-cube", "--radii", "1,2", "--dim", "100000",
        "--timeout", "10", expect=EITHER, budget=10),
    cli("sweep-workers-1e6", "sweep", "--workers", "1000000", memory=True),
    cli("claims-examples-1e9", "claims", "--examples", "1000000000"),
    cli("experiment-seeds-1e9", "experiment", "heads-lln", "--seeds", "1000000000"),
    cli("experiment-seeds-1", "experiment", "heads-lln", "--seeds", "1"),
    cli("decide-digits-15", "decide", *_FAM[1:], "--digits", "15"),
    cli("decide-radii-text", "decide", "--family", "uniform-cube", "--radii", "a,b"),
    cli("decide-radii-empty", "decide", "--family", "uniform-cube", "--radii", ","),
    cli("decide-points-ragged", "decide", "--family", "dirac", "--points", "0,0;1"),
    cli("decide-points-text", "decide", "--family", "dirac", "--points", "x;y"),
    cli("decide-family-without-params", "decide", "--family", "laplace"),
    cli("decide-option-without-family", "decide", "--radii", "1,2"),
    cli("decide-option-other-family", "decide", "--family", "laplace", "--radii", "1,2"),
    cli("decide-file-and-family", "decide", "{d}/good.npz", "--family", "uniform-cube", "--radii", "1,2"),
    cli("decide-direction-wrong-length", "decide", "{d}/good.npz", "--property", "strong", "--direction", "1,2"),
    cli("decide-direction-without-data", "decide", "--direction", "1"),
    cli("decide-bad-method", "decide", *_FAM[1:], "--method", "magic"),
    cli("decide-bad-property", "decide", *_FAM[1:], "--property", "medium"),
    cli("screen-bad-dist", "screen", "--dist", "cauchy"),
    cli("screen-heads-text", "screen", "--heads", "many"),
    cli("screen-heads-fraction", "screen", "--heads", "1.5"),
    cli("screen-seed-fraction", "screen", "--seed", "1.5"),
    cli("screen-thm85-depth-1e200", "screen", "{d}/good.npz", "--thm85", "--depth-t", "1e200", "--no-certify",
        expect=EITHER),
    cli("screen-heads-file-and-heads", "screen", "--heads-file", "{d}/heads.npz", "--heads", "4"),
    cli("screen-heads-file-and-q-scale", "screen", "--heads-file", "{d}/heads.npz", "--q-scale", "2"),
    cli("gram-heads-file-and-seed", "gram", "{d}/good.npz", "--heads-file", "{d}/heads.npz", "--seed", "3"),
    cli("screen-plot-txt", "screen", "{d}/good.npz", "--no-certify", "--plot", "{d}/out.txt"),
    cli("screen-plot-directory", "screen", "{d}/good.npz", "--no-certify", "--plot", "{d}"),
    cli("screen-plot-missing-dir", "screen", "{d}/good.npz", "--no-certify", "--plot", "{d}/missing/p.png"),
    cli("screen-plot-empty", "screen", "{d}/good.npz", "--no-certify", "--plot", ""),
    cli("flow-plot-txt", "flow", "--plot", "{d}/out.txt"),
    cli("experiment-plot-txt", "experiment", "heads-lln", "--plot", "{d}/out.txt"),
    cli("sweep-plot-txt", "sweep", "--serial", "--plot", "{d}/out.txt"),
    cli("flow-ntk-records-minus-1", "flow", "--ntk-records", "-1"),
    cli("flow-ntk-records-1e9", "flow", "--ntk-records", "1000000000", "--max-seconds", "1", expect=ANSWER, budget=1),
    cli("flow-step-1e300", "flow", "--step", "1e300", "--max-seconds", "1", expect=EITHER, budget=1),
    cli("flow-step-1e-300", "flow", "--step", "1e-300", "--max-seconds", "1", expect=EITHER, budget=1),
    cli("flow-depth-1e300", "flow", "--depth-t", "1e300", "--max-seconds", "1", expect=EITHER, budget=1),
    cli("flow-time-1e308", "flow", "--time", "1e308", "--max-seconds", "1", expect=ANSWER, budget=1),
    cli("flow-eps-1e200", "flow", "--eps", "1e200"),
    cli("flow-mix-local", "flow", "--mix", "0.3"),
    cli("flow-step-plateau", "flow", "--experiment", "plateau", "--step", "0.1"),
    cli("flow-per-layer-plateau", "flow", "--experiment", "plateau", "--per-layer"),
    cli("flow-step-and-method", "flow", "--step", "0.1", "--method", "RK45"),
    cli("flow-step-and-rtol", "flow", "--step", "0.1", "--rtol", "1e-3"),
    cli("flow-bad-method", "flow", "--method", "magic", "--max-seconds", "3"),
    cli("flow-samples-out-of-range", "flow", "--samples", "0,99"),
    cli("flow-samples-text", "flow", "--samples", "a,b"),
    cli("flow-samples-empty", "flow", "--samples", ","),
    cli("claims-unknown", "claims", "--only", "no-such-claim"),
    cli("experiment-unknown", "experiment", "no-such-experiment"),
    cli("experiment-no-name", "experiment"),
    cli("experiment-bad-size", "experiment", "heads-lln", "--size", "huge"),
    cli("sweep-tiles-without-one-gram", "sweep", "--serial", "--tiles", "3"),
    cli("sweep-reduce-without-one-gram", "sweep", "--serial", "--reduce", "ordered"),
    cli("sweep-chunk-without-one-gram", "sweep", "--serial", "--chunk-heads", "4"),
    cli("sweep-one-gram-serial", "sweep", "--one-gram", "--serial"),
    cli("sweep-one-gram-many-seeds", "sweep", "--one-gram", "--seeds", "0,1"),
    cli("sweep-q-scales-text", "sweep", "--serial", "--q-scales", "a"),
    cli("sweep-q-scales-empty", "sweep", "--serial", "--q-scales", ","),
    cli("tokens-layer-without-heads-out", "tokens", "{d}/texts.txt", "-o", "{d}/o.npz", "--layer", "2"),
    cli("no-command"),
    cli("unknown-command", "frobnicate"),
    cli("unknown-option", "screen", "--frobnicate"),
]


# ---------------------------------------------------------------------------- the API

def _tokens():
    rng = np.random.default_rng(0)
    return [np.round(rng.standard_normal((3, 2)) * 8) / 8 for _ in range(3)]


def _screened():
    import ntkcheck

    return ntkcheck.screen(_tokens(), certify=False)


def _api_functions():
    """name -> zero-argument callable (each either returns or raises an NtkcheckError)."""
    import ntkcheck
    from ntkcheck.convergence.local import local_convergence
    from ntkcheck.io.files import load_samples

    t = _tokens()
    nan = [np.array([[0.0, np.nan]]), np.array([[1.0, 2.0]])]
    d = os.environ.get("BAD_INPUT_DIR", ".")
    return {
        "decide-n-directions-0": lambda: ntkcheck.decide(t, "strong", n_directions=0),
        "decide-n-directions-huge": lambda: ntkcheck.decide(t, "strong", n_directions=10**9),
        "decide-n-directions-float": lambda: ntkcheck.decide(t, "strong", n_directions=2.5),
        "decide-seed-negative": lambda: ntkcheck.decide(t, "strong", seed=-1),
        "decide-empty-list": lambda: ntkcheck.decide([]),
        "decide-string": lambda: ntkcheck.decide("tokens.npy"),
        "decide-none": lambda: ntkcheck.decide(None),
        "decide-nan": lambda: ntkcheck.decide(nan),
        "decide-bad-property": lambda: ntkcheck.decide(t, "medium"),
        "decide-bad-method": lambda: ntkcheck.decide(t, method="magic"),
        "decide-timeout-0": lambda: ntkcheck.decide(t, timeout=0),
        "decide-timeout-nan": lambda: ntkcheck.decide(t, timeout=float("nan")),
        "decide-timeout-text": lambda: ntkcheck.decide(t, timeout="10"),
        "decide-max-bits-10": lambda: ntkcheck.decide(t, max_bits=10),
        "decide-max-bits-huge": lambda: ntkcheck.decide(t, max_bits=10**9),
        "decide-K-1": lambda: ntkcheck.decide(t, K=1),
        "decide-direction-zero": lambda: ntkcheck.decide(t, "strong", direction=[0, 0]),
        "decide-direction-length": lambda: ntkcheck.decide(t, "strong", direction=[1, 2, 3]),
        "decide-mixed-dims": lambda: ntkcheck.decide([np.ones((2, 2)), np.ones((2, 3))]),
        "decide-2000-samples-interval": lambda: ntkcheck.decide(
            list(np.random.default_rng(2).standard_normal((2000, 3, 1))), "strong", method="interval"),
        "decide-ragged-valid": lambda: ntkcheck.decide([np.array([[0.0]]), np.array([[0.0], [1.0]])]),
        "decide-complex": lambda: ntkcheck.decide([np.ones((2, 2), dtype=complex)] * 2),
        "screen-seed-negative": lambda: ntkcheck.screen(t, seed=-1),
        "screen-heads-0": lambda: ntkcheck.screen(t, heads=0),
        "screen-heads-float": lambda: ntkcheck.screen(t, heads=2.5),
        "screen-heads-1e9": lambda: ntkcheck.screen(t, heads=10**9),
        "screen-depth-nan": lambda: ntkcheck.screen(t, depth_T=float("nan")),
        "screen-q-scale-negative": lambda: ntkcheck.screen(t, q_scale=-1.0),
        "screen-dist-bad": lambda: ntkcheck.screen(t, dist="cauchy"),
        "gram-heads-0": lambda: ntkcheck.gram(t, 0),
        "gram-heads-text": lambda: ntkcheck.gram(t, "16"),
        "gram-heads-1e10": lambda: ntkcheck.gram(t, 10**10),
        "gram-method-bad": lambda: ntkcheck.gram(t, 8, method="magic"),
        "gram-seed-negative": lambda: ntkcheck.gram(t, 8, seed=-1),
        "init-heads-0": lambda: ntkcheck.init_heads(0, 2),
        "init-heads-dim-0": lambda: ntkcheck.init_heads(2, 0),
        "init-heads-1e12": lambda: ntkcheck.init_heads(10**12, 3),
        "heads-wrong-shape": lambda: ntkcheck.Heads(np.ones((2, 3, 2)), np.ones((2, 3))),
        "heads-nan": lambda: ntkcheck.Heads(np.full((1, 2, 2), np.nan), np.ones((1, 2))),
        "plot-report-other-dimension": lambda: ntkcheck.plot_report(_screened(), [np.ones((2, 3))] * 3),
        "plot-report-other-count": lambda: ntkcheck.plot_report(_screened(), _tokens()[:2]),
        "load-samples-missing": lambda: load_samples(f"{d}/missing.npz"),
        "load-samples-corrupt": lambda: load_samples(f"{d}/corrupt.npz"),
        "load-samples-huge-header": lambda: load_samples(f"{d}/huge_header.npy"),
        "load-samples-fifo": lambda: load_samples(f"{d}/fifo.npy"),
        "load-heads-huge": lambda: ntkcheck.screening.load_heads(f"{d}/heads_huge.npy"),
        "local-convergence-layers-1e9": lambda: local_convergence(t, layers=10**9),
        "local-convergence-heads-1e9": lambda: local_convergence(t, heads=10**9),
    }


API_CASES = [
    *(api(n) for n in ("decide-n-directions-0", "decide-n-directions-huge", "decide-n-directions-float",
                       "decide-seed-negative", "decide-empty-list", "decide-string", "decide-none", "decide-nan",
                       "decide-bad-property", "decide-bad-method", "decide-timeout-0", "decide-timeout-nan",
                       "decide-timeout-text", "decide-max-bits-10", "decide-max-bits-huge", "decide-K-1",
                       "decide-direction-zero", "decide-direction-length", "decide-mixed-dims", "decide-complex",
                       "screen-seed-negative", "screen-heads-0", "screen-heads-float", "screen-depth-nan",
                       "screen-q-scale-negative", "screen-dist-bad", "gram-heads-0", "gram-heads-text",
                       "gram-method-bad", "gram-seed-negative", "init-heads-0", "init-heads-dim-0",
                       "heads-wrong-shape", "heads-nan", "plot-report-other-dimension", "plot-report-other-count",
                       "load-samples-missing", "load-samples-corrupt", "load-samples-fifo")),
    *(api(n, memory=True) for n in ("decide-2000-samples-interval", "screen-heads-1e9", "gram-heads-1e10", "init-heads-1e12",
                                    "load-samples-huge-header", "load-heads-huge", "local-convergence-layers-1e9",
                                    "local-convergence-heads-1e9")),
    api("decide-ragged-valid", expect=ANSWER),
]

CASES = FILE_CASES + NUMERIC_CASES + OPTION_CASES + API_CASES
BY_ID = {c.id: c for c in CASES}


# --------------------------------------------------------------------------- the child

def _child_main() -> None:  # pragma: no cover - runs in the child process
    """Run the cases named on stdin, one JSON line each on stdout (the real one)."""
    import contextlib
    import io
    import resource
    import signal
    import time
    import traceback

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))
    from ntkcheck.cli import main
    from ntkcheck.errors import NtkcheckError

    class Hang(BaseException):
        pass

    def alarm(signum, frame):
        raise Hang()

    signal.signal(signal.SIGALRM, alarm)
    out_fd = os.fdopen(os.dup(1), "w")
    functions = _api_functions()
    d = os.environ["BAD_INPUT_DIR"]
    for line in sys.stdin:
        case = BY_ID[line.strip()]
        out, err = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        signal.alarm(int(case.budget + 5) + 1)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                if case.api:
                    try:
                        functions[case.api]()
                        code = 0
                    except NtkcheckError as exc:
                        code = 2
                        print(f"api: error: {exc}", file=sys.stderr)
                else:
                    code = main([a.replace("{d}", d) for a in case.argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except Hang:
            code = "hang"
        except BaseException:  # noqa: BLE001 - reported to the parent, which fails the case
            code = "exception"
            err.write(traceback.format_exc())
        finally:
            signal.alarm(0)
        out_fd.write(json.dumps({"id": case.id, "code": code, "stderr": err.getvalue(),
                                 "stdout": out.getvalue()[-2000:], "seconds": time.perf_counter() - t0}) + "\n")
        out_fd.flush()


def _run_child(ids: list[str], files: Path) -> dict[str, dict]:
    """Run ``ids`` in child processes (restarting after a crash); the results by id."""
    env = dict(os.environ, BAD_INPUT_DIR=str(files), NTKCHECK_MEMORY_LIMIT=CHILD_MEMORY_LIMIT, MPLBACKEND="Agg",
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NTKCHECK_PROGRESS_DELAY="1000")
    results: dict[str, dict] = {}
    todo = list(ids)
    while todo:
        budget = sum(BY_ID[i].budget + 6 for i in todo) + 60
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"], input="\n".join(todo) + "\n",
                              capture_output=True, text=True, env=env, timeout=budget, cwd=str(files))
        for line in proc.stdout.splitlines():
            r = json.loads(line)
            results[r["id"]] = r
        todo = [i for i in todo if i not in results]
        if todo:  # the child died during todo[0]: record the crash, go on after it
            results[todo[0]] = {"id": todo[0], "code": f"crash ({proc.returncode})", "stderr": proc.stderr[-3000:],
                                "stdout": "", "seconds": float("nan")}
            todo = todo[1:]
    return results


def timed(case: Case) -> bool:
    """Whether ``case`` runs, so that its time is what its budget bounds: it may be answered (a
    verdict, a flow, a run cut by its own ``--timeout`` / ``--max-seconds``) or has a budget of its
    own. These run one after another (the ``timing`` group of ``tests/suite_run.py``); a refusal
    (exit 2 expected, the default 10 s budget) is refused before any computation, in a fraction of
    a second, and its budget only catches a hang: the refusals run in parallel with the rest."""
    return case.expect != BAD or case.budget != REFUSAL_BUDGET


TIMED = [c for c in CASES if timed(c)]
REFUSALS = [c for c in CASES if not timed(c)]


def outcomes_of(cases: list[Case], directory: Path) -> dict[str, dict]:
    """Make the files in ``directory`` and run ``cases`` in the child; the results by id."""
    from _bad_input_files import make_all

    files = make_all(directory)
    results = _run_child([c.id for c in cases], files)
    if os.environ.get("BAD_INPUT_DUMP"):
        Path(os.environ["BAD_INPUT_DUMP"]).write_text(json.dumps(results, indent=1))
    return results


def check(case: Case, r: dict) -> None:
    """The assertions of the suite on one case's outcome ``r`` (see the module's docstring)."""
    err = r["stderr"]
    assert "Traceback" not in err, err
    assert r["code"] in DOCUMENTED, f"exit {r['code']}: {err[-1500:]}"
    assert r["code"] in case.expect, f"exit {r['code']}, expected {sorted(case.expect)}: {err[-800:]}"
    assert r["seconds"] <= case.budget + 5, f"{r['seconds']:.1f} s > budget {case.budget} + 5 s"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    own = ("ntkcheck", "api: error:")
    assert all(ln.startswith(own) for ln in lines), f"stderr lines not in the one-line format: {lines[:5]}"
    assert "internal error" not in err and "out of memory" not in err, err
    if r["code"] == 2:
        errors = [ln for ln in lines if ": error: " in ln]
        assert len(errors) == 1, lines
    if case.memory and r["code"] == 2:  # an estimate (memory or time), or a header claiming more than the file
        assert any(s in err for s in ESTIMATES), f"refused, but not by an estimate: {err}"


if __name__ == "__main__":  # pragma: no cover - the child process of the suite
    if sys.argv[1:] == ["--child"]:
        sys.path.insert(0, str(HERE))
        _child_main()
