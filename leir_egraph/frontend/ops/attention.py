"""Scaled dot-product attention, decomposed into its elementary steps:

    F.scaled_dot_product_attention(q, k, v, is_causal=True)
      S_{..,c,d}=S_{..,c,d}+Q_{..,c,f}*K_{..,d,f}                     scores
      W_{..,c,d}=if_then_else(d>c,-inf,S_{..,c,d}*0.125)               scale and mask
      softmax(W) (3 nests), then O_{..,c,f}=O_{..,c,f}+P_{..,c,d}*V_{..,d,f}

Grouped-query attention (``enable_gqa``) reads key/value head ``h//(Hq/Hkv)``. For f16/bf16
inputs every step runs in f32 and the output is rounded once, as PyTorch's CPU attention
kernel (flash attention for CPU) computes it.
"""

from __future__ import annotations

import math

import torch.nn.functional as F

from ..builder import Loops
from ..context import Ctx, accumulation_dtype, accumulator, read, settle
from ..expr import ZERO, ite
from .reductions import emit_softmax
from .registry import op


def _batch(t_shape, idx, shape, head_dim, ratio):
    """Subscripts of a q/k/v operand's batch dims inside the result's batch (broadcast; the
    head dim divided by ``ratio`` for grouped key/value heads)."""
    offset = len(shape) - len(t_shape)
    subs = []
    for k, size in enumerate(t_shape):
        pos = offset + k
        if size == 1 and shape[pos] != 1:
            subs.append(ZERO)
        elif pos == head_dim and ratio > 1:
            subs.append(idx[pos] // ratio)
        else:
            subs.append(idx[pos])
    return subs


@op("scaled_dot_product_attention", F.scaled_dot_product_attention)
def scaled_dot_product_attention(ctx: Ctx, query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    if dropout_p:
        raise ctx.unsupported("dropout_p > 0 is random")
    q, k, v = ctx.tensor(query), ctx.tensor(key), ctx.tensor(value)
    result = ctx.out()
    out = accumulator(ctx, result)
    dtype = accumulation_dtype(result.dtype)
    length, source, depth = q.shape[-2], k.shape[-2], q.shape[-1]
    batch = out.shape[:-2]
    nb = len(batch)
    head_dim = nb - 1 if nb >= 1 else -1
    ratio = q.shape[-3] // k.shape[-3] if enable_gqa and q.rank >= 3 and k.rank >= 3 else 1
    factor = scale if scale is not None else 1 / math.sqrt(depth)

    scores = ctx.temp(batch + (length, source), dtype)
    lp = Loops(batch + (length, source, depth))
    b_idx, i, j, e = lp.idx[:nb], lp[nb], lp[nb + 1], lp[nb + 2]
    target = scores.at(*b_idx, i, j)
    qs = _batch(q.shape[:-2], b_idx, batch, head_dim, 1) + [i, e]
    ks = _batch(k.shape[:-2], b_idx, batch, head_dim, ratio) + [j, e]
    ctx.b.emit(lp, (target, target + read(q, q.shape, qs, dtype) * read(k, k.shape, ks, dtype)))

    weights = ctx.temp(batch + (length, source), dtype)
    lp = Loops(batch + (length, source))
    b_idx, i, j = lp.idx[:nb], lp[nb], lp[nb + 1]
    s = scores.at(*lp) * factor
    if is_causal:
        s = ite(j > i, -math.inf, s)
    if attn_mask is not None:
        m = ctx.tensor(attn_mask)
        mv = read(m, weights.shape, lp.idx)
        s = ite(mv, s, -math.inf) if m.dtype == "bool" else s + mv
    ctx.b.emit(lp, (weights.at(*lp), s))

    probs = emit_softmax(ctx, weights, -1, ctx.temp(weights.shape, dtype))
    lp = Loops(batch + (length, v.shape[-1], source))
    b_idx, i, f, j = lp.idx[:nb], lp[nb], lp[nb + 1], lp[nb + 2]
    target = out.at(*b_idx, i, f)
    vs = _batch(v.shape[:-2], b_idx, batch, head_dim, ratio) + [j, f]
    ctx.b.emit(lp, (target, target + probs.at(*b_idx, i, j) * read(v, v.shape, vs, dtype)))
    return settle(ctx, out, result)
