"""Re-checkable certificates (issue 25): ``--certificate-out`` on decide, gram, screen and certify,
and the standalone verifier ``python -m ntkcheck.verify``.

The verifier accepts every certificate these verbs write (every route: exact minor, ball bound,
gap condition, Vandermonde, product and term identities, structural dependence, Gram bounds by
the verified Cholesky, by the preconditioned and the Arb routes, Prop. 8 singularity, a matrix's
bound, exact rank and indefiniteness) and rejects tampered ones: a changed shift, a changed matrix
entry or atom (with and without a recomputed digest), a changed claimed bound, a changed
identity. Exit statuses: 0 verified, 1 refuted, 3 unchecked, 2 unreadable.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ntkcheck import verify
from ntkcheck.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _product(rounded: bool) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    u, v = rng.standard_normal(3), rng.standard_normal(3)
    z = np.zeros(3)
    S = [rng.standard_normal((6, 3)) for _ in range(2)]
    if not rounded:
        u, v = np.round(u * 8) / 8, np.round(v * 8) / 8  # dyadic: u + v is exact
    return S + [np.stack([z, u]), np.stack([z, v]), np.stack([z, u, v, u + v])]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    rng = np.random.default_rng(0)
    data = {"rand.npy": rng.standard_normal((5, 6, 3)), "two.npy": rng.standard_normal((3, 4, 2))}
    for name, arr in data.items():
        np.save(d / name, arr)
    for name, rounded in (("prod.npz", True), ("exact.npz", False)):
        np.savez(d / name, **{f"sample_{i}": x for i, x in enumerate(_product(rounded))})
    J = rng.standard_normal((12, 20))
    np.save(d / "spd.npy", J @ J.T)
    np.save(d / "ones.npy", np.ones((4, 4)))
    J = rng.standard_normal((12, 4))
    np.save(d / "low.npy", J @ J.T)
    big = rng.standard_normal((150, 160))  # 22500 entries: the matrix goes to the .npz companion
    np.save(d / "big.npy", big @ big.T)
    return d


#: (name, argv) of every certificate the tests write; ``{d}`` is the data directory
RUNS = [
    ("decide-gap", ["decide", "{d}/rand.npy"]),
    ("decide-minor", ["decide", "{d}/rand.npy", "--property", "strong", "--method", "exact"]),
    ("decide-ball", ["decide", "{d}/rand.npy", "--method", "interval"]),
    ("decide-product", ["decide", "{d}/exact.npz"]),
    ("decide-product-strong", ["decide", "{d}/exact.npz", "--property", "strong"]),
    ("decide-cubes", ["decide", "--family", "uniform-cube", "--radii", "1,3/2,2", "--dim", "2"]),
    ("decide-cubes-strong", ["decide", "--family", "uniform-cube", "--radii", "1,3/2,2", "--property", "strong"]),
    ("decide-cubes-equal", ["decide", "--family", "uniform-cube", "--radii", "1,1"]),
    ("decide-laplace", ["decide", "--family", "laplace", "--scales", "1,2,3"]),
    ("decide-laplace-equal", ["decide", "--family", "laplace", "--scales", "2,2", "--property", "strong"]),
    ("decide-mixture", ["decide", "--family", "gaussian-mixture", "--separations", "1,2"]),
    ("decide-gaussian", ["decide", "--family", "gaussian", "--points", "0,0;1,0"]),
    ("decide-dirac", ["decide", "--family", "dirac", "--points", "0;1", "--property", "strong"]),
    ("gram-cholesky", ["gram", "{d}/rand.npy"]),
    ("gram-rounded", ["gram", "{d}/prod.npz"]),
    ("gram-two", ["gram", "{d}/two.npy", "--heads", "6"]),
    ("screen-bundled", ["screen"]),
    ("screen-rounded", ["screen", "{d}/prod.npz"]),
    ("screen-random", ["screen", "{d}/rand.npy"]),
    ("certify-spd", ["certify", "{d}/spd.npy", "--abs-error", "1e-12"]),
    ("certify-ones", ["certify", "{d}/ones.npy"]),
    ("certify-low", ["certify", "{d}/low.npy"]),
    ("certify-big", ["certify", "{d}/big.npy"]),
]


@pytest.fixture(scope="module")
def certs(files):
    out = {}
    for name, argv in RUNS:
        path = files / f"{name}.json"
        main([a.format(d=files) for a in argv] + ["--certificate-out", str(path), "--json"])
        out[name] = path
    return out


@pytest.mark.parametrize("name", [n for n, _ in RUNS])
def test_the_verifier_accepts_every_certificate_written(certs, name):
    code, rows = verify.verify_file(certs[name])
    claims = [r for r in rows if r[1] != "unchecked" or "nothing certified" not in r[2]]
    assert code == 0, rows
    assert claims and all(status == "verified" for _, status, _ in claims), rows


def test_routes_covered(certs):
    """The certificates above exercise every route of the verifier (not a vacuous sweep)."""
    text = " ".join(why for p in certs.values() for _, _, why in verify.verify_file(p)[1])
    for route in ("gap condition", "minor of exact coefficients", "product-identity", "term-identity",
                  "float64 Cholesky", "ball LDL^T", "kernel vector (Prop. 8)", "exact rank", "x^T S x < 0"):
        assert route in text, route
    big = json.loads(certs["certify-big"].read_text())
    assert big["arrays"] and (certs["certify-big"].parent / big["arrays"]).is_file()


def _tamper(path: Path, tmp: Path, change, reseal: bool = False) -> Path:
    rec = json.loads(path.read_text())
    arrays = verify._arrays(rec, path.parent)
    change(rec, arrays)
    if arrays:
        np.savez(tmp / "t.arrays.npz", **arrays)
        rec["arrays"] = "t.arrays.npz"
    if reseal:  # a forger who recomputes the digest: the mathematics must refuse it
        rec["digest"] = verify.digest(rec["inputs"], arrays)
    out = tmp / "t.json"
    out.write_text(json.dumps(rec))
    return out


def _claim(rec: dict, cid: str) -> dict:
    return next(c for c in rec["claims"] if c["id"] == cid)


def _matrix_entry(rec, arrays, value=-1.0):
    data = rec["inputs"]["matrix"]["data"]
    data[0] = value


TAMPERS = {
    "changed shift (too large: the Cholesky fails)":
        ("certify-spd", lambda r, a: _claim(r, "matrix").update(shifts=[10 * _claim(r, "matrix")["shifts"][0]]), False),
    "changed shift (too small: the bound is not reached)":
        ("certify-spd", lambda r, a: _claim(r, "matrix").update(shifts=[0.5 * _claim(r, "matrix")["shifts"][0]]), False),
    "changed claimed bound (matrix)":
        ("certify-spd", lambda r, a: _claim(r, "matrix").update(lower_bound=2 * _claim(r, "matrix")["lower_bound"]), False),
    "changed claimed bound (Gram, Cholesky)":
        ("gram-cholesky", lambda r, a: _claim(r, "gram").update(lower_bound=3 * _claim(r, "gram")["lower_bound"]), False),
    "changed claimed bound (Gram, ball LDL)":
        ("gram-rounded", lambda r, a: _claim(r, "gram").update(lower_bound=1e-20), False),
    "changed matrix entry": ("certify-spd", _matrix_entry, False),
    "changed matrix entry, digest recomputed": ("certify-spd", _matrix_entry, True),
    "changed matrix entry in the .npz, digest recomputed":
        ("certify-big", lambda r, a: a[next(iter(a))].__setitem__((0, 0), -1.0), True),
    "changed atom, digest recomputed":
        ("screen-bundled", lambda r, a: r["inputs"]["laws"][6]["atoms"]["data"].__setitem__(3, 0.75), True),
    "changed null vector": ("decide-product", lambda r, a: _claim(r, "weak")["certificate"].update(
        null_vector=["1", "1", "1", "-1", "0"]), False),
    "changed gaps": ("decide-gap", lambda r, a: _claim(r, "weak")["certificate"]["strong"]["gaps"].__setitem__(0, "1/3"),
                     False),
    "changed verdict": ("decide-gap", lambda r, a: _claim(r, "weak").update(verdict="dependent"), False),
    "changed minor columns": ("decide-minor", lambda r, a: _claim(r, "strong")["certificate"].update(
        columns=[2, 2, 3, 4, 5]), False),
    "changed rank claim": ("certify-spd", lambda r, a: _claim(r, "matrix").update(kind="matrix-singular"), False),
}


@pytest.mark.parametrize("what", sorted(TAMPERS))
def test_the_verifier_rejects_tampered_certificates(certs, tmp_path, what):
    name, change, reseal = TAMPERS[what]
    code, rows = verify.verify_file(_tamper(certs[name], tmp_path, change, reseal))
    assert code == 1 and any(status == "refuted" for _, status, _ in rows), rows


def test_exit_statuses_of_the_command(certs, tmp_path):
    """``python -m ntkcheck.verify``: 0 verified, 1 refuted, 3 unchecked, 2 unreadable or usage."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "ntkcheck.verify", *map(str, args)], capture_output=True,
                              text=True, timeout=600, check=False)
    ok = run(certs["screen-bundled"])
    assert ok.returncode == 0 and "every claim verified" in ok.stdout
    bad = _tamper(certs["certify-spd"], tmp_path, _matrix_entry, reseal=True)
    assert run(bad).returncode == 1
    rec = json.loads(certs["decide-gap"].read_text())
    rec["claims"] = [{"id": "weak", "kind": "none", "reason": "weak property inconclusive: nothing certified"}]
    (tmp_path / "none.json").write_text(json.dumps(rec))
    assert run(tmp_path / "none.json").returncode == 3
    (tmp_path / "junk.json").write_text("{not json")
    assert run(tmp_path / "junk.json").returncode == 2
    assert run().returncode == 2


def test_the_verifier_imports_nothing_of_the_package(certs):
    """Run as a single file (``runpy``), it verifies a certificate with no ``ntkcheck`` module
    loaded and no third-party module beyond numpy, mpmath and python-flint."""
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['verify.py', {str(certs['screen-random'])!r}]\n"
        "try:\n"
        f"    runpy.run_path({str(ROOT / 'ntkcheck' / 'verify.py')!r}, run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "mods = {m.split('.')[0] for m in sys.modules}\n"
        "third = sorted(m for m in mods - set(sys.stdlib_module_names) if not m.startswith('_'))\n"
        "print('CODE', code, 'NTKCHECK', sorted(m for m in sys.modules if m.startswith('ntkcheck')), 'THIRD', third)\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, check=False,
                         cwd=ROOT.parent)
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith("CODE 0 NTKCHECK [] THIRD"), res.stdout + res.stderr
    third = set(ast.literal_eval(line.split("THIRD", 1)[1].strip()))
    assert third <= {"numpy", "flint", "mpmath", "cython_runtime"}, third  # cython_runtime: flint's Cython


def test_inconclusive_decisions_write_nothing_to_verify(tmp_path):
    """A time budget too short to decide: the file says so and the verifier exits 3."""
    from ntkcheck.certificate_files import decide_certificate, write_certificate
    from ntkcheck.independence.results import Decision, Inconclusive, Verdict

    dec = Decision(Verdict.INCONCLUSIVE, "weak", "none", "-", None, Inconclusive(None, (), "more time"), None, None,
                   None, 2, 1)
    p = write_certificate(tmp_path / "c.json", decide_certificate(dec, [np.zeros((2, 1)), np.ones((2, 1))]))
    assert verify.verify_file(p)[0] == 3
