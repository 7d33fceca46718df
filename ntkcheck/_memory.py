"""Memory estimates before allocation: what the machine has, and a refusal when a request exceeds it.

Every allocation that grows with a size the user chose (heads, dimension, layers, records,
examples, seeds, workers, the shape a file header claims, the decompressed size of a zip
member) is estimated first and compared with :func:`available_memory`. A request over it
raises :class:`MemoryLimitError` (an :class:`~ntkcheck.errors.InputError`: exit status 2 on
the command line) that states the estimate, what is available and the option to lower,
instead of a ``MemoryError`` traceback or a machine that swaps.

The available memory is read once per process: ``MemAvailable`` of ``/proc/meminfo``
(Linux), else the free physical pages (``os.sysconf``), else 4 GiB; a soft ``RLIMIT_AS``
of this process lowers it to what is left of the address space. ``NTKCHECK_MEMORY_LIMIT``
(bytes, or a number with a ``K``/``M``/``G``/``T`` suffix) caps it: for shared machines,
and for tests that check a refusal without allocating.
"""

from __future__ import annotations

import functools
import os
import re

from .errors import InputError

__all__ = ["MemoryLimitError", "available_memory", "format_bytes", "require_memory", "MEMORY_ENV"]

#: environment variable that caps the memory ntkcheck assumes it may use
MEMORY_ENV = "NTKCHECK_MEMORY_LIMIT"

#: assumed when the operating system does not say (no /proc, no sysconf)
FALLBACK_BYTES = 4 << 30

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class MemoryLimitError(InputError):
    """A request whose memory estimate exceeds what the machine has available."""


def _parse_size(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)i?B?\s*", text, flags=re.IGNORECASE)
    if m is None:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _sysconf_available() -> int | None:
    try:
        pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def _address_space_left() -> int | None:
    """What a soft ``RLIMIT_AS`` leaves of this process's address space (None without a limit)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    used = 0
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(soft - used, 0)


@functools.lru_cache(maxsize=1)
def _machine_available() -> int:
    found = _meminfo_available() or _sysconf_available() or FALLBACK_BYTES
    left = _address_space_left()
    return min(found, left) if left is not None else found


def available_memory() -> int:
    """Bytes ntkcheck may allocate: the machine's available memory (read once per process),
    capped by ``NTKCHECK_MEMORY_LIMIT`` when it is set (read at each call)."""
    avail = _machine_available()
    cap = os.environ.get(MEMORY_ENV)
    if cap:
        limit = _parse_size(cap)
        if limit is None:
            raise InputError(f"{MEMORY_ENV}={cap!r}: expected a number of bytes, e.g. 2000000000 or 2G")
        avail = min(avail, limit)
    return avail


def format_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps a number >= 1 (``"5.6 GiB"``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def require_memory(nbytes: float, what: str, lower: str) -> None:
    """Refuse a request whose estimate ``nbytes`` exceeds :func:`available_memory`.

    Parameters
    ----------
    nbytes : float
        The estimate (bytes) of what the request would allocate at its peak.
    what : str
        What would be allocated, for the message ("the heads (H, d, d)").
    lower : str
        What to lower ("--heads"), for the message.

    Raises
    ------
    MemoryLimitError
        With the estimate, the available memory and the option to lower.
    """
    avail = available_memory()
    if nbytes > avail:
        raise MemoryLimitError(f"{what} would need about {format_bytes(nbytes)} of memory, more than the "
                               f"{format_bytes(avail)} available; lower {lower}")
