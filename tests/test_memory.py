"""Memory estimates before allocation (ntkcheck._memory): what is available, and the refusal."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ntkcheck._memory import (
    MEMORY_ENV,
    MemoryLimitError,
    _parse_size,
    available_memory,
    format_bytes,
    require_memory,
)
from ntkcheck.errors import InputError


def test_sizes_parse_with_binary_units():
    assert _parse_size("2G") == 2 * 2**30
    assert _parse_size("512M") == 512 * 2**20
    assert _parse_size("1.5GiB") == int(1.5 * 2**30)
    assert _parse_size("1000") == 1000
    assert _parse_size("lots") is None


def test_the_environment_caps_what_is_available(monkeypatch):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    machine = available_memory()
    assert machine > 0
    monkeypatch.setenv(MEMORY_ENV, "1M")
    assert available_memory() == min(machine, 2**20)
    monkeypatch.setenv(MEMORY_ENV, "a lot")
    with pytest.raises(InputError, match=MEMORY_ENV):
        available_memory()


def test_a_request_over_the_limit_is_refused_with_its_estimate(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "1G")
    require_memory(2**29, "half a gibibyte", "--heads")  # fits: no error
    with pytest.raises(MemoryLimitError) as exc:
        require_memory(5 * 2**30, "the heads", "--heads")
    msg = str(exc.value)
    assert "5.0 GiB" in msg and "1.0 GiB available" in msg and "lower --heads" in msg
    assert isinstance(exc.value, InputError)  # exit status 2 on the command line


def test_format_bytes_uses_binary_units():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2**20) == "3.0 MiB"
    assert format_bytes(5.6 * 2**30) == "5.6 GiB"


def test_an_address_space_limit_lowers_what_is_available():
    """A ``ulimit -v`` (RLIMIT_AS) leaves less than the machine: the estimate must see it, or an
    allocation it accepts fails as MemoryError. Checked in a child under a 3 GiB limit: what
    is available is at most the limit minus what the child already maps (its VmSize)."""
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30));"
        "from ntkcheck._memory import available_memory;"
        "size = [int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize')][0];"
        "a = available_memory(); print(a, size)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"})
    avail, size = map(int, out.stdout.split())
    assert 0 < avail <= (3 << 30) - size + (64 << 20)  # 64 MiB: what the child mapped after reading VmSize
