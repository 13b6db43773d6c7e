"""Parameters a rule cannot invent, supplied to egglog as facts before the run so enumeration
stays exhaustive: fresh index and tensor names, the program root, scope choices, GPU binding
names. Each is a relation with a CoT sentence, like a guard's.

Fresh names follow the reference's alphabets: indices ``a c d f g h i j k l m n o p q r s u w``
(then ``aa ac ...``), tensors ``A C D ... Z`` without ``B L P T U V`` (then ``Aa Ac ...``).

Fresh **tensor** names are placeholders while rules run: ``FreshTensor k "@tk"`` names no
tensor of any program (a LEIR tensor name is ``[A-Z][a-z]*``), so the fact is the same for
every program and a window key or a shared database holding it does not change when a program
gains or loses a name. The program's own names are put in when a match is read for one
program (:class:`FreshNames`, used by ``Engine.matches`` and ``Engine.applications``): the
``k``-th placeholder becomes the ``k``-th name of the tensor supply the program does not use,
the name the fact itself held before, so every program and chain of thought is as it was.
That is sound because a placeholder, like the name it stands for, differs from every name in
use and from the other placeholders, and no rule reads more of it than that (a rule's
conditions only bind it; tests/test_fresh_names.py checks the programs are the same).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable

from ..leir.analysis import accesses, nest_loops
from ..leir.names import fresh, index_name_supply, tensor_name_supply
from ..leir.partition import rename_tensors
from .facts import Fact, Relation
from .loaded import LoadedProgram

FRESH_INDEX_COUNT = 3
FRESH_TENSOR_COUNT = 4
# The k-th fresh tensor name's placeholder is PLACEHOLDER + str(k): never a LEIR tensor name.
PLACEHOLDER = "@t"


def fresh_tensor_placeholder(k: int) -> str:
    """The placeholder ``FreshTensor k`` states for the ``k``-th fresh tensor name."""
    return f"{PLACEHOLDER}{k}"


def fresh_tensor_names(program, count: int = FRESH_TENSOR_COUNT) -> list[str]:
    """The first ``count`` names of the tensor supply that ``program`` does not use (its
    accesses and its signature)."""
    used = {v.name for v in accesses(program.leir)} | set(program.signature.names)
    return fresh(used, tensor_name_supply(), count)


def names_fresh_tensors(rule) -> bool:
    """Whether a rule reads ``FreshTensor`` (its rows may hold placeholders)."""
    return any(c.head == FRESH_TENSOR.name for c in rule.parsed_conditions)


def fresh_rules(strategies) -> frozenset[tuple[str, str]]:
    """``(strategy id, rule name)`` of the rules of ``strategies`` that read ``FreshTensor``."""
    return frozenset((s.id, r.name) for s in strategies for r in s.rules
                     if names_fresh_tensors(r))


def named(program, found: list, rules: frozenset, names: "FreshNames | None" = None) -> list:
    """``found`` (matches or applications on ``program``) with the program's fresh tensor
    names put in for the placeholders in the rows of ``rules`` (:func:`fresh_rules`)."""
    if not any((m.strategy, m.rule) in rules for m in found):
        return found
    names = names or FreshNames(program)
    return [names.match(m) if (m.strategy, m.rule) in rules else m for m in found]


class FreshNames:
    """One program's fresh tensor names put in for the placeholders of terms and matches read
    from the engine (the names computed on first need; each term object renamed once, and
    returned as the very object where it holds no placeholder)."""

    def __init__(self, program):
        self.program = program
        self._mapping: dict[str, str] | None = None
        self._terms: dict[int, tuple] = {}

    @property
    def mapping(self) -> dict[str, str]:
        """placeholder -> the program's name."""
        if self._mapping is None:
            self._mapping = {fresh_tensor_placeholder(k): name
                             for k, name in enumerate(fresh_tensor_names(self.program))}
        return self._mapping

    def term(self, t):
        """A term (or literal) with every placeholder replaced by its name."""
        if type(t) is str:
            return self.mapping.get(t, t) if t.startswith(PLACEHOLDER) else t
        if type(t) is not tuple:
            return t
        hit = self._terms.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        args = [self.term(a) for a in t[1:]]
        new = t if all(a is b for a, b in zip(args, t[1:])) else (t[0], *args)
        self._terms[id(t)] = (t, new)
        return new

    def nest(self, nest):
        """A decoded nest (or any LEIR node) with every placeholder tensor renamed."""
        return rename_tensors(nest, self.mapping)

    def match(self, m):
        """A ``RawMatch`` or an ``Application`` with its replacement and bindings renamed."""
        bindings = tuple((name, self.term(v)) for name, v in m.bindings)
        changed = {} if all(a[1] is b[1] for a, b in zip(bindings, m.bindings)) else \
            {"bindings": bindings}
        rhs = getattr(m, "rhs", None)
        if rhs is not None and self.term(rhs) is not rhs:
            changed["rhs"] = self.term(rhs)
        return replace(m, **changed) if changed else m



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
    for i in range(FRESH_TENSOR_COUNT):   # the names in use decide them only when placed
        yield FRESH_TENSOR(i, fresh_tensor_placeholder(i))
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

