"""One progress mechanism for every long step (features, Gram, flows, claims).

A tqdm bar on stderr. It is on when asked (``enabled=True``) or, by default, when stderr is
a terminal; it stays hidden for the first :data:`DELAY` seconds, so short steps print
nothing and every step that takes longer shows itself, whatever its size. In a notebook
the widget bar is used only when ``ipywidgets`` is installed (otherwise tqdm warns
"IProgress not found"), and the text bar is used instead.

``NTKCHECK_PROGRESS_DELAY`` (seconds) overrides the delay, e.g. ``0`` to show every bar.

Every update of a bar, shown or hidden, is also a checkpoint of the time budget
(:func:`ntkcheck._budget.checkpoint`): inside a stoppable scope whose deadline has passed it raises
:class:`~ntkcheck._budget.OutOfTime`, so every long loop that reports its progress also stops on time.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from ._budget import checkpoint

__all__ = ["DELAY", "progress_bar"]

#: seconds before a bar appears: steps shorter than this print nothing
DELAY = 1.0


def _delay() -> float:
    raw = os.environ.get("NTKCHECK_PROGRESS_DELAY")
    if raw is None:
        return DELAY
    try:
        return max(0.0, float(raw))
    except ValueError:
        return DELAY


def progress_bar(
    total: float | None = None,
    *,
    desc: str,
    unit: str,
    enabled: bool | None = None,
    iterable: Iterable[Any] | None = None,
    fractional: bool = False,
) -> Any:
    """A progress bar in real units.

    Parameters
    ----------
    total : float, optional
        Amount of work in ``unit`` (atom-heads, flow time, claims).
    desc, unit : str
        What is done and in which unit.
    enabled : bool or None
        ``True`` / ``False`` force the bar on or off (``--progress`` / ``--no-progress``);
        ``None`` shows it when stderr is a terminal.
    iterable : iterable, optional
        Wrap an iterable instead of counting by hand.
    fractional : bool
        The unit is continuous (flow time): counts print with three significant digits.
    """
    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm as base
    else:
        from tqdm import tqdm as base
    tqdm = _checked_bar(base)

    disable = (not sys.stderr.isatty()) if enabled is None else (not enabled)
    kw: dict[str, Any] = {"total": total, "desc": desc, "unit": unit, "disable": disable, "leave": False,
                          "file": sys.stderr, "delay": _delay(), "mininterval": 0.25}
    if fractional:
        kw["bar_format"] = ("{desc}: {percentage:3.0f}%|{bar}| {n:.3g}/{total:.3g} " + unit
                            + " [{elapsed}<{remaining}{postfix}]")
    else:
        kw["unit_scale"] = True
    if iterable is None:
        return tqdm(**kw)
    if kw["total"] is None and hasattr(iterable, "__len__"):
        kw["total"] = len(iterable)  # type: ignore[arg-type]
    return tqdm(_checked(iterable, desc), **kw)


@functools.lru_cache(maxsize=4)
def _checked_bar(base: type) -> type:
    """``base`` (a tqdm class) whose ``update`` is a checkpoint of the time budget first."""

    class Bar(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._stage = str(kwargs.get("desc") or "a step")  # a disabled tqdm keeps no desc
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> Any:
            checkpoint(self._stage)
            return super().update(n)

    return Bar


def _checked(iterable: Iterable[Any], desc: str) -> Iterator[Any]:
    """The items of ``iterable``, a checkpoint of the time budget before each (tqdm's own loop
    over an iterable does not call ``update``)."""
    for item in iterable:
        checkpoint(desc)
        yield item


class StepBar:
    """A bar over the named steps of one computation (``certify``: eigenvalues, Cholesky, exact rank).

    ``start(name, seconds)`` ends the previous step and names the next; a step estimated at
    :data:`DELAY` seconds or more, or any step once the computation has run that long, is shown
    at once (a bar is otherwise drawn only by an update, and one LAPACK call updates nothing for its
    whole duration). Every ``start`` is a checkpoint of the time budget. Use as a context manager.
    """

    def __init__(self, total: int, *, desc: str, enabled: bool | None) -> None:
        import time

        self._bar = progress_bar(total, desc=desc, unit="step", enabled=enabled)
        self._desc, self._started, self._t0 = desc, False, time.perf_counter()

    def start(self, name: str, seconds: float = 0.0) -> None:
        import time

        if self._started:
            self._bar.update(1)
        else:
            checkpoint(self._desc)
        self._started = True
        self._bar.set_description_str(f"{self._desc}: {name}", refresh=False)
        if not self._bar.disable and (seconds >= _delay() or time.perf_counter() - self._t0 >= _delay()):
            self._bar.refresh()

    def __enter__(self) -> StepBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.close()


class ClockBar:
    """A bar of the seconds spent against a time budget, for a step that reports no progress of its own
    (a decision: its routes check the budget, they do not count their work). A daemon thread updates it
    twice a second; nothing is shown for steps shorter than :data:`DELAY`. Use as a context manager."""

    def __init__(self, seconds: float, *, desc: str, enabled: bool | None) -> None:
        self._bar = progress_bar(float(seconds), desc=desc, unit="s", enabled=enabled, fractional=True)
        self._seconds = float(seconds)
        self._thread: Any = None

    def __enter__(self) -> ClockBar:
        import threading
        import time

        if self._bar.disable:
            return self
        stop = threading.Event()
        start = time.perf_counter()

        def tick() -> None:
            while not stop.wait(0.5):
                done = min(time.perf_counter() - start, self._seconds)
                self._bar.n = done  # no update(): the budget's checkpoints belong to the caller's thread
                if done >= _delay():
                    self._bar.refresh()

        self._stop = stop
        self._thread = threading.Thread(target=tick, name="ntkcheck: progress clock", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        self._bar.close()
