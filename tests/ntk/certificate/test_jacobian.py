"""``ntkcheck certify --jacobian`` / :func:`ntkcheck.certify_jacobian`, and the done-when test of issue 33:
an NTK built by an independent derivative, in float64 and float32, certified correctly with the defaults.

References are independent of the code under test: singular values and eigenvalues in mpmath at 50
digits of the exact float entries, ranks in exact rationals (``fractions``), the Jacobian of the
attention layer checked against complex-step derivatives (and against ``torch.func.jacrev`` when
torch is installed).
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

from ntkcheck import certify_jacobian, certify_matrix
from ntkcheck.cli import main
from ntkcheck.cli._args import load_schema


def _lambda_min_gram(J: np.ndarray) -> mpmath.mpf:
    """lambda_min(J J^T) of the exact float entries: the Gram in mpmath at 50 digits (entries exact
    products and sums to 1e-48 relative), then its eigenvalues (error ~1e-45 |J|^2)."""
    with mpmath.workdps(50):
        Jm = mpmath.matrix(J.astype(np.float64).tolist())
        return min(mpmath.eigsy(Jm * Jm.T, eigvals_only=True))


def _rank_exact(A: np.ndarray) -> int:
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


# ---------------------------------------------------------------------- the Jacobian route


@settings(deadline=None, max_examples=25)
@given(n=st.integers(1, 10), extra=st.integers(0, 6), e=st.sampled_from([0.0, 1e-9, 1e-4]),
       seed=st.integers(0, 2**32 - 1))
def test_a_jacobian_bound_holds_for_every_jacobian_in_the_ball(n, extra, e, seed):
    """Soundness: a certified bound ``b`` is at most lambda_min(J_* J_*^T) for J itself and for
    members of the ball |J_* - J| <= e (the corners J +- e sign patterns, the worst directions of
    an entrywise ball), by mpmath."""
    rng = np.random.default_rng(seed)
    J = rng.standard_normal((n, n + extra))
    res = certify_jacobian(J, abs_error=e)
    assert res.status in ("certified positive", "not certified")
    if not res.positive:
        return
    assert 0 < res.lower_bound <= _lambda_min_gram(J)
    for _ in range(3):
        Js = J + e * rng.choice([-1.0, 1.0], size=J.shape)
        assert res.lower_bound <= _lambda_min_gram(Js)


def test_a_jacobian_bound_that_ignores_the_error_is_caught(monkeypatch):
    """Mutation: the radius sqrt(n p) e dropped certifies a bound that a corner of the ball violates."""
    import ntkcheck.ntk.certificate.jacobian as jm

    real = jm.sigma_min_lower
    monkeypatch.setattr(jm, "sigma_min_lower", lambda F, eps: real(F, 0.0))
    rng = np.random.default_rng(4)
    J = rng.standard_normal((4, 5))
    e = 0.05
    res = jm.certify_jacobian(J, abs_error=e)
    worst = min(_lambda_min_gram(J + e * rng.choice([-1.0, 1.0], size=J.shape)) for _ in range(40))
    assert res.positive and res.lower_bound > worst


def test_the_condition_number_is_not_squared():
    """sigma_min(J) / sigma_max(J) = 1e-10: the Gram J J^T has a relative lambda_min of 1e-20, far
    below what any float64 matrix resolves (certify on it cannot prove it positive), while the
    Jacobian route certifies a bound within a factor 2 of the truth (mpmath)."""
    rng = np.random.default_rng(5)
    U_, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    V_, _ = np.linalg.qr(rng.standard_normal((20, 8)))
    J = (U_ * np.logspace(0, -10, 8)) @ V_.T
    truth = _lambda_min_gram(J)
    assert not certify_matrix(J @ J.T).positive
    res = certify_jacobian(J)
    assert res.positive and truth / 2 <= res.lower_bound <= truth
    assert res.method == "float64-preconditioned" and "never squared" in res.statement


def test_more_rows_than_columns_is_singular_at_once_whatever_the_error(tmp_path, capsys):
    """The issue's per-token NTK: 2880 rows, 1,088 parameters. rank(J J^T) <= 1088 < 2880 for every
    Jacobian of that shape: certified singular with a kernel of dimension >= 1792, for every error
    bound, without arithmetic on J (the exact rank is skipped above 400 columns, and said)."""
    J = np.random.default_rng(6).standard_normal((2880, 1088))
    f = tmp_path / "J.npy"
    np.save(f, J)
    assert main(["certify", "--jacobian", str(f), "--abs-error", "0.5"]) == 1
    out = capsys.readouterr().out
    assert "certified singular (rank-by-size)" in out and "at least 1792" in out
    assert "skipped" in out and "above 400" in out
    res = certify_jacobian(J)
    assert res.status == "certified singular" and res.max_rank == 1088 and res.lambda_min_float is None


def test_an_exactly_dependent_jacobian_gets_its_exact_kernel():
    """Integer rows with two exact dependencies (reference: exact elimination): the float route cannot
    prove anything, the exact rank gives the kernel dimension n - rank exactly."""
    rng = np.random.default_rng(7)
    B = rng.integers(-3, 4, size=(6, 4)).astype(float)
    J = np.vstack([B.T, B.T[:2] + B.T[2:4]]) @ rng.integers(-2, 3, size=(6, 9)).astype(float)
    r = _rank_exact(J)
    assert r < J.shape[0]
    res = certify_jacobian(J)
    assert res.status == "certified singular" and res.rank == r and res.max_rank == r
    assert f"kernel of dimension {J.shape[0] - r}" in res.statement
    assert certify_jacobian(J, abs_error=1e-12).status == "not certified"  # a ball has no single rank


def test_float32_jacobian_defaults_its_error_and_says_so():
    rng = np.random.default_rng(8)
    J = rng.standard_normal((10, 30)).astype(np.float32)
    res = certify_jacobian(J)
    assert res.abs_error == pytest.approx(64 * 2.0**-24 * float(np.abs(J).max()), rel=1e-12)
    assert any("float32" in n for n in res.notes) and res.dtype == "float32"
    assert res.positive and res.lower_bound <= _lambda_min_gram(J)


# ---------------------------------------------------------------------- done when (issue 33)


def _attention(X: np.ndarray, Q: np.ndarray, V: np.ndarray) -> np.ndarray:
    """One softmax attention layer on the tokens ``X`` (N, d): softmax(X Q X^T) X V, in the dtype of
    its inputs (complex for the complex-step check)."""
    S = X @ Q @ X.T
    S = S - S.real.max(axis=1, keepdims=True)
    P = np.exp(S)
    return (P / P.sum(axis=1, keepdims=True)) @ X @ V


def _jacobian_closed_form(X: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """d vec(f) / d vec(V) of ``_attention``: f_ik = sum_l (P X)_il V_lk, so the derivative in V_lm is
    (P X)_il delta_km: J = kron(P X, I_d), rows (token i, coordinate k), columns (l, m)."""
    S = X @ Q @ X.T
    S = S - S.max(axis=1, keepdims=True)
    P = np.exp(S)
    PX = (P / P.sum(axis=1, keepdims=True)) @ X
    return np.kron(PX, np.eye(X.shape[1], dtype=X.dtype))


def _complex_step_jacobian(X: np.ndarray, Q: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The same derivative by complex steps (error ~h^2, h = 1e-20: exact to rounding)."""
    N, d = X.shape
    J = np.zeros((N * d, d * d))
    for col in range(d * d):
        dV = np.zeros((d, d), dtype=complex)
        dV.flat[col] = 1e-20j
        J[:, col] = (_attention(X.astype(complex), Q.astype(complex), V + dV).imag / 1e-20).ravel()
    return J


def _two_order_gram(J: np.ndarray) -> np.ndarray:
    """J J^T summed in two orders, as autodiff libraries do: the upper triangle forwards, the lower
    one backwards, so the matrix is symmetric only up to rounding."""
    K = np.einsum("ap,bp->ab", J, J)
    Kr = np.einsum("ap,bp->ab", J[:, ::-1], J[:, ::-1])
    return np.triu(K) + np.tril(Kr, -1)


def _model(N: int, d: int, dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens, query-key matrix and values; seed 5 gives N = 3 tokens whose softmax means are far from
    dependent (lambda_min 0.18 of lambda_max 4.8: other seeds pick one token for two rows)."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((N, d)).astype(dtype)
    Q = (2.0 * rng.standard_normal((d, d))).astype(dtype)  # peaked softmax: P X far from rank-deficient
    V = rng.standard_normal((d, d)).astype(dtype)
    return X, Q, V


def test_the_closed_form_jacobian_is_the_derivative():
    """The reference of the done-when test: kron(P X, I) against complex-step derivatives of the
    layer (rtol 1e-12: both are exact to a few ulps of entries of order 1)."""
    X, Q, V = _model(4, 3, np.float64)
    np.testing.assert_allclose(_jacobian_closed_form(X, Q), _complex_step_jacobian(X, Q, V), rtol=1e-12, atol=1e-14)


def _torch_jacobian(X: np.ndarray, Q: np.ndarray, V: np.ndarray) -> np.ndarray | None:
    torch = pytest.importorskip("torch")
    from torch.func import jacrev

    Xt, Qt = torch.from_numpy(X), torch.from_numpy(Q)

    def f(v: torch.Tensor) -> torch.Tensor:
        return (torch.softmax(Xt @ Qt @ Xt.T, dim=1) @ Xt @ v).reshape(-1)

    return jacrev(f)(torch.from_numpy(V)).reshape(X.shape[0] * X.shape[1], -1).numpy()


@pytest.mark.parametrize("how", ["closed-form", "torch"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("N", [3, 7])
def test_an_independent_ntk_is_certified_correctly_with_the_defaults(how, dtype, N, tmp_path, capsys):
    """Done when (issue 33): the NTK in V of one attention layer (d = 4 parameters per coordinate,
    16 parameters), its Jacobian from an independent derivative (the closed form checked by
    complex steps above; torch.func.jacrev when torch is installed) in float64 and float32, its
    Gram summed in two orders (a rounding-level skew, as torch.func leaves), and ``certify`` /
    ``certify --jacobian`` with the DEFAULT options:

    * N = 3 <= d tokens: P X has full row rank, the NTK kron((PX)(PX)^T, I) is positive definite:
      both routes certify it, with bounds at most the exact lambda_min of the float64 model (mpmath);
    * N = 7 > d: the NTK has rank 4 d = 16 < 28 rows: the Jacobian route proves it singular by size
      (and by the exact rank for float64; exit 1), the matrix route never calls it positive.
    """
    d = 4
    X, Q, V = _model(N, d, dtype)
    J = _jacobian_closed_form(X, Q) if how == "closed-form" else _torch_jacobian(X, Q, V)
    if how == "torch":
        np.testing.assert_allclose(J, _jacobian_closed_form(X, Q), rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-6 if dtype == np.float32 else 1e-14)  # float32: ~10 ulps of O(1) entries
    K = _two_order_gram(J)
    assert K.dtype == dtype
    jf, kf = tmp_path / "J.npy", tmp_path / "K.npy"
    np.save(jf, J)
    np.save(kf, K)
    # the truth: the exact NTK of the model at the given (float32-rounded) inputs, from a float64
    # closed form (its own error ~1e-16, far below every margin here) and mpmath
    truth = _lambda_min_gram(_jacobian_closed_form(X.astype(np.float64), Q.astype(np.float64)))
    code_k = main(["certify", str(kf), "--json"])
    rk = json.loads(capsys.readouterr().out)
    code_j = main(["certify", "--jacobian", str(jf), "--json"])
    rj = json.loads(capsys.readouterr().out)
    for r in (rk, rj):
        jsonschema.validate(r, load_schema("certify"))
    if N <= d:
        assert truth > 0.1
        assert (code_k, code_j) == (0, 0), (rk["statement"], rj["statement"])
        assert 0 < rk["lower_bound"] <= truth and 0 < rj["lower_bound"] <= truth
    else:
        # float64, abs_error 0: the exact rank of J (16) on top of the size; float32: a ball, the size alone
        assert code_j == 1 and rj["method"] in ("rank-by-size", "exact-rank") and rj["max_rank"] == d * d
        assert rk["status"] != "certified positive" and code_k in (1, 3)
    if dtype == np.float32:
        assert any("float32" in n for n in rk["notes"] + rj["notes"])
