r"""Initialisation screening: everything ntkcheck can say about a dataset at FixUp.

For token sets :math:`X_1, \dots, X_n` and heads drawn from an init spec, the report holds

* a per-sample summary (tokens, distinct atoms, largest multiplicity, radius, whether the
  sample enters the dependency found); each sample is its empirical law
  (:class:`~ntkcheck.cgf.empirical.Empirical`): repeated tokens are one atom with their summed mass;
* the weak and strong CGF verdicts with their certificates (``ntkcheck.decide``);
* the NTK Gram spectrum at FixUp on the distinct atoms (``ntkcheck.ntk.gram_matrix``) and the
  cross-check against seed 003 Prop. 8 (``ntkcheck.ntk.crosscheck``); when the samples are
  dependent, the cross-check is repeated on the samples outside the dependency, so both
  outcomes are visible;
* the dependence structure by name (``ntkcheck.ntk.structure``: "sample 12 is sample 3",
  translates with their shift, products, single Diracs) and the dimension of the Gram
  kernel it predicts beside the number of eigenvalues observed at the rounding floor;
* the smallest NTK eigenvalue :math:`\lambda_0` under the screen's own convention: the
  mean-field depth-``T`` model (each layer's heads drawn from the same law :math:`\rho`,
  ``theory/local-convergence.md``) and the per-token loss
  :math:`\tfrac12\sum_i \|x_T - y_i\|^2_{L^2(\mu_i)}`, whose NTK is ``T`` times the
  one-layer NTK (:mod:`ntkcheck.dynamics.model` normalises that loss by ``1/n``, which divides
  it by ``n``; heads shared by every layer multiply it by another ``T``):

  .. math::

      \lambda_0 = T\,\lambda_{\min}(W^{1/2} K W^{1/2}) .

  Near initialisation the linearised residual decays at :math:`\lambda_0` and the loss at
  :math:`2\lambda_0`. It is *not* the rate of seed 002 Thm. 8.5: that theorem is stated for
  the readout loss with heads shared over depth (:func:`ntkcheck.dynamics.lipschitz.readout_ntk_fixup`,
  ``ntkcheck screen --thm85``), and its rate is guaranteed only below the corrected eq. 30
  threshold :math:`\lambda_0^4/(16 L_K^2(2\Lambda+\lambda_0))`, which needs targets and a
  certified :math:`L_K` (:func:`ntkcheck.dynamics.lipschitz.convergence_certificate`, ``ntkcheck flow``).

References: seed 003 Prop. 8, seed 002 Thm. 8.5; MATH.md sections 3 and 5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .ntk.crosscheck import CrosscheckResult, crosscheck
from .independence.results import format_vector
from .errors import InputError
from .cgf import Empirical, as_laws
from .ntk.certificate import MAX_CERTIFY_TOKENS, _certify
from .ntk.features import Heads, _atom_count, init_heads
from .ntk.gram_matrix import GramResult, gram
from .ntk.structure import DependenceStructure, dependence_structure

__all__ = ["SampleSummary", "ScreenReport", "screen", "default_head_count", "load_heads", "plot_report",
           "RATE_CAVEAT"]

RATE_CAVEAT = (
    "convention: mean-field depth T (heads of each layer drawn from the same law), per-token loss "
    "(1/2) sum_i ||x_T - y_i||^2 in L^2(mu_i) (ntkcheck flow's 1/n-normalised loss divides lambda_0 by n; "
    "heads shared by all layers multiply it by T). Near initialisation the residual decays at lambda_0 and "
    "the loss at 2 lambda_0. Not the rate of seed 002 Thm. 8.5, which is stated for the readout loss with heads "
    "shared over depth (--thm85) and guaranteed only below the corrected eq. 30 threshold "
    "lambda_0^4 / (16 L_K^2 (2 Lambda + lambda_0)), for given targets (ntkcheck flow certifies it)"
)


#: Arb certificates of a Gram float64 already sees positive are run when they are cheap:
#: softmax weights evaluated in ball arithmetic (atoms x heads x largest law) up to this many
#: (~0.15 s for the README example, 24k; 128 atoms of 8 tokens at 256 heads, 262k, took ~4 s)
CERTIFY_BUDGET = 1 << 16


def _certify_cost(laws: list[Empirical], heads: Heads) -> int:
    M = _atom_count(laws)
    if M > MAX_CERTIFY_TOKENS:
        return 1 << 62
    return M * heads.count * max(law.n_atoms for law in laws)


def _certified(laws: list[Empirical], heads: Heads, g: GramResult, max_bits: int) -> GramResult:
    """``g`` with an Arb certificate when float64 saw it positive and the certificate is cheap
    ("positive" is claimed only with a rigorous lower bound); ``g`` itself otherwise."""
    if not g.positive or g.certified is not None or _certify_cost(laws, heads) > CERTIFY_BUDGET:
        return g
    cert = _certify(laws, heads, max_bits=max_bits)
    note = ("positivity certified in Arb ball arithmetic" if cert.positive else
            "Arb certification inconclusive: positivity is seen in float64 only")
    return replace(g, certified=cert, notes=(*g.notes, note))


def default_head_count(M: int, d: int) -> int:
    """``ceil(4 M / d)`` heads: ``H d >= 4 M``, rank room for a Monte Carlo estimate of a
    mean-field :math:`\\rho` (the Gram has rank at most ``H d``, so ``H d >= M`` at least).
    ``M`` counts the rows of the Gram: distinct atoms, summed over the samples."""
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
    """One sample: ``tokens`` N_i, ``distinct`` atoms, ``max_multiplicity`` (largest number of
    tokens on one atom), ``radius`` max |x|, ``mean`` (of its law), and its coefficient in the
    dependency found (``"0"`` when it is not involved)."""

    index: int
    tokens: int
    distinct: int
    radius: float
    mean: tuple[float, ...]
    coefficient: str
    max_multiplicity: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tokens": self.tokens, "distinct": self.distinct,
                "max_multiplicity": self.max_multiplicity, "radius": self.radius,
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
            "structure": None if self.structure is None else self.structure.to_dict(),
            "kernel": None if self.crosscheck.kernel is None else self.crosscheck.kernel.to_dict(),
            "complement": None if self.complement is None else {
                "samples": list(self.complement_indices), **self.complement.to_dict()},
            "depth_T": self.depth_T,
            "lambda_0": self.lambda_0,
            "rate_caveat": self.rate_caveat,
            "notes": list(self.notes),
        }

    @property
    def structure(self) -> DependenceStructure | None:
        """The named dependence structures and the kernel dimension they predict."""
        return self.crosscheck.structure

    def __repr__(self) -> str:
        return (f"ScreenReport(n={len(self.samples)}, weak={self.weak.verdict.value}, strong={self.strong.verdict.value}, "
                f"gram={self.gram.status} (lambda_min={self.gram.lambda_min:.3g}), crosscheck={self.crosscheck.agreement}, "
                f"lambda_0={self.lambda_0:.3g})")

    def table(self) -> str:
        """The human-readable report printed by ``ntkcheck screen``."""
        out = [f"{'sample':>6} {'tokens':>6} {'distinct':>8} {'max mult':>8} {'radius':>8}  {'c_i':>6}  mean"]
        for s in self.samples:
            mean = ", ".join(f"{v:+.3f}" for v in s.mean[:4]) + (f", ... ({len(s.mean)} coordinates)"
                                                                   if len(s.mean) > 4 else "")
            out.append(f"{s.index:>6} {s.tokens:>6} {s.distinct:>8} {s.max_multiplicity:>8} {s.radius:>8.3f}  "
                       f"{s.coefficient:>6}  ({mean})")
        out.append("")
        for name, dec in (("weak", self.weak), ("strong", self.strong)):
            cert = getattr(dec.certificate, "kind", str(dec.certificate))
            extra = f", direction {format_vector(dec.direction)}" if (name == "strong" and dec.direction) else ""
            out.append(f"{name + ' independence:':<22}{dec.verdict.value:<13} (method {dec.method}, certificate {cert}{extra})")
        st = self.structure
        if st is not None:
            lines = st.lines()
            out.append(f"{'dependence structure:':<22}{lines[0] if lines else 'none named'}")
            out.extend(f"{'':<22}{line}" for line in lines[1:])
            out.append(f"{'':<22}(dependency rank {st.rank}, {st.rank_linear_free} without linear part; "
                       f"{'exact' if st.exact else 'a lower bound'}: {st.certificate})")
        g = self.gram
        out.append("")
        out.append(f"NTK Gram at FixUp:    M = {g.atoms} distinct atoms ({g.tokens} tokens), H = {g.heads} heads "
                   f"({self.heads}), d = {g.dim}")
        out.append(f"  lambda_min          {g.lambda_min:.6g}   (relative {g.relative_lambda_min:.3g}, {g.status_text()})")
        out.append(f"  lambda_max          {g.lambda_max:.6g}")
        out.append(f"  condition           {g.condition:.3g}   (spectrum: {g.method})")
        if g.certified is not None:
            out.append(f"  certificate         {g.certified!r}")
        if self.crosscheck.kernel is not None:
            out.append(f"  kernel dimension    {self.crosscheck.kernel.sentence()}")
        out.append("")
        out.append(f"cross-check:          {self.crosscheck.agreement} -- {self.crosscheck.message}")
        if self.complement is not None:
            out.append(f"  samples {list(self.complement_indices)} (outside the dependency): "
                       f"{self.complement.agreement} -- {self.complement.message}")
        out.append("")
        out.append(f"NTK lambda_0:         T lambda_min = {self.lambda_0:.4g}  (per-token loss, mean-field depth "
                   f"T = {self.depth_T:g}; loss decays at 2 lambda_0 near FixUp)")
        out.append(f"  caveat: {self.rate_caveat}")
        for n in self.notes + g.notes:
            out.append(f"  note: {n}")
        return "\n".join(out)


def _summaries(laws: list[Empirical], c: tuple[Any, ...] | None) -> tuple[SampleSummary, ...]:
    out = []
    for i, law in enumerate(laws):
        X = law.atoms
        out.append(SampleSummary(
            index=i, tokens=law.n_tokens, distinct=law.n_atoms,
            radius=float(np.linalg.norm(X, axis=1).max()), mean=tuple(float(v) for v in law.masses @ X),
            coefficient="-" if c is None else str(c[i]), max_multiplicity=law.max_multiplicity,
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
    samples : list of Empirical, list of (N_i, d) float arrays, or (n, N, d) array
        Arrays are turned into laws once (:func:`~ntkcheck.cgf.empirical.as_laws`): the Gram,
        the verdicts and the structure report all see distinct atoms with their masses.
    heads : int, Heads or None
        A head count drawn from the init spec (``q_scale``, ``b_scale``, ``dist``, ``seed``),
        explicit heads, or None for :func:`default_head_count` (``H d >= 4 M``, ``M`` the
        number of distinct atoms summed over the samples).
    depth_T : float
        Depth ``T`` of the model: the NTK and :math:`\lambda_0` scale by ``T``.
    certify : bool
        Arb certificate for the Gram when float64 cannot decide and no kernel is predicted
        (``M <= 256``).
    max_bits : int
        Highest Arb precision of that certificate (512 keeps a singular Gram's failed
        attempts near one second; a Gram with relative ``lambda_min`` ~1e-40 needs ~300).

    Returns
    -------
    ScreenReport

    Examples
    --------
    >>> from ntkcheck.io.files import bundled_path, load_samples
    >>> r = screen(load_samples(bundled_path()))
    >>> r.weak.verdict.value, r.crosscheck.agreement, r.complement.agreement
    ('dependent', 'agrees', 'agrees')
    """
    from .independence.decision import decide

    laws = as_laws(samples)
    if not (isinstance(depth_T, (int, float)) and math.isfinite(depth_T) and depth_T > 0):
        raise InputError(f"depth_T: expected a positive number, got {depth_T!r}")
    M, d = _atom_count(laws), laws[0].dim
    if isinstance(heads, Heads):
        hs = heads
        spec = "given"
    else:
        H = default_head_count(M, d) if heads is None else heads
        if not isinstance(H, (int, np.integer)) or H < 1:
            raise InputError(f"heads: expected a positive integer, Heads or None, got {heads!r}")
        hs = init_heads(int(H), d, q_scale=q_scale, b_scale=b_scale, dist=dist, seed=seed)  # type: ignore[arg-type]
        spec = f"{dist}, q_scale {q_scale:g}, b_scale {b_scale:g}, seed {seed}"
    weak = decide(laws, property="weak")
    strong = decide(laws, property="strong")
    st = dependence_structure(laws, weak=weak)
    g = gram(laws, hs, progress=progress)
    cc = crosscheck(laws, hs, weak=weak, gram_result=g, structure=st)
    if (certify and not g.positive and not g.rank_deficient_by_size and cc.statement != "necessity"
            and st.predicted_kernel == 0):
        # no kernel is predicted here: try the Arb certificate of positivity
        g = gram(laws, hs, certify=True, progress=progress, max_bits=max_bits)
        cc = crosscheck(laws, hs, weak=weak, gram_result=g, structure=st)
    elif certify and (gc := _certified(laws, hs, g, max_bits)) is not g:
        g = gc
        cc = crosscheck(laws, hs, weak=weak, gram_result=g, structure=st)
    complement = None
    comp_idx: tuple[int, ...] = ()
    notes: list[str] = []
    if weak.dependent and weak.null_vector is not None:
        involved = {i for r in st.relations for i, ci in enumerate(r.c) if ci != 0}
        involved |= {i for i, ci in enumerate(weak.null_vector) if ci != 0}
        comp_idx = tuple(i for i in range(len(laws)) if i not in involved)
        if comp_idx:
            sub = [laws[i] for i in comp_idx]
            if hs.count * d >= _atom_count(sub):
                g_sub = gram(sub, hs, progress=progress)
                if certify:
                    g_sub = _certified(sub, hs, g_sub, max_bits)
                complement = crosscheck(sub, hs, gram_result=g_sub, certify=certify, progress=progress)
            else:
                notes.append(f"samples {list(comp_idx)} not cross-checked separately: H d < their atom count")
    return ScreenReport(
        samples=_summaries(laws, weak.null_vector if weak.dependent else None),
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

    laws = as_laws(samples)
    d = laws[0].dim
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    g = report.gram
    if g.eigenvalues is not None:
        ev = np.asarray(g.eigenvalues)
        floor = max(g.lambda_max * 1e-35, np.finfo(float).tiny)
        ax1.semilogy(np.arange(1, ev.size + 1), np.maximum(ev, floor), ".", ms=4)
    ax1.axhline(g.lambda_max, color="gray", lw=0.6)
    ax1.axhline(max(g.lambda_min, g.lambda_max * 1e-35), color="red", lw=0.6, label="lambda_min")
    if g.floor > 0:
        ax1.axhline(g.floor, color="orange", lw=0.6, ls="--", label="rounding floor")
    ax1.set_yscale("log")
    ax1.set_xlabel("index")
    ax1.set_ylabel("eigenvalue of W^1/2 K W^1/2")
    ax1.set_title(f"NTK Gram at FixUp (M={g.atoms} atoms, H={g.heads}): {g.status}")
    ax1.legend(loc="lower right")
    # a generic direction when the strong verdict names none (a coordinate axis can hide a sample)
    w = (np.asarray([float(v) for v in report.strong.direction], dtype=float) if report.strong.direction
         else np.linspace(1.0, 0.4, d))
    w = w / np.linalg.norm(w)
    R = max(float(np.abs(law.atoms @ w).max()) for law in laws) or 1.0
    t = np.linspace(-4.0 / R, 4.0 / R, 201)
    basis = np.stack([np.ones_like(t), t], axis=1)
    for i, law in enumerate(laws):
        lam = np.asarray(law.cgf(t[:, None] * w[None, :]))
        coef, *_ = np.linalg.lstsq(basis, lam, rcond=None)
        ax2.plot(t, lam - basis @ coef, lw=1, label=f"sample {i}")
    ax2.set_xlabel("t")
    ax2.set_ylabel("Lambda_i(t w) - affine fit")
    ax2.set_title(f"CGFs modulo affine functions, w = {np.round(w, 3).tolist()}")
    if len(laws) <= 10:
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
