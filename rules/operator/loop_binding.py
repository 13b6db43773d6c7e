"""Fact provider of loop_binding (rules/operator/loop_binding.toml).

``BindingName n x b`` (parameter): ``b`` (a ``tx``/``ty``/``tz`` or ``bx``/``by``/``bz`` name)
may bind the loop ``x`` of nest ``n``: no other loop of its GPU kernel uses that axis, and CUDA's
launch limits hold -- in every kernel the nest occurs in. A pure function of the program
(``leir_egraph.leir.scheduling.binding_names``).
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.vocabulary import Fact, LoadedProgram, ParameterSet, Relation
from leir_egraph.leir.scheduling import binding_names


def _binding_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for term, nest, kernels in loaded.distinct_nests():
        for loop in nest.loops:
            if loop.kind != "L":
                continue
            valid = set.intersection(*(set(binding_names(k, nest, loop)) for k in kernels))
            for bound in sorted(valid):
                yield BINDING_NAME(term, loop.index, bound)


BINDING_NAME = Relation(
    "BindingName", ("Nest", "String", "String"),
    "{2} binds the loop {1} of {0} to a GPU axis no other "
    "loop of its kernel uses, within CUDA's limits on "
    "threads and blocks")

PARAMETER_SETS = (ParameterSet((BINDING_NAME,),
                               _binding_facts),)
