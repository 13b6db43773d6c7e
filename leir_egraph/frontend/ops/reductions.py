"""Reductions, softmax-like normalisations, norms and scans.

A reduction loops over the input's dims in order (reduced dims included, as the reference
translator does) and accumulates with LEIR's implicit-initialisation forms:

    torch.sum(x, 1)          C_{tx,c}=C_{tx,c}+A_{tx,a,c}
    torch.amax(x, 1, True)   C_{tx,0,c}=max(C_{tx,0,c},A_{tx,a,c})
    torch.argmax(x, 1)       D_{tx,c}=max(D_{tx,c},A_{tx,a,c});  then
                             C^{i64}_{tx,c}=min(C_{tx,c},if_then_else(A_{tx,a,c}==D_{tx,c},a,N))
                             (the first maximal index, as PyTorch returns it)
    torch.cumsum(x, 1)       C_{tx,a}=if_then_else(a-1<0,0,C_{tx,a-1})+A_{tx,a}   (a linear scan)

Sums, products, scans and statistics of f16/bf16 tensors accumulate in f32 and are rounded to
the output's dtype once, as PyTorch's CPU kernels do (``context.accumulation_dtype``):

    torch.sum(x^{f16}, 1)    D^{f32}_{tx,c}=D^{f32}_{tx,c}+A^{f16}_{tx,a,c};  C^{f16}_{tx,c}=D^{f32}_{tx,c}
"""

from __future__ import annotations

from collections import namedtuple

import math

import torch
import torch.nn.functional as F

from ..builder import Loops, Tensor
from ..context import (Ctx, accumulation_dtype, accumulator, elementwise, emit_output,
                       elementwise_rounded_once, norm_dim, norm_dims, read, settle)
from ..expr import ZERO, exp, fabs, ite, log, sqrt, vmax, vmin
from .registry import op


def _subs(lp_idx, rank, dims, keepdim):
    """Target subscripts of a reduction: the input's indices minus the reduced dims (``0`` in
    their place when ``keepdim``)."""
    out = []
    for k in range(rank):
        if k in dims:
            if keepdim:
                out.append(ZERO)
        else:
            out.append(lp_idx[k])
    return out


def reduce_into(ctx: Ctx, x: Tensor, dims, out: Tensor, keepdim: bool, combine: str,
                value=lambda v: v) -> Tensor:
    """``out = combine over dims of value(x)``; ``combine`` in ``+ * max min``. Sums and
    products accumulate in the accumulation dtype and are rounded to ``out`` once (``max`` and
    ``min`` are exact in any dtype)."""
    if combine in ("max", "min"):
        return accumulate(ctx, x, dims, out, keepdim, combine, value)
    acc = accumulator(ctx, out)
    accumulate(ctx, x, dims, acc, keepdim, combine, value)
    return settle(ctx, acc, out)


def accumulate(ctx: Ctx, x: Tensor, dims, out: Tensor, keepdim: bool, combine: str,
               value=lambda v: v) -> Tensor:
    """The one nest ``out = combine over dims of value(x)``, computed in ``out``'s dtype."""
    lp = Loops(x.shape)
    target = out.at(*_subs(lp.idx, x.rank, dims, keepdim))
    v = value(read(x, x.shape, lp.idx, out.dtype))
    rhs = {"+": lambda: target + v, "*": lambda: target * v,
           "max": lambda: vmax(target, v), "min": lambda: vmin(target, v)}[combine]()
    ctx.b.emit(lp, (target, rhs))
    return out


def _reduced_shape(shape, dims, keepdim):
    return tuple(1 if k in dims else s for k, s in enumerate(shape) if keepdim or k not in dims)


def _count(shape, dims) -> int:
    return int(math.prod(shape[k] for k in dims))


def _args(ctx, x, dim):
    t = ctx.tensor(x)
    return t, norm_dims(dim, t.rank, ctx)


@op("sum", torch.sum, methods=("sum",))
def sum_(ctx: Ctx, x, dim=None, keepdim=False, dtype=None):
    t, dims = _args(ctx, x, dim)
    return reduce_into(ctx, t, dims, ctx.out(), keepdim, "+")


@op("prod", torch.prod, methods=("prod",))
def prod(ctx: Ctx, x, dim=None, keepdim=False, dtype=None):
    t, dims = _args(ctx, x, dim)
    return reduce_into(ctx, t, dims, ctx.out(), keepdim, "*")


def emit_mean(ctx: Ctx, t: Tensor, dims, keepdim: bool, out: Tensor) -> Tensor:
    """The sum into a temporary, then a division by the element count (two nests); for f16/bf16
    the sum and the division are f32, rounded to ``out`` in a third nest (PyTorch's order)."""
    total = accumulate(ctx, t, dims, ctx.temp(out.shape, accumulation_dtype(out.dtype)),
                       keepdim, "+")
    n = _count(t.shape, dims)
    return elementwise_rounded_once(ctx, lambda s: s / n, total, out=out)


@op("mean", torch.mean, methods=("mean",))
def mean(ctx: Ctx, x, dim=None, keepdim=False, dtype=None):
    t, dims = _args(ctx, x, dim)
    return emit_mean(ctx, t, dims, keepdim, ctx.out())


@op("amax", torch.amax, methods=("amax",))
def amax(ctx: Ctx, x, dim=(), keepdim=False):
    t, dims = _args(ctx, x, dim if dim != () else None)
    return reduce_into(ctx, t, dims, ctx.out(), keepdim, "max")


@op("amin", torch.amin, methods=("amin",))
def amin(ctx: Ctx, x, dim=(), keepdim=False):
    t, dims = _args(ctx, x, dim if dim != () else None)
    return reduce_into(ctx, t, dims, ctx.out(), keepdim, "min")


def emit_arg(ctx: Ctx, t: Tensor, dim, keepdim: bool, out: Tensor, combine: str,
             extreme: Tensor | None = None) -> Tensor:
    """Index of the first maximum (``max``) or minimum (``min``) along ``dim`` (``None``:
    over the flattened tensor): the extreme value first, then the smallest index holding it."""
    dims = list(range(t.rank)) if dim is None else [norm_dim(dim, t.rank, ctx)]
    flat = dim is None
    if extreme is None:
        shape = _reduced_shape(t.shape, dims, keepdim and not flat)
        extreme = reduce_into(ctx, t, dims, ctx.temp(shape, t.dtype), keepdim and not flat,
                              combine)
    lp = Loops(t.shape)
    if flat:
        position, stride = ZERO, 1
        for k in reversed(range(t.rank)):
            position = lp[k] * stride + position
            stride *= t.shape[k]
        limit = t.numel
        ext_subs = [ZERO] * extreme.rank
        out_subs = [ZERO] * out.rank
    else:
        position, limit = lp[dims[0]], t.shape[dims[0]]
        ext_subs = _subs(lp.idx, t.rank, dims, extreme.rank == t.rank)
        out_subs = _subs(lp.idx, t.rank, dims, keepdim)
    target = out.at(*out_subs)
    hit = t.at(*lp) == extreme.at(*ext_subs)
    ctx.b.emit(lp, (target, vmin(target, ite(hit, position, limit))))
    return out


@op("argmax", torch.argmax, methods=("argmax",))
def argmax(ctx: Ctx, x, dim=None, keepdim=False):
    return emit_arg(ctx, ctx.tensor(x), dim, keepdim, ctx.out(), "max")


@op("argmin", torch.argmin, methods=("argmin",))
def argmin(ctx: Ctx, x, dim=None, keepdim=False):
    return emit_arg(ctx, ctx.tensor(x), dim, keepdim, ctx.out(), "min")


def _max_min(combine: str, binary: str):
    def emit(ctx: Ctx, x, dim=None, keepdim=False, *, other=None):
        if isinstance(dim, (Tensor, torch.Tensor)) or other is not None:
            from .pointwise import maximum, minimum
            return (maximum if binary == "maximum" else minimum)(ctx, x, other if other is not None
                                                                 else dim)
        t = ctx.tensor(x)
        if dim is None:
            return reduce_into(ctx, t, list(range(t.rank)), ctx.out(), False, combine)
        d = norm_dim(dim, t.rank, ctx)
        values = reduce_into(ctx, t, [d], ctx.out(0), keepdim, combine)
        indices = emit_arg(ctx, t, d, keepdim, ctx.out(1), combine, extreme=values)
        return ValuesIndices(values, indices)
    return emit


# ``torch.max(x, dim)`` returns a named tuple: ``[0]`` and ``.values`` are the same tensor
ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


op("max", torch.max, methods=("max",))(_max_min("max", "maximum"))
op("min", torch.min, methods=("min",))(_max_min("min", "minimum"))


# ---------------------------------------------------------------- softmax family

def _row_stats(ctx: Ctx, t: Tensor, d: int, dtype: str, shift=lambda v: v):
    """Row maxima ``D`` and sums ``E = sum exp(x - D)`` along ``d`` (two temporaries; the sums
    in the accumulation dtype)."""
    shape = _reduced_shape(t.shape, [d], False)
    mx = reduce_into(ctx, t, [d], ctx.temp(shape, dtype), False, "max", shift)
    lp = Loops(t.shape)
    s = ctx.temp(shape, accumulation_dtype(dtype))
    sub = _subs(lp.idx, t.rank, [d], False)
    target = s.at(*sub)
    ctx.b.emit(lp, (target, target + exp(shift(read(t, t.shape, lp.idx, dtype)) - mx.at(*sub))))
    return mx, s


def emit_softmax(ctx: Ctx, t: Tensor, dim, out: Tensor, log_: bool = False,
                 negate: bool = False) -> Tensor:
    """softmax: max, sum of exp(x - max), then exp(x - max)/sum (log_softmax: x - max - log(sum))."""
    d = norm_dim(dim, t.rank, ctx)
    shift = (lambda v: -v) if negate else (lambda v: v)
    mx, s = _row_stats(ctx, t, d, out.dtype, shift)
    lp = Loops(t.shape)
    sub = _subs(lp.idx, t.rank, [d], False)
    v = shift(read(t, t.shape, lp.idx, out.dtype))
    if log_:
        rhs = v - mx.at(*sub) - log(s.at(*sub))
    else:
        rhs = exp(v - mx.at(*sub)) / s.at(*sub)
    return emit_output(ctx, lp, out, rhs)


def _softmax_dim(ctx, t, dim):
    if dim is None:  # torch's legacy implicit dim
        dim = 0 if t.rank in (0, 1, 3) else 1
    return dim


@op("softmax", torch.softmax, F.softmax, torch.special.softmax, methods=("softmax",))
def softmax(ctx: Ctx, x, dim=None, _stacklevel=3, dtype=None):
    t = ctx.tensor(x)
    return emit_softmax(ctx, t, _softmax_dim(ctx, t, dim), ctx.out())


@op("log_softmax", torch.log_softmax, F.log_softmax, torch.special.log_softmax,
    methods=("log_softmax",))
def log_softmax(ctx: Ctx, x, dim=None, _stacklevel=3, dtype=None):
    t = ctx.tensor(x)
    return emit_softmax(ctx, t, _softmax_dim(ctx, t, dim), ctx.out(), log_=True)


@op("softmin", F.softmin)
def softmin(ctx: Ctx, x, dim=None, _stacklevel=3, dtype=None):
    t = ctx.tensor(x)
    return emit_softmax(ctx, t, _softmax_dim(ctx, t, dim), ctx.out(), negate=True)


@op("logsumexp", torch.logsumexp, torch.special.logsumexp, methods=("logsumexp",))
def logsumexp(ctx: Ctx, x, dim=None, keepdim=False):
    """max + log(sum exp(x - max)): the max subtraction keeps exp from overflowing."""
    t, dims = _args(ctx, x, dim)
    out = ctx.out()
    shape = _reduced_shape(t.shape, dims, False)
    mx = reduce_into(ctx, t, dims, ctx.temp(shape, out.dtype), False, "max")
    lp = Loops(t.shape)
    s = ctx.temp(shape, accumulation_dtype(out.dtype))
    sub = _subs(lp.idx, t.rank, dims, False)
    target = s.at(*sub)
    ctx.b.emit(lp, (target, target + exp(read(t, t.shape, lp.idx, out.dtype) - mx.at(*sub))))
    lp = Loops(out.shape)
    # out has the kept dims (size 1) when keepdim: read the statistics without them
    kept = [i for k, i in enumerate(lp.idx) if not (keepdim and k in dims)]
    return emit_output(ctx, lp, out, mx.at(*kept) + log(s.at(*kept)))


# ---------------------------------------------------------------- variance and norms

def emit_variance(ctx: Ctx, t: Tensor, dims, keepdim: bool, out: Tensor, correction=1,
                  root=False) -> Tensor:
    """Two-pass variance: mean, sum of squared deviations, divided by N - correction; every
    step in the accumulation dtype, rounded to ``out`` once."""
    stat_dtype = accumulation_dtype(out.dtype)
    stat_shape = _reduced_shape(t.shape, dims, True)
    mu = emit_mean(ctx, t, dims, True, ctx.temp(stat_shape, stat_dtype))
    lp = Loops(t.shape)
    ss = ctx.temp(out.shape, stat_dtype)
    target = ss.at(*_subs(lp.idx, t.rank, dims, keepdim))
    mu_sub = [ZERO if k in dims else i for k, i in enumerate(lp.idx)]
    ctx.b.emit(lp, (target, target + (read(t, t.shape, lp.idx, out.dtype) - mu.at(*mu_sub)) ** 2))
    n = _count(t.shape, dims) - correction
    if root:
        return elementwise_rounded_once(ctx, lambda v: sqrt(v / n), ss, out=out)
    return elementwise_rounded_once(ctx, lambda v: v / n, ss, out=out)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 0 if unbiased is False else 1


@op("var", torch.var, methods=("var",))
def var(ctx: Ctx, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # torch.var(x, unbiased)
        unbiased, dim = dim, None
    t, dims = _args(ctx, x, dim)
    return emit_variance(ctx, t, dims, keepdim, ctx.out(), _correction(unbiased, correction))


@op("std", torch.std, methods=("std",))
def std(ctx: Ctx, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    t, dims = _args(ctx, x, dim)
    return emit_variance(ctx, t, dims, keepdim, ctx.out(), _correction(unbiased, correction),
                         root=True)


def emit_norm(ctx: Ctx, t: Tensor, p, dims, keepdim: bool, out: Tensor) -> Tensor:
    """Vector p-norm over ``dims``: fro/2 -> sqrt(sum x**2), 1 -> sum |x|, inf -> max |x|
    (sums and roots in the accumulation dtype)."""
    stat_dtype = accumulation_dtype(out.dtype)
    if p in ("fro", None, 2, 2.0):
        ss = accumulate(ctx, t, dims, ctx.temp(out.shape, stat_dtype), keepdim, "+",
                        lambda v: v ** 2)
        return elementwise_rounded_once(ctx, sqrt, ss, out=out)
    if p in (1, 1.0):
        return reduce_into(ctx, t, dims, out, keepdim, "+", fabs)
    if p == math.inf:
        return reduce_into(ctx, t, dims, out, keepdim, "max", fabs)
    if p == -math.inf:
        return reduce_into(ctx, t, dims, out, keepdim, "min", fabs)
    if isinstance(p, (int, float)) and p > 0:
        s = accumulate(ctx, t, dims, ctx.temp(out.shape, stat_dtype), keepdim, "+",
                       lambda v: fabs(v) ** p)
        return elementwise_rounded_once(ctx, lambda v: v ** (1 / p), s, out=out)
    raise ctx.unsupported(f"p={p!r} norm")


@op("norm", torch.norm, methods=("norm",))
def norm(ctx: Ctx, x, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    t, dims = _args(ctx, x, dim)
    if p == "nuc":
        raise ctx.unsupported("the nuclear norm needs singular values")
    return emit_norm(ctx, t, p, dims, keepdim, ctx.out())


@op("vector_norm", torch.linalg.vector_norm)
def vector_norm(ctx: Ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    t, dims = _args(ctx, x, dim)
    return emit_norm(ctx, t, ord, dims, keepdim, ctx.out())


@op("linalg_norm", torch.linalg.norm)
def linalg_norm(ctx: Ctx, x, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):  # noqa: A002
    t, dims = _args(ctx, x, dim)
    if ord is not None and len(dims) == 2 and ord not in ("fro",):
        raise ctx.unsupported(f"matrix norm ord={ord!r}")
    return emit_norm(ctx, t, ord if ord is not None else 2, dims, keepdim, ctx.out())


@op("normalize", F.normalize)
def normalize(ctx: Ctx, x, p=2.0, dim=1, eps=1e-12, out=None):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    dtype = ctx.out_dtype()
    n = emit_norm(ctx, t, p, [d], True, ctx.temp(_reduced_shape(t.shape, [d], True), dtype))
    return elementwise(ctx, lambda v, m: v / vmax(m, eps), t, n)


# ---------------------------------------------------------------- scans

def emit_scan(ctx: Ctx, t: Tensor, dim, out: Tensor, combine: str) -> Tensor:
    """Inclusive prefix ``+`` or ``*`` along ``dim`` as a linear scan that reads the element
    the previous iteration wrote: ``C_{a}=if_then_else(a-1<0,0,C_{a-1})+A_{a}``. An f16/bf16
    scan runs in f32 and is rounded to ``out`` in a second nest (PyTorch carries the running
    value in f32)."""
    d = norm_dim(dim, t.rank, ctx)
    if t.rank == 0:
        return elementwise(ctx, lambda v: v, t, out=out)
    acc = accumulator(ctx, out)
    _scan(ctx, t, d, acc, combine)
    return settle(ctx, acc, out)


def _scan(ctx: Ctx, t: Tensor, d: int, out: Tensor, combine: str) -> None:
    lp = Loops(t.shape, serial=[d])
    prev = [i - 1 if k == d else i for k, i in enumerate(lp.idx)]
    identity = 0 if combine == "+" else 1
    carried = ite(lp[d] - 1 < 0, identity, out.at(*prev))
    x = read(t, t.shape, lp.idx, out.dtype)
    ctx.b.emit(lp, (out.at(*lp), carried + x if combine == "+" else carried * x))


@op("cumsum", torch.cumsum, methods=("cumsum",))
def cumsum(ctx: Ctx, x, dim, dtype=None, out=None):
    return emit_scan(ctx, ctx.tensor(x), dim, ctx.out(), "+")


@op("cumprod", torch.cumprod, methods=("cumprod",))
def cumprod(ctx: Ctx, x, dim, dtype=None, out=None):
    return emit_scan(ctx, ctx.tensor(x), dim, ctx.out(), "*")

