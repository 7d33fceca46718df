"""The sweep's summary says which lambda_min it reports (issue 25, item 5).

On dependent data (the bundled example's product triple) every row's full Gram is singular
(lambda_min ~1e-32, "certified no") while the summary's "best median lambda_min" is the median of
lambda_min on the samples outside the dependency: the line must say so. Reference: the medians
recomputed here with numpy from the rows' own columns.
"""

from __future__ import annotations

import numpy as np

from ntkcheck.distributed import sweep
from ntkcheck.io.files import bundled_path


def test_best_line_names_the_gram_outside_the_dependency():
    r = sweep(bundled_path(), q_scales=(0.5, 2.0), seeds=(0, 1), serial=True)
    assert all(row.relative_lambda_min < 1e-12 and not row.certified for row in r.rows)  # the full Gram
    best = {q: float(np.median([row.complement_lambda_min for row in r.rows if row.q_scale == q])) for q in (0.5, 2.0)}
    rel = {q: float(np.median([row.complement_relative_lambda_min for row in r.rows if row.q_scale == q]))
           for q in (0.5, 2.0)}
    q = max(rel, key=rel.get)  # ranked by the relative lambda_min (issue 33): a scale stretches the spectrum
    (b,) = r.best()
    assert (b["q_scale"], b["median_lambda_min"], b["lambda_min_of"]) == (q, best[q], "outside the dependency")
    assert b["median_relative_lambda_min"] == rel[q]
    lines = r.table().splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("best median relative lambda_min"))
    assert "outside the dependency" in lines[k]
    assert f"{rel[q]:.3g} (lambda_min {best[q]:.4g}) at q_scale {q:g}" in lines[k + 1]
    assert "not the full Gram" in lines[k + 1]
    assert max(len(ln) for ln in lines[k:]) <= 100


def test_best_line_on_independent_data_is_the_full_gram(tmp_path):
    rng = np.random.default_rng(2)
    f = tmp_path / "x.npz"
    np.savez(f, **{f"sample_{i}": rng.standard_normal((4, 3)) for i in range(3)})
    r = sweep(str(f), q_scales=(1.0,), serial=True)
    (b,) = r.best()
    assert b["lambda_min_of"] == "all samples" and b["median_lambda_min"] == r.rows[0].lambda_min
    (line,) = [ln for ln in r.table().splitlines() if ln.startswith("best median")]
    assert "outside" not in line and f"{r.rows[0].lambda_min:.4g}" in line
