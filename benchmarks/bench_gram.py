"""Benchmark of the NTK Gram at FixUp (ntkcheck.ntk.gram_matrix.pipeline), issues 3, 14, 23 and 32.

Default (issue 23, the Gram at the matmul limit): d = 8, N = 8 tokens a sample, H = 4 M / d heads
(``F`` of shape ``M x 4M``), per M, medians over ``--repeats`` interleaved runs of

* ``F @ F.T`` in numpy (the GEMM of the feature shape; numpy dispatches a matrix times its own
  transpose to BLAS ``syrk``, one triangle) and a true GEMM ``A @ B.T`` of the same shape;
* ``gram()`` (features, ``syrk`` accumulated over head blocks, Cholesky, Lanczos) and
  ``gram(certify=True)``, with the ratios gram / GEMM and certified / gram;
* the tracemalloc peak of ``gram(certify=True)`` against one ``M x M`` float64 matrix;
* ``--peer``: the torch.func Jacobian NTK (``benchmarks/peer_torch.py``) in its own process on
  the same tokens and heads (needs ``pip install torch``; never a dependency of ntkcheck),
  and the ratio peer / gram.

``--large`` adds M = 16384 with ``H d = 2 M`` (one run, certified time and peak memory; no GEMM
baseline there: a separate ``16384 x 16384`` product crashed this machine's OpenBLAS).

``--features`` (issue 3): for M token slots (N = 8 tokens a sample, M / 8 samples), d = 8 and 32, H d = 2 M heads:

* features: best-of-3 wall time of ``attention_features``, against

  - a plain numpy matmul with the same FLOP count (``H M (4 N d + 2 d^2)``: queries,
    scores, softmax means), timed in the same run (``x mm``; the issue's aim is 3x), and
  - the honest lower bound ``max(flops / matmul rate, exps / exp rate)`` of
    ``theory/certificates.md``, "The Gram matrix" (``x bound``): ``M H N`` exponentials, the exp rate measured in this run on
    a cache-resident array (numpy's fastest case), best of 3;

* spectrum: what ``gram(method="auto")`` does against ``numpy.linalg.eigvalsh`` on the
  formed ``M x M`` matrix (aim: never slower). Up to M = 4096 both start from ``F``:
  auto = ``syrk`` (lower triangle) + ``eigvalsh``, baseline = ``F @ F.T`` + ``eigvalsh``.
  Above, ``F`` is never stored: ``F F^T`` is accumulated over head blocks (``form``, the
  same for both, includes the features) and auto = Cholesky + Lanczos on that matrix,
  baseline = ``eigvalsh`` of it;
* peak memory of the auto route (tracemalloc; numpy reports its buffers to it);
* ``--laws``: the cost of the distinct-atom assembly (issue 11): features of laws whose
  masses are unequal (every sample has one token repeated: the softmax is weighted) against
  equal masses, and the dependence structure (duplicates, translates, products, exact
  kernel count) on the screening case of 64 samples x 32 tokens in d = 384, with the first
  32 samples repeated.

* ``--cert``: the certified route (issue 14), ``certify_positive`` (float64 features and
  Gram with rigorous error bounds, Rump's verified Cholesky), against the float64 spectrum
  ``gram()`` (features, ``syrk``, ``eigvalsh``) in the same run, at d = 8, N = 8,
  H d = 2 M, M = 1024 and 4096 (aim: ratio <= 3 at 4096); prints the certified lower bound
  against the float64 lambda_min and the tracemalloc peak of each route. ``--cert --large``
  adds M = 16384 (one M x M Gram of 2.1 GB for the certified route; ~15-30 min on 2 cores). ``--arb``: the Arb route (``certify_lambda_min``) at d = 2,
  M doubled from 16 until one run takes more than 60 s.
* ``--arb-largest``: the preconditioned certificate at d = 2 (``certify_lambda_min(method=
  "preconditioned")``, float64 features and a preconditioner with proved bounds), M doubled
  from 256 while a run takes at most 60 s, the Arb route timed beside it at M = 256, and the
  refusals beyond (above ``MAX_CERTIFY_TOKENS``; relative lambda_min ~1e-29).

Usage: ``python benchmarks/bench_gram.py [--sizes 1024,4096] [--repeats 3] [--peer] [--large]``, or
``--features [--quick | --full] [--rows M:d ...] | --cert [--large] | --arb | --arb-largest | --laws``.
``--features``: M = 256, 1024, 4096 (a few minutes); ``--quick``: M <= 1024 (seconds); ``--full`` adds M = 16384 at d = 8
(F F^T accumulation ~ 9e12 flops and eigvalsh of a 16384 x 16384 matrix: ~11 minutes
on 2 cores, ~6 GiB). The machine may be shared: times are best-of-3 where cheap, and the
baselines are re-timed next to each row.
"""

# ruff: noqa: B023  (the timed lambdas run immediately, inside the loop iteration)
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import scipy.linalg as sla

from ntkcheck.cgf import Empirical, as_laws
from ntkcheck.ntk.certificate.rounding import enclosed_gram
from ntkcheck.ntk.gram_matrix.features import attention_features, init_heads
from ntkcheck.ntk.gram_matrix.pipeline import gram
from ntkcheck.ntk.gram_matrix.spectrum import _extremal_eigh

N_TOK = 8


def _gram_lower(F: np.ndarray) -> np.ndarray:
    """``F F^T`` of a whole ``F`` by BLAS ``syrk`` (lower triangle): what ``gram()`` does block by block."""
    return sla.blas.dsyrk(1.0, np.ascontiguousarray(F).T, trans=1, lower=1)


def _best(f, repeat=3):
    best = np.inf
    out = None
    for _ in range(repeat):
        out = None  # free the previous result before the next run
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def _matmul_time(flops: float) -> float:
    """Time of a square numpy matmul scaled to ``flops`` (n <= 2048: the rate is flat there)."""
    n = int(min(2048, max(64, round((flops / 2) ** (1 / 3)))))
    a = np.random.default_rng(0).standard_normal((n, n))
    out = np.empty_like(a)
    t, _ = _best(lambda: np.matmul(a, a, out=out))
    return t * flops / (2.0 * n**3)


def _exp_rate() -> float:
    """np.exp throughput (float64, in place) on a 2^16-entry array, as in the feature tiles."""
    x = np.random.default_rng(0).uniform(-8.0, 8.0, 1 << 16)
    y = np.empty_like(x)
    reps = 64
    t, _ = _best(lambda: [np.exp(x, out=y) for _ in range(reps)])
    return reps * x.size / t


def _peak_mib(f) -> tuple[float, object]:
    tracemalloc.start()
    try:
        out = f()
        return tracemalloc.get_traced_memory()[1] / 2**20, out
    finally:
        tracemalloc.stop()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="M <= 1024 only")
    g.add_argument("--full", action="store_true", help="add M = 16384 at d = 8 (~11 min more)")
    ap.add_argument("--rows", nargs="+", metavar="M:d", help="explicit rows instead, e.g. 16384:8")
    ap.add_argument("--laws", action="store_true", help="only the distinct-atom / structure timings")
    ap.add_argument("--cert", action="store_true", help="only certified route / float64 spectrum (issue 14)")
    ap.add_argument("--arb", action="store_true", help="only the Arb route's largest M within 60 s at d = 2")
    ap.add_argument("--arb-largest", action="store_true",
                    help="only the fast (preconditioned) certificate at d = 2: largest M within 60 s (issue 14)")
    ap.add_argument("--large", action="store_true", help="with --cert or the default table: add M = 16384 (run it alone)")
    ap.add_argument("--features", action="store_true", help="the feature / spectrum table of issue 3")
    ap.add_argument("--sizes", default="1024,2048,4096", help="default table: comma-separated M")
    ap.add_argument("--repeats", type=int, default=3, help="default table: interleaved runs per M (medians)")
    ap.add_argument("--peer", action="store_true", help="default table: time the torch.func peer (own process)")
    args = ap.parse_args(argv)
    if not (args.features or args.laws or args.cert or args.arb or args.arb_largest):
        from _bench_limit import limit_bench

        limit_bench([int(m) for m in args.sizes.split(",") if m], args.repeats, args.peer, args.large)
        return
    if args.laws:
        _laws_bench()
        return
    if args.cert:
        _cert_bench([(8, 1024), (8, 4096)] + ([(8, 16384)] if args.large else []) if not args.rows else
                    [(int(r.split(":")[1]), int(r.split(":")[0])) for r in args.rows])
        return
    if args.arb:
        _arb_bench()
        return
    if args.arb_largest:
        _arb_largest_bench()
        return
    sizes = [256, 1024] if args.quick else [256, 1024, 4096]
    rows = [(d, M) for d in (8, 32) for M in sizes]
    if args.full:
        rows.append((8, 16384))
    if args.rows:
        rows = [(int(r.split(":")[1]), int(r.split(":")[0])) for r in args.rows]
    hdr = (f"{'M':>6} {'d':>3} {'H':>5} | {'feat s':>7} {'mm s':>7} {'x mm':>5} {'bound s':>7} {'x bound':>7} {'exp M/s':>7} | "
           f"{'form s':>7} {'route':>16} {'auto s':>7} {'eigh s':>7} {'auto/eigh':>9} | {'rel lmin':>8} {'peak MiB':>8}")
    print(hdr)
    print("-" * len(hdr), flush=True)
    rng = np.random.default_rng(0)
    for d, M in rows:
        H = 2 * M // d
        S = as_laws([rng.standard_normal((N_TOK, d)) / np.sqrt(d) for _ in range(M // N_TOK)])
        heads = init_heads(H, d, seed=1)
        flops = H * M * (4.0 * N_TOK * d + 2.0 * d * d)
        exps = float(H * M * N_TOK)
        exp_rate = _exp_rate()
        t_mm = _matmul_time(flops)
        bound = max(t_mm, exps / exp_rate)
        t_feat, _ = _best(lambda: attention_features(S, heads))
        if M <= 4096:
            # auto: syrk + eigvalsh of the lower triangle; baseline: F @ F.T + eigvalsh
            F = attention_features(S, heads)
            reps = 3 if M <= 1024 else 2
            t_form_auto, G = _best(lambda: _gram_lower(F), reps)
            t_eig_auto, _ = _best(lambda: np.linalg.eigvalsh(G, UPLO="L"), reps)
            del G
            t_form_base, G = _best(lambda: F @ F.T, reps)
            t_eig_base, ev = _best(lambda: np.linalg.eigvalsh(G), reps)
            del F, G
            route, t_form = "syrk+eigvalsh", t_form_auto
            t_auto, t_base = t_form_auto + t_eig_auto, t_form_base + t_eig_base
            rel = ev[0] / ev[-1]
            peak, res = _peak_mib(lambda: gram(S, heads, spectrum="full"))
            assert res.method == "eigvalsh", res  # the route timed above
        else:
            # F is never stored: the Gram is accumulated (shared by both routes), timed once
            def auto():
                t0 = time.perf_counter()
                G = enclosed_gram(S, heads, 1 << 17, bound=False).G
                t1 = time.perf_counter()
                ext = _extremal_eigh(G)
                return G, ext, t1 - t0, time.perf_counter() - t1

            peak, (G, ext, t_form, t_auto) = _peak_mib(auto)
            route = "cholesky-lanczos"
            t_base, ev = _best(lambda: np.linalg.eigvalsh(G, UPLO="L"), 1)
            rel = ext[0] / ext[1] if ext is not None else ev[0] / ev[-1]
            del G
        print(f"{M:>6} {d:>3} {H:>5} | {t_feat:>7.3f} {t_mm:>7.4f} {t_feat / t_mm:>5.1f} {bound:>7.4f} {t_feat / bound:>7.2f} "
              f"{exp_rate / 1e6:>7.0f} | {t_form:>7.2f} {route:>16} {t_auto:>7.2f} {t_base:>7.2f} {t_auto / t_base:>9.2f} | "
              f"{rel:>8.1e} {peak:>8.0f}", flush=True)
    print("feat s: attention_features, best of 3; x mm = feat / (numpy matmul of equal FLOPs); bound = "
          "max(flops / matmul rate, M H N / exp rate); x bound = feat / bound.\n"
          "M <= 4096: form s = syrk; auto s = syrk + eigvalsh; eigh s = F @ F.T + eigvalsh. "
          "M > 4096: form s = accumulated F F^T (features included, shared); auto s = Cholesky + Lanczos; "
          "eigh s = eigvalsh of that matrix.\npeak MiB: tracemalloc peak of the auto route (gram(), or form + "
          "Cholesky-Lanczos above 4096).")


def _cert_bench(rows) -> None:
    from ntkcheck.ntk.certificate.routes import certify_positive

    rng = np.random.default_rng(0)
    print(f"{'M':>6} {'d':>3} {'H':>5} | {'cert s':>7} {'float s':>7} {'ratio':>6} | {'lower bound':>11} "
          f"{'lmin f64':>10} {'lb/lmin':>7} {'radius':>8} {'method':>16} | {'cert MiB':>8} {'float MiB':>9} {'chol':>4}")
    for d, M in rows:
        H = 2 * M // d
        S = as_laws([rng.standard_normal((N_TOK, d)) / np.sqrt(d) for _ in range(M // N_TOK)])
        heads = init_heads(H, d, seed=1)
        reps = 2 if M <= 1024 else 1
        t_c, (p_c, cert) = _best(lambda: _peak_mib(lambda: certify_positive(S, heads, arb=False)), reps)
        t_f, (p_f, res) = _best(lambda: _peak_mib(lambda: gram(S, heads)), reps)
        lb = cert.lower_bound if cert.positive else float("nan")
        chol = cert.statement.split(" Cholesky factorisations")[0].rsplit(" ", 1)[-1] if cert.positive else "-"
        print(f"{M:>6} {d:>3} {H:>5} | {t_c:>7.2f} {t_f:>7.2f} {t_c / t_f:>6.2f} | {lb:>11.4e} "
              f"{res.lambda_min:>10.4e} {lb / res.lambda_min:>7.3f} {cert.radius:>8.1e} {cert.method:>16} | "
              f"{p_c:>8.0f} {p_f:>9.0f} {chol:>4}", flush=True)
        if not cert.positive:
            print("   ", cert.statement)
    print("cert s: certify_positive (features and syrk accumulated over head blocks with the |F| |F|^T bound, "
          "Cholesky + Lanczos estimate, Cholesky of G - tI, all in one M x M array); float s: gram() (M <= 4096: "
          "features, syrk, eigvalsh; above: accumulated Gram, Cholesky + Lanczos); radius: proved ||G - fl(G)||_2 "
          "+ Cholesky allowance; MiB: tracemalloc peaks; chol: Cholesky factorisations of the certified route.")


def _arb_bench() -> None:
    from ntkcheck.ntk.certificate.routes import certify_lambda_min

    rng = np.random.default_rng(0)
    print(f"{'M':>5} {'d':>2} {'H':>4} | {'arb s':>7} {'bits':>5} {'lower bound':>11}")
    M = 16
    while M <= 256:
        d = 2
        S = as_laws([rng.standard_normal((N_TOK, d)) / np.sqrt(d) for _ in range(M // N_TOK)])
        heads = init_heads(2 * M // d, d, seed=1)
        t, c = _best(lambda: certify_lambda_min(S, heads, method="arb"), 1)
        print(f"{M:>5} {d:>2} {2 * M // d:>4} | {t:>7.2f} {c.bits:>5} {c.lower_bound or float('nan'):>11.3e}", flush=True)
        if t > 60:
            break
        M *= 2


# ---------------------------------------------------------------- --arb-largest (issue 14)
def _arb_largest_bench() -> None:
    """The preconditioned certificate (``certify_lambda_min(method="preconditioned")``) at d = 2,
    N = 8, H = M (H d = 2 M), M doubled from 256 until one run takes more than 60 s; at M = 256
    the Arb inverse route (``method="arb"``) is timed in the same run (ratio). ``lb / svd``: the
    certified bound over sigma_min(F)^2 from numpy's SVD (a float reference, to M = 2048). Then
    the refusals: above ``MAX_CERTIFY_TOKENS``, and at Q, b scale 1e-6 (relative lambda_min ~1e-29)."""
    from ntkcheck.errors import PrecisionError
    from ntkcheck.ntk.certificate.routes import MAX_CERTIFY_TOKENS, certify_lambda_min

    rng = np.random.default_rng(0)
    d = 2
    print(f"{'M':>5} {'H':>5} | {'fast s':>7} {'arb s':>7} {'arb/fast':>8} | {'lower bound':>11} {'rel lmin':>9} "
          f"{'lb/svd':>7} | kind")
    M = 256
    while M <= MAX_CERTIFY_TOKENS:
        S = as_laws([rng.standard_normal((N_TOK, d)) / np.sqrt(d) for _ in range(M // N_TOK)])
        heads = init_heads(2 * M // d, d, seed=1)
        t, c = _best(lambda: certify_lambda_min(S, heads, method="preconditioned"), 1)
        ta = ratio = float("nan")
        if M == 256:
            ta, ca = _best(lambda: certify_lambda_min(S, heads, method="arb"), 1)
            ratio = ta / t
        rel = ref = float("nan")
        if M <= 2048:
            sv = np.linalg.svd(attention_features(S, heads), compute_uv=False)
            rel, ref = (sv[-1] / sv[0]) ** 2, (c.lower_bound or float("nan")) / sv[-1] ** 2
        print(f"{M:>5} {2 * M // d:>5} | {t:>7.2f} {ta:>7.2f} {ratio:>8.1f} | {c.lower_bound or float('nan'):>11.4e} "
              f"{rel:>9.2e} {ref:>7.4f} | {c.kind}", flush=True)
        if not c.positive:
            print("   ", c.detail)
        if t > 60:
            break
        M *= 2
    big = 2 * MAX_CERTIFY_TOKENS
    S = as_laws([rng.standard_normal((N_TOK, d)) / np.sqrt(d) for _ in range(big // N_TOK)])
    try:
        certify_lambda_min(S, init_heads(big, d, seed=1))
    except PrecisionError as exc:
        print(f"M = {big}: {exc}")
    S = as_laws([rng.standard_normal((N_TOK, d)) / np.sqrt(d) for _ in range(512 // N_TOK)])
    c = certify_lambda_min(S, init_heads(512, d, seed=1, q_scale=1e-6, b_scale=1e-6), method="preconditioned")
    print(f"M = 512, Q, b scale 1e-6: {c.kind}: {c.detail}")


def _laws_bench() -> None:
    from ntkcheck.ntk.prop8.structure import dependence_structure

    rng = np.random.default_rng(0)
    print(f"{'M':>6} {'d':>4} {'H':>5} | {'equal s':>8} {'weighted s':>10} {'ratio':>6}")
    for M, d in ((1024, 8), (2048, 384)):
        N = 8 if d == 8 else 32
        H = 2 * M // d
        X = [rng.standard_normal((N, d)) / np.sqrt(d) for _ in range(M // N)]
        equal = as_laws(X)
        # token weights 2, 1, ..., 1: unequal masses (a weighted softmax), the same atom count N
        weighted = [Empirical(x, [2] + [1] * (N - 1)) for x in X]
        heads = init_heads(H, d, seed=1)
        t_eq, _ = _best(lambda: attention_features(equal, heads))
        t_w, _ = _best(lambda: attention_features(weighted, heads))
        print(f"{M:>6} {d:>4} {H:>5} | {t_eq:>8.3f} {t_w:>10.3f} {t_w / t_eq:>6.2f}", flush=True)
    S = [rng.standard_normal((32, 384)) for _ in range(32)]
    S = as_laws(S + [x.copy() for x in S])
    t, st = _best(lambda: dependence_structure(S), 1)
    print(f"dependence_structure, 64 x 32 x 384 with 32 duplicated samples: {t:.2f} s "
          f"({len(st.relations)} relations, predicted kernel {st.predicted_kernel}, exact {st.exact})")
    S = as_laws([rng.standard_normal((32, 384)) for _ in range(64)])
    t, st = _best(lambda: dependence_structure(S, certify=False), 1)
    print(f"find the structures (no decide), 64 x 32 x 384 independent: {t:.3f} s")


if __name__ == "__main__":
    main()
