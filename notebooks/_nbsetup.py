"""Shared set-up of the notebooks: the interpreter check, the size switch, where figures go.

Import it first: outside an environment where ntkcheck is installed (e.g. the system
``python`` after ``cd notebooks``) it stops with the command to use instead.

``NTKCHECK_NOTEBOOK_SMALL=1`` (set by ``tests/test_notebooks.py``) shrinks every
experiment; ``NTKCHECK_FIGURE_DIR`` redirects the figures (default ``notebooks/figures/``).

Figures: :func:`save` writes each figure to that directory. In Jupyter (an IPython kernel)
the figure stays open, so the inline backend shows it under the cell; run as a script it
is closed after saving. The matplotlib backend is never forced.

Progress bars: ntkcheck's bars are off unless asked for (``progress=True``); without
``ipywidgets`` a notebook gets the plain text bar, never the widget warning.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def _require_ntkcheck() -> None:
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401

        import ntkcheck  # noqa: F401
    except ImportError as exc:
        venv = _HERE.parent / ".venv" / "bin" / "python"
        script = Path(sys.argv[0]).name if sys.argv and sys.argv[0].endswith(".py") else "NOTEBOOK.py"
        hint = (f"  {os.path.relpath(venv)} {script}" if venv.exists() else
                "  python3 -m venv .venv && .venv/bin/pip install -e '.[test]'   (from the repository root)")
        raise SystemExit(
            f"the notebooks need ntkcheck and its dependencies, which {sys.executable} cannot import "
            f"({exc.name}).\nRun them with the project's environment:\n{hint}"
        ) from None


_require_ntkcheck()

SMALL = os.environ.get("NTKCHECK_NOTEBOOK_SMALL") == "1"


def figure_dir() -> Path:
    """``$NTKCHECK_FIGURE_DIR`` or ``notebooks/figures/``, created if missing."""
    out = Path(os.environ["NTKCHECK_FIGURE_DIR"]) if "NTKCHECK_FIGURE_DIR" in os.environ else _HERE / "figures"
    out.mkdir(parents=True, exist_ok=True)
    return out


FIGURES = figure_dir()


def in_kernel() -> bool:
    """True inside an IPython kernel (Jupyter, nbclient), where figures display inline."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def labels(fig: Any) -> dict[str, Any]:
    """The figure's title and each data panel's title, x and y labels (colorbars and empty
    panels left out; a panel sharing its y axis takes the label its siblings show, and a figure's
    ``supylabel`` counts for every panel)."""
    def text(name: str) -> str:
        t = getattr(fig, name, None)
        return t.get_text() if t is not None else ""
    axes = []
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>" or not ax.axison:
            continue
        shared = [s.get_ylabel() for s in ax.get_shared_y_axes().get_siblings(ax)]
        axes.append({"title": ax.get_title(), "xlabel": ax.get_xlabel(),
                     "ylabel": ax.get_ylabel() or next((y for y in shared if y), "") or text("_supylabel")})
    return {"suptitle": text("_suptitle"), "axes": axes}


def save(fig: Any, name: str, dpi: int = 120) -> Path:
    """Write ``fig`` to ``FIGURES / name`` with its :func:`labels` in the PNG's ``Description``
    (the tests read them); keep it open for inline display in a kernel, close it as a script."""
    import json

    path = FIGURES / name
    fig.savefig(path, dpi=dpi, metadata={"Description": json.dumps(labels(fig))})
    if not in_kernel():
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path
