"""Typed facts: a relation declared with its column sorts, and the facts made by calling it.

A guard, a parameter set or a fact provider declares each relation it states once, with the
sort of every column; a fact is made by calling the relation with its columns::

    SCAN_AXIS = Relation("ScanAxis", ("Nest", "Var", "String", "i64"), "...")
    yield SCAN_AXIS(nest, target, "r", 64)

The call checks the arity and every column's sort where the fact is made and encodes each
column once, by its sort (:func:`column`): a ``String`` column takes a ``str``, an ``i64`` one an
``int``, a term sort (``Nest``, ``Expr``, ``Loops`` ...) either an already encoded term of that
sort or the LEIR node (or, for a list sort, the sequence of nodes) that encodes to it. A bad
column is a :class:`FactError` naming the file and line of the call -- the provider's line --
never a fact dropped or sent wrong. The engine reads a fact's relation and columns as data
(:attr:`Fact.relation`, :attr:`Fact.key`) and writes its egglog text only when it sends it.

A relation declared ``deferred`` may take :func:`later` in its last column: a function computed
only when the whole fact is sent (``Engine.applications``), checked against the column's sort
then and located at the line that made the fact.

    >>> ratio = Relation("Ratio", ("String", "i64"), "{0} has ratio {1}")
    >>> ratio("D", 2).text()
    '(Ratio "D" 2)'
    >>> ratio("D", "2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    leir_egraph.egraph.facts.FactError: ...: Ratio column 2 is of sort i64, got str '2'
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from ..leir.ast import Leir
from .encoding import SORT_OF, Term, cons_list, encode, encode_index, encode_value, to_egglog


class FactError(ValueError):
    """A fact that is not one of a declared relation, or whose columns do not fit its sorts,
    located at the provider's line that made it (``file:line: message``)."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path, self.line, self.message = str(path), line, message
        super().__init__(f"{path}:{line if line is not None else 1}: {message}")


class Later:
    """The last column of a deferred relation's fact, computed when the fact is sent."""
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], object]):
        self.make = make


def later(make: Callable[[], object]) -> Later:
    """A deferred last column: ``make()`` returns the column's value (checked by its sort)."""
    return Later(make)


# A term sort's column encoded from LEIR nodes: the encoder of one node, or of the items of a
# list sort together with its cons and nil constructors.
_NODE_ENCODERS = {"Nest": encode, "Var": encode, "Eqn": encode, "Loop": encode,
                  "Expr": encode_value, "IExpr": encode_index}
_LIST_ENCODERS = {"Loops": (encode, "Loop", "LCons", "LNil"),
                  "Subs": (encode_index, "IExpr", "SCons", "SNil"),
                  "Body": (encode, "Nest", "BNest", "BNil"),
                  "Prog": (encode, "Nest", "PCons", "PNil")}


# Terms already encoded from AST nodes, by (node identity, encoder); each entry holds its node,
# so an identity is never another node's while its entry lives. Providers state many facts
# about one nest, access or expression object (a program's nests by the dozen each), and
# encoding it again for each was a fifth of making a large program's facts. Cleared when full.
_ENCODED: dict[tuple[int, object], tuple[object, Term | None]] = {}
_ENCODED_MAX = 1 << 16


def _encoded(encoder, value) -> Term | None:
    """``_try(encoder, value)``, each AST node object encoded once (the nodes are immutable)."""
    key = (id(value), encoder)
    hit = _ENCODED.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    term = _try(encoder, value)
    if len(_ENCODED) >= _ENCODED_MAX:
        _ENCODED.clear()
    _ENCODED[key] = (value, term)
    return term


def column(sort: str, value):
    """``value`` encoded for a column of ``sort``: a literal for ``String`` and ``i64``, a term
    for every other sort. Raises ``TypeError`` (message without location) when it does not fit."""
    if sort == "String":
        if type(value) is str:
            return value
    elif sort == "i64":
        if type(value) is int:
            return value
    elif type(value) is tuple and value and type(value[0]) is str:
        if SORT_OF.get(value[0]) == sort:
            return value
        raise TypeError(f"is of sort {sort}, got a term of sort {SORT_OF.get(value[0], '?')} "
                        f"({value[0]})")
    elif sort in _NODE_ENCODERS:
        term = _encoded(_NODE_ENCODERS[sort], value)
        if term is not None and SORT_OF.get(term[0]) == sort:
            return term
    elif sort in _LIST_ENCODERS:
        if isinstance(value, Leir) and sort == "Prog":
            value = value.nests
        if isinstance(value, (tuple, list)):
            each, item_sort, cons, nil = _LIST_ENCODERS[sort]
            items = [_encoded(each, v) for v in value]
            if all(i is not None and SORT_OF.get(i[0]) == item_sort for i in items):
                return cons_list(items, cons, nil)
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    raise TypeError(f"is of sort {sort}, got {type(value).__name__} {shown}")


def _try(encoder, value):
    try:
        return encoder(value)
    except (TypeError, AttributeError, KeyError):
        return None


@dataclass(frozen=True)
class Relation:
    """An egglog relation: name, column sorts, and its chain-of-thought sentence (``{0}``,
    ``{1}``... are its columns rendered as LEIR text). Calling it makes a :class:`Fact`.

    ``deferred``: the last column is built only for the applications a seeded draw makes
    (``Engine.applications``): while the rules' queries run, the engine states the fact without
    it (``<name>__key``, the other columns, which must identify the fact), and inserts the whole
    fact only before it builds a chosen application whose reported bindings name its key. For a
    large column most of whose facts a draw never uses (a storage layout's re-addressing map).
    The rules that read it must bind the last column to a variable used by no other condition;
    where one does not, the engine states the whole facts up front, as for any relation."""
    name: str
    sorts: tuple[str, ...]
    holds: str
    deferred: bool = False

    def declaration(self) -> str:
        return f"(relation {self.name} ({' '.join(self.sorts)}))"

    def __call__(self, *columns) -> "Fact":
        frame = sys._getframe(1)
        path, line = frame.f_code.co_filename, frame.f_lineno
        if len(columns) != len(self.sorts):
            raise FactError(path, line, f"{self.name} takes {len(self.sorts)} columns "
                                        f"({' '.join(self.sorts)}), got {len(columns)}")
        values = []
        for i, (sort, value) in enumerate(zip(self.sorts, columns)):
            if type(value) is Later:
                if not self.deferred or i != len(columns) - 1:
                    raise FactError(path, line, f"{self.name} column {i + 1}: only the last "
                                                "column of a deferred relation may be later()")
                values.append(value)
                continue
            try:
                values.append(column(sort, value))
            except TypeError as err:
                raise FactError(path, line, f"{self.name} column {i + 1} {err}") from None
        return Fact(self, tuple(values), path, line)


class Fact:
    """One fact of a declared relation: its columns encoded (terms, ``str``, ``int``; a deferred
    fact's last column may be a :class:`Later`), and where it was made. Equal when the relation
    and every column are (a ``Later`` column equals only itself)."""
    __slots__ = ("relation", "values", "path", "line", "_hash")

    def __init__(self, relation: Relation, values: tuple, path: str, line: int):
        self.relation, self.values, self.path, self.line = relation, values, path, line
        self._hash = None

    @property
    def name(self) -> str:
        return self.relation.name

    @property
    def key(self) -> tuple:
        """Every column but the last: what identifies a deferred relation's fact."""
        return self.values[:-1]

    def last(self):
        """The last column, computed now if it was deferred (and checked against its sort)."""
        value = self.values[-1]
        if type(value) is not Later:
            return value
        try:
            return column(self.relation.sorts[-1], value.make())
        except TypeError as err:
            raise FactError(self.path, self.line, f"{self.relation.name} column "
                                                  f"{len(self.values)} {err}") from None

    def columns(self) -> tuple:
        """Every column's value, a deferred last one computed."""
        if self.values and type(self.values[-1]) is Later:
            return self.values[:-1] + (self.last(),)
        return self.values

    def text(self) -> str:
        """The fact's egglog text (inside ``shared_terms``, repeated subterms by their names)."""
        return "(" + " ".join([self.relation.name, *(to_egglog(v) for v in self.columns())]) + ")"

    __str__ = text

    def __repr__(self) -> str:
        return f"Fact({self.relation.name}, {self.values!r})"

    def __eq__(self, other) -> bool:
        return (type(other) is Fact and self.relation.name == other.relation.name
                and self.values == other.values)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.relation.name, self.values))
        return self._hash


class Chain:
    """Fact producers called in order as one (a guard's with its extensions'). ``parts`` are
    read one by one by ``Vocabulary.producers``, so each is checked, located and skipped on
    its own."""

    def __init__(self, producers):
        self.parts = tuple(q for p in producers for q in getattr(p, "parts", (p,)))

    def __call__(self, loaded):
        return [f for p in self.parts for f in p(loaded)]


def making(produce, *relations: Relation):
    """``produce`` marked as making the facts of ``relations`` only (some of its guard's):
    ``Vocabulary.facts`` calls it only when one of them is wanted, and a fact of another
    relation from it is a :class:`FactError`. A producer not marked makes any of its guard's."""
    produce.makes = frozenset(r.name for r in relations)
    return produce


def located(produce, produced) -> tuple[str, int | None]:
    """Where ``produce`` (a fact producer) returned something that is no fact: the line of its
    ``yield`` when ``produced`` is a generator still at it, else the function's first line."""
    frame = getattr(produced, "gi_frame", None)
    code = getattr(produce, "__code__", None)
    if frame is not None:
        return frame.f_code.co_filename, frame.f_lineno
    if code is not None:
        return code.co_filename, code.co_firstlineno
    return "<provider>", None

