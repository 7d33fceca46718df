"""The picture of a screening: the Gram spectrum beside each sample's CGF modulo affine functions.

:func:`plot_report` draws a :class:`~ntkcheck.screening.ScreenReport` (read by attribute only, so
this module sits below the screening it draws). The Gram's status in the title is the screening's
conclusion where that is a certificate, else what float64 saw, marked "not certified".

References: seed 003 Prop. 8 (independence modulo affine functions, what the right panel shows);
``theory/ntk-prop8.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._figures import save_figure
from .cgf import as_laws
from .errors import InputError

__all__ = ["plot_report"]


def _plot_status(report: Any) -> str:
    """The Gram's status in a plot title: the screening's conclusion where it is a certificate
    ("certified singular", "certified positive"), else what float64 saw."""
    if report.outcome in ("certified singular", "certified positive", "certified positive, below a useful rate"):
        return report.outcome
    return f"{report.gram.status} (not certified)"



def plot_report(report: Any, samples: Any, path: str | Path | None = None) -> Any:
    r"""Plot the Gram spectrum and each sample's CGF modulo affine functions.

    Left: the eigenvalues of :math:`W^{1/2} K W^{1/2}` (log scale) with
    :math:`\lambda_{\max}`, :math:`\lambda_{\min}` and the rounding floor labelled. Right: each
    sample's :math:`\Lambda_i(t w)` minus its least-squares affine fit in ``t`` (what
    independence modulo affine functions is about); in the dependent case the samples of
    the dependency are drawn solid and :math:`\sum_i c_i \Lambda_i(t w) - \text{affine}`, which
    the certificate says is zero, in black.

    Parameters
    ----------
    report : ScreenReport
        What :func:`~ntkcheck.screening.screen` returned (read by attribute).
    samples : the samples given to :func:`screen`
    path : str, Path or None
        Where to save the figure (then it is closed and the path returned); None returns
        the matplotlib ``Figure`` (shown inline in Jupyter). The backend is never changed.
    """
    import matplotlib.pyplot as plt

    laws = as_laws(samples)
    d = laws[0].dim
    got, want = [(law.dim, law.n_atoms) for law in laws], [(len(s.mean), s.distinct) for s in report.samples]
    if got != want:  # the report's verdicts are drawn on the samples: they must be the screened ones
        raise InputError(f"samples: {len(laws)} in d = {d} are not the {len(want)} screened ones; pass those given to screen()")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    g = report.gram
    if g.eigenvalues is not None:
        ev = np.asarray(g.eigenvalues)
        floor = max(g.lambda_max * 1e-35, np.finfo(float).tiny)
        ax1.semilogy(np.arange(1, ev.size + 1), np.maximum(ev, floor), ".", ms=4, color="C0",
                     label=f"eigenvalues ({ev.size})")
    ax1.axhline(g.lambda_max, color="gray", lw=0.8, label="lambda_max")
    ax1.axhline(max(g.lambda_min, g.lambda_max * 1e-35), color="red", lw=0.8, label="lambda_min")
    if g.floor > 0:
        ax1.axhline(g.floor, color="orange", lw=0.8, ls="--", label=f"rounding floor ({g.method})")
    ax1.set_yscale("log")
    ax1.set_xlabel("eigenvalue index (ascending)")
    ax1.set_ylabel("eigenvalue of W^1/2 K W^1/2")
    ax1.set_title(f"NTK Gram at FixUp: {_plot_status(report)}\nM = {g.atoms} atoms, H = {g.heads} heads, d = {d}",
                  fontsize=10)
    ax1.legend(loc="lower right", fontsize=8)
    # a generic direction when the strong verdict names none (a coordinate axis can hide a sample)
    certified_w = bool(report.strong.direction)
    w = (np.asarray([float(v) for v in report.strong.direction], dtype=float) if certified_w
         else np.linspace(1.0, 0.4, d))
    w = w / np.linalg.norm(w)
    R = max(float(np.abs(law.atoms @ w).max()) for law in laws) or 1.0
    t = np.linspace(-4.0 / R, 4.0 / R, 201)
    basis = np.stack([np.ones_like(t), t], axis=1)
    c = report.weak.null_vector if (report.weak.dependent and report.weak.null_vector is not None) else None
    involved = set() if c is None else {i for i, ci in enumerate(c) if ci != 0}
    total = np.zeros_like(t)
    for i, law in enumerate(laws):
        lam = np.asarray(law.cgf(t[:, None] * w[None, :]))
        coef, *_ = np.linalg.lstsq(basis, lam, rcond=None)
        resid = lam - basis @ coef
        if c is not None:
            total += float(c[i]) * resid
        faint = c is not None and i not in involved
        ax2.plot(t, resid, lw=0.8 if faint else 1.4, alpha=0.45 if faint else 1.0,
                 label=f"sample {i}" + (f" (c = {c[i]})" if i in involved and c is not None else ""))
    if c is not None:
        ax2.plot(t, total, color="black", lw=2.2, ls="--",
                 label="sum_i c_i Lambda_i - affine (certified 0)")
    ax2.set_xlabel("t")
    ax2.set_ylabel("Lambda_i(t w) - affine fit in t")
    where = "the certified direction" if certified_w else "a generic direction"
    verdict = f"weak: {report.weak.verdict.value}"
    ax2.set_title(f"CGFs modulo affine functions ({verdict})\nalong w = {where} (|w| = 1, d = {d})", fontsize=10)
    handles, labels = ax2.get_legend_handles_labels()
    if len(laws) > 10:  # keep the dependency and its samples, drop the rest from the legend
        keep = [k for k, lab in enumerate(labels) if "c =" in lab or "sum_i" in lab]
        handles, labels = [handles[k] for k in keep], [labels[k] for k in keep]
    if handles:
        ax2.legend(handles, labels, fontsize=7, loc="best")
    fig.tight_layout()
    if path is None:
        return fig
    return save_figure(fig, path)
