"""Pure analyses behind the loop-scheduling strategies (loop_fusion, loop_tiling, loop_binding,
reduction_factorization): split loop pairs and how they fuse back, indices used as values,
order-free single-equation reductions, and the GPU axes a loop may be bound to.

Every function takes AST values and returns plain values.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from .analysis import accesses, accumulation_op, equation_reads, index_names, nest_loops
from .ast import PARALLEL_KINDS, Bin, Equation, Expr, IBin, IConst, Idx, IName, Loop, LoopNest, Num
from .legality import independent_iterations
from .traverse import children, rebuild, walk


# ---------------------------------------------------------------- split loop pairs

def split_index(outer: str, inner: str, inner_extent: int) -> IBin:
    """The subscript a loop split leaves behind: ``outer*inner_extent+inner``."""
    return IBin("+", IBin("*", IName(outer), IConst(inner_extent)), IName(inner))


def split_value(outer: str, inner: str, inner_extent: int) -> Bin:
    """The same expression where an index is used as a value."""
    return Bin("+", Bin("*", Idx(outer), Num(str(inner_extent))), Idx(inner))


def used_only_as_split(nest: LoopNest, outer: str, inner: str, inner_extent: int) -> bool:
    """Do ``outer`` and ``inner`` occur in the nest's body only inside ``outer*m+inner``?

    ``L^{4}_{c=0}L^{8}_{a=0}[C_{c*8+a}=A_{c*8+a}*2;]`` -> True for (c, a, 8);
    ``[C_{c,a}=...]`` -> False.
    """
    forms = (split_index(outer, inner, inner_extent), split_value(outer, inner, inner_extent))
    names = {outer, inner}

    def clean(node) -> bool:
        if isinstance(node, (IBin, Bin)) and node in forms:
            return True
        if isinstance(node, (IName, Idx)) and node.name in names:
            return False
        return all(clean(c) for c in children(node))

    return all(clean(item) for item in nest.body)


def fuse_split(nest: LoopNest, outer: str, inner: str) -> LoopNest:
    """Merge a split pair back into one loop: ``outer`` disappears, ``inner`` runs over
    ``extent(outer)*extent(inner)`` at its own position, and ``outer*m+inner`` becomes ``inner``.

    ``L^{4}_{c=0}L^{8}_{a=0}[C_{c*8+a}=...]`` -> ``L^{32}_{a=0}[C_{a}=...]``.
    """
    loops = {l.index: l for l in nest.loops}
    o, i = loops[outer], loops[inner]
    forms = (split_index(outer, inner, i.extent), split_value(outer, inner, i.extent))
    fused = replace(i, extent=o.extent * i.extent)
    new_loops = tuple(fused if l.index == inner else l for l in nest.loops if l.index != outer)

    def swap(node):
        if isinstance(node, IBin) and node == forms[0]:
            return IName(inner)
        if isinstance(node, Bin) and node == forms[1]:
            return Idx(inner)
        return None

    return LoopNest(new_loops, tuple(rebuild(item, swap) for item in nest.body))


def parallel_claims_hold(nest: LoopNest, indices) -> bool:
    """Is every loop among ``indices`` whose kind claims independent iterations (P, V, B)
    really independent in ``nest``?"""
    kinds = {l.index: l.kind for l in nest.loops}
    return all(kinds[i] not in PARALLEL_KINDS or independent_iterations(nest, i) for i in indices)


def split_pairs(nest: LoopNest, kernel: LoopNest | None = None) -> list[tuple[str, str]]:
    """Adjacent loop pairs (outer serial ``L``, inner) that a split left behind and that fuse
    back soundly: both are used only as ``outer*m+inner``, the fused loop keeps its kind's
    claim, and -- when ``kernel`` (the top-level nest around ``nest``) is given -- a fused B loop
    breaks no CUDA launch limit the kernel kept."""
    out = []
    for o, i in zip(nest.loops, nest.loops[1:]):
        if o.kind == "L" and used_only_as_split(nest, o.index, i.index, i.extent):
            fused = fuse_split(nest, o.index, i.index)
            if parallel_claims_hold(fused, [i.index]) and _launch_kept(kernel, nest, fused):
                out.append((o.index, i.index))
    return out


def tile_quadruples(nest: LoopNest, kernel: LoopNest | None = None
                    ) -> list[tuple[str, str, str, str]]:
    """Four consecutive loops ``o1 o2 i1 i2`` (tile loops serial ``L``) that a tiling left
    behind and that fuse back into ``i1 i2``: ``o1,i1`` occur only as ``o1*m1+i1`` and ``o2,i2``
    only as ``o2*m2+i2``, the fused loops keep their kinds' claims and the kernel's CUDA launch
    limits (as in :func:`split_pairs`). Whether the points may move back inside each other's
    tiles is a dependence question, asked separately."""
    out = []
    loops = nest.loops
    for o1, o2, i1, i2 in zip(loops, loops[1:], loops[2:], loops[3:]):
        if o1.kind != "L" or o2.kind != "L":
            continue
        if not (used_only_as_split(nest, o1.index, i1.index, i1.extent)
                and used_only_as_split(nest, o2.index, i2.index, i2.extent)):
            continue
        fused = fuse_split(fuse_split(nest, o1.index, i1.index), o2.index, i2.index)
        if parallel_claims_hold(fused, [i1.index, i2.index]) and _launch_kept(kernel, nest, fused):
            out.append((o1.index, o2.index, i1.index, i2.index))
    return out


def _launch_kept(kernel: LoopNest | None, nest: LoopNest, changed: LoopNest) -> bool:
    """Does replacing ``nest`` by ``changed`` inside ``kernel`` add no CUDA launch problem?"""
    if kernel is None:
        return True
    before = Counter(nest_loops(kernel))
    after = before - Counter(nest_loops(nest)) + Counter(nest_loops(changed))
    return launch_violations(after.elements()) <= launch_violations(before.elements())


def used_as_value(nest: LoopNest, index: str) -> bool:
    """Is ``index`` used as a value (not only in subscripts) anywhere in the nest?"""
    return any(isinstance(n, Idx) and n.name == index for item in nest.body for n in walk(item))


# ---------------------------------------------------------------- order-free reductions

def accumulated_operand(eq: Equation) -> tuple[str, Expr] | None:
    """``(op, e)`` for an accumulation ``X=X op e`` (or ``X=e op X``, ``max(X,e)``...), else
    ``None``. ``D_{tx}=D_{tx}+A_{tx,a}`` -> ``("+", A_{tx,a})``."""
    op = accumulation_op(eq)
    if op is None:
        return None
    value, target = eq.value, eq.target
    if isinstance(value, Bin):
        return op, value.rhs if value.lhs == target else value.lhs
    a, b = value.args
    return op, b if a == target else a


def factorizable_reduction(nest: LoopNest) -> tuple[str, Expr, tuple[Loop, ...]] | None:
    """``(op, e, axes)`` when the nest is one accumulation ``X=X op e`` with an order-free
    ``op`` (``+ - * max min``) whose operand never reads X, and ``axes`` are its reduction loops
    (those not indexing X) with at least two iterations; ``None`` otherwise.

    Such a reduction may be computed as two partial reductions over two halves of one axis and
    combined afterwards: only the association of ``op`` changes.
    """
    if len(nest.body) != 1 or not isinstance(nest.body[0], Equation):
        return None
    eq = nest.body[0]
    parts = accumulated_operand(eq)
    if parts is None:
        return None
    target = eq.target
    self_reads = [v for v in equation_reads(eq) if v.name == target.name]
    if len(self_reads) != 1:
        return None
    written = index_names(target)
    axes = tuple(l for l in nest.loops if l.index not in written and l.extent >= 2)
    return (parts[0], parts[1], axes) if axes else None


# ---------------------------------------------------------------- GPU binding

HARDWARE_AXES = ("tx", "ty", "tz", "bx", "by", "bz")
AXIS_LIMITS = {"tx": 1024, "ty": 1024, "tz": 64, "bx": 2**31 - 1, "by": 65535, "bz": 65535}
MAX_THREADS_PER_BLOCK = 1024


def hardware_axis(index: str) -> str | None:
    """``tx`` -> ``tx``, ``bya`` -> ``by``; ``None`` for an index that is not a binding name."""
    if len(index) >= 2 and index[0] in "tb" and index[1] in "xyz":
        return index[:2]
    return None


def launch_violations(loops) -> set[str]:
    """The CUDA launch rules that the B loops among ``loops`` (the loops of one kernel) break:
    an axis bound twice, an axis over its limit, more than 1024 threads per block."""
    out: set[str] = set()
    seen: Counter[str] = Counter()
    threads = 1
    for loop in loops:
        axis = hardware_axis(loop.index) if loop.kind == "B" else None
        if axis is None:
            continue
        seen[axis] += 1
        if loop.extent > AXIS_LIMITS[axis]:
            out.add(f"{axis} over {AXIS_LIMITS[axis]}")
        if axis[0] == "t":
            threads *= loop.extent
    out.update(f"{axis} bound twice" for axis, count in seen.items() if count > 1)
    if threads > MAX_THREADS_PER_BLOCK:
        out.add(f"more than {MAX_THREADS_PER_BLOCK} threads per block")
    return out


def binding_names(kernel: LoopNest, nest: LoopNest, loop: Loop) -> tuple[str, ...]:
    """Names that bind ``loop`` of ``nest`` (the top-level nest ``kernel`` or a nest inside it)
    to a GPU axis within CUDA's limits: an axis no loop of the kernel uses yet, at most 1024
    threads per block over all thread axes, threadIdx.x/y <= 1024, threadIdx.z <= 64,
    blockIdx.y/z <= 65535. The name is the axis followed by the loop's own index: ``a`` ->
    ``tya``, ``bxa``, ...

    ``kernel`` is the top-level nest: every loop of it runs in one GPU kernel. A loop of one
    iteration has nothing to distribute and gets no name. When the kernel uses shared or local
    memory, only a loop right after the kernel's bound loops may be bound: such memory lives per
    block or thread and is set up once every axis is bound, so no serial loop may come first.
    """
    if loop.extent < 2:
        return ()
    if any(v.scope in ("s", "l") for v in accesses(kernel)):
        position = nest.loops.index(loop)
        if nest is not kernel or any(l.kind != "B" for l in nest.loops[:position]):
            return ()
    loops = list(nest_loops(kernel))
    taken = {hardware_axis(l.index) for l in loops if l.kind == "B"}
    names = {l.index for l in loops}
    threads = math.prod(l.extent for l in loops if l.kind == "B" and l.index[0] == "t")
    out = []
    for axis in HARDWARE_AXES:
        name = axis + loop.index
        if axis in taken or name in names or loop.extent > AXIS_LIMITS[axis]:
            continue
        if axis[0] == "t" and threads * loop.extent > MAX_THREADS_PER_BLOCK:
            continue
        out.append(name)
    return tuple(out)
