"""Fact provider of common_subexpression_elimination
(rules/graph/common_subexpression_elimination.toml), per program suffix starting at a nest
using ``e`` (suffix terms are unique to their position):

* operation_identity / ``RepeatedIn s e``: ``e`` is computed at least twice in the suffix;
* loop_nest_consistency / ``SharedFrame s e loops subs dtype``: every nest of the suffix using
  ``e`` runs its indices over the same loops and evaluates it in one dtype (a comparison's
  operand in the comparison's dtype);
* dependency / ``UnchangedIn s e``: ``e`` has the same value at every use in the suffix;
* operation_identity / ``SecondGroup s e t f``: ``f``, repeated in the suffix ``t`` (``s`` itself
  or a later one), is another sub-expression than ``e``, neither inside ``e`` nor containing it
  -- so both can be shared in one step (``share-two-subexpressions``).

From ``leir_egraph.leir.subexpressions.common_subexpressions``; a pure function of the program.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.analysis import program_shapes
from leir_egraph.leir.subexpressions import common_subexpressions
from leir_egraph.leir.traverse import walk


@lru_cache(maxsize=4)
def _common(program):
    return common_subexpressions(program.leir, program_shapes(program))


def _repeated_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for c in _common(loaded.program):
        if c.repeated:
            yield REPEATED_IN(loaded.suffix_terms[c.position], c.expr)


def _second_group_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    repeated = [c for c in _common(loaded.program) if c.repeated]
    parts = {c.expr: set(walk(c.expr)) for c in repeated}  # each expression's sub-expressions
    for c in repeated:
        for d in repeated:
            if d.position < c.position or d.expr in parts[c.expr] or c.expr in parts[d.expr]:
                continue
            yield SECOND_GROUP(loaded.suffix_terms[c.position], c.expr,
                               loaded.suffix_terms[d.position], d.expr)


def _frame_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for c in _common(loaded.program):
        if c.shared_frame:
            yield SHARED_FRAME(loaded.suffix_terms[c.position], c.expr, c.loops, c.subscripts,
                               c.dtype)


def _unchanged_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for c in _common(loaded.program):
        if c.unchanged:
            yield UNCHANGED_IN(loaded.suffix_terms[c.position], c.expr)


REPEATED_IN = Relation(
    "RepeatedIn", ("Prog", "Expr"),
    "{1} is computed more than once from this nest on")
SECOND_GROUP = Relation(
    "SecondGroup", ("Prog", "Expr", "Prog", "Expr"),
    "{3} is another sub-expression than {1}, neither inside it nor "
    "containing it, and computed more than once from the nest where {1} "
    "is first shared or a later one")
SHARED_FRAME = Relation(
    "SharedFrame", ("Prog", "Expr", "Loops", "Subs", "String"),
    "every nest using {1} from this nest on runs its indices over the "
    "same loops {2}, and evaluates it in {4}")
UNCHANGED_IN = Relation(
    "UnchangedIn", ("Prog", "Expr"),
    "no nest from this one to the last use of {1} writes a tensor it "
    "reads, it can be evaluated at every point of its loops, and it is "
    "not an index expression bounding reads in a condition")

GUARD_EXTENSIONS = (
    GuardExtension(
        "operation_identity",
        relations=(REPEATED_IN,),
        facts=_repeated_facts),
    GuardExtension(
        "operation_identity",
        relations=(SECOND_GROUP,),
        facts=_second_group_facts),
    GuardExtension(
        "loop_nest_consistency",
        relations=(SHARED_FRAME,),
        facts=_frame_facts),
    GuardExtension(
        "dependency",
        relations=(UNCHANGED_IN,),
        facts=_unchanged_facts),
)
