"""The forgery suite: every certificate kind the package writes, mutated field by field, and the
verifier accepts a claim only where an independent computation says it is true.

Base files come from the package's own writer (``ntkcheck.certificate_files``) on small inputs:
``decide`` (gap condition, exact minor, ball bound, a minor over several directions, product and
term identities, the weak-dependence wrapper, structural dependence, an identity along the claim's
direction, Vandermonde), ``gram`` (a lower bound), ``screen`` (both CGF verdicts, Prop. 8's
singularity, the complement's bound), an exactly singular Gram (equal scores), ``certify`` (a
bound, a rank, an indefiniteness vector). Each is mutated systematically: every number nudged,
doubled, negated or zeroed; properties, verdicts, claim kinds and certificate kinds exchanged;
lists padded, truncated, reversed or zeroed; fields deleted; texts replaced; and the inputs moved
to an independent or a dependent neighbour with the digest recomputed (a forger who reseals).

For every claim the verifier calls "verified", ``verify_oracle.truth`` (sympy ranks of cumulants
from the moment recursion, sympy identities, mpmath Grams at 60 digits, sympy ranks and
quadratic forms) must say True. Over 200 mutated files; 0 false accepts.

Mutations of the verifier, each removing one rule by hand once: this suite catches "strong
independence from one direction only", "the recorded rank is compared" and "lengths are checked";
the hand-made files of tests/verify/test_verify_cases.py catch those too and "Taylor orders
k >= 2", "structural does not prove weak dependence", "an identity along one line proves neither
weak nor strong dependence", "c = 0 is no kernel vector" and "contradicting claims are refused".
"""

from __future__ import annotations

import copy
from collections import Counter
from fractions import Fraction as F
from typing import Any

import numpy as np
import pytest
import verify_oracle as oracle
from hypothesis import given, settings
from hypothesis import strategies as st
from verify_bases import bases_sealed, seal

import ntkcheck as nk
from ntkcheck import certificate_files as cf
from ntkcheck import verify

# -------------------------------------------------------------------------------------- mutations

CERT_KINDS = ["exact-minor", "ball-bound", "gap-condition", "vandermonde", "prop7-strong-implies-weak",
              "product-identity", "term-identity", "weak-dependence", "structural", "symbolic-identity",
              "truncation-null-space"]
CLAIM_KINDS = ["cgf", "gram-lower-bound", "gram-singular", "gram-equal-scores", "matrix-lower-bound",
               "matrix-singular", "matrix-indefinite", "none"]
DELETE = object()


def _nodes(obj: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    out = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for k, v in items:
        out.append((path + (k,), v))
        out += _nodes(v, path + (k,))
    return out


def _number_variants(v: Any) -> list[Any]:
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        return [v + 1, -v, 0, 2 * v + 1]
    if isinstance(v, float):
        return [v * (1 + 2**-20), 2 * v, -v, 0.0]
    q = F(v)
    return [str(q + F(1, 3)), str(2 * q), str(-q), "0"]


def _list_variants(v: list) -> list[Any]:
    out = [v + [copy.deepcopy(v[-1]) if v else "1"], v[:-1]]
    if len(v) >= 2 and v != v[::-1]:
        out.append(v[::-1])
    if v and all(isinstance(x, (int, float, str)) and not isinstance(x, bool) for x in v):
        out.append(["0" if isinstance(x, str) else 0 for x in v])
    return out


def _variants(path: tuple, v: Any) -> list[Any]:
    key = path[-1]
    if key == "property":
        return [{"weak": "strong", "strong": "weak"}.get(v, "weak")]
    if key == "verdict":
        return [{"independent": "dependent", "dependent": "independent"}.get(v, "independent")]
    if key == "kind":
        pool = CLAIM_KINDS if len(path) == 2 else CERT_KINDS
        return [k for k in pool if k != v]
    if key in ("statement", "reason", "tag", "route", "id"):
        return []
    if isinstance(v, list):
        return _list_variants(v)
    if v is None:
        return [0, ["1"]]
    if isinstance(v, dict):
        return []
    try:
        return _number_variants(v)
    except (ValueError, TypeError):
        return []


def _set(rec: dict, path: tuple, value: Any) -> dict:
    out = copy.deepcopy(rec)
    node = out["claims"]
    for k in path[:-1]:
        node = node[k]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def claim_mutations(rec: dict) -> list[tuple[str, dict]]:
    """Every field of every claim changed (two variants each, round-robin), and each key deleted."""
    out = []
    for i, (path, v) in enumerate(_nodes(rec["claims"])):
        vs = _variants(path, v)
        for j in range(min(2, len(vs))):
            out.append((f"{'/'.join(map(str, path))} -> {vs[(i + j) % len(vs)]!r:.40}", _set(rec, path, vs[(i + j) % len(vs)])))
        if isinstance(path[-1], str) and len(path) <= 3 and path[-1] not in ("id", "kind"):
            out.append((f"{'/'.join(map(str, path))} deleted", _set(rec, path, DELETE)))
    out.append(("the statement replaced", _set(rec, (0, "statement"), "certified for every input whatsoever")))
    return out


def _reseal(rec: dict, change) -> dict:
    out = copy.deepcopy(rec)
    change(out["inputs"])
    out["digest"] = verify.digest(out["inputs"], {})
    return out


def _atoms(law: dict) -> list[list[float]]:
    d = law["atoms"]["shape"][1]
    data = law["atoms"]["data"]
    return [data[k:k + d] for k in range(0, len(data), d)]


def _set_atoms(law: dict, rows: list[list[float]]) -> None:
    law["atoms"] = {"shape": [len(rows), len(rows[0])], "data": [float(v) for r in rows for v in r]}
    law["masses"] = [str(F(1, len(rows)))] * len(rows)


def input_mutations(rec: dict) -> list[tuple[str, dict]]:
    """Inputs moved to neighbours (the digest recomputed), and one change without resealing."""
    out = [("an input changed, digest not recomputed", copy.deepcopy(rec) | {"digest": "0" * 64})]
    ins = rec["inputs"]
    for i, law in enumerate(ins.get("laws", [])):
        if law["kind"] == "empirical" and "data" in law["atoms"]:
            out.append((f"law {i}: an atom moved (independent neighbour)", _reseal(rec, lambda x, i=i: _set_atoms(
                x["laws"][i], [[r[0] + 0.125] + r[1:] if k == 0 else r for k, r in enumerate(_atoms(x["laws"][i]))]))))
            j = (i + 1) % len(ins["laws"])
            if ins["laws"][j]["kind"] == "empirical" and "data" in ins["laws"][j]["atoms"]:
                out.append((f"law {i}: a translate of law {j} (dependent neighbour)", _reseal(rec, lambda x, i=i, j=j: (
                    _set_atoms(x["laws"][i], [[r[0] + 0.5] + r[1:] for r in _atoms(x["laws"][j])])))))
            if len(law["masses"]) >= 2:
                n = len(law["masses"])
                out.append((f"law {i}: masses moved", _reseal(rec, lambda x, i=i, n=n: x["laws"][i].update(
                    masses=[str(F(1, n) + F(1, 4 * n))] + [str(F(1, n) - F(1, 4 * n))] + [str(F(1, n))] * (n - 2)))))
        elif law["kind"] == "empirical":
            out.append((f"law {i}: an exact atom moved", _reseal(rec, lambda x, i=i: _bump(x["laws"][i]["atoms"], 0.125))))
        elif law["kind"] == "uniform-cube":
            out.append((f"law {i}: radius changed", _reseal(rec, lambda x, i=i: x["laws"][i].update(
                radius=str(F(x["laws"][i]["radius"]) * F(3, 2))))))
        elif "cov" in law:
            out.append((f"law {i}: covariance doubled", _reseal(rec, lambda x, i=i: x["laws"][i].update(
                cov=[[str(2 * F(v)) for v in r] for r in x["laws"][i]["cov"]]))))
    if "heads" in ins:
        for k in ("Q", "b"):
            out.append((f"heads: {k} changed", _reseal(rec, lambda x, k=k: _bump(x["heads"][k]))))
    if "matrix" in ins:
        out.append(("matrix: a diagonal entry lowered", _reseal(rec, lambda x: _bump(x["matrix"], -1.0))))
        out.append(("matrix: error bound x 1e9", _reseal(rec, lambda x: x.update(abs_error=max(1e-3, 1e9 * x["abs_error"])))))
    return out


def _bump(arr: dict, by: float = 0.25) -> None:
    if "exact" in arr:
        arr["exact"][0] = str(F(arr["exact"][0]) + F(by))
    else:
        arr["data"][0] = float(arr["data"][0]) + by


# ------------------------------------------------------------------------------------------ suite


@pytest.fixture(scope="module")
def bases() -> dict[str, dict]:
    return bases_sealed()


def test_every_base_file_is_verified_and_true(bases):
    """The writer's files themselves: every certified claim verified, and true by the oracle."""
    for name, rec in bases.items():
        code, rows = verify.verify_record(rec)
        assert code == 0, (name, rows)
        claims = {c["id"]: c for c in rec["claims"]}
        assert all(oracle.truth(claims[cid], rec) is True for cid, s, _ in rows if s == "verified"), name


def test_forgeries_are_never_accepted(bases):
    """At least 200 mutated files over every certificate kind; every claim the verifier accepts is
    true (0 false accepts); and the suite is not vacuous: half the mutations are refuted, and at least
    5 of each kind."""
    counts: dict[str, Counter] = {}
    false = []
    for name, rec in bases.items():
        c = counts.setdefault(name, Counter())
        for what, mut in claim_mutations(rec) + input_mutations(rec):
            try:
                code, rows = verify.verify_record(mut)
            except ValueError:
                c["unreadable"] += 1
                continue
            c[{0: "accepted", 1: "refuted", 3: "unchecked"}[code]] += 1
            claims = {cl.get("id"): cl for cl in mut["claims"]}
            for cid, status, text in rows:
                if status == "verified" and oracle.truth(claims[cid], mut) is not True:
                    false.append((name, what, cid, text))
    total = sum(sum(c.values()) for c in counts.values())
    table = "\n".join(f"{n:48s} " + " ".join(f"{k} {c[k]:3d}" for k in ("accepted", "refuted", "unchecked",
                                                                         "unreadable")) for n, c in counts.items())
    print(f"\n{total} mutated files\n{table}")
    assert not false, false
    assert total >= 200, table
    assert sum(c["refuted"] for c in counts.values()) >= total / 2, table
    assert all(c["refuted"] >= 5 for c in counts.values()), table


@settings(max_examples=12, deadline=None)
@given(data=st.data(), d=st.integers(1, 2), n=st.integers(2, 3), translate=st.booleans())
def test_random_certificates_and_one_forged_field(data, d, n, translate):
    """Seed 003 Prop. 7-9 on random dyadic token sets (with a translate of the first sample or not):
    the writer's certificates of ``decide`` (weak and strong) are verified and true, and one field
    mutated at random is never accepted while false (the oracle). Every example (12) counts."""
    atoms = st.lists(st.tuples(*[st.integers(-8, 8)] * d), min_size=2, max_size=3, unique=True)
    samples = [np.array(data.draw(atoms), dtype=float) / 4 for _ in range(n)]
    if translate:
        samples[-1] = samples[0] + 0.5
    for prop in ("weak", "strong"):
        rec = seal(cf.decide_certificate(nk.decide(samples, prop), samples))
        muts = claim_mutations(rec) + input_mutations(rec)
        for _, mut in [("base", rec), muts[data.draw(st.integers(0, len(muts) - 1))]]:
            try:
                _, rows = verify.verify_record(mut)
            except ValueError:
                continue
            claims = {cl.get("id"): cl for cl in mut["claims"]}
            for cid, status, text in rows:
                assert status != "verified" or oracle.truth(claims[cid], mut) is True, (samples, text)
