"""Fact provider of operator_fission (rules/graph/operator_fission.toml).

Fission is fusion read backwards: the shared relation dependency / ``Fusible a b`` (the second
nest may run inside the first one's loops iteration by iteration) is also stated for the two
halves of every cut of a top-level nest's body that may run one after the other
(``leir_egraph.leir.restructure.fission_points`` / ``fissionable``). The halves are terms the
rule builds, so the facts are about those terms; a property of the nests alone.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.guards import FUSIBLE
from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram
from leir_egraph.leir.restructure import fission_points, fissionable


def _fission_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    seen = set()
    for nest in loaded.program.leir.nests:
        for point in fission_points(nest):
            if (point.head, point.tail) not in seen and fissionable(point):
                seen.add((point.head, point.tail))
                yield FUSIBLE(point.head, point.tail)


GUARD_EXTENSIONS = (GuardExtension("dependency", facts=_fission_facts),)
