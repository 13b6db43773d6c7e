"""Matrix products (matmul in every rank combination, bmm, mm, mv, dot, linear, addmm, einsum)
and the triangular/diagonal helpers.

Output loops come first and the contraction loop last; the product accumulates straight into
the result with an implicit zero initialisation (the reference's form):

    torch.matmul(A, B)   [16,1024,512]x[512,768]
        B^{16}_{tx=0}L^{1024}_{a=0}L^{768}_{c=0}L^{512}_{d=0}[C_{tx,a,c}=C_{tx,a,c}+A_{tx,a,d}*D_{d,c};];
    F.linear(x, W, b)    the product with W_{c,d}, then C=C+b_{c} onto the written result.

An f16/bf16 product accumulates in an f32 temporary (the bias added there too) that one more
nest rounds to the result, as PyTorch's CPU GEMM does (``context.accumulator``).
"""

from __future__ import annotations

import operator
import re

import torch
import torch.nn.functional as F

from ..builder import Loops, Tensor
from ..context import (Ctx, accumulation_dtype, accumulator, elementwise_rounded_once, read,
                       settle)
from ..expr import ZERO, ite
from .registry import op


def _batch_subs(t_batch_shape, batch_idx, batch_shape):
    """Subscripts of an operand's batch dims inside the broadcast batch of the result."""
    offset = len(batch_shape) - len(t_batch_shape)
    return [ZERO if size == 1 and batch_shape[offset + k] != 1 else batch_idx[offset + k]
            for k, size in enumerate(t_batch_shape)]


def emit_matmul(ctx: Ctx, a: Tensor, b: Tensor, out: Tensor) -> Tensor:
    """``out = a @ b`` with torch.matmul's rank rules (1-D operands, broadcast batches),
    accumulated in the accumulation dtype."""
    acc = accumulator(ctx, out)
    emit_product(ctx, a, b, acc)
    return settle(ctx, acc, out)


def emit_product(ctx: Ctx, a: Tensor, b: Tensor, out: Tensor) -> Tensor:
    """The one nest of ``out = a @ b``, computed in ``out``'s dtype."""
    if a.rank == 0 or b.rank == 0:
        raise ctx.unsupported("matmul of a 0-d tensor")
    k = a.shape[-1]
    if (b.shape[-2] if b.rank >= 2 else b.shape[0]) != k:
        raise ctx.unsupported(f"matmul of shapes {list(a.shape)} and {list(b.shape)}")
    lp = Loops(out.shape + (k,))
    kk = lp[-1]
    n_batch = out.rank - (a.rank >= 2) - (b.rank >= 2)
    batch_idx, batch_shape = lp.idx[:n_batch], out.shape[:n_batch]
    pos = n_batch
    a_subs = _batch_subs(a.shape[:-2], batch_idx, batch_shape) if a.rank > 2 else []
    if a.rank >= 2:
        a_subs += [lp[pos], kk]
        pos += 1
    else:
        a_subs = [kk]
    b_subs = _batch_subs(b.shape[:-2], batch_idx, batch_shape) if b.rank > 2 else []
    b_subs += [kk, lp[pos]] if b.rank >= 2 else [kk]
    target = out.at(*lp.idx[:-1])
    product = read(a, a.shape, a_subs, out.dtype) * read(b, b.shape, b_subs, out.dtype)
    ctx.b.emit(lp, (target, target + product))
    return out


@op("matmul", torch.matmul, operator.matmul, torch.mm, torch.bmm, torch.mv, torch.dot,
    torch.inner, torch.vdot, methods=("matmul", "mm", "bmm", "mv", "dot", "inner", "__matmul__"))
def matmul(ctx: Ctx, a, b, out=None):
    return emit_matmul(ctx, ctx.tensor(a), ctx.tensor(b), ctx.out())


def add_bias(ctx: Ctx, out: Tensor, bias: Tensor, dim: int) -> None:
    """``out = out + bias`` along ``dim`` of ``out``, onto the values already written."""
    lp = Loops(out.shape)
    target = out.at(*lp)
    if bias.rank == 0:
        term = bias.at()
    else:
        term = read(bias, (out.shape[dim],), [lp[dim]], out.dtype)
    ctx.b.emit(lp, (target, target + term))


@op("linear", F.linear)
def linear(ctx: Ctx, x, weight, bias=None):
    x, w = ctx.tensor(x), ctx.tensor(weight)
    result = ctx.out()
    out = accumulator(ctx, result)
    if w.rank == 1:
        emit_product(ctx, x, w, out)
    else:
        lp = Loops(out.shape + (w.shape[1],))
        target = out.at(*lp.idx[:-1])
        xs = list(lp.idx[:x.rank - 1]) + [lp[-1]]
        product = read(x, x.shape, xs, out.dtype) * w.at(lp[x.rank - 1], lp[-1])
        ctx.b.emit(lp, (target, target + product))
    if bias is not None:
        add_bias(ctx, out, ctx.tensor(bias), out.rank - 1)
    return settle(ctx, out, result)


@op("bilinear", F.bilinear)
def bilinear(ctx: Ctx, x1, x2, weight, bias=None):
    """y_{n,o} = sum_{i,j} x1_{n,i} W_{o,i,j} x2_{n,j} (+ b_o)."""
    a, c, w = ctx.tensor(x1), ctx.tensor(x2), ctx.tensor(weight)
    result = ctx.out()
    out = accumulator(ctx, result)
    lp = Loops(out.shape + w.shape[1:])
    i, j = lp[-2], lp[-1]
    batch = lp.idx[:out.rank - 1]
    o = lp[out.rank - 1]
    target = out.at(*lp.idx[:out.rank])
    ctx.b.emit(lp, (target, target + a.at(*batch, i) * w.at(o, i, j) * c.at(*batch, j)))
    if bias is not None:
        add_bias(ctx, out, ctx.tensor(bias), out.rank - 1)
    return settle(ctx, out, result)


def _scaled_sum(ctx: Ctx, product: Tensor, bias, beta, alpha) -> Tensor:
    """``beta*bias + alpha*product`` into the node's output, in the product's dtype and rounded
    to the output once."""
    out = ctx.out()
    if alpha == 1 and beta == 1:
        return elementwise_rounded_once(ctx, lambda p, c: p + c, product, bias, out=out)
    if beta == 0:
        return elementwise_rounded_once(ctx, lambda p: alpha * p, product, out=out)
    return elementwise_rounded_once(ctx, lambda p, c: beta * c + alpha * p, product, bias,
                                    out=out)


@op("addmm", torch.addmm, torch.baddbmm, torch.addmv, methods=("addmm", "baddbmm", "addmv"))
def addmm(ctx: Ctx, bias, m1, m2, *, beta=1, alpha=1, out=None):
    out_t = ctx.out()
    product = emit_product(ctx, ctx.tensor(m1), ctx.tensor(m2),
                           ctx.temp(out_t.shape, accumulation_dtype(out_t.dtype)))
    return _scaled_sum(ctx, product, bias, beta, alpha)


@op("outer", torch.outer, torch.ger, methods=("outer", "ger"))
def outer(ctx: Ctx, a, b):
    a, b = ctx.tensor(a), ctx.tensor(b)
    out = ctx.out()
    lp = Loops(out.shape)
    ctx.b.emit(lp, (out.at(*lp), a.at(lp[0]) * b.at(lp[1])))
    return out


_EINSUM_TERM = re.compile(r"^[A-Za-z]*$")


@op("einsum", torch.einsum)
def einsum(ctx: Ctx, equation, *operands):
    """Any einsum without repeated output letters: output letters become the outer loops,
    summed letters the inner ones, and the body multiplies every operand."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    tensors = [ctx.tensor(o) for o in operands]
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(tensors):
        raise ctx.unsupported(f"einsum '{equation}' names {len(terms)} operands, got "
                              f"{len(tensors)}")
    spare = iter(sorted(set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") - set(eq)))
    ellipsis_letters = None
    expanded = []
    for term, t in zip(terms, tensors):
        if "..." in term:
            n = t.rank - (len(term) - 3)
            if ellipsis_letters is None or len(ellipsis_letters) < n:
                ellipsis_letters = (ellipsis_letters or "") + "".join(
                    next(spare) for _ in range(n - len(ellipsis_letters or "")))
            term = term.replace("...", ellipsis_letters[len(ellipsis_letters) - n:])
        if not _EINSUM_TERM.match(term) or len(term) != t.rank:
            raise ctx.unsupported(f"einsum term '{term}' for a rank-{t.rank} operand")
        expanded.append(term)
    if arrow:
        rhs = rhs.replace("...", ellipsis_letters or "")
    else:
        counts = {c: "".join(expanded).count(c) for c in "".join(expanded)}
        rhs = (ellipsis_letters or "") + "".join(sorted(c for c, n in counts.items() if n == 1
                                                        and c not in (ellipsis_letters or "")))
    if len(set(rhs)) != len(rhs):
        raise ctx.unsupported(f"einsum '{equation}' repeats an output letter")
    sizes: dict[str, int] = {}
    for term, t in zip(expanded, tensors):
        for c, s in zip(term, t.shape):
            if sizes.get(c, s) != s and s != 1 and sizes.get(c) != 1:
                raise ctx.unsupported(f"einsum letter '{c}' has sizes {sizes[c]} and {s}")
            sizes[c] = max(sizes.get(c, s), s)
    summed = [c for c in dict.fromkeys("".join(expanded)) if c not in rhs]
    result = ctx.out()
    out = accumulator(ctx, result) if summed else result
    letters = list(rhs) + summed
    lp = Loops([sizes[c] for c in letters])
    index = dict(zip(letters, lp.idx))
    value = None
    for term, t in zip(expanded, tensors):
        subs = [ZERO if s == 1 and sizes[c] != 1 else index[c] for c, s in zip(term, t.shape)]
        r = read(t, t.shape, subs, out.dtype)
        value = r if value is None else value * r
    target = out.at(*[index[c] for c in rhs])
    ctx.b.emit(lp, (target, target + value if summed else value))
    return settle(ctx, out, result)


@op("diag", torch.diag, methods=("diag",))
def diag(ctx: Ctx, x, diagonal=0):
    t = ctx.tensor(x)
    out = ctx.out()
    k = diagonal
    lp = Loops(out.shape)
    if t.rank == 1:  # a vector -> the square matrix with it on diagonal k
        i, j = lp[0], lp[1]
        n = t.shape[0]
        if k == 0:  # the reference's form: if_then_else(a==tx,A_{a},0)
            value = ite(j.eq(i), t.at(j), 0)
        elif k > 0:
            value = ite((j - i).eq(k) & (i < n), t.at(i), 0)
        else:
            value = ite((i - j).eq(-k) & (j < n), t.at(j), 0)
        ctx.b.emit(lp, (out.at(i, j), value))
    elif t.rank == 2:  # a matrix -> its diagonal k
        i = lp[0]
        ctx.b.emit(lp, (out.at(i), t.at(i, i + k) if k >= 0 else t.at(i - k, i)))
    else:
        raise ctx.unsupported(f"diag of a rank-{t.rank} tensor")
    return out


def _triangle(keep_upper: bool):
    def emit(ctx: Ctx, x, diagonal=0):
        t = ctx.tensor(x)
        out = ctx.out()
        lp = Loops(out.shape)
        i, j = lp[-2], lp[-1]
        # the reference's form: if_then_else(tx<=a,A_{tx,a},0) keeps the upper triangle
        keep = (i + diagonal <= j) if keep_upper else (i + diagonal >= j)
        ctx.b.emit(lp, (out.at(*lp), ite(keep, t.at(*lp), 0)))
        return out
    return emit


op("triu", torch.triu, methods=("triu",))(_triangle(True))
op("tril", torch.tril, methods=("tril",))(_triangle(False))
