"""The ``Matched`` rows read from egglog's frozen tables instead of printed.

``(print-function Matched N)`` has egglog extract every row's terms into a term DAG, walking
each row's matched term, replacement and bindings in full: a whole-program rewriter's rows are
program suffixes by the thousand, and printing them was most of what reading them cost
(benchmarks/results/single_step_throughput.md). ``EGraph.freeze()`` hands over every table as
typed values instead, in milliseconds; the rows' terms are then read here, each e-class once
however many rows share it.

The terms are the ones egglog's extractor gives, or no terms at all: egglog chooses the
cheapest extractable node of an e-class, and the reading here takes the *only* one -- an
e-class with two or more nodes of extractable constructors, or a column of a sort it does not
read, raises :class:`Ambiguous`, and the caller prints the table instead. An e-class with no
extractable node (a helper that never finished) or only cyclic ones gives ``None``, as egglog's
``Unextractable``. Rows come in the table's order, which is the order ``print-function`` lists
them in (tests/test_engine.py compares the two).
"""

from __future__ import annotations

import re

from .encoding import Literal, Term

_CONSTRUCTOR = re.compile(r"\(constructor\s+(\S+)\s+\(([^()]*)\)\s+(\S+)([^()\n]*)\)")
_FUNCTION = re.compile(r"\(function\s+(\S+)")


class Ambiguous(Exception):
    """The frozen tables do not decide a row's terms the way egglog's extractor would."""


def unextractable_constructors(text: str) -> frozenset[str]:
    """The tables of egglog text whose rows egglog never extracts: the constructors it declares
    ``:unextractable`` and its functions (a ``function``'s rows are not terms)."""
    return frozenset([m[1] for m in _CONSTRUCTOR.finditer(text) if ":unextractable" in m[4]]
                     + _FUNCTION.findall(text))


class FrozenReader:
    """One frozen database's term-sort constructors by the e-class each row makes, and the
    terms of e-classes read once each."""

    def __init__(self, egraph, unextractable: frozenset[str], string=None):
        """``string``: applied to every string read (its result read instead), or none."""
        self._egraph = egraph
        self.functions = egraph.freeze().functions
        self._primitive = _PRIMITIVE if string is None else {**_PRIMITIVE,
                                                             "String": _strings(string)}
        primitive = self._primitive
        # e-class value -> [(constructor, its frozen row, input sorts)]: a row's inputs are
        # read (a list made by egglog's bindings) only for the nodes a term is read through,
        # a small part of a large database's
        # (a node is (constructor, row, input sorts, each input's primitive reader or None);
        # a second node of an e-class makes its entry a list of them)
        self._nodes: dict = {}
        nodes = self._nodes
        for name, function in self.functions.items():
            if (name in unextractable or function.is_let_binding
                    or function.output_sort.startswith("@") or function.output_sort in _PRIMITIVE):
                continue
            sorts = function.input_sorts
            readers = tuple(primitive.get(s) for s in sorts)
            for row in function.rows:
                if not row.subsumed:
                    node = (name, row, sorts, readers)
                    found = nodes.setdefault(row.output, node)
                    if found is not node:
                        nodes[row.output] = [*found, node] if type(found) is list else [found, node]
        self._terms: dict = {}

    def rows(self, relation: str) -> list[tuple[str, list | None]]:
        """The rows of a relation of row terms (``Matched``, ``Found``) in table order: each
        row's constructor and its argument terms, or ``None`` for the terms where one of them
        has no finite term (egglog: the row is unextractable)."""
        out: list[tuple[str, list | None]] = []
        table = self.functions.get(relation)
        for entry in table.rows if table is not None else ():
            if entry.subsumed:
                continue
            (value,) = entry.inputs
            node = self.node(value)
            args = None if node is None else [self.term(v, s) for v, s in zip(node[1], node[2])]
            if args is None or any(a is None for a in args):
                out.append((node[0] if node else "", None))
            else:
                out.append((node[0], args))
        return out

    def node(self, value) -> tuple[str, list, list] | None:
        """The one extractable node of an e-class, ``None`` when it has none."""
        found = self._nodes.get(value)
        if found is None:
            return None
        if type(found) is list:
            raise Ambiguous(f"an e-class holds {len(found)} extractable nodes")
        return found[0], found[1].inputs, found[2]

    def term(self, value, sort: str) -> Term | Literal | None:
        """The term of an e-class (or the literal of a primitive value) of ``sort``."""
        read = self._primitive.get(sort)
        if read is not None:
            return read(self._egraph, value)
        hit = self._terms.get(value, _MISSING)
        if hit is not _MISSING:
            return None if hit is _VISITING else hit   # _VISITING: a cycle, no finite term
        return self._read(value)

    def _read(self, value) -> Term | None:
        """:meth:`term` of an e-class not read yet. Each argument is read (the memo looked up
        here, not in a call per argument: most arguments are e-classes read before), all of
        them even after one without a term, so that an ambiguous e-class anywhere in the term
        raises as :meth:`node` would."""
        terms = self._terms
        terms[value] = _VISITING
        node = self._nodes.get(value)  # self.node(value), inlined: once per e-class read
        if node is None:
            terms[value] = None
            return None
        if type(node) is list:
            raise Ambiguous(f"an e-class holds {len(node)} extractable nodes")
        name, row, _, readers = node
        args = [name]
        finite = True
        egraph = self._egraph
        for v, read in zip(row.inputs, readers):
            if read is not None:
                arg = read(egraph, v)
            else:
                arg = terms.get(v, _MISSING)
                if arg is _MISSING:
                    arg = self._read(v)
                elif arg is _VISITING:
                    arg = None
            if arg is None:
                finite = False
            args.append(arg)
        result = tuple(args) if finite else None
        terms[value] = result
        return result


_VISITING = object()
_MISSING = object()


def _unreadable(sort: str):
    def read(_egraph, _value):
        raise Ambiguous(f"a column of sort {sort}")
    return read


def _strings(string):
    """A reader of string values that gives ``string`` of each (computed once per value)."""
    memo: dict = {}

    def read(egraph, value):
        found = memo.get(value)
        if found is None:
            found = memo[value] = string(egraph.value_to_string(value))
        return found
    return read


_PRIMITIVE = {
    "i64": lambda egraph, value: egraph.value_to_i64(value),
    "String": lambda egraph, value: egraph.value_to_string(value),
    **{sort: _unreadable(sort) for sort in ("f64", "bool", "Unit", "BigInt", "BigRat", "Rational")},
}
