"""``ntkcheck certify`` / :func:`ntkcheck.certify_matrix`: a symmetric matrix made elsewhere (issue 25).

References are independent of the code under test: eigenvalues in mpmath at 50 digits of the
exact float entries, ranks and quadratic forms in exact rationals (``fractions``).
"""

from __future__ import annotations

import json
from fractions import Fraction

import jsonschema
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkcheck import certify_matrix
from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema
from ntkcheck.errors import InputError


def _lambda_min_exact(S: np.ndarray) -> float:
    """lambda_min of the float matrix's exact values: mpmath at 50 digits (error ~1e-48 |S|)."""
    with mpmath.workdps(50):
        return float(min(mpmath.eigsy(mpmath.matrix(S.tolist()), eigvals_only=True)))


def _leading_minors(A: np.ndarray) -> list[Fraction]:
    """The leading principal minors of the float matrix's exact values, by Fraction elimination
    with no pivoting (a zero pivot ends the list: the next minors are not needed)."""
    M = [[Fraction(float(v)) for v in row] for row in A]
    n, out, det = len(M), [], Fraction(1)
    for k in range(n):
        if M[k][k] == 0:
            out.append(Fraction(0))
            return out
        det *= M[k][k]
        out.append(det)
        for i in range(k + 1, n):
            f = M[i][k] / M[k][k]
            M[i] = [a - f * b for a, b in zip(M[i], M[k])]
    return out


def _det_exact(A: np.ndarray) -> Fraction:
    """The determinant of the float matrix's exact values (Fraction elimination with row pivoting)."""
    M = [[Fraction(float(v)) for v in row] for row in A]
    n, det = len(M), Fraction(1)
    for k in range(n):
        p = next((i for i in range(k, n) if M[i][k] != 0), None)
        if p is None:
            return Fraction(0)
        if p != k:
            M[k], M[p] = M[p], M[k]
            det = -det
        det *= M[k][k]
        for i in range(k + 1, n):
            f = M[i][k] / M[k][k]
            M[i] = [a - f * b for a, b in zip(M[i], M[k])]
    return det


def _not_psd_exactly(A: np.ndarray) -> bool:
    """Whether the exact matrix has a negative eigenvalue: a negative determinant, or a positive one
    with a leading minor <= 0 (then not positive definite, and a PSD matrix with det > 0 is PD)."""
    det = _det_exact(A)
    return det < 0 or (det > 0 and min(_leading_minors(A)) <= 0)


def _rank_exact(A: np.ndarray) -> int:
    """Rank over Q by fraction-exact Gaussian elimination."""
    M = [[Fraction(float(v)) for v in row] for row in A]
    r = 0
    for c in range(len(M[0])):
        p = next((i for i in range(r, len(M)) if M[i][c] != 0), None)
        if p is None:
            continue
        M[r], M[p] = M[p], M[r]
        for i in range(r + 1, len(M)):
            f = M[i][c] / M[r][c]
            M[i] = [a - f * b for a, b in zip(M[i], M[r])]
        r += 1
    return r


@settings(deadline=None, max_examples=25)
@given(n=st.integers(2, 12), k=st.integers(0, 6), e=st.sampled_from([0.0, 1e-12, 1e-6]), seed=st.integers(0, 2**32 - 1))
def test_a_certified_bound_holds_for_every_matrix_in_the_ball(n, k, e, seed):
    """Soundness: whenever ``certify_matrix`` says certified positive with bound ``b``, the
    exact ``lambda_min`` of the matrix is at least ``b``, and so is that of the ball's worst
    member ``S = A - e sign(v v^T)`` (``v`` its bottom eigenvector: ``v^T S v = lambda - e |v|_1^2``).
    Matrices ``J J^T`` with ``J`` of ``n + k - 3`` columns: singular for ``k < 3``."""
    rng = np.random.default_rng(seed)
    J = rng.standard_normal((n, max(1, n + k - 3)))
    A = J @ J.T
    res = certify_matrix(A, abs_error=e)
    if res.status != "certified positive":
        return
    assert res.lower_bound <= _lambda_min_exact(A)
    v = np.linalg.eigh(A)[1][:, 0]
    S = A - e * np.sign(np.outer(v, v))
    assert res.lower_bound <= _lambda_min_exact(S)


def test_a_certificate_that_ignores_the_error_bound_is_caught(monkeypatch):
    """Mutation: the radius of the ball dropped (``abs_error`` ignored) certifies a bound that a
    member of the ball violates; the soundness check above sees it."""
    import ntkcheck.ntk.certificate.user_matrix as um

    real = um.certify_gram_enclosure
    monkeypatch.setattr(um, "certify_gram_enclosure", lambda C, radius: real(C, 0.0))
    rng = np.random.default_rng(0)
    J = rng.standard_normal((6, 7))
    A = J @ J.T
    e = 0.5 * np.linalg.eigvalsh(A)[0] / 6  # the worst member loses about e |v|_1^2 <= 6 e of lambda_min
    res = um.certify_matrix(A, abs_error=e)
    v = np.linalg.eigh(A)[1][:, 0]
    assert res.positive and res.lower_bound > _lambda_min_exact(A - e * np.sign(np.outer(v, v)))


def test_random_spd_file_is_certified_and_the_bound_is_tight(tmp_path, capsys):
    rng = np.random.default_rng(1)
    J = rng.standard_normal((30, 45))
    A = J @ J.T
    f = tmp_path / "K.npy"
    np.save(f, A)
    assert main(["certify", str(f)]) == 0
    out = capsys.readouterr().out
    assert "certified positive" in out
    res = certify_matrix(f)
    lam = _lambda_min_exact(A)
    assert 0.5 * lam <= res.lower_bound <= lam  # the shift is 0.9 of the estimate, errors ~1e-12


def test_exactly_singular_matrix_is_certified_singular(tmp_path, capsys):
    """A matrix of small integers with a repeated row: rank 2 of 3, exactly (reference: exact
    elimination); exit 1. With an error bound, singularity cannot be proved: exit 3 or 1
    (indefinite)."""
    A = np.array([[2.0, 1.0, 3.0], [1.0, 2.0, 3.0], [3.0, 3.0, 6.0]])
    assert _rank_exact(A) == 2
    f = tmp_path / "S.npy"
    np.save(f, A)
    assert main(["certify", str(f)]) == 1
    assert "rank 2 < 3" in capsys.readouterr().out
    assert certify_matrix(A).rank == 2
    assert main(["certify", str(f), "--abs-error", "1e-9"]) in (1, 3)
    assert certify_matrix(A, abs_error=1e-9).status != "certified singular"


def test_rounded_singular_gram_is_refused(tmp_path, capsys):
    """``J J^T`` with fewer columns than rows, computed in float64: singular in exact arithmetic of
    ``J``, but the rounded matrix is regular or indefinite. Never certified positive: exit 1 (a
    vector with ``x^T A x < 0``, checked here in exact rationals) or 3 (below resolution)."""
    rng = np.random.default_rng(2)
    J = rng.standard_normal((20, 8))
    A = J @ J.T
    f = tmp_path / "R.npy"
    np.save(f, A)
    code = main(["certify", str(f)])
    out = capsys.readouterr().out
    assert code in (1, 3) and "below float64 resolution" in out
    res = certify_matrix(A)
    if res.status == "certified indefinite" and res.vector is not None:
        x = [Fraction(float(v)) for v in res.vector]
        q = sum(x[i] * Fraction(float(A[i, j])) * x[j] for i in range(20) for j in range(20))
        assert q < 0
    elif res.status == "certified indefinite":  # by the exact determinant / minors (n <= 64)
        assert res.method == "exact-determinant" and _not_psd_exactly(A)
    else:
        assert res.status == "not certified"


def test_symmetry_is_refused_or_covered_by_the_error_bound(tmp_path, capsys):
    rng = np.random.default_rng(3)
    J = rng.standard_normal((5, 8))
    A = J @ J.T
    A[0, 1] += 1e-9
    f = tmp_path / "N.npy"
    np.save(f, A)
    assert main(["certify", str(f)]) == 2
    err = capsys.readouterr().err
    assert "not symmetric" in err and "--abs-error" in err and len(err.strip().splitlines()) == 1
    res = certify_matrix(A, abs_error=1e-9)
    assert res.positive and res.skew == pytest.approx(1e-9, rel=1e-6)
    # the bound covers the symmetric matrices within 1e-9 of A: both triangles' values among them
    for S in (np.triu(A) + np.triu(A, 1).T, np.tril(A) + np.tril(A, -1).T):
        assert res.lower_bound <= _lambda_min_exact(S)


@pytest.mark.parametrize("bad", ["nan", "shape", "object", "empty"])
def test_bad_matrix_files(bad, tmp_path, capsys):
    f = tmp_path / "bad.npy"
    if bad == "nan":
        A = np.eye(3)
        A[1, 2] = A[2, 1] = np.nan
        np.save(f, A)
    elif bad == "shape":
        np.save(f, np.ones((2, 3)))
    elif bad == "object":
        np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    else:
        np.save(f, np.zeros((0, 0)))
    assert main(["certify", str(f)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_below_resolution_is_said():
    """A diagonal matrix with entries 1 and 1e-20: positive in exact arithmetic, but under the
    float64 Cholesky's resolution ``(n+1) u tr A``: not certified, and the result says so."""
    A = np.diag([1.0, 1.0, 1e-20])
    res = certify_matrix(A)
    assert res.status in ("not certified", "certified positive") and res.below_resolution
    if res.positive:  # a diagonal Cholesky is exact: still a valid bound
        assert res.lower_bound <= 1e-20


def test_tokens_tell_data_from_rounding(tmp_path, capsys):
    """With the tokens: the Gram of data with an exact dependency (a sample repeated with its
    tokens permuted: equal laws) is singular because of the data; that of independent random
    data is not (whatever its matrix says)."""
    from ntkcheck.cgf import as_laws
    from ntkcheck.ntk import gram, init_heads

    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 2))
    dep = [rng.standard_normal((3, 2)), a, a[::-1].copy()]
    ind = [rng.standard_normal((3, 2)) for _ in range(3)]
    for data, cause in ((dep, "data"), (ind, "not the data")):
        g = gram(as_laws(data), init_heads(12, 2, seed=0), keep_matrix=True)
        res = certify_matrix(g.matrix, tokens=data)
        assert res.diagnosis.cause == cause and res.diagnosis.size == "one row per distinct atom"
    assert res.positive  # the independent data's Gram
    tf, mf = tmp_path / "t.npz", tmp_path / "m.npy"
    np.savez(tf, **{f"sample_{i}": x for i, x in enumerate(dep)})
    np.save(mf, gram(as_laws(dep), init_heads(12, 2, seed=0), keep_matrix=True).matrix)
    code = main(["certify", str(mf), "--tokens", str(tf), "--json"])
    d = json.loads(capsys.readouterr().out)
    jsonschema.validate(d, load_schema("certify"))
    assert code == d["exit_code"] in (1, 3) and d["diagnosis"]["cause"] == "data"
    assert "singular because of the data" in d["diagnosis"]["sentence"]


def test_api_refuses_bad_error_bounds():
    for bad in (-1.0, float("inf"), "1e-3", True):
        with pytest.raises(InputError, match="abs_error"):
            certify_matrix(np.eye(2), abs_error=bad)


def _exact_class(rows: list[list[Fraction]]) -> str:
    """'positive', 'singular' or 'indefinite' of a symmetric 2 x 2 matrix, in exact rationals."""
    (a, b), (_, c) = rows
    det = a * c - b * b
    return "singular" if det == 0 else ("positive" if det > 0 and a > 0 else "indefinite")


@pytest.mark.parametrize("case", [
    # int64 beyond 2^53: float64 rounding makes the first two singular (all entries 2^60);
    # exactly, the first is indefinite (det = -1) and the second positive (det = 2^61)
    np.array([[2 ** 60, 2 ** 60 + 1], [2 ** 60 + 1, 2 ** 60 + 2]], dtype=np.int64),
    np.array([[2 ** 60, 2 ** 60], [2 ** 60, 2 ** 60 + 2]], dtype=np.int64),
    np.array([[2 ** 60 + 1, 2 ** 60 + 1], [2 ** 60 + 1, 2 ** 60 + 1]], dtype=np.int64),
    "longdouble",
])
def test_entries_beyond_float64_are_certified_as_given(case):
    """Integers beyond 2^53 and long doubles are not float64 numbers: a verdict must hold for the
    exact matrix given (compared with its exact determinant in rationals), never for its float64
    rounding. The long double [[1, 1], [1, 1 + 2^-60]] is positive definite, but its rounding is
    exactly singular: without the conversion bound it was 'certified singular'."""
    if isinstance(case, str):
        if np.finfo(np.longdouble).nmant < 60:
            pytest.skip("long double has no more precision than float64 on this platform")
        case = np.ones((2, 2), dtype=np.longdouble)
        case[1, 1] += np.longdouble(2) ** -60
        exact = [[Fraction(1), Fraction(1)], [Fraction(1), 1 + Fraction(1, 2 ** 60)]]
    else:
        exact = [[Fraction(int(v)) for v in row] for row in case]
    truth = _exact_class(exact)
    res = certify_matrix(case)
    assert res.rounding > 0 and res.abs_error >= res.rounding
    assert "rounded to float64" in " ".join(res.notes)
    status = {"certified positive": "positive", "certified singular": "singular",
              "certified indefinite": "indefinite"}.get(res.status)
    assert status in (None, truth), (res.status, truth)
    assert res.status != "certified singular"  # a rank of the rounded matrix is not a rank of the given one


def test_a_well_conditioned_integer_matrix_beyond_float64_is_still_certified():
    """The conversion bound costs nothing when the matrix is far from singular: diag(2^60, 2^60 + 1)
    (entries moved by at most 1 by float64) is certified positive, and the bound is below the exact
    lambda_min 2^60 (a sound bound) and above half of it (the shifted Cholesky proves a shift a fixed
    fraction below the float lambda_min; half leaves room for that margin)."""
    A = np.array([[2 ** 60, 0], [0, 2 ** 60 + 1]], dtype=np.int64)
    res = certify_matrix(A)
    assert res.status == "certified positive" and 0 < res.rounding <= 2
    assert 2.0 ** 59 <= res.lower_bound <= 2.0 ** 60
