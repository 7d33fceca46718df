"""The notebooks run top to bottom and reach the conclusions they state.

Each notebook (jupytext percent-format ``.py`` in ``notebooks/``) is converted to an
nbformat notebook, a final cell is appended that prints the notebook's verdict variables
as JSON, and the whole is executed by nbclient in a fresh ``python3`` kernel — as a
reader running it in Jupyter would — with ``NTKCHECK_NOTEBOOK_SMALL=1`` (small sizes)
and the figures redirected to a temporary directory. The kernel route (rather than
``runpy``) is used because it is what the notebooks are for: it catches cells that only
work when run as a script, e.g. a reliance on ``__file__``.

The kernel gets one BLAS thread, as each xdist worker has (``tests/suite_run.py``): with the
default two, beside the other worker on two cores, the spinning threads of the many small
Cholesky factorisations of notebook 04's certificate cell doubled its CPU time (11 s against 4.7 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

jupytext = pytest.importorskip("jupytext", reason="notebook tests need the test extras (jupytext)")
nbformat = pytest.importorskip("nbformat", reason="notebook tests need the test extras (nbformat)")
nbclient = pytest.importorskip("nbclient", reason="notebook tests need the test extras (nbclient)")
pytest.importorskip("ipykernel", reason="notebook tests need the test extras (ipykernel)")

#: per-cell timeout: generous against a loaded 2-core machine (each notebook takes ~10-20 s)
CELL_TIMEOUT = 300
#: one BLAS (and OpenMP) thread in the kernel, as in each xdist worker
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

#: notebook -> (verdict variables, figures it writes)
EXPECTED = {
    "01_seed_examples.py": (("all_as_predicted", "margin_decreasing"), ("01_cgfs.png", "01_margins.png")),
    "02_overlap.py": (("table_reproduced",), ("02_overlap_spectra.png",)),
    "03_screening.py": (("bundled_ok", "user_ok", "q_zero_singular", "q_positive_ok"), ("03_screen_report.png", "03_init_scales.png")),
    "04_local_convergence.py": (("theorem_ok", "linear_regime", "plateau_seen", "certified_ok"),
                                ("04_local_convergence.png", "04_plateau.png", "04_eps_sweep.png",
                                 "04_certificate.png")),
    "05_limits.py": (("all_ran", "none_inconsistent", "all_consistent"),
                     ("05_chaos-tokens.png", "05_heads-lln.png", "05_depth-heads.png", "05_langevin.png",
                      "05_low-temperature.png", "05_chaos-tokens_time.png", "05_langevin_time.png",
                      "05_low-temperature_time.png", "05_langevin_free_energy.png", "05_stability.png",
                      "05_stability_constants.png", "05_joint-fluctuations.png",
                      "05_joint-fluctuations_surface.png")),
}


def test_every_notebook_is_tested():
    present = {p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.py")}
    assert present == set(EXPECTED), f"notebooks without a test (or tests without a notebook): {present ^ set(EXPECTED)}"


def _run(name: str, variables: tuple[str, ...], figure_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, list]:
    nb = jupytext.read(NOTEBOOKS / name)
    pairs = ", ".join(f"{v!r}: bool({v})" for v in variables)
    probe = "import json as _json\nprint('VERDICTS=' + _json.dumps({" + pairs + "}))"
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    # The kernel inherits this process's environment.
    for var, value in ONE_THREAD.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("NTKCHECK_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("NTKCHECK_FIGURE_DIR", str(figure_dir))
    # no MPLBACKEND: the kernel picks matplotlib's inline backend, as in Jupyter
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    text = "".join(
        out.get("text", "") for out in nb.cells[-1].outputs if out.get("output_type") == "stream"
    )
    line = next((ln for ln in text.splitlines() if ln.startswith("VERDICTS=")), None)
    assert line is not None, f"{name}: the final cell printed no verdicts: {text!r}"
    return json.loads(line[len("VERDICTS="):]), nb.cells


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_and_reaches_its_conclusions(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Every notebook runs top to bottom in a kernel, every verdict variable it ends on is
    True (e.g. 01: every seed example decided as the theory predicts; 02: the Prop. 8 table of
    theory/ntk-prop8.md reproduced), and every figure it promises is written."""
    variables, figures = EXPECTED[name]
    verdicts, cells = _run(name, variables, tmp_path, monkeypatch)
    assert verdicts == dict.fromkeys(variables, True), f"{name}: {verdicts}"
    missing = [f for f in figures if not (tmp_path / f).is_file() or (tmp_path / f).stat().st_size == 0]
    assert not missing, f"{name} did not write {missing}"
    unlabelled = {f: bad for f in figures if (bad := _unlabelled(tmp_path / f))}
    assert not unlabelled, f"{name}: panels without a title or a y label: {unlabelled}"
    # in a kernel every figure is also shown inline (issue 13: the notebooks forced Agg and
    # showed nothing): one image/png display output per figure written
    outputs = [out for cell in cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    images = [out for out in outputs if "image/png" in out.get("data", {})]
    assert len(images) == len(figures), f"{name}: {len(images)} inline figures, expected {len(figures)}"
    # and no widget warning from a progress bar (TqdmWarning: IProgress not found), nor a numpy
    # warning leaked to the reader (05's error surface printed "RuntimeWarning: Mean of empty slice")
    stderr = "".join(out.get("text", "") for out in outputs if out.get("name") == "stderr")
    assert "IProgress" not in stderr and "TqdmWarning" not in stderr, stderr[:500]
    assert "RuntimeWarning" not in stderr, stderr[:500]


def _unlabelled(png: Path) -> list[str]:
    """Panels of a saved figure without a title (theirs or the figure's) or without a y label,
    read from the labels ``notebooks/_nbsetup.save`` writes into the PNG (issue 25: the eps sweep
    and the plateau figures had neither)."""
    from PIL import Image

    with Image.open(png) as im:
        meta = json.loads(im.text["Description"])
    return [f"panel {k}: " + ", ".join(w for w, ok in (("no title", a["title"] or meta["suptitle"]),
                                                       ("no y label", a["ylabel"])) if not ok)
            for k, a in enumerate(meta["axes"]) if not (a["title"] or meta["suptitle"]) or not a["ylabel"]]


def test_script_outside_the_environment_prints_a_hint(tmp_path: Path):
    """``cd notebooks && python 02_overlap.py`` with an interpreter that cannot import ntkcheck
    stops at the first cell with the command to use instead (simulated with ``python -E -S``:
    no site-packages and no PYTHONPATH, so neither numpy nor ntkcheck can be imported)."""
    res = subprocess.run([sys.executable, "-E", "-S", "02_overlap.py"], cwd=NOTEBOOKS,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Run them with the project's environment" in res.stderr and "02_overlap.py" in res.stderr
    assert "Traceback" not in res.stderr


def _ruff() -> str | None:
    """ruff beside this interpreter (the venv's bin/, where the test extra installs it), else on PATH."""
    here = Path(sys.executable).with_name("ruff")
    return str(here) if here.is_file() else shutil.which("ruff")


@pytest.mark.skipif(_ruff() is None, reason="ruff not installed (it is in the test extra)")
def test_notebooks_pass_ruff():
    """Notebooks are code (STYLE.md habit 9): they pass the project's ruff settings."""
    res = subprocess.run(
        [_ruff() or "ruff", "check", "--quiet", str(NOTEBOOKS)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_notebooks_are_percent_format():
    """jupytext reads every notebook as percent format (a stray edit can silently turn cells into one)."""
    for name in EXPECTED:
        nb = jupytext.read(NOTEBOOKS / name)
        kinds = {c.cell_type for c in nb.cells}
        assert kinds == {"markdown", "code"}, f"{name}: cell types {kinds}"
        assert len(nb.cells) >= 6, f"{name}: only {len(nb.cells)} cells"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def test_a_notebook_runs_from_another_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A kernel started outside ``notebooks/`` (Jupyter opened at the repository root, or anywhere)
    still finds ``_nbsetup`` (issue 33): the first cell looks for it beside the installed package."""
    import jupytext
    import nbclient

    nb = jupytext.read(NOTEBOOKS / "02_overlap.py")
    for var, value in ONE_THREAD.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("NTKCHECK_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("NTKCHECK_FIGURE_DIR", str(tmp_path / "figures"))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert any((tmp_path / "figures").glob("*.png"))
