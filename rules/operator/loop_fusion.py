"""Fact provider of loop_fusion (rules/operator/loop_fusion.toml).

* ``SplitPair n o i`` / ``TilePair n o1 o2 i1 i2`` (guard reduction_axis): the loops are used
  only as ``o*extent+i``, so one fused loop visits the same iterations in the same order, and
  the fused loop's kind still holds in every GPU kernel the nest occurs in;
* ``SubscriptOnlyIndex n x`` (guard pattern_match): the index occurs only in subscripts.

Facts come from ``leir_egraph.leir.scheduling``; a pure function of the program.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.encoding import quoted
from leir_egraph.egraph.vocabulary import GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.scheduling import split_pairs, tile_quadruples, used_as_value


def _fused_loop_facts(loaded: LoadedProgram) -> Iterable[str]:
    for name, nest, kernels in loaded.distinct_nests():
        # A fused bound loop must keep the CUDA launch limits of every kernel the nest is in.
        pairs = set.intersection(*(set(split_pairs(nest, k)) for k in kernels))
        for o, i in sorted(pairs):
            yield f"(SplitPair {name} {quoted(o)} {quoted(i)})"
        tiles = set.intersection(*(set(tile_quadruples(nest, k)) for k in kernels))
        for o1, o2, i1, i2 in sorted(tiles):
            yield f"(TilePair {name} {quoted(o1)} {quoted(o2)} {quoted(i1)} {quoted(i2)})"


def _subscript_only_facts(loaded: LoadedProgram) -> Iterable[str]:
    for name, nest in loaded.named_nests():
        for loop in nest.loops:
            if not used_as_value(nest, loop.index):
                yield f"(SubscriptOnlyIndex {name} {quoted(loop.index)})"


GUARD_EXTENSIONS = (
    GuardExtension(
        guard="reduction_axis",
        relations=(
            Relation("SplitPair", ("Nest", "String", "String"),
                     "{1} and {2} occur in {0} only as {1}*extent+{2}, so one loop over {2} "
                     "visits the same iterations in the same order, reduction axes included, "
                     "and its kind still holds"),
            Relation("TilePair", ("Nest", "String", "String", "String", "String"),
                     "{1} and {2} are the tile loops of the point loops {3} and {4} in {0}, used "
                     "only as {1}*extent+{3} and {2}*extent+{4}, and the fused loops' kinds "
                     "still hold"),
        ),
        facts=_fused_loop_facts),
    GuardExtension(
        guard="pattern_match",
        relations=(Relation("SubscriptOnlyIndex", ("Nest", "String"),
                            "the index {1} occurs in {0} only in subscripts, never as a value"),),
        facts=_subscript_only_facts),
)
