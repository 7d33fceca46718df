"""Saving a matplotlib figure where the user asked: written, or one clear error, and closed either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = ["save_figure"]


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` and close it; an unwritable path is an :class:`InputError` naming it."""
    import matplotlib.pyplot as plt

    out = Path(path)
    try:
        fig.savefig(out, dpi=dpi)
    except OSError as exc:
        raise InputError(f"{out}: cannot write the plot ({exc})") from None
    finally:
        plt.close(fig)
    return out
