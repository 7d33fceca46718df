"""What the tests of one process share: a deterministic call made again with the same inputs returns the first
result instead of computing it again.

The README model's FixUp certificate (16 heads, 4 layers, four bundled samples) costs seconds for its proved
spectrum, the scan of its second-derivative bound and the profiles of the split region, and none of them depends
on the initial loss (``split_certificate``: "the profiles do not depend on the loss"). A dozen tests run that model
at other ``eps``, steps or integrators: with :func:`share_fixup_certificate` they compute those pieces once per
process, and only the loss-dependent rest (the threshold, the guarantee, the search on its region, the run)
again. Each test that does so still runs the whole command and asserts what it asserted before; nothing it
mutates is behind the memo (a mutated function is wrapped around the memoised one, never cached).

Keys are the arguments themselves: arrays by dtype, shape and bytes, dataclasses field by field, numbers by
their ``repr``, other objects by identity (they are kept alive with the entry, so an identity is never reused).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

#: (name, key of the arguments) -> (the objects keyed by identity, the result); per process
_STORE: dict[tuple, tuple[list[Any], Any]] = {}


def _key(obj: Any, alive: list[Any]) -> Any:
    if isinstance(obj, np.ndarray):
        return ("ndarray", obj.dtype.str, obj.shape, obj.tobytes())
    if obj is None or isinstance(obj, (bool, int, float, complex, str, np.generic)):
        return (type(obj).__name__, repr(obj))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_key(v, alive) for v in obj))
    if isinstance(obj, dict):
        return ("dict", tuple(sorted((k, _key(v, alive)) for k, v in obj.items())))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__qualname__, tuple((f.name, _key(getattr(obj, f.name), alive))
                                              for f in dataclasses.fields(obj)))
    alive.append(obj)
    return ("id", id(obj))


def memoised(fn: Any, name: str, ignore: tuple[str, ...] = ()) -> Any:
    """``fn`` with its results kept in :data:`_STORE` under ``name`` and its arguments (keyword arguments in
    ``ignore`` left out of the key: a time budget, a progress flag)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        alive: list[Any] = []
        k = (name, _key(args, alive), _key({a: v for a, v in kwargs.items() if a not in ignore}, alive))
        if k not in _STORE:
            _STORE[k] = (alive, fn(*args, **kwargs))
        return _STORE[k][1]

    return wrapper


def share(monkeypatch: Any, owner: Any, attr: str, ignore: tuple[str, ...] = ()) -> Any:
    """Replace ``owner.attr`` by its memoised version for this test (undone by ``monkeypatch``); returns it."""
    fn = memoised(getattr(owner, attr), f"{getattr(owner, '__qualname__', owner.__name__)}.{attr}", ignore)
    monkeypatch.setattr(owner, attr, fn)
    return fn


def share_fixup_certificate(monkeypatch: Any) -> None:
    """The loss-independent pieces of ``certificate_from_spectrum`` computed once per process: the proved
    spectrum, the scan of the second-derivative bound, the coercivity setup and its profiles."""
    import ntkcheck.convergence.guarantee as g
    import ntkcheck.convergence.spectrum_bound as sb
    from ntkcheck.convergence.coercivity.split import CoercivitySetup

    share(monkeypatch, sb, "certified_spectrum")
    share(monkeypatch, g, "_scan")
    share(monkeypatch, g, "coercivity_setup")
    share(monkeypatch, CoercivitySetup, "profile")


@contextlib.contextmanager
def fixup_certificate_shared() -> Iterator[None]:
    """:func:`share_fixup_certificate` for the block (where a function-scoped fixture cannot go: inside a
    hypothesis test, whose examples share the test's fixtures)."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        share_fixup_certificate(mp)
        yield
