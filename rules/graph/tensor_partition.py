"""Fact provider of the tensor partition pair, named by both rule files
rules/graph/tensor_split_to_decouple_operators.toml and tensor_concat_to_fuse_operators.toml
(plans from ``leir_egraph.leir.partition``; a pure function of the program).

* parameter ``TensorSplitPoint n v``: the cuts offered for an axis of extent n (every divisor v < n);
* dependency / ``Decouplable nest``: the nest's one equation reads its output only as its own
  accumulation starting from the identity, at every place the nest occurs;
* parameter ``TensorSplitInputs nest axis copies out_loops out1 out2``: how to split the nest
  along an axis, at any split point (leir.partition.SplitAxis);
* parameter ``TensorSplitReduction nest axis op copies first second out1 out2``: how to split
  the nest along its only reduction loop, the reference's form (leir.partition.SplitReduction),
  cut at ``TensorSplitAnyPoint n v`` (every point of an axis of up to 64 iterations, as
  reduction_factorization's); dependency / ``ExactReductionSplit nest axis``: the output is
  indexed by every other loop, so the combining nest adds each partial result once, and the
  copies keep the nest's parallel claims (leir.partition.reduction_split_exact);
* parameter ``TensorSplitAllLoops nest axis copies first second out1 out2``: the reference's
  split along an output loop, everything over all the nest's loops
  (leir.partition.SplitAllLoops), cut at ``TensorSplitAnyPoint``; dependency /
  ``ExactAllLoopsSplit nest axis``: its copies keep the parallel claims;
* operation_identity / ``IdenticalOperation n1 n2``: the second nest's equation is the first's on
  other tensors;
* parameter ``TensorConcatInputs n1 n2 axis copies out_loops joined``: how to compute adjacent
  nests as one along an axis (leir.partition.ConcatAxis), where that holds at every place the
  pair occurs and the joined nest still fits a CUDA kernel.

Fresh tensor names come from the same supply as the core ``FreshTensor`` parameter, as many as
a plan needs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from leir_egraph.egraph.parameters import fresh_tensor_names
from leir_egraph.egraph.vocabulary import (Fact, GuardExtension, LoadedProgram, ParameterSet,
                                           Relation)
from leir_egraph.leir.analysis import program_shapes
from leir_egraph.leir.hardware import launch_problems
from leir_egraph.leir.ast import Equation, Leir
from leir_egraph.leir.partition import (all_loops_split_exact, concat_axes,
                                        divisor_split_points, reduction_split_exact,
                                        same_operation, self_contained, split_all_loops_axes,
                                        split_axes, split_reduction_axes)
from leir_egraph.leir.program import Program
from leir_egraph.leir.restructure import implicit_initialisations
from leir_egraph.leir.scheduling import reduction_split_points

PLAN_NAMES = 16  # fresh names offered to a plan (a split of k inputs needs 2k+2)


def _implicit(program: Program) -> set[int]:
    """Top-level nests whose (first) equation, an accumulation, starts from its identity."""
    return {n for n, path in implicit_initialisations(program.leir, set(program.signature.input_names))
            if path == (0,)}


def _at_every_place(program: Program, per_place) -> dict:
    """``per_place(i) -> (key, set of facts)`` for each top-level position (or None); for each
    key, the first position where it occurs and the facts that hold at every such position."""
    out: dict = {}
    for i in range(len(program.leir.nests)):
        got = per_place(i)
        if got is None:
            continue
        key, facts = got
        first, kept = out.get(key, (i, facts))
        out[key] = (first, kept & facts)
    return out


def _split_point_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    extents = sorted({l.extent for nest in loaded.nests for l in nest.loops})
    for n in extents:
        for v in divisor_split_points(n):
            yield TENSOR_SPLIT_POINT(n, v)


def _decouplable_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    program = loaded.program
    implicit = _implicit(program)

    def place(i):
        nest = program.leir.nests[i]
        if len(nest.body) != 1 or not isinstance(nest.body[0], Equation):
            return None
        return nest, ({True} if self_contained(nest.body[0], i in implicit) else set())

    for i, holds in _at_every_place(program, place).values():
        if holds:
            yield DECOUPLABLE(loaded.top_nest_term(i))


@lru_cache(maxsize=16)
def _plans(program: Program, planner) -> tuple[tuple[int, object], ...]:
    """``(top-level position, plan)`` for each distinct nest and each plan ``planner`` gives
    (computed once per program for every fact producer below that reads them)."""
    names = fresh_tensor_names(program, PLAN_NAMES)
    shapes = program_shapes(program)
    out, seen = [], set()
    for i, nest in enumerate(program.leir.nests):
        if nest not in seen:
            seen.add(nest)
            out.extend((i, plan) for plan in planner(nest, names, shapes))
    return tuple(out)


def _split_inputs(loaded: LoadedProgram) -> Iterable[Fact]:
    for i, plan in _plans(loaded.program, split_axes):
        yield TENSOR_SPLIT_INPUTS(loaded.top_nest_term(i), plan.axis, plan.copies,
                                  plan.out_loops, plan.out1, plan.out2)


def _split_reductions(loaded: LoadedProgram) -> Iterable[Fact]:
    for i, plan in _plans(loaded.program, split_reduction_axes):
        yield TENSOR_SPLIT_REDUCTION(loaded.top_nest_term(i), plan.axis, plan.op, plan.copies,
                                     plan.first, plan.second, plan.out1, plan.out2)


def _split_all_loops(loaded: LoadedProgram) -> Iterable[Fact]:
    for i, plan in _plans(loaded.program, split_all_loops_axes):
        yield TENSOR_SPLIT_ALL_LOOPS(loaded.top_nest_term(i), plan.axis, plan.copies, plan.first,
                                     plan.second, plan.out1, plan.out2)


def _exact_split_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for relation, planner, exact in (
            (EXACT_REDUCTION_SPLIT, split_reduction_axes, reduction_split_exact),
            (EXACT_ALL_LOOPS_SPLIT, split_all_loops_axes, all_loops_split_exact)):
        for i, plan in _plans(loaded.program, planner):
            if exact(loaded.program.leir.nests[i], plan):
                yield relation(loaded.top_nest_term(i), plan.axis)


def _any_split_point_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    nests = loaded.program.leir.nests
    extents = sorted({l.extent for planner in (split_reduction_axes, split_all_loops_axes)
                      for i, plan in _plans(loaded.program, planner)
                      for l in nests[i].loops if l.index == plan.axis})
    for n in extents:
        for v in reduction_split_points(n):
            yield TENSOR_SPLIT_ANY_POINT(n, v)


def _same_operation_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    nests = loaded.program.leir.nests
    for i in range(len(nests) - 1):
        a, b = nests[i], nests[i + 1]
        if (len(a.body) == 1 and len(b.body) == 1 and isinstance(a.body[0], Equation)
                and isinstance(b.body[0], Equation) and same_operation(a.body[0], b.body[0])):
            yield IDENTICAL_OPERATION(loaded.top_nest_term(i), loaded.top_nest_term(i + 1))


def _fits_a_kernel(program: Program, nest) -> bool:
    return not launch_problems(Program(Leir((nest,)), program.signature))


def _concat_inputs(loaded: LoadedProgram) -> Iterable[Fact]:
    program = loaded.program
    nests = program.leir.nests
    names = fresh_tensor_names(program, PLAN_NAMES)
    implicit = _implicit(program)
    shapes = program_shapes(program)

    def place(i):
        if i + 1 >= len(nests):
            return None
        n1, n2 = nests[i], nests[i + 1]
        found = concat_axes(n1, n2, names, i in implicit, i + 1 in implicit, shapes)
        return (n1, n2), {(plan.axis, plan.copies, plan.out_loops, plan.joined)
                          for plan in found if _fits_a_kernel(program, plan.fused)}

    for i, plans in _at_every_place(program, place).values():
        for axis, copies, out_loops, joined in sorted(plans, key=lambda p: (p[0], repr(p))):
            yield TENSOR_CONCAT_INPUTS(loaded.top_nest_term(i), loaded.top_nest_term(i + 1), axis,
                                       copies, out_loops, joined)


TENSOR_SPLIT_POINT = Relation(
    "TensorSplitPoint", ("i64", "i64"),
    "the extent {0} is cut into {1} and the rest, both whole multiples "
    "of {1}")
TENSOR_SPLIT_INPUTS = Relation(
    "TensorSplitInputs", ("Nest", "String", "Body", "Loops", "String", "String"),
    "along {1}, {2} copies each input read along {1} into a first and a "
    "second part over the loops it uses, and the output is computed in "
    "the parts {4} and {5}, copied back over {3}")
TENSOR_SPLIT_REDUCTION = Relation(
    "TensorSplitReduction",
    ("Nest", "String", "String", "Body", "Nest", "Nest", "String", "String"),
    "{1} is {0}'s only reduction loop ({2}); {4} and {5} copy each input "
    "read along {1} into a first and a second part over all of {0}'s "
    "loops, and the parts accumulate into {6} and {7}")
TENSOR_SPLIT_ALL_LOOPS = Relation(
    "TensorSplitAllLoops", ("Nest", "String", "Body", "Nest", "Nest", "String", "String"),
    "along the output loop {1}, {3} and {4} copy each input whose reads "
    "mention {1} into a first and a second part over all of {0}'s loops, "
    "and the parts compute into {5} and {6}")
TENSOR_SPLIT_ANY_POINT = Relation(
    "TensorSplitAnyPoint", ("i64", "i64"),
    "the loop's {0} iterations are cut into {1} and the rest")
TENSOR_CONCAT_INPUTS = Relation(
    "TensorConcatInputs", ("Nest", "Nest", "String", "Body", "Loops", "String"),
    "along {2}, {3} copies each input of {0} and its counterpart in {1} "
    "into one concatenated tensor, and both outputs are computed in "
    "{5}, copied back over {4}")

PARAMETER_SETS = (
    ParameterSet((TENSOR_SPLIT_POINT,),
                 _split_point_facts),
    ParameterSet((TENSOR_SPLIT_INPUTS,),
                 _split_inputs),
    ParameterSet((TENSOR_SPLIT_REDUCTION,),
                 _split_reductions),
    ParameterSet((TENSOR_SPLIT_ALL_LOOPS,),
                 _split_all_loops),
    ParameterSet((TENSOR_SPLIT_ANY_POINT,),
                 _any_split_point_facts),
    ParameterSet((TENSOR_CONCAT_INPUTS,),
                 _concat_inputs),
)

DECOUPLABLE = Relation(
    "Decouplable", ("Nest",),
    "{0} never reads its output except as its own accumulation, which "
    "starts from the identity there, so each output element depends on "
    "the inputs alone")
EXACT_REDUCTION_SPLIT = Relation(
    "ExactReductionSplit", ("Nest", "String"),
    "{1} is the only loop of {0} that does not index its output, so a "
    "nest over the other loops adds each partial result to each output "
    "element once, and every input copy is fixed by {0}'s parallel "
    "loops")
EXACT_ALL_LOOPS_SPLIT = Relation(
    "ExactAllLoopsSplit", ("Nest", "String"),
    "every copy and copy-back of the split of {0} along {1} is fixed by "
    "{0}'s parallel loops")
IDENTICAL_OPERATION = Relation(
    "IdenticalOperation", ("Nest", "Nest"),
    "{1} computes the same operation as {0}, on other tensors")

GUARD_EXTENSIONS = (
    GuardExtension(
        "dependency",
        relations=(DECOUPLABLE,),
        facts=_decouplable_facts),
    GuardExtension(
        "dependency",
        relations=(EXACT_REDUCTION_SPLIT,
                   EXACT_ALL_LOOPS_SPLIT,),
        facts=_exact_split_facts),
    GuardExtension(
        "operation_identity",
        relations=(IDENTICAL_OPERATION,),
        facts=_same_operation_facts),
)
