"""Facts for moving whole equations between nests: operator_fission and compute_inline.

* dependency / ``Fusible`` (the core relation) also for the two halves of every cut of a
  top-level nest's body that may run one after the other (fission is fusion read backwards);
* dependency / ``Inlinable``: adjacent nests where the second may read the first one's
  right-hand side instead of its result (leir.restructure.inlinable);
* loop_nest_consistency / ``LoopsWithin``: every loop of the first nest is a loop of the second.

All three are properties of the nests alone, so keying them by nest terms is exact.
"""

from __future__ import annotations

from typing import Iterable

from ...leir.restructure import fission_points, fissionable, inlinable, loops_within
from ..encoding import encode, to_egglog
from ..facts import LoadedProgram
from ..guards import GuardExtension, Relation


def _fission_facts(loaded: LoadedProgram) -> Iterable[str]:
    seen = set()
    for nest in loaded.program.leir.nests:
        for point in fission_points(nest):
            if (point.head, point.tail) not in seen and fissionable(point):
                seen.add((point.head, point.tail))
                yield f"(Fusible {to_egglog(encode(point.head))} {to_egglog(encode(point.tail))})"


def _inline_facts(loaded: LoadedProgram) -> Iterable[str]:
    nests = loaded.program.leir.nests
    for i in range(len(nests) - 1):
        if inlinable(nests[i], nests[i + 1]):
            yield f"(Inlinable {loaded.top_nest_name(i)} {loaded.top_nest_name(i + 1)})"


def _within_facts(loaded: LoadedProgram) -> Iterable[str]:
    nests = loaded.program.leir.nests
    for i in range(len(nests) - 1):
        if loops_within(nests[i], nests[i + 1]):
            yield f"(LoopsWithin {loaded.top_nest_name(i)} {loaded.top_nest_name(i + 1)})"


GUARD_EXTENSIONS = (
    GuardExtension("dependency", facts=_fission_facts),
    GuardExtension(
        "dependency",
        relations=(Relation("Inlinable", ("Nest", "Nest"),
                            "{0} writes each element of its result once, from values {1} does "
                            "not change, and {1} reads that result only at the element written "
                            "for the same loop indices, in the result's own dtype"),),
        facts=_inline_facts),
    GuardExtension(
        "loop_nest_consistency",
        relations=(Relation("LoopsWithin", ("Nest", "Nest"),
                            "every loop of {0} is also a loop of {1}, with the same index and "
                            "extent"),),
        facts=_within_facts),
)
