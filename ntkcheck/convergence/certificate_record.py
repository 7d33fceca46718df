r"""What ``ntkcheck flow --certificate-out FILE.json`` writes: the certified convergence statement of a run.

The file (format of :mod:`ntkcheck.certificate_files`, re-checked by ``python -m ntkcheck.verify``) holds the
inputs of the statement (the token laws as float64 atoms with exact rational masses, the model's sizes, the
parameters at the centre, the targets) and one claim ``convergence-centred``: the certificate centred at a
state (the hand-off's computed state, or the tube's state at ``s_k`` with its radius), with every number of
the inequality chain. When the statement is the one from FixUp, a second claim records the tube; the verifier
does not re-run it and reports it unchecked. Nothing certified: one claim ``none`` with the reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["flow_certificate_record"]

_CHAIN = ("lambda_min", "lambda_max", "loss_centre", "start_radius", "start_loss", "sigma_star", "sigma_up",
          "beta_start", "radius", "deviation", "hessian_bound", "sigma_low", "rate", "displacement_bound", "step",
          "smoothness", "method")


def _inputs(samples: Any, res: Any, centre: np.ndarray) -> dict[str, Any]:
    from ..cgf import as_laws

    laws = [{"kind": "empirical", "atoms": np.asarray(law.atoms, dtype=np.float64),
             "masses": [str(q) for q in law.exact_weights()]} for law in as_laws(samples)]
    return {"laws": laws, "model": {"heads": int(res.heads), "dim": int(laws[0]["atoms"].shape[1]),
                                    "layers": int(res.layers), "T": float(res.T), "loss": res.loss_kind},
            "centre": np.asarray(centre, dtype=np.float64),
            "targets": np.asarray(res.targets, dtype=np.float64).reshape(-1)}


def _claim(c: Any, where: str) -> dict[str, Any]:
    claim = {k: getattr(c, k) for k in _CHAIN}
    claim["smoothness"] = None if c.step is None else claim["smoothness"]
    claim["u_start"] = c.u_start
    claim["grid"] = list(c.grid)
    return {"id": "convergence", "kind": "convergence-centred", "at": where, **claim, "statement": c.message}


def _source(path: Any) -> dict[str, Any] | None:
    """The data file named on the command line and its SHA-256 (provenance; the digest covers the inputs)."""
    if path is None:
        return None
    import hashlib
    from pathlib import Path

    p = Path(path)
    return {"path": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None}


def flow_certificate_record(res: Any, samples: Any, source: Any = None) -> dict[str, Any]:
    """The certificate record of a :class:`~ntkcheck.convergence.local.LocalConvergence` (write it with
    :func:`ntkcheck.certificate_files.write_certificate`)."""
    fx, ho = res.from_fixup, res.handoff
    if res.loss_kind != "readout" or res.per_layer:
        rec = {"verb": "flow", "source": _source(source), "inputs": {"laws": []}, "claims": [
            {"id": "convergence", "kind": "none", "reason": "the convergence certificate file is written for the readout "
             "loss with heads shared over depth"}]}
        return rec
    if fx is not None and fx.certified:
        centre, c = fx.tube.states[-1], fx.certificate
        where = f"the tube's state at s_k = {fx.s_k:.6g} (start radius: the tube's proved radius)"
    elif ho is not None and ho.found:
        centre, c = res.flow.states[ho.index], ho.certificate
        where = f"the computed state of record {ho.index} (s = {ho.s:.6g})"
    else:
        centre, c = res.flow.states[0], None
        where = ""
    rec = {"verb": "flow", "source": _source(source), "inputs": _inputs(samples, res, centre), "claims": []}
    if c is None or not c.certified:
        rec["claims"].append({"id": "convergence", "kind": "none", "reason": "no centred certificate holds on this run "
                              "(the certificate at FixUp, if any, is not written: re-run ntkcheck flow to check it)"})
        return rec
    rec["claims"].append(_claim(c, where))
    if fx is not None and fx.certified:
        rec["claims"].append({"id": "from FixUp", "kind": "none", "reason": (
            f"the validated tube from FixUp to s_k = {fx.s_k:.6g} (radius {fx.radius:.3g}) is not re-run by the "
            "verifier; the claim above covers every start within that radius of the tube's state")})
    return rec
