"""Shared set-up of the notebooks: the size switch and where figures go.

``NTKCHECK_NOTEBOOK_SMALL=1`` (set by ``tests/test_notebooks.py``) shrinks every
experiment; ``NTKCHECK_FIGURE_DIR`` redirects the figures (default ``notebooks/figures/``).
"""

from __future__ import annotations

import os
from pathlib import Path

SMALL = os.environ.get("NTKCHECK_NOTEBOOK_SMALL") == "1"


def figure_dir() -> Path:
    """``$NTKCHECK_FIGURE_DIR`` or ``notebooks/figures/``, created if missing."""
    out = Path(os.environ["NTKCHECK_FIGURE_DIR"]) if "NTKCHECK_FIGURE_DIR" in os.environ else Path(__file__).resolve().parent / "figures"
    out.mkdir(parents=True, exist_ok=True)
    return out


FIGURES = figure_dir()
