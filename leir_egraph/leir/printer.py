"""Canonical LEIR text: no whitespace, the fewest parentheses that keep the tree.

``parse(to_text(x)) == x`` for every AST, and the reference translator's strings print back
byte-identical (they use the same minimal parenthesisation).

>>> from .parser import parse
>>> to_text(parse("B^{4}_{tx=0} [ C^{f32,g}_{tx} = (A^{f32,g}_{tx}) * 2 ; ] ;"))
'B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];'
"""

from __future__ import annotations

from functools import singledispatch

from .ast import (Bin, Call, Compare, Equation, IBin, IConst, Idx, IfThenElse, IName, Leir, Logic,
                  Loop, LoopNest, Neg, Num, Var)

# Binding strength; higher binds tighter. Mirrors the grammar's precedence ladder.
_OR, _AND, _CMP, _ADD, _MUL, _NEG, _POW, _ATOM = range(1, 9)
_BIN_PREC = {"+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL, "//": _MUL, "%": _MUL, "**": _POW}


def to_text(node) -> str:
    """Print any AST node (program, nest, loop, equation, expression, subscript) canonically."""
    return _text(node)


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


def _wrap(node, needed: int, strict: bool) -> str:
    """Parenthesise ``node`` when it binds looser than ``needed`` (or equally, if ``strict``)."""
    p = _prec(node)
    text = _text(node)
    return f"({text})" if p < needed or (strict and p == needed) else text


@singledispatch
def _text(node) -> str:
    raise TypeError(f"not a LEIR node: {node!r}")


@_text.register
def _(node: Leir) -> str:
    return "".join(_text(n) for n in node.nests)


@_text.register
def _(node: LoopNest) -> str:
    loops = "".join(_text(loop) for loop in node.loops)
    body = "".join(_text(i) + (";" if isinstance(i, Equation) else "") for i in node.body)
    return f"{loops}[{body}];"


@_text.register
def _(node: Loop) -> str:
    return f"{node.kind}^{{{node.extent}}}_{{{node.index}=0}}"


@_text.register
def _(node: Equation) -> str:
    return f"{_text(node.target)}={_text(node.value)}"


@_text.register
def _(node: Var) -> str:
    head = f"{node.name}^{{{node.dtype},{node.scope}}}"
    if not node.subscripts:
        return head + ("_{}" if node.empty_subscript else "")
    return head + "_{" + ",".join(_text(s) for s in node.subscripts) + "}"


@_text.register
def _(node: IConst) -> str:
    return str(node.value)


@_text.register
def _(node: IName) -> str:
    return node.name


@_text.register
def _(node: IBin) -> str:
    p = _BIN_PREC[node.op]
    return f"{_wrap(node.lhs, p, False)}{node.op}{_wrap(node.rhs, p, True)}"


@_text.register
def _(node: Num) -> str:
    return node.text


@_text.register
def _(node: Idx) -> str:
    return node.name


@_text.register
def _(node: Neg) -> str:
    # "-x**2" parses as -(x**2), so a power operand needs no parentheses; "--x" would too,
    # but reads badly, so nested negation is parenthesised.
    operand = node.operand
    if isinstance(operand, Neg):
        return f"-({_text(operand)})"
    return "-" + _wrap(operand, _NEG, False)


@_text.register
def _(node: Bin) -> str:
    if node.op == "**":  # right-associative: a**b**c == a**(b**c)
        return f"{_wrap(node.lhs, _POW, True)}**{_wrap(node.rhs, _NEG, False)}"
    p = _BIN_PREC[node.op]
    return f"{_wrap(node.lhs, p, False)}{node.op}{_wrap(node.rhs, p, True)}"


@_text.register
def _(node: Call) -> str:
    return f"{node.fn}({','.join(_text(a) for a in node.args)})"


@_text.register
def _(node: IfThenElse) -> str:
    return f"if_then_else({_text(node.cond)},{_text(node.then)},{_text(node.otherwise)})"


@_text.register
def _(node: Compare) -> str:
    parts = [_wrap(node.operands[0], _CMP, True)]
    for op, operand in zip(node.ops, node.operands[1:]):
        parts.append(op + _wrap(operand, _CMP, True))
    return "".join(parts)


@_text.register
def _(node: Logic) -> str:
    p = _AND if node.op == "&" else _OR
    return f"{_wrap(node.lhs, p, False)}{node.op}{_wrap(node.rhs, p, True)}"
