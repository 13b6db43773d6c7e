"""What an op emitter sees of the translation: the builder, the fx node being translated (its
real output shapes and dtypes from shape propagation), and helpers shared by all emitters --
broadcast reads, dimension normalisation, element-wise nests."""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.fx

from ..leir.ast import Bin, Call, Var
from ..leir.signature import dtype_bytes, dtype_code, is_float
from ..leir.traverse import walk_values
from .builder import Builder, Loops, Tensor
from .errors import TranslationError, UnsupportedOp
from .expr import ZERO, I, X, ite, lift, val


TORCH_DTYPES = {"f16": torch.float16, "f32": torch.float32, "f64": torch.float64,
                "bf16": torch.bfloat16, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
                "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}


def leir_dtype(torch_dtype) -> str:
    """``torch.float32`` -> ``f32``."""
    try:
        return dtype_code(str(torch_dtype))
    except ValueError:
        raise UnsupportedOp(f"dtype {torch_dtype}", reason="LEIR has no such dtype") from None


class Ctx:
    """The translation context of one fx node."""

    def __init__(self, translator, node: torch.fx.Node, op_name: str, module_path: str):
        self.translator = translator
        self.b: Builder = translator.builder
        self.node = node
        self.op_name = op_name
        self.module_path = module_path
        self._outs: dict[int | None, Tensor] = {}

    # ------------------------------------------------------------ errors

    def unsupported(self, reason: str, op: str | None = None) -> UnsupportedOp:
        return UnsupportedOp(op or self.op_name, self.node.name, self.module_path, reason)

    # ------------------------------------------------------------ tensors

    def _meta(self, k: int | None):
        meta = self.node.meta.get("tensor_meta")
        if k is not None:
            if not isinstance(meta, (tuple, list)):
                raise TranslationError(f"{self.node.name}: output {k} requested from a "
                                       "single-output node")
            meta = meta[k]
        if meta is None or not hasattr(meta, "shape"):
            raise TranslationError(f"{self.node.name}: shape propagation recorded no tensor "
                                   "output")
        return meta

    def out_shape(self, k: int | None = None) -> tuple[int, ...]:
        return tuple(int(s) for s in self._meta(k).shape)

    def out_dtype(self, k: int | None = None) -> str:
        return leir_dtype(self._meta(k).dtype)

    def out(self, k: int | None = None) -> Tensor:
        """The tensor holding this node's value (output ``k`` of a multi-output node)."""
        if k not in self._outs:
            label = self.node.name if k is None else f"{self.node.name}[{k}]"
            self._outs[k] = self.b.tensor(self.out_shape(k), self.out_dtype(k), "node", label)
        return self._outs[k]

    def temp(self, shape: Sequence[int], dtype: str) -> Tensor:
        return self.b.temp(shape, dtype, f"{self.node.name}:{self.op_name}")

    def tensor(self, value, dtype: str | None = None) -> Tensor:
        """``value`` as a program tensor: a handle as is, a real torch tensor (a folded constant)
        as a constant input, a Python number as a 0-d constant of ``dtype``."""
        if isinstance(value, Tensor):
            return value
        if isinstance(value, torch.Tensor):
            return self.translator.constant(value, self.node.name)
        if isinstance(value, (int, float, bool)) and dtype is not None:
            return self.translator.constant(torch.tensor(value, dtype=TORCH_DTYPES[dtype]),
                                            self.node.name)
        raise self.unsupported(f"expected a tensor argument, got {type(value).__name__}")


# ---------------------------------------------------------------- shared emitters

def norm_dim(dim: int, rank: int, ctx: Ctx | None = None) -> int:
    r = max(rank, 1)
    if not -r <= dim < r:
        raise (ctx.unsupported(f"dim {dim} out of range for rank {rank}") if ctx else
               TranslationError(f"dim {dim} out of range for rank {rank}"))
    return dim % r if rank else 0


def norm_dims(dim, rank: int, ctx: Ctx | None = None) -> list[int]:
    """``None`` -> all dims; an int or a sequence -> sorted, non-negative, unique dims."""
    if dim is None:
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    dims = sorted({norm_dim(int(d), rank, ctx) for d in dim})
    return dims if dims or rank == 0 else list(range(rank))


def read(value, shape: Sequence[int], idx: Sequence[I], target_dtype: str | None = None) -> X:
    """Read ``value`` at the position ``idx`` of an iteration space of ``shape`` with NumPy
    broadcasting: trailing dims align, a size-1 dim is read at ``0``; Python numbers become
    literals. A bool tensor read into a non-bool target becomes ``if_then_else(M,1,0)``."""
    if not isinstance(value, Tensor):
        return val(value)
    offset = len(shape) - value.rank
    if offset < 0:
        raise TranslationError(f"cannot broadcast {list(value.shape)} to {list(shape)}")
    subs = []
    for d, size in enumerate(value.shape):
        out_size = shape[offset + d]
        if size == 1 and out_size != 1:
            subs.append(ZERO)
        elif size == out_size:
            subs.append(idx[offset + d])
        else:
            raise TranslationError(f"cannot broadcast {list(value.shape)} to {list(shape)}")
    x = value.at(*subs)
    if value.dtype == "bool" and target_dtype is not None and target_dtype != "bool":
        return ite(x, 1, 0)
    return x


class Condition:
    """Marks a bool tensor operand that is used as a condition (read as is, not as 0/1)."""

    def __init__(self, tensor: Tensor):
        self.tensor = tensor


def elementwise(ctx: Ctx, fn: Callable[..., object], *operands, out: Tensor | None = None) -> Tensor:
    """One nest over the output shape: ``out[i] = fn(operands read at i)`` (through
    :func:`emit_output`: an f16/bf16 result that would round more than once is computed in f32
    and rounded once, one more nest)."""
    out = out or ctx.out()
    operands = [ctx.tensor(o) if isinstance(o, torch.Tensor) else o for o in operands]
    lp = Loops(out.shape)
    values = [read(o.tensor, out.shape, lp.idx) if isinstance(o, Condition)
              else read(o, out.shape, lp.idx, out.dtype) for o in operands]
    return emit_output(ctx, lp, out, fn(*values))


def copy_into(ctx: Ctx, src: Tensor, out: Tensor) -> Tensor:
    """``out = src`` element by element (shapes broadcast)."""
    return elementwise(ctx, lambda v: v, src, out=out)


# ---------------------------------------------------------------- accumulation dtype

# PyTorch's CPU kernels reduce half-precision tensors in float32 (``at::opmath_type``: sums,
# means, matrix and convolution inner products, softmax and norm statistics, losses) and round
# the result to the tensor's dtype once, where the op writes its output.
ACCUMULATION = {"f16": "f32", "bf16": "f32"}


def accumulation_dtype(dtype: str) -> str:
    """The dtype a reduction producing ``dtype`` accumulates in: f32 for f16/bf16, else itself.

    >>> accumulation_dtype("f16"), accumulation_dtype("f64"), accumulation_dtype("i32")
    ('f32', 'f64', 'i32')
    """
    return ACCUMULATION.get(dtype, dtype)


def accumulator(ctx: Ctx, out: Tensor) -> Tensor:
    """Where a reduction into ``out`` accumulates: ``out`` itself, or a temporary of the
    accumulation dtype when that differs (hand it to :func:`settle` afterwards)."""
    dtype = accumulation_dtype(out.dtype)
    return out if dtype == out.dtype else ctx.temp(out.shape, dtype)


def settle(ctx: Ctx, acc: Tensor, out: Tensor) -> Tensor:
    """Round an :func:`accumulator` into ``out`` (one copy nest; nothing when it is ``out``)."""
    return out if acc is out else copy_into(ctx, acc, out)


# The operations whose result a half-precision equation rounds: arithmetic, and the functions
# other than the exact abs/max/min. (LEIR computes an equation in its target's dtype, so an
# f16 equation rounds after each of them; PyTorch's kernels compute an f16 op in f32 and round
# its result once.)
_ROUNDING_BINS = frozenset("+-*/") | {"**"}
_EXACT_CALLS = frozenset({"abs", "max", "min"})


def roundings(value, dtype: str) -> int:
    """How many times an equation of ``dtype`` computing ``value`` rounds before its store: its
    arithmetic and rounding functions, and each read of a wider float tensor (cast down).

    >>> from .expr import X, exp
    >>> from ..leir.ast import Var
    >>> a, w = X(Var("A", "f16", "g")), X(Var("W", "f32", "g"))
    >>> roundings(a * 2, "f16"), roundings(1 / (1 + exp(-a)), "f16"), roundings(w, "f16")
    (1, 3, 1)
    """
    count = 0
    for node in walk_values(lift(value)):
        if isinstance(node, Bin) and node.op in _ROUNDING_BINS:
            count += 1
        elif isinstance(node, Call) and node.fn not in _EXACT_CALLS:
            count += 1
        elif isinstance(node, Var) and is_float(node.dtype) and \
                dtype_bytes(node.dtype) > dtype_bytes(dtype):
            count += 1
    return count


def emit_output(ctx: Ctx, lp: Loops, out: Tensor, value, subs=None) -> Tensor:
    """The nest ``out[subs] = value`` over ``lp`` (``subs``: the loop indices by default), which
    must write every element of ``out``. For an f16/bf16 ``out`` whose value would round more
    than once (:func:`roundings`), the nest writes an f32 temporary and one more nest rounds it
    into ``out``: PyTorch computes a half-precision op in f32 (``at::opmath_type``) and rounds
    its result once, and the value of an ill-conditioned op downstream (a group norm over two
    nearly equal values) depends on every last bit of it."""
    subs = list(lp.idx) if subs is None else subs
    target = out
    wide = accumulation_dtype(out.dtype)
    if wide != out.dtype and roundings(value, out.dtype) > 1:
        target = ctx.temp(out.shape, wide)
    ctx.b.emit(lp, (target.at(*subs), value))
    return settle(ctx, target, out)


def elementwise_rounded_once(ctx: Ctx, fn: Callable[..., object], *operands,
                             out: Tensor) -> Tensor:
    """``elementwise`` computed in ``out``'s accumulation dtype and rounded to ``out`` once:
    a mean's division of an f32 sum, which in f16 could overflow before it is divided."""
    acc = accumulator(ctx, out)
    elementwise(ctx, fn, *operands, out=acc)
    return settle(ctx, acc, out)


def flat_args(args) -> list:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the sequence ``[2, 3]`` (view, permute, ...)."""
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        return list(args[0])
    return list(args)
