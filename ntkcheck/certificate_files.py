r"""Certificate files: what ``--certificate-out FILE.json`` writes, for :mod:`ntkcheck.verify` to re-check.

A file (format :data:`ntkcheck.verify.FORMAT`, ``ntkcheck-certificate/2``) holds the **inputs**
(the token laws as their distinct atoms with exact rational masses; or the closed-form families
by their exact parameters; the heads ``Q`` and ``b``; a user's matrix and its entrywise error
bound), their SHA-256 digest, and one **claim** per certified statement with what its proof used.
The atoms and heads are written as the values given: float64 when every value is a double (each
is the dyadic rational it is), else as **exact rationals** (ASCII strings ``"1/10"``,
``"1152921504606846977"``: ``Empirical.rational_atoms()``, ``Heads.rational_Q`` / ``rational_b``),
so every claim is re-checked for the numbers the user gave, never for their float64 view.
The claims:

* ``cgf``: a verdict of :func:`~ntkcheck.independence.decision.decide` and its certificate
  (the minor's columns, directions and prime; the ball bound's scaling; the gap condition's
  side and gaps; the identity's coefficients ``c``, ``alpha``, ``beta``);
* ``gram-lower-bound``: :math:`\lambda_{\min}(F F^T) \ge \ell` for the Gram of the inputs, the
  route and precision that proved it; ``inputs_rounded`` when a float64 route proved it for the
  nearest doubles and it was carried over through the rounding radius (then no shift is written:
  the view's shift says nothing about the values given);
* ``gram-singular``: the dependency and the signed measure :math:`\nu` on shared atoms whose
  kernel vector seed 003 Prop. 8 gives; ``gram-equal-scores``: two atoms of one sample that every
  head scores alike (an exactly singular Gram, ``GramCertificate.kind == "exactly-singular"``);
* ``matrix-lower-bound`` (with the Cholesky shift ``t``; radius 0: the bound covers the entrywise ball only),
  ``matrix-singular``, ``matrix-indefinite`` (with the vector): :func:`~ntkcheck.ntk.certificate.user_matrix.certify_matrix`;
* ``none``: nothing was certified (the reason): the verifier reports it unchecked.

Arrays of up to :data:`INLINE_ENTRIES` entries are written in the JSON (``{"shape", "data"}``:
float64 values round-trip exactly through ``repr``; ``{"shape", "exact"}``: rational strings);
larger ones go to ``FILE.arrays.npz`` beside it (float64, or an ASCII string array for exact
values; ``np.savez``, read back with ``allow_pickle=False``), named in the JSON and covered by the
digest. Nothing is pickled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .cgf import Dirac, Empirical, Gaussian, GaussianMixture2, Laplace, UniformCube
from .errors import InputError
from .verify import FORMAT, digest

__all__ = ["INLINE_ENTRIES", "decide_certificate", "gram_certificate_record", "screen_certificate",
           "matrix_certificate", "write_certificate"]

#: arrays with more entries than this go to the ``.npz`` companion
INLINE_ENTRIES = 20_000


def _q(v: Any) -> str:
    return str(v)


def _num(v: Any) -> Any:
    """One coordinate, exactly: a double as a JSON number (``repr`` round-trips), else a rational string."""
    return float(v) if isinstance(v, float) else str(Fraction(v))


def _exact(rows: Iterable[Sequence[Fraction]], shape: tuple[int, ...]) -> np.ndarray:
    """Values given that are not all doubles, as an ASCII array of exact rational strings (``b"1/10"``)."""
    try:
        flat = [str(Fraction(v)) for row in rows for v in row]
    except ValueError as exc:  # an integer beyond Python's 4300-digit str conversion limit
        raise InputError(f"certificate: a value given has too many digits to write exactly ({exc})") from None
    return np.array(flat, dtype="S").reshape(shape)


def _atoms(m: Empirical) -> np.ndarray:
    """The distinct atoms: float64 when they are the values given, else their exact values."""
    if not m.rounded:
        return np.asarray(m.atoms, dtype=np.float64)
    return _exact(m.rational_atoms(), m.atoms.shape)


def _heads(heads: Any) -> dict[str, np.ndarray]:
    """``Q`` and ``b``: float64 when they are the values given, else their exact values."""
    if not heads.rounded:
        return {"Q": np.asarray(heads.Q, dtype=np.float64), "b": np.asarray(heads.b, dtype=np.float64)}
    H = heads.count
    return {"Q": _exact((row for h in range(H) for row in heads.rational_Q(h)), heads.Q.shape),
            "b": _exact((heads.rational_b(h) for h in range(H)), heads.b.shape)}


def _law(m: Any) -> dict[str, Any]:
    """A law as exact values: the verifier's inputs."""
    if isinstance(m, Empirical):
        return {"kind": "empirical", "atoms": _atoms(m), "masses": [_q(v) for v in m.weights]}
    if isinstance(m, Dirac):
        return {"kind": "dirac", "point": [_q(v) for v in m.point]}
    if isinstance(m, UniformCube):
        return {"kind": "uniform-cube", "radius": _q(m.radius), "dim": int(m.dim)}
    cov = [[_q(v) for v in row] for row in getattr(m, "cov", ())]
    if isinstance(m, Laplace):
        return {"kind": "laplace", "cov": cov}
    if isinstance(m, Gaussian):
        return {"kind": "gaussian", "mean": [_q(v) for v in m.mean], "cov": cov}
    if isinstance(m, GaussianMixture2):
        return {"kind": "gaussian-mixture", "m": [_q(v) for v in m.m], "cov": cov}
    raise InputError(f"certificate: a {type(m).__name__} law cannot be written for the verifier (it knows token "
                     "laws and the families of `ntkcheck decide --family`)")


def _source(path: Any) -> dict[str, Any] | None:
    if path is None:
        return None
    import hashlib

    p = Path(path)
    sha = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
    return {"path": str(p), "sha256": sha}


def decision_claim(cid: str, dec: Any, samples: list[int] | None = None) -> dict[str, Any]:
    """The claim of a :class:`~ntkcheck.independence.results.Decision` (``none`` when inconclusive)."""
    if dec.verdict.value not in ("independent", "dependent"):
        return {"id": cid, "kind": "none", "reason": f"{dec.property} property inconclusive: nothing certified"}
    return {"id": cid, "kind": "cgf", "property": dec.property, "verdict": dec.verdict.value,
            "direction": None if dec.direction is None else [_q(v) for v in dec.direction],
            "samples": samples, "certificate": dec.certificate.to_dict()}


def gram_claim(cid: str, g: Any, samples: list[int] | None = None) -> dict[str, Any]:
    """The claim of a :class:`~ntkcheck.ntk.gram_matrix.result.GramResult`: its certified lower bound, its
    exact singularity (two atoms every head scores alike), or ``none``."""
    c = g.certified
    if c is not None and c.kind == "exactly-singular" and c.atoms is not None:
        i, a, b = c.atoms
        return {"id": cid, "kind": "gram-equal-scores", "sample": i if samples is None else samples[i],
                "atoms": [a, b], "statement": c.detail}
    if c is None or not c.positive:
        why = "not attempted" if c is None else c.detail
        return {"id": cid, "kind": "none", "reason": f"the Gram is not certified positive ({why})"}
    shifts = [] if c.shift is None or c.inputs_rounded else [c.shift]  # a carried-over bound's shift is the view's
    return {"id": cid, "kind": "gram-lower-bound", "lower_bound": c.lower_bound, "route": c.kind, "bits": c.bits,
            "inputs_rounded": c.inputs_rounded, "shifts": shifts, "samples": samples, "statement": c.detail}


def _base(verb: str, laws: list[Any], heads: Any, source: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = {"laws": [_law(m) for m in laws]}
    if heads is not None:
        inputs["heads"] = _heads(heads)
    return {"verb": verb, "source": _source(source), "inputs": inputs, "claims": []}


def decide_certificate(dec: Any, measures: list[Any], source: Any = None) -> dict[str, Any]:
    """The certificate record of ``decide(measures)`` (write it with :func:`write_certificate`)."""
    from .independence.decision import as_measures

    rec = _base("decide", as_measures(measures), None, source)
    rec["claims"].append(decision_claim(dec.property, dec))
    return rec


def gram_certificate_record(g: Any, laws: list[Any], heads: Any, source: Any = None, verb: str = "gram") -> dict[str, Any]:
    """The certificate record of a Gram on ``laws`` and ``heads`` (the heads it was computed with)."""
    rec = _base(verb, laws, heads, source)
    rec["claims"].append(gram_claim("gram", g))
    return rec


def _singular_claim(report: Any) -> dict[str, Any]:
    """Screen's ``certified singular``: the dependency and the measure nu of Prop. 8."""
    cc, weak = report.crosscheck, report.weak
    pred = cc.prediction
    sup = getattr(report, "law_support", None)
    if sup is not None and sup.singular and not (weak.dependent and cc.statement == "necessity"):
        return {"id": "gram", "kind": "none", "reason": f"singular for every head of the law ({sup.kernel.short()}): "
                "no standalone certificate kind for it yet"}
    if pred is None or not pred.nu or weak.affine is None or weak.null_vector is None:
        return {"id": "gram", "kind": "none", "reason": "singular by Prop. 8 without shared atoms (single Diracs): "
                "no standalone certificate"}
    return {"id": "gram", "kind": "gram-singular", "c": [_q(v) for v in weak.null_vector],
            "alpha": [_q(v) for v in weak.affine[0]],
            "nu": [{"atom": [_num(v) for v in atom], "mass": _q(mass)} for atom, mass in pred.nu]}


def screen_certificate(report: Any, samples: Any, heads: Any = None, source: Any = None) -> dict[str, Any]:
    """The certificate record of a :class:`~ntkcheck.screening.ScreenReport`: both CGF verdicts,
    the Gram (its lower bound, or its kernel by Prop. 8) and the Gram of the samples outside
    the dependency. ``heads``: the heads screened (default: those the report drew)."""
    from .cgf import as_laws

    laws = as_laws(samples)
    heads = heads if heads is not None else getattr(report, "drawn_heads", None)
    if heads is None:
        raise InputError("certificate: the heads of the screening are needed (pass heads=)")
    rec = _base("screen", laws, heads, source)
    rec["claims"] += [decision_claim("weak", report.weak), decision_claim("strong", report.strong)]
    exactly = report.gram.certified is not None and report.gram.certified.kind == "exactly-singular"
    rec["claims"].append(_singular_claim(report) if report.outcome == "certified singular" and not exactly else
                         gram_claim("gram", report.gram))
    comp = report.complement
    if comp is not None and comp.gram is not None:
        rec["claims"].append(gram_claim("complement gram", comp.gram, list(report.complement_indices)))
    return rec


def matrix_certificate(cert: Any, matrix: Any, source: Any = None) -> dict[str, Any]:
    """The certificate record of :func:`~ntkcheck.ntk.certificate.user_matrix.certify_matrix`."""
    from .ntk.certificate.user_matrix import load_matrix

    A = load_matrix(matrix) if isinstance(matrix, (str, Path)) else np.asarray(matrix)
    rec = {"verb": "certify", "source": _source(source), "claims": [],
           "inputs": {"matrix": np.asarray(A, dtype=np.float64), "abs_error": float(cert.abs_error)}}
    claim: dict[str, Any] = {"id": "matrix", "statement": cert.statement}
    if cert.status == "certified positive":
        # the file's radius is about the exact symmetric part (A + A^T)/2, beyond the entrywise ball the
        # verifier derives itself (n abs_error); cert.radius is about the rounded centre fl((A + A^T)/2)
        # and includes that centre's rounding, so it is no radius about (A + A^T)/2: none is claimed
        claim |= {"kind": "matrix-lower-bound", "lower_bound": cert.lower_bound, "radius": 0.0,
                  "shifts": [] if cert.shift is None else [cert.shift]}
    elif cert.status == "certified singular":
        claim |= {"kind": "matrix-singular", "rank": cert.rank}
    elif cert.status == "certified indefinite" and cert.vector is not None:
        claim |= {"kind": "matrix-indefinite", "vector": {"shape": [cert.n], "data": [float(v) for v in cert.vector]}}
    else:
        claim |= {"kind": "none", "reason": f"not certified: {cert.statement}"}
    rec["claims"].append(claim)
    return rec


def _refs(obj: Any, arrays: dict[str, np.ndarray], path: str) -> Any:
    """``obj`` with its arrays replaced by inline ``{"shape", "data"}`` or ``{"npz": key}`` references."""
    if isinstance(obj, np.ndarray):
        if obj.size <= INLINE_ENTRIES and obj.dtype.kind == "S":
            return {"shape": list(obj.shape), "exact": [v.decode("ascii") for v in obj.reshape(-1)]}
        if obj.size <= INLINE_ENTRIES:
            return {"shape": list(obj.shape), "data": [float(v) for v in obj.reshape(-1)]}
        arrays[path] = obj
        return {"npz": path}
    if isinstance(obj, dict):
        return {k: _refs(v, arrays, f"{path}.{k}" if path else k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_refs(v, arrays, f"{path}.{i}") for i, v in enumerate(obj)]
    return obj


def write_certificate(path: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` (from the builders above) to ``path`` (JSON) and, for large arrays, to
    ``path`` with suffix ``.arrays.npz``; returns ``path``. Re-check with ``python -m ntkcheck.verify path``."""
    from importlib.metadata import PackageNotFoundError, version

    out = Path(path)
    arrays: dict[str, np.ndarray] = {}
    inputs = json.loads(json.dumps(_refs(record["inputs"], arrays, "")))  # plain JSON, as the verifier reads it
    try:
        made = f"ntkcheck {version('ntkcheck')}"
    except PackageNotFoundError:  # pragma: no cover - a source tree without install
        made = "ntkcheck (not installed)"
    companion = out.with_name(out.name.removesuffix(".json") + ".arrays.npz") if arrays else None
    full = {"format": FORMAT, "verb": record["verb"], "created_by": made, "source": record.get("source"),
            "arrays": None if companion is None else companion.name, "inputs": inputs,
            "digest": digest(inputs, arrays), "claims": record["claims"]}
    try:
        if companion is not None:
            np.savez(companion, **arrays)
        out.write_text(json.dumps(full, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write the certificate ({exc})") from None
    return out
