"""Which dtype a LEIR value is evaluated in, where the target's dtype does not decide it.

Arithmetic runs in the dtype of the equation's target; comparisons run in their operands' own
type (docs/LEIR.md, "Semantics"): ``if_then_else(A_{a}>=D,...)`` with ``A``, ``D`` of ``f32``
compares ``f32`` values even when the target is ``i64``. The lowering and the analyses that
move a value out of a comparison (expression splitting, CSE) use the same rule, from here.
"""

from __future__ import annotations

from .ast import Compare, Num, Var
from .signature import DTYPE_NAMES
from .traverse import value_children

FLOATS = ("float16", "bfloat16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
        "uint32": 32, "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def widest(dtypes) -> str | None:
    """The dtype a comparison between these dtypes is evaluated in (None when empty).

    Any float wins over integers; among floats the widest (f16 with bf16 -> f32); among
    integers the widest, signed if any operand is signed; bool alone compares as int32.

    >>> widest({"float16", "bfloat16"}), widest({"uint8", "int16"}), widest({"bool"})
    ('float32', 'int16', 'int32')
    """
    dtypes = set(dtypes)
    if not dtypes:
        return None
    floats = [d for d in dtypes if d in FLOATS]
    if floats:
        if {"float16", "bfloat16"} <= set(floats) and not {"float32", "float64"} & set(floats):
            return "float32"
        return max(floats, key=lambda d: (BITS[d], d == "float16"))
    ints = [d for d in dtypes if d in SIGNED + UNSIGNED]
    if not ints:
        return "int32"
    bits = max(BITS[d] for d in ints)
    if any(d in SIGNED for d in ints):
        return f"int{bits}"
    return f"uint{bits}"


def comparison_dtype(e: Compare) -> str:
    """The dtype name a comparison is evaluated in: the widest dtype of the tensors its operands
    read (tensors read inside subscripts -- gathers -- do not count); integers for index-only
    comparisons (float64 if a non-integer literal occurs, int64 if an integer literal needs it).

    >>> from leir_egraph.leir.parser import parse
    >>> nest = parse("L^{4}_{a=0}[G^{f32,g}_{a}=if_then_else(abs(A^{f32,g}_{a}-C^{f16,g}_{a})<1,"
    ...              "A^{f32,g}_{a},if_then_else(a-1<0,0,1));];").nests[0]
    >>> value = nest.body[0].value
    >>> comparison_dtype(value.cond), comparison_dtype(value.otherwise.cond)
    ('float32', 'int32')
    """
    tensors, floats_literal, big = set(), False, False
    stack = list(e.operands)
    while stack:
        node = stack.pop()
        if isinstance(node, Var):
            tensors.add(DTYPE_NAMES.get(node.dtype, node.dtype))
            continue  # its subscripts are index values, not compared values
        if isinstance(node, Num):
            if isinstance(node.value, float):
                floats_literal = True
            elif not -2**31 <= node.value < 2**31:
                big = True
            continue
        stack.extend(value_children(node))
    if tensors:
        return widest(tensors)
    if floats_literal:
        return "float64"
    return "int64" if big else "int32"
