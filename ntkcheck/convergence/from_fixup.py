r"""Convergence of the gradient flow *from FixUp*: a validated tube up to a hand-off, then the centred certificate.

``theory/local-convergence.md``, "From FixUp: the tube and the hand-off". The tube
(:func:`~ntkcheck.convergence.enclosure.tube.enclose`) proves that the true flow from the initial
parameters is within ``e`` (particle metric) of the tube's state :math:`q_k` at time ``s_k``. The
certificate centred at :math:`q_k` (:func:`~ntkcheck.convergence.centred.centred_certificate`) with
``start_radius = e`` covers every start within ``e`` of :math:`q_k`, the true state at ``s_k``
included. Together: the flow from FixUp converges to zero loss, :math:`\mathcal L(s) \le e^{-r(s - s_k)}
\mathcal L_s` for :math:`s \ge s_k`, and stays within the certificate's radius of :math:`q_k`; on
:math:`[0, s_k]` it stays in the tube. ``room`` is how far a start may be from :math:`q_k` for the
certificate to hold (its ball radius minus the distance the flow travels from :math:`q_k`); the statement
holds when ``e`` fits in it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._records import restore
from .centred import CentredCertificate, centred_certificate
from .enclosure._model import Model
from .enclosure.tube import Enclosure, Start, TubeOptions, enclose
from .lipschitz import _bound, _check_model

__all__ = ["FromFixup", "from_fixup"]


@dataclass(frozen=True)
class FromFixup:
    r"""The flow from FixUp, proved to converge (or the term that stops the proof).

    Attributes
    ----------
    certified : the tube reaches ``s_k`` and the certificate centred at its state covers the tube's radius
    s_k : where the tube hands over (``nan`` if it never did)
    radius : ``e``, the tube's proved radius at ``s_k`` (particle metric)
    room : the certificate's ball radius minus the flow's travel from :math:`q_k` (``e`` must fit in it)
    certificate : the centred certificate at the tube's state with ``start_radius = e``
    tube : the :class:`~ntkcheck.convergence.enclosure.tube.Enclosure` from FixUp
    growth : :math:`\int\bar\mu` over the tube (how much the defects were amplified, as a log)
    defect : :math:`\int|\delta|` over the tube (Euclidean)
    limiting : which term limits when not certified (``"time budget"``, ``"room"``, ``"certificate"``, ``"tube"``:
        the tube could not be continued, its message says why)
    message : the statement, or what is missing
    """

    certified: bool
    s_k: float
    radius: float
    room: float
    certificate: CentredCertificate | None
    growth: float
    defect: float
    limiting: str
    message: str
    tube: Enclosure | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("certificate", "tube")}
        out["certificate"] = None if self.certificate is None else self.certificate.to_dict()
        out["tube"] = None if self.tube is None else self.tube.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FromFixup:
        return restore(cls, {**d, "tube": None},
                       certificate=lambda c: None if c is None else CentredCertificate.from_dict(c))


def _cheap(samples: Any, params: Any, layers: int, T: float, loss: str) -> Any:
    """``M_2`` on a ball around a point of the path: the propagated bound of :mod:`ntkcheck.convergence.lipschitz`."""
    atoms = _check_model(samples, params, layers, T, loss)

    def m2(centre: np.ndarray, radius: float) -> float:
        try:
            return _bound(atoms, params.unflat(centre), layers, T, loss, radius, 1.0).hessian_bound
        except OverflowError:
            return math.inf

    return m2


def _room(c: CentredCertificate) -> float:
    """How far from the centre a start may be: ball radius minus the flow's travel from the centre itself."""
    if not math.isfinite(c.radius) or not c.sigma_low > 0:
        return 0.0
    return max(c.radius - math.sqrt(2.0 * c.loss_centre) / c.sigma_low, 0.0)


def from_fixup(samples: Any, params: Any, mdl: Model, *, layers: int, T: float, loss: str, s_target: float,
               s_max: float | None = None, seconds: float | None = None, options: TubeOptions | None = None,
               progress: Any = None) -> FromFixup:
    """The tube from ``params`` (FixUp) to ``s_target`` (a hand-off time), then the centred certificate at its
    state with the tube's radius; when that does not hold yet, the tube goes on (by a quarter of the time so
    far, up to ``s_max``) while ``seconds`` last."""
    started = time.perf_counter()
    deadline = None if seconds is None else started + float(seconds)
    cheap = _cheap(samples, params, int(layers), float(T), loss)
    sq = math.sqrt(params.heads)
    s_max = float(s_target if s_max is None else max(s_max, s_target))
    tubes: list[Enclosure] = []
    start, goal = None, float(s_target)
    cert, limiting = None, "time budget"
    while True:
        tube = enclose(mdl, params.flat(), goal, options=options, deadline=deadline, progress=progress,
                       cheap=cheap, start=start)
        tubes.append(tube)
        s_k, q, e_rho = tube.s[-1], tube.states[-1], tube.radius[-1]
        if not tube.complete:
            limiting = "time budget" if tube.message.startswith("the time budget") else "tube"
            break
        cert = centred_certificate(samples, params.unflat(q), mdl, layers=int(layers), T=float(T), loss=loss,
                                   start_radius=e_rho)
        limiting = "room" if _room(cert) > 0 and e_rho >= _room(cert) else "certificate"
        if cert.certified or goal >= s_max or (deadline is not None and time.perf_counter() >= deadline):
            break
        start = Start(s_k, q, e_rho * sq, tube.mu_last)
        goal = min(s_max, s_k * 1.25)
    whole = _join(tubes)
    growth = float(np.sum(np.array(whole.mu) * np.diff(whole.s)))
    defect = float(np.sum(whole.defect))
    s_k, e_rho = whole.s[-1], whole.radius[-1]
    ok = bool(cert is not None and cert.certified and whole.complete)
    if ok:
        assert cert is not None
        msg = (f"PROVED: the true flow is within {e_rho:.3g} of the tube's state at s_k = {s_k:.4g} (proved), and "
               f"every start that close converges: Loss(s) <= exp(-{cert.rate:.4g} (s - s_k)) {cert.start_loss:.3e}, "
               f"displacement from that state <= {cert.displacement_bound:.3g}; the gradient flow from this "
               "initialisation converges to zero loss")
    else:
        room = _room(cert) if cert is not None else float("nan")
        why = {"time budget": f"the time budget stopped the tube at s = {s_k:.4g}",
               "tube": whole.message,
               "room": f"the tube's radius {e_rho:.3g} at s = {s_k:.4g} exceeds the room {room:.3g} the certificate leaves",
               "certificate": f"the certificate at the tube's state s = {s_k:.4g} does not hold"
                              + (f" ({cert.message})" if cert is not None else "")}[limiting]
        msg = f"not proved from FixUp: {why}"
    return FromFixup(ok, float(s_k) if ok else float("nan"), float(e_rho), _room(cert) if cert is not None else 0.0,
                     cert, growth, defect, "" if ok else limiting, msg, whole)


def _join(tubes: list[Enclosure]) -> Enclosure:
    """One tube from consecutive pieces (each starts at the previous one's last node)."""
    if len(tubes) == 1:
        return tubes[0]
    first = tubes[0]
    cat = {k: list(getattr(first, k)) for k in ("s", "radius", "loss_upper", "states")}
    mu, df, how = list(first.mu), list(first.defect), list(first.how)
    for t in tubes[1:]:
        for k in cat:
            cat[k] += list(getattr(t, k))[1:]
        mu += list(t.mu)
        df += list(t.defect)
        how += list(t.how)
    last = tubes[-1]
    return Enclosure(tuple(cat["s"]), tuple(cat["radius"]), tuple(mu), tuple(df), tuple(cat["loss_upper"]),
                     last.complete, last.message, sum(t.seconds for t in tubes), tuple(cat["states"]), tuple(how),
                     last.mu_last)
