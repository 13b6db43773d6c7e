"""Fact provider of operator_fission (rules/graph/operator_fission.toml).

``Fissionable head tail`` (guard dependency): the two halves of a cut of a top-level nest's
body may run one after the other (``leir_egraph.leir.restructure.fission_points`` /
``fissionable``): the fusion question asked backwards (``legality.fusible``), and no
kernel-local (scope s/l) tensor touched by both halves, which on CUDA become two kernels. A
relation of its own, not the shared ``Fusible``: the dependency guard states ``Fusible`` for
every two consecutive top-level nests without the kernel-local condition, so a program that
already held the two halves side by side licensed a fission ``fissionable`` refuses. The
halves are terms the rule builds, so the facts are about those terms; a property of the nests
alone.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.restructure import fission_points, fissionable


def _fission_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    seen = set()
    for nest in loaded.program.leir.nests:
        for point in fission_points(nest):
            if (point.head, point.tail) not in seen and fissionable(point):
                seen.add((point.head, point.tail))
                yield FISSIONABLE(point.head, point.tail)


FISSIONABLE = Relation(
    "Fissionable", ("Nest", "Nest"),
    "{1} takes from {0} only values written in the same iteration, writes nothing {0} "
    "touches, and shares no kernel-local tensor with it, so {0} may run to completion first")

GUARD_EXTENSIONS = (GuardExtension("dependency", relations=(FISSIONABLE,),
                                   facts=_fission_facts),)
