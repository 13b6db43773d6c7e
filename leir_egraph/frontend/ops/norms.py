"""Normalisation layers: layer, group, instance, batch (batch statistics in training mode,
running statistics in eval mode) and RMS norm.

Each statistic is its own nest, as in the reference translator (six nests for LayerNorm over
the last three dims of [16,64,256,128]):

    F_{tx}=F_{tx}+A_{tx,a,c,d}                  sum
    G_{tx}=F_{tx}/2097152                       mean
    H_{tx}=H_{tx}+(A_{tx,a,c,d}-G_{tx})**2      squared deviations
    I_{tx}=H_{tx}/2097152                       biased variance
    J_{tx,a,c,d}=(A_{tx,a,c,d}-G_{tx})/sqrt(I_{tx}+1e-05)
    C_{tx,a,c,d}=D_{a,c,d}*J_{tx,a,c,d}+E_{a,c,d}

The statistics (F G H I) of an f16/bf16 input are f32 tensors, as PyTorch computes them; the
normalised values are computed in the output's dtype from them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..builder import Loops, Tensor
from ..context import Ctx, accumulation_dtype, elementwise, emit_output, read
from ..expr import sqrt
from .registry import op


def emit_standardize(ctx: Ctx, x: Tensor, extents, x_subs, stat_subs, stat_shape, eps,
                     out: Tensor, out_subs=None) -> Tensor:
    """Mean and biased variance over the loops of ``extents`` that do not index the statistics,
    then ``out[x_subs] = (x - mean)/sqrt(var + eps)``. ``x_subs(idx)``/``stat_subs(idx)`` map
    the loop indices to subscripts (GroupNorm reads channel ``a*8+c``)."""
    dtype = out.dtype
    stat_dtype = accumulation_dtype(dtype)
    n = math.prod(extents) // max(1, math.prod(stat_shape))

    def stats_nest(fn):
        lp = Loops(extents)
        s = ctx.temp(stat_shape, stat_dtype)
        target = s.at(*stat_subs(lp.idx))
        ctx.b.emit(lp, (target, target + fn(read(x, x.shape, x_subs(lp.idx), dtype), lp)))
        return s

    total = stats_nest(lambda v, lp: v)
    mean = elementwise(ctx, lambda v: v / n, total, out=ctx.temp(stat_shape, stat_dtype))
    sq = stats_nest(lambda v, lp: (v - mean.at(*stat_subs(lp.idx))) ** 2)
    var = elementwise(ctx, lambda v: v / n, sq, out=ctx.temp(stat_shape, stat_dtype))
    lp = Loops(extents)
    st = stat_subs(lp.idx)
    value = (read(x, x.shape, x_subs(lp.idx), dtype) - mean.at(*st)) / sqrt(var.at(*st) + eps)
    return emit_output(ctx, lp, out, value, (out_subs or x_subs)(lp.idx))


def emit_affine(ctx: Ctx, normed: Tensor, weight, bias, out: Tensor, param_dims) -> Tensor:
    """``out = weight*normed + bias`` with weight/bias indexed by ``param_dims`` of ``out``."""
    w = ctx.tensor(weight) if weight is not None else None
    b = ctx.tensor(bias) if bias is not None else None
    lp = Loops(out.shape)
    p = [lp[d] for d in param_dims]
    value = normed.at(*lp)
    if w is not None:
        value = read(w, w.shape, p, out.dtype) * value
    if b is not None:
        value = value + read(b, b.shape, p, out.dtype)
    return emit_output(ctx, lp, out, value)


def _finish(ctx: Ctx, x: Tensor, weight, bias, param_dims, standardize) -> Tensor:
    """Standardise into the output directly when there is no affine step, else into a temp of
    the dtype the op computes in (f32 for f16/bf16: PyTorch rounds a norm's result once)."""
    out = ctx.out()
    if weight is None and bias is None:
        return standardize(out)
    normed = standardize(ctx.temp(out.shape, accumulation_dtype(out.dtype)))
    return emit_affine(ctx, normed, weight, bias, out, param_dims)


@op("layer_norm", F.layer_norm, torch.layer_norm)
def layer_norm(ctx: Ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    t = ctx.tensor(x)
    k = len(normalized_shape) if not isinstance(normalized_shape, int) else 1
    lead = t.rank - k
    return _finish(ctx, t, weight, bias, range(lead, t.rank), lambda out: emit_standardize(
        ctx, t, t.shape, lambda i: list(i), lambda i: list(i[:lead]) or [], t.shape[:lead] or (),
        eps, out))


@op("rms_norm", F.rms_norm, torch.rms_norm)
def rms_norm(ctx: Ctx, x, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x**2) + eps) * weight; eps defaults to the machine epsilon of the dtype
    PyTorch computes in (f32 for f16/bf16 inputs, ``torch._decomp``'s ``_fused_rms_norm``)."""
    t = ctx.tensor(x)
    out = ctx.out()
    k = len(normalized_shape) if not isinstance(normalized_shape, int) else 1
    lead = t.rank - k
    stat_dtype = accumulation_dtype(out.dtype)
    if eps is None:
        eps = torch.finfo(torch.float64 if stat_dtype == "f64" else torch.float32).eps
    n = math.prod(t.shape[lead:])
    lp = Loops(t.shape)
    ss = ctx.temp(t.shape[:lead], stat_dtype)
    target = ss.at(*lp.idx[:lead])
    ctx.b.emit(lp, (target, target + read(t, t.shape, lp.idx, out.dtype) ** 2))
    ms = elementwise(ctx, lambda v: v / n, ss, out=ctx.temp(t.shape[:lead], stat_dtype))
    lp = Loops(t.shape)
    value = read(t, t.shape, lp.idx, out.dtype) / sqrt(ms.at(*lp.idx[:lead]) + eps)
    if weight is not None:
        w = ctx.tensor(weight)
        value = value * read(w, w.shape, lp.idx[lead:], out.dtype)
    return emit_output(ctx, lp, out, value)


@op("group_norm", F.group_norm, torch.group_norm)
def group_norm(ctx: Ctx, x, num_groups, weight=None, bias=None, eps=1e-5):
    t = ctx.tensor(x)
    n_batch, channels = t.shape[0], t.shape[1]
    per_group = channels // num_groups
    spatial = t.shape[2:]
    extents = (n_batch, num_groups, per_group) + spatial

    def x_subs(i):
        return [i[0], i[1] * per_group + i[2], *i[3:]]

    return _finish(ctx, t, weight, bias, [1], lambda out: emit_standardize(
        ctx, t, extents, x_subs, lambda i: [i[0], i[1]], (n_batch, num_groups), eps, out))


@op("instance_norm", F.instance_norm, torch.instance_norm)
def instance_norm(ctx: Ctx, x, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5, cudnn_enabled=False):
    t = ctx.tensor(x)
    if not use_input_stats:
        return _with_running_stats(ctx, t, running_mean, running_var, weight, bias, eps)
    return _finish(ctx, t, weight, bias, [1], lambda out: emit_standardize(
        ctx, t, t.shape, lambda i: list(i), lambda i: [i[0], i[1]], t.shape[:2], eps, out))


@op("batch_norm", F.batch_norm, torch.batch_norm)
def batch_norm(ctx: Ctx, x, running_mean=None, running_var=None, weight=None, bias=None,
               training=False, momentum=0.1, eps=1e-5, cudnn_enabled=False):
    """Training mode (or no running statistics): statistics of the batch over every dim but
    the channels (biased variance, what the output uses); eval mode: the running statistics."""
    t = ctx.tensor(x)
    if not training and running_mean is not None:
        return _with_running_stats(ctx, t, running_mean, running_var, weight, bias, eps)
    return _finish(ctx, t, weight, bias, [1], lambda out: emit_standardize(
        ctx, t, t.shape, lambda i: list(i), lambda i: [i[1]], (t.shape[1],), eps, out))


def _with_running_stats(ctx: Ctx, t: Tensor, mean, var, weight, bias, eps) -> Tensor:
    m, v = ctx.tensor(mean), ctx.tensor(var)
    out = ctx.out()
    lp = Loops(out.shape)
    c = [lp[1]]
    value = (read(t, t.shape, lp.idx, out.dtype) - m.at(*c)) / sqrt(v.at(*c) + eps)
    if weight is not None:
        value = value * ctx.tensor(weight).at(*c)
    if bias is not None:
        value = value + ctx.tensor(bias).at(*c)
    ctx.b.emit(lp, (out.at(*lp), value))
    return out

