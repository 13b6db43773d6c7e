"""CUDA's launch limits and the rules for binding a loop to a GPU axis, defined once.

A ``B`` loop's index names its hardware axis by its first two letters (``tx`` = threadIdx.x,
``bya`` = blockIdx.y); every top-level nest is one kernel. The frontend (which loop it binds),
the scheduling analyses (which bindings a rewrite may add), the canonical form (which index
names keep their prefix) and the CUDA lowering (which programs are valid kernels) all read the
limits and rules from here.

    >>> thread_tag("bya"), hardware_axis("txc"), hardware_axis("a")
    ('blockIdx.y', 'tx', None)
    >>> sorted(launch_violations([Loop("B", 2048, "tx")]))
    ['more than 1024 threads per block', 'tx over 1024']

Pure: no TVM, plain values in and out.
"""

from __future__ import annotations

import math
from typing import Iterable

from .analysis import accesses, nest_loops
from .ast import Loop, LoopNest

HARDWARE_AXES = ("tx", "ty", "tz", "bx", "by", "bz")
AXIS_LIMITS = {"tx": 1024, "ty": 1024, "tz": 64, "bx": 2**31 - 1, "by": 65535, "bz": 65535}
MAX_THREADS_PER_BLOCK = 1024
MAX_SHARED_BYTES = 48 * 1024  # shared memory one block may use without opting in


def hardware_axis(index: str) -> str | None:
    """``tx`` -> ``tx``, ``bya`` -> ``by``; ``None`` for an index that is not a binding name."""
    if len(index) >= 2 and index[0] in "tb" and index[1] in "xyz":
        return index[:2]
    return None


def thread_tag(index: str) -> str:
    """``tx`` -> ``threadIdx.x``, ``bya`` -> ``blockIdx.y``; ValueError for other names."""
    axis = hardware_axis(index)
    if axis is None:
        raise ValueError(f"'{index}' is not a GPU binding name (tx, ty, tz, bx, by, bz + suffix)")
    return ("threadIdx." if axis[0] == "t" else "blockIdx.") + axis[1]


def kernel_launch_problems(loops: Iterable[Loop]) -> dict[str, str]:
    """The launch rules that the B loops among ``loops`` (the loops of one kernel) break, as
    ``{short key: sentence}``: an axis bound twice, an axis over its limit, more than 1024
    threads per block. The keys do not mention extents, so two kernels can be compared (a
    rewrite may change an extent but must not add a broken rule)."""
    out: dict[str, str] = {}
    first: dict[str, str] = {}
    threads = 1
    for loop in loops:
        axis = hardware_axis(loop.index) if loop.kind == "B" else None
        if axis is None:
            continue
        tag = thread_tag(loop.index)
        if axis in first:
            out[f"{axis} bound twice"] = (f"B loops '{first[axis]}' and '{loop.index}' both bind "
                                          f"{tag}; one hardware axis takes one loop per kernel")
        first.setdefault(axis, loop.index)
        if loop.extent > AXIS_LIMITS[axis]:
            out[f"{axis} over {AXIS_LIMITS[axis]}"] = (
                f"B^{{{loop.extent}}}_{{{loop.index}=0}} binds {tag} to {loop.extent} > "
                f"{AXIS_LIMITS[axis]}, the most CUDA allows")
        if axis[0] == "t":
            threads *= loop.extent
    if threads > MAX_THREADS_PER_BLOCK:
        out[f"more than {MAX_THREADS_PER_BLOCK} threads per block"] = (
            f"{threads} threads per block > {MAX_THREADS_PER_BLOCK}")
    return out


def launch_violations(loops: Iterable[Loop]) -> set[str]:
    """The keys of :func:`kernel_launch_problems` (comparable between kernels)."""
    return set(kernel_launch_problems(loops))


def launch_problems(leir) -> list[str]:
    """Every launch rule a program (a ``Leir`` or anything with ``.leir``) breaks, one sentence
    each, prefixed by its nest: ``nest 1: 2048 threads per block > 1024``."""
    nests = getattr(leir, "leir", leir).nests
    return [f"nest {n}: {sentence}" for n, nest in enumerate(nests, start=1)
            for sentence in kernel_launch_problems(nest_loops(nest)).values()]


def binding_names(kernel: LoopNest, nest: LoopNest, loop: Loop) -> tuple[str, ...]:
    """Names that bind ``loop`` of ``nest`` (the top-level nest ``kernel`` or a nest inside it)
    to a GPU axis within CUDA's limits: an axis no loop of the kernel uses yet, at most 1024
    threads per block over all thread axes, threadIdx.x/y <= 1024, threadIdx.z <= 64,
    blockIdx.y/z <= 65535. The name is the axis followed by the loop's own index: ``a`` ->
    ``tya``, ``bxa``, ...

    ``kernel`` is the top-level nest: every loop of it runs in one GPU kernel. A loop of one
    iteration is named too: binding it distributes nothing and changes nothing, soundly, and the
    reference makes that move (``L^{1}_{a=0}`` -> ``B^{1}_{bya=0}``). When the kernel uses shared
    or local memory, only a loop right after the kernel's bound loops may be bound: such memory
    lives per block or thread and is set up once every axis is bound, so no serial loop may come
    first.
    """
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

