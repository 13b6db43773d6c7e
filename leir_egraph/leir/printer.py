"""Canonical LEIR text: no whitespace, the fewest parentheses that keep the tree.

``parse(to_text(x)) == x`` for every AST, and the reference translator's strings print back
byte-identical (they use the same minimal parenthesisation).

>>> from .parser import parse
>>> to_text(parse("B^{4}_{tx=0} [ C^{f32,g}_{tx} = (A^{f32,g}_{tx}) * 2 ; ] ;"))
'B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];'
"""

from __future__ import annotations

from .ast import (Bin, Call, Compare, Equation, IBin, IConst, Idx, IfThenElse, IName, Leir, Logic,
                  Loop, LoopNest, Neg, Num, Var)

# Binding strength; higher binds tighter. Mirrors the grammar's precedence ladder.
_OR, _AND, _CMP, _ADD, _MUL, _NEG, _POW, _ATOM = range(1, 9)
_BIN_PREC = {"+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL, "//": _MUL, "%": _MUL, "**": _POW}


def to_text(node, memo: dict | None = None) -> str:
    """Print any AST node (program, nest, loop, equation, expression, subscript) canonically.

    Iterative (an explicit stack of pieces still to print), so the depth of the tree is not
    limited by Python's recursion limit, and linear in the size of the output.

    ``memo`` (optional, kept by the caller across calls): the text of every equation and
    access printed, by object identity, so that printing many nests that share those objects
    (the nests of one program's transitions, decoded with one ``Decoder``) prints each once. A
    node's text does not depend on where it stands, so the output is the same."""
    out: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        kind = type(item)
        if kind is _Printed:
            memo[id(item.node)] = (item.node, "".join(out[item.start:]))
            continue
        if memo is not None and kind in _MEMOISED:
            hit = memo.get(id(item))
            if hit is not None and hit[0] is item:
                out.append(hit[1])
                continue
            stack.append(_Printed(item, len(out)))
        parts = _PARTS.get(kind)
        if parts is None:
            raise TypeError(f"not a LEIR node: {item!r}")
        stack.extend(reversed(parts(item)))
    return "".join(out)


class _Printed:
    """A stack marker: ``node``'s text is what ``to_text`` wrote from ``start`` on."""
    __slots__ = ("node", "start")

    def __init__(self, node, start: int):
        self.node, self.start = node, start


def _prec(node) -> int:
    if isinstance(node, (Bin, IBin)):
        return _BIN_PREC[node.op]
    if isinstance(node, Neg):
        return _NEG
    if isinstance(node, Compare):
        return _CMP
    if isinstance(node, Logic):
        return _AND if node.op == "&" else _OR
    return _ATOM


def _wrap(node, needed: int, strict: bool) -> list:
    """``node``, parenthesised when it binds looser than ``needed`` (or equally, if
    ``strict``)."""
    p = _prec(node)
    return ["(", node, ")"] if p < needed or (strict and p == needed) else [node]


def _separated(items, separator: str) -> list:
    out: list = []
    for i, item in enumerate(items):
        if i:
            out.append(separator)
        out.append(item)
    return out


# Each node's pieces in print order: strings, and child nodes printed in their place.

def _nest(node: LoopNest) -> list:
    body = [part for i in node.body for part in ((i, ";") if isinstance(i, Equation) else (i,))]
    return [*node.loops, "[", *body, "];"]


def _var(node: Var) -> list:
    head = f"{node.name}^{{{node.dtype},{node.scope}}}"
    if not node.subscripts:
        return [head + ("_{}" if node.empty_subscript else "")]
    return [head, "_{", *_separated(node.subscripts, ","), "}"]


def _infix(node) -> list:
    p = _BIN_PREC[node.op]
    return [*_wrap(node.lhs, p, False), node.op, *_wrap(node.rhs, p, True)]


def _neg(node: Neg) -> list:
    # "-x**2" parses as -(x**2), so a power operand needs no parentheses; "--x" would too,
    # but reads badly, so nested negation is parenthesised.
    if isinstance(node.operand, Neg):
        return ["-(", node.operand, ")"]
    return ["-", *_wrap(node.operand, _NEG, False)]


def _bin(node: Bin) -> list:
    if node.op == "**":  # right-associative: a**b**c == a**(b**c)
        return [*_wrap(node.lhs, _POW, True), "**", *_wrap(node.rhs, _NEG, False)]
    return _infix(node)


def _compare(node: Compare) -> list:
    parts = _wrap(node.operands[0], _CMP, True)
    for op, operand in zip(node.ops, node.operands[1:]):
        parts += [op, *_wrap(operand, _CMP, True)]
    return parts


def _logic(node: Logic) -> list:
    p = _AND if node.op == "&" else _OR
    return [*_wrap(node.lhs, p, False), node.op, *_wrap(node.rhs, p, True)]


_PARTS = {
    Leir: lambda n: list(n.nests),
    LoopNest: _nest,
    Loop: lambda n: [f"{n.kind}^{{{n.extent}}}_{{{n.index}=0}}"],
    Equation: lambda n: [n.target, "=", n.value],
    Var: _var,
    IConst: lambda n: [str(n.value)],
    IName: lambda n: [n.name],
    IBin: _infix,
    Num: lambda n: [n.text],
    Idx: lambda n: [n.name],
    Neg: _neg,
    Bin: _bin,
    Call: lambda n: [n.fn, "(", *_separated(n.args, ","), ")"],
    IfThenElse: lambda n: ["if_then_else(", n.cond, ",", n.then, ",", n.otherwise, ")"],
    Compare: _compare,
    Logic: _logic,
}
_MEMOISED = (Equation, Var)
