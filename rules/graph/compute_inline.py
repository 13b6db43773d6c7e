"""Fact provider of compute_inline (rules/graph/compute_inline.toml).

* dependency / ``Inlinable a b``: adjacent nests where ``b`` may read ``a``'s right-hand side
  instead of its result (``leir_egraph.leir.restructure.inlinable``);
* loop_nest_consistency / ``LoopsWithin a b``: every loop of ``a`` is a loop of ``b``.

Both are properties of the two nests alone, so keying them by nest terms is exact.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.restructure import inlinable, loops_within


def _adjacent(loaded: LoadedProgram, holds) -> Iterable[tuple]:
    nests = loaded.program.leir.nests
    for i in range(len(nests) - 1):
        if holds(nests[i], nests[i + 1]):
            yield loaded.top_nest_term(i), loaded.top_nest_term(i + 1)


def _inline_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for a, b in _adjacent(loaded, inlinable):
        yield INLINABLE(a, b)


def _within_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for a, b in _adjacent(loaded, loops_within):
        yield LOOPS_WITHIN(a, b)


INLINABLE = Relation(
    "Inlinable", ("Nest", "Nest"),
    "{0} writes each element of its result once, from values {1} does "
    "not change, and {1} reads that result only at the element written "
    "for the same loop indices, in the result's own dtype")
LOOPS_WITHIN = Relation(
    "LoopsWithin", ("Nest", "Nest"),
    "every loop of {0} is also a loop of {1}, with the same index and "
    "extent")

GUARD_EXTENSIONS = (
    GuardExtension(
        "dependency",
        relations=(INLINABLE,),
        facts=_inline_facts),
    GuardExtension(
        "loop_nest_consistency",
        relations=(LOOPS_WITHIN,),
        facts=_within_facts),
)
