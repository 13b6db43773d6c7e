"""Max and average pooling (1-D/2-D/3-D with stride, padding, dilation, ceil_mode), their
adaptive forms where the windows are uniform, and nearest upsampling by integer factors.

    F.max_pool2d(x, 2, stride=2, padding=1, dilation=3)
      D_{tx,a,c,d}=if_then_else(1<=c<65&1<=d<65,A_{tx,a,c-1,d-1},-inf)
      C_{tx,a,c,d}=max(C_{tx,a,c,d},D_{tx,a,c*2+f*3,d*2+g*3})
    F.avg_pool2d(x, 3)            D=D+A_{..,c*3+f,d*3+g};  C=D/9
    F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
      ...  C=D/((min(c*2+2,64)-max(c*2-1,0))*(min(d*2+2,64)-max(d*2-1,0)))
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..builder import Loops, Tensor
from ..context import Ctx, accumulation_dtype, accumulator, read, settle
from ..expr import val, vmax, vmin
from .conv import _tuple, emit_pad
from .reductions import emit_mean
from .registry import op


def _window(ctx, x: Tensor, n: int, kernel_size, stride, padding, dilation, out: Tensor):
    kernel = _tuple(kernel_size, n, "kernel_size", ctx)
    stride = _tuple(stride if stride not in (None, [], ()) else kernel, n, "stride", ctx)
    padding = _tuple(padding, n, "padding", ctx)
    dilation = _tuple(dilation, n, "dilation", ctx)
    spatial = list(x.shape[x.rank - n:])
    outs = list(out.shape[out.rank - n:])
    needed = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(outs, stride, kernel, dilation)]
    # padded on both sides like the reference (S+2p), longer if ceil_mode windows run past it
    sizes = [max(sp + 2 * p, need) for sp, p, need in zip(spatial, padding, needed)]
    return kernel, stride, padding, dilation, spatial, outs, sizes


def emit_max_pool(ctx: Ctx, x: Tensor, n: int, kernel_size, stride, padding, dilation,
                  out: Tensor) -> Tensor:
    kernel, stride, padding, dilation, spatial, outs, sizes = _window(
        ctx, x, n, kernel_size, stride, padding, dilation, out)
    src = x
    if any(padding) or sizes != spatial:
        src = emit_pad(ctx, x, padding, sizes, -math.inf)
    lead = x.rank - n
    lp = Loops(list(out.shape) + kernel)
    taps = [o * s + k * d for o, s, k, d in
            zip(lp.idx[lead:lead + n], stride, lp.idx[lead + n:], dilation)]
    target = out.at(*lp.idx[:out.rank])
    ctx.b.emit(lp, (target, vmax(target, read(src, src.shape, list(lp.idx[:lead]) + taps,
                                               out.dtype))))
    return out


def _max_pool(n):
    def emit(ctx: Ctx, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False):
        if return_indices:
            raise ctx.unsupported("return_indices=True")
        return emit_max_pool(ctx, ctx.tensor(x), n, kernel_size, stride, padding, dilation,
                             ctx.out())
    return emit


op("max_pool1d", F.max_pool1d, torch.max_pool1d, F.max_pool1d_with_indices)(_max_pool(1))
op("max_pool2d", F.max_pool2d, torch.max_pool2d, F.max_pool2d_with_indices)(_max_pool(2))
op("max_pool3d", F.max_pool3d, torch.max_pool3d, F.max_pool3d_with_indices)(_max_pool(3))


def emit_avg_pool(ctx: Ctx, x: Tensor, n: int, kernel_size, stride, padding, ceil_mode,
                  count_include_pad, divisor_override, out: Tensor) -> Tensor:
    kernel, stride, padding, _, spatial, outs, sizes = _window(
        ctx, x, n, kernel_size, stride, padding, 1, out)
    src = x
    if any(padding) or sizes != spatial:
        src = emit_pad(ctx, x, padding, sizes, 0)
    lead = x.rank - n
    total = ctx.temp(out.shape, accumulation_dtype(out.dtype))
    lp = Loops(list(out.shape) + kernel)
    taps = [o * s + k for o, s, k in zip(lp.idx[lead:lead + n], stride, lp.idx[lead + n:])]
    target = total.at(*lp.idx[:out.rank])
    ctx.b.emit(lp, (target, target + read(src, src.shape, list(lp.idx[:lead]) + taps, out.dtype)))
    lp = Loops(out.shape)
    if divisor_override:
        divisor = val(divisor_override)
    else:
        divisor, constant = None, 1
        for o, s, k, p, size, count in zip(lp.idx[lead:], stride, kernel, padding, spatial, outs):
            start = o * s - p  # torch: window [start, min(start+k, size+p)), then clipped
            full = all(c * s - p + k <= size + p for c in range(count))
            if count_include_pad and full:
                constant *= k
                continue
            if count_include_pad:
                term = vmin(val(o * s + (k - p)), size + p) - val(start)
            else:
                inside = all(c * s - p >= 0 and c * s - p + k <= size for c in range(count))
                if inside:
                    constant *= k
                    continue
                term = vmin(val(o * s + (k - p)), size) - vmax(val(start), 0)
            divisor = term if divisor is None else divisor * term
        if divisor is None:
            divisor = val(constant)
        elif constant != 1:
            divisor = divisor * constant
    # the window sum and its division in the accumulation dtype, rounded to ``out`` once
    mean = accumulator(ctx, out)
    ctx.b.emit(lp, (mean.at(*lp), total.at(*lp) / divisor))
    return settle(ctx, mean, out)


def _avg_pool(n):
    def emit(ctx: Ctx, x, kernel_size, stride=None, padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None):
        return emit_avg_pool(ctx, ctx.tensor(x), n, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override, ctx.out())
    return emit


op("avg_pool1d", F.avg_pool1d, torch.avg_pool1d)(_avg_pool(1))
op("avg_pool2d", F.avg_pool2d, torch._C._nn.avg_pool2d)(_avg_pool(2))
op("avg_pool3d", F.avg_pool3d, torch._C._nn.avg_pool3d)(_avg_pool(3))


def _replicated(x: Tensor, n: int, out: Tensor) -> bool:
    """Is every output size a multiple of its input size? Then each adaptive window is the one
    element ``i // (O/L)`` (PyTorch's bounds ``floor(i*L/O)`` to ``ceil((i+1)*L/O)``), so
    max and average pooling are both the nearest-neighbour copy."""
    spatial, outs = x.shape[x.rank - n:], out.shape[out.rank - n:]
    return all(o % s == 0 for s, o in zip(spatial, outs))


def _emit_replicated(ctx: Ctx, x: Tensor, n: int, out: Tensor) -> Tensor:
    lp = Loops(out.shape)
    lead = out.rank - n
    subs = list(lp.idx[:lead]) + [lp[lead + k] // (out.shape[lead + k] // x.shape[lead + k])
                                  for k in range(n)]
    ctx.b.emit(lp, (out.at(*lp), x.at(*subs)))
    return out


def _uniform_windows(ctx: Ctx, x: Tensor, n: int, out: Tensor) -> list[int]:
    spatial = x.shape[x.rank - n:]
    outs = out.shape[out.rank - n:]
    if any(s % o for s, o in zip(spatial, outs)):
        raise ctx.unsupported(f"adaptive pooling from {list(spatial)} to {list(outs)}: windows "
                              "of different sizes need data-independent but non-affine bounds")
    return [s // o for s, o in zip(spatial, outs)]


def _adaptive_avg(n):
    def emit(ctx: Ctx, x, output_size):
        t = ctx.tensor(x)
        out = ctx.out()
        if all(o == 1 for o in out.shape[out.rank - n:]):  # global average: a mean
            return emit_mean(ctx, t, list(range(t.rank - n, t.rank)), True, out)
        if _replicated(t, n, out):
            return _emit_replicated(ctx, t, n, out)
        k = _uniform_windows(ctx, t, n, out)
        return emit_avg_pool(ctx, t, n, k, k, 0, False, True, None, out)
    return emit


def _adaptive_max(n):
    def emit(ctx: Ctx, x, output_size, return_indices=False):
        if return_indices:
            raise ctx.unsupported("return_indices=True")
        t = ctx.tensor(x)
        out = ctx.out()
        if _replicated(t, n, out):
            return _emit_replicated(ctx, t, n, out)
        k = _uniform_windows(ctx, t, n, out)
        return emit_max_pool(ctx, t, n, k, k, 0, 1, out)
    return emit


op("adaptive_avg_pool1d", F.adaptive_avg_pool1d, torch.adaptive_avg_pool1d)(_adaptive_avg(1))
op("adaptive_avg_pool2d", F.adaptive_avg_pool2d)(_adaptive_avg(2))
op("adaptive_avg_pool3d", F.adaptive_avg_pool3d)(_adaptive_avg(3))
op("adaptive_max_pool1d", F.adaptive_max_pool1d)(_adaptive_max(1))
op("adaptive_max_pool2d", F.adaptive_max_pool2d)(_adaptive_max(2))
op("adaptive_max_pool3d", F.adaptive_max_pool3d)(_adaptive_max(3))


@op("interpolate", F.interpolate, F.upsample, F.upsample_nearest)
def interpolate(ctx: Ctx, x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    t = ctx.tensor(x)
    out = ctx.out()
    if mode != "nearest":
        raise ctx.unsupported(f"mode='{mode}' (only 'nearest' is a pure index map)")
    n = t.rank - 2
    lp = Loops(out.shape)
    subs = list(lp.idx[:2])
    for k in range(n):
        s, o = t.shape[2 + k], out.shape[2 + k]
        if o % s:
            raise ctx.unsupported(f"nearest resize from {s} to {o} (integer factors only)")
        subs.append(lp[2 + k] // (o // s))
    ctx.b.emit(lp, (out.at(*lp), t.at(*subs)))
    return out

