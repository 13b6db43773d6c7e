"""LEIR AST <-> egglog terms (schema.egg), losslessly: ``decode(encode(x)) == x``.

A term is a Python tuple ``(constructor, *args)`` whose args are terms, ``str`` or ``int``
literals -- the same shape egglog prints -- so terms are hashable, comparable, and can be
searched for occurrences and spliced without a round trip through egglog.

>>> from leir_egraph.leir import parse
>>> encode(parse("B^{4}_{tx=0}[C^{f32,g}_{tx}=exp(A^{f32,g}_{tx});];"))[0]
'PCons'
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Union

from ..leir.ast import (Bin, Call, Compare, Equation, IBin, IConst, Idx, IfThenElse, IName, Leir,
                        Logic, Loop, LoopNest, Neg, Num, Var)

Term = tuple  # (head, *args); args are Term | str | int
Literal = Union[str, int]

_BIN = {"+": "Add", "-": "Sub", "*": "Mul", "/": "Div", "**": "Pow"}
_IBIN = {"+": "IAdd", "-": "ISub", "*": "IMul", "//": "IFloorDiv", "%": "IMod"}
_CALL = {"exp": "Exp", "log": "Log", "sqrt": "Sqrt", "abs": "Abs", "erf": "Erf",
         "max": "Max", "min": "Min"}
_LOGIC = {"&": "And", "|": "Or"}
_UNBIN = {v: k for k, v in _BIN.items()}
_UNIBIN = {v: k for k, v in _IBIN.items()}
_UNCALL = {v: k for k, v in _CALL.items()}
_UNLOGIC = {v: k for k, v in _LOGIC.items()}

# Sort of every constructor's result, used to know where a decoded term belongs.
SORT_OF = {
    "IConst": "IExpr", "IName": "IExpr", "IRead": "IExpr", **{h: "IExpr" for h in _UNIBIN},
    "SNil": "Subs", "SCons": "Subs", "MkVar": "Var", "MkVarEmpty": "Var",
    "Num": "Expr", "Read": "Expr", "Idx": "Expr", "Neg": "Expr", "Ite": "Expr", "Cmp": "Expr",
    **{h: "Expr" for h in _UNBIN}, **{h: "Expr" for h in _UNCALL}, **{h: "Expr" for h in _UNLOGIC},
    "CNil": "CmpTail", "CCons": "CmpTail", "MkLoop": "Loop", "LNil": "Loops", "LCons": "Loops",
    "MkEq": "Eqn", "BNil": "Body", "BEq": "Body", "BNest": "Body", "MkNest": "Nest",
    "PNil": "Prog", "PCons": "Prog",
}


# ---------------------------------------------------------------- AST -> term

def encode(node) -> Term:
    """Any AST node (or a Leir program) as a term. A ``Var`` encodes as the variable itself;
    where a variable is read inside an expression it is wrapped in ``Read`` (value position) or
    ``IRead`` (index position)."""
    if isinstance(node, Leir):
        return cons_list([encode(n) for n in node.nests], "PCons", "PNil")
    if isinstance(node, LoopNest):
        loops = cons_list([encode(l) for l in node.loops], "LCons", "LNil")
        body: Term = ("BNil",)
        for item in reversed(node.body):
            body = ("BEq" if isinstance(item, Equation) else "BNest", encode(item), body)
        return ("MkNest", loops, body)
    if isinstance(node, Loop):
        return ("MkLoop", node.kind, node.extent, node.index)
    if isinstance(node, Equation):
        return ("MkEq", encode(node.target), encode_value(node.value))
    if isinstance(node, Var):
        if node.empty_subscript and not node.subscripts:
            return ("MkVarEmpty", node.name, node.dtype, node.scope)
        return ("MkVar", node.name, node.dtype, node.scope,
                cons_list([encode_index(s) for s in node.subscripts], "SCons", "SNil"))
    if isinstance(node, (IConst, IName, IBin)):
        return encode_index(node)
    return encode_value(node)


def cons_list(items, cons: str, nil: str) -> Term:
    term: Term = (nil,)
    for item in reversed(items):
        term = (cons, item, term)
    return term


def encode_index(node) -> Term:
    if isinstance(node, Var):
        return ("IRead", encode(node))
    if isinstance(node, IConst):
        return ("IConst", node.value)
    if isinstance(node, IName):
        return ("IName", node.name)
    if isinstance(node, IBin):
        return (_IBIN[node.op], encode_index(node.lhs), encode_index(node.rhs))
    raise TypeError(f"not an index expression: {node!r}")


def encode_value(node) -> Term:
    if isinstance(node, Var):
        return ("Read", encode(node))
    if isinstance(node, Num):
        return ("Num", node.text)
    if isinstance(node, Idx):
        return ("Idx", node.name)
    if isinstance(node, Neg):
        return ("Neg", encode_value(node.operand))
    if isinstance(node, Bin):
        return (_BIN[node.op], encode_value(node.lhs), encode_value(node.rhs))
    if isinstance(node, Call):
        return (_CALL[node.fn], *(encode_value(a) for a in node.args))
    if isinstance(node, IfThenElse):
        return ("Ite", encode_value(node.cond), encode_value(node.then), encode_value(node.otherwise))
    if isinstance(node, Compare):
        tail: Term = ("CNil",)
        for op, operand in reversed(list(zip(node.ops, node.operands[1:]))):
            tail = ("CCons", op, encode_value(operand), tail)
        return ("Cmp", encode_value(node.operands[0]), tail)
    if isinstance(node, Logic):
        return (_LOGIC[node.op], encode_value(node.lhs), encode_value(node.rhs))
    raise TypeError(f"not a value expression: {node!r}")


# ---------------------------------------------------------------- term -> AST

def uncons(term: Term, cons: str) -> list:
    """The items of a cons list term (``PCons``, ``LCons``, ``SCons`` ...), in order."""
    items = []
    while term[0] == cons:
        items.append(term[1])
        term = term[2]
    return items


class Decoder:
    """``decode`` with a memo keyed by term identity: decoding many programs that share most
    subterms (the transitions of one program) decodes each shared subterm once."""

    def __init__(self):
        self._memo: dict[int, tuple] = {}

    def __call__(self, term: Term):
        hit = self._memo.get(id(term))
        if hit is not None and hit[0] is term:
            return hit[1]
        if term[0] == "MkNest":
            node = LoopNest(self._items(term[1]), self._items(term[2]))
        else:
            node = decode(term, self)
        self._memo[id(term)] = (term, node)
        return node

    def _items(self, cell: Term) -> tuple:
        """The decoded items of a nest's loop list or body from ``cell`` on, each suffix's
        kept: a placed match's new nest shares its loops, and its body after the changed item,
        with the nest it was made from."""
        return kept_suffixes(cell, self._memo, (), lambda c, items: (self(c[1]), *items))


def kept_suffixes(cell: Term, memo: dict, empty, add):
    """A value of a cons list (``LCons``/``BEq``/``BNest``... down to its nil) built from its
    last item back, ``add(cell, value of the rest)``, with every suffix's value kept in
    ``memo`` by the cell's identity (as ``(cell, value)``): a list that shares its tail with
    one seen before costs only its new cells. Iterative, so a list's length is not limited by
    Python's recursion limit."""
    cells = []
    while True:
        hit = memo.get(id(cell))
        if hit is not None and hit[0] is cell:
            value = hit[1]
            break
        if len(cell) == 1:  # the nil
            value = empty
            break
        cells.append(cell)
        cell = cell[2]
    for cell in reversed(cells):
        value = add(cell, value)
        memo[id(cell)] = (cell, value)
    return value


def decode(term: Term, sub=None):
    """The AST node a term denotes (``Read``/``IRead`` wrappers dissolve into their ``Var``).
    ``sub`` decodes children (default: this function)."""
    make = _DECODERS.get(term[0])
    if make is None:
        raise ValueError(f"not a LEIR term: {term[0]}")
    return make(term, sub or decode)


def _decode_program(term: Term, child) -> Leir:
    return Leir(tuple(child(n) for n in uncons(term, "PCons")))


def _decode_nest(term: Term, child) -> LoopNest:
    loops = tuple(child(loop) for loop in uncons(term[1], "LCons"))
    body, rest = [], term[2]
    while rest[0] != "BNil":
        body.append(child(rest[1]))
        rest = rest[2]
    return LoopNest(loops, tuple(body))


def _decode_compare(term: Term, child) -> Compare:
    operands, ops, tail = [child(term[1])], [], term[2]
    while tail[0] == "CCons":
        ops.append(tail[1])
        operands.append(child(tail[2]))
        tail = tail[3]
    return Compare(tuple(operands), tuple(ops))


# head -> how its node is made from the term and a decoder of children (one lookup per node
# instead of a chain of comparisons: decoding placed matches' nests is a tenth of enumeration)
_DECODERS = {
    "PCons": _decode_program, "PNil": _decode_program,
    "MkNest": _decode_nest,
    "MkLoop": lambda t, child: Loop(t[1], t[2], t[3]),
    "MkEq": lambda t, child: Equation(child(t[1]), child(t[2])),
    "MkVar": lambda t, child: Var(t[1], t[2], t[3],
                                  tuple(child(s) for s in uncons(t[4], "SCons"))),
    "MkVarEmpty": lambda t, child: Var(t[1], t[2], t[3], (), empty_subscript=True),
    "Read": lambda t, child: child(t[1]), "IRead": lambda t, child: child(t[1]),
    "IConst": lambda t, child: IConst(t[1]),
    "IName": lambda t, child: IName(t[1]),
    **{h: (lambda op: lambda t, child: IBin(op, child(t[1]), child(t[2])))(op)
       for h, op in _UNIBIN.items()},
    "Num": lambda t, child: Num(t[1]),
    "Idx": lambda t, child: Idx(t[1]),
    "Neg": lambda t, child: Neg(child(t[1])),
    **{h: (lambda op: lambda t, child: Bin(op, child(t[1]), child(t[2])))(op)
       for h, op in _UNBIN.items()},
    **{h: (lambda fn: lambda t, child: Call(fn, tuple(child(a) for a in t[1:])))(fn)
       for h, fn in _UNCALL.items()},
    "Ite": lambda t, child: IfThenElse(child(t[1]), child(t[2]), child(t[3])),
    "Cmp": _decode_compare,
    **{h: (lambda op: lambda t, child: Logic(op, child(t[1]), child(t[2])))(op)
       for h, op in _UNLOGIC.items()},
}


# ---------------------------------------------------------------- term <-> egglog text

def literal_text(value: Literal) -> str:
    if isinstance(value, int):
        return str(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_egglog(term) -> str:
    """egglog text of a term or literal (inside :func:`shared_terms`, a repeated large subterm
    is written as the name of a ``let`` that binds it)."""
    if not isinstance(term, tuple):
        return literal_text(term)
    if _sharing is not None:
        return _sharing.text(term)
    return _compose(term)


def _compose(term: Term) -> str:
    """``(Head arg...)``, each argument written by :func:`to_egglog`."""
    if len(term) == 1:
        return f"({term[0]})"
    return "(" + " ".join([term[0], *(to_egglog(a) for a in term[1:])]) + ")"


class SharedTerms:
    """Hash-consing of the egglog text of facts, for one program loaded into the engine.

    egglog's time to parse and run a command grows with its text (about 3.5 us a character on
    this machine), and the facts about one program repeat the same subterms thousands of times:
    a layout fact restates the equations it relayouts, a copy-form fact the access it copies.
    Here a subterm whose text is at least ``MIN_CHARS`` long is written out the first time it
    occurs; from its second occurrence on it is stored once under a name in its sort's table
    of named terms, ``(set (<Sort>Named__ "$fK_") text)`` (:func:`named_declarations`), and
    written as that lookup. Not a ``let``: each egglog ``let`` is a table of its own, and every
    later command, the helpers' iterations and each ``push`` and ``pop`` cost more with their
    number. ``names`` seeds the table with terms that already have a name (the program's nests,
    ``$n0_``..., bound by ``let``). :meth:`take` returns the commands that store the names made
    since the last call, which must be sent before any text that uses them.

    >>> subs = ("SCons", ("IName", "tx"), ("SCons", ("IName", "a"), ("SNil",)))
    >>> with shared_terms() as shared:
    ...     first, second = to_egglog(subs), to_egglog(subs)
    >>> first
    '(SCons (IName "tx") (SCons (IName "a") (SNil)))'
    >>> second
    '(SubsNamed__ "$f1_")'
    >>> shared.take()  # the inner list is long enough to be shared too
    ['(set (SubsNamed__ "$f0_") (SCons (IName "a") (SNil)))', '(set (SubsNamed__ "$f1_") (SCons (IName "tx") (SubsNamed__ "$f0_")))']
    """

    MIN_CHARS = 16

    def __init__(self, names: dict | None = None, prefix: str = "$f"):
        self._text: dict[Term, str] = dict(names or {})
        # by object: a fact's Nest column is the loaded program's own term object, looked up
        # without hashing the whole nest each time
        self._by_id: dict[int, tuple[Term, str]] = {id(t): (t, n) for t, n in self._text.items()}
        self._prefix = prefix
        self._seen: set[Term] = set()
        self._lets: list[str] = []
        self.count = 0

    def text(self, term: Term) -> str:
        known = self._by_id.get(id(term))
        if known is not None and known[0] is term:
            return known[1]
        hit = self._text.get(term)
        if hit is not None:
            return hit
        text = _compose(term)
        if len(text) < self.MIN_CHARS:
            self._text[term] = text
        elif term in self._seen:
            name = f"{self._prefix}{self.count}_"
            self.count += 1
            sort = SORT_OF.get(term[0])
            if sort is None:  # not a schema term: a let of its own
                self._lets.append(f"(let {name} {text})")
            else:
                name = f'({sort}Named__ "{name}")'
                self._lets.append(f"(set {name} {text})")
            self._text[term] = text = name
        else:
            self._seen.add(term)
        return text

    def take(self) -> list[str]:
        lets, self._lets = self._lets, []
        return lets


def named_declarations() -> str:
    """The tables of named terms :class:`SharedTerms` stores shared subterms in, one per sort
    (an engine's base program declares them)."""
    return "\n".join(f"(function {sort}Named__ (String) {sort} :no-merge)"
                     for sort in sorted(set(SORT_OF.values())))


_sharing: SharedTerms | None = None


@contextmanager
def shared_terms(names: dict | None = None, prefix: str = "$f", table=None):
    """Within the block, :func:`to_egglog` shares repeated subterms through a
    :class:`SharedTerms` table (yielded), its ``let`` names starting with ``prefix``; or
    through ``table``, any object with SharedTerms' ``text(term)`` (explore/shared.py keeps
    one for a whole exploration). Not thread-safe: one program is loaded at a time."""
    global _sharing
    outer, _sharing = _sharing, SharedTerms(names, prefix) if table is None else table
    try:
        yield _sharing
    finally:
        _sharing = outer


def from_termdag(termdag, term_id: int, memo: dict) -> Term | Literal | None:
    """A term out of an egglog TermDag; ``None`` if any part is unextractable (a helper that
    did not finish evaluating)."""
    if term_id in memo:
        return memo[term_id]
    node = termdag.get(term_id)
    kind = type(node).__name__
    if kind == "TermLit":
        lit = node.value
        value = lit.value if hasattr(lit, "value") else lit
        result = int(value) if type(lit).__name__ == "Int" else value
    elif kind == "TermApp":
        args = [from_termdag(termdag, a, memo) for a in node.args]
        result = None if any(a is None for a in args) else (node.name, *args)
    else:  # TermVar("Unextractable")
        result = None
    memo[term_id] = result
    return result


# ---------------------------------------------------------------- occurrences

class OccurrenceIndex:
    """Where every subterm of one term occurs, built in one walk: each distinct subterm gets a
    number from its head and its children's numbers (hash-consing), so looking a pattern up
    costs its own size, not the term's -- enumeration places thousands of matches in one
    program, and walking the whole program term for each was a third of its time."""

    def __init__(self, term: Term):
        self._numbers: dict[tuple, int] = {}
        self._paths: dict[int, list[tuple[int, ...]]] = {}
        self._by_object: dict[int, tuple[Term, int | None]] = {}
        self._add(term, ())

    def _add(self, t: Term, path: tuple[int, ...]) -> int:
        key = (t[0], *[self._add(arg, path + (i,)) if isinstance(arg, tuple) else (arg,)
                       for i, arg in enumerate(t[1:], start=1)])
        number = self._numbers.setdefault(key, len(self._numbers))
        self._paths.setdefault(number, []).append(path)
        return number

    def _number(self, t: Term) -> int | None:
        # Patterns decoded from one egglog table share their subterm objects, and a match's
        # left-hand side is often a whole program suffix: remember each object's number.
        hit = self._by_object.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        key = [t[0]]
        number = None
        for arg in t[1:]:
            if isinstance(arg, tuple):
                child = self._number(arg)
                if child is None:
                    break
                key.append(child)
            else:
                key.append((arg,))
        else:
            number = self._numbers.get(tuple(key))
        self._by_object[id(t)] = (t, number)
        return number

    def paths(self, pattern: Term) -> list[tuple[int, ...]]:
        """Paths (argument positions from the root) of every subterm equal to ``pattern``, in
        pre-order (equal subterms never nest, so post-order recording gives the same order)."""
        number = self._number(pattern)
        return [] if number is None else list(self._paths[number])


def replace_at(term: Term, path: tuple[int, ...], new: Term) -> Term:
    """``term`` with the subterm at ``path`` replaced by ``new``."""
    if not path:
        return new
    i = path[0]
    return term[:i] + (replace_at(term[i], path[1:], new),) + term[i + 1:]


def subterm(term: Term, path: tuple[int, ...]) -> Term:
    for i in path:
        term = term[i]
    return term
