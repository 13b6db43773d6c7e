"""The nine preconditions of the strategies as named guards shared by every rule file, plus the
extra soundness guards some rules need.

A guard is a name, a docstring, a refusal sentence (used in chains of thought and in
counterexample checks) and the egglog relations it provides. Relations are filled either with
facts computed by the LEIR analyses (``facts``) or by egglog rules in the ``analysis`` ruleset
(``rules``). Rule files refer to the relations by name inside ``:when`` conditions.

Every relation carries a ``holds`` sentence template; ``{0}``, ``{1}``... are its arguments
rendered as LEIR text, so the chain of thought can state exactly which fact held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable, Iterable

from ..leir.analysis import (Range, equation_reads, equation_sites, index_range,
                             program_shapes, reads, tensor_names, writes)
from ..leir.ast import Leir
from ..leir.hardware import MAX_SHARED_BYTES
from ..leir.legality import determined_loops, fusible, independent_iterations, loops_swappable
from ..leir.signature import dtype_bytes
from .facts import Chain, Fact, Relation, making
from .loaded import LoadedProgram

Facts = Iterable[Fact]


@dataclass(frozen=True)
class Guard:
    """A named precondition."""
    name: str
    doc: str
    refusal: str
    relations: tuple[Relation, ...] = ()
    facts: Callable[[LoadedProgram], Facts] | None = None
    rules: str = ""  # egglog rules (ruleset analysis) computing the relations
    structural: bool = field(default=False)  # satisfied by the rule's pattern itself

    def declarations(self) -> str:
        return "\n".join(r.declaration() for r in self.relations)


# ---------------------------------------------------------------- 1. pattern match

PATTERN_MATCH = Guard(
    "pattern_match",
    "The specific computation pattern the strategy rewrites occurs in the program; the rule's "
    "left-hand side is the pattern, so this guard is checked by matching itself.",
    "the computation pattern this strategy rewrites does not occur in the program",
    structural=True)


# ---------------------------------------------------------------- 2. dependency

def _pair_facts(loaded: LoadedProgram) -> Facts:
    """Independent, DisjointWrites and Fusible: what two top-level nests allow."""
    nests = list(loaded.top_nests())
    rw = [(reads(n), writes(n)) for _, _, n in nests]
    for (i, ni, a), (j, nj, b) in combinations(nests, 2):
        (ra, wa), (rb, wb) = rw[i], rw[j]
        if not (wa & rb or ra & wb or wa & wb):
            yield INDEPENDENT(ni, nj)
            yield INDEPENDENT(nj, ni)
        elif j == i + 1 and not (wa & rb or ra & wb) and all(
                _disjoint_writes(a, b, t) for t in wa & wb):
            yield DISJOINT_WRITES(ni, nj)
        if j == i + 1 and fusible(a, b):
            yield FUSIBLE(ni, nj)


def _swappable_facts(loaded: LoadedProgram) -> Facts:
    for term, nest in loaded.term_nests():
        loops = nest.loops
        for x, y in combinations(loops, 2):
            if loops_swappable(nest, x.index, y.index):
                yield SWAPPABLE(term, x.index, y.index)


def _unread_facts(loaded: LoadedProgram) -> Facts:
    leir = loaded.program.leir
    read_after: set[str] = set()
    names = sorted(reads(leir) | writes(leir))
    for i in reversed(range(len(leir.nests) + 1)):
        for name in names:
            if name not in read_after:
                yield UNREAD_IN(name, loaded.suffix_terms[i])
        if i > 0:
            read_after |= reads(leir.nests[i - 1])


def _write_boxes(nest, tensor: str) -> list[list[Range]] | None:
    """Per write of ``tensor`` in ``nest``, the inclusive range of each subscript over the loops
    around it; ``None`` when a range is unknown (a gather, a non-affine subscript)."""
    boxes = []
    for site in equation_sites(Leir((nest,))):
        if site.equation.target.name != tensor:
            continue
        box = [index_range(sub, site.loop_ranges) for sub in site.equation.target.subscripts]
        if any(r is None for r in box):
            return None
        boxes.append(box)
    return boxes


def _disjoint_writes(first, second, tensor: str) -> bool:
    """Do the two nests write provably disjoint elements of ``tensor``? Every write of one and
    every write of the other are separated in some dimension: ``F_{a,tx}`` for ``tx`` in [0,1)
    and ``F_{a,tx+1}`` for ``tx`` in [0,62) differ in dimension 1 (0 against 1..62)."""
    a, b = _write_boxes(first, tensor), _write_boxes(second, tensor)
    if a is None or b is None:
        return False
    return all(any(x[1] < y[0] or y[1] < x[0] for x, y in zip(p, q)) for p in a for q in b)


def _first_write_facts(loaded: LoadedProgram) -> Facts:
    """``FirstWriteIn t n``: ``t`` is no input and no nest before ``n`` writes it. A nest term
    at several top-level positions gets the fact only where it holds at every one of them."""
    inputs = set(loaded.program.signature.input_names)
    written_before: set[str] = set()
    common: dict = {}
    for i, term, nest in loaded.top_nests():
        written = writes(nest)
        first = {t for t in written if t not in inputs and t not in written_before}
        written_before |= written
        key = common.setdefault(nest, [term, first])
        key[1] &= first
    for term, tensors in common.values():
        for tensor in sorted(tensors):
            yield FIRST_WRITE_IN(tensor, term)


INDEPENDENT = Relation(
    "Independent", ("Nest", "Nest"),
    "the nests {0} and {1} have no read-after-write, write-after-read or "
    "write-after-write dependence")
DISJOINT_WRITES = Relation(
    "DisjointWrites", ("Nest", "Nest"),
    "the consecutive nests {0} and {1} both write a tensor, but never the same "
    "element of it, and neither reads a tensor the other writes")
FUSIBLE = Relation(
    "Fusible", ("Nest", "Nest"),
    "every value {1} takes from {0} is read in the same iteration that writes it, "
    "and {1} writes nothing {0} touches")
SWAPPABLE = Relation(
    "Swappable", ("Nest", "String", "String"),
    "no element written in {0} is touched by iterations that differ in both "
    "loops {1} and {2}")
UNREAD_IN = Relation(
    "UnreadIn", ("String", "Prog"),
    "no later nest reads {0}")
FIRST_WRITE_IN = Relation(
    "FirstWriteIn", ("String", "Nest"),
    "{0} is not an input and no nest before {1} writes it, so an accumulation "
    "of {0} in {1} starts from the identity")

DEPENDENCY = Guard(
    "dependency",
    "Data dependencies allow the move: computed from read/write sets and the dependence "
    "analyses of leir.legality. Independent: the two nests share no RAW, WAR or WAW conflict. "
    "DisjointWrites: two consecutive nests whose only conflicts are writes of one tensor, to "
    "element ranges that are disjoint in some dimension. "
    "FirstWriteIn: no earlier nest writes the tensor, so an accumulation starts from the "
    "identity. "
    "Fusible: the second nest may run inside the first's loops iteration by iteration. "
    "Swappable: two loops of a nest may exchange nesting positions. UnreadIn: no nest of the "
    "program suffix reads the tensor.",
    "a data dependence between the nests or loops involved forbids the move",
    relations=(
        INDEPENDENT,
        DISJOINT_WRITES,
        FUSIBLE,
        SWAPPABLE,
        UNREAD_IN,
        FIRST_WRITE_IN,
    ),
    # one producer per analysis, so that an engine whose rules read only some of these
    # relations (the search's lookahead: operator_fusion reads Fusible, compute_inline
    # UnreadIn) computes only those; called in this order, all wanted, they state the facts in
    # the order one producer did
    facts=Chain([making(_pair_facts, INDEPENDENT, DISJOINT_WRITES, FUSIBLE),
                 making(_swappable_facts, SWAPPABLE), making(_unread_facts, UNREAD_IN),
                 making(_first_write_facts, FIRST_WRITE_IN)]))


# ---------------------------------------------------------------- 3. operation identity

OPERATION_IDENTITY = Guard(
    "operation_identity",
    "Repeated identical computations exist: the same computation occurs at least twice. Its "
    "relations belong to the strategies that use it (their providers): RepeatedIn "
    "(common_subexpression_elimination), IdenticalOperation (tensor_concat_to_fuse_operators), "
    "RenamedTwin (partially_equivalent_then_correct).",
    "no computation is repeated in the program")


# ---------------------------------------------------------------- 4. loop nest consistency

def _consistency_facts(loaded: LoadedProgram) -> Facts:
    nests = list(loaded.top_nests())
    for (_, ni, a), (_, nj, b) in combinations(nests, 2):
        if a.loops == b.loops:
            yield SAME_LOOPS(ni, nj)
            yield SAME_LOOPS(nj, ni)


SAME_LOOPS = Relation(
    "SameLoops", ("Nest", "Nest"),
    "the nests {0} and {1} have identical loops")

LOOP_NEST_CONSISTENCY = Guard(
    "loop_nest_consistency",
    "The nests involved have exactly the same loops (kinds, extents, indices, order).",
    "the nests involved do not share the same loop structure",
    relations=(SAME_LOOPS,),
    facts=_consistency_facts)


# ---------------------------------------------------------------- 5. equation count

def _equation_count_facts(loaded: LoadedProgram) -> Facts:
    for term, nest in loaded.term_nests():
        yield EQUATION_COUNT(term, len(nest.equations))


EQUATION_COUNT = Relation("EquationCount", ("Nest", "i64"), "the nest {0} holds {1} equations")

EQUATION_COUNT_GUARD = Guard(
    "equation_count",
    "A nest holds enough equations for the strategy (e.g. at least two to split it).",
    "the nest does not hold enough equations",
    relations=(EQUATION_COUNT,),
    facts=_equation_count_facts)


# ---------------------------------------------------------------- 6. loop axis count

LOOP_OUTER = Relation(
    "LoopOuter", ("Loops", "Loop", "Loop"),
    "the loop {1} encloses the loop {2} in the same nest, so the nest has "
    "at least two loop axes")
LOOP_NEXT = Relation(
    "LoopNext", ("Loops", "Loop", "Loop"),
    "the loop {1} immediately encloses the loop {2}, so the nest has at "
    "least two loop axes")

LOOP_AXIS_COUNT = Guard(
    "loop_axis_count",
    "A nest has enough loop axes (e.g. at least two to reorder or tile them). LoopOuter pairs "
    "two loops of one nest, the first enclosing the second, and "
    "LoopNext two adjacent ones; both exist only when the nest has at least two axes.",
    "the nest does not have enough loop axes",
    relations=(LOOP_OUTER,
               LOOP_NEXT))


# ---------------------------------------------------------------- 7. loop range factorization

def proper_factors(n: int) -> list[int]:
    """Divisors f of n with 1 < f < n, ascending (O(sqrt n))."""
    small = [f for f in range(2, int(n ** 0.5) + 1) if n % f == 0]
    large = [n // f for f in reversed(small) if n // f != f]
    return small + large


def _factor_facts(loaded: LoadedProgram) -> Facts:
    extents = sorted({l.extent for nest in loaded.nests for l in nest.loops})
    for n in extents:
        for f in proper_factors(n):
            yield PROPER_FACTOR(n, f)


PROPER_FACTOR = Relation("ProperFactor", ("i64", "i64"), "{1} properly divides the extent {0}")

LOOP_RANGE_FACTORIZATION = Guard(
    "loop_range_factorization",
    "The loop's extent has a proper divisor f (1 < f < extent) to split it by.",
    "the loop extent has no proper divisor to split it by",
    relations=(PROPER_FACTOR,),
    facts=_factor_facts)


# ---------------------------------------------------------------- 8. reduction axis

def _axis_facts(loaded: LoadedProgram) -> Facts:
    for term, nest in loaded.term_nests():
        for loop in nest.loops:
            if independent_iterations(nest, loop.index):
                yield INDEPENDENT_AXIS(term, loop.index)


INDEPENDENT_AXIS = Relation(
    "IndependentAxis", ("Nest", "String"),
    "the iterations of loop {1} in {0} are independent (not a reduction axis)")

REDUCTION_AXIS = Guard(
    "reduction_axis",
    "Parallelising, vectorising, binding or fusing must not touch a reduction axis. "
    "IndependentAxis: "
    "iterations of the loop write disjoint elements and read only what they write themselves, "
    "so they may run in any order or at once.",
    "the loop is a reduction axis (its iterations combine into the same elements)",
    relations=(
        INDEPENDENT_AXIS,
    ),
    facts=making(_axis_facts, INDEPENDENT_AXIS))


# ---------------------------------------------------------------- 9. intermediate variable

def _intermediate_facts(loaded: LoadedProgram) -> Facts:
    known = set(loaded.program.signature.names)
    seen: dict[str, tuple[str, str]] = {}
    for site in equation_sites(loaded.program.leir):
        t = site.equation.target
        seen.setdefault(t.name, (t.dtype, t.scope))
    users: dict[str, list] = {}
    for nest in loaded.program.leir.nests:
        for name in tensor_names(nest):
            users.setdefault(name, []).append(nest)
    shapes = program_shapes(loaded.program)
    for name, (dtype, scope) in seen.items():
        if name not in known:
            yield INTERMEDIATE(name)
            yield SCOPE_OF(name, scope)
            for fits in kernel_scopes(name, dtype, shapes.get(name), users.get(name, [])):
                yield SCOPE_FITS(name, fits)


def kernel_scopes(name: str, dtype: str, shape, users) -> list[str]:
    """The scopes an intermediate of this dtype and shape, accessed by the top-level nests
    ``users``, may live in on CUDA (docs/LEIR.md, "Limits"): global memory always; a kernel's
    local memory and, when the tensor fits one block's share (``leir.hardware.MAX_SHARED_BYTES``),
    its shared memory, only when

    * one top-level nest (one kernel) alone uses the tensor -- such memory does not outlive its
      kernel -- and
    * every access of it in that nest is of one element form that fixes every B loop around
      it, so each thread reads only elements it wrote itself: local memory is per thread, and
      shared memory has no barrier between one thread's write and another's read.

    ``B^{4}_{tx=0}L^{8}_{a=0}[D_{tx,a}=exp(A_{tx,a});C_{tx,a}=D_{tx,a}*2;]``: D may be local;
    with ``C_{tx,a}=D_{3-tx,a}`` it may not."""
    if len(users) != 1:
        return ["g"]
    accesses = [(v, site.loops) for site in equation_sites(Leir((users[0],)))
                for v in (site.equation.target, *equation_reads(site.equation)) if v.name == name]
    if len({v.subscripts for v, _ in accesses}) != 1 or not all(
            {l.index for l in loops if l.kind == "B"} <= determined_loops(v, loops)
            for v, loops in accesses):
        return ["g"]
    fits_shared = shape is not None and math.prod(shape) * dtype_bytes(dtype) <= MAX_SHARED_BYTES
    return ["g", "l"] + (["s"] if fits_shared else [])


INTERMEDIATE = Relation("Intermediate", ("String",), "{0} is an intermediate variable")
SCOPE_OF = Relation("ScopeOf", ("String", "String"), "{0} currently lives in scope {1}")
SCOPE_FITS = Relation(
    "ScopeFits", ("String", "String"),
    "{0} may live in scope {1} on CUDA: global memory, or shared or local memory of "
    "the one kernel (top-level nest) that uses it, each thread touching only the "
    "elements it writes")

INTERMEDIATE_VARIABLE = Guard(
    "intermediate_variable",
    "The tensor is an intermediate (written by the program, not an input or output), so its "
    "storage may change without changing the program's interface.",
    "the tensor is a known input or output, whose storage the caller fixes",
    relations=(
        INTERMEDIATE,
        SCOPE_OF,
        SCOPE_FITS,
    ),
    facts=_intermediate_facts)


@dataclass(frozen=True)
class GuardExtension:
    """More relations for an existing guard (or a new extra guard): what a fact provider beside
    a rule file defines (docs/RULES.md §5), or a shared vocabulary module of ``extensions/``."""
    guard: str
    relations: tuple[Relation, ...] = ()
    facts: Callable[[LoadedProgram], Facts] | None = None
    rules: str = ""
    new_guard: Guard | None = None  # set to add a guard beyond the base ones


def base_guards() -> dict[str, Guard]:
    """The nine preconditions of the paper, defined in this module."""
    return {g.name: g for g in (
        PATTERN_MATCH, DEPENDENCY, OPERATION_IDENTITY, LOOP_NEST_CONSISTENCY, EQUATION_COUNT_GUARD,
        LOOP_AXIS_COUNT, LOOP_RANGE_FACTORIZATION, REDUCTION_AXIS, INTERMEDIATE_VARIABLE)}


PAPER_PRECONDITIONS = ("pattern_match", "dependency", "operation_identity",
                       "loop_nest_consistency", "equation_count", "loop_axis_count",
                       "loop_range_factorization", "reduction_axis", "intermediate_variable")

