"""The default table of ``bench_gram.py`` (issues 23 and 32): ``gram()`` against the GEMM of its feature
shape, and ``gram(certify=True)`` against ``gram()``.

Every ratio is measured within one run, on interleaved repetitions (which of ``gram()`` and
``gram(certify=True)`` runs first alternates; the machine is shared: the medians of the
per-repetition ratios are quoted, and the load average is printed with them). Beside
the wall-clock ratios, the ratio of process CPU times (all threads), which a busy machine disturbs
less, and the time of one Cholesky factorisation of a Gram of the same order on one BLAS thread: a
rigorous lower bound near ``lambda_min`` needs one factorisation at a shift near it beyond the float
path's (``theory/certificates.md``, "Certified at float cost"), so ``cert - gram`` cannot fall below it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.linalg as sla

from ntkcheck.cgf import as_laws
from ntkcheck.ntk import attention_features, gram, init_heads
from ntkcheck.ntk.gram_matrix.cholesky import serial_blas

N_TOK, D = 8, 8


def _timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def _case(M: int, H: int):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((M // N_TOK, N_TOK, D)) / np.sqrt(D)
    return X, as_laws(list(X)), init_heads(H, D, seed=1)


def _gemm_times(S, heads, M: int, K: int) -> tuple[float, float, float]:
    """(numpy ``F @ F.T``, true GEMM ``A @ B.T``, Cholesky of ``F F^T`` on one BLAS thread) of the shape
    ``M x K``, up to 4096 atoms. Above, NaN: a separate product into a ``16384 x 16384`` array crashed
    this machine's OpenBLAS (segmentation fault in ``syrk`` and in ``F @ F.T``, 3 of 3 tries), so the
    large row reports the certified time alone."""
    if M > 4096:
        return float("nan"), float("nan"), float("nan")
    F = attention_features(S, heads)[:, :K]
    t_syrk, G = _timed(lambda: F @ F.T)
    B = F.copy()
    t_gemm, _ = _timed(lambda: F @ B.T)
    G = np.asfortranarray(G)
    with serial_blas():  # as the certificate's factorisations run
        t_chol, _ = _timed(lambda: sla.lapack.dpotrf(G, lower=1, overwrite_a=1))
    return t_syrk, t_gemm, t_chol


def _peer(X, heads) -> dict | None:
    """The torch.func peer in its own process (None when torch is not installed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.npz"
        np.savez(path, X=X, Q=heads.Q, b=heads.b)
        script = Path(__file__).with_name("peer_torch.py")
        r = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            print("    peer failed:", r.stderr.strip().splitlines()[-1:] or r.returncode)
            return None
        return json.loads(r.stdout.strip().splitlines()[-1])


def _row(M: int, H: int, repeats: int, peer: bool) -> dict:
    X, S, heads = _case(M, H)
    K = H * D
    ts: dict[str, list[float]] = {"syrk": [], "gemm": [], "chol": [], "gram": [], "cert": [], "gram_cpu": [],
                                  "cert_cpu": []}
    g = c = None
    peak = 0.0
    for i in range(repeats):
        a, b, ch = _gemm_times(S, heads, M, K)
        ts["syrk"].append(a)
        ts["gemm"].append(b)
        ts["chol"].append(ch)
        for certify in ((False, True) if i % 2 == 0 else (True, False)):  # alternate which runs first
            key = "cert" if certify else "gram"
            last = certify and i == repeats - 1  # the last certified run is also the memory measurement
            if last:
                tracemalloc.start()
            cpu = time.process_time()
            t, res = _timed(lambda c_=certify: gram(S, heads, certify=c_))
            ts[f"{key}_cpu"].append(time.process_time() - cpu)
            ts[key].append(t)
            if last:
                peak = tracemalloc.get_traced_memory()[1] / (8.0 * M * M)
                tracemalloc.stop()
            g, c = (g, res) if certify else (res, c)
    med = {k: statistics.median(v) for k, v in ts.items()}
    ratios = {"gram/F@F.T": statistics.median(g_ / s for g_, s in zip(ts["gram"], ts["syrk"])),
              "cert/gram": statistics.median(c_ / g_ for c_, g_ in zip(ts["cert"], ts["gram"])),
              "cert/gram cpu": statistics.median(c_ / g_ for c_, g_ in zip(ts["cert_cpu"], ts["gram_cpu"])),
              "(cert-gram)/chol": statistics.median((c_ - g_) / h for c_, g_, h in
                                                    zip(ts["cert"], ts["gram"], ts["chol"]))}
    out = {"M": M, "H": H, "K": K, **med, **ratios, "peak/MxM": peak, "lambda_min": g.lambda_min,
           "tol": g.lambda_min_tolerance, "lower_bound": c.certified.lower_bound if c.certified_positive else None,
           "load": os.getloadavg()[0]}
    if peer:
        p = _peer(X, heads)
        if p is not None:
            out["peer_s"] = p["total_s"]
            out["peer/gram"] = p["total_s"] / med["gram"]
            out["peer_lmin_rel_diff"] = abs(p["lambda_min"] - g.lambda_min) / g.lambda_max
    return out


def limit_bench(sizes: list[int], repeats: int, peer: bool, large: bool) -> None:
    hdr = (f"{'M':>6} {'K':>6} | {'F@F.T s':>8} {'GEMM s':>8} {'chol s':>7} {'gram s':>8} {'cert s':>8} | "
           f"{'gram/F@F.T':>10} {'cert/gram':>9} {'(cpu)':>6} {'extra/chol':>10} | {'peak/MxM':>8} | {'peer s':>8} "
           f"{'peer/gram':>9} | {'load':>5}")
    print(hdr)
    print("-" * len(hdr), flush=True)
    rows = [(M, 4 * M // D, repeats, peer) for M in sizes]
    if large:
        rows.append((16384, 2 * 16384 // D, 1, False))
    for M, H, rep, pr in rows:
        r = _row(M, H, rep, pr)
        ps = f"{r['peer_s']:>8.2f} {r['peer/gram']:>9.1f}" if "peer_s" in r else f"{'-':>8} {'-':>9}"
        print(f"{M:>6} {r['K']:>6} | {r['syrk']:>8.2f} {r['gemm']:>8.2f} {r['chol']:>7.2f} {r['gram']:>8.2f} "
              f"{r['cert']:>8.2f} | {r['gram/F@F.T']:>10.2f} {r['cert/gram']:>9.3f} {r['cert/gram cpu']:>6.3f} "
              f"{r['(cert-gram)/chol']:>10.2f} | {r['peak/MxM']:>8.2f} | {ps} | {r['load']:>5.1f}", flush=True)
        print(f"       lambda_min {r['lambda_min']:.6g} +/- {r['tol']:.1g}, certified >= {r['lower_bound']:.6g}"
              + (f", peer agrees to {r['peer_lmin_rel_diff']:.1g} of lambda_max" if "peer_s" in r else ""), flush=True)
    print("F@F.T: numpy (BLAS syrk inside); GEMM: A @ B.T, twice the flops; chol: LAPACK dpotrf of F F^T on one "
          "BLAS thread (the one factorisation a certificate adds); gram: gram() (extremal spectrum); "
          "cert: gram(certify=True); ratios: medians of per-repetition ratios (cpu: of process CPU times, all "
          "threads; extra/chol: (cert - gram) / chol); peak: tracemalloc peak of gram(certify=True) over "
          "8 M^2 bytes; peer: torch.func jacrev + J J^T + eigvalsh in its own process; "
          "load: 1-minute load average (2 cores).")
