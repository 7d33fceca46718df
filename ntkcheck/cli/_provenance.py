"""The ``provenance`` block of every ``--json``: what ran, on what, with which inputs.

A result can be traced and re-run from it: the ntkcheck version; the versions of Python,
numpy, scipy, mpmath and python-flint; the BLAS in use (``threadpoolctl`` when installed:
library, version, threads, threading layer, CPU kernel; else numpy's build configuration);
the command line; the seed options of the run; and a sha256 of each input file (the token
files, a heads file, a text file, a model folder's files; the bundled example when a command
read it because no PATH was given).

:func:`invocation` is set by :func:`ntkcheck.cli.main` for the duration of one command;
:func:`provenance` reads it (outside a command: no command line, seeds or inputs).
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import hashlib
import platform
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["invocation", "provenance", "sha256_file"]

_CURRENT: contextvars.ContextVar[tuple[list[str], argparse.Namespace] | None] = contextvars.ContextVar(
    "ntkcheck_invocation", default=None)

#: the distributions whose versions are recorded, under these keys
_VERSIONS = {"ntkcheck": "ntkcheck", "numpy": "numpy", "scipy": "scipy", "mpmath": "mpmath",
             "python_flint": "python-flint"}
#: arguments that name input files (``paths`` a list; ``model_dir`` a folder: its model files)
_FILE_ARGS = ("path", "paths", "heads_file", "texts", "matrix", "jacobian", "tokens", "targets")
#: commands that read the bundled example when no PATH is given
_BUNDLED_DEFAULT = {"screen": "path", "gram": "path", "flow": "path", "sweep": "paths"}
#: seed options recorded as given (``experiment --seeds`` is a count of seeds from ``--seed``)
_SEED_ARGS = ("seed", "seeds")


@contextlib.contextmanager
def invocation(argv: Sequence[str], args: argparse.Namespace) -> Iterator[None]:
    """Within this block, :func:`provenance` describes the command ``ntkcheck argv...``."""
    token = _CURRENT.set((list(argv), args))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def sha256_file(path: str | Path) -> str:
    """The hex sha256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _blas() -> dict[str, Any]:
    """The BLAS loaded in this process."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        import numpy as np

        try:
            cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        except (TypeError, KeyError):  # an older numpy: no configuration as data
            cfg = {}
        return {"source": "numpy build configuration",
                "libraries": [{"internal_api": cfg.get("name"), "version": cfg.get("version"), "num_threads": None,
                               "threading_layer": None, "architecture": None}]}
    keys = ("internal_api", "version", "num_threads", "threading_layer", "architecture")
    libs = [{k: lib.get(k) for k in keys} for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return {"source": "threadpoolctl", "libraries": libs}


def _input_files(verb: str, args: argparse.Namespace) -> list[Path]:
    files: list[Path] = []
    for name in _FILE_ARGS:
        v = getattr(args, name, None)
        for p in (v if isinstance(v, list) else [v]):
            if p is not None:
                files.append(Path(p))
    attr = _BUNDLED_DEFAULT.get(verb)
    if attr is not None and not getattr(args, attr, None):
        from ..io.files import bundled_path

        files.append(Path(bundled_path("screen_default.npz")))
    if verb == "tokens":
        from ..errors import InputError
        from ..io.models import model_dir

        with contextlib.suppress(InputError):
            folder = model_dir(getattr(args, "model_dir", None))
            files.extend(folder / n for n in ("config.json", "tokenizer.json", "model.safetensors"))
    return files


def provenance() -> dict[str, Any]:
    """The ``provenance`` object (described in every shipped ``*.schema.json``)."""
    out: dict[str, Any] = {key: _version(dist) for key, dist in _VERSIONS.items()}
    out["python"] = platform.python_version()
    out["blas"] = _blas()
    cur = _CURRENT.get()
    if cur is None:
        return {**out, "command_line": None, "seeds": {}, "inputs": []}
    argv, args = cur
    verb = str(getattr(args, "command", "") or "")
    seeds = {k: getattr(args, k) for k in _SEED_ARGS if getattr(args, k, None) is not None}
    inputs = [{"path": str(p), "sha256": sha256_file(p), "bytes": p.stat().st_size}
              for p in _input_files(verb, args) if p.is_file()]
    return {**out, "command_line": ["ntkcheck", *argv], "seeds": seeds, "inputs": inputs}
