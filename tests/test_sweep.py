"""Screening sweeps (ntkcheck.sweep, ``ntkcheck sweep``): the Dask path against the serial path.

Every Dask test runs a ``LocalCluster`` with ``processes=False`` (workers are threads of this
process: starting two worker processes costs 8-14 s on the shared test machine, threads ~1 s)
and 1 thread per worker unless stated. A task runs exactly the serial computation on the same
laws and heads, so results are compared with ``==`` (bit for bit), no tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("distributed")

from distributed import LocalCluster  # noqa: E402

from ntkcheck.cgf import as_laws  # noqa: E402
from ntkcheck.cli import main  # noqa: E402
from ntkcheck.errors import InputError  # noqa: E402
from ntkcheck.io.files import bundled_path, load_samples  # noqa: E402
from ntkcheck.ntk.features import init_heads  # noqa: E402
from ntkcheck.ntk.gram_matrix import gram  # noqa: E402
from ntkcheck.sweep import sweep, sweep_grid  # noqa: E402

GRID = dict(q_scales=(0.5, 1.0), b_scales=(0.5, 1.0), seeds=(0, 1))


@pytest.fixture(scope="module")
def serial():
    return sweep(bundled_path(), serial=True, **GRID)


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as c:
        yield c


def test_serial_rows_cover_grid_in_order(serial):
    f = str(bundled_path())
    keys = [r.key for r in serial.rows]
    expected = [(f, 48, q, b, s) for (f_, h, q, b, s) in sweep_grid([f], GRID["q_scales"], GRID["b_scales"],
                                                                     [48], GRID["seeds"])]
    assert keys == expected
    assert serial.mode == "serial"


def test_rows_match_gram_computed_directly(serial):
    """Independent reference: the Gram of the same laws and heads, built here without screen()."""
    laws = as_laws(load_samples(bundled_path()))
    for r in serial.rows:
        g = gram(laws, init_heads(r.heads, laws[0].dim, q_scale=r.q_scale, b_scale=r.b_scale, seed=r.seed))
        assert r.lambda_min == g.lambda_min
        assert r.relative_lambda_min == g.relative_lambda_min
        # the bundled samples are dependent: full Gram singular, the rest certified positive
        assert r.weak == "dependent" and not r.certified and r.crosscheck == "agrees"
        assert r.complement_certified is True and r.complement_lambda_min > 0


def test_complement_matches_gram_of_complement(serial):
    """The 'outside the dependency' column is the Gram of samples 0-3 (the bundled file's
    independent part, named by ``screen``), computed here directly."""
    laws = as_laws(load_samples(bundled_path()))
    sub = laws[:4]
    for r in serial.rows:
        g = gram(sub, init_heads(r.heads, laws[0].dim, q_scale=r.q_scale, b_scale=r.b_scale, seed=r.seed))
        assert r.complement_lambda_min == g.lambda_min


def test_dask_local_cluster_equals_serial_bit_for_bit(serial):
    """Default path: sweep() starts its own LocalCluster (2 workers, 1 thread, in-process)."""
    d = sweep(bundled_path(), workers=2, threads=1, processes=False, **GRID)
    assert d.mode.startswith("dask ")
    assert d.values() == serial.values()


def test_dask_scheduler_address_and_streaming(serial, cluster):
    seen = []
    d = sweep(bundled_path(), scheduler=cluster.scheduler_address, on_row=lambda r, k, n: seen.append((k, n, r.key)),
              **GRID)
    assert d.values() == serial.values()
    assert [k for k, _, _ in seen] == list(range(1, 9)) and {n for _, n, _ in seen} == {8}
    assert sorted(key for _, _, key in seen) == [r.key for r in serial.rows]


def test_two_threads_in_one_worker_equal_serial(serial):
    """Screens in one process are serialised by a lock (process-global Arb / mpmath precision):
    without it, two threads screening at once returned an "inconclusive" weak verdict."""
    d = sweep(bundled_path(), workers=1, threads=2, processes=False, **GRID)
    assert d.values() == serial.values()


def test_median_grid_and_best_against_numpy(serial):
    f = str(bundled_path())
    qs, bs, Z = serial.median_grid(f, 48)
    assert qs == [0.5, 1.0] and bs == [0.5, 1.0]
    for i, q in enumerate(qs):
        for j, b in enumerate(bs):
            v = [r.complement_lambda_min for r in serial.rows if (r.q_scale, r.b_scale) == (q, b)]
            assert len(v) == 2 and Z[i, j] == np.median(v)
    (best,) = serial.best()
    assert best["median_lambda_min"] == Z.max() and best["certified_seeds"] == 2


def test_two_files_and_head_counts(tmp_path):
    rng = np.random.default_rng(5)
    p = tmp_path / "t.npy"
    np.save(p, rng.standard_normal((3, 4, 2)))
    r = sweep([str(p), str(bundled_path())], heads=(24, 30), serial=True)
    assert [(row.file, row.heads) for row in r.rows] == [(str(p), 24), (str(p), 30),
                                                         (str(bundled_path()), 24), (str(bundled_path()), 30)]
    laws = as_laws(load_samples(p))
    g = gram(laws, init_heads(30, 2, seed=0))
    assert r.rows[1].lambda_min == g.lambda_min and r.rows[1].complement_lambda_min is None


@pytest.mark.parametrize("kw, msg", [
    (dict(q_scales=(-1.0,)), "q_scales"),
    (dict(b_scales=()), "b_scales"),
    (dict(heads=(0,)), "heads"),
    (dict(seeds=(-1,)), "seeds"),
    (dict(dist="cauchy"), "dist"),
])
def test_bad_input(kw, msg):
    with pytest.raises(InputError, match=msg):
        sweep(bundled_path(), serial=True, **kw)


def test_cli_json_and_plot(tmp_path, capsys):
    png = tmp_path / "s.png"
    assert main(["sweep", "--serial", "--q-scales", "0.5,1", "--b-scales", "1", "--json", "--plot", str(png)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [row["q_scale"] for row in d["rows"]] == [0.5, 1.0] and png.stat().st_size > 0
    assert d["mode"] == "serial" and d["best"][0]["file"] == str(bundled_path())


def test_cli_bad_input_one_line(capsys):
    assert main(["sweep", "--serial", "/no/such/file.npz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]


def test_rows_follow_the_order_the_files_were_given(tmp_path):
    """Rows come in the order the files were given, whatever their paths sort to."""
    p = tmp_path / "t.npy"
    np.save(p, np.random.default_rng(6).standard_normal((3, 4, 2)))
    for files in ([str(p), str(bundled_path())], [str(bundled_path()), str(p)]):
        r = sweep(files, heads=(24,), q_scales=(1.0,), b_scales=(1.0,), seeds=(0,), serial=True)
        assert [row.file for row in r.rows] == files
