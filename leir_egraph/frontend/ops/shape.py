"""Views, layout changes, slicing, concatenation and fills -- each one copy nest, written with
index arithmetic (the reference's style):

    x.view(64, 64, 8, 8)      [64,64,64] -> D_{tx,a,c,d}=C_{tx,a,c*8+d}      (loops over the output)
    x.view(64, 64, 64)        [64,64,8,8] -> C_{tx,a,c*8+d}=D_{tx,a,c,d}     (loops over the input)
    x.transpose(1, 2)         E_{tx,c,a,d}=D_{tx,a,c,d}
    x.expand(...)             K_{tx,a,c,d,f}=J_{tx,a,0,d,f}
    torch.cat((x, y), 1)      C_{tx,a}=A_{tx,a};  C_{tx,a+16}=D_{tx,a}
    x.flip(1)                 C_{tx,a}=A_{tx,3999-a}

Pure metadata (``x.size(1)``, ``x.shape``, ``x.dim()``) is answered from the static shapes.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from ..builder import Loops, Tensor
from ..context import Ctx, elementwise, flat_args, norm_dim, read
from ..expr import ZERO, I, gather
from .registry import op


# ---------------------------------------------------------------- reshapes

def _blocks(src: tuple[int, ...], dst: tuple[int, ...]):
    """Pair runs of source and destination dims with equal products (size-1 dims left out):
    ``(16,8,8) -> (16,64)`` gives ``[([0],[0]), ([1,2],[1])]``."""
    s = [k for k, n in enumerate(src) if n != 1]
    d = [k for k, n in enumerate(dst) if n != 1]
    blocks, i, j = [], 0, 0
    while i < len(s) or j < len(d):
        bi, bj = [s[i]], [d[j]]
        pi, pj = src[s[i]], dst[d[j]]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                bi.append(s[i])
                pi *= src[s[i]]
                i += 1
            else:
                bj.append(d[j])
                pj *= dst[d[j]]
                j += 1
        blocks.append((bi, bj))
    return blocks


def emit_reshape(ctx: Ctx, t: Tensor, out: Tensor) -> Tensor:
    """Row-major reshape as one copy nest. Per block of dims: a split loops over the output
    dims and reads ``c*8+d``; a merge loops over the input dims and writes ``c*8+d``; anything
    else loops over the output and reads with ``//`` and ``%``."""
    if t.numel != out.numel:
        raise ctx.unsupported(f"reshape of {list(t.shape)} to {list(out.shape)}")
    src_subs: list = [ZERO] * t.rank
    dst_subs: list = [ZERO] * out.rank
    extents: list[int] = []
    pending: list = []  # (kind, block) resolved once the loop indices exist
    for bi, bj in _blocks(t.shape, out.shape):
        if len(bi) > 1 and len(bj) == 1:
            pending.append(("merge", bi, bj, len(extents)))
            extents += [t.shape[k] for k in bi]
        else:
            pending.append(("split", bi, bj, len(extents)))
            extents += [out.shape[k] for k in bj]
    lp = Loops(extents)
    for kind, bi, bj, start in pending:
        if kind == "merge":
            idx = lp.idx[start:start + len(bi)]
            for k, i in zip(bi, idx):
                src_subs[k] = i
            dst_subs[bj[0]] = _linear(idx, [t.shape[k] for k in bi])
        else:
            idx = lp.idx[start:start + len(bj)]
            for k, i in zip(bj, idx):
                dst_subs[k] = i
            if len(bi) == 1:
                src_subs[bi[0]] = _linear(idx, [out.shape[k] for k in bj])
            else:
                flat = _linear(idx, [out.shape[k] for k in bj])
                stride = 1
                for pos in reversed(range(len(bi))):
                    k = bi[pos]
                    q = flat // stride
                    src_subs[k] = q if pos == 0 else q % t.shape[k]
                    stride *= t.shape[k]
    ctx.b.emit(lp, (out.at(*dst_subs), read(t, t.shape, src_subs, out.dtype)))
    return out


def _linear(idx, sizes) -> I:
    """Row-major linear position of ``idx`` in a block of ``sizes``: ``c*8+d``."""
    total = I.of(0)
    stride = 1
    for i, n in zip(reversed(idx), reversed(sizes)):
        total = i * stride + total
        stride *= n
    return total


def _reshape(ctx: Ctx, x, *args, **kwargs):
    t = ctx.tensor(x)
    out_shape = ctx.out_shape()
    if tuple(out_shape) == t.shape:
        return t  # nothing moves
    return emit_reshape(ctx, t, ctx.out())


for _name, _fns, _methods in [
        ("view", (), ("view", "view_as")),
        ("reshape", (torch.reshape,), ("reshape", "reshape_as")),
        ("flatten", (torch.flatten,), ("flatten",)),
        ("unflatten", (torch.unflatten,), ("unflatten",)),
        ("squeeze", (torch.squeeze,), ("squeeze",)),
        ("unsqueeze", (torch.unsqueeze,), ("unsqueeze",))]:
    op(_name, *_fns, methods=_methods)(_reshape)


# ---------------------------------------------------------------- layout

def emit_permute(ctx: Ctx, t: Tensor, perm: list[int], out: Tensor) -> Tensor:
    """``out = t.permute(perm)``, looping over the input: ``E_{tx,c,a,d}=D_{tx,a,c,d}``."""
    if perm == list(range(t.rank)):
        return t
    lp = Loops(t.shape)
    ctx.b.emit(lp, (out.at(*[lp[p] for p in perm]), read(t, t.shape, lp.idx, out.dtype)))
    return out


@op("permute", torch.permute, methods=("permute",))
def permute(ctx: Ctx, x, *dims):
    t = ctx.tensor(x)
    perm = [norm_dim(d, t.rank, ctx) for d in flat_args(dims)]
    return emit_permute(ctx, t, perm, ctx.out())


@op("transpose", torch.transpose, torch.swapaxes, torch.swapdims,
    methods=("transpose", "swapaxes", "swapdims"))
def transpose(ctx: Ctx, x, dim0, dim1):
    t = ctx.tensor(x)
    perm = list(range(t.rank))
    a, b = norm_dim(dim0, t.rank, ctx), norm_dim(dim1, t.rank, ctx)
    perm[a], perm[b] = perm[b], perm[a]
    return emit_permute(ctx, t, perm, ctx.out())


@op("t", torch.t, methods=("t",))
def transpose2d(ctx: Ctx, x):
    t = ctx.tensor(x)
    return emit_permute(ctx, t, list(reversed(range(t.rank))), ctx.out()) if t.rank == 2 else t


@op("movedim", torch.movedim, torch.moveaxis, methods=("movedim", "moveaxis"))
def movedim(ctx: Ctx, x, source, destination):
    t = ctx.tensor(x)
    src = [norm_dim(d, t.rank, ctx) for d in ([source] if isinstance(source, int) else source)]
    dst = [norm_dim(d, t.rank, ctx) for d in
           ([destination] if isinstance(destination, int) else destination)]
    rest = [d for d in range(t.rank) if d not in src]
    perm = [None] * t.rank
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    perm = [p if p is not None else next(it) for p in perm]
    return emit_permute(ctx, t, perm, ctx.out())


@op("getattr")
def get_attribute(ctx: Ctx, x, name):
    if isinstance(x, tuple) and name in getattr(x, "_fields", ()):
        return getattr(x, name)  # ``torch.max(x, dim=1).values``: a field of a named tuple
    t = ctx.tensor(x)
    if name == "T":
        return emit_permute(ctx, t, list(reversed(range(t.rank))), ctx.out())
    if name == "mT":
        perm = list(range(t.rank))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return emit_permute(ctx, t, perm, ctx.out())
    if name == "shape":
        return torch.Size(t.shape)
    if name == "ndim":
        return t.rank
    if name == "dtype":
        from ..context import TORCH_DTYPES
        return TORCH_DTYPES[t.dtype]
    if name == "device":
        return torch.device("cpu")
    raise ctx.unsupported(f"attribute '{name}'", op=f"Tensor.{name}")


@op("size", methods=("size",))
def size(ctx: Ctx, x, dim=None):
    t = ctx.tensor(x)
    return torch.Size(t.shape) if dim is None else t.shape[norm_dim(dim, t.rank, ctx)]


@op("dim", methods=("dim", "ndimension"))
def ndim(ctx: Ctx, x):
    return ctx.tensor(x).rank


@op("numel", torch.numel, methods=("numel", "nelement"))
def numel(ctx: Ctx, x):
    return ctx.tensor(x).numel


@op("expand", torch.broadcast_to, methods=("expand", "expand_as", "broadcast_to"))
def expand(ctx: Ctx, x, *sizes):
    t = ctx.tensor(x)
    out = ctx.out()
    if out.shape == t.shape:
        return t
    return elementwise(ctx, lambda v: v, t, out=out)


@op("repeat", methods=("repeat",))
def repeat(ctx: Ctx, x, *sizes):
    t = ctx.tensor(x)
    out = ctx.out()
    reps = flat_args(sizes)
    lp = Loops(out.shape)
    offset = out.rank - t.rank
    subs = []
    for k, n in enumerate(t.shape):
        i = lp[offset + k]
        subs.append(ZERO if n == 1 else (i % n if reps[offset + k] != 1 else i))
    ctx.b.emit(lp, (out.at(*lp), read(t, t.shape, subs, out.dtype)))
    return out


@op("tile", torch.tile, methods=("tile",))
def tile(ctx: Ctx, x, dims):
    t = ctx.tensor(x)
    reps = list(dims)
    reps = [1] * (t.rank - len(reps)) + reps
    return repeat(ctx, t, *reps)


@op("flip", torch.flip, methods=("flip",))
def flip(ctx: Ctx, x, *dims):
    t = ctx.tensor(x)
    flipped = {norm_dim(d, t.rank, ctx) for d in flat_args(dims)}
    out = ctx.out()
    lp = Loops(out.shape)
    subs = [(t.shape[k] - 1) - i if k in flipped else i for k, i in enumerate(lp.idx)]
    ctx.b.emit(lp, (out.at(*lp), read(t, t.shape, subs, out.dtype)))
    return out


@op("roll", torch.roll, methods=("roll",))
def roll(ctx: Ctx, x, shifts, dims=None):
    t = ctx.tensor(x)
    if dims is None:
        raise ctx.unsupported("roll without dims (over the flattened tensor)")
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    by_dim = {norm_dim(d, t.rank, ctx): s for d, s in zip(dims, shifts)}
    out = ctx.out()
    lp = Loops(out.shape)
    subs = []
    for k, i in enumerate(lp.idx):
        n = t.shape[k]
        s = by_dim.get(k, 0) % n
        subs.append((i + (n - s)) % n if s else i)
    ctx.b.emit(lp, (out.at(*lp), read(t, t.shape, subs, out.dtype)))
    return out


# ---------------------------------------------------------------- slicing

@op("getitem", operator.getitem)
def getitem(ctx: Ctx, x, key):
    if isinstance(x, (tuple, list, torch.Size)):
        return x[key]
    t = ctx.tensor(x)
    key = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (Tensor, torch.Tensor)) for k in key):
        return _advanced_index(ctx, t, key)
    n_explicit = sum(1 for k in key if k is not None and k is not Ellipsis)
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded += [slice(None)] * (t.rank - n_explicit)
        else:
            expanded.append(k)
    expanded += [slice(None)] * (t.rank - sum(1 for k in expanded if k is not None))
    out = ctx.out()
    lp = Loops(out.shape)
    subs, o, d = [], 0, 0
    for k in expanded:
        if k is None:
            o += 1
            continue
        n = t.shape[d]
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            raise ctx.unsupported(f"index {k!r}")
        if isinstance(k, int):
            subs.append(I.of(k % n if k < 0 else k))
        else:
            start, _, step = k.indices(n)
            if step <= 0:
                raise ctx.unsupported("a non-positive slice step")
            subs.append(lp[o] * step + start)
            o += 1
        d += 1
    if out.shape == t.shape and all(isinstance(k, slice) and k == slice(None) for k in expanded):
        return t
    ctx.b.emit(lp, (out.at(*lp), read(t, t.shape, subs, out.dtype)))
    return out


def _advanced_index(ctx: Ctx, t: Tensor, key):
    """``x[idx]`` / ``x[:, idx]`` with one integer index tensor: a gather."""
    tensors = [k for k in key if isinstance(k, (Tensor, torch.Tensor))]
    if len(tensors) != 1 or any(k is None or k is Ellipsis for k in key) or \
            any(not (isinstance(k, slice) and k == slice(None)) for k in key
                if not isinstance(k, (Tensor, torch.Tensor))):
        raise ctx.unsupported("advanced indexing beyond one integer index tensor with full "
                              "slices")
    pos = next(p for p, k in enumerate(key) if isinstance(k, (Tensor, torch.Tensor)))
    idx = ctx.tensor(tensors[0])
    if idx.dtype not in ("i64", "i32"):
        raise ctx.unsupported(f"a {idx.dtype} index tensor (boolean masks give data-dependent "
                              "shapes)")
    out = ctx.out()
    lp = Loops(out.shape)
    subs = list(lp.idx[:pos]) + [gather(idx.at(*lp.idx[pos:pos + idx.rank]))] + \
        list(lp.idx[pos + idx.rank:])
    ctx.b.emit(lp, (out.at(*lp), t.at(*subs)))
    return out


@op("select", torch.select, methods=("select",))
def select(ctx: Ctx, x, dim, index):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    key = [slice(None)] * d + [index]
    return getitem(ctx, t, tuple(key))


@op("narrow", torch.narrow, methods=("narrow",))
def narrow(ctx: Ctx, x, dim, start, length):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    key = [slice(None)] * d + [slice(start, start + length)]
    return getitem(ctx, t, tuple(key))


def _piece(ctx: Ctx, t: Tensor, d: int, start: int, length: int, k: int) -> Tensor:
    piece = ctx.out(k)
    lp = Loops(piece.shape)
    subs = [i + start if p == d else i for p, i in enumerate(lp.idx)]
    ctx.b.emit(lp, (piece.at(*lp), t.at(*subs)))
    return piece


@op("split", torch.split, methods=("split",))
def split(ctx: Ctx, x, split_size_or_sections, dim=0):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    n = t.shape[d]
    if isinstance(split_size_or_sections, int):
        sizes = [min(split_size_or_sections, n - s) for s in range(0, n, split_size_or_sections)]
    else:
        sizes = list(split_size_or_sections)
    pieces, start = [], 0
    for k, length in enumerate(sizes):
        pieces.append(_piece(ctx, t, d, start, length, k))
        start += length
    return tuple(pieces)


@op("chunk", torch.chunk, methods=("chunk",))
def chunk(ctx: Ctx, x, chunks, dim=0):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    step = math.ceil(t.shape[d] / chunks)
    return split(ctx, t, step, d)


@op("unbind", torch.unbind, methods=("unbind",))
def unbind(ctx: Ctx, x, dim=0):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    pieces = []
    for k in range(t.shape[d]):
        piece = ctx.out(k)
        lp = Loops(piece.shape)
        subs = list(lp.idx[:d]) + [I.of(k)] + list(lp.idx[d:])
        ctx.b.emit(lp, (piece.at(*lp), t.at(*subs)))
        pieces.append(piece)
    return tuple(pieces)


@op("cat", torch.cat, torch.concat, torch.concatenate)
def cat(ctx: Ctx, tensors, dim=0, out=None):
    parts = [ctx.tensor(p) for p in tensors]
    result = ctx.out()
    d = norm_dim(dim, result.rank, ctx)
    offset = 0
    for p in parts:
        if p.rank == 1 and p.shape[0] == 0:
            continue  # torch accepts empty 1-D tensors in cat
        lp = Loops(p.shape)
        subs = [i + offset if k == d else i for k, i in enumerate(lp.idx)]
        ctx.b.emit(lp, (result.at(*subs), read(p, p.shape, lp.idx, result.dtype)))
        offset += p.shape[d]
    return result


@op("stack", torch.stack)
def stack(ctx: Ctx, tensors, dim=0, out=None):
    parts = [ctx.tensor(p) for p in tensors]
    result = ctx.out()
    d = norm_dim(dim, result.rank, ctx)
    for k, p in enumerate(parts):
        lp = Loops(p.shape)
        subs = list(lp.idx[:d]) + [I.of(k)] + list(lp.idx[d:])
        ctx.b.emit(lp, (result.at(*subs), read(p, p.shape, lp.idx, result.dtype)))
    return result


@op("index_select", torch.index_select, methods=("index_select",))
def index_select(ctx: Ctx, x, dim, index):
    t = ctx.tensor(x)
    d = norm_dim(dim, t.rank, ctx)
    key = [slice(None)] * d + [index]
    return _advanced_index(ctx, t, tuple(key) + (slice(None),) * (t.rank - d - 1))


@op("gather", torch.gather, methods=("gather",))
def gather_op(ctx: Ctx, x, dim, index, sparse_grad=False):
    t, idx = ctx.tensor(x), ctx.tensor(index)
    d = norm_dim(dim, t.rank, ctx)
    out = ctx.out()
    lp = Loops(out.shape)
    subs = [gather(idx.at(*lp)) if k == d else i for k, i in enumerate(lp.idx)]
    ctx.b.emit(lp, (out.at(*lp), t.at(*subs)))
    return out


@op("embedding", F.embedding)
def embedding(ctx: Ctx, indices, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise ctx.unsupported("max_norm renormalises the weight in place")
    idx, w = ctx.tensor(indices), ctx.tensor(weight)
    out = ctx.out()
    lp = Loops(out.shape)
    ctx.b.emit(lp, (out.at(*lp), w.at(gather(idx.at(*lp.idx[:-1])), lp[-1])))
    return out


# ---------------------------------------------------------------- fills

def emit_fill(ctx: Ctx, out: Tensor, value) -> Tensor:
    lp = Loops(out.shape)
    ctx.b.emit(lp, (out.at(*lp), value))
    return out


@op("zeros_like", torch.zeros_like, torch.empty_like, methods=("new_zeros", "new_empty"))
def zeros_like(ctx: Ctx, x, *args, **kwargs):
    return emit_fill(ctx, ctx.out(), 0)


@op("ones_like", torch.ones_like, methods=("new_ones",))
def ones_like(ctx: Ctx, x, *args, **kwargs):
    return emit_fill(ctx, ctx.out(), 1)


@op("full_like", torch.full_like)
def full_like(ctx: Ctx, x, fill_value, **kwargs):
    return emit_fill(ctx, ctx.out(), fill_value)


@op("new_full", methods=("new_full",))
def new_full(ctx: Ctx, x, size, fill_value, **kwargs):
    return emit_fill(ctx, ctx.out(), fill_value)


# ---------------------------------------------------------------- windows, shuffles, writes

@op("unfold_windows", methods=("unfold",))
def unfold_windows(ctx: Ctx, x, dimension, size, step):
    """``x.unfold(d, size, step)``: the windows of dim ``d`` as a new last dim (patches):
    ``[8,12].unfold(1, 4, 4)`` -> ``C_{tx,a,c}=A_{tx,a*4+c}``."""
    t = ctx.tensor(x)
    d = norm_dim(dimension, t.rank, ctx)
    out = ctx.out()
    lp = Loops(out.shape)
    subs = list(lp.idx[:t.rank])
    subs[d] = lp[d] * step + lp[-1]
    ctx.b.emit(lp, (out.at(*lp), t.at(*subs)))
    return out


@op("channel_shuffle", F.channel_shuffle, torch.channel_shuffle, F.native_channel_shuffle)
def channel_shuffle(ctx: Ctx, x, groups):
    """ShuffleNet's channel shuffle: output channel ``c`` is input channel
    ``(c%g)*(C/g)+c//g`` (the view/transpose/view of the paper in one copy)."""
    t = ctx.tensor(x)
    channels = t.shape[1]
    if channels % groups:
        raise ctx.unsupported(f"{channels} channels in {groups} groups")
    out = ctx.out()
    lp = Loops(out.shape)
    subs = list(lp.idx)
    subs[1] = (lp[1] % groups) * (channels // groups) + lp[1] // groups
    ctx.b.emit(lp, (out.at(*lp), t.at(*subs)))
    return out


def _emit_pixel_shuffle(ctx: Ctx, t: Tensor, r: int, out: Tensor, inverse: bool) -> Tensor:
    """``(N, C*r*r, H, W) <-> (N, C, H*r, W*r)``: element ``(c*r*r+i*r+j, h, w)`` of the
    deep side is element ``(c, h*r+i, w*r+j)`` of the wide side."""
    wide, deep = (t, out) if inverse else (out, t)
    lead = wide.rank - 3
    lp = Loops(wide.shape[:lead + 1] + (deep.shape[-2], r, deep.shape[-1], r))
    *batch, c, h, i, w, j = lp
    deep_at = deep.at(*batch, c * (r * r) + i * r + j, h, w)
    wide_at = wide.at(*batch, c, h * r + i, w * r + j)
    ctx.b.emit(lp, (deep_at, wide_at) if inverse else (wide_at, deep_at))
    return out


@op("pixel_shuffle", F.pixel_shuffle, torch.pixel_shuffle)
def pixel_shuffle(ctx: Ctx, x, upscale_factor):
    return _emit_pixel_shuffle(ctx, ctx.tensor(x), upscale_factor, ctx.out(), inverse=False)


@op("pixel_unshuffle", F.pixel_unshuffle, torch.pixel_unshuffle)
def pixel_unshuffle(ctx: Ctx, x, downscale_factor):
    return _emit_pixel_shuffle(ctx, ctx.tensor(x), downscale_factor, ctx.out(), inverse=True)


@op("copy", methods=("copy",))
def copy(ctx: Ctx, x, src, non_blocking=False):
    """``x.copy_(src)``: ``src`` broadcast and cast into ``x``'s shape and dtype (the
    translator rebinds ``x`` to the result)."""
    t = ctx.tensor(x)
    out = ctx.b.tensor(t.shape, t.dtype, "node", ctx.node.name)
    return elementwise(ctx, lambda v: v, ctx.tensor(src), out=out)


@op("setitem", operator.setitem, methods=("__setitem__",))
def setitem(ctx: Ctx, x, key, value):
    """``x[key] = value`` with int and slice keys: a copy of ``x``, then ``value`` (broadcast)
    written over the selected region; the translator rebinds ``x`` to the result."""
    t = ctx.tensor(x)
    out = ctx.b.tensor(t.shape, t.dtype, "node", ctx.node.name)
    lp = Loops(t.shape)
    ctx.b.emit(lp, (out.at(*lp), t.at(*lp)))
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (t.rank - len(key) + 1) + key[at + 1:]
    key = key + (slice(None),) * (t.rank - len(key))
    region, starts = [], []
    for k, n in zip(key, t.shape):
        if isinstance(k, bool) or not isinstance(k, (int, slice)):
            raise ctx.unsupported(f"assignment at index {k!r} (only ints and slices: the "
                                  "written positions must be static)")
        if isinstance(k, int):
            starts.append((k % n, 1, None))
            continue
        start, stop, step = k.indices(n)
        if step <= 0:
            raise ctx.unsupported("a non-positive slice step")
        count = len(range(start, stop, step))
        starts.append((start, step, len(region)))
        region.append(count)
    if not region and all(s[2] is None for s in starts):
        region_shape: tuple[int, ...] = ()
    else:
        region_shape = tuple(region)
    lp = Loops(region_shape)
    subs = [I.of(start) if pos is None else lp[pos] * step + start for start, step, pos in starts]
    v = value if not isinstance(value, torch.Tensor) else ctx.tensor(value)
    ctx.b.emit(lp, (out.at(*subs), read(v, region_shape, lp.idx, out.dtype)))
    return out
