"""verify(): levels reached on real TVM builds, and failures (build errors, timeouts, crashes)
returned as results, never raised."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from leir_egraph.leir import Program, Signature
from leir_egraph.lower.build import PairedTiming
from leir_egraph.verify import VerificationResult, verify, verify_many

EXAMPLES = Path(__file__).resolve().parents[1] / "leir_egraph" / "examples"
SOFTMAX = (EXAMPLES / "softmax.leir").read_text().strip()


@pytest.fixture(scope="module")
def softmax() -> Program:
    return Program.parse(SOFTMAX, json.loads((EXAMPLES / "softmax.sig.json").read_text()))


def rows_parallel(text: str) -> str:
    """The last softmax nest with its B row loop turned into a P loop over i."""
    last = "B^{16}_{tx=0}L^{256}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];"
    new = "P^{16}_{i=0}L^{256}_{a=0}[C^{f32,g}_{i,a}=exp(A^{f32,g}_{i,a}-D^{f32,g}_{i})/E^{f32,g}_{i};];"
    assert last in text
    return text.replace(last, new)


def test_legal_parallel_rewrite_reaches_independent(softmax):
    r = verify(softmax, rows_parallel(SOFTMAX))
    assert r.level == "independent"
    assert r.diff and r.build and r.exec and r.equal and r.independent and r.reason is None
    assert r.max_abs_err == 0.0 and r.trials == 3
    assert r.time_before_ms > 0 and r.time_after_ms > 0
    # the times and the speedup are finite positive figures (their relation is a property of
    # PairedTiming, tested below on fixed rounds: on a loaded machine the median of the
    # per-round ratios and the ratio of the medians can differ by any factor)
    assert 0 < r.speedup < float("inf")
    assert r.build_s_after > 0 and r.before_independent is True
    d = r.to_dict()
    assert d["level"] == "independent" and VerificationResult.from_dict(d) == r


def test_paired_timing_statistics_on_fixed_rounds():
    # round 2 was disturbed on the "after" side only: the median paired ratio ignores it,
    # the ratio of the minima and faster() see both sides' least disturbed rounds
    t = PairedTiming(before_ms=(4.0, 4.2, 4.0, 8.0), after_ms=(2.0, 8.4, 2.0, 4.0))
    assert t.ratios == [2.0, 0.5, 2.0, 2.0]
    assert t.speedup == 2.0 and t.min_speedup == 2.0
    assert t.before_median_ms == 4.1 and t.after_median_ms == 3.0
    assert t.faster(1.05) and not t.faster(2.01)
    slower = PairedTiming(before_ms=(1.0, 1.0, 1.0), after_ms=(1.0, 2.0, 0.9))
    assert slower.speedup == 1.0 and not slower.faster(1.05)


def test_parallel_claim_on_a_reduction_axis_stops_at_equal(softmax):
    after = SOFTMAX.replace("B^{16}_{tx=0}L^{256}_{a=0}[E", "B^{16}_{tx=0}P^{256}_{a=0}[E")
    r = verify(softmax, after, timing=False)
    assert r.level == "equal" and not r.independent
    assert "P^{256}_{a=0}" in r.reason and "does not depend on a" in r.reason
    assert r.before_independent is True and r.before_problem is None


def test_reverse_order_run_catches_a_false_claim_the_static_check_misses():
    sig = Signature.of([("A", "f32", (6,))], [("F", "f32", (6,))])
    before = Program.parse("L^{6}_{a=0}[F^{f32,g}_{a}=if_then_else(a<1,1,F^{f32,g}_{a-1})*A^{f32,g}_{a};];", sig)
    after = before.text.replace("L^{6}", "V^{6}")  # a scan cannot be vectorized
    r = verify(before, after, timing=False)
    assert not r.independent
    assert "reverse order changes F" in r.reason


def test_wrong_rewrite_stops_at_exec(softmax):
    r = verify(softmax, SOFTMAX.replace("/E^{f32,g}_{tx}", "*E^{f32,g}_{tx}"), timing=False)
    assert r.level == "exec" and r.exec and not r.equal
    assert r.reason.startswith("equal: trial 1: C differs beyond tolerance")
    assert r.max_abs_err > 1


def test_unchanged_unparsable_and_invalid_programs(softmax):
    assert verify(softmax, SOFTMAX).level == "none"
    r = verify(softmax, "B^{16}_{tx=0}[")
    assert r.level == "none" and "does not parse" in r.reason
    r = verify(softmax, SOFTMAX.replace("exp(A", "exp(Q"))
    assert r.level == "diff" and "invalid LEIR" in r.reason and "'Q'" in r.reason


def test_before_that_is_not_independent_is_reported():
    sig = Signature.of([("F", "f32", (128, 1))], [("G", "f32", ())])
    before = Program.parse("B^{128}_{tx=0}L^{1}_{a=0}[H^{f32,g}=H^{f32,g}+F^{f32,g}_{tx,a};];"
                           "B^{1}_{tx=0}[G^{f32,g}=H^{f32,g}/128;];", sig)
    fixed = verify(before, before.text.replace("B^{128}_{tx=0}L^{1}_{a=0}[H^{f32,g}=H^{f32,g}+F^{f32,g}_{tx,a};]",
                                               "L^{128}_{c=0}L^{1}_{a=0}[H^{f32,g}=H^{f32,g}+F^{f32,g}_{c,a};]"),
                   timing=False)
    assert fixed.level == "independent" and fixed.before_independent is False
    assert "scalar H" in fixed.before_problem
    kept = verify(before, before.text.replace("H^{f32,g}/128", "H^{f32,g}*0.0078125"), timing=False)
    assert kept.level == "equal" and kept.before_independent is False
    assert "cannot be blamed" in kept.reason


def test_build_failure_is_a_result_not_an_exception():
    sig = Signature.of([("A", "f32", (2048,))], [("C", "f32", (2048,))])
    before = Program.parse("L^{2048}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*2;];", sig)
    r = verify(before, "B^{2048}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];", target="cuda",
               timing=False)
    assert r.level == "diff" and not r.build
    assert r.reason.startswith("build: CudaInvalid") and "2048 > 1024" in r.reason


def test_verify_many_reuses_one_worker(softmax):
    from leir_egraph.verify.verifier import _shared_verifier
    worker = _shared_verifier()._worker
    first = verify(softmax, rows_parallel(SOFTMAX), timing=False)
    pid = worker.proc.pid
    rest = verify_many([(softmax, SOFTMAX.replace("/E", "*E")), (softmax, SOFTMAX)], timing=False)
    assert worker.proc.pid == pid
    assert [first.level] + [r.level for r in rest] == ["independent", "exec", "none"]


def test_verify_many_in_parallel_keeps_the_order_of_the_pairs(softmax):
    pairs = [(softmax, SOFTMAX.replace("/E", "*E")), (softmax, SOFTMAX),
             (softmax, rows_parallel(SOFTMAX))]
    results = verify_many(pairs, timing=False, workers=2)
    assert [r.level for r in results] == ["exec", "none", "independent"]


def test_prepared_candidates_get_the_same_verdicts(softmax):
    """``Verifier.prepare`` compiles the candidates in one module; the verdicts and the
    evidence are those of candidates built one by one, and a candidate that is no valid LEIR
    is still judged by its own verification."""
    from leir_egraph.verify import Verifier
    afters = [Program.parse(t, softmax.signature) for t in
              (rows_parallel(SOFTMAX), SOFTMAX.replace("/E", "*E"),
               SOFTMAX.replace("C^{f32,g}_{tx,a}=exp", "C^{f32,g}_{tx,a}=X^{f32,g}_{tx}+exp"))]
    keys = ("level", "reason", "max_abs_err", "max_rel_err", "before_independent")
    with Verifier() as alone:
        expected = [{k: getattr(alone.verify(softmax, a, timing=False), k) for k in keys}
                    for a in afters]
    with Verifier() as batched:
        prepared = batched.prepare(softmax, afters)
        assert prepared["compiled"] == 3 and prepared["cpu_s"] > 0  # before and the two valid
        got = [batched.verify(softmax, a, timing=False) for a in afters]
    assert [{k: getattr(r, k) for k in keys} for r in got] == expected
    assert [e["level"] for e in expected] == ["independent", "exec", "diff"]
    assert all(r.cpu_s > 0 for r in got)


def test_in_process_mode_gives_the_same_verdict(softmax):
    r = verify(softmax, rows_parallel(SOFTMAX), isolate=False, timing=False)
    assert r.level == "independent" and r.max_abs_err == 0.0


def test_integer_outputs_and_gathers_use_in_range_inputs():
    # CrossEntropy-style gather: C indexes dimension 1 (size 10) of A
    sig = Signature.of([("A", "f32", (32, 10)), ("C", "i64", (32,))], [("D", "f32", (32,))])
    before = Program.parse("B^{32}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx,C^{i64,g}_{tx}};];", sig)
    r = verify(before, "P^{32}_{a=0}[D^{f32,g}_{a}=A^{f32,g}_{a,C^{i64,g}_{a}};];", timing=False)
    assert r.level == "independent"


def test_all_zero_output_does_not_establish_equality():
    sig = Signature.of([("A", "f32", (8,))], [("C", "f32", (8,))])
    before = Program.parse("L^{8}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*0;];", sig)
    r = verify(before, "P^{8}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*0;];", timing=False)
    assert r.level == "exec" and "all zero or non-finite in every trial" in r.reason


def test_the_worker_verifies_and_times_without_torch(softmax):
    """TVM's FFI imports torch whenever it can; the worker keeps it out (no job uses it, and
    its import was most of the worker's start-up): after a verification and a paired timing,
    no torch library is mapped into the worker, and the verdict is the usual one."""
    from leir_egraph.verify import Verifier
    after = Program.parse(rows_parallel(SOFTMAX), softmax.signature)
    with Verifier() as v:
        r = v.verify(softmax, after, timing=False)
        paired = v.time_pair(softmax, after, rounds=3)
        maps = Path(f"/proc/{v._worker.proc.pid}/maps").read_text()
    assert r.level == "independent" and r.max_abs_err == 0.0 and len(paired.after_ms) == 3
    assert "libtvm" in maps and "libtorch" not in maps


def test_a_launched_worker_is_waited_for_by_the_first_request(softmax):
    """``Verifier.launch`` starts the worker without waiting: a second launch keeps it, the
    first request waits for its start-up within the request's own timeout (a timeout then is a
    result, and the next request starts afresh), a worker killed while starting is replaced,
    and the verdicts and the timing's target are those of a worker started by the request."""
    from leir_egraph.lower.targets import target_dict
    from leir_egraph.verify import Verifier
    after = Program.parse(rows_parallel(SOFTMAX), softmax.signature)
    with Verifier() as v:
        v.launch()
        pid = v._worker.proc.pid
        v.launch()
        assert v._worker.proc.pid == pid and not v._worker._ready
        r = v.verify(softmax, after, timeout=0.001, timing=False)
        assert r.level == "none" and r.cause == "timeout" and not v._worker.alive()
        v.launch()
        v._worker.proc.kill()
        v._worker.proc.wait()
        launched = v.verify(softmax, after, timing=False)
        paired = v.time_pair(softmax, after, rounds=3)
    assert launched.level == "independent" and launched.max_abs_err == 0.0
    assert paired.target == target_dict("llvm") and len(paired.after_ms) == 3


def test_waiting_for_another_threads_exchange_does_not_eat_a_jobs_timeout(softmax):
    """A worker shared by threads (the search judges a beam's candidates in the background):
    a verification or a timing that waits while another thread holds the worker still gets
    its whole timeout, so its verdict is the one it gets alone."""
    import threading
    import time
    from leir_egraph.verify import Verifier
    after = Program.parse(rows_parallel(SOFTMAX), softmax.signature)
    with Verifier() as v:
        assert v.verify(softmax, after, timing=False).level == "independent"   # started
        for ask in (lambda: v.verify(softmax, after, timeout=4.0, timing=False),
                    lambda: v.time_pair(softmax, after, rounds=3, timeout=4.0)):
            held = threading.Event()

            def hold():
                with v._worker.exclusive():
                    held.set()
                    time.sleep(5.0)

            holder = threading.Thread(target=hold)
            holder.start()
            held.wait()
            got = ask()
            holder.join()
            assert getattr(got, "level", "independent") == "independent", got.reason
            assert v._worker.alive()


# The two tests below kill the worker; they run last so that the others share one worker.

def test_timeout_is_a_result_and_the_worker_recovers():
    sig = Signature.of([("A", "f32", (64,))], [("C", "f32", (64,))])
    before = Program.parse("L^{64}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];", sig)
    endless = ("L^{64}_{a=0}L^{100000}_{c=0}L^{100000}_{d=0}"
               "[C^{f32,g}_{a}=C^{f32,g}_{a}+A^{f32,g}_{a};];")
    verify(before, "P^{64}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];", timing=False)  # a warm worker
    r = verify(before, endless, timeout=3)
    assert r.level == "build" and r.build and not r.exec and r.cause == "timeout"
    assert r.reason == "exec: timed out after 3 s while running after"
    # the other way round, after cannot be blamed: the original runs first and uses up the
    # whole timeout (which bounds the call, a fresh worker's start included), so after stays
    # at build
    slow_before = Program.parse(endless, sig)
    r = verify(slow_before, before.text, timeout=15)
    assert r.level == "build" and r.cause == "before"
    assert r.before_problem == "before timed out after 15 s while running before"
    assert r.reason == f"exec: cannot tell, {r.before_problem}"
    assert r.elapsed_s < 15 + 2
    again = verify(before, "P^{64}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];", timing=False)
    assert again.level == "independent"


def test_crash_of_the_worker_is_a_result():
    # integer division by a stored zero traps (SIGFPE) inside the worker, not in the caller
    sig = Signature.of([("A", "i32", (4,)), ("Z", "i32", (4,))], [("C", "i32", (4,))])
    before = Program.parse("L^{4}_{a=0}[C^{i32,g}_{a}=A^{i32,g}_{a}*2;];", sig,
                           values={"Z": np.zeros(4, np.int32)})
    r = verify(before, "L^{4}_{a=0}[C^{i32,g}_{a}=A^{i32,g}_{a}*2+A^{i32,g}_{a}/Z^{i32,g}_{a};];",
               timing=False)
    assert r.level == "build" and not r.exec
    assert r.reason.startswith("exec: worker killed by SIGFPE while running after")


def test_a_crashing_original_is_blamed_not_its_rewrite():
    """Issue 9 item 2: the original traps (SIGFPE, an integer division by a stored zero); the
    rewrite computes the same. The original is run first, so the crash is its problem, and the
    rewrite is still judged in a fresh worker (it builds; it traps too)."""
    sig = Signature.of([("A", "i32", (4,)), ("Z", "i32", (4,))], [("C", "i32", (4,))])
    before = Program.parse("L^{4}_{a=0}[C^{i32,g}_{a}=A^{i32,g}_{a}/Z^{i32,g}_{a}+1;];", sig,
                           values={"Z": np.zeros(4, np.int32)})
    r = verify(before, "P^{4}_{a=0}[C^{i32,g}_{a}=A^{i32,g}_{a}/Z^{i32,g}_{a}+1;];", timing=False)
    assert r.before_problem == "before worker killed by SIGFPE while running before"
    assert r.level == "build" and r.cause == "crash"
    assert r.reason == "exec: worker killed by SIGFPE while running after"
    # a sound rewrite of an original that cannot run is never counted as verified
    assert not r.equal


def test_an_out_of_bounds_gather_is_named():
    """Issue 9 item 8: one stored index is out of range; both programs read past A. That is
    named as an out-of-bounds read of the original, not as outputs that differ."""
    sig = Signature.of([("A", "f32", (4,)), ("I", "i32", (4,))], [("C", "f32", (4,))])
    before = Program.parse("B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{I^{i32,g}_{tx}};];", sig,
                           values={"I": np.array([0, 1, 2, 4], np.int32)})
    r = verify(before, "P^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{I^{i32,g}_{a}};];", timing=False)
    assert r.before_problem == ("before reads out of bounds: A^{f32,g}_{I^{i32,g}_{tx}} reads A "
                                "at 4 in dimension 0 (size 4) at tx=3")
    assert r.level == "build" and r.cause == "exec"
    assert r.reason.startswith("exec: after reads out of bounds: A^{f32,g}_{I^{i32,g}_{a}}")
