"""Output paths given on the command line, checked before any work is done.

``--plot FILE`` names an image file: a suffix matplotlib can write (``.png``, ``.pdf``,
``.svg``, ...), or no suffix, which gets ``.png`` (and every message names the file actually
written). A directory, a parent directory that does not exist or an unsupported suffix is an
argparse error (one line, exit status 2) before the computation starts, not a traceback at
the end. ``-o`` / ``--heads-out`` likewise need an existing parent directory (``.npz`` is added
to a name without it, as ``numpy.savez`` does), and ``--certificate-out FILE.json`` a file name in an
existing directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["plot_path", "output_path", "certificate_path"]

#: formats of matplotlib's Agg-based canvases (``FigureCanvasBase.get_supported_filetypes``)
_IMAGE_SUFFIXES = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp", "pgf", "raw",
                   "rgba", "avif", "gif")


def _writable_place(p: Path, what: str) -> None:
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{p} is a directory; give a file name, e.g. {p / ('out' + what)}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{p}: the directory {parent} does not exist")


def plot_path(text: str) -> str:
    """An image file to write (argparse ``type``): a supported suffix, or none (``.png`` is added)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file name, got an empty string")
    p = Path(text)
    _writable_place(p, ".png")
    suffix = p.suffix.lower().lstrip(".")
    if not suffix:
        p = p.with_name(p.name + ".png")
        _writable_place(p, ".png")
    elif suffix not in _IMAGE_SUFFIXES:
        raise argparse.ArgumentTypeError(f"{text}: cannot write a figure as .{suffix}; use one of "
                                         f"{', '.join('.' + s for s in _IMAGE_SUFFIXES[:6])}, ...")
    return str(p)


def output_path(suffix: str) -> object:
    """An argparse ``type`` for a data file to write with ``numpy.savez``: ``suffix`` (``".npz"``) is
    appended when the name lacks it, as ``numpy.savez`` does, so messages name the file written."""
    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError("expected a file name, got an empty string")
        p = Path(text)
        _writable_place(p, suffix)
        if p.suffix.lower() != suffix:
            p = p.with_name(p.name + suffix)
            _writable_place(p, suffix)
        return str(p)

    return check


def certificate_path(text: str) -> str:
    """A certificate file to write (argparse ``type``): a file name in an existing directory, checked before
    the run (``.json`` is not added: the name given is the file written)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file name, got an empty string")
    _writable_place(Path(text), ".json")
    return text
