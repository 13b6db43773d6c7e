"""Generic walks over the LEIR AST: children, sub-node iteration (every node, value
expressions, nests), and bottom-up rebuilding.

Every analysis and rewrite in the project goes through these functions instead of writing its
own recursion over the node classes.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Callable, Iterator

from .ast import (Bin, Call, Compare, Equation, IBin, IConst, Idx, IfThenElse, IName, Leir, Logic,
                  Loop, LoopNest, Neg, Num, Var)

_CHILD_FIELDS = {
    Leir: ("nests",), LoopNest: ("loops", "body"), Loop: (), Equation: ("target", "value"),
    Var: ("subscripts",), IConst: (), IName: (), IBin: ("lhs", "rhs"), Num: (), Idx: (),
    Neg: ("operand",), Bin: ("lhs", "rhs"), Call: ("args",), IfThenElse: ("cond", "then", "otherwise"),
    Compare: ("operands",), Logic: ("lhs", "rhs"),
}


def children(node) -> tuple:
    """The direct sub-nodes of ``node``, in source order."""
    out = []
    for name in _CHILD_FIELDS[type(node)]:
        value = getattr(node, name)
        if isinstance(value, tuple):
            out.extend(value)
        else:
            out.append(value)
    return tuple(out)


def value_children(node) -> tuple:
    """The direct sub-expressions of a value expression, without the subscripts of tensor reads:
    ``exp(A_{a+1})+2`` -> ``(exp(A_{a+1}), 2)``; ``A_{a+1}`` -> ``()``."""
    return () if isinstance(node, Var) else children(node)


def walk_values(node) -> Iterator:
    """Pre-order iteration over a value expression and its value sub-expressions, not into the
    subscripts of tensor reads: ``exp(A_{a})`` -> ``exp(A_{a})``, ``A_{a}``."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(value_children(current)))


def walk(node) -> Iterator:
    """Pre-order iteration over ``node`` and all its descendants."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def nests_in(nest: LoopNest) -> Iterator[LoopNest]:
    """``nest`` and every loop nest inside it, pre-order (a nest's body holds equations and
    nests; equations hold no nest, so they are not entered)."""
    yield nest
    for item in nest.body:
        if isinstance(item, LoopNest):
            yield from nests_in(item)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
# sets a field of a new frozen node (what its dataclass ``__init__`` does); assigning through
# ``__dict__`` would give each node a dict object besides its inline attribute values
_set = object.__setattr__


def replaced(node, **changes):
    """``dataclasses.replace(node, **changes)`` for an AST node, without its introspection of
    the class on every call (a rewrite or a renaming rebuilds thousands of nodes): a new node
    of the same class holding ``changes`` and the node's other fields. AST classes are frozen
    dataclasses whose fields are all ``__init__`` arguments and which have no
    ``__post_init__``, so this is what ``replace`` gives (a class that is not gets
    ``replace`` itself); the hash a node keeps
    (``ast._hash_once``) is not a field, so the new node computes its own."""
    cls = type(node)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        # a class that breaks the assumptions (a __post_init__, a field outside __init__)
        # gets ``replace`` itself: empty names mark it
        plain = not hasattr(cls, "__post_init__") and all(f.init for f in fields(cls))
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls)) if plain else ()
    if not names:
        return replace(node, **changes)
    new = object.__new__(cls)
    for name in names:
        _set(new, name, changes[name] if name in changes else getattr(node, name))
    return new


def rebuild(node, fn: Callable):
    """Bottom-up rewrite: rebuild children first, then apply ``fn`` to the rebuilt node.

    ``fn`` returns a replacement node or ``None`` to keep the (rebuilt) node.
    """
    names = _CHILD_FIELDS[type(node)]
    if names:
        changes = {}
        for name in names:
            value = getattr(node, name)
            if isinstance(value, tuple):
                new = tuple(rebuild(v, fn) for v in value)
                if any(a is not b for a, b in zip(new, value)):
                    changes[name] = new
            else:
                new = rebuild(value, fn)
                if new is not value:
                    changes[name] = new
        if changes:
            node = replaced(node, **changes)
    result = fn(node)
    return node if result is None else result

