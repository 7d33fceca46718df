"""Make docs/screen_report.png, the screening figure of the README tour.

``ntkcheck.screen()`` on the bundled example (no data given), drawn by
``ntkcheck.plot_report``; the same figure as ``ntkcheck screen --plot FILE.png``.
Run from the repository root: ``python docs/screen_report.py``.
"""

from pathlib import Path

import ntkcheck
from ntkcheck.io.files import bundled_path

DEFAULT_OUT = Path(__file__).resolve().parent / "screen_report.png"


def main(out: Path = DEFAULT_OUT) -> Path:
    report = ntkcheck.screen(spectrum="full")  # every eigenvalue: the plot draws them
    print(report.bottom_line)
    return ntkcheck.plot_report(report, ntkcheck.load_samples(bundled_path()), out)


if __name__ == "__main__":
    print(main())
