"""The graph-level strategies (rules/graph/): every example and a seeded sample of transitions on
golden programs verified numerically on TVM, the inverse pairs, and the facts they rest on.

Verification levels (docs/LEIR.md section 4): every transition must be Equal, and Independent
where the program before was (the reference translator binds ``tx`` on some reduction axes; the
verifier then reports that ``before`` itself is not Independent, which the rewrite cannot be
blamed for).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from leir_egraph.egraph import all_steps, load_strategies, single_steps
from leir_egraph.egraph.rulecheck import example_program
from leir_egraph.leir import Program, check, parse
from leir_egraph.verify import verify

from conftest import GOLDEN_DIR

GRAPH = ("operator_fusion", "operator_fission", "compute_inline", "expression_splitting",
         "tensor_concat_to_fuse_operators", "tensor_split_to_decouple_operators",
         "common_subexpression_elimination", "expression_reorder")
STRATEGIES = {s.id: s for s in load_strategies() if s.id in GRAPH}
INVERSES = {"operator_fusion": "operator_fission", "operator_fission": "operator_fusion",
            "compute_inline": "expression_splitting", "expression_splitting": "compute_inline"}

SEED = 20260522
SAMPLE_PER_DTYPE = 3      # golden programs per dtype (benchmarks/strategy_coverage.py: more)
CAP = 2                   # transitions verified per program and strategy


def equivalent(before: Program, after: Program, row: dict | None = None) -> tuple[bool, str]:
    """Equal, and Independent unless ``before`` is not (then the rewrite cannot be blamed).

    Random standard-normal inputs can take a program outside its domain everywhere (KLDivLoss
    takes the log of probabilities): when the verifier cannot establish equality because the
    outputs are non-finite in every trial, a golden program is verified again on its own
    recorded inputs (``row``), where it is finite."""
    r = verify(before, after, timing=False)
    if r.level == "exec" and "not established" in (r.reason or "") and row is not None:
        values = dict(np.load(GOLDEN_DIR / "data" / row["data_file"]))
        inputs = {k: v for k, v in values.items() if k in before.signature.input_names}
        real = Program(before.leir, before.signature, before.name, inputs)
        r = verify(real, real.with_leir(after.leir), timing=False)
    if r.level == "independent":
        return True, ""
    if r.level == "equal" and r.before_independent is False:
        return True, ""
    return False, f"{r.level}: {r.reason} {r.before_problem or ''}"


def test_the_graph_strategies_are_loaded_with_their_paper_classes():
    expected = {"operator_fusion": "medium", "operator_fission": "easy", "compute_inline": "medium",
                "expression_splitting": "medium", "tensor_concat_to_fuse_operators": "difficult",
                "tensor_split_to_decouple_operators": "difficult",
                "common_subexpression_elimination": "difficult", "expression_reorder": "medium"}
    assert {sid: STRATEGIES[sid].difficulty for sid in GRAPH} == expected
    for sid, inverse in INVERSES.items():
        assert inverse in STRATEGIES[sid].inverse or sid in STRATEGIES[inverse].inverse


@pytest.mark.parametrize("sid", GRAPH)
def test_examples_are_equal_on_tvm(sid):
    for ex in STRATEGIES[sid].examples:
        before = example_program(ex.before, ex.signature)
        ok, why = equivalent(before, Program(parse(ex.after), before.signature))
        assert ok, f"{sid}: {ex.after}: {why}"


@pytest.mark.parametrize("sid", GRAPH)
def test_counterexamples_are_valid_programs(sid):
    for ce in STRATEGIES[sid].counterexamples:
        check(example_program(ce.before, ce.signature))


# ---------------------------------------------------------------- hard cases, decided soundly

# (strategy, program, signature, number of transitions): the cases a careless rule gets wrong.
# Refusals must refuse; what is allowed must verify.
HARD_CASES = [
    ("operator_fission", "a scan in the first part is complete per element before the second reads it",
     "L^{8}_{a=0}[F^{f32,g}_{a}=if_then_else(a<1,0,F^{f32,g}_{a-1})+A^{f32,g}_{a};C^{f32,g}_{a}=F^{f32,g}_{a}*2;];",
     "A:f32[8] -> C:f32[8]", 1),
    ("operator_fission", "the second equation reads an element a later iteration writes",
     "L^{8}_{a=0}[J^{f32,g}_{a}=A^{f32,g}_{a}*2;C^{f32,g}_{a}=J^{f32,g}_{7-a};];",
     "A:f32[8] -> C:f32[8]", 0),
    ("operator_fission", "the second equation reads a partial sum",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};C^{f32,g}_{tx}=D^{f32,g}_{tx}*2;];",
     "A:f32[4,8] -> C:f32[4]", 0),
    ("compute_inline", "X is compared with an f64 tensor: inlined, the product would be computed in f64",
     "B^{4}_{tx=0}[X^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];B^{4}_{tx=0}[C^{f32,g}_{tx}=if_then_else(X^{f32,g}_{tx}>D^{f64,g}_{tx},1,0);];",
     "A:f32[4] D:f64[4] -> C:f32[4]", 0),
    ("compute_inline", "an index used as a value moves along with its loop",
     "B^{4}_{tx=0}L^{8}_{a=0}[X^{f32,g}_{tx,a}=a*2+A^{f32,g}_{tx,a};];B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=X^{f32,g}_{tx,a}/3;];",
     "A:f32[4,8] -> C:f32[4,8]", 1),
    ("compute_inline", "the consumer overwrites Y, which the producer's right-hand side reads",
     "B^{4}_{tx=0}[Y^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];B^{4}_{tx=0}[X^{f32,g}_{tx}=Y^{f32,g}_{tx}*2;];B^{4}_{tx=0}[Y^{f32,g}_{tx}=X^{f32,g}_{tx}+Y^{f32,g}_{3-tx};];",
     "A:f32[4] -> Y:f32[4]", 0),
    ("compute_inline", "an integer quotient read by a float consumer: truncation happens in X's dtype",
     "B^{4}_{tx=0}[X^{i64,g}_{tx}=A^{i64,g}_{tx}/3;];B^{4}_{tx=0}[C^{f32,g}_{tx}=X^{i64,g}_{tx}*2;];",
     "A:i64[4] -> C:f32[4]", 0),
    ("compute_inline", "the consumer also reads X at another element",
     "B^{4}_{tx=0}[X^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];B^{4}_{tx=0}[C^{f32,g}_{tx}=X^{f32,g}_{tx}+X^{f32,g}_{3-tx};];",
     "A:f32[4] -> C:f32[4]", 0),
    ("expression_splitting", "a guarded read would be out of range on its own loops",
     "L^{6}_{c=0}[C^{f32,g}_{c}=if_then_else(1<=c<5,A^{f32,g}_{c-1}*2,0);];",
     "A:f32[4] -> C:f32[6]", 0),
    ("expression_splitting", "a guarded logarithm is in range everywhere; NaN where not taken is never read",
     "L^{6}_{c=0}[C^{f32,g}_{c}=if_then_else(1<=c<5,log(A^{f32,g}_{c}*2),0);];",
     "A:f32[6] -> C:f32[6]", 4),  # (each also with its nest bound as B^{6}_{tx})
    # a comparison's operands are evaluated in the dtype of the tensors compared (docs/LEIR.md):
    # f32 here, the target's too, so one f32 intermediate serves both uses
    ("expression_splitting", "the sub-expression is also an operand of an f32 comparison",
     "L^{6}_{c=0}[C^{f32,g}_{c}=if_then_else(A^{f32,g}_{c}*2>1,A^{f32,g}_{c}*2,0);];",
     "A:f32[6] -> C:f32[6]", 2),  # (and bound as B^{6}_{tx})
    ("expression_splitting", "the comparison is evaluated in f64 (E is f64), the value in f32",
     "L^{6}_{c=0}[C^{f32,g}_{c}=if_then_else(A^{f32,g}_{c}*2>E^{f64,g}_{c},A^{f32,g}_{c}*2,0);];",
     "A:f32[6] E:f64[6] -> C:f32[6]", 0),
    ("expression_splitting", "the sub-expression is evaluated in i64 and in f32",
     "L^{6}_{c=0}[C^{i64,g}_{c}=A^{f32,g}_{c}*2+1;D^{f32,g}_{c}=A^{f32,g}_{c}*2;];",
     "A:f32[6] -> C:i64[6] D:f32[6]", 0),
    ("common_subexpression_elimination", "both uses are guarded reads out of range on their own loops",
     "L^{6}_{c=0}[C^{f32,g}_{c}=if_then_else(1<=c<5,exp(A^{f32,g}_{c-1}),0)+if_then_else(1<=c<5,exp(A^{f32,g}_{c-1}),1);];",
     "A:f32[4] -> C:f32[6]", 0),
    ("common_subexpression_elimination", "the repeated expression is evaluated in i64 and in f32",
     "L^{6}_{c=0}[C^{i64,g}_{c}=A^{f32,g}_{c}*2+1;D^{f32,g}_{c}=A^{f32,g}_{c}*2;];",
     "A:f32[6] -> C:i64[6] D:f32[6]", 0),
    ("tensor_split_to_decouple_operators", "a scan reads its own output",
     "L^{8}_{a=0}[F^{f32,g}_{a}=if_then_else(a<1,0,F^{f32,g}_{a-1})+A^{f32,g}_{a};];",
     "A:f32[8] -> F:f32[8]", 0),
    ("tensor_split_to_decouple_operators", "A is read along tx and at a fixed row",
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}+A^{f32,g}_{0,a};];",
     "A:f32[4,8] -> C:f32[4,8]", 0),
    # (six times: the copy-back over the loops its element uses, and in the reference's form over
    # all the nest's loops; each with a copy nest per input, and with the reference's grouped
    # copies, one nest per side, in either order)
    ("tensor_concat_to_fuse_operators", "A is read by both: it is concatenated with itself",
     "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx}=F^{f32,g}_{tx}+(A^{f32,g}_{tx,a}-C^{f32,g}_{tx,a})**2;];B^{4}_{tx=0}L^{8}_{a=0}[G^{f32,g}_{tx}=G^{f32,g}_{tx}+(A^{f32,g}_{tx,a}-D^{f32,g}_{tx,a})**2;];",
     "A:f32[4,8] C:f32[4,8] D:f32[4,8] -> F:f32[4] G:f32[4]", 6),
    # (twice: E and G copied over a alone, and in the reference's form under B^{1}_{tx})
    ("tensor_concat_to_fuse_operators", "E and G differ but are not read along tx: only a joins",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*E^{f32,g}_{a};];B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}*G^{f32,g}_{a};];",
     "A:f32[4,8] C:f32[4,8] E:f32[8] G:f32[8] -> D:f32[4,8] F:f32[4,8]", 2),
    ("tensor_concat_to_fuse_operators", "the second accumulates onto the first one's output",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}+1;];B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+C^{f32,g}_{tx,a};];",
     "A:f32[4,8] C:f32[4,8] -> D:f32[4,8]", 0),
]


@pytest.mark.parametrize("sid,why,text,signature,count", HARD_CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(HARD_CASES)])
def test_hard_cases(sid, why, text, signature, count):
    program = example_program(text, signature)
    check(program)
    steps = single_steps(program, sid)
    assert len(steps) == count, why
    for t in steps:
        ok, reason = equivalent(program, t.after)
        assert ok, f"{why}: {t.after.text}: {reason}"


# ---------------------------------------------------------------- inverse pairs

def _round_trip_failures(sid: str, programs) -> list[str]:
    inverse = INVERSES[sid]
    failures = []
    for program in programs:
        for t in single_steps(program, sid):
            if (sid, t.rule) in ONE_WAY_RULES:
                continue
            back = {u.after.text for u in single_steps(t.after, inverse)}
            if program.text not in back:
                failures.append(f"{sid} then {inverse} on {program.text}: {t.after.text}")
    return failures


@pytest.mark.parametrize("sid", sorted(INVERSES))
def test_the_inverse_strategy_undoes_every_example_transition(sid):
    """Applying the inverse to any transition of an example gives the original back. (For
    compute_inline -> expression_splitting that needs the removed intermediate to carry the
    first unused tensor name, the only name splitting gives a new intermediate: the examples are
    written that way.)"""
    programs = [example_program(ex.before, ex.signature)
                for n, ex in enumerate(STRATEGIES[sid].examples) if (sid, n) not in ONE_WAY]
    assert _round_trip_failures(sid, programs) == []


# Rules whose transitions the inverse strategy is not meant to undo, with the reason.
ONE_WAY_RULES = {
    ("operator_fusion", "fuse-adjacent-shared"): "the fusion also moves an intermediate to "
    "shared memory; fission splits the nest back but leaves the scope (set_storage_scope's move)",
    ("operator_fusion", "fuse-adjacent-local"): "the same with local memory",
    ("expression_splitting", "split-subexpression-bound"): "the new nest's first loop is bound "
    "to threads and renamed tx; compute_inline inlines a producer that runs over its consumer's "
    "own loops",
}

# Example transitions the inverse strategy is not meant to undo, with the reason.
ONE_WAY = {
    ("expression_splitting", 2): "a sub-expression without indices is hoisted into a one-thread "
    "scalar nest; compute_inline only inlines a producer that runs over its consumer's loops",
    ("compute_inline", 3): "the producer writes at a compound index (a*4+c); splitting writes "
    "its new intermediate at the nest's plain loop indices",
    ("compute_inline", 4): "a scalar computed in a loop of one iteration; splitting gives its "
    "intermediate the nest's loop indices",
}


def test_splitting_is_undone_by_inlining_on_golden_programs(golden_rows):
    rng = random.Random(SEED)
    rows = rng.sample(golden_rows, 4)
    programs = [Program.parse(r["leir"], r["signature"], r["name"]) for r in rows]
    failures = []
    for program in programs:
        for t in single_steps(program, "expression_splitting")[:CAP]:
            back = {u.after.text for u in single_steps(t.after, "compute_inline")}
            if program.text not in back:
                failures.append(t.after.text)
    assert failures == []


# ---------------------------------------------------------------- golden programs, verified

def _sample(golden_rows):
    rng = random.Random(SEED)
    out = []
    for dtype in ("float32", "float64"):
        rows = [r for r in golden_rows if r["dtype"] == dtype]
        out.extend(rng.sample(rows, SAMPLE_PER_DTYPE))
    return out


def test_golden_transitions_are_equal(golden_rows):
    """Every graph strategy on a seeded sample of golden programs (f32 and f64): up to CAP
    transitions per program and strategy, each verified on TVM. No exceptions are expected."""
    rng = random.Random(SEED)
    failures, verified = [], {sid: 0 for sid in GRAPH}
    for row in _sample(golden_rows):
        program = Program.parse(row["leir"], row["signature"], row["name"])
        broken: list = []
        steps = all_steps(program, list(GRAPH), broken=broken)
        assert broken == [], (row["id"], broken)
        by_strategy: dict[str, list] = {}
        for t in steps:
            by_strategy.setdefault(t.strategy, []).append(t)
        for sid, ts in sorted(by_strategy.items()):
            for t in rng.sample(ts, min(CAP, len(ts))):
                ok, why = equivalent(program, t.after, row)
                verified[sid] += 1
                if not ok:
                    failures.append(f"{row['id']} {sid}: {t.after.text}: {why}")
    assert failures == []
    assert sum(verified.values()) > 0
