"""The verifier's one precision region: FLINT's precision is process-global.

Inside ntkcheck every precision is set by ``ntkcheck._precision`` under one re-entrant lock
(theory/certificates.md, "Threads"). The verifier imports nothing of the package, so it holds
that lock when the package is loaded in the same process (looked up in ``sys.modules``, never
imported), else a lock of its own.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from flint import ctx

#: the lock used when ntkcheck is not loaded in this process
_OWN_LOCK = threading.RLock()


@contextlib.contextmanager
def _workprec(bits: int) -> Iterator[None]:
    """One FLINT precision region under ``ntkcheck._precision.PRECISION_LOCK`` when the package is
    loaded in this process (looked up in ``sys.modules``, never imported), else this module's lock."""
    pkg = sys.modules.get("ntkcheck._precision")
    with (_OWN_LOCK if pkg is None else pkg.PRECISION_LOCK), ctx.workprec(bits):
        yield
