"""A small expression language over the LEIR AST, so op emitters read like the formulas they
implement: ``x * 0.5 * (1 + erf(x / sqrt(2)))`` builds the GELU right-hand side.

``X`` wraps a value expression (``Expr``), ``I`` an index expression (``IExpr``). Python numbers
are lifted to literals on the fly; index arithmetic folds constants (``i + 0`` is ``i``) so that
emitted subscripts stay as short as the reference translator's (``c*2+f*3``, ``tx``, ``0``).
"""

from __future__ import annotations

from typing import Union

from ..leir.ast import INDEX_OPS, Bin, Call, Compare, IBin, IConst, IfThenElse, Logic, Neg, Var
from ..leir.values import index_as_value, literal


def lift(value):
    """An AST value expression for ``value`` (an ``X``, an ``I`` used as a value, a number)."""
    if isinstance(value, X):
        return value.node
    if isinstance(value, I):
        return index_as_value(value.node)
    return literal(value)


class _Operators:
    """The operators value and index expressions share: ``+ - *`` through the class's own
    ``_bin``, and the ordering comparisons, which build a condition (an ``X``) either way."""

    __slots__ = ()

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)

    def _cmp(self, op, other):
        return X(Compare((lift(self), lift(other)), (op,)))

    def __lt__(self, o): return self._cmp("<", o)
    def __le__(self, o): return self._cmp("<=", o)
    def __gt__(self, o): return self._cmp(">", o)
    def __ge__(self, o): return self._cmp(">=", o)


class X(_Operators):
    """A LEIR value expression with Python operators: ``+ - * / **``, unary ``-``, comparisons
    (returning conditions) and ``& |`` on conditions."""

    __slots__ = ("node",)
    __hash__ = None  # == builds a condition, so X values are not hashable

    def __init__(self, node):
        self.node = node

    def _bin(self, op, other, swap=False):
        a, b = lift(self), lift(other)
        return X(Bin(op, b, a) if swap else Bin(op, a, b))

    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __pow__(self, o): return self._bin("**", o)
    def __rpow__(self, o): return self._bin("**", o, True)
    def __neg__(self): return X(Neg(self.node))

    def __eq__(self, o): return self._cmp("==", o)  # type: ignore[override]
    def __ne__(self, o): return self._cmp("!=", o)  # type: ignore[override]
    def __and__(self, o): return X(Logic("&", lift(self), lift(o)))
    def __or__(self, o): return X(Logic("|", lift(self), lift(o)))

    def __bool__(self):
        raise TypeError("a LEIR expression has no truth value; use ite()/between() for "
                        "conditions (Python 'and', 'or' and chained comparisons do not work)")

    def __repr__(self):
        from ..leir.printer import to_text
        return f"X({to_text(self.node)})"


def val(value) -> X:
    """``value`` as an ``X`` (numbers become literals, indices become index values)."""
    return value if isinstance(value, X) else X(lift(value))


def _call(fn, *args) -> X:
    return X(Call(fn, tuple(lift(a) for a in args)))


def exp(x): return _call("exp", x)
def log(x): return _call("log", x)
def sqrt(x): return _call("sqrt", x)
def fabs(x): return _call("abs", x)
def erf(x): return _call("erf", x)
def vmax(a, b): return _call("max", a, b)
def vmin(a, b): return _call("min", a, b)


def ite(cond, then, otherwise) -> X:
    """``if_then_else(cond, then, otherwise)``; ``cond`` is a comparison, ``&``/``|`` of
    comparisons, or a bool tensor read."""
    return X(IfThenElse(lift(cond), lift(then), lift(otherwise)))


def between(lo, x, hi, hi_inclusive=False) -> X:
    """The chained condition ``lo<=x<hi`` (the reference's padding-mask form)."""
    return X(Compare((lift(lo), lift(x), lift(hi)), ("<=", "<=" if hi_inclusive else "<")))


# ---------------------------------------------------------------- index expressions

IndexLike = Union["I", int]


class I(_Operators):
    """A LEIR index expression with ``+ - * // %``; integer constants fold, so
    ``i * 1 + 0`` is ``i`` and ``0 * i`` is ``0``."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    @staticmethod
    def of(value: IndexLike) -> "I":
        return value if isinstance(value, I) else I(IConst(int(value)) if int(value) >= 0
                                                     else IBin("-", IConst(0), IConst(-int(value))))

    @property
    def const(self):
        return self.node.value if isinstance(self.node, IConst) else None

    def _bin(self, op, other, swap=False):
        a, b = (I.of(other), self) if swap else (self, I.of(other))
        ca, cb = a.const, b.const
        if ca is not None and cb is not None:
            value = None if op in ("//", "%") and cb == 0 else INDEX_OPS[op](ca, cb)
            if value is not None and value >= 0:
                return I(IConst(value))
        if op in ("+", "-") and cb is not None:
            if cb == 0:
                return a
            if cb < 0:  # keep literals non-negative: i + -3 -> i-3
                return I(IBin("-" if op == "+" else "+", a.node, IConst(-cb)))
        if op == "+" and ca == 0:
            return b
        if op == "*":
            if ca == 0 or cb == 0:
                return I(IConst(0))
            if cb == 1:
                return a
            if ca == 1:
                return b
        if op == "//" and cb == 1:
            return a
        if op == "%" and cb == 1:
            return I(IConst(0))
        return I(IBin(op, a.node, b.node))

    def __floordiv__(self, o): return self._bin("//", o)
    def __mod__(self, o): return self._bin("%", o)

    # comparisons of indices are conditions over index values (evaluated in integers)
    def eq(self, o): return self._cmp("==", o)
    def ne(self, o): return self._cmp("!=", o)

    def __repr__(self):
        from ..leir.printer import to_text
        return f"I({to_text(self.node)})"


ZERO = I(IConst(0))


def gather(var: "X") -> I:
    """A tensor read used as a subscript (an indirect index, e.g. CrossEntropy's targets)."""
    if not isinstance(var.node, Var):
        raise TypeError("only a tensor read can be used as a gather subscript")
    return I(var.node)
