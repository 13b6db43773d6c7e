"""Guard relations and parameters of the operator-level (loop) strategies: loop_tiling,
loop_fusion, loop_vectorization, loop_binding, reduction_factorization.

Facts come from the pure analyses of ``leir_egraph.leir.scheduling`` and ``legality``; they are
keyed by nest terms, so each must hold wherever that nest occurs. Binding names and fused bound
loops depend on the GPU kernel (the top-level nest) around a nest, so they are computed per
occurrence and only what holds in every occurrence becomes a fact.
"""

from __future__ import annotations

from typing import Iterable

from ...leir.ast import LoopNest
from ...leir.scheduling import (binding_names, factorizable_reduction, split_pairs,
                                tile_quadruples, used_as_value)
from ..encoding import encode_value, quoted, to_egglog
from ..facts import LoadedProgram
from ..guards import GuardExtension, Relation
from ..parameters import ParameterSet



def _nests(loaded: LoadedProgram):
    for k, nest in enumerate(loaded.nests):
        yield loaded.nest_name(k), nest


def _distinct_nests(loaded: LoadedProgram) -> list[tuple[str, LoopNest, list[LoopNest]]]:
    """Each distinct nest (a fact about it holds wherever it occurs) with its let name and the
    top-level nest -- the GPU kernel -- around every one of its occurrences."""
    starts = loaded.top_level
    found: dict[LoopNest, tuple[str, list[LoopNest]]] = {}
    for k, nest in enumerate(loaded.nests):
        kernel = loaded.nests[max(s for s in starts if s <= k)]
        found.setdefault(nest, (loaded.nest_name(k), []))[1].append(kernel)
    return [(name, nest, kernels) for nest, (name, kernels) in found.items()]


# ---------------------------------------------------------------- loop axis count: adjacency

LOOP_ADJACENCY = GuardExtension(
    guard="loop_axis_count",
    relations=(Relation("LoopNext", ("Loops", "Loop", "Loop"),
                        "the loop {1} immediately encloses the loop {2}, so the nest has at "
                        "least two loop axes"),),
    rules="""
(rule ((= ls (LCons l (LCons m rest)))) ((LoopNext ls l m)) :ruleset analysis)
(rule ((= ls (LCons l rest)) (LoopNext rest m q)) ((LoopNext ls m q)) :ruleset analysis)
""")


# ---------------------------------------------------------------- reduction axis

def _reduction_axis_facts(loaded: LoadedProgram) -> Iterable[str]:
    for name, nest, kernels in _distinct_nests(loaded):
        # A fused bound loop must keep the CUDA launch limits of every kernel the nest is in.
        pairs = set.intersection(*(set(split_pairs(nest, k)) for k in kernels))
        for o, i in sorted(pairs):
            yield f"(SplitPair {name} {quoted(o)} {quoted(i)})"
        tiles = set.intersection(*(set(tile_quadruples(nest, k)) for k in kernels))
        for o1, o2, i1, i2 in sorted(tiles):
            yield f"(TilePair {name} {quoted(o1)} {quoted(o2)} {quoted(i1)} {quoted(i2)})"
        found = factorizable_reduction(nest)
        if found is not None:
            op, operand, axes = found
            term = to_egglog(encode_value(operand))
            for axis in axes:
                yield f"(FactorizableReduction {name} {quoted(axis.index)} {quoted(op)} {term})"


REDUCTION_AXIS_LOOPS = GuardExtension(
    guard="reduction_axis",
    relations=(
        Relation("SplitPair", ("Nest", "String", "String"),
                 "{1} and {2} occur in {0} only as {1}*extent+{2}, so one loop over {2} visits "
                 "the same iterations in the same order, reduction axes included, and its kind "
                 "still holds"),
        Relation("TilePair", ("Nest", "String", "String", "String", "String"),
                 "{1} and {2} are the tile loops of the point loops {3} and {4} in {0}, used "
                 "only as {1}*extent+{3} and {2}*extent+{4}, and the fused loops' kinds still "
                 "hold"),
        Relation("FactorizableReduction", ("Nest", "String", "String", "Expr"),
                 "{0} is a single accumulation of {3} with the order-free operator {2} over the "
                 "reduction axis {1}, and {3} never reads the accumulated tensor"),
    ),
    facts=_reduction_axis_facts)


# ---------------------------------------------------------------- pattern match: index values

def _subscript_only_facts(loaded: LoadedProgram) -> Iterable[str]:
    for name, nest in _nests(loaded):
        for loop in nest.loops:
            if not used_as_value(nest, loop.index):
                yield f"(SubscriptOnlyIndex {name} {quoted(loop.index)})"


SUBSCRIPT_ONLY = GuardExtension(
    guard="pattern_match",
    relations=(Relation("SubscriptOnlyIndex", ("Nest", "String"),
                        "the index {1} occurs in {0} only in subscripts, never as a value"),),
    facts=_subscript_only_facts)


GUARD_EXTENSIONS = (LOOP_ADJACENCY, REDUCTION_AXIS_LOOPS, SUBSCRIPT_ONLY)


# ---------------------------------------------------------------- parameters

MAX_SPLIT_POINTS = 63


def reduction_split_points(n: int) -> range:
    """Where reduction_factorization may cut an axis of ``n`` iterations: every point when there
    are at most MAX_SPLIT_POINTS of them, else the multiples of ceil(n/64), so a paper-size axis
    (up to 16,384) offers at most 63 variants instead of 16,383.

    ``reduction_split_points(8)`` -> 1..7;
    ``reduction_split_points(4096)`` -> 64, 128, ..., 4032
    """
    if n - 1 <= MAX_SPLIT_POINTS:
        return range(1, n)
    step = -(-n // (MAX_SPLIT_POINTS + 1))
    return range(step, n, step)


def _split_point_facts(loaded: LoadedProgram) -> Iterable[str]:
    extents = set()
    for nest in loaded.nests:
        found = factorizable_reduction(nest)
        if found is not None:
            extents.update(axis.extent for axis in found[2])
    for n in sorted(extents):
        for first in reduction_split_points(n):
            yield f"(SplitPoint {n} {first})"


def _binding_facts(loaded: LoadedProgram) -> Iterable[str]:
    for name, nest, kernels in _distinct_nests(loaded):
        for loop in nest.loops:
            if loop.kind != "L":
                continue
            valid = set.intersection(*(set(binding_names(k, nest, loop)) for k in kernels))
            for bound in sorted(valid):
                yield f"(BindingName {name} {quoted(loop.index)} {quoted(bound)})"


PARAMETER_SETS = (
    ParameterSet((Relation("SplitPoint", ("i64", "i64"),
                           "the {0} iterations split into the first {1} and the rest"),),
                 _split_point_facts),
    ParameterSet((Relation("BindingName", ("Nest", "String", "String"),
                           "{2} binds the loop {1} of {0} to a GPU axis no other loop of its "
                           "kernel uses, within CUDA's limits on threads and blocks"),),
                 _binding_facts),
)
