"""The verifier's one FLINT precision region: FLINT's precision is process-global.

Inside ntkcheck every precision is set by ``ntkcheck._precision`` under one re-entrant lock
(theory/certificates.md, "Threads"). The verifier imports nothing of the package, so it holds
that lock when the package is loaded in the same process (looked up in ``sys.modules``, never
imported), else a lock of its own. python-flint is optional: this region is entered only when it
is installed (:mod:`._balls` uses a private mpmath context otherwise).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Iterator

#: the lock used when ntkcheck is not loaded in this process
_OWN_LOCK = threading.RLock()


@contextlib.contextmanager
def _workprec(bits: int) -> Iterator[None]:
    """One FLINT precision region under ``ntkcheck._precision.PRECISION_LOCK`` when the package is
    loaded in this process (looked up in ``sys.modules``, never imported), else this module's lock."""
    ctx = importlib.import_module("flint").ctx
    pkg = sys.modules.get("ntkcheck._precision")
    with (_OWN_LOCK if pkg is None else pkg.PRECISION_LOCK), ctx.workprec(bits):
        yield


def _interval_context(bits: int) -> object:
    """A private mpmath interval context at ``bits`` of precision (an instance of its own: setting
    its precision changes no other context, so it needs no lock). Raises ImportError without mpmath."""
    ctx = importlib.import_module("mpmath.ctx_iv").MPIntervalContext()
    ctx.prec = int(bits)
    return ctx
