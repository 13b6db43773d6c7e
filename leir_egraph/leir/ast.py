"""The LEIR abstract syntax tree: frozen, hashable dataclasses with structural equality.

A parsed LEIR text is a :class:`Leir` (a tuple of top-level :class:`LoopNest`). Source
positions (``pos``) are carried for error messages only and never take part in equality.

Two expression families exist because LEIR has two arithmetics:

* ``IExpr`` -- index arithmetic inside subscripts (``+ - * // %``, integers, index names, and
  tensor reads used as gathers);
* ``Expr`` -- value arithmetic of equations (numbers, tensor reads, index names used as values,
  ``+ - * / **``, unary minus, intrinsics, ``if_then_else``, comparisons, ``&`` and ``|``).

``Var`` (a tensor access) belongs to both.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Union

LOOP_KINDS = ("L", "P", "V", "U", "B")
PARALLEL_KINDS = frozenset({"P", "V", "B"})  # kinds that claim independent iterations
DTYPE_CODES = ("f16", "f32", "f64", "bf16", "i8", "i16", "i32", "i64",
               "u8", "u16", "u32", "u64", "bool")
SCOPES = ("g", "s", "l")
FUNCTIONS_1 = ("exp", "log", "sqrt", "abs", "erf")
FUNCTIONS_2 = ("max", "min")
RESERVED_TENSOR_LETTERS = frozenset("LPVBUT")
KEYWORDS = frozenset(FUNCTIONS_1 + FUNCTIONS_2 + ("inf", "if_then_else"))

Pos = Union[tuple[int, int], None]


def _pos() -> Pos:
    return field(default=None, compare=False, hash=False, repr=False)


def _hash_once(fields: Callable) -> Callable:
    """A ``__hash__`` that computes what the dataclass's would (the hash of ``fields(self)``,
    the fields that take part in equality) once per object and keeps it as the attribute
    ``_hash``: nests, equations and accesses key the cost model's and the engine's caches, and
    hashing one walks all of it. It is read and set as an attribute, never through
    ``__dict__``: a node's attributes live in the object itself until something asks for its
    ``__dict__``, which then becomes one more object for the garbage collector to walk (about
    45,000 of them per attention node's ranking). The class holds ``_hash = None`` (not a
    field), which a node's own attribute shadows once set. Used with
    :func:`_state_without_hash`."""
    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(fields(self))
            object.__setattr__(self, "_hash", h)
        return h
    return __hash__


def _state_without_hash(self) -> dict:
    """``__getstate__`` of a class with :func:`_hash_once`: string hashes differ between
    processes, so a pickled (or copied) node does not carry its hash."""
    return {k: v for k, v in self.__dict__.items() if k != "_hash"}


# ---------------------------------------------------------------- index arithmetic

@dataclass(frozen=True)
class IConst:
    """An integer in a subscript: ``0`` in ``D_{tx,0,c}``."""
    value: int


@dataclass(frozen=True)
class IName:
    """A loop index inside a subscript: ``a`` in ``A_{tx,a}``."""
    name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class IBin:
    """Index arithmetic ``lhs op rhs`` with op in ``+ - * // %``."""
    op: str
    lhs: "IExpr"
    rhs: "IExpr"


# ---------------------------------------------------------------- tensor access

@dataclass(frozen=True)
class Var:
    """A tensor access ``NAME^{dtype,scope}_{sub,...}``; no subscripts means a 0-d scalar."""
    name: str
    dtype: str
    scope: str
    subscripts: tuple["IExpr", ...] = ()
    pos: Pos = _pos()
    # The reference translator sometimes writes an empty subscript list ``X^{f32,g}_{}``; it is
    # kept only so that such text prints back byte-identical (validation rejects it on tensors
    # of rank >= 1).
    empty_subscript: bool = field(default=False, compare=False, hash=False, repr=False)

    __hash__ = _hash_once(lambda self: (self.name, self.dtype, self.scope, self.subscripts))
    _hash = None   # (_hash_once) not a field: no annotation
    __getstate__ = _state_without_hash

    @property
    def rank(self) -> int:
        return len(self.subscripts)


IExpr = Union[IConst, IName, IBin, Var]

# What each index operator means: ``//`` and ``%`` are floor division and floor modulo (the
# remainder takes the divisor's sign). Python's operators on ints and numpy arrays are exactly
# that; a backend whose ``//``/``%`` differ (TVM's TIR) passes its own table to evaluate_index.
INDEX_OPS: Mapping[str, Callable] = {"+": operator.add, "-": operator.sub, "*": operator.mul,
                                     "//": operator.floordiv, "%": operator.mod}


def evaluate_index(sub: "IExpr", leaf: Callable, ops: Mapping[str, Callable] = INDEX_OPS):
    """The value of the index expression ``sub``: each ``IConst``/``IName``/``Var`` leaf is
    ``leaf(node)``, each ``IBin`` is ``ops[op](lhs, rhs)``. The one evaluator of index
    arithmetic -- on ints, numpy arrays of index values, or a backend's expressions.

    >>> evaluate_index(IBin("%", IConst(-7), IConst(3)), lambda c: c.value)   # floor modulo
    2
    >>> env = {"a": -1}
    >>> evaluate_index(IBin("//", IName("a"), IConst(4)),
    ...                lambda n: env[n.name] if isinstance(n, IName) else n.value)   # floor
    -1
    """
    if isinstance(sub, IBin):
        fn = ops.get(sub.op)
        if fn is None:
            raise ValueError(f"unknown index operator '{sub.op}'")
        return fn(evaluate_index(sub.lhs, leaf, ops), evaluate_index(sub.rhs, leaf, ops))
    return leaf(sub)


# ---------------------------------------------------------------- value expressions

@dataclass(frozen=True)
class Num:
    """A numeric literal, kept as its exact source text (``1e-05``, ``16``, ``0.5``, ``inf``)."""
    text: str

    @property
    def value(self) -> float | int:
        return float(self.text) if any(c in self.text for c in ".eEn") else int(self.text)

    @property
    def is_integer_literal(self) -> bool:
        return self.text.isdigit()

    @staticmethod
    def of(value: float | int) -> "Num":
        """The literal for a Python number (negative numbers are ``Neg(Num(..))``)."""
        if value < 0:
            raise ValueError("a Num literal is non-negative; wrap it in Neg")
        return Num(repr(value) if isinstance(value, float) else str(int(value)))


@dataclass(frozen=True)
class Idx:
    """A loop index used as a value: ``a`` in ``if_then_else(c<=a, ...)``."""
    name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Neg:
    """Unary minus."""
    operand: "Expr"


@dataclass(frozen=True)
class Bin:
    """Binary arithmetic ``lhs op rhs`` with op in ``+ - * / **``."""
    op: str
    lhs: "Expr"
    rhs: "Expr"


@dataclass(frozen=True)
class Call:
    """An intrinsic: ``exp log sqrt abs erf`` (one argument) or ``max min`` (two)."""
    fn: str
    args: tuple["Expr", ...]


@dataclass(frozen=True)
class IfThenElse:
    """``if_then_else(cond, then, otherwise)``."""
    cond: "Expr"
    then: "Expr"
    otherwise: "Expr"


@dataclass(frozen=True)
class Compare:
    """A comparison chain ``operands[0] ops[0] operands[1] ops[1] ...`` (``2<=c<258``)."""
    operands: tuple["Expr", ...]
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Logic:
    """``lhs & rhs`` or ``lhs | rhs`` on conditions."""
    op: str
    lhs: "Expr"
    rhs: "Expr"


Expr = Union[Num, Var, Idx, Neg, Bin, Call, IfThenElse, Compare, Logic]


# ---------------------------------------------------------------- statements

@dataclass(frozen=True)
class Loop:
    """``KIND^{extent}_{index=0}``: runs ``index`` over ``0 .. extent-1``."""
    kind: str
    extent: int
    index: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Equation:
    """``target = value``."""
    target: Var
    value: Expr
    pos: Pos = _pos()

    __hash__ = _hash_once(lambda self: (self.target, self.value))
    _hash = None   # (_hash_once) not a field: no annotation
    __getstate__ = _state_without_hash


@dataclass(frozen=True)
class LoopNest:
    """``loops[item;item;...];`` -- items are equations or nested loop nests."""
    loops: tuple[Loop, ...]
    body: tuple[Union[Equation, "LoopNest"], ...]
    pos: Pos = _pos()

    # nests key many caches (cost model, engine), and hashing a nest walks all of it (20 % of
    # ranking an attention node's 4,000 steps went to recomputing it)
    __hash__ = _hash_once(lambda self: (self.loops, self.body))
    _hash = None   # (_hash_once) not a field: no annotation
    __getstate__ = _state_without_hash

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(loop.index for loop in self.loops)

    @property
    def equations(self) -> tuple[Equation, ...]:
        """The equations directly in this body (not those of nested nests)."""
        return tuple(item for item in self.body if isinstance(item, Equation))


Item = Union[Equation, LoopNest]


@dataclass(frozen=True)
class Leir:
    """A LEIR program text: top-level loop nests, run in order."""
    nests: tuple[LoopNest, ...]

    def __iter__(self) -> Iterator[LoopNest]:
        return iter(self.nests)

    def __len__(self) -> int:
        return len(self.nests)


Node = Union[Leir, LoopNest, Loop, Equation, Expr, IExpr]
