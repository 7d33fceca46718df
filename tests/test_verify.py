"""Re-checkable certificates (issue 25): ``--certificate-out`` on decide, gram, screen and certify,
and the standalone verifier ``python -m ntkcheck.verify``.

The verifier accepts every certificate these verbs write (every route: exact minor, ball bound,
gap condition, Vandermonde, product and term identities, structural dependence, Gram bounds by
the verified Cholesky, by the preconditioned and the Arb routes, Prop. 8 singularity, a matrix's
bound, exact rank and indefiniteness) and rejects tampered ones: a changed shift, a changed matrix
entry or atom (with and without a recomputed digest), a changed claimed bound, a changed
identity. Exit statuses: 0 verified, 1 refuted, 3 unchecked, 2 unreadable.

Inputs that are not doubles (theory/certificates.md, "Inputs: exact, refused or rounded") are
written as exact rationals (format ``ntkcheck-certificate/2``) and every claim is re-checked on
them: the cases of issue 19 (translates at 1/10, and beyond 2^53; tokens 2^-60 apart; heads at
thirds, with a positive and an exactly singular Gram) are verified, never refuted; a changed exact
atom or head entry is refuted; and the two ways of re-checking the float64 view instead (the
writer writing it, the verifier reading it) are planted and caught.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ntkcheck as nk
from ntkcheck import certificate_files as cf
from ntkcheck import verify
from ntkcheck.cgf import as_laws
from ntkcheck.cli import main
from ntkcheck.ntk.gram_matrix.features import Heads
from ntkcheck.ntk.heads import law as head_law

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
    np.save(d / "int64.npy", np.array([[[0], [2**60 + 1]], [[1], [2**60 + 2]]], dtype=np.int64))  # translates
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
    ("decide-int64", ["decide", "{d}/int64.npy"]),
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
    """Every run of :data:`RUNS`, once for the module, with the suite's short head-law budget:
    conftest's autouse fixture that sets it is per test, and a module fixture is set up before it
    (with the default 20 s, ``gram`` and ``screen`` of the rounded product each spent their whole
    20 s on the head law, which the certificate files do not hold)."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(head_law, "DEFAULT_SECONDS", 0.3)
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
    for route in ("gaps of the projected atoms", "minor of exact Taylor coefficients", "Vandermonde",
                  "sigma_min of the scaled block", "exponential polynomials of both sides", "closed-form terms",
                  "float64 Cholesky", "ball LDL^T",
                  "kernel vector (seed 003 Prop. 8)", "exact rank", "x^T A x + e ||x||_1^2 < 0"):
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


def test_exit_statuses_of_the_command(certs, tmp_path, capsys):
    """``python -m ntkcheck.verify``: 0 verified, 1 refuted, 3 unchecked, 2 unreadable or usage.
    The interpreter's exit status is checked in a process of its own for 0 and 1 (``__main__``
    passes on what ``main`` returns, either way); 3 and both 2s from ``verify.main`` in this
    process (each python start-up imports the package: ~2 s)."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "ntkcheck.verify", *map(str, args)], capture_output=True,
                              text=True, timeout=600, check=False)
    ok = run(certs["screen-bundled"])
    assert ok.returncode == 0 and "every claim verified" in ok.stdout
    bad = _tamper(certs["certify-spd"], tmp_path, _matrix_entry, reseal=True)
    refuted = run(bad)
    assert refuted.returncode == 1 and "REFUTED" in refuted.stdout
    rec = json.loads(certs["decide-gap"].read_text())
    rec["claims"] = [{"id": "weak", "kind": "none", "reason": "weak property inconclusive: nothing certified"}]
    (tmp_path / "none.json").write_text(json.dumps(rec))
    assert verify.main([str(tmp_path / "none.json")]) == 3
    (tmp_path / "junk.json").write_text("{not json")
    assert verify.main([str(tmp_path / "junk.json")]) == 2
    assert "unreadable certificate" in capsys.readouterr().err
    assert verify.main([]) == 2
    assert "usage:" in capsys.readouterr().out


def test_the_verifier_imports_nothing_of_the_package(certs):
    """Imported as a top-level package (``import verify`` with ``sys.path`` at the ``ntkcheck/``
    directory), it verifies a certificate with no ``ntkcheck`` module loaded and no third-party
    module beyond numpy, mpmath and python-flint; ``python -m verify FILE`` works the same way."""
    here = ROOT / "ntkcheck"
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(here)!r})\n"
        "import verify\n"
        f"code = verify.main([{str(certs['screen-random'])!r}])\n"
        "mods = {m.split('.')[0] for m in sys.modules}\n"
        "third = sorted(m for m in mods - set(sys.stdlib_module_names) if not m.startswith('_'))\n"
        "print('FILE', verify.__file__)\n"
        "print('CODE', code, 'NTKCHECK', sorted(m for m in sys.modules if m.startswith('ntkcheck')), 'THIRD', third)\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, check=False,
                         cwd=ROOT.parent)
    lines = res.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("CODE 0 NTKCHECK [] THIRD"), res.stdout + res.stderr
    assert lines[-2] == f"FILE {here / 'verify' / '__init__.py'}"  # this package, not an installed one
    third = set(ast.literal_eval(lines[-1].split("THIRD", 1)[1].strip())) - {"verify"}
    # nothing else of the ntkcheck/ directory (cgf, ntk, errors, ...: they would be top-level here)
    assert third <= {"numpy", "flint", "mpmath", "cython_runtime"}, third  # cython_runtime: flint's Cython
    run = subprocess.run([sys.executable, "-m", "verify", str(certs["decide-gap"])], capture_output=True, text=True,
                         timeout=600, check=False, cwd=here)
    assert run.returncode == 0 and "every claim verified" in run.stdout, run.stdout + run.stderr


def test_inconclusive_decisions_write_nothing_to_verify(tmp_path):
    """A time budget too short to decide: the file says so and the verifier exits 3."""
    from ntkcheck.certificate_files import decide_certificate, write_certificate
    from ntkcheck.independence.results import Decision, Inconclusive, Verdict

    dec = Decision(Verdict.INCONCLUSIVE, "weak", "none", "-", None, Inconclusive(None, (), "more time"), None, None,
                   None, 2, 1)
    p = write_certificate(tmp_path / "c.json", decide_certificate(dec, [np.zeros((2, 1)), np.ones((2, 1))]))
    assert verify.verify_file(p)[0] == 3


# ------------------------------------------------------------------------------------------------
# inputs that are not doubles (issue 19): written exactly, re-checked on the values given

X_SINGULAR = [[0, 0], [3, 1], [1, -1]]  # with heads whose rows are (c, -3c): Q_h (x_0 - x_1) = 0


def _thirds_heads(H: int, seed: int) -> Heads:
    """Heads at multiples of 1/3 and 1/7 (not doubles)."""
    rng = np.random.default_rng(seed)
    Q = [[[F(int(v), 3) for v in row] for row in rng.integers(-4, 5, size=(2, 2))] for _ in range(H)]
    b = [[F(int(v), 7) for v in rng.integers(-4, 5, size=2)] for _ in range(H)]
    return Heads(np.array(Q, dtype=object), np.array(b, dtype=object))


def _singular_heads() -> Heads:
    c = F(1, 3)
    Q = [[[c * k, -3 * c * k], [c * (k + 1), -3 * c * (k + 1)]] for k in range(1, 7)]
    return Heads(np.array(Q, dtype=object), np.array([[F(k, 7), F(-k, 5)] for k in range(1, 7)], dtype=object))


def _normal_tokens(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3, 2)) for _ in range(3)]


def _decide_record(samples):
    return cf.decide_certificate(nk.decide(samples), samples)


def _gram_record(samples, heads):
    return cf.gram_certificate_record(nk.gram(samples, heads, certify=True), as_laws(samples), heads)


def _screen_record(samples, heads=None):
    return cf.screen_certificate(nk.screen(samples, heads=heads), samples, heads)


TINY = 1 + F(1, 2**60)
#: name -> (record builder, (law, the exact atoms the file must hold for it), or None: the heads at thirds)
EXACT = {
    "translates at tenths (dependent)":
        (lambda: _decide_record([[[F(0)], [F(1, 10)]], [[F(1, 5)], [F(3, 10)]]]), (0, ["0", "1/10"])),
    "translates beyond 2^53 (dependent)":
        (lambda: _decide_record([[[0], [2**60 + 1]], [[1], [2**60 + 2]]]), (0, ["0", str(2**60 + 1)])),
    "tokens 2^-60 apart (independent)":
        (lambda: _decide_record([[[F(0)], [F(1)]], [[F(0)], [TINY]]]), (1, ["0", f"{2**60 + 1}/{2**60}"])),
    "tokens 2^-60 apart (Gram, Arb)":
        (lambda: _gram_record([[[F(0)], [F(1)]], [[F(0)], [TINY]]], nk.init_heads(16, 1, seed=0)),
         (1, ["0", f"{2**60 + 1}/{2**60}"])),
    "heads at thirds (Gram, carried over)": (lambda: _gram_record(_normal_tokens(3), _thirds_heads(6, 3)), None),
    "heads at thirds (Gram, exactly singular)": (lambda: _gram_record([X_SINGULAR], _singular_heads()), None),
    "heads at thirds (screen, exactly singular)": (lambda: _screen_record([X_SINGULAR], _singular_heads()), None),
    "shared atoms at tenths (screen, Prop. 8)":
        (lambda: _screen_record([[[F(1, 10)], [F(3, 10)]], [[F(1, 10)], [F(3, 10)]]]), (0, ["1/10", "3/10"])),
}


@pytest.fixture(scope="module")
def exact_certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("exact")
    return {name: cf.write_certificate(d / f"c{i}.json", build()) for i, (name, (build, _)) in enumerate(EXACT.items())}


def _claims(path: Path) -> dict[str, dict]:
    return {c["id"]: c for c in json.loads(path.read_text())["claims"]}


@pytest.mark.parametrize("name", list(EXACT))
def test_exact_inputs_are_written_exactly_and_verified(exact_certs, name):
    """Issue 19's cases: the file holds the values given (reference: the rationals the test gave,
    as strings) and every certified claim is verified on them, none refuted. Mutation: the old
    writer (float64 atoms and heads): see the two mutation tests below."""
    rec = json.loads(exact_certs[name].read_text())
    assert rec["format"] == verify.FORMAT == "ntkcheck-certificate/2"
    want = EXACT[name][1]
    if want is not None:
        assert rec["inputs"]["laws"][want[0]]["atoms"]["exact"] == want[1]
    else:  # the heads: Q holds thirds, b sevenths or fifths
        Q = [F(v) for v in rec["inputs"]["heads"]["Q"]["exact"]]
        assert all(3 % q.denominator == 0 for q in Q) and any(q.denominator == 3 for q in Q)
        assert any(F(v).denominator in (5, 7) for v in rec["inputs"]["heads"]["b"]["exact"])
    code, rows = verify.verify_file(exact_certs[name])
    certified = [r for r in rows if "not certified" not in r[2] and "nothing certified" not in r[2]]
    assert code in (0, 3) and certified and all(s == "verified" for _, s, _ in certified), rows


def test_a_carried_over_bound_is_reproved_on_the_exact_values(exact_certs):
    """The Gram bound proved for the nearest doubles of heads at thirds and carried over through the
    rounding radius: the file says so, holds no shift (the view's), and the verifier proves the bound
    on the Arb enclosure of the exact Gram."""
    path = exact_certs["heads at thirds (Gram, carried over)"]
    claim = _claims(path)["gram"]
    assert claim["kind"] == "gram-lower-bound" and claim["inputs_rounded"] is True and claim["shifts"] == []
    assert claim["route"] == "float64-cholesky" and "(sqrt(" in claim["statement"]
    rows = verify.verify_file(path)[1]
    assert rows[0][1] == "verified" and "on the exact values given" in rows[0][2], rows


def test_an_exactly_singular_gram_is_verified_by_its_two_atoms(exact_certs):
    """Both verbs write the exact singularity proof (sample 0, atoms 0 and 1) and the verifier redoes
    ``Q_h (x_0 - x_1) = 0`` in rationals (reference: 3 q1 + q2 = 0 for every row, by hand above)."""
    for name in ("heads at thirds (Gram, exactly singular)", "heads at thirds (screen, exactly singular)"):
        claim = _claims(exact_certs[name])["gram"]
        assert (claim["kind"], claim["sample"], claim["atoms"]) == ("gram-equal-scores", 0, [0, 1])
        assert dict((c, s) for c, s, _ in verify.verify_file(exact_certs[name])[1])["gram"] == "verified"


def _set_exact(path_in_inputs, index, value):
    def change(rec, arrays):
        node = rec["inputs"]
        for k in path_in_inputs:
            node = node[k]
        node["exact"][index] = value
    return change


EXACT_TAMPERS = {
    "exact atom 3/10 -> 1/3 (translates)": ("translates at tenths (dependent)", ["laws", 1, "atoms"], 1, "1/3"),
    "exact atom 1 + 2^-60 -> 1 (gap condition)": ("tokens 2^-60 apart (independent)", ["laws", 1, "atoms"], 1, "1"),
    "exact atom 2^60 + 2 -> 2^60 + 3 (translates)":
        ("translates beyond 2^53 (dependent)", ["laws", 1, "atoms"], 1, str(2**60 + 3)),
    "exact head entry 1/3 -> 1/2 (equal scores)": ("heads at thirds (Gram, exactly singular)", ["heads", "Q"], 0, "1/2"),
}


@pytest.mark.parametrize("what", sorted(EXACT_TAMPERS))
@pytest.mark.parametrize("reseal", [False, True])
def test_a_changed_exact_value_is_refuted(exact_certs, tmp_path, what, reseal):
    """A changed exact atom or head entry: refused by the digest, and with a recomputed digest by the
    mathematics (the identity, the gap condition or the equal scores fail on the new values)."""
    name, where, i, value = EXACT_TAMPERS[what]
    code, rows = verify.verify_file(_tamper(exact_certs[name], tmp_path, _set_exact(where, i, value), reseal))
    assert code == 1 and any(s == "refuted" for _, s, _ in rows), rows


def test_mutation_the_writer_writing_the_float64_view_is_caught(monkeypatch, tmp_path):
    """Mutation: the old writer (``m.atoms`` and ``heads.Q``/``b`` as float64). The translates' and
    the tokens' certificates are then re-checked on other numbers and refuted, which
    ``test_exact_inputs_are_written_exactly_and_verified`` refuses."""
    monkeypatch.setattr(cf, "_atoms", lambda m: np.asarray(m.atoms, dtype=np.float64))
    for name in ("translates at tenths (dependent)", "tokens 2^-60 apart (independent)",
                 "tokens 2^-60 apart (Gram, Arb)"):
        path = cf.write_certificate(tmp_path / "m.json", EXACT[name][0]())
        assert verify.verify_file(path)[0] == 1, name


def _forged_view_bound(path: Path, tmp: Path) -> Path:
    """The exactly singular Gram's file with its claim replaced by ``lambda_min >= 1e-33``: true for the
    Gram of the heads' nearest doubles (reference: mpmath at 60 and 120 digits in
    tests/test_exact_inputs.py, lambda_min ~ 1.3e-32), false for the heads given (singular)."""
    def change(rec, arrays):
        rec["claims"] = [{"id": "gram", "kind": "gram-lower-bound", "lower_bound": 1e-33, "shifts": []}]
    return _tamper(path, tmp, change)


def test_a_bound_true_only_for_the_float64_view_is_refuted(exact_certs, tmp_path, monkeypatch):
    """The verifier reads the heads at their exact values: a bound that holds for their doubles only
    is refuted. Mutation: a verifier reading exact values as their nearest doubles verifies it (and
    refutes the translates' true identity)."""
    forged = _forged_view_bound(exact_certs["heads at thirds (Gram, exactly singular)"], tmp_path)
    code, rows = verify.verify_file(forged)
    assert code == 1 and "not reproduced" in rows[0][2], rows
    reader = sys.modules["ntkcheck.verify._inputs"]
    real = reader._values

    def float_view(v, arrays):  # the mutation: exact values read as their nearest doubles
        a = real(v, arrays)
        return np.array([float(x) for x in a.reshape(-1)]).reshape(a.shape) if a.dtype == object else a
    monkeypatch.setattr(reader, "_values", float_view)
    assert verify.verify_file(forged)[0] == 0
    assert verify.verify_file(exact_certs["translates at tenths (dependent)"])[0] == 1


def test_a_carried_over_bound_without_exact_inputs_is_unchecked(exact_certs, tmp_path):
    """A claim that says its bound was carried over from a float64 view, in a file that holds only
    that view (a /1-style file, or exact values stripped): unchecked, never verified on the view."""
    def strip(rec, arrays):
        for k in ("Q", "b"):
            v = rec["inputs"]["heads"][k]
            rec["inputs"]["heads"][k] = {"shape": v["shape"], "data": [float(F(x)) for x in v["exact"]]}
    path = _tamper(exact_certs["heads at thirds (Gram, carried over)"], tmp_path, strip, reseal=True)
    code, rows = verify.verify_file(path)
    assert code == 3 and rows[0][1] == "unchecked" and "float64" in rows[0][2] and "view" in rows[0][2], rows


def test_exact_arrays_in_the_npz_companion(monkeypatch, tmp_path):
    """Exact arrays beyond ``INLINE_ENTRIES`` go to the ``.npz`` as ASCII rationals (no pickle); the
    verifier reads them, and a changed entry there is refuted even with a recomputed digest."""
    monkeypatch.setattr(cf, "INLINE_ENTRIES", 1)
    path = cf.write_certificate(tmp_path / "n.json", EXACT["translates at tenths (dependent)"][0]())
    rec = json.loads(path.read_text())
    assert rec["inputs"]["laws"][1]["atoms"] == {"npz": "laws.1.atoms"}
    with np.load(tmp_path / rec["arrays"], allow_pickle=False) as z:
        assert z["laws.1.atoms"].dtype.kind == "S" and z["laws.1.atoms"][:, 0].tolist() == [b"1/5", b"3/10"]
    assert verify.verify_file(path)[0] == 0
    bad = _tamper(path, tmp_path, lambda r, a: a["laws.1.atoms"].__setitem__((1, 0), b"1/3"), reseal=True)
    assert verify.verify_file(bad)[0] == 1


def test_format_1_files_are_still_read(certs, tmp_path):
    """A file of the former format (every input float64) is re-checked for the values it holds; an
    unknown format is unreadable (exit 2)."""
    rec = json.loads(certs["gram-cholesky"].read_text())
    rec["format"] = "ntkcheck-certificate/1"
    (tmp_path / "old.json").write_text(json.dumps(rec))
    assert verify.verify_file(tmp_path / "old.json")[0] == 0
    rec["format"] = "ntkcheck-certificate/9"
    (tmp_path / "new.json").write_text(json.dumps(rec))
    assert verify.main([str(tmp_path / "new.json")]) == 2


@settings(max_examples=8)
@given(den=st.sampled_from([3, 5, 10, 100]), atoms=st.lists(st.integers(-40, 40), min_size=2, max_size=4, unique=True),
       shift=st.integers(-40, 40).filter(bool))
def test_translates_at_non_double_values_verify(tmp_path_factory, den, atoms, shift):
    """Seed 003 Ex. 6 (a law and its translate are dependent) for tokens and shifts that are not
    doubles: every example (8) is certified dependent and its certificate file is verified on the
    exact values."""
    A = [[F(a, den)] for a in atoms]
    B = [[x[0] + F(shift, den)] for x in A]
    rec = _decide_record([A, B])
    assert rec["claims"][0]["verdict"] == "dependent"
    path = cf.write_certificate(tmp_path_factory.mktemp("tr") / "t.json", rec)
    code, rows = verify.verify_file(path)
    assert code == 0 and [s for _, s, _ in rows] == ["verified"], rows
