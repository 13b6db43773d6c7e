"""Soundness of the engine's first five strategies: every transition they produce on a seeded
sample of 40 golden programs (tiny shapes, f32 and f64) -- up to CAP per program and strategy, a
seeded sample of them -- is verified on TVM (llvm) and must reach Equal, and Independent whenever
the original program's own P/V/B claims hold.

The 40 programs give about 6,000 transitions (loop_split and loop_reorder enumerate every factor
and permutation), over an hour of verification on two cores; CI takes CAP of each. Set
``LEIR_SOUNDNESS_CAP=0`` to verify all of them (benchmarks/strategy_coverage.py reports the same
for all 43 strategies)."""

from __future__ import annotations

import os
import random

from leir_egraph.egraph import single_steps
from leir_egraph.leir import Program
from leir_egraph.verify import verify_many

CORE = ("loop_split", "loop_reorder", "operator_fusion", "set_storage_scope", "expand_log", "logsimp")
SAMPLE = 40
CAP = int(os.environ.get("LEIR_SOUNDNESS_CAP", "2"))


def sample_programs(golden_rows, n=SAMPLE, seed=0):
    rows = [r for r in golden_rows if r["name"] != "add_add"]  # translator bug, see test_leir_syntax
    random.Random(seed).shuffle(rows)
    return [Program.parse(r["leir"], r["signature"], r["name"]) for r in rows[:n]]


def verify_all(transitions, workers=2):
    """Verify transitions with one worker process per core (2 cores)."""
    results = verify_many([(t.before, t.after) for t in transitions], timing=False,
                          workers=workers)
    return list(zip(transitions, results))


def test_every_transition_of_the_core_strategies_is_equal(golden_rows):
    programs = sample_programs(golden_rows)
    assert {p.signature.inputs[0].dtype for p in programs} == {"float32", "float64"}
    rng = random.Random(0)
    transitions = []
    for p in programs:
        for s in CORE:
            found = single_steps(p, s)
            transitions += rng.sample(found, CAP) if 0 < CAP < len(found) else found
    # set_storage_scope moves an intermediate into shared or local memory only where one kernel
    # alone uses it, which the golden programs (one equation per nest) rarely have: also its
    # moves after a fusion of each program
    for p in programs:
        for fused in single_steps(p, "operator_fusion")[:1]:
            found = single_steps(fused.after, "set_storage_scope")
            transitions += rng.sample(found, CAP) if 0 < CAP < len(found) else found
    by_strategy = {s: sum(t.strategy == s for t in transitions) for s in CORE}
    for s in ("loop_split", "loop_reorder", "operator_fusion", "set_storage_scope"):
        assert by_strategy[s] > 0, by_strategy
    failures = []
    for t, r in verify_all(transitions):
        if not r.equal:
            failures.append((t.strategy, t.before.name, r.level, r.reason, t.after.text))
        elif not r.independent and r.before_independent is not False:
            failures.append((t.strategy, t.before.name, r.level, r.reason, t.after.text))
    assert failures == [], failures[:5]


def test_scopes_stay_valid_on_cuda(golden_rows):
    """Every scope move of set_storage_scope and operator_fusion (before and after a fusion)
    keeps a program that lowers for CUDA lowerable: shared and local memory stay inside the one
    kernel that uses them (docs/LEIR.md, "Limits")."""
    from leir_egraph.lower import CudaInvalid, lower
    programs = sample_programs(golden_rows, n=20)
    fused = [t.after for p in programs for t in single_steps(p, "operator_fusion")[:2]]
    checked, broken = 0, []
    for p in programs + fused:
        try:
            lower(p, "cuda")
        except CudaInvalid:
            continue
        for s in ("set_storage_scope", "operator_fusion"):
            for t in single_steps(p, s):
                try:
                    lower(t.after, "cuda")
                    checked += 1
                except CudaInvalid as err:
                    broken.append((s, p.name, t.rule, err.reason))
    assert broken == [], broken[:3]
    assert checked > 20
