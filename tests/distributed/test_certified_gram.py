"""The certified lambda_min of a Gram kept in tiles on Dask workers (``distributed_gram(certify=True)``,
``ntkcheck sweep --one-gram --certify``) against the serial certificate and independent references.

References: numpy/LAPACK (Cholesky, solve, eigvalsh) for the blocked linear algebra; the serial
certificate (``certify_positive``: one LAPACK Cholesky of the Gram accumulated by ``syrk`` in
this process, a different code path) at the same shift; the Gram evaluated in Arb ball
arithmetic from the exact inputs (a rigorous upper bound on the exact lambda_min); exact
structure (a duplicated sample makes the exact Gram singular). The cluster is a ``LocalCluster``
of 2 in-process workers x 1 thread whose scheduler writes a scheduler file, so the HPC entry
point (``--scheduler-file``) is what the CLI tests use.
"""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest

pytest.importorskip("distributed")

from distributed import Client, LocalCluster  # noqa: E402

from ntkcheck.cgf import as_laws  # noqa: E402
from ntkcheck.cli import main  # noqa: E402
from ntkcheck.distributed import _tiled, distributed_gram, sweep  # noqa: E402
from ntkcheck.errors import InputError  # noqa: E402
from ntkcheck.ntk.certificate import rounding as rnd  # noqa: E402
from ntkcheck.ntk.certificate.routes import _gram_arb, certify_positive  # noqa: E402
from ntkcheck.ntk.gram_matrix.extremal import smallest  # noqa: E402
from ntkcheck.ntk.gram_matrix.features import DEFAULT_CHUNK, attention_features, init_heads  # noqa: E402


def _laws(n: int, N: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    return as_laws([rng.standard_normal((N, d)) / np.sqrt(d) for _ in range(n)])


@pytest.fixture(scope="module")
def scheduler_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("dask") / "scheduler.json"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      scheduler_kwargs={"scheduler_file": str(f)}):
        yield f


@pytest.fixture(scope="module")
def client(scheduler_file):
    with Client(json.loads(scheduler_file.read_text())["address"]) as c:
        yield c


def _tiles_of(client, A: np.ndarray, offsets: tuple[int, ...]) -> _tiled.Tiles:
    """Lower tiles of ``A`` scattered to the workers; the diagonal tiles' upper triangles are
    garbage (the routes must read only the lower triangle)."""
    futs = {}
    for i in range(len(offsets) - 1):
        for j in range(i + 1):
            T = A[offsets[i]:offsets[i + 1], offsets[j]:offsets[j + 1]].copy()
            if i == j:
                T = np.tril(T) + 5.0 * np.triu(T, 1)
            futs[i, j] = client.scatter(np.asfortranarray(T))
    return _tiled.Tiles(futs, offsets)


def test_blocked_cholesky_solve_and_product_against_lapack(client):
    """The tiled linear algebra, unequal tiles, against numpy on the whole matrix. Tolerances:
    both factorisations are backward stable on a matrix of condition ~1e3, so the factors agree to
    ~1e3 u relative (1e-11 allowed); solves likewise; products to the rounding of a length-300 dot."""
    rng = np.random.default_rng(0)
    n = 300
    X = rng.standard_normal((n, n + 40))
    A = X @ X.T
    lam = np.linalg.eigvalsh(A)[0]
    G = _tiles_of(client, A, (0, 70, 150, 151, 300))
    t = 0.5 * lam
    L = _tiled.cholesky(client, G, t)
    assert L is not None
    Lf = np.zeros((n, n))
    for (i, j), f in L.futures.items():
        Lf[G.offsets[i]:G.offsets[i + 1], G.offsets[j]:G.offsets[j + 1]] = f.result()
    As = A - t * np.eye(n)
    np.testing.assert_allclose(np.tril(Lf), np.linalg.cholesky(As), rtol=0, atol=1e-11 * np.sqrt(A.max()))
    b = rng.standard_normal(n)
    np.testing.assert_allclose(_tiled.solve(client, L, b), np.linalg.solve(As, b), rtol=1e-9)
    # entrywise: |y - A b| <= gamma_n |A||b| (n = 300), checked with a factor 10 of room
    assert np.all(np.abs(_tiled.matvec(client, G, b) - A @ b) <= 10 * 2 * n * rnd.U * (np.abs(A) @ np.abs(b)))
    np.testing.assert_array_equal(_tiled.diagonal(client, G), np.diag(A))
    # a shift just above lambda_min: G - tI is indefinite and the factorisation must fail
    assert _tiled.cholesky(client, G, lam * 1.001) is None


@pytest.fixture(scope="module")
def m2048():
    """M = 2048 atoms (256 samples of 8 tokens, d = 8), H d = 2 M: the issue's size."""
    laws = _laws(256, 8, 8, seed=0)
    return laws, init_heads(512, 8, seed=1)


def _template(statement: str) -> str:
    return re.sub(r"[-+]?\d[\d.]*(e[-+]?\d+)?", "#", statement)


def test_certificate_equals_the_serial_one_at_M2048(client, m2048):
    """Same heads: the distributed certificate is the serial one. The serial route's steps run
    here (``certify_positive`` is exactly these: the Gram by ``syrk`` over head blocks with its
    proved radius, LAPACK's Cholesky of fl(G), the Lanczos estimate, the Cholesky of fl(G) - tI):
    its shift 0.9 lam agrees with the distributed one to 1e-6 (each comes from its own ARPACK run
    at tol 1e-6, on factors equal up to rounding), and at the same t the bounds agree to 1e-12
    (the two Grams, traces and Collatz-Wielandt sums differ only in summation order, ~1e-15)."""
    laws, heads = m2048
    r = distributed_gram(laws, heads, client=client, tiles=4, certify=True)
    c = r.certificate
    assert c is not None and c.positive and c.method == "float64-cholesky"
    assert r.gram.certified is not None and r.gram.certified.lower_bound == c.lower_bound
    assert r.gram.status == "positive" and r.factorizations == 2 and r.tiles == 4
    enc = rnd.enclosed_gram(laws, heads, DEFAULT_CHUNK)
    work = rnd.SymmetricWork(enc.G)
    assert work.factor(0.0) is not None
    np.testing.assert_allclose(r.shift, 0.9 * smallest(work).value, rtol=1e-6)
    t = r.shift
    s = work.factor(t)
    assert s is not None
    lb_serial = float(np.nextafter((t - (s + enc.radius) * (1.0 + 1e-10)) * (1.0 - 4.0 * rnd.U), 0.0))
    np.testing.assert_allclose(c.lower_bound, lb_serial, rtol=1e-12)
    np.testing.assert_allclose(c.radius, enc.radius + s, rtol=1e-9)  # radius and Rump's allowance, each


def test_explicit_shift_one_factorisation(client):
    """``shift``: one Cholesky at the t given; a t above lambda_min is refused, never certified."""
    laws, heads = _laws(32, 8, 8, seed=3), init_heads(64, 8, seed=4)  # M = 256, H d = 2 M
    lam = np.linalg.eigvalsh(_gram_lower_full(laws, heads))[0]
    r = distributed_gram(laws, heads, client=client, tiles=3, certify=True, shift=0.8 * lam)
    assert r.certificate.positive and r.factorizations == 1 and r.shift == 0.8 * lam
    assert 0.8 * lam * (1 - 1e-6) <= r.certificate.lower_bound <= 0.8 * lam  # radius ~1e-11, lam ~1e-4
    bad = distributed_gram(laws, heads, client=client, tiles=3, certify=True, shift=1.01 * lam)
    assert not bad.certificate.positive and bad.shift is None and "fails" in bad.certificate.statement
    assert bad.gram.certified.kind == "inconclusive" and bad.gram.certified.lower_bound is None


def _gram_lower_full(laws, heads) -> np.ndarray:
    F = attention_features(laws, heads)
    return F @ F.T


def _rayleigh_upper(laws, heads, v: np.ndarray) -> float:
    """Rigorous upper bound on the exact lambda_min: v^T G v / v^T v with G in Arb at 128 bits."""
    from flint import arb, arb_mat, ctx

    G = _gram_arb(laws, heads, 128)
    old = ctx.prec
    ctx.prec = 128
    try:
        va = arb_mat([[arb(float(t))] for t in v])
        return float(((va.transpose() * G * va)[0, 0] / (va.transpose() * va)[0, 0]).upper())
    finally:
        ctx.prec = old


@pytest.mark.parametrize(("seed", "n", "d", "q"), [(0, 4, 3, 1.0), (1, 6, 2, 1.0), (2, 3, 8, 4.0)])
def test_small_certificates_hold_against_arb(client, seed, n, d, q):
    """lower_bound <= exact lambda_min <= the Arb Rayleigh quotient of the float eigenvector, and
    at least half the float64 lambda_min (t = 0.9 lam and a radius far below it)."""
    laws = _laws(n, 6, d, seed)
    heads = init_heads(2 * 6 * n // d + 1, d, q_scale=q, b_scale=q, seed=seed + 3)
    r = distributed_gram(laws, heads, client=client, tiles=3, certify=True)
    w, V = np.linalg.eigh(_gram_lower_full(laws, heads))
    c = r.certificate
    assert c.positive, c
    assert w[0] / 2 <= c.lower_bound <= _rayleigh_upper(laws, heads, V[:, 0])
    serial = certify_positive(laws, heads, arb=False)  # the same statement, number for number almost
    assert _template(c.statement) == _template(serial.statement)
    np.testing.assert_allclose(c.lower_bound, serial.lower_bound, rtol=1e-6)  # t from two ARPACK runs


def test_singular_gram_is_never_certified(client):
    """Two identical samples: rows of F repeat, the exact Gram is singular. Refused (the float64
    Cholesky fails or the proved radius exceeds what float64 sees), as the serial route refuses."""
    laws = _laws(5, 4, 3, seed=4)
    laws = [*laws, laws[2]]
    heads = init_heads(30, 3, seed=2)
    r = distributed_gram(laws, heads, client=client, tiles=3, certify=True)
    assert not r.certificate.positive and r.certificate.lower_bound is None
    assert r.gram.certified.kind == "inconclusive" and r.gram.status != "positive"
    assert not certify_positive(laws, heads, arb=False).positive


def test_same_result_with_one_and_two_workers(client, tmp_path):
    """Seeds independent of worker placement: the heads are drawn from the seed on the client
    (distributed_gram) or in each task (sweep), never from the worker; with the same head blocks
    the certificate and the spectrum are equal bit for bit on 1 and on 2 workers."""
    laws = _laws(32, 8, 4, seed=6)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as one, \
            Client(one) as c1:
        kw = dict(q_scale=0.7, b_scale=0.5, seed=11, tiles=3, chunk_heads=64, certify=True)
        a = distributed_gram(laws, 128, client=c1, **kw)
        b = distributed_gram(laws, 128, client=client, **kw)
        assert a.certificate == b.certificate and a.shift == b.shift
        assert (a.gram.lambda_min, a.gram.lambda_max) == (b.gram.lambda_min, b.gram.lambda_max)
        f = tmp_path / "x.npy"
        np.save(f, np.stack([law.atoms for law in _laws(4, 3, 2, seed=7)]))
        grid = dict(q_scales=(0.5, 2.0), seeds=(0, 1, 2))
        assert sweep(str(f), client=c1, **grid).values() == sweep(str(f), client=client, **grid).values()


def test_cli_one_gram_certify_with_scheduler_file(tmp_path, capsys, scheduler_file):
    """``ntkcheck sweep --one-gram --certify --scheduler-file FILE``: exit 0, schema-valid JSON with the
    certificate ``gram --certify`` reports (kind, bound below the float64 lambda_min), and the
    provenance's sha256 of the token file equal to hashlib's."""
    import jsonschema

    from ntkcheck.cli._args import load_schema

    rng = np.random.default_rng(21)
    p = tmp_path / "x.npy"
    np.save(p, rng.standard_normal((12, 4, 3)))
    code = main(["sweep", str(p), "--one-gram", "--certify", "--tiles", "3", "--heads", "40", "--seeds", "3",
                 "--scheduler-file", str(scheduler_file), "--json"])
    d = json.loads(capsys.readouterr().out)
    jsonschema.validate(d, load_schema("sweep"))
    og = d["one_gram"]
    lam = np.linalg.eigvalsh(_gram_lower_full(as_laws(np.load(p)), init_heads(40, 3, seed=3)))[0]
    assert code == d["exit_code"] == 0 and og["gram"]["certified"]["kind"] == "float64-cholesky"
    assert lam / 2 <= og["gram"]["certified"]["lower_bound"] <= lam and og["certificate"]["positive"]
    (inp,) = d["provenance"]["inputs"]
    assert inp["path"] == str(p) and inp["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert d["provenance"]["seeds"] == {"seeds": [3]}


def test_waits_on_the_futures_client_not_the_current_one(client, scheduler_file, monkeypatch):
    """A second client of the cluster while ``client`` is the current one (the fixture's ``with``
    block): the deadline's waits run on the second client's event loop. ``distributed.wait`` and
    ``as_completed`` default to the current client's; waiting there, the CLI test above saw its
    futures end 30-45 s late (48 s for a 2 s call). Spied, not timed: the client current inside
    ``wait`` and the loop given to ``as_completed``."""
    import distributed

    from ntkcheck._budget import Budget, scope
    from ntkcheck.distributed import _deadline

    current, loops = [], []
    real_wait, real_completed = distributed.wait, distributed.as_completed

    def wait(fs, **kw):
        current.append(distributed.default_client())
        return real_wait(fs, **kw)

    def as_completed(fs, **kw):
        loops.append(kw.get("loop"))
        return real_completed(fs, **kw)

    monkeypatch.setattr(distributed, "wait", wait)
    monkeypatch.setattr(distributed, "as_completed", as_completed)
    with Client(json.loads(scheduler_file.read_text())["address"], set_as_default=False) as other:
        assert distributed.default_client() is client  # the situation of the CLI test
        with scope(Budget(120.0)):
            assert _deadline.gather(other, [other.submit(pow, 2, k, pure=False) for k in range(3)], "t") == [1, 2, 4]
            (f,) = _deadline.completed(other, [other.submit(pow, 3, 2, pure=False)], "t")
            assert f.result() == 9
        assert current == [other] and loops == [other.loop]


def test_cli_certify_needs_one_gram_and_a_scheduler_file(capsys, tmp_path):
    assert main(["sweep", "--serial", "--certify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--one-gram" in err[0]
    bad = tmp_path / "s.json"
    for content, msg in ((None, "no such scheduler file"), ("{}", "not a Dask scheduler file")):
        if content is not None:
            bad.write_text(content)
        assert main(["sweep", "--scheduler-file", str(bad)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0]
    with pytest.raises(InputError, match="shift"):
        distributed_gram(_laws(3, 3, 2, 0), 9, shift=1e-3)  # checked before any cluster starts


def test_inconclusive_cell_does_not_crash_the_sweep(client, tmp_path):
    """Issue 19: a cell whose certificate is inconclusive (q_scale 0: every head sees uniform
    attention, the Gram is singular) used to end the sweep with float(None). Its row now says
    not certified, with no bound; the other cells are reported, serially and on Dask alike."""
    rng = np.random.default_rng(1)
    f = tmp_path / "r.npz"
    np.savez(f, **{f"sample_{i}": rng.standard_normal((4, 3)) for i in range(4)})
    for kw in (dict(serial=True), dict(client=client)):
        r = sweep(str(f), q_scales=(0.0, 1.0), **kw)
        zero, one = r.rows
        assert (zero.q_scale, zero.certified, zero.certified_lower_bound) == (0.0, False, None)
        assert one.certified and one.certified_lower_bound > 0
