r"""Initialisation screening: everything ntkcheck can say about a dataset at FixUp.

For token sets :math:`X_1, \dots, X_n` and heads drawn from an init spec, the report holds

* a per-sample summary (tokens, distinct atoms, radius, whether the sample enters the
  dependency found);
* the weak and strong CGF verdicts with their certificates (``ntkcheck.decide``);
* the NTK Gram spectrum at FixUp (``ntkcheck.gram``) and the cross-check against seed 003
  Prop. 8 (``ntkcheck.crosscheck``); when the samples are dependent, the cross-check is
  repeated on the samples outside the dependency, so both outcomes are visible;
* the local-convergence rate of seed 002 Thm. 8.5 for the mean-field depth-``T`` model
  (each layer's heads drawn from the same law :math:`\rho`, MATH.md sections 3 and 5), whose
  NTK for the per-token loss :math:`\tfrac12\sum_i \|x_T - y_i\|^2_{L^2(\mu_i)}` is ``T``
  times the one-layer NTK (:mod:`ntkcheck.dynamics` normalises that loss by ``1/n``, which
  divides the rate by ``n``; heads shared by every layer multiply it by another ``T``):

  .. math::

      \lambda_0 = T\,\lambda_{\min}(W^{1/2} K W^{1/2}), \qquad
      \mathrm{Loss}(s) - \mathrm{Loss}^* \le e^{-\lambda_0 s}\,(\mathrm{Loss}(0) - \mathrm{Loss}^*),

  valid only when the initial excess loss is below
  :math:`\lambda_0^4 / (16 L_K(\lambda_0 + 2\Lambda L_K))` (eq. 30), which needs the NTK's
  Lipschitz constant :math:`L_K`; ntkcheck does not compute it.

References: seed 003 Prop. 8, seed 002 Thm. 8.5; MATH.md sections 3 and 5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._validate import as_samples
from .crosscheck import CrosscheckResult, crosscheck
from .decide import format_vector
from .errors import InputError
from .gram import GramResult, Heads, gram, init_heads

__all__ = ["SampleSummary", "ScreenReport", "screen", "default_head_count", "load_heads", "plot_report",
           "RATE_CAVEAT"]

RATE_CAVEAT = (
    "convention: mean-field depth T (heads of each layer drawn from the same law), per-token loss "
    "(1/2) sum_i ||x_T - y_i||^2 in L^2(mu_i) (ntkcheck flow's 1/n-normalised loss divides the rate by n; "
    "heads shared by all layers multiply it by T). "
    "lambda_0 is the rate of seed 002 Thm. 8.5 (eq. 31) only if the initial excess loss is below "
    "lambda_0^4 / (16 L_K (lambda_0 + 2 Lambda L_K)) (eq. 30); that threshold needs the NTK's Lipschitz "
    "constant L_K, which is not computed here"
)


def default_head_count(M: int, d: int) -> int:
    """``ceil(4 M / d)`` heads: ``H d >= 4 M``, rank room for a Monte Carlo estimate of a
    mean-field :math:`\\rho` (MATH.md section 3 asks for ``H d >= M`` at least)."""
    return max(1, math.ceil(4 * M / d))


def load_heads(path: str | Path) -> Heads:
    """Heads from an ``.npz`` file with arrays ``Q`` of shape ``(H, d, d)`` and ``b`` of shape ``(H, d)``."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such heads file")
    try:
        with np.load(p, allow_pickle=False) as z:
            if not hasattr(z, "keys"):
                raise InputError(f"{p}: expected an .npz file with arrays Q and b, got a single array")
            keys = list(z.keys())
            if "Q" not in keys or "b" not in keys:
                raise InputError(f"{p}: expected arrays named Q (H, d, d) and b (H, d), found {keys}")
            return Heads(z["Q"], z["b"])
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{p}: not a readable .npz heads file ({exc})") from None


@dataclass(frozen=True)
class SampleSummary:
    """One sample: ``tokens`` N_i, ``distinct`` atoms, ``radius`` max |x|, ``mean``, and its
    coefficient in the dependency found (``"0"`` when it is not involved)."""

    index: int
    tokens: int
    distinct: int
    radius: float
    mean: tuple[float, ...]
    coefficient: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tokens": self.tokens, "distinct": self.distinct, "radius": self.radius,
                "mean": list(self.mean), "coefficient": self.coefficient}


@dataclass(frozen=True)
class ScreenReport:
    """Result of :func:`screen` (see the module docstring)."""

    samples: tuple[SampleSummary, ...]
    heads: str
    weak: Any
    strong: Any
    gram: GramResult
    crosscheck: CrosscheckResult
    complement: CrosscheckResult | None
    complement_indices: tuple[int, ...]
    depth_T: float
    lambda_0: float
    rate_caveat: str = RATE_CAVEAT
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "samples": [s.to_dict() for s in self.samples],
            "heads": self.heads,
            "weak": self.weak.to_dict(),
            "strong": self.strong.to_dict(),
            "gram": self.gram.to_dict(),
            "crosscheck": self.crosscheck.to_dict(),
            "complement": None if self.complement is None else {
                "samples": list(self.complement_indices), **self.complement.to_dict()},
            "depth_T": self.depth_T,
            "lambda_0": self.lambda_0,
            "rate_caveat": self.rate_caveat,
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        return (f"ScreenReport(n={len(self.samples)}, weak={self.weak.verdict.value}, strong={self.strong.verdict.value}, "
                f"gram={self.gram.status} (lambda_min={self.gram.lambda_min:.3g}), crosscheck={self.crosscheck.agreement}, "
                f"lambda_0={self.lambda_0:.3g})")

    def table(self) -> str:
        """The human-readable report printed by ``ntkcheck screen``."""
        out = [f"{'sample':>6} {'tokens':>6} {'distinct':>8} {'radius':>8}  {'c_i':>6}  mean"]
        for s in self.samples:
            mean = ", ".join(f"{v:+.3f}" for v in s.mean)
            out.append(f"{s.index:>6} {s.tokens:>6} {s.distinct:>8} {s.radius:>8.3f}  {s.coefficient:>6}  ({mean})")
        out.append("")
        for name, dec in (("weak", self.weak), ("strong", self.strong)):
            cert = getattr(dec.certificate, "kind", str(dec.certificate))
            extra = f", direction {format_vector(dec.direction)}" if (name == "strong" and dec.direction) else ""
            out.append(f"{name + ' independence:':<22}{dec.verdict.value:<13} (method {dec.method}, certificate {cert}{extra})")
        g = self.gram
        out.append("")
        out.append(f"NTK Gram at FixUp:    M = {g.tokens} token slots, H = {g.heads} heads ({self.heads}), d = {g.dim}")
        out.append(f"  lambda_min          {g.lambda_min:.6g}   (relative {g.relative_lambda_min:.3g}, {g.status})")
        out.append(f"  lambda_max          {g.lambda_max:.6g}")
        out.append(f"  condition           {g.condition:.3g}   (spectrum: {g.method})")
        if g.certified is not None:
            out.append(f"  certificate         {g.certified!r}")
        out.append("")
        out.append(f"cross-check:          {self.crosscheck.agreement} -- {self.crosscheck.message}")
        if self.complement is not None:
            out.append(f"  samples {list(self.complement_indices)} (outside the dependency): "
                       f"{self.complement.agreement} -- {self.complement.message}")
        out.append("")
        out.append(f"local convergence:    lambda_0 = T lambda_min = {self.lambda_0:.4g}  (depth T = {self.depth_T:g})")
        out.append(f"  caveat: {self.rate_caveat}")
        for n in self.notes + g.notes:
            out.append(f"  note: {n}")
        return "\n".join(out)


def _summaries(S: list[np.ndarray], c: tuple[Any, ...] | None) -> tuple[SampleSummary, ...]:
    out = []
    for i, X in enumerate(S):
        out.append(SampleSummary(
            index=i, tokens=int(X.shape[0]), distinct=len({tuple(r) for r in X.tolist()}),
            radius=float(np.linalg.norm(X, axis=1).max()), mean=tuple(float(v) for v in X.mean(axis=0)),
            coefficient="-" if c is None else str(c[i]),
        ))
    return tuple(out)


def screen(
    samples: Any,
    *,
    heads: int | Heads | None = None,
    q_scale: float = 1.0,
    b_scale: float = 1.0,
    seed: int = 0,
    dist: str = "gaussian",
    depth_T: float = 1.0,
    certify: bool = True,
    max_bits: int = 512,
    progress: bool = False,
) -> ScreenReport:
    r"""Screen token data at FixUp initialisation.

    Parameters
    ----------
    samples : list of (N_i, d) float arrays
    heads : int, Heads or None
        A head count drawn from the init spec (``q_scale``, ``b_scale``, ``dist``, ``seed``),
        explicit heads, or None for :func:`default_head_count` (``H d >= 4 M``).
    depth_T : float
        Depth ``T`` of the model: the NTK and :math:`\lambda_0` scale by ``T``.
    certify : bool
        Arb certificate for the Gram when float64 cannot decide (``M <= 256``).
    max_bits : int
        Highest Arb precision of that certificate (512 keeps a singular Gram's failed
        attempts near one second; a Gram with relative ``lambda_min`` ~1e-40 needs ~300).

    Returns
    -------
    ScreenReport

    Examples
    --------
    >>> from ntkcheck.io import bundled_path, load_samples
    >>> r = screen(load_samples(bundled_path()))
    >>> r.weak.verdict.value, r.crosscheck.agreement, r.complement.agreement
    ('dependent', 'agrees', 'agrees')
    """
    from .decide import decide

    S = as_samples(samples)
    if not (isinstance(depth_T, (int, float)) and math.isfinite(depth_T) and depth_T > 0):
        raise InputError(f"depth_T: expected a positive number, got {depth_T!r}")
    M, d = sum(X.shape[0] for X in S), S[0].shape[1]
    if isinstance(heads, Heads):
        hs = heads
        spec = "given"
    else:
        H = default_head_count(M, d) if heads is None else heads
        if not isinstance(H, (int, np.integer)) or H < 1:
            raise InputError(f"heads: expected a positive integer, Heads or None, got {heads!r}")
        hs = init_heads(int(H), d, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed)  # type: ignore[arg-type]
        spec = f"{dist}, q_scale {q_scale:g}, b_scale {b_scale:g}, seed {seed}"
    weak = decide(S, property="weak")
    strong = decide(S, property="strong")
    g = gram(S, hs, progress=progress)
    cc = crosscheck(S, hs, weak=weak, gram_result=g)
    if certify and not g.positive and not g.rank_deficient_by_size and cc.statement != "necessity":
        # positivity is not predicted singular here: try the Arb certificate
        g = gram(S, hs, certify=True, progress=progress, max_bits=max_bits)
        cc = crosscheck(S, hs, weak=weak, gram_result=g)
    complement = None
    comp_idx: tuple[int, ...] = ()
    notes: list[str] = []
    if weak.dependent and weak.null_vector is not None:
        comp_idx = tuple(i for i, ci in enumerate(weak.null_vector) if ci == 0)
        if comp_idx:
            sub = [S[i] for i in comp_idx]
            Msub = sum(X.shape[0] for X in sub)
            if hs.count * d >= Msub:
                complement = crosscheck(sub, hs, certify=certify, progress=progress)
            else:
                notes.append(f"samples {list(comp_idx)} not cross-checked separately: H d < their token count")
    return ScreenReport(
        samples=_summaries(S, weak.null_vector if weak.dependent else None),
        heads=spec,
        weak=weak,
        strong=strong,
        gram=g,
        crosscheck=cc,
        complement=complement,
        complement_indices=comp_idx,
        depth_T=float(depth_T),
        lambda_0=float(depth_T) * g.lambda_min,
        notes=tuple(notes),
    )


def plot_report(report: ScreenReport, samples: Any, path: str | Path) -> Path:
    """Write the Gram spectrum (log scale) and each sample's CGF along a direction minus its
    least-squares affine fit (what independence modulo affine functions is about) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .cgf import log_mgf

    S = as_samples(samples)
    d = S[0].shape[1]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    g = report.gram
    if g.eigenvalues is not None:
        ev = np.asarray(g.eigenvalues)
        floor = max(g.lambda_max * 1e-35, np.finfo(float).tiny)
        ax1.semilogy(np.arange(1, ev.size + 1), np.maximum(ev, floor), ".", ms=4)
    ax1.axhline(g.lambda_max, color="gray", lw=0.6)
    ax1.axhline(max(g.lambda_min, g.lambda_max * 1e-35), color="red", lw=0.6, label="lambda_min")
    ax1.set_yscale("log")
    ax1.set_xlabel("index")
    ax1.set_ylabel("eigenvalue of W^1/2 K W^1/2")
    ax1.set_title(f"NTK Gram at FixUp (M={g.tokens}, H={g.heads}): {g.status}")
    ax1.legend(loc="lower right")
    # a generic direction when the strong verdict names none (a coordinate axis can hide a sample)
    w = (np.asarray([float(v) for v in report.strong.direction], dtype=float) if report.strong.direction
         else np.linspace(1.0, 0.4, d))
    w = w / np.linalg.norm(w)
    R = max(float(np.abs(X @ w).max()) for X in S) or 1.0
    t = np.linspace(-4.0 / R, 4.0 / R, 201)
    basis = np.stack([np.ones_like(t), t], axis=1)
    for i, X in enumerate(S):
        lam = log_mgf(X, t[:, None] * w[None, :])
        coef, *_ = np.linalg.lstsq(basis, lam, rcond=None)
        ax2.plot(t, lam - basis @ coef, lw=1, label=f"sample {i}")
    ax2.set_xlabel("t")
    ax2.set_ylabel("Lambda_i(t w) - affine fit")
    ax2.set_title(f"CGFs modulo affine functions, w = {np.round(w, 3).tolist()}")
    if len(S) <= 10:
        ax2.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    try:
        fig.savefig(out, dpi=110)
    except OSError as exc:
        raise InputError(f"{out}: cannot write the plot ({exc})") from None
    finally:
        plt.close(fig)
    return out
