"""Fact provider of expression_splitting (rules/graph/expression_splitting.toml), per top-level
nest (properties of the nest and of tensor shapes, which are the same everywhere in a program,
so keying by the nest term is exact):

* parameter ``SubexpressionFrame nest e loops subs dtype``: ``e`` is a compound sub-expression
  of the nest that may be stored: its frame loops, the intermediate's subscript and dtype;
  ``ReorderedSubexpressionFrame``: the same frame with its loops (and the subscript with
  them) in another order -- reversed for any frame of two loops or more, and every other order
  of a frame of up to ``EVERY_ORDER_UP_TO`` loops (the reference writes the intermediate's loops
  in the order of a Python set, which is any of them; a frame of more loops has too many);
* parameter ``BoundSubexpressionFrame nest e loops wsubs bound subs dtype``: for a frame without
  a B loop, each of those orders with its first loop bound to GPU threads -- ``L^{8}_{c}`` becomes
  ``B^{8}_{tx}`` (a B loop needs a binding name; the new nest is a nest of its own, so ``tx`` is
  free there), ``wsubs`` and ``bound`` the intermediate's subscript and ``e`` with ``tx`` for
  that index, ``subs`` the subscript the nest reads it at (the reference binds a frame's first
  loop the same way: ``B^{8}_{tx}[Y_{tx}=sqrt(H_{tx}+1e-05)]`` for a layer norm's
  ``sqrt(H_{c}+1e-05)`` over ``c``). Every element is written once, by one thread: the same
  values;
* dependency / ``Hoistable nest e``: ``e`` may be computed in a nest right before this one.

From ``leir_egraph.leir.subexpressions``; a pure function of the program.
"""

from __future__ import annotations

from itertools import permutations
from typing import Iterable

from leir_egraph.egraph.encoding import encode_value
from leir_egraph.egraph.vocabulary import (Fact, GuardExtension, LoadedProgram, ParameterSet,
                                           Relation)
from leir_egraph.leir.analysis import exploration_memo, inputs_and_writes, program_shapes
from leir_egraph.leir.ast import Idx, IName, Loop
from leir_egraph.leir.subexpressions import SCALAR_FRAME, hoistable, subexpressions
from leir_egraph.leir.traverse import rebuild


EVERY_ORDER_UP_TO = 5   # loops; 120 orders of five, 720 of six


def _orders(n: int) -> list[tuple[int, ...]]:
    """The other orders of a frame of ``n`` loops: the reverse first, then every other order of
    a frame of up to EVERY_ORDER_UP_TO loops, in lexicographic order."""
    if n < 2:
        return []
    reverse = tuple(range(n))[::-1]
    rest = (p for p in permutations(range(n)) if p != reverse and p != tuple(range(n)))
    return [reverse, *(rest if n <= EVERY_ORDER_UP_TO else ())]


def _bind_first(sub, loops, subs) -> tuple:
    """The frame ``loops`` (a reordering of ``sub``'s) with its first loop bound as ``tx``: the
    loops, the intermediate's subscript and the sub-expression in the new nest's names."""
    index = loops[0].index

    def to_tx(node):  # in subscripts (IName) and as a value (Idx)
        if isinstance(node, IName) and node.name == index:
            return IName("tx")
        return Idx("tx") if isinstance(node, Idx) and node.name == index else None

    bound_loops = (Loop("B", loops[0].extent, "tx"), *loops[1:])
    return bound_loops, [rebuild(s, to_tx) for s in subs], rebuild(sub.expr, to_tx)


def _split_parameters(loaded: LoadedProgram) -> Iterable[Fact]:
    for i, term, nest in loaded.top_nests():
        for sub in subexpressions(nest):
            e, dtype = encode_value(sub.expr), sub.dtype
            yield SUBEXPRESSION_FRAME(term, e, sub.loops, sub.subscripts, dtype)
            if sub.loops == SCALAR_FRAME:  # one B^{1} loop and no subscript: nothing to vary
                continue
            bindable = all(loop.kind != "B" for loop in sub.loops)
            in_order = tuple(range(len(sub.loops)))
            for order in (in_order, *_orders(len(sub.loops))):  # the subscript follows the loops
                loops = [sub.loops[k] for k in order]
                subs = [sub.subscripts[k] for k in order]
                if order != in_order:
                    yield REORDERED_SUBEXPRESSION_FRAME(term, e, loops, subs, dtype)
                if bindable:
                    bound_loops, wsubs, bound = _bind_first(sub, loops, subs)
                    yield BOUND_SUBEXPRESSION_FRAME(term, e, bound_loops, wsubs, bound, subs,
                                                    dtype)


def _hoistable_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    shapes = program_shapes(loaded.program)
    for i, term, nest in loaded.top_nests():
        def ask(_, nest=nest):   # the shapes of the tensors the nest accesses
            return {n: shapes[n] for n in sorted(frozenset().union(*inputs_and_writes(nest)))
                    if n in shapes}
        yield from exploration_memo("expression_splitting.hoistable", term, ask,
                                    lambda ask, term=term, nest=nest:
                                    _nest_hoistable(term, nest, ask("shapes")))


def _nest_hoistable(term, nest, shapes) -> tuple[Fact, ...]:
    """``Hoistable`` about one top-level nest, given the shapes of the tensors it accesses."""
    return tuple(HOISTABLE(term, sub.expr) for sub in subexpressions(nest)
                 if hoistable(nest, sub.expr, shapes))


SUBEXPRESSION_FRAME = Relation(
    "SubexpressionFrame", ("Nest", "Expr", "Loops", "Subs", "String"),
    "{1} is a compound sub-expression of {0}, evaluated in one dtype; on "
    "its own it varies over the loops {2}, as the element {3} of a {4} "
    "tensor")
REORDERED_SUBEXPRESSION_FRAME = Relation(
    "ReorderedSubexpressionFrame", ("Nest", "Expr", "Loops", "Subs", "String"),
    "the same, with the frame loops in another order, {2}, and the "
    "intermediate's subscript {3} in that order")
BOUND_SUBEXPRESSION_FRAME = Relation(
    "BoundSubexpressionFrame",
    ("Nest", "Expr", "Loops", "Subs", "Expr", "Subs", "String"),
    "{1} is a compound sub-expression of {0} over loops none of which is "
    "bound to GPU threads; computed on its own over the loops {2}, the "
    "first bound as tx, it is {4}, the element {3} of a {6} tensor, which "
    "{0} reads as {5}")

PARAMETER_SETS = (
    ParameterSet((SUBEXPRESSION_FRAME,
                  REORDERED_SUBEXPRESSION_FRAME,
                  BOUND_SUBEXPRESSION_FRAME,),
                 _split_parameters),
)

HOISTABLE = Relation(
    "Hoistable", ("Nest", "Expr"),
    "{1} reads nothing {0} writes, can be evaluated at every point of "
    "its loops and is not an index expression bounding reads in a "
    "condition, so it may be computed before {0}")

GUARD_EXTENSIONS = (
    GuardExtension(
        "dependency",
        relations=(HOISTABLE,),
        facts=_hoistable_facts),
)
