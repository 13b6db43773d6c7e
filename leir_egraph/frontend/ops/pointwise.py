"""Element-wise arithmetic, comparisons, casts and activations.

LEIR's only intrinsics are ``exp log sqrt abs erf max min if_then_else`` and ``**``, so every
other function is written out; where the obvious formula overflows, a stable one is used:

    torch.tanh(x)       E=exp(-2*abs(A));  C=if_then_else(A<0,E-1,1-E)/(1+E)   (never inf/inf)
    F.softplus(x)       C=if_then_else(A>20,A,log(1+exp(A)))                     (torch's threshold)
    F.logsigmoid(x)     C=min(A,0)-log(1+exp(-abs(A)))
    torch.sigmoid(x)    C=1/(1+exp(-A))
    F.gelu(x)           C=A*0.5*(1+erf(A/sqrt(2)))
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from ..builder import Tensor
from ..builder import Loops
from ..context import Condition, Ctx, accumulation_dtype, elementwise, emit_output, norm_dim, read
from ..expr import exp, erf, fabs, ite, log, sqrt, vmax, vmin
from .registry import op


def _unary(ctx: Ctx, x, fn, out: Tensor | None = None) -> Tensor:
    return elementwise(ctx, fn, ctx.tensor(x), out=out)


# ---------------------------------------------------------------- arithmetic

@op("add", torch.add, operator.add, methods=("add", "__add__", "__radd__"))
def add(ctx: Ctx, a, b, alpha=1, out=None):
    if alpha != 1:
        return elementwise(ctx, lambda x, y: x + alpha * y, a, b)
    return elementwise(ctx, lambda x, y: x + y, a, b)


@op("sub", torch.sub, torch.subtract, operator.sub, methods=("sub", "subtract", "__sub__"))
def sub(ctx: Ctx, a, b, alpha=1, out=None):
    if alpha != 1:
        return elementwise(ctx, lambda x, y: x - alpha * y, a, b)
    return elementwise(ctx, lambda x, y: x - y, a, b)


@op("rsub", torch.rsub, methods=("__rsub__",))
def rsub(ctx: Ctx, a, b, alpha=1):
    return sub(ctx, b, a, alpha)


@op("mul", torch.mul, torch.multiply, operator.mul, methods=("mul", "multiply", "__mul__",
                                                              "__rmul__"))
def mul(ctx: Ctx, a, b, out=None):
    return elementwise(ctx, lambda x, y: x * y, a, b)


@op("div", torch.div, torch.divide, torch.true_divide, operator.truediv,
    methods=("div", "divide", "true_divide", "__truediv__", "__rtruediv__"))
def div(ctx: Ctx, a, b, rounding_mode=None, out=None):
    if rounding_mode is not None:
        raise ctx.unsupported(f"rounding_mode='{rounding_mode}': LEIR has no floor or trunc "
                              "intrinsic")
    return elementwise(ctx, lambda x, y: x / y, a, b)


@op("neg", torch.neg, torch.negative, operator.neg, methods=("neg", "negative", "__neg__"))
def neg(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: -v)


@op("pos", operator.pos, torch.positive, methods=("positive",))
def pos(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: v)


@op("pow", torch.pow, operator.pow, methods=("pow", "__pow__", "__rpow__"))
def power(ctx: Ctx, a, b):
    return elementwise(ctx, lambda x, y: x ** y, a, b)


@op("square", torch.square, methods=("square",))
def square(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: v ** 2)


@op("abs", torch.abs, torch.absolute, operator.abs, methods=("abs", "absolute", "__abs__"))
def absolute(ctx: Ctx, x):
    return _unary(ctx, x, fabs)


@op("sqrt", torch.sqrt, methods=("sqrt",))
def square_root(ctx: Ctx, x):
    return _unary(ctx, x, sqrt)


@op("rsqrt", torch.rsqrt, methods=("rsqrt",))
def rsqrt(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: 1 / sqrt(v))


@op("reciprocal", torch.reciprocal, methods=("reciprocal",))
def reciprocal(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: 1 / v)


@op("exp", torch.exp, methods=("exp",))
def exponential(ctx: Ctx, x):
    return _unary(ctx, x, exp)


@op("exp2", torch.exp2, methods=("exp2",))
def exp2(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: 2 ** v)


@op("expm1", torch.expm1, methods=("expm1",))
def expm1(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: exp(v) - 1)


@op("log", torch.log, methods=("log",))
def logarithm(ctx: Ctx, x):
    return _unary(ctx, x, log)


@op("log2", torch.log2, methods=("log2",))
def log2(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: log(v) / math.log(2))


@op("log10", torch.log10, methods=("log10",))
def log10(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: log(v) / math.log(10))


@op("log1p", torch.log1p, methods=("log1p",))
def log1p(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: log(1 + v))


@op("erf", torch.erf, torch.special.erf, methods=("erf",))
def error_function(ctx: Ctx, x):
    return _unary(ctx, x, erf)


@op("erfc", torch.erfc, torch.special.erfc, methods=("erfc",))
def erfc(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: 1 - erf(v))


@op("sign", torch.sign, methods=("sign",))
def sign(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: ite(v > 0, 1, ite(v < 0, -1, 0)))


@op("maximum", torch.maximum, torch.fmax, methods=("maximum", "fmax"))
def maximum(ctx: Ctx, a, b):
    return elementwise(ctx, vmax, a, b)


@op("minimum", torch.minimum, torch.fmin, methods=("minimum", "fmin"))
def minimum(ctx: Ctx, a, b):
    return elementwise(ctx, vmin, a, b)


@op("clamp", torch.clamp, torch.clip, methods=("clamp", "clip"))
def clamp(ctx: Ctx, x, min=None, max=None):  # noqa: A002 -- torch's keyword names
    if min is None and max is None:
        raise ctx.unsupported("clamp without min and max")
    if max is None:
        return elementwise(ctx, vmax, x, min)
    if min is None:
        return elementwise(ctx, vmin, x, max)
    return elementwise(ctx, lambda v, lo, hi: vmin(vmax(v, lo), hi), x, min, max)


@op("clamp_min", torch.clamp_min, methods=("clamp_min",))
def clamp_min(ctx: Ctx, x, min):  # noqa: A002
    return clamp(ctx, x, min=min)


@op("clamp_max", torch.clamp_max, methods=("clamp_max",))
def clamp_max(ctx: Ctx, x, max):  # noqa: A002
    return clamp(ctx, x, max=max)


@op("lerp", torch.lerp, methods=("lerp",))
def lerp(ctx: Ctx, start, end, weight):
    return elementwise(ctx, lambda s, e, w: s + w * (e - s), start, end, weight)


@op("addcmul", torch.addcmul, methods=("addcmul",))
def addcmul(ctx: Ctx, x, t1, t2, value=1):
    return elementwise(ctx, lambda v, a, b: v + value * a * b, x, t1, t2)


@op("addcdiv", torch.addcdiv, methods=("addcdiv",))
def addcdiv(ctx: Ctx, x, t1, t2, value=1):
    return elementwise(ctx, lambda v, a, b: v + value * a / b, x, t1, t2)


# ---------------------------------------------------------------- comparisons and selection

def _compare(symbol):
    def emit(ctx: Ctx, a, b):
        return elementwise(ctx, lambda x, y: ite(getattr(x, symbol)(y), 1, 0), a, b)
    return emit


for _name, _sym, _fns in [("eq", "__eq__", (torch.eq, operator.eq)),
                          ("ne", "__ne__", (torch.ne, operator.ne, torch.not_equal)),
                          ("lt", "__lt__", (torch.lt, operator.lt, torch.less)),
                          ("le", "__le__", (torch.le, operator.le, torch.less_equal)),
                          ("gt", "__gt__", (torch.gt, operator.gt, torch.greater)),
                          ("ge", "__ge__", (torch.ge, operator.ge, torch.greater_equal))]:
    op(_name, *_fns, methods=(_name, _sym))(_compare(_sym))


@op("logical_not", torch.logical_not, operator.invert, torch.bitwise_not,
    methods=("logical_not", "bitwise_not", "__invert__"))
def logical_not(ctx: Ctx, x):
    t = ctx.tensor(x)
    if t.dtype != "bool":
        raise ctx.unsupported(f"bitwise/logical not of a {t.dtype} tensor (bool only)")
    return elementwise(ctx, lambda v: ite(v, 0, 1), t)


def _logic(symbol):
    def emit(ctx: Ctx, a, b):
        ta, tb = ctx.tensor(a), ctx.tensor(b)
        if ta.dtype != "bool" or tb.dtype != "bool":
            raise ctx.unsupported("logical operations on non-bool tensors")
        out = ctx.out()
        lp = Loops(out.shape)
        x, y = read(ta, out.shape, lp.idx), read(tb, out.shape, lp.idx)
        ctx.b.emit(lp, (out.at(*lp), ite(getattr(x, symbol)(y), 1, 0)))
        return out
    return emit


op("logical_and", torch.logical_and, operator.and_, torch.bitwise_and,
   methods=("logical_and", "bitwise_and", "__and__"))(_logic("__and__"))
op("logical_or", torch.logical_or, operator.or_, torch.bitwise_or,
   methods=("logical_or", "bitwise_or", "__or__"))(_logic("__or__"))


@op("where", torch.where, methods=("where",))
def where(ctx: Ctx, cond, x=None, y=None):
    if x is None or y is None:
        raise ctx.unsupported("torch.where(cond) returns indices (data-dependent shape)")
    c = ctx.tensor(cond)
    if c.dtype != "bool":
        raise ctx.unsupported(f"a {c.dtype} condition (bool only)")
    return elementwise(ctx, ite, Condition(c), x, y)


@op("masked_fill", torch.masked_fill, methods=("masked_fill",))
def masked_fill(ctx: Ctx, x, mask, value):
    m = ctx.tensor(mask)
    if m.dtype != "bool":
        raise ctx.unsupported(f"a {m.dtype} mask (bool only)")
    return elementwise(ctx, lambda v, c, f: ite(c, f, v), x, Condition(m), value)


# ---------------------------------------------------------------- casts and identities

def _cast(ctx: Ctx, x):
    t = ctx.tensor(x)
    if t.dtype == ctx.out_dtype():
        return t  # no conversion: the same values
    return _unary(ctx, t, lambda v: v)


@op("to", methods=("to", "type", "float", "double", "half", "int", "long", "bool", "type_as"))
def to(ctx: Ctx, x, *args, **kwargs):
    """A dtype conversion (the device, if any, does not change values)."""
    return _cast(ctx, x)


@op("identity", torch.clone, methods=("clone", "contiguous", "detach", "requires_grad_",
                                      "cpu", "cuda"))
def identity(ctx: Ctx, x, *args, **kwargs):
    return ctx.tensor(x)


@op("dropout", F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout,
    torch.dropout, methods=("dropout",))
def dropout(ctx: Ctx, x, p=0.5, training=True, inplace=False):
    if training and p > 0:
        raise ctx.unsupported("dropout in training mode is random; call module.eval() or use "
                              "p=0")
    return ctx.tensor(x)


# ---------------------------------------------------------------- activations

@op("relu", torch.relu, F.relu, methods=("relu",))
def relu(ctx: Ctx, x, inplace=False, out=None):
    return _unary(ctx, x, lambda v: vmax(v, 0), out)


@op("relu6", F.relu6)
def relu6(ctx: Ctx, x, inplace=False):
    return _unary(ctx, x, lambda v: vmin(vmax(v, 0), 6))


@op("leaky_relu", F.leaky_relu, torch._C._nn.leaky_relu)
def leaky_relu(ctx: Ctx, x, negative_slope=0.01, inplace=False):
    return _unary(ctx, x, lambda v: ite(v < 0, negative_slope * v, v))


@op("elu", F.elu)
def elu(ctx: Ctx, x, alpha=1.0, inplace=False):
    return _unary(ctx, x, lambda v: ite(v < 0, alpha * (exp(v) - 1), v))


@op("celu", F.celu, torch.celu)
def celu(ctx: Ctx, x, alpha=1.0, inplace=False):
    return _unary(ctx, x, lambda v: vmax(0, v) + vmin(0, alpha * (exp(v / alpha) - 1)))


SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717


@op("selu", F.selu, torch.selu)
def selu(ctx: Ctx, x, inplace=False):
    return _unary(ctx, x, lambda v: SELU_SCALE * (vmax(0, v) + vmin(0, SELU_ALPHA * (exp(v) - 1))))


@op("sigmoid", torch.sigmoid, F.sigmoid, torch.special.expit, methods=("sigmoid",))
def sigmoid(ctx: Ctx, x, out: Tensor | None = None):
    return _unary(ctx, x, sigmoid_of, out)


@op("logsigmoid", F.logsigmoid)
def logsigmoid(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: vmin(v, 0) - log(1 + exp(-fabs(v))))


@op("silu", F.silu)
def silu(ctx: Ctx, x, inplace=False):
    return _unary(ctx, x, lambda v: v / (1 + exp(-v)))


def tanh_exp(v):
    """``e = exp(-2|v|)``, the one exponential of :func:`tanh_from`."""
    return exp(-2 * fabs(v))


def tanh_from(v, e):
    """tanh(v) = sign(v)*(1-e)/(1+e) with ``e = tanh_exp(v)`` in (0, 1]: no overflow for any
    v (``e`` is computed once, in a temporary, by the caller)."""
    return ite(v < 0, e - 1, 1 - e) / (1 + e)


def sigmoid_of(v):
    return 1 / (1 + exp(-v))


def emit_tanh(ctx: Ctx, x: Tensor, out: Tensor) -> Tensor:
    """tanh(x) in two nests: ``e = exp(-2|x|)``, then :func:`tanh_from` (``e`` in the dtype
    the op computes in: f32 for an f16/bf16 ``out``)."""
    e = ctx.temp(x.shape, accumulation_dtype(out.dtype))
    elementwise(ctx, tanh_exp, x, out=e)
    return elementwise(ctx, tanh_from, x, e, out=out)


@op("tanh", torch.tanh, F.tanh, methods=("tanh",))
def tanh(ctx: Ctx, x):
    return emit_tanh(ctx, ctx.tensor(x), ctx.out())


@op("tanhshrink", F.tanhshrink)
def tanhshrink(ctx: Ctx, x):
    t = ctx.tensor(x)
    th = emit_tanh(ctx, t, ctx.temp(t.shape, accumulation_dtype(ctx.out_dtype())))
    return elementwise(ctx, lambda v, w: v - w, t, th)


def emit_softplus(ctx: Ctx, x: Tensor, out: Tensor, beta=1.0, threshold=20.0) -> Tensor:
    """log(1+exp(beta*x))/beta, and x itself where beta*x > threshold (as torch does)."""
    if beta == 1:
        return elementwise(ctx, lambda v: ite(v > threshold, v, log(1 + exp(v))), x, out=out)
    return elementwise(ctx, lambda v: ite(v * beta > threshold, v, log(1 + exp(v * beta)) / beta),
                       x, out=out)


@op("softplus", F.softplus)
def softplus(ctx: Ctx, x, beta=1.0, threshold=20.0):
    return emit_softplus(ctx, ctx.tensor(x), ctx.out(), beta, threshold)


@op("mish", F.mish)
def mish(ctx: Ctx, x, inplace=False):
    t = ctx.tensor(x)
    dtype = accumulation_dtype(ctx.out_dtype())   # the op's own steps: f32 for f16/bf16
    sp = emit_softplus(ctx, t, ctx.temp(t.shape, dtype))
    th = emit_tanh(ctx, sp, ctx.temp(t.shape, dtype))
    return elementwise(ctx, lambda v, w: v * w, t, th)


@op("gelu", F.gelu)
def gelu(ctx: Ctx, x, approximate="none"):
    t = ctx.tensor(x)
    if approximate == "none":
        return _unary(ctx, t, lambda v: v * 0.5 * (1 + erf(v / sqrt(2))))
    if approximate != "tanh":
        raise ctx.unsupported(f"approximate='{approximate}'")
    dtype = accumulation_dtype(ctx.out_dtype())   # the op's own steps: f32 for f16/bf16
    # v*v*v rather than v**3: TVM warns that pow with y >= 3 may misbehave for negative x
    inner = elementwise(ctx, lambda v: sqrt(2 / math.pi) * (v + 0.044715 * (v * v * v)), t,
                        out=ctx.temp(t.shape, dtype))
    th = emit_tanh(ctx, inner, ctx.temp(t.shape, dtype))
    return elementwise(ctx, lambda v, w: v * 0.5 * (1 + w), t, th)


@op("softsign", F.softsign)
def softsign(ctx: Ctx, x):
    return _unary(ctx, x, lambda v: v / (1 + fabs(v)))


@op("hardsigmoid", F.hardsigmoid)
def hardsigmoid(ctx: Ctx, x, inplace=False):
    return _unary(ctx, x, lambda v: vmin(vmax(v + 3, 0), 6) / 6)


@op("hardswish", F.hardswish)
def hardswish(ctx: Ctx, x, inplace=False):
    return _unary(ctx, x, lambda v: v * vmin(vmax(v + 3, 0), 6) / 6)


@op("hardtanh", F.hardtanh)
def hardtanh(ctx: Ctx, x, min_val=-1.0, max_val=1.0, inplace=False):
    return _unary(ctx, x, lambda v: vmin(vmax(v, min_val), max_val))


@op("threshold", F.threshold, torch.threshold)
def threshold(ctx: Ctx, x, threshold, value, inplace=False):
    return _unary(ctx, x, lambda v: ite(v > threshold, v, value))


@op("hardshrink", F.hardshrink, methods=("hardshrink",))
def hardshrink(ctx: Ctx, x, lambd=0.5):
    return _unary(ctx, x, lambda v: ite(fabs(v) > lambd, v, 0))


@op("softshrink", F.softshrink)
def softshrink(ctx: Ctx, x, lambd=0.5):
    return _unary(ctx, x, lambda v: ite(v > lambd, v - lambd, ite(v < -lambd, v + lambd, 0)))


@op("glu", F.glu)
def glu(ctx: Ctx, x, dim=-1):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    half = t.shape[d] // 2
    out = ctx.out()
    gate = ctx.temp(out.shape, accumulation_dtype(out.dtype))
    lp = Loops(out.shape)
    shifted = [i + half if k == d else i for k, i in enumerate(lp.idx)]
    ctx.b.emit(lp, (gate.at(*lp), 1 / (1 + exp(-t.at(*shifted)))))
    lp = Loops(out.shape)
    return emit_output(ctx, lp, out, t.at(*lp) * gate.at(*lp))

