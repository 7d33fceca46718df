"""``ntkcheck flow --max-seconds``: the budget of the whole command, not only of the integration.

The integrator checks its wall-clock budget between steps, but a step costs three gradients,
and after the integration come the records (one forward pass per stored state) and the
certificate's bounds; with thousands of layers a forward pass takes a second, so a run told to
stop at 5 s ran for half a minute. So one forward pass of the model is timed first (at FixUp,
what the run starts from: milliseconds at the default sizes) and the passes that follow the
integration are reserved from ``--max-seconds``: the integration gets what is left (at least a
tenth of the budget: the setup is not the run). When not even one integration step fits and
the passes outside the integrator's checks would overrun the budget by more than :data:`SLACK`
seconds, the command is refused (exit status 2) with the estimate; a cheap model
(milliseconds a pass) always runs.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..errors import InputError

__all__ = ["integration_budget", "RESERVED_PASSES", "STEP_PASSES"]

#: forward passes besides the records that the run may spend outside the integrator's checks:
#: the setup (the NTK at FixUp), the integrator's last step past the budget (3 gradients of about
#: 2 passes each) and the certificate's bounds
RESERVED_PASSES = 12
#: passes of one integration step
STEP_PASSES = 6
#: seconds a run may overrun --max-seconds by (the bad-input suite allows 5)
SLACK = 2.0


def _forward_seconds(args: argparse.Namespace, samples: Any) -> float:
    from ..cgf import as_laws
    from ..dynamics.model import forward, init_params

    d = as_laws(samples)[0].dim
    params = init_params(d, args.heads, layers=args.layers if getattr(args, "per_layer", False) else None,
                         q_scale=args.q_scale, b_scale=args.b_scale, seed=args.seed)
    best = float("inf")
    for _ in range(2):  # a cheap pass twice: the first one also pays for warming up the libraries
        t0 = time.perf_counter()
        forward(samples, params, args.layers, args.depth_T)
        best = min(best, time.perf_counter() - t0)
        if best > 0.05:
            break
    return best


def integration_budget(args: argparse.Namespace, samples: Any, start: float) -> float:
    """Seconds of ``--max-seconds`` left for the integration once the passes that follow it are reserved.

    Raises
    ------
    InputError
        When not even one integration step fits: the estimate and what to lower.
    """
    if samples is None:  # the plateau's overlap example
        from ..dynamics._experiment import overlap_example

        samples = overlap_example()[0]
    t = _forward_seconds(args, samples)
    reserve = (args.records + RESERVED_PASSES) * t
    left = args.max_seconds - (time.perf_counter() - start) - reserve
    need = (args.records + RESERVED_PASSES + STEP_PASSES) * t
    if left < STEP_PASSES * t and need > SLACK:
        raise InputError(f"one forward pass of the model ({args.layers} layers, {args.heads} heads) takes about "
                         f"{t:.2g} s: a run with {args.records} records needs at least about {need:.0f} s, beyond "
                         f"--max-seconds {args.max_seconds:g}; raise --max-seconds, or lower --layers, --heads or "
                         "--records")
    return max(left, 0.1 * args.max_seconds)
