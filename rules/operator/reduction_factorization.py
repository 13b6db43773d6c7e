"""Fact provider of reduction_factorization (rules/operator/reduction_factorization.toml).

* ``FactorizableReduction n axis op e`` (guard reduction_axis): the nest is a single
  accumulation of ``e`` with the order-free operator ``op`` over the reduction axis;
* ``WholePartials n axis`` (guard loop_nest_consistency): every loop of the nest but ``axis`` either
  picks an element of the accumulated tensor (its subscripts are loop indices and constants)
  or runs once, so partial results shaped like the tensor itself, combined by a nest over the
  other loops, add each term once -- the reference's form;
* ``SplitPoint n first`` (parameter): where an axis of ``n`` iterations may be cut.

A pure function of the program (``leir_egraph.leir.scheduling.factorizable_reduction``).
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.encoding import encode_value
from leir_egraph.egraph.vocabulary import (Fact, GuardExtension, LoadedProgram, ParameterSet,
                                           Relation)
from leir_egraph.leir.ast import IConst, IName
from leir_egraph.leir.scheduling import factorizable_reduction, reduction_split_points


def _factorizable_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for term, nest, _ in loaded.distinct_nests():
        found = factorizable_reduction(nest)
        if found is not None:
            op, operand, axes = found
            value = encode_value(operand)
            for axis in axes:
                yield FACTORIZABLE_REDUCTION(term, axis.index, op, value)


def _whole_partial_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for term, nest, _ in loaded.distinct_nests():
        found = factorizable_reduction(nest)
        for axis in found[2] if found is not None else ():
            if whole_partials(nest, axis.index):
                yield WHOLE_PARTIALS(term, axis.index)


def whole_partials(nest, axis: str) -> bool:
    """True when the partial results of a split of ``axis`` may have the accumulated tensor's
    own subscripts, and those differ from the other loops' indices: they are loop indices or
    constants, and every other loop the tensor's subscripts do not name runs once (else the
    combining nest, over those loops, would add the partial results again in each of their
    iterations).

    ``B^{8}_{tx=0}L^{3}_{f=0}L^{1}_{g=0}[C_{tx}=C_{tx}+A_{tx,f+g};]``, axis ``f`` -> True;
    with ``L^{2}_{g=0}`` -> False; without the loop ``g`` also False: the partial results
    ``P_{tx}`` are then factorize-reduction's own (its partial results have the indices of the
    other loops, in loop order)."""
    subs = nest.body[0].target.subscripts
    if not subs or not all(isinstance(s, (IName, IConst)) for s in subs):
        return False
    named = {s.name for s in subs if isinstance(s, IName)}
    loops = {l.index for l in nest.loops}
    if not named <= loops:
        return False
    others = [l for l in nest.loops if l.index != axis]
    if tuple(subs) == tuple(IName(l.index) for l in others):
        return False  # the same partial results as factorize-reduction's: nothing new
    return all(l.index in named or l.extent == 1 for l in others)


def _split_point_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    extents = set()
    for nest in loaded.nests:
        found = factorizable_reduction(nest)
        if found is not None:
            extents.update(axis.extent for axis in found[2])
    for n in sorted(extents):
        for first in reduction_split_points(n):
            yield SPLIT_POINT(n, first)


FACTORIZABLE_REDUCTION = Relation(
    "FactorizableReduction", ("Nest", "String", "String", "Expr"),
    "{0} is a single accumulation of {3} with the order-free operator {2} "
    "over the reduction axis {1}, and {3} never reads the accumulated "
    "tensor")
WHOLE_PARTIALS = Relation(
    "WholePartials", ("Nest", "String"),
    "every loop of {0} but {1} picks an element of the accumulated "
    "tensor or runs once, so partial results with the tensor's own "
    "subscripts, combined over those loops, add each term once")

GUARD_EXTENSIONS = (GuardExtension(
    guard="reduction_axis",
    relations=(FACTORIZABLE_REDUCTION,),
    facts=_factorizable_facts),
    GuardExtension(
        guard="loop_nest_consistency",
        relations=(WHOLE_PARTIALS,),
        facts=_whole_partial_facts),
)

SPLIT_POINT = Relation(
    "SplitPoint", ("i64", "i64"),
    "the {0} iterations split into the first {1} and the "
    "rest")

PARAMETER_SETS = (ParameterSet((SPLIT_POINT,),
                               _split_point_facts),)
