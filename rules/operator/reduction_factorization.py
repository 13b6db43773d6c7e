"""Fact provider of reduction_factorization (rules/operator/reduction_factorization.toml).

* ``FactorizableReduction n axis op e`` (guard reduction_axis): the nest is a single
  accumulation of ``e`` with the order-free operator ``op`` over the reduction axis;
* ``SplitPoint n first`` (parameter): where an axis of ``n`` iterations may be cut.

A pure function of the program (``leir_egraph.leir.scheduling.factorizable_reduction``).
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.encoding import encode_value, quoted, to_egglog
from leir_egraph.egraph.vocabulary import GuardExtension, LoadedProgram, ParameterSet, Relation
from leir_egraph.leir.scheduling import factorizable_reduction, reduction_split_points

def _factorizable_facts(loaded: LoadedProgram) -> Iterable[str]:
    for name, nest, _ in loaded.distinct_nests():
        found = factorizable_reduction(nest)
        if found is not None:
            op, operand, axes = found
            term = to_egglog(encode_value(operand))
            for axis in axes:
                yield f"(FactorizableReduction {name} {quoted(axis.index)} {quoted(op)} {term})"


def _split_point_facts(loaded: LoadedProgram) -> Iterable[str]:
    extents = set()
    for nest in loaded.nests:
        found = factorizable_reduction(nest)
        if found is not None:
            extents.update(axis.extent for axis in found[2])
    for n in sorted(extents):
        for first in reduction_split_points(n):
            yield f"(SplitPoint {n} {first})"


GUARD_EXTENSIONS = (GuardExtension(
    guard="reduction_axis",
    relations=(Relation("FactorizableReduction", ("Nest", "String", "String", "Expr"),
                        "{0} is a single accumulation of {3} with the order-free operator {2} "
                        "over the reduction axis {1}, and {3} never reads the accumulated "
                        "tensor"),),
    facts=_factorizable_facts),)

PARAMETER_SETS = (ParameterSet((Relation("SplitPoint", ("i64", "i64"),
                                         "the {0} iterations split into the first {1} and the "
                                         "rest"),),
                               _split_point_facts),)
