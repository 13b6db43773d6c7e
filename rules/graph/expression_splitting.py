"""Fact provider of expression_splitting (rules/graph/expression_splitting.toml), per top-level
nest (properties of the nest and of tensor shapes, which are the same everywhere in a program,
so keying by the nest term is exact):

* parameter ``SubexpressionFrame nest e loops subs dtype``: ``e`` is a compound sub-expression
  of the nest that may be stored: its frame loops, the intermediate's subscript and dtype;
  ``ReversedSubexpressionFrame``: the same frame with its loops (and the subscript) in reverse
  order, the order the reference writes the intermediate in (a frame of two loops or more);
* dependency / ``Hoistable nest e``: ``e`` may be computed in a nest right before this one.

From ``leir_egraph.leir.subexpressions``; a pure function of the program.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.encoding import expr_term, loops_term, quoted, subs_term
from leir_egraph.egraph.vocabulary import GuardExtension, LoadedProgram, ParameterSet, Relation
from leir_egraph.leir.analysis import program_shapes
from leir_egraph.leir.subexpressions import hoistable, subexpressions


def _split_parameters(loaded: LoadedProgram) -> Iterable[str]:
    for i, name, nest in loaded.top_nests():
        for sub in subexpressions(nest):
            e, dtype = expr_term(sub.expr), quoted(sub.dtype)
            yield (f"(SubexpressionFrame {name} {e} {loops_term(sub.loops)} "
                   f"{subs_term(sub.subscripts)} {dtype})")
            if len(sub.loops) > 1:   # the reference's order: loops and subscript reversed
                yield (f"(ReversedSubexpressionFrame {name} {e} {loops_term(sub.loops[::-1])} "
                       f"{subs_term(sub.subscripts[::-1])} {dtype})")


def _hoistable_facts(loaded: LoadedProgram) -> Iterable[str]:
    shapes = program_shapes(loaded.program)
    for i, name, nest in loaded.top_nests():
        for sub in subexpressions(nest):
            if hoistable(nest, sub.expr, shapes):
                yield f"(Hoistable {name} {expr_term(sub.expr)})"


PARAMETER_SETS = (
    ParameterSet((Relation("SubexpressionFrame", ("Nest", "Expr", "Loops", "Subs", "String"),
                           "{1} is a compound sub-expression of {0}, used outside conditions; on "
                           "its own it varies over the loops {2}, as the element {3} of a {4} "
                           "tensor"),
                  Relation("ReversedSubexpressionFrame", ("Nest", "Expr", "Loops", "Subs", "String"),
                           "the same, with the frame loops {2} in reverse order and the "
                           "intermediate's subscript {3} in that order"),),
                 _split_parameters),
)

GUARD_EXTENSIONS = (
    GuardExtension(
        "dependency",
        relations=(Relation("Hoistable", ("Nest", "Expr"),
                            "{1} reads nothing {0} writes and can be evaluated at every point of "
                            "its loops, so it may be computed before {0}"),),
        facts=_hoistable_facts),
)
