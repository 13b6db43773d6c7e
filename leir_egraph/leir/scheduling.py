"""Pure analyses behind the loop-scheduling strategies (loop_fusion, loop_tiling, loop_binding,
reduction_factorization): split loop pairs and how they fuse back, indices used as values and
order-free single-equation reductions. The GPU axes a loop may be bound to, and CUDA's launch
limits, are in ``hardware.py``.

Every function takes AST values and returns plain values.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .analysis import accumulated_operand, accumulation_op, equation_reads, index_names, nest_loops
from .ast import PARALLEL_KINDS, Bin, Equation, Expr, IBin, IConst, Idx, IName, Loop, LoopNest, Num
# the GPU binding rules live with CUDA's limits; the loop_binding strategy imports them from here
from .hardware import binding_names, hardware_axis, launch_violations  # noqa: F401
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
    op, operand = accumulation_op(eq), accumulated_operand(eq)
    if operand is None:
        return None
    target = eq.target
    self_reads = [v for v in equation_reads(eq) if v.name == target.name]
    if len(self_reads) != 1:
        return None
    written = index_names(target)
    axes = tuple(l for l in nest.loops if l.index not in written and l.extent >= 2)
    return (op, operand, axes) if axes else None


MAX_SPLIT_POINTS = 63
EVERY_SPLIT_POINT_UP_TO = 256


def reduction_split_points(n: int) -> range:
    """Where reduction_factorization and tensor_split may cut an axis of ``n`` iterations: every
    point of an axis of up to EVERY_SPLIT_POINT_UP_TO iterations (the reference cuts at a random
    point, ``L^{256}`` into 195 and 61; the zoo's and the golden corpus's axes are this small),
    else the multiples of ceil(n/64), so a paper-size axis (up to 16,384) offers at most
    MAX_SPLIT_POINTS variants instead of 16,383.

    ``reduction_split_points(8)`` -> 1..7; ``reduction_split_points(256)`` -> 1..255;
    ``reduction_split_points(4096)`` -> 64, 128, ..., 4032
    """
    if n <= EVERY_SPLIT_POINT_UP_TO:
        return range(1, n)
    step = -(-n // (MAX_SPLIT_POINTS + 1))
    return range(step, n, step)
