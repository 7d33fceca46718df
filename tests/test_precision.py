"""Issue 19 item 8: precision is process-global; concurrent calls give the answers they give alone.

``ntkcheck._precision`` holds one re-entrant lock around every region that sets mpmath's or
python-flint's precision (theory/certificates.md, "Threads"). Two tests: the lock itself (a
region's precision cannot change under it while another thread sets its own; with a no-op lock
planted, it does: the mutation), and decisions, certificates and screenings whose answers depend
on the precision, run on a thread pool and compared with their serial answers.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction as F

import mpmath
from flint import ctx

import ntkcheck as nk
from ntkcheck import _precision


def _precision_seen_inside_a_region() -> tuple[int, int]:
    """Thread A enters ``flint_prec(300)`` and ``mp_prec(300)`` and waits; thread B then sets 64 bits in
    both. Returns the precisions A sees after B has had its chance (300, 300 under the lock)."""
    inside, b_tried, b_inside, a_read = (threading.Event() for _ in range(4))
    seen: list[int] = []

    def a() -> None:
        with _precision.flint_prec(300), _precision.mp_prec(300):
            inside.set()
            b_tried.wait(5)
            b_inside.wait(0.3)  # under the lock B is blocked: give it the time it would need
            seen.extend([ctx.prec, mpmath.mp.prec])
            a_read.set()

    def b() -> None:
        inside.wait(5)
        b_tried.set()
        with _precision.flint_prec(64), _precision.mp_prec(64):
            b_inside.set()
            a_read.wait(5)  # stay inside while A reads (without the lock they overlap)

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    ta.join(10)
    tb.join(10)
    return seen[0], seen[1]


def test_a_region_keeps_its_precision_while_another_thread_sets_one(monkeypatch):
    """The helper's lock: inside a region the precision is the region's own. Mutation: a no-op lock
    (what every ``mpmath.workdps`` / ``ctx.prec = ...`` amounted to before) lets thread B's 64 bits
    leak into thread A's 300-bit region."""
    assert _precision_seen_inside_a_region() == (300, 300)
    assert ctx.prec == 53 and mpmath.mp.prec == 53  # every region restored what it found
    monkeypatch.setattr(_precision, "PRECISION_LOCK", contextlib.nullcontext())
    try:
        assert _precision_seen_inside_a_region() == (64, 64)
        # interleaved restores also leave one thread's precision behind for everybody
        assert (ctx.prec, mpmath.mp.prec) != (53, 53)
    finally:
        ctx.prec, mpmath.mp.prec = 53, 53


def test_every_precision_setting_goes_through_the_helper():
    """No module of the package sets a precision itself (grep, as the issue asks)."""
    import pathlib
    import re

    root = pathlib.Path(nk.__file__).parent
    pat = re.compile(r"mpmath\.workdps|mpmath\.workprec|ctx\.workprec|ctx\.prec\s*=|ctx\.cap\s*=|mp\.dps\s*=|mp\.prec\s*=")
    bad = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "_precision.py"
           for n, line in enumerate(p.read_text().splitlines(), 1) if pat.search(line)]
    assert not bad, bad


def _cube_pair(eps_exp: int) -> list:
    """Uniform cubes of radii 1 and 1 + 2^-eps_exp: the interval route needs more than eps_exp bits,
    the float route (53 bits) cannot resolve them below 2^-53."""
    return [nk.UniformCube(1, 1), nk.UniformCube(1 + F(1, 2**eps_exp), 1)]


def _timeless(x: object) -> object:
    """A result's ``to_dict()`` without the elapsed times (the only entries allowed to differ)."""
    if isinstance(x, dict):
        return {k: _timeless(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [_timeless(v) for v in x]
    return x


def _tasks() -> list:
    cubes = [nk.UniformCube(1 + F(k, 2**200), 1) for k in range(8)]  # the ladder climbs past 200 bits
    tokens_b = [[[F(0)], [F(1)]], [[F(0)], [1 + F(1, 2**60)]]]
    heads = nk.init_heads(16, 1, seed=0)
    return [
        lambda: nk.decide(_cube_pair(120), "strong", direction=[1], method="interval", timeout=None),
        lambda: nk.decide(_cube_pair(120), "strong", direction=[1], method="float", timeout=None),
        lambda: nk.decide(cubes, "strong", direction=[1], method="interval", timeout=None, max_bits=4096),
        lambda: nk.gram(tokens_b, heads, certify=True),  # Arb at 256 bits (lambda_min ~ 8e-40)
        lambda: nk.screen(),  # the bundled data: exact identities, ball bounds, a certified Gram
        lambda: nk.screen(heads=20, seed=3),
    ]


def test_concurrent_calls_give_their_serial_answers():
    """Decisions whose verdict or certificate depends on the working precision (53 bits against
    more than 120, a ladder past 200 bits), an Arb Gram certificate at 256 bits and two screenings,
    each run twice on a pool of four threads: every answer (its whole ``to_dict()`` but the elapsed
    times) equals the one computed alone. Reference: the serial runs. (Without the lock, such a
    pool was seen to return a different certificate in about one run in eight.)"""
    tasks = _tasks()
    serial = [_timeless(t().to_dict()) for t in tasks]
    assert serial[0]["verdict"] == "independent" and serial[1]["verdict"] == "inconclusive"  # precision matters
    for _ in range(2):
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [pool.submit(t) for t in tasks for _ in range(2)]
            got = [_timeless(f.result(timeout=600).to_dict()) for f in futures]
        assert got == [s for s in serial for _ in range(2)]
    assert ctx.prec == 53 and mpmath.mp.prec == 53
