"""Losses: element-wise term, then the reduction ('none', 'sum', 'mean', KLDiv's 'batchmean').

    F.smooth_l1_loss(p, t)
      E_{tx,a}=if_then_else(abs(A_{tx,a}-C_{tx,a})<1.0,0.5*(A_{tx,a}-C_{tx,a})**2/1.0,...)
      F=F+E_{tx,a}            (a sum over every element: no loop is bound)
      D=F/524288
    F.cross_entropy(x, t)     log_softmax (3 nests), then per row
      G_{tx}=if_then_else(C^{i64}_{tx}!=-100,-E_{tx,C^{i64}_{tx}},0)   (a gather subscript)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..builder import Loops, Tensor
from ..context import (Ctx, accumulation_dtype, accumulator, elementwise,
                       elementwise_rounded_once, read, settle)
from ..expr import exp, fabs, gather, ite, log, sqrt, vmax, vmin
from .reductions import accumulate, emit_softmax, reduce_into
from .registry import op


def reduce_loss(ctx: Ctx, term_fn, operands, reduction: str, divisor=None) -> Tensor:
    """Element-wise ``term_fn`` of ``operands`` (broadcast to the node's shape for 'none', to
    their common shape otherwise), then summed or averaged into the node's output."""
    out = ctx.out()
    tensors = [ctx.tensor(o) if isinstance(o, (Tensor, torch.Tensor)) else o for o in operands]
    shape = torch.broadcast_shapes(*[t.shape for t in tensors if isinstance(t, Tensor)])
    if reduction == "none":
        return elementwise(ctx, term_fn, *tensors, out=out)
    term = elementwise(ctx, term_fn, *tensors, out=ctx.temp(tuple(shape), out.dtype))
    return _reduce_all(ctx, term, reduction, out, divisor)


def _reduce_all(ctx: Ctx, term: Tensor, reduction: str, out: Tensor, divisor=None) -> Tensor:
    if reduction == "sum":
        return reduce_into(ctx, term, list(range(term.rank)), out, False, "+")
    if reduction not in ("mean", "batchmean"):
        raise ctx.unsupported(f"reduction='{reduction}'")
    total = accumulate(ctx, term, list(range(term.rank)),
                       ctx.temp((), accumulation_dtype(out.dtype)), False, "+")
    n = divisor if divisor is not None else term.numel
    return elementwise_rounded_once(ctx, lambda s: s / n, total, out=out)


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


@op("mse_loss", F.mse_loss)
def mse_loss(ctx: Ctx, x, y, size_average=None, reduce=None, reduction="mean", weight=None):
    return reduce_loss(ctx, lambda a, b: (a - b) ** 2, (x, y),
                       _legacy_reduction(size_average, reduce, reduction))


@op("l1_loss", F.l1_loss)
def l1_loss(ctx: Ctx, x, y, size_average=None, reduce=None, reduction="mean", weight=None):
    return reduce_loss(ctx, lambda a, b: fabs(a - b), (x, y),
                       _legacy_reduction(size_average, reduce, reduction))


@op("smooth_l1_loss", F.smooth_l1_loss)
def smooth_l1_loss(ctx: Ctx, x, y, size_average=None, reduce=None, reduction="mean", beta=1.0):
    if beta == 0:
        return l1_loss(ctx, x, y, size_average, reduce, reduction)

    def term(a, b):
        d = a - b
        return ite(fabs(d) < beta, 0.5 * d ** 2 / beta, fabs(d) - 0.5 * beta)

    return reduce_loss(ctx, term, (x, y), _legacy_reduction(size_average, reduce, reduction))


@op("huber_loss", F.huber_loss)
def huber_loss(ctx: Ctx, x, y, reduction="mean", delta=1.0, weight=None):
    def term(a, b):
        d = a - b
        return ite(fabs(d) < delta, 0.5 * d ** 2, delta * (fabs(d) - 0.5 * delta))

    return reduce_loss(ctx, term, (x, y), reduction)


@op("kl_div", F.kl_div)
def kl_div(ctx: Ctx, x, target, size_average=None, reduce=None, reduction="mean",
           log_target=False):
    """target*(log(target) - x), with 0 where target == 0 (torch's xlogy)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    t = ctx.tensor(x)
    if log_target:
        def term(a, b):
            return exp(b) * (b - a)
    else:
        def term(a, b):
            return ite(b == 0, 0, b * log(b)) - b * a
    divisor = t.shape[0] if reduction == "batchmean" and t.rank else None
    return reduce_loss(ctx, term, (t, target), reduction, divisor)


@op("binary_cross_entropy", F.binary_cross_entropy)
def binary_cross_entropy(ctx: Ctx, x, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t*log(x) + (1-t)*log(1-x)) with each log clamped at -100, as torch does."""
    def term(p, t, *w):
        value = -(t * vmax(log(p), -100) + (1 - t) * vmax(log(1 - p), -100))
        return value * w[0] if w else value

    operands = (x, target) + ((weight,) if weight is not None else ())
    return reduce_loss(ctx, term, operands, _legacy_reduction(size_average, reduce, reduction))


@op("binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits)
def bce_with_logits(ctx: Ctx, x, target, weight=None, size_average=None, reduce=None,
                    reduction="mean", pos_weight=None):
    if pos_weight is not None:
        raise ctx.unsupported("pos_weight")

    def term(z, t, *w):
        value = vmax(z, 0) - z * t + log(1 + exp(-fabs(z)))
        return value * w[0] if w else value

    operands = (x, target) + ((weight,) if weight is not None else ())
    return reduce_loss(ctx, term, operands, _legacy_reduction(size_average, reduce, reduction))


@op("margin_ranking_loss", F.margin_ranking_loss)
def margin_ranking_loss(ctx: Ctx, x1, x2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    return reduce_loss(ctx, lambda a, b, y: vmax(0, -y * (a - b) + margin), (x1, x2, target),
                       _legacy_reduction(size_average, reduce, reduction))


@op("hinge_embedding_loss", F.hinge_embedding_loss)
def hinge_embedding_loss(ctx: Ctx, x, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    def term(v, y):
        return ite(y == 1, v, 0) + ite(y == -1, vmax(0, margin - v), 0)

    return reduce_loss(ctx, term, (x, target), _legacy_reduction(size_average, reduce, reduction))


# ---------------------------------------------------------------- distances

def emit_distance(ctx: Ctx, a: Tensor, b: Tensor, p, eps, dtype) -> Tensor:
    """||a - b + eps||_p over the last dim (torch.pairwise_distance), in the accumulation
    dtype of ``dtype`` (the caller rounds it)."""
    dtype = accumulation_dtype(dtype)
    shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    lp = Loops(shape)
    acc = ctx.temp(shape[:-1], dtype)
    target = acc.at(*lp.idx[:-1])
    diff = read(a, shape, lp.idx, dtype) - read(b, shape, lp.idx, dtype) + eps
    if p == 2:
        term = diff ** 2
    elif p == 1:
        term = fabs(diff)
    else:
        term = fabs(diff) ** p
    ctx.b.emit(lp, (target, target + term))
    if p == 1:
        return acc
    root = (lambda v: sqrt(v)) if p == 2 else (lambda v: v ** (1 / p))
    return elementwise(ctx, root, acc, out=ctx.temp(shape[:-1], dtype))


@op("pairwise_distance", F.pairwise_distance, torch.pairwise_distance)
def pairwise_distance(ctx: Ctx, x1, x2, p=2.0, eps=1e-6, keepdim=False):
    a, b = ctx.tensor(x1), ctx.tensor(x2)
    out = ctx.out()
    d = emit_distance(ctx, a, b, p, eps, out.dtype)
    return elementwise(ctx, lambda v: v, d, out=out)


@op("triplet_margin_loss", F.triplet_margin_loss)
def triplet_margin_loss(ctx: Ctx, anchor, positive, negative, margin=1.0, p=2, eps=1e-6,
                        swap=False, size_average=None, reduce=None, reduction="mean"):
    a, pos, neg = ctx.tensor(anchor), ctx.tensor(positive), ctx.tensor(negative)
    dtype = ctx.out_dtype()
    d_ap = emit_distance(ctx, a, pos, p, eps, dtype)
    d_an = emit_distance(ctx, a, neg, p, eps, dtype)
    if swap:
        d_pn = emit_distance(ctx, pos, neg, p, eps, dtype)
        d_an = elementwise(ctx, vmin, d_an, d_pn, out=ctx.temp(d_an.shape, dtype))
    return reduce_loss(ctx, lambda x, y: vmax(x - y + margin, 0), (d_ap, d_an),
                       _legacy_reduction(size_average, reduce, reduction))


@op("cosine_similarity", F.cosine_similarity, torch.cosine_similarity)
def cosine_similarity(ctx: Ctx, x1, x2, dim=1, eps=1e-8):
    """sum((x1/max(|x1|,eps)) * (x2/max(|x2|,eps))) along dim, torch's formula."""
    a, b = ctx.tensor(x1), ctx.tensor(x2)
    out = ctx.out()
    shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
    from ..context import norm_dim
    d = norm_dim(dim, len(shape), ctx)
    reduced = tuple(s for k, s in enumerate(shape) if k != d)
    norms = []
    for t in (a, b):
        lp = Loops(shape)
        acc = ctx.temp(reduced, accumulation_dtype(out.dtype))
        target = acc.at(*[i for k, i in enumerate(lp.idx) if k != d])
        ctx.b.emit(lp, (target, target + read(t, shape, lp.idx, out.dtype) ** 2))
        norms.append(acc)
    lp = Loops(shape)
    sub = [i for k, i in enumerate(lp.idx) if k != d]
    total = accumulator(ctx, out)
    target = total.at(*sub)
    na, nb = vmax(sqrt(norms[0].at(*sub)), eps), vmax(sqrt(norms[1].at(*sub)), eps)
    term = read(a, shape, lp.idx, out.dtype) / na * (read(b, shape, lp.idx, out.dtype) / nb)
    ctx.b.emit(lp, (target, target + term))
    return settle(ctx, total, out)


# ---------------------------------------------------------------- classification

def _nll(ctx: Ctx, logp: Tensor, target, weight, ignore_index, reduction, smoothing=0.0):
    out = ctx.out()
    tgt = ctx.tensor(target)
    dtype = accumulation_dtype(out.dtype)  # the per-row losses, sums and counts
    if logp.rank != 2:
        raise ctx.unsupported(f"a rank-{logp.rank} input (only [N, C] batches)")
    n, classes = logp.shape
    if tgt.dtype not in ("i64", "i32"):  # class probabilities
        if weight is not None:
            raise ctx.unsupported("class weights with probability targets")
        lp = Loops(logp.shape)
        per = ctx.temp((n,), dtype)
        target = per.at(lp[0])
        p = read(tgt, tgt.shape, lp.idx, dtype)
        if smoothing:
            p = p * (1 - smoothing) + smoothing / classes
        ctx.b.emit(lp, (target, target - p * logp.at(*lp)))
        return _reduce_all(ctx, per, reduction, out, n) if reduction != "none" else \
            elementwise(ctx, lambda v: v, per, out=out)
    w = ctx.tensor(weight) if weight is not None else None
    lp = Loops((n,))
    row = lp[0]
    cls = tgt.at(row)
    valid = cls != ignore_index
    picked = -logp.at(row, gather(tgt.at(row)))
    if w is not None:
        picked = picked * w.at(gather(tgt.at(row)))
    if smoothing:
        smooth = ctx.temp((n,), dtype)
        lq = Loops(logp.shape)
        acc = smooth.at(lq[0])
        ctx.b.emit(lq, (acc, acc - logp.at(*lq)))
        picked = (1 - smoothing) * picked + smoothing / classes * smooth.at(row)
    per = ctx.temp((n,), dtype) if reduction != "none" else out
    ctx.b.emit(lp, (per.at(row), ite(valid, picked, 0)))
    if reduction == "none":
        return out
    if reduction == "sum":
        return reduce_into(ctx, per, [0], out, False, "+")
    if reduction != "mean":
        raise ctx.unsupported(f"reduction='{reduction}'")
    total = reduce_into(ctx, per, [0], ctx.temp((), dtype), False, "+")
    count = ctx.temp((), dtype)
    lp = Loops((n,))
    acc = count.at()
    weight_of = w.at(gather(tgt.at(lp[0]))) if w is not None else 1
    ctx.b.emit(lp, (acc, acc + ite(tgt.at(lp[0]) != ignore_index, weight_of, 0)))
    return elementwise_rounded_once(ctx, lambda s, c: s / c, total, count, out=out)


@op("cross_entropy", F.cross_entropy)
def cross_entropy(ctx: Ctx, x, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    t = ctx.tensor(x)
    if t.rank == 1:
        raise ctx.unsupported("an unbatched input")
    if label_smoothing and weight is not None:
        raise ctx.unsupported("label smoothing with class weights")
    logp = emit_softmax(ctx, t, 1, ctx.temp(t.shape, ctx.out_dtype()), log_=True)
    return _nll(ctx, logp, target, weight, ignore_index,
                _legacy_reduction(size_average, reduce, reduction), label_smoothing)


@op("nll_loss", F.nll_loss)
def nll_loss(ctx: Ctx, x, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    return _nll(ctx, ctx.tensor(x), target, weight, ignore_index,
                _legacy_reduction(size_average, reduce, reduction))

