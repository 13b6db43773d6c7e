"""LEIR expressions -> TVM ``tirx`` expressions, with the dtype rules of docs/LEIR.md §3.

* Arithmetic happens in the dtype of the equation's target: tensor reads of another dtype,
  literals and index values are cast to it (``D^{f32}=H^{i64}_{tx}*2`` reads ``H`` as f32).
* A comparison is evaluated in its operands' own type: integers when it reads no tensor,
  otherwise the widest dtype of the tensors it reads (argmax's ``A>=D`` compares f32 values
  although the target ``C`` is i64).
* ``if_then_else`` is TVM's lazy ``tirx.if_then_else``: the branch not taken is never
  evaluated, so a guarded out-of-range read never executes.
* ``max``/``min`` on floats propagate NaN (like PyTorch's ``maximum``/``relu``); TVM's own
  ``max(NaN, 0)`` returns 0. The NaN test reads the bits (``_isnan``), which LLVM vectorises.
* A bit reinterpret (the NaN test, ``_opaque``) is TVM's ``reinterpret`` for LLVM and CUDA's
  ``__float_as_int``-family intrinsics for CUDA (``_bits``/``_from_bits``): TVM's C code
  generator prints ``reinterpret`` as ``*(int *)(&(x))``, which NVRTC refuses when ``x`` is a
  constant (a literal operand, or a loop index that unrolling made one).
* float division follows IEEE like PyTorch: ``A/0.0`` is inf, -inf or NaN (a divisor TVM would
  constant-fold to zero is hidden from its folder, see ``ExprLowering._divisor``).

TVM is imported by the caller (``tir.py``) before any function here runs.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..leir.ast import (INDEX_OPS, Bin, Call, Compare, IConst, Idx, IfThenElse, IName, Logic, Neg,
                        Num, Var, evaluate_index)
from ..leir.dtypes import BITS as _BITS, FLOATS, UNSIGNED, comparison_dtype
from ..leir.signature import DTYPE_NAMES
from ..leir.traverse import walk_values


class LoweringError(ValueError):
    """A valid LEIR program that cannot be turned into TIR for the requested target."""


def tvm_dtype(code: str) -> str:
    """LEIR dtype code -> TVM dtype string (``f32`` -> ``float32``)."""
    try:
        return DTYPE_NAMES[code]
    except KeyError:
        raise LoweringError(f"unsupported dtype '{code}'") from None


def dtype_of(expr) -> str:
    """The dtype of a TIR expression (TVM 0.27 exposes it as ``expr.ty``)."""
    return str(expr.ty)


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def identity(op: str, dtype: str):
    """The implicit initial value of an accumulation ``X=X op e`` (docs/LEIR.md §3)."""
    from tvm import tirx
    if dtype == "bool":
        return tirx.const(op in ("*", "min"), "bool")
    if op in ("+", "-"):
        return tirx.const(0, dtype)
    if op == "*":
        return tirx.const(1, dtype)
    if is_float(dtype):
        return tirx.const(-math.inf if op == "max" else math.inf, dtype)
    return tirx.min_value(dtype) if op == "max" else tirx.max_value(dtype)


def poison_value(dtype: str):
    """What an unwritten element holds under ``poison=True``: NaN, the largest integer, True."""
    from tvm import tirx
    if is_float(dtype):
        return tirx.const(math.nan, dtype)
    if dtype == "bool":
        return tirx.const(True, "bool")
    return tirx.max_value(dtype)


class ExprLowering:
    """Lowers the expressions of one equation.

    ``env`` maps loop index names to their TIR values (a loop variable, or ``extent-1-v`` for a
    loop run in reverse); ``buffers`` maps tensor names to TIR buffers; ``cuda``: the
    expressions are for the CUDA target (bit reinterprets through CUDA's intrinsics).
    """

    def __init__(self, env: Mapping, buffers: Mapping, cuda: bool = False):
        from tvm import tirx
        self.tirx = tirx
        self.env = env
        self.buffers = buffers
        self.cuda = cuda

    # ------------------------------------------------------------ tensor access and subscripts

    def access(self, var: Var):
        """``A_{tx,C_{tx}}`` -> ``A[tx, int32(C[tx])]`` in A's own dtype."""
        buf = self.buffers[var.name]
        return self.tirx.BufferLoad(buf, [self.index(s) for s in var.subscripts])

    def index(self, sub):
        """Index arithmetic as TIR (``evaluate_index`` with TIR's floor division and modulo)."""
        tirx = self.tirx

        def leaf(node):
            if isinstance(node, IConst):
                return tirx.const(node.value, "int32" if -2**31 <= node.value < 2**31 else "int64")
            if isinstance(node, IName):
                return self.env[node.name]
            value = self.access(node)  # a gather: the tensor's value is the subscript
            return value if dtype_of(value) == "int32" else tirx.Cast("int32", value)
        ops = {**INDEX_OPS, "//": tirx.floordiv, "%": tirx.floormod}
        return evaluate_index(sub, leaf, ops)

    # ------------------------------------------------------------ values in a given dtype

    def cast(self, value, dtype: str):
        have = dtype_of(value)
        if have == dtype:
            return value
        if dtype == "bool":
            return self.tirx.NE(value, self.tirx.const(0, have))
        return self.tirx.Cast(dtype, value)

    def literal(self, num: Num, dtype: str):
        """A literal in ``dtype``: floats as written; in an integer dtype a float literal is
        truncated toward zero and ``inf`` is the dtype's largest value."""
        tirx = self.tirx
        value = num.value
        if is_float(dtype):
            if dtype in ("float16", "float32"):
                # round as a cast does: beyond the dtype's range is inf (TVM refuses such a
                # literal, e.g. 65536 in f16)
                with np.errstate(over="ignore"):
                    value = float(np.dtype(dtype).type(value))
            return tirx.const(float(value), dtype)
        if dtype == "bool":
            return tirx.const(bool(value), "bool")
        if isinstance(value, float):
            if math.isinf(value):
                return tirx.max_value(dtype)
            value = int(value)
        bits = _BITS[dtype]
        if dtype in UNSIGNED:
            value %= 1 << bits
        else:  # two's complement wrap, as a C cast does
            value = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
        return tirx.const(value, dtype)

    def value(self, e, dtype: str):
        """Lower a value expression computed in ``dtype`` (the equation target's dtype)."""
        tirx = self.tirx
        if dtype == "bool" and isinstance(e, (Bin, Neg, Call)):
            # bool has no arithmetic: compute in int32, then nonzero -> True
            return self.cast(self.value(e, "int32"), "bool")
        if isinstance(e, Num):
            return self.literal(e, dtype)
        if isinstance(e, Var):
            return self.cast(self.access(e), dtype)
        if isinstance(e, Idx):
            return self.cast(self.env[e.name], dtype)
        if isinstance(e, Neg):
            operand = self.value(e.operand, dtype)
            return tirx.const(0, dtype) - operand if dtype in UNSIGNED else -operand
        if isinstance(e, Bin):
            return self._binary(e, dtype)
        if isinstance(e, Call):
            return self._call(e, dtype)
        if isinstance(e, IfThenElse):
            return tirx.if_then_else(self.condition(e.cond), self.value(e.then, dtype),
                                     self.value(e.otherwise, dtype))
        if isinstance(e, (Compare, Logic)):
            return self.cast(self.condition(e), dtype)
        raise LoweringError(f"cannot lower expression {type(e).__name__}")

    def _binary(self, e: Bin, dtype: str):
        tirx = self.tirx
        if e.op == "**":
            return self._power(e, dtype)
        a, b = self.value(e.lhs, dtype), self.value(e.rhs, dtype)
        if e.op in ("+", "-", "*") and is_float(dtype):
            a, b = self._unfoldable(e, a, b, dtype)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op == "/":
            return tirx.div(a, self._divisor(e.rhs, b, dtype)) if is_float(dtype) \
                else tirx.truncdiv(a, b)
        raise LoweringError(f"unknown operator '{e.op}'")

    def _unfoldable(self, e: Bin, a, b, dtype: str):
        """The operands of a float ``+``, ``-`` or ``*``, one hidden from TVM's simplifier
        (``_opaque``) where it would fold the operation in a way IEEE arithmetic does not:
        ``x*0`` and ``x-x`` to 0 (NaN for x = ±inf or NaN), ``x+0`` to x (+0 for x = -0),
        and terms cancelled across a sum, ``(a+d)-d`` to a (inf where a+d overflows). A sum or
        difference whose two sides share a term of their ``+``/``-`` chains has its right
        operand hidden, in a form of its own for ``-`` (``_opaque(..., minus=True)``): with
        one form, ``A+A-A`` became ``(A+h(A))-h(A)``, whose two hidden copies cancel. An operand that becomes zero only once TVM's pipeline makes a loop
        index a constant (an unrolled loop, a loop of one iteration) is hidden too:
        ``if_then_else(a-1<0,0,E_{a-1})+D`` is ``D`` at ``a = 0`` after folding, ``-0`` where
        IEEE gives ``0+(-0) = +0``, and ``A*a`` is ``0`` there where ``inf*0`` is NaN.
        Such a program computes what its LEIR says on every input, which the verification of
        a rewrite that removes or introduces such a term depends on (docs/VERIFY.md)."""
        if e.op in ("+", "-") and (set(_terms(e.lhs)) & set(_terms(e.rhs))):
            # the simplifier cancels shared terms: (a+d)-d to a, (a+1)-a to 1, a-a to 0
            return a, self._opaque(b, dtype, minus=e.op == "-")
        if self._may_fold_to_zero(b, e.rhs):
            return a, self._opaque(b, dtype)
        if self._may_fold_to_zero(a, e.lhs):
            return self._opaque(a, dtype), b
        return a, b

    def _may_fold_to_zero(self, x, node) -> bool:
        """Whether TVM may fold the lowered operand ``x`` (of LEIR ``node``) to the constant 0:
        it simplifies to 0 already, or it reads no tensor but a loop index (0 at some
        iteration), or it is an ``if_then_else`` one of whose branches may (its condition
        becomes a constant once the index is one)."""
        values = list(walk_values(node))
        if isinstance(node, IfThenElse):
            return any(self._may_fold_to_zero(None, branch)
                       for branch in (node.then, node.otherwise))
        if isinstance(node, Neg):
            return self._may_fold_to_zero(None, node.operand)
        if any(isinstance(n, Var) for n in values):
            return False
        if any(isinstance(n, Idx) for n in values):
            return True
        from tvm.sym import Analyzer
        folded = Analyzer().simplify(self.value(node, "float64") if x is None else x)
        return isinstance(folded, (self.tirx.FloatImm, self.tirx.IntImm)) and folded.value == 0

    def _opaque(self, b, dtype: str, minus: bool = False):
        """``b`` through a bit-for-bit round trip via the same-width integer, which TVM's
        constant folder cannot see through (free in LLVM and CUDA); ``minus``: two round
        trips, so that an operand hidden where it is subtracted never equals one hidden where
        it is added (``(A+h(A))-h(A)`` would cancel to ``A``, which is finite where A+A
        overflows). For CUDA a 16-bit float makes its round trip as the float32 it widens to
        exactly (NaN stays NaN, ±0, ±inf and subnormals keep their value), so that only the
        32- and 64-bit intrinsics are used."""
        if self.cuda and dtype in ("float16", "bfloat16"):
            return self.tirx.Cast(dtype, self._opaque(self.tirx.Cast("float32", b), "float32",
                                                      minus))
        for _ in range(2 if minus else 1):
            b = self._from_bits(self._bits(b, dtype), dtype)
        return b

    def _bits(self, x, dtype: str):
        """The bits of float ``x`` as the same-width signed integer (``_BIT_CASTS``)."""
        bits, to_bits, _ = _BIT_CASTS[dtype]
        if self.cuda:
            return self.tirx.call_pure_extern(bits, to_bits, x)
        return self.tirx.reinterpret(bits, x)

    def _from_bits(self, n, dtype: str):
        """The float of ``dtype`` whose bits are the integer ``n`` (inverse of ``_bits``)."""
        _, _, from_bits = _BIT_CASTS[dtype]
        if self.cuda:
            return self.tirx.call_pure_extern(dtype, from_bits, n)
        return self.tirx.reinterpret(dtype, n)

    def _isnan(self, x, dtype: str):
        """``x`` is a NaN, asked of its bits: exponent all ones and a nonzero fraction, i.e.
        ``bits & ~sign > +inf's bits``. Integer operations, so LLVM vectorises it (TVM's
        ``isnan`` on float16 became scalar code, 80x slower on a max pool) and neither TVM's
        folder nor LLVM can assume it false (``x != x`` is folded away on this build)."""
        tirx = self.tirx
        if dtype == "bfloat16" or (self.cuda and dtype == "float16"):
            # TVM legalises bfloat16 arithmetic to float32 before LLVM, where a 16-bit
            # reinterpret of the legalised value is an invalid bitcast: asked of the exact
            # float32 value (the cast keeps NaN a NaN); for CUDA float16 too (``_opaque``)
            x, dtype = tirx.Cast("float32", x), "float32"
        bits, width, inf = {"float16": ("int16", 16, 0x7C00),
                            "float32": ("int32", 32, 0x7F800000),
                            "float64": ("int64", 64, 0x7FF0000000000000)}[dtype]
        magnitude = self._bits(x, dtype) & tirx.const((1 << (width - 1)) - 1, bits)
        return magnitude > tirx.const(inf, bits)

    def _divisor(self, rhs, b, dtype: str):
        """A float divisor, hidden from TVM's constant folder when it may fold to zero.

        TVM refuses to fold ``x / 0.0`` ("Divide by zero") where IEEE arithmetic -- and PyTorch
        -- give inf or NaN; its simplifier also turns ``A-A``, ``0*2`` or ``a-a`` into that
        zero. A bit-for-bit round trip through the same-width integer
        (``reinterpret(reinterpret(b))``) is opaque to the folder and free in LLVM and CUDA.
        It is used only where needed -- a divisor that simplifies to zero, or one that uses a
        loop index as a value (unrolling or a unit loop can turn it into a constant) -- so
        that ordinary TIR stays readable.

        ``A/0.0`` -> ``A / reinterpret(float32, reinterpret(int32, 0f))`` -> inf, -inf, NaN
        """
        from tvm.sym import Analyzer
        simplified = Analyzer().simplify(b)
        zero = isinstance(simplified, (self.tirx.FloatImm, self.tirx.IntImm)) and \
            simplified.value == 0
        if not zero and not any(isinstance(n, Idx) for n in walk_values(rhs)):
            return b
        return self._opaque(b, dtype)

    def _power(self, e: Bin, dtype: str):
        tirx = self.tirx
        if dtype == "bfloat16":  # TVM's pow takes no bfloat16: in f32, rounded back
            return tirx.Cast(dtype, tirx.pow(self.value(e.lhs, "float32"),
                                             self.value(e.rhs, "float32")))
        if is_float(dtype):
            return tirx.pow(self.value(e.lhs, dtype), self.value(e.rhs, dtype))
        exponent = e.rhs.value if isinstance(e.rhs, Num) else None
        if isinstance(exponent, int) and exponent <= 64:
            # integer power by repeated multiplication (TVM's pow is float-only)
            base = self.value(e.lhs, dtype)
            result = tirx.const(1, dtype)
            for _ in range(exponent):
                result = result * base
            return result
        return tirx.Cast(dtype, tirx.pow(self.value(e.lhs, "float64"), self.value(e.rhs, "float64")))

    def _call(self, e: Call, dtype: str):
        tirx = self.tirx
        if e.fn in ("max", "min"):
            a, b = (self.value(x, dtype) for x in e.args)
            if not is_float(dtype):
                return tirx.max(a, b) if e.fn == "max" else tirx.min(a, b)
            # NaN in either operand gives NaN, as in PyTorch (TVM's own max(NaN, 0) is 0);
            # otherwise TVM's max/min: ``a > b ? a : b`` (ties, +0 and -0 included, give b)
            keep = a > b if e.fn == "max" else a < b
            return tirx.Select(tirx.Or(keep, self._isnan(a, dtype)), a, b)
        (arg,) = e.args
        if e.fn == "abs":
            x = self.value(arg, dtype)
            return x if dtype in UNSIGNED else tirx.abs(x)
        fn = {"exp": tirx.exp, "log": tirx.log, "sqrt": tirx.sqrt, "erf": tirx.erf}.get(e.fn)
        if fn is None:
            raise LoweringError(f"unknown function '{e.fn}'")
        # TVM has no f16/bf16 erf, no bf16 functions at all and no integer transcendental
        # functions: compute wider, round back
        if dtype in ("float32", "float64") or (dtype == "float16" and e.fn != "erf"):
            return fn(self.value(arg, dtype))
        wide = "float32" if is_float(dtype) else "float64"
        return tirx.Cast(dtype, fn(self.value(arg, wide)))

    # ------------------------------------------------------------ conditions

    def condition(self, e):
        """A bool expression: comparisons (chains are conjunctions), ``&``, ``|``, bool reads."""
        tirx = self.tirx
        if isinstance(e, Logic):
            a, b = self.condition(e.lhs), self.condition(e.rhs)
            return tirx.And(a, b) if e.op == "&" else tirx.Or(a, b)
        if isinstance(e, Compare):
            dtype = self.comparison_dtype(e)
            operands = [self.value(x, dtype) for x in e.operands]
            result = None
            for a, op, b in zip(operands, e.ops, operands[1:]):
                term = getattr(tirx, _COMPARE_NODES[op])(a, b)
                result = term if result is None else tirx.And(result, term)
            return result
        if isinstance(e, Var):
            return self.cast(self.access(e), "bool")
        # a value used as a condition (validation normally forbids it): nonzero is true
        return self.cast(self.value(e, "float64"), "bool")

    def comparison_dtype(self, e: Compare) -> str:
        """The dtype the comparison is evaluated in (``leir.dtypes.comparison_dtype``)."""
        return comparison_dtype(e)


# float dtype -> (same-width integer, CUDA's float-to-bits and bits-to-float intrinsics; the
# 16-bit floats' are not used: ``_opaque``/``_isnan`` widen them to float32 for CUDA)
_BIT_CASTS = {"float16": ("int16", None, None), "bfloat16": ("int16", None, None),
              "float32": ("int32", "__float_as_int", "__int_as_float"),
              "float64": ("int64", "__double_as_longlong", "__longlong_as_double")}

_COMPARE_NODES = {"<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE"}


def _terms(e) -> list:
    """The operands of a chain of ``+`` and ``-`` (``e`` itself when it is not one)."""
    if isinstance(e, Bin) and e.op in ("+", "-"):
        return _terms(e.lhs) + _terms(e.rhs)
    return [e]
