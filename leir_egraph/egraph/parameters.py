"""Parameters a rule cannot invent, supplied to egglog as facts before the run so enumeration
stays exhaustive: fresh index and tensor names, the program root, scope choices, GPU binding
names. Each is a relation with a CoT sentence, like a guard's.

Fresh names follow the reference's alphabets: indices ``a c d f g h i j k l m n o p q r s u w``
(then ``aa ac ...``), tensors ``A C D ... Z`` without ``B L P T U V`` (then ``Aa Ac ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from ..leir.analysis import accesses, nest_loops
from ..leir.names import fresh, index_name_supply, tensor_name_supply
from .facts import Fact, Relation
from .loaded import LoadedProgram

FRESH_INDEX_COUNT = 3
FRESH_TENSOR_COUNT = 4



def _enclosing_indices(loaded: LoadedProgram) -> list[frozenset[str]]:
    """For every nest of ``loaded.nests`` (pre-order), the indices of the loops around it."""
    out: list[frozenset[str]] = []

    def visit(nest, outer: frozenset[str]):
        out.append(outer)
        inner = outer | {l.index for l in nest.loops}
        for item in nest.body:
            if hasattr(item, "loops"):
                visit(item, inner)

    for nest in loaded.program.leir.nests:
        visit(nest, frozenset())
    return out


def _core_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    yield ROOT(loaded.suffix_terms[0])
    # A fresh index must be unused in the nest and by the loops around it (a nested nest may not
    # rebind them); a fact about a nest holds wherever it occurs, so avoid the names of every
    # occurrence's surroundings.
    used: dict = {}
    for nest, outer in zip(loaded.nests, _enclosing_indices(loaded)):
        used.setdefault(nest, {l.index for l in nest_loops(nest)}).update(outer)
    for term, nest in loaded.term_nests():
        for i, name in enumerate(fresh(used[nest], index_name_supply(), FRESH_INDEX_COUNT)):
            yield FRESH_INDEX(term, i, name)
    used_tensors = {v.name for v in accesses(loaded.program.leir)} | set(loaded.program.signature.names)
    for i, name in enumerate(fresh(used_tensors, tensor_name_supply(), FRESH_TENSOR_COUNT)):
        yield FRESH_TENSOR(i, name)
    for old in "gsl":
        for new in "gsl":
            if old != new:
                yield SCOPE_CHANGE(old, new)


@dataclass(frozen=True)
class ParameterSet:
    """Parameter relations and the function producing their facts."""
    relations: tuple[Relation, ...]
    facts: Callable[[LoadedProgram], Iterable[Fact]]


ROOT = Relation("Root", ("Prog",), "{0} is the whole program")
FRESH_INDEX = Relation(
    "FreshIndex", ("Nest", "i64", "String"), "{2} is an index name unused in {0}")
FRESH_TENSOR = Relation(
    "FreshTensor", ("i64", "String"), "{1} is a tensor name unused in the program")
SCOPE_CHANGE = Relation("ScopeChange", ("String", "String"), "scope {0} may become scope {1}")

CORE_PARAMETERS = ParameterSet((
    ROOT,
    FRESH_INDEX,
    FRESH_TENSOR,
    SCOPE_CHANGE,
), _core_facts)

