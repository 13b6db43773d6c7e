"""Python numbers and index expressions as LEIR value expressions.

``literal(-0.5)`` -> ``-0.5`` (unary minus on ``0.5``); ``index_as_value(c*3+f)`` -> the value
``c*3+f``. Used by the frontend's expression language and by fact providers that build values.
"""

from __future__ import annotations

import math

from .ast import Bin, IBin, IConst, Idx, IName, Neg, Num


class Unrepresentable(ValueError):
    """A Python value with no LEIR literal (NaN, complex)."""


def literal(value) -> object:
    """The LEIR literal for a Python number: ``2`` -> ``2``, ``-0.5`` -> ``-0.5`` (unary minus
    on ``0.5``), ``-inf`` -> ``-inf``."""
    if isinstance(value, bool):
        return Num("1" if value else "0")
    if isinstance(value, int):
        return Num(str(value)) if value >= 0 else Neg(Num(str(-value)))
    if isinstance(value, float):
        if math.isnan(value):
            raise Unrepresentable("NaN has no LEIR literal")
        if math.isinf(value):
            return Num("inf") if value > 0 else Neg(Num("inf"))
        if value < 0 or (value == 0 and math.copysign(1, value) < 0):
            return Neg(Num(repr(-value)))
        return Num(repr(value))
    raise Unrepresentable(f"{type(value).__name__} value {value!r} has no LEIR literal")


def index_as_value(node):
    """An index expression used as a value: ``c*3+f`` in a subscript becomes the value
    ``c*3+f`` (``Idx`` leaves, ``Num`` constants)."""
    if isinstance(node, IName):
        return Idx(node.name)
    if isinstance(node, IConst):
        return literal(node.value)
    if isinstance(node, IBin):
        op = {"//": None, "%": None}.get(node.op, node.op)
        if op is None:
            raise Unrepresentable("floor division/modulo of indices cannot be used as a value")
        return Bin(op, index_as_value(node.lhs), index_as_value(node.rhs))
    raise Unrepresentable(f"{node!r} cannot be used as a value")
