"""Convolutions (1-D/2-D/3-D, stride, padding, dilation, groups) and transposed convolutions.

Output loops first, then the input channels of a group and the kernel window; zero padding is
a padded temporary first (the reference's form):

    F.conv2d(x, w, padding=(2, 1), stride=(1, 2))
      E_{tx,a,c,d}=if_then_else(2<=c<258&1<=d<257,A_{tx,a,c-2,d-1},0)
      C_{tx,a,c,d}=C_{tx,a,c,d}+E_{tx,f,c+g,d*2+h}*D_{a,f,g,h}

A transposed convolution is the convolution of the zero-upsampled, padded input with the
flipped kernel: ``U`` is filled with zeros, the input is scattered into every ``stride``-th
position, and ``C_{..,c}=C+U_{..,c+g}*W_{f,a,K-1-g}`` sums the window.

An f16/bf16 convolution accumulates (bias included) in an f32 temporary, rounded to the result
in one more nest, as PyTorch's CPU kernels do.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..builder import Loops, Tensor
from ..context import Ctx, accumulator, read, settle
from ..expr import ZERO, between, ite
from .linalg import add_bias
from .registry import op


def _tuple(value, n: int, name: str, ctx: Ctx) -> list[int]:
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise ctx.unsupported(f"{name}={value} for a {n}-d operation")
    return [int(v) for v in value]


def emit_pad(ctx: Ctx, t: Tensor, lows: list[int], sizes: list[int], fill,
             out: Tensor | None = None) -> Tensor:
    """A copy of ``t`` whose last ``len(lows)`` dims are shifted by ``lows`` inside ``sizes``
    elements, the rest ``fill``: ``if_then_else(2<=c<258&1<=d<257,A_{..,c-2,d-1},0)``."""
    n = len(lows)
    lead = t.rank - n
    shape = t.shape[:lead] + tuple(sizes)
    padded = out or ctx.temp(shape, t.dtype)
    lp = Loops(shape)
    cond = None
    subs = list(lp.idx[:lead])
    for k in range(n):
        i, lo, size = lp[lead + k], lows[k], t.shape[lead + k]
        subs.append(i - lo)
        if lo == 0 and sizes[k] <= size:
            continue
        part = between(lo, i, lo + size) if lo > 0 else (i < lo + size)
        cond = part if cond is None else cond & part
    value = read(t, t.shape, subs, padded.dtype)
    if cond is not None:
        value = ite(cond, value, fill)
    ctx.b.emit(lp, (padded.at(*lp), value))
    return padded


def _conv_padding(padding, kernel, dilation, n, ctx) -> tuple[list[int], list[int]]:
    """(low, high) zero padding per spatial dim; 'same' pads like torch (extra on the high side)."""
    if padding == "valid":
        return [0] * n, [0] * n
    if padding == "same":
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        low = [t // 2 for t in total]
        return low, [t - lo for t, lo in zip(total, low)]
    p = _tuple(padding, n, "padding", ctx)
    return p, p


def emit_conv(ctx: Ctx, x: Tensor, w: Tensor, bias, stride, padding, dilation, groups,
              n: int) -> Tensor:
    out = ctx.out()
    if x.rank == n + 1:
        raise ctx.unsupported("an unbatched input (add the batch dimension)")
    kernel = list(w.shape[2:])
    stride = _tuple(stride, n, "stride", ctx)
    dilation = _tuple(dilation, n, "dilation", ctx)
    low, high = _conv_padding(padding, kernel, dilation, n, ctx)
    spatial = list(x.shape[2:])
    src = x
    if any(low) or any(high):
        needed = [(o - 1) * s + (k - 1) * d + 1
                  for o, s, k, d in zip(out.shape[2:], stride, kernel, dilation)]
        sizes = [max(sp + lo + hi, need) for sp, lo, hi, need in zip(spatial, low, high, needed)]
        src = emit_pad(ctx, x, low, sizes, 0)
    lp, nb, co, outs, ci, ks, in_per_group, out_per_group = _conv_loops(out, x, kernel, groups, n)
    group = co // out_per_group if groups > 1 else ZERO
    channel = group * in_per_group + ci if groups > 1 else ci
    taps = [o * s + k * d for o, s, k, d in zip(outs, stride, ks, dilation)]
    product = read(src, src.shape, [nb, channel, *taps], out.dtype) * \
        read(w, w.shape, [co, ci, *ks], out.dtype)
    return _accumulate(ctx, out, lp, product, bias)


def _conv_loops(out: Tensor, x: Tensor, kernel: list[int], groups: int, n: int):
    """The loops of a convolution or transposed convolution: the output's dimensions, the
    input channels of one group (a loop only when a group has more than one), the kernel's
    ``n`` dimensions. Returns ``(loops, batch, out_channel, out_positions, in_channel,
    kernel_positions, in_per_group, out_per_group)``."""
    in_per_group, out_per_group = x.shape[1] // groups, out.shape[1] // groups
    extents = list(out.shape) + ([in_per_group] if in_per_group > 1 else []) + kernel
    lp = Loops(extents)
    ci = lp[2 + n] if in_per_group > 1 else ZERO
    return (lp, lp[0], lp[1], lp.idx[2:2 + n], ci, lp.idx[len(extents) - n:], in_per_group,
            out_per_group)


def _accumulate(ctx: Ctx, out: Tensor, lp: Loops, product, bias) -> Tensor:
    """``out += product`` over ``lp``, then the bias along the channel dimension; in the
    accumulation dtype, rounded to ``out`` once."""
    acc = accumulator(ctx, out)
    target = acc.at(*lp.idx[:acc.rank])
    ctx.b.emit(lp, (target, target + product))
    if bias is not None:
        add_bias(ctx, acc, ctx.tensor(bias), 1)
    return settle(ctx, acc, out)


def _conv(n):
    def emit(ctx: Ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return emit_conv(ctx, ctx.tensor(x), ctx.tensor(weight), bias, stride, padding,
                         dilation, groups, n)
    return emit


op("conv1d", F.conv1d, torch.conv1d)(_conv(1))
op("conv2d", F.conv2d, torch.conv2d)(_conv(2))
op("conv3d", F.conv3d, torch.conv3d)(_conv(3))


def emit_conv_transpose(ctx: Ctx, x: Tensor, w: Tensor, bias, stride, padding, output_padding,
                        groups, dilation, n: int) -> Tensor:
    out = ctx.out()
    if x.rank == n + 1:
        raise ctx.unsupported("an unbatched input (add the batch dimension)")
    kernel = list(w.shape[2:])
    stride = _tuple(stride, n, "stride", ctx)
    padding = _tuple(padding, n, "padding", ctx)
    dilation = _tuple(dilation, n, "dilation", ctx)
    spatial = list(x.shape[2:])
    # output j sums U[j + k*d] * W[K-1-k] where U[m] = x[(m-q)/s] on multiples of s
    q = [d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding)]
    sizes = [o + d * (k - 1) for o, d, k in zip(out.shape[2:], dilation, kernel)]
    if all(s == 1 for s in stride) and all(v >= 0 for v in q):
        src = emit_pad(ctx, x, q, sizes, 0) if any(q) or sizes != spatial else x
    else:
        src = _upsample(ctx, x, stride, q, sizes)
    lp, nb, co, outs, ci, ks, in_per_group, out_per_group = _conv_loops(out, x, kernel, groups, n)
    if groups > 1:
        channel = (co // out_per_group) * in_per_group + ci
        w_out = co % out_per_group
    else:
        channel, w_out = ci, co
    taps = [o + k * d for o, k, d in zip(outs, ks, dilation)]
    flipped = [(kn - 1) - k for k, kn in zip(ks, kernel)]
    product = read(src, src.shape, [nb, channel, *taps], out.dtype) * \
        read(w, w.shape, [channel, w_out, *flipped], out.dtype)
    return _accumulate(ctx, out, lp, product, bias)


def _upsample(ctx: Ctx, x: Tensor, stride, q, sizes) -> Tensor:
    """Zeros, then ``x[i]`` at position ``i*s+q`` of each spatial dim (positions outside
    ``sizes`` are cropped by starting/ending the input loops inside)."""
    n = len(stride)
    shape = x.shape[:2] + tuple(sizes)
    up = ctx.temp(shape, x.dtype)
    lp = Loops(shape)
    ctx.b.emit(lp, (up.at(*lp), 0))
    starts, counts = [], []
    for s, qq, size, extent in zip(stride, q, sizes, x.shape[2:]):
        first = max(0, -(qq // s)) if qq < 0 else 0  # smallest i with i*s+q >= 0
        last = min(extent - 1, (size - 1 - qq) // s)
        starts.append(first)
        counts.append(last - first + 1)
    if any(c <= 0 for c in counts):
        return up
    lp = Loops(list(x.shape[:2]) + counts)
    dst, src = list(lp.idx[:2]), list(lp.idx[:2])
    for k in range(n):
        i = lp[2 + k]
        dst.append(i * stride[k] + (starts[k] * stride[k] + q[k]))
        src.append(i + starts[k])
    ctx.b.emit(lp, (up.at(*dst), x.at(*src)))
    return up


def _conv_transpose(n):
    def emit(ctx: Ctx, x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
             dilation=1):
        return emit_conv_transpose(ctx, ctx.tensor(x), ctx.tensor(weight), bias, stride, padding,
                                   output_padding, groups, dilation, n)
    return emit


op("conv_transpose1d", F.conv_transpose1d, torch.conv_transpose1d)(_conv_transpose(1))
op("conv_transpose2d", F.conv_transpose2d, torch.conv_transpose2d)(_conv_transpose(2))
op("conv_transpose3d", F.conv_transpose3d, torch.conv_transpose3d)(_conv_transpose(3))


@op("pad", F.pad)
def pad(ctx: Ctx, x, pad, mode="constant", value=None):
    t = ctx.tensor(x)
    if mode != "constant":
        raise ctx.unsupported(f"mode='{mode}' padding (LEIR subscripts have no abs/min for "
                              "reflection)")
    pads = list(pad)
    if any(p < 0 for p in pads):
        raise ctx.unsupported("negative (cropping) padding")
    n = len(pads) // 2
    lows = [pads[2 * (n - 1 - k)] for k in range(n)]
    highs = [pads[2 * (n - 1 - k) + 1] for k in range(n)]
    sizes = [s + lo + hi for s, lo, hi in zip(t.shape[t.rank - n:], lows, highs)]
    return emit_pad(ctx, t, lows, sizes, 0 if value is None else value, out=ctx.out())



@op("im2col", F.unfold)
def im2col(ctx: Ctx, x, kernel_size, dilation=1, padding=0, stride=1):
    """``F.unfold`` / ``nn.Unfold``: ``(N, C, H, W) -> (N, C*kh*kw, oh*ow)``, the window
    ``(i, j)`` of output position ``(y, z)`` at row ``c*kh*kw+i*kw+j``, column ``y*ow+z``."""
    t = ctx.tensor(x)
    if t.rank != 4:
        raise ctx.unsupported(f"unfold of a rank-{t.rank} input (only 4-D, as PyTorch)")
    k, d, p, s = (_tuple(v, 2, name, ctx) for v, name in
                  ((kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"),
                   (stride, "stride")))
    sizes = [t.shape[2 + a] + 2 * p[a] for a in range(2)]
    padded = emit_pad(ctx, t, p, sizes, 0) if any(p) else t
    outs = [(sizes[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in range(2)]
    out = ctx.out()
    lp = Loops((t.shape[0], t.shape[1], k[0], k[1], outs[0], outs[1]))
    n, c, i, j, y, z = lp
    ctx.b.emit(lp, (out.at(n, c * (k[0] * k[1]) + i * k[1] + j, y * outs[1] + z),
                    padded.at(n, c, y * s[0] + i * d[0], z * s[1] + j * d[1])))
    return out
