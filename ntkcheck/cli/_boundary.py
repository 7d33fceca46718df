"""What the command line shows when something goes wrong: one line, never a traceback.

:func:`run_guarded` runs a subcommand and turns

* an :class:`~ntkcheck.errors.NtkcheckError` (bad input, a memory estimate over what the machine
  has) into ``ntkcheck <verb>: error: <message>`` and exit status 2;
* a ``MemoryError`` that escaped the estimates into one line naming the remedy (exit 2);
* Ctrl-C into ``ntkcheck <verb>: interrupted`` and status 130;
* a closed stdout (``ntkcheck screen | head -1``) into a quiet end, status 141 (128 + SIGPIPE);
* any other exception into one line with its type, message and a request to report it, and
  :data:`EXIT_INTERNAL` (4). This is a safety net: inputs are validated where they enter,
  and the bad-input suite (``tests/cli/test_bad_input.py``) checks that no case reaches it.

:func:`plain_warnings` shows each warning as ``ntkcheck <verb>: warning: <message>`` on stderr
(not Python's ``file:line: Category: message`` record with a source path), whatever the
warning filters of the caller (a test run that turns warnings into errors included).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from ..errors import NtkcheckError
from ._args import EXIT_BAD_INPUT

__all__ = ["EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "OneLineParser", "plain_warnings", "run_guarded",
           "REPORT_TO"]

#: an unexpected error inside ntkcheck (a bug: the one-line message asks for a report)
EXIT_INTERNAL = 4
#: interrupted by Ctrl-C (128 + SIGINT, the shell's convention)
EXIT_INTERRUPTED = 130
#: the reader of stdout closed it (128 + SIGPIPE, what ``yes | head -1`` leaves)
EXIT_BROKEN_PIPE = 141

#: where to report an internal error
REPORT_TO = "the ntkcheck issue tracker"


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, wrapping lines only at spaces: an option named in a help text
    (``--min-relative-lambda``) is never cut at one of its hyphens."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (the usage is in ``--help``), exit status 2,
    and whose help text is wrapped at spaces only.

    Subparsers made by ``add_subparsers`` are of the same class, so every subcommand's errors
    read ``ntkcheck VERB: error: argument --seed: expected ... (see ntkcheck VERB --help)``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


def _one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 5] + " ..."


@contextlib.contextmanager
def plain_warnings(verb: str) -> Iterator[None]:
    """Within the block, every warning is printed once as one plain line on stderr."""
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        print(f"ntkcheck {verb}: warning: {_one_line(str(message))}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")  # shown once per place, never raised (a caller's "error" filter included)
        warnings.showwarning = show
        yield


def _stdout_closed() -> int:
    """The reader of stdout went away (``ntkcheck screen | head -1``): end quietly, as a shell tool does
    (status 128 + SIGPIPE), pointing stdout at /dev/null so the interpreter's last flush stays silent."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout without a descriptor (captured in tests)
        pass
    return EXIT_BROKEN_PIPE


def run_guarded(verb: str, func: Callable[[], Any]) -> int:
    """Run ``func`` (a subcommand) and return its exit status; errors become one line on stderr."""
    try:
        with plain_warnings(verb):
            code = int(func() or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's own flush at exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except NtkcheckError as exc:
        print(f"ntkcheck {verb}: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print(f"ntkcheck {verb}: error: out of memory: the request does not fit in this machine's memory; "
              "lower the sizes (heads, samples, dimension, layers, records)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"ntkcheck {verb}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 (the safety net: one line instead of a traceback)
        where = _origin(exc)
        print(f"ntkcheck {verb}: internal error: {type(exc).__name__}: {_one_line(str(exc))}{where}; "
              f"this is a bug in ntkcheck, please report it with the command line to {REPORT_TO}",
              file=sys.stderr)
        return EXIT_INTERNAL


def _origin(exc: BaseException) -> str:
    """`` (in module.function)`` of the innermost ntkcheck frame of the traceback, for the report."""
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        mod = tb.tb_frame.f_globals.get("__name__", "")
        if isinstance(mod, str) and mod.startswith("ntkcheck"):
            where = f" (in {mod}.{tb.tb_frame.f_code.co_name})"
        tb = tb.tb_next
    return where
