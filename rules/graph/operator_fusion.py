"""Fact provider of operator_fusion (rules/graph/operator_fusion.toml).

``FusedIntermediate n1 n2 x`` (guard dependency): ``x`` is an intermediate of global
scope that the nest ``n1`` writes and that no top-level nest other than ``n1`` and the nest
``n2`` after it reads or writes. Once the two are fused into one kernel, ``x`` lives in that
kernel alone, so it may be kept in shared memory there (docs/LEIR.md, CUDA: shared memory does
not outlive its kernel). A pure function of the program.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.analysis import accesses, reads, writes


def _fused_intermediate_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    signature = set(loaded.program.signature.names)
    nests = list(loaded.top_nests())
    users: dict[str, set[int]] = {}
    for i, _, nest in nests:
        for name in reads(nest) | writes(nest):
            users.setdefault(name, set()).add(i)
    scopes = {v.name: v.scope for v in accesses(loaded.program.leir)}
    for (i, n1, first), (_, n2, _) in zip(nests, nests[1:]):
        for x in sorted(writes(first) - signature):
            if users[x] <= {i, i + 1} and scopes.get(x) == "g":
                yield FUSED_INTERMEDIATE(n1, n2, x)


FUSED_INTERMEDIATE = Relation(
    "FusedIntermediate", ("Nest", "Nest", "String"),
    "{2} is a global intermediate written by {0} and used by no nest "
    "but {0} and {1}, so once they are one kernel it lives in it alone")

GUARD_EXTENSIONS = (
    GuardExtension(
        "dependency",
        relations=(FUSED_INTERMEDIATE,),
        facts=_fused_intermediate_facts),
)
