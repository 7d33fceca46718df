"""The false certificates of issue 30 (item 1), written from scratch in the documented format with
the digest recomputed: each is refused by ``python -m ntkcheck.verify``, and each claim's falsity is
established here by an independent computation (``verify_oracle``: sympy ranks of cumulants from
the moment recursion, sympy identities, mpmath Grams), so the refusal is of a false claim.

Also: malformed files end with one line and exit 2 (no traceback), a null vector ``(1e9, -1e9)``
is decided within seconds, a claim restricted to some samples says so, and a verdict flipped
against its own certificate is refuted (exit 1), not "unchecked".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest
import verify_oracle as oracle

import ntkcheck as nk
from ntkcheck import certificate_files as cf
from ntkcheck import verify
from ntkcheck.cgf import as_laws

P = 4611686018427387847


def _law(atoms) -> dict:
    return {"kind": "empirical", "atoms": {"shape": [len(atoms), len(atoms[0])], "data": [float(v) for a in atoms
                                                                                           for v in a]},
            "masses": [str(F(1, len(atoms)))] * len(atoms)}


def _gaussian(cov) -> dict:
    return {"kind": "gaussian", "mean": ["0"] * len(cov), "cov": [[str(v) for v in r] for r in cov]}


def _write(tmp: Path, inputs: dict, claims: list, name: str = "c.json") -> Path:
    inputs = json.loads(json.dumps(inputs))
    rec = {"format": verify.FORMAT, "verb": "forged", "inputs": inputs, "digest": verify.digest(inputs, {}),
           "claims": claims}
    (tmp / name).write_text(json.dumps(rec))
    return tmp / name


def _cgf(prop, verdict, cert, direction=None, samples=None, cid="c") -> dict:
    return {"id": cid, "kind": "cgf", "property": prop, "verdict": verdict, "direction": direction,
            "samples": samples, "certificate": cert}


def _minor(laws, cols, dirs) -> dict:
    """An exact-minor certificate whose recorded prime and determinant modulo it are right."""
    K = max(k for _, k in cols)
    rows = [[oracle.coefficients(law, dirs[j], K)[k] for j, k in cols] for law in laws]
    det = _det_mod(rows, P)
    return {"kind": "exact-minor", "columns": [[j, k] for j, k in cols], "directions": [[str(v) for v in w] for w in dirs],
            "K": max(K, 2), "prime": P, "det_mod_p": det, "det": None}


def _det_mod(rows, p) -> int:
    import sympy

    M = sympy.Matrix([[sympy.Rational(v.numerator, v.denominator) for v in r] for r in rows])
    d = M.det()
    return int(sympy.Rational(d).p * pow(int(sympy.Rational(d).q), -1, p) % p)


def _run(path: Path) -> tuple[int, list]:
    return verify.verify_file(path)


def _truth(path: Path, cid: str = "c"):
    rec = json.loads(path.read_text())
    return oracle.truth(next(c for c in rec["claims"] if c["id"] == cid), rec)


A = [[0, 0], [0, 1]]
B = [[1, 0], [1, 1]]  # A + (1, 0): a translate, so {A, B} is weakly (and strongly) dependent


def test_order_one_column_is_refused(tmp_path):
    """The minor on orders (1, 2) for translates: non-singular (the means differ), but order 1 is the
    affine part. Refused for its order; the translates are dependent (sympy identity, c = (1, -1))."""
    laws = [_law(A), _law(B)]
    w = [F(1), F(1)]
    rows = oracle.laws_of({"inputs": {"laws": json.loads(json.dumps(laws))}})
    path = _write(tmp_path, {"laws": laws}, [_cgf("strong", "independent", _minor(rows, [(0, 1), (0, 2)], [w]),
                                                     ["1", "1"])])
    code, out = _run(path)
    assert code == 1 and "order 1" in out[0][2], out
    assert oracle.identity_holds(rows, [F(1), F(-1)], [F(-1), F(0)], None)  # independently: dependent
    cert = _minor(rows, [(0, 2), (0, 3)], [w]) | {"columns": [[0, -1], [0, 2]]}  # negative order: index from the end
    code, out = _run(_write(tmp_path, {"laws": laws}, [_cgf("strong", "independent", cert, ["1", "1"])]))
    assert code == 1 and "order -1" in out[0][2], out


G2 = [[[2, 0], [0, 1]], [[1, 0], [0, 2]]]


def test_structural_does_not_prove_weak_dependence(tmp_path):
    """Gaussians diag(2, 1), diag(1, 2) in d = 2: every CGF quadratic (strongly dependent), but
    weakly independent (their t^2 coefficients along the axes: rank 2, exactly)."""
    laws = [_gaussian(S) for S in G2]
    path = _write(tmp_path, {"laws": laws}, [_cgf("weak", "dependent", {"kind": "structural", "n": 2})])
    code, out = _run(path)
    assert code == 1 and "structural certificate proves strong dependent, not weak dependent" in out[0][2], out
    ok = _write(tmp_path, {"laws": laws}, [_cgf("strong", "dependent", {"kind": "structural", "n": 2})], "ok.json")
    assert _run(ok)[0] == 0 and _truth(ok) is True
    assert oracle.independent(oracle.laws_of(json.loads(path.read_text())), [[F(1), F(0)], [F(0), F(1)]], 4)


def test_minor_over_three_directions_does_not_prove_strong(tmp_path):
    """Three Gaussians in d = 2 with independent covariances: weakly independent (a minor over three
    directions, verified as weak), strongly dependent (quadratic): the same minor for ``strong`` is refused."""
    covs = G2 + [[[1, F(1, 2)], [F(1, 2), 1]]]
    laws = [_gaussian(S) for S in covs]
    dirs = [[F(1), F(0)], [F(0), F(1)], [F(1), F(1)]]
    rows = oracle.laws_of({"inputs": {"laws": json.loads(json.dumps(laws, default=str))}})
    cert = _minor(rows, [(0, 2), (1, 2), (2, 2)], dirs)
    weak = _write(tmp_path, {"laws": laws}, [_cgf("weak", "independent", cert)], "weak.json")
    assert _run(weak)[0] == 0 and _truth(weak) is True
    strong = _write(tmp_path, {"laws": laws}, [_cgf("strong", "independent", cert)])
    code, out = _run(strong)
    assert code == 1 and "3 directions proves weak independence, not strong" in out[0][2], out
    assert not any(oracle.independent(rows, [w], 6) for w in dirs)  # strongly dependent: along each, rank 1


Y = [[[0, 0], [0, 1]], [[0, 0], [0, 2]]]


@pytest.mark.parametrize("prop", ["weak", "strong"])
def test_identity_along_one_direction_proves_neither(tmp_path, prop):
    """{(0,0),(0,1)}, {(0,0),(0,2)}: along w = (1, 0) every projected atom is 0, so c = (1, 0) is an
    identity along w; the laws are weakly and strongly independent (rank 2 along (0, 1), exactly).
    Claimed as weak dependence, and inside a weak-dependence wrapper as strong: refused."""
    laws = [_law(y) for y in Y]
    ident = {"kind": "product-identity", "null_vector": ["1", "0"], "alpha": ["0"], "beta": "0", "direction": ["1", "0"]}
    cert = ident if prop == "weak" else {"kind": "weak-dependence", "identity": ident}
    code, out = _run(_write(tmp_path, {"laws": laws}, [_cgf(prop, "dependent", cert)]))
    assert code == 1 and "along w = (1, 0) only" in out[0][2], out
    rows = oracle.laws_of({"inputs": {"laws": json.loads(json.dumps(laws))}})
    assert oracle.independent(rows, [[F(0), F(1)]], 6)


@pytest.mark.parametrize("c", [["1", "-1", "5"], ["1"]])
def test_null_vector_of_the_wrong_length(tmp_path, c):
    """A null vector longer (or shorter) than the list of laws: refused for its length (``zip`` no longer truncates)."""
    laws = [_law(A), _law(B)]
    cert = {"kind": "product-identity", "null_vector": c, "alpha": ["-1", "0"], "beta": "0", "direction": None}
    code, out = _run(_write(tmp_path, {"laws": laws}, [_cgf("weak", "dependent", cert)]))
    assert code == 1 and f"has {len(c)} entries, 2 expected" in out[0][2], out


@pytest.fixture(scope="module")
def gram_file(tmp_path_factory):
    X = [np.array([[0, 0], [1, 0.5], [0.25, -1]]), np.array([[0.5, 0.5], [-1, 0.75], [1.5, 0]])]
    heads = nk.init_heads(6, 2, seed=0)
    rec = cf.gram_certificate_record(nk.gram(X, heads, certify=True), as_laws(X), heads)
    return cf.write_certificate(tmp_path_factory.mktemp("g") / "g.json", rec)


def test_gram_positive_and_singular_is_refused(gram_file, tmp_path):
    """A Gram certified lambda_min >= l > 0 and claimed singular with c = 0 (a "kernel vector" that is
    zero): the claims contradict each other, the file is refused; alone, the c = 0 claim is refuted
    (mpmath: lambda_min of the Gram at 60 digits is the positive bound's, far from 0)."""
    rec = json.loads(gram_file.read_text())
    bound = rec["claims"][0]["lower_bound"]
    sing = {"id": "singular", "kind": "gram-singular", "c": ["0", "0"], "alpha": ["0", "0"],
            "nu": [{"atom": [0.0, 0.0], "mass": "1"}]}
    rec["claims"].append(sing)
    (tmp_path / "both.json").write_text(json.dumps(rec))
    code, out = _run(tmp_path / "both.json")
    assert code == 1 and "contradict" in out[0][2], out
    rec["claims"] = [sing]
    (tmp_path / "sing.json").write_text(json.dumps(rec))
    code, out = _run(tmp_path / "sing.json")
    assert code == 1 and "c is zero" in out[0][2], out
    Q, b = oracle.heads_of(rec)
    assert oracle.gram_lambda_min(oracle.laws_of(rec), Q, b) >= bound


def _matrix_file(tmp: Path, A: np.ndarray, claim: dict, e: float = 0.0) -> Path:
    inputs = {"matrix": {"shape": list(A.shape), "data": [float(v) for v in A.reshape(-1)]}, "abs_error": e}
    return _write(tmp, inputs, [claim | {"id": "c"}])


def test_recorded_rank_is_compared(tmp_path):
    """ones(3, 3) has rank 1 (sympy); a file recording rank 2 is refuted, rank 1 verified."""
    ones = np.ones((3, 3))
    code, out = _run(_matrix_file(tmp_path, ones, {"kind": "matrix-singular", "rank": 2}))
    assert code == 1 and "records 2" in out[0][2], out
    assert _run(_matrix_file(tmp_path, ones, {"kind": "matrix-singular", "rank": 1}))[0] == 0
    import sympy

    assert sympy.ones(3, 3).rank() == 1


def test_radius_and_statement_that_say_more(tmp_path):
    """A matrix bound whose recorded radius is larger than what holds (lambda_min(A) - r < l, mpmath)
    is refuted; a forged ``statement`` is never printed (the verifier's sentence is its own)."""
    rng = np.random.default_rng(0)
    J = rng.standard_normal((4, 6))
    A = J @ J.T
    lm = float(oracle.matrix_lambda_min(A))
    claim = {"kind": "matrix-lower-bound", "lower_bound": lm / 2, "radius": lm, "shifts": []}
    path = _matrix_file(tmp_path, A, claim)
    assert _truth(path) is False
    assert _run(path)[0] == 1
    forged = "certified positive for every matrix and every head law"
    path = _matrix_file(tmp_path, A, claim | {"radius": lm / 4, "statement": forged})
    code, out = _run(path)
    assert code == 0 and forged not in out[0][2] and "within 2-norm" in out[0][2] and _truth(path) is True, out


def test_a_verdict_flipped_against_its_certificate_is_refuted(tmp_path):
    """A gap-condition certificate (it proves strong independence) under the verdict "dependent":
    exit 1 ("refuted"), not 3 ("unchecked")."""
    X = [np.array([[0.0], [1.0]]), np.array([[0.0], [2.0]])]
    rec = cf.decide_certificate(nk.decide(X, "strong"), X)
    rec["claims"][0]["verdict"] = "dependent"
    path = cf.write_certificate(tmp_path / "f.json", rec)
    code, out = _run(path)
    assert code == 1 and out[0][1] == "refuted" and "not strong dependent" in out[0][2], out


def test_a_claim_about_some_samples_says_so(gram_file, tmp_path):
    rec = json.loads(gram_file.read_text())
    X = [np.array([[0, 0], [1, 0.5], [0.25, -1]])]
    heads = nk.init_heads(6, 2, seed=0)
    g = nk.gram(X, heads, certify=True)
    rec["claims"] = [cf.gram_claim("first", g, [0])]
    (tmp_path / "s.json").write_text(json.dumps(rec))
    code, out = _run(tmp_path / "s.json")
    assert code == 0 and "samples 0 (of 2; the claim is about these only)" in out[0][2], out


@pytest.mark.parametrize("c,expect", [(["1000000000", "-1000000000"], 0), (["1000000000", "-999999999"], 1)])
def test_huge_null_vector_is_decided_within_seconds(tmp_path, c, expect):
    """A null vector (1e9, -1e9) for translates (true: reduced by its gcd to (1, -1)) and
    (1e9, -1e9 + 1) (false: the expansion is bounded, and its value at a point is certainly not 0)."""
    laws = [_law([[0, 0], [0, 1]]), _law([[1, 0], [1, 1]])]
    cert = {"kind": "product-identity", "null_vector": c, "alpha": ["-1000000000", "0"], "beta": "0", "direction": None}
    path = _write(tmp_path, {"laws": laws}, [_cgf("weak", "dependent", cert)])
    assert len(path.read_bytes()) < 2000
    t0 = time.perf_counter()
    code, out = _run(path)
    assert time.perf_counter() - t0 < 30  # far above the ~0.1 s it takes; a hang would be hours
    assert code == expect, out


MALFORMED = {
    "claims a string": lambda r: r | {"claims": "everything is certified"},
    "claims a list of numbers": lambda r: r | {"claims": [1, 2, 3]},
    "a top-level list": lambda r: [r],
    "a mass 1/0": lambda r: _inputs(r, lambda i: i["laws"][0].update(masses=["1/0", "1/2"])),
    "an exact atom 1/0": lambda r: _inputs(r, lambda i: i["laws"][0].update(atoms={"shape": [2, 2], "exact":
                                                                                   ["0", "0", "1/0", "1"]})),
    "an exponent of a billion": lambda r: _inputs(r, lambda i: i["laws"][0].update(masses=["1e1000000000", "1/2"])),
    "a negative shape": lambda r: _inputs(r, lambda i: i["laws"][0]["atoms"].update(shape=[-1, 2])),
    "a companion outside the directory": lambda r: r | {"arrays": "../x.npz"},
}


def _inputs(rec, change):
    change(rec["inputs"])
    rec["digest"] = verify.digest(rec["inputs"], {})
    return rec


def _malformed(tmp_path: Path, what: str) -> Path:
    laws = [_law(A), _law(B)]
    base = json.loads(_write(tmp_path, {"laws": laws}, [_cgf("weak", "dependent", {
        "kind": "product-identity", "null_vector": ["1", "-1"], "alpha": ["-1", "0"], "beta": "0",
        "direction": None})]).read_text())
    (tmp_path / "m.json").write_text(json.dumps(MALFORMED[what](base)))
    return tmp_path / "m.json"


@pytest.mark.parametrize("what", list(MALFORMED))
def test_malformed_files_end_in_one_line(tmp_path, capsys, what):
    """``verify.main`` (the command's body): exit 2, nothing on stdout, one line on stderr. An
    exception escaping it would be the traceback the command used to print."""
    assert verify.main([str(_malformed(tmp_path, what))]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and "unreadable certificate" in out.err, out


def test_the_command_on_a_malformed_file(tmp_path):
    """``python -m ntkcheck.verify`` itself on one of them: one line, exit 2, no traceback."""
    run = subprocess.run([sys.executable, "-m", "ntkcheck.verify", str(_malformed(tmp_path, "a top-level list"))],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2 and run.stdout == "" and len(run.stderr.strip().splitlines()) == 1, run
    assert "Traceback" not in run.stderr


def test_beyond_the_work_bound_a_true_identity_is_unchecked(tmp_path, monkeypatch):
    """The expansion's budget (``MAX_WORDS``) set to 1 word: a true identity (``{0, 1}`` and its
    convolution square ``{0, 1, 2}``, ``c = (2, -1)``: sympy confirms it) is "unchecked", never
    verified or refuted; a false one (``c = (3, -1)``) is refuted by its value at a point, in balls."""
    identity = sys.modules["ntkcheck.verify._identity"]
    monkeypatch.setattr(identity, "MAX_WORDS", 1)
    one = {"kind": "empirical", "atoms": {"shape": [2, 1], "data": [0.0, 1.0]}, "masses": ["1/2", "1/2"]}
    two = {"kind": "empirical", "atoms": {"shape": [3, 1], "data": [0.0, 1.0, 2.0]}, "masses": ["1/4", "1/2", "1/4"]}
    outcomes = {}
    for c in (["2", "-1"], ["3", "-1"]):
        cert = {"kind": "product-identity", "null_vector": c, "alpha": ["0"], "beta": "0", "direction": None}
        code, out = _run(_write(tmp_path, {"laws": [one, two]}, [_cgf("weak", "dependent", cert)], f"{c[0]}.json"))
        outcomes[c[0]] = (code, out[0][1])
    assert outcomes == {"2": (3, "unchecked"), "3": (1, "refuted")}, outcomes
    laws = oracle.laws_of({"inputs": {"laws": [one, two]}})
    assert oracle.identity_holds(laws, [F(2), F(-1)], [F(0)], None)
    assert not oracle.identity_holds(laws, [F(3), F(-1)], [F(0)], None)
