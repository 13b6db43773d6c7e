"""The memory-level strategies (cache_read_write, layout_transformation, set_storage_layout,
precompute_indices) and the split strategies (exponential_split, multiplicative_split,
additive_split).

Every example is verified numerically on TVM (Equal, and Independent: the copy nests bring
their own P/V/B loops), a seeded sample of golden programs has its transitions verified the same
way, the layouts are bijections, the value ranges (FINITE domain) prove what the split guards
rely on, and the hand-written helper walks cover every schema constructor.
"""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import numpy as np
import pytest

from leir_egraph.egraph import load_strategies, single_steps
from leir_egraph.egraph.rulecheck import example_program
from leir_egraph.egraph.traversals import schema_constructors
from leir_egraph.leir import Program, parse
from leir_egraph.leir.analysis import index_range
from leir_egraph.leir.ast import IConst, Var
from leir_egraph.leir.memory import covers_shape, in_bounds, layouts
from leir_egraph.leir.ranges import FINITE, analyse

from conftest import GOLDEN_DIR, assert_verified, golden_sample

MEMORY = ("cache_read_write", "layout_transformation", "set_storage_layout", "precompute_indices")
SPLITS = ("exponential_split", "multiplicative_split", "additive_split")
IDS = MEMORY + SPLITS
PAPER_CLASS = {**{sid: "difficult" for sid in MEMORY}, **{sid: "medium" for sid in SPLITS}}
STRATEGIES = {s.id: s for s in load_strategies() if s.id in IDS}
PRELUDE = Path(__file__).resolve().parents[1] / "rules" / "prelude" / "memory.egg"

# Golden-program sampling for numerical verification: kept small so the file runs in about three
# minutes on two cores. Only programs up to GOLDEN_MAX_CHARS of LEIR are drawn (the largest take
# tens of seconds to enumerate); both dtypes alternate.
SEED = 20261122
PROGRAMS_PER_STRATEGY = 2
TRANSITIONS_PER_PROGRAM = 2
GOLDEN_MAX_CHARS = 1200

def program(text: str, sig: str) -> Program:
    return example_program(text, sig)


def informative(row: dict) -> bool:
    """Whether the row's stored reference outputs have a finite non-zero element. Where they do
    not (a clamp to [0, 0], say), Equal cannot be established for any rewrite, so such programs
    are not drawn."""
    data = np.load(GOLDEN_DIR / "data" / row["data_file"])
    return all(np.any(np.isfinite(data[o["name"]]) & (data[o["name"]] != 0))
               for o in row["signature"]["outputs"] if o["name"] in data)


# ---------------------------------------------------------------- metadata and helpers

def test_all_seven_strategies_load_with_the_paper_difficulty():
    assert set(STRATEGIES) == set(IDS)
    for sid, strategy in STRATEGIES.items():
        assert strategy.category == ("memory" if sid in MEMORY else "math")
        assert strategy.difficulty == PAPER_CLASS[sid], (sid, strategy.score)
        assert len(strategy.examples) >= 2 and strategy.counterexamples


@pytest.mark.parametrize("helper,sorts", [
    ("Relayout", {"Prog", "Nest", "Body", "Eqn", "Var", "Subs", "IExpr", "Expr", "CmpTail"}),
    ("LookupIndex", {"Nest", "Body", "Eqn", "Var", "Subs", "IExpr", "Expr", "CmpTail"}),
])
def test_hand_written_walks_cover_every_schema_constructor(helper, sorts):
    """Relayout<Sort> and LookupIndex<Sort> in memory.egg are written out per constructor; a
    constructor added to schema.egg must get its push-down rule."""
    text = PRELUDE.read_text()
    for name, _, out in schema_constructors():
        if out in sorts:
            assert re.search(rf"\(rewrite \({helper}{out} \({name}[ )]", text), (helper, out, name)



def test_relayout_readdresses_an_intermediate_read_inside_another_tensors_subscripts():
    """set_storage_layout keeps another tensor's subscripts whole only where they hold no gather
    (GatherInSubs): X's subscript reads G through a gather, so every layout of G re-addresses
    that read as it does G's own accesses, and I's plain access is kept."""
    p = program("B^{4}_{tx=0}L^{2}_{a=0}[G^{i64,g}_{tx,a}=I^{i64,g}_{tx,a}+1;];"
                "B^{4}_{tx=0}L^{2}_{a=0}[C^{f32,g}_{tx,a}=X^{f32,g}_{G^{i64,g}_{tx,a}}*I^{i64,g}_{tx,a};];",
                "I:i64[4,2] X:f32[8] -> C:f32[4,2]")
    broken: list = []
    steps = single_steps(p, STRATEGIES["set_storage_layout"], broken=broken)
    assert not broken and len(steps) >= 3
    for step in steps:
        accesses = re.findall(r"G\^\{i64,g\}_\{([^{}]*)\}", step.after.text)
        assert len(accesses) == 2 and accesses[0] == accesses[1] != "tx,a", step.after.text
        assert step.after.text.count("I^{i64,g}_{tx,a}") == 2, step.after.text

# ---------------------------------------------------------------- layouts and regions

def _elements(shape):
    return itertools.product(*(range(n) for n in shape))


@pytest.mark.parametrize("shape", [(6,), (4, 6), (2, 3, 4), (1, 4, 2), (2, 1, 3, 2), (2, 1, 3, 1, 2)])
def test_every_layout_is_a_bijection_onto_its_new_shape(shape):
    for layout in layouts(shape, merged_ranks=(3, 4, 5), permutations_up_to=5):
        new_shape = layout.new_shape()
        seen = set()
        for element in _elements(shape):
            subs = layout.apply(tuple(IConst(i) for i in element))
            values = tuple(index_range(s, {})[0] for s in subs)
            assert len(values) == len(new_shape) and all(
                0 <= v < n for v, n in zip(values, new_shape)), (layout.label, element, values)
            seen.add(values)
        assert len(seen) == int(np.prod(shape)) == int(np.prod(new_shape)), layout.label


def test_layouts_of_a_shape_are_exhaustive_and_distinct():
    shape = (4, 6, 2)
    labels = [layout.label for layout in layouts(shape)]
    assert len(labels) == len(set(labels))
    assert sum("exchanged" in l for l in labels) == 3           # every pair of dimensions
    assert "dimensions flattened row-major" in labels
    assert "dimensions flattened column-major (last dimension outermost)" in labels
    assert sum("permuted" in l for l in labels) == 2            # the two rotations of rank 3
    assert sum("merged" in l for l in labels) == 2              # every adjacent pair
    assert sum("split" in l for l in labels) == 1 + 2 + 0       # proper divisors of 4, 6, 2
    rank4 = [layout.label for layout in layouts((2, 3, 4, 5))]
    assert len(rank4) == len(set(rank4))
    assert sum("exchanged" in l for l in rank4) + sum("permuted" in l for l in rank4) == 23
    assert not any("permuted" in l.label for l in layouts((2, 2, 2, 2, 2)))   # rank 5: exchanges
    rank5 = [l.label for l in layouts((2, 3, 4, 5, 6), permutations_up_to=5)]  # bound copies' ask
    assert len(rank5) == len(set(rank5))
    assert sum("exchanged" in l for l in rank5) + sum("permuted" in l for l in rank5) == 119
    # set_storage_layout's permutations followed by one merge: (3!-1)*2 and (4!-1)*3, distinct
    for rank_shape, extra in (((4, 6, 2), 10), ((2, 3, 4, 5), 69)):
        more = [layout.label for layout in layouts(rank_shape, merged_ranks=(3, 4))]
        assert len(more) == len(set(more)) == len(layouts(rank_shape)) + extra
    # ... and of rank 5, as set_storage_layout asks: (5!-1)*4 more than the permutations
    rank5_merged = [l.label for l in layouts((2, 3, 4, 5, 6), merged_ranks=(3, 4, 5),
                                             permutations_up_to=5)]
    assert len(rank5_merged) == len(set(rank5_merged)) == len(rank5) + 476
    (moved,) = [l for l in layouts((4, 6, 2), merged_ranks=(3, 4))
                if l.kind == "permute-merge" and l.dims == (1, 0, 2, 0)]
    # C_{tx,a,c} -> C_{a*4+tx,c}: the element (1, 2, 1) moves to (2*4+1, 1)
    assert [index_range(s, {})[0] for s in moved.apply((IConst(1), IConst(2), IConst(1)))] == [9, 1]


def test_layouts_decided_by_dimension_agree_with_relayout_sound():
    """storage_layouts decides re-orderings and merges dimension by dimension
    (DimensionVerdicts); for random accesses of a tensor -- one loop per dimension, each
    subscript that loop's index (so the writes cover the tensor) or, now and then, a constant,
    a shifted or scaled index, another dimension's index (out of range, not covering), under
    the loops' ranges or narrower guarded ones -- every layout's verdict is relayout_sound's,
    and both verdicts occur."""
    from hypothesis import given, settings, strategies as st

    from leir_egraph.leir.analysis import GuardedAccess
    from leir_egraph.leir.ast import IBin, IName
    from rules.memory.staging.regions import DimensionVerdicts, relayout_sound

    @st.composite
    def cases(draw):
        shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=5)))
        names = [f"i{d}" for d in range(len(shape))]
        loop_env = {n: (0, size - 1) for n, size in zip(names, shape)}

        def subscript(d):
            kind = draw(st.sampled_from(("index",) * 6 + ("const", "shifted", "scaled", "other")))
            if kind == "index":
                return IName(names[d])
            if kind == "const":
                return IConst(draw(st.integers(0, 3)))
            if kind == "other":
                return IName(draw(st.sampled_from(names)))
            op, by = ("+", draw(st.integers(0, 1))) if kind == "shifted" else ("*", 2)
            return IBin(op, IName(names[d]), IConst(by))

        found = []
        for _ in range(draw(st.integers(0, 3))):
            guarded = {n: (lo, draw(st.integers(lo, hi))) for n, (lo, hi) in loop_env.items()}
            env = loop_env if draw(st.booleans()) else guarded
            var = Var("X", "f32", "g", tuple(subscript(d) for d in range(len(shape))))
            found.append((GuardedAccess(var, env, draw(st.booleans())), loop_env))
        return shape, tuple(found)

    verdicts = {True: 0, False: 0}

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(cases())
    def check(case):
        shape, found = case
        by_dims = DimensionVerdicts(shape, found, {})
        for lay in layouts(shape, merged_ranks=(3, 4, 5), permutations_up_to=5):
            expected = relayout_sound(lay, found)
            assert by_dims.sound(lay) == expected, (shape, lay)
            verdicts[expected] += 1

    check()
    assert verdicts[True] > 100 and verdicts[False] > 100


def test_region_checks():
    p = parse("B^{4}_{tx=0}L^{6}_{c=0}L^{2}_{d=0}[C^{f32,g}_{tx,c}=A^{f32,g}_{tx,c*2+d};];")
    nest = p.nests[0]
    read = nest.equations[0].value
    assert in_bounds(read.subscripts, nest.loops, (4, 12))
    assert not in_bounds(read.subscripts, nest.loops, (4, 11))
    target = nest.equations[0].target
    assert covers_shape(target, nest.loops, (4, 6))
    assert not covers_shape(target, nest.loops, (4, 7))
    shifted = Var("C", "f32", "g", (target.subscripts[0], parse(
        "L^{1}_{a=0}[C^{f32,g}_{a+1}=A^{f32,g}_{a};];").nests[0].equations[0].target.subscripts[0]))
    assert not covers_shape(shifted, nest.loops, (4, 7))


# ---------------------------------------------------------------- finite values

def test_finiteness_of_softmax_statistics():
    p = program("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
                "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
                "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];",
                "A:f32[4,8] -> C:f32[4,8]")
    spans = analyse(p, FINITE).after
    assert spans["D"].real and not spans["D"].nonzero               # a completed max
    assert spans["E"].real and spans["E"].positive                  # a sum of exponentials
    assert spans["C"].real
    assert not analyse(p, FINITE).held["D"].real                    # -inf before its first update


def test_finiteness_refuses_what_can_be_infinite_or_zero():
    p = program("B^{4}_{tx=0}L^{8}_{c=0}[D^{f32,g}_{tx,c}=if_then_else(1<=c<7,A^{f32,g}_{tx,c},-inf);];"
                "B^{4}_{tx=0}[E^{f32,g}_{tx}=A^{f32,g}_{tx,0}/A^{f32,g}_{tx,1};];"
                "B^{4}_{tx=0}[F^{f32,g}_{tx}=log(A^{f32,g}_{tx,0}*A^{f32,g}_{tx,0});];"
                "B^{4}_{tx=0}L^{8}_{a=0}[G^{f32,g}_{tx}=G^{f32,g}_{tx}+A^{f32,g}_{tx,a}*A^{f32,g}_{tx,a};];"
                "B^{4}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx,0}+E^{f32,g}_{tx}+F^{f32,g}_{tx}+G^{f32,g}_{tx};];",
                "A:f32[4,8] -> C:f32[4]")
    spans = analyse(p, FINITE).after
    assert not spans["D"].real                # -inf outside the window
    assert not spans["E"].real                # the divisor may be zero
    assert not spans["F"].real                # log(0)
    assert spans["G"].real and not spans["G"].nonzero              # a sum of squares may be 0


def test_partial_reductions_prove_nothing_inside_their_nest():
    """A splitting value the nest itself writes may still hold the identity (-inf for max)."""
    p = program("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});"
                "C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}-D^{f32,g}_{tx};];",
                "A:f32[4,8] -> C:f32[4,8] D:f32[4]")
    assert not [t for t in single_steps(p, "additive_split") if "D" in t.bindings["m"]]


# ---------------------------------------------------------------- soundness refusals

def _cache_writes_at(p: Program, nest: int) -> list:
    return [t for t in single_steps(p, "cache_read_write")
            if t.rule == "cache-write" and t.site.first_nest == nest]


def test_cache_write_keeps_an_accumulation_onto_an_earlier_result():
    """A bias added onto a matmul result accumulates onto existing values; a fresh tensor would
    start from 0 instead."""
    p = program("B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
                "B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+G^{f32,g}_{a};];",
                "A:f32[4,6] G:f32[6] -> C:f32[4,6]")
    assert _cache_writes_at(p, 0) and not _cache_writes_at(p, 1)


def test_cache_write_keeps_an_accumulation_that_initialises_more_than_it_writes():
    """H_{tx,0} accumulates with H of shape (4,2): its implicit initialisation also zeroes
    H_{tx,1}, which the next nest accumulates onto; a fresh tensor's initialisation would not."""
    p = program("B^{4}_{tx=0}L^{6}_{a=0}[H^{f32,g}_{tx,0}=H^{f32,g}_{tx,0}+A^{f32,g}_{tx,a};];"
                "B^{4}_{tx=0}[H^{f32,g}_{tx,1}=H^{f32,g}_{tx,1}+A^{f32,g}_{tx,0};];"
                "B^{4}_{tx=0}L^{2}_{a=0}[C^{f32,g}_{tx,a}=H^{f32,g}_{tx,a}+1;];",
                "A:f32[4,6] -> C:f32[4,2]")
    assert not _cache_writes_at(p, 0) and not _cache_writes_at(p, 1) and _cache_writes_at(p, 2)


def test_copies_keep_their_parallel_loops_independent():
    """A_{tx+a} does not determine tx: a copy over the B loop would write one element from
    several of its iterations."""
    p = program("B^{4}_{tx=0}L^{3}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx+a};];",
                "A:f32[6] -> C:f32[4,3]")
    assert single_steps(p, "layout_transformation") == []
    assert [t.rule for t in single_steps(p, "cache_read_write")] == ["cache-write", "cache-write"]


def test_splits_leave_integer_equations_and_conditions_alone():
    integer = program("B^{4}_{tx=0}[C^{i64,g}_{tx}=A^{i64,g}_{tx}+G^{i64,g}_{tx};];",
                      "A:i64[4] G:i64[4] -> C:i64[4]")
    compared = program("B^{4}_{tx=0}[C^{f32,g}_{tx}=if_then_else(A^{f32,g}_{tx}<G^{f32,g}_{tx},1,0);];",
                       "A:f32[4] G:f32[4] -> C:f32[4]")
    condition = "if_then_else(A^{f32,g}_{tx}<G^{f32,g}_{tx},1,0)"
    for sid in SPLITS:
        assert single_steps(integer, sid) == [], sid
        # the whole value may be split (additive_split: ite(..)+A-A), the comparison never
        for t in single_steps(compared, sid):
            assert condition in t.after.text, (sid, t.after.text)


def test_staged_copies_live_in_the_kernel_that_uses_them(golden_rows):
    """Shared and local memory does not outlive a CUDA kernel: every cache read/write of a
    seeded sample of golden programs still lowers to valid CUDA where the original does."""
    from leir_egraph.lower import cuda_source

    rng = random.Random(f"{SEED}-cuda")
    rows = [r for r in golden_rows if len(r["leir"]) <= GOLDEN_MAX_CHARS]
    checked = 0
    for row in rng.sample(rows, 6):
        before = Program.parse(row["leir"], row["signature"], row["name"])
        try:
            cuda_source(before)
        except Exception:  # noqa: BLE001 -- an original that is no valid kernel proves nothing
            continue
        found = single_steps(before, "cache_read_write")
        for t in rng.sample(found, min(2, len(found))):
            cuda_source(t.after)
            checked += 1
    assert checked >= 4


# ---------------------------------------------------------------- examples, numerically

EXAMPLES = [(sid, n, ex) for sid in IDS for n, ex in enumerate(STRATEGIES[sid].examples)]


@pytest.mark.parametrize("sid,n,example", EXAMPLES, ids=[f"{s}-{n}" for s, n, _ in EXAMPLES])
def test_example_is_equal_on_tvm(verifier, sid, n, example):
    before = program(example.before, example.signature)
    after = before.with_leir(parse(example.after))
    assert_verified(verifier, before, after, f"{sid} example {n}")


# ---------------------------------------------------------------- golden programs, numerically

def _usable(row: dict) -> bool:
    return len(row["leir"]) <= GOLDEN_MAX_CHARS and informative(row)


@pytest.mark.parametrize("sid", IDS)
def test_golden_transitions_are_equal_on_tvm(verifier, golden_rows, sid):
    sample = golden_sample(golden_rows, sid, seed=SEED, usable=_usable,
                           programs=PROGRAMS_PER_STRATEGY, per_program=TRANSITIONS_PER_PROGRAM)
    assert sample, f"{sid} applies to no golden program"
    for before, transitions in sample:
        for t in transitions:
            assert_verified(verifier, before, t.after, f"{sid} on {before.name}")
