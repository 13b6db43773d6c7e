"""Fact provider of loop_fusion (rules/operator/loop_fusion.toml).

* ``SplitPair n o i`` / ``TilePair n o1 o2 i1 i2`` (guard reduction_axis): the loops are used
  only as ``o*extent+i``, so one fused loop visits the same iterations in the same order, and
  the fused loop's kind still holds in every GPU kernel the nest occurs in;
* ``SubscriptOnlyIndex n x`` (guard pattern_match): the index occurs only in subscripts.

Facts come from ``leir_egraph.leir.scheduling``; a pure function of the program.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.scheduling import split_pairs, tile_quadruples, used_as_value


def _fused_loop_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for term, nest, kernels in loaded.distinct_nests():
        # A fused bound loop must keep the CUDA launch limits of every kernel the nest is in.
        pairs = set.intersection(*(set(split_pairs(nest, k)) for k in kernels))
        for o, i in sorted(pairs):
            yield SPLIT_PAIR(term, o, i)
        tiles = set.intersection(*(set(tile_quadruples(nest, k)) for k in kernels))
        for o1, o2, i1, i2 in sorted(tiles):
            yield TILE_PAIR(term, o1, o2, i1, i2)


def _subscript_only_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for term, nest in loaded.term_nests():
        for loop in nest.loops:
            if not used_as_value(nest, loop.index):
                yield SUBSCRIPT_ONLY_INDEX(term, loop.index)


SPLIT_PAIR = Relation(
    "SplitPair", ("Nest", "String", "String"),
    "{1} and {2} occur in {0} only as {1}*extent+{2}, so one loop over {2} "
    "visits the same iterations in the same order, reduction axes included, "
    "and its kind still holds")
TILE_PAIR = Relation(
    "TilePair", ("Nest", "String", "String", "String", "String"),
    "{1} and {2} are the tile loops of the point loops {3} and {4} in {0}, used "
    "only as {1}*extent+{3} and {2}*extent+{4}, and the fused loops' kinds "
    "still hold")
SUBSCRIPT_ONLY_INDEX = Relation(
    "SubscriptOnlyIndex", ("Nest", "String"),
    "the index {1} occurs in {0} only in subscripts, never as a value")

GUARD_EXTENSIONS = (
    GuardExtension(
        guard="reduction_axis",
        relations=(
            SPLIT_PAIR,
            TILE_PAIR,
        ),
        facts=_fused_loop_facts),
    GuardExtension(
        guard="pattern_match",
        relations=(SUBSCRIPT_ONLY_INDEX,),
        facts=_subscript_only_facts),
)
