"""The verification builds: TVM's plain-loop ("tirx") pass pipeline and one module for many
candidates (``build_many``) compute exactly what separate builds with TVM's default pipeline
compute, bit for bit, on golden programs and on rewrites of them that use every loop kind and
memory scope the strategies produce."""

from __future__ import annotations

import importlib
import random

import numpy as np
import pytest

from conftest import golden_program
from leir_egraph.egraph import all_steps
from leir_egraph.lower.targets import target_dict
from leir_egraph.lower.tir import LowerOptions, lower
from leir_egraph.verify.inputs import integer_ranges, random_inputs
from leir_egraph.verify.session import EQUAL_OPTIONS, equal_target

# the module itself (the package exports its function ``build`` under the same name)
builds = importlib.import_module("leir_egraph.lower.build")
DIRECTED = LowerOptions(directed=True, poison=True)


@pytest.fixture(scope="module")
def programs(golden_rows):
    """Seeded: 6 golden programs (float32 and float64) and 5 rewrites of each, drawn from all
    strategies' single steps (P/V/U/B loops, fused nests with shared and local intermediates,
    copies, splits, guarded reads)."""
    rng = random.Random(20261127)
    rows = [r for r in golden_rows if "_{}" not in r["leir"]]
    picked = []
    for row in rng.sample(rows, 6):
        before = golden_program(row)
        steps = all_steps(before)
        picked.append((before, [t.after for t in rng.sample(steps, min(5, len(steps)))]))
    return picked


def outputs(executable, program, inputs, reverse: int) -> list[bytes]:
    args, outs = builds.call_tensors(program, inputs)
    executable(*args, *outs, reverse)
    return [o.numpy().tobytes() for o in outs]


def test_the_plain_loop_pipeline_computes_the_same_bits(programs):
    import tvm
    assert DIRECTED.pipeline == "tirx" and LowerOptions().pipeline == "default"
    target = target_dict(equal_target())
    compared = 0
    for before, afters in programs:
        inputs = random_inputs(before, 0, 0, integer_ranges(before))
        for program in [before, *afters]:
            func = lower(program, equal_target(), directed=True, poison=True)
            plain = tvm.compile(func, target=target, tir_pipeline="tirx")["main"]
            default = tvm.compile(func, target=target, tir_pipeline="default")["main"]
            for reverse in (0, 1):
                assert (outputs(plain, program, inputs, reverse)
                        == outputs(default, program, inputs, reverse)), program.text
            compared += 1
    assert compared >= 30


def test_one_module_for_many_candidates_runs_each_as_built_alone(programs):
    before, afters = max(programs, key=lambda p: len(p[1]))
    candidates = [before, *afters]
    inputs = random_inputs(before, 1, 0, integer_ranges(before))
    builds.clear_cache()
    alone = [builds.run(p, inputs, equal_target(), **EQUAL_OPTIONS) for p in candidates]
    builds.clear_cache()
    counts = builds.build_counts()["compiled"]
    assert builds.build_many(candidates, equal_target(), **EQUAL_OPTIONS) == len(candidates)
    entries = {builds.build(p, equal_target(), directed=True, poison=True).entry
               for p in candidates}
    assert len(entries) == len(candidates)  # one function each, in one module
    batched = [builds.run(p, inputs, equal_target(), **EQUAL_OPTIONS) for p in candidates]
    reversed_runs = [builds.run(p, inputs, equal_target(), reverse_parallel=True, poison=True)
                     for p in candidates]
    assert builds.build_counts()["compiled"] == counts + len(candidates)  # nothing rebuilt
    for a, b, r in zip(alone, batched, reversed_runs):
        assert a.keys() == b.keys()
        for name in a:
            assert a[name].tobytes() == b[name].tobytes()
            assert np.array_equal(a[name], r[name], equal_nan=True)
    # already built: nothing to batch; a program that does not lower is left to build()
    assert builds.build_many(candidates, equal_target(), **EQUAL_OPTIONS) == 0
