"""The cyclic garbage collector paused around allocation-heavy work, and its survivors frozen.

Enumerating a program's steps allocates hundreds of thousands of objects (terms, decoded nests,
transitions); reference counting frees nearly all of them. Each allocation counts towards
CPython's collection thresholds, and every generation-2 collection walks every live object --
the engines, their caches, the cost model's memo tables -- finding little to free. Measured on
the MHA node (#67, 25 nests, 7,237 steps, benchmarks/results/single_step_throughput.md) that
was 0.8-1.3 of 4.7-5.2 CPU s of one ``all_steps``.

``with gc_paused():`` disables the collector for the block and restores the state it found (a
nested block leaves it disabled for the outer one). When the outermost block ends, what it
left alive (a search's memoised steps and costs, the decoded nests they share) is not handed
to the next generation-0 collection, which walked every one of those objects (0.36 CPU s per
MHA node), then to the generation-1 and 2 collections that walked them again (1.2 and 1.5 CPU
s, measured after ranking three MHA nodes): every object tracked then is **frozen**
(``gc.freeze``), so collections walk only what was allocated after it.

Frozen objects are still freed by reference counting; only a reference cycle among them
outlives its last reference (a block leaves a few thousand objects in cycles: egglog's term
views). So the frozen set is bounded: when it has grown to :data:`GROWTH` times its size after
the last full collection (or after the first freeze), a block's end unfreezes everything and
runs one full collection, which frees those cycles, and freezes what is left. The sizes grow
geometrically, so each object is walked a bounded number of times on average, and the memory
held by uncollected cycles stays a fixed fraction of what was live at the last full collection.
The freeze is process-wide: a caller's own cycles made before a block wait for the next full
collection too.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# A full collection runs when the frozen objects are this many times those frozen right
# after the last one (see the module docstring).
GROWTH = 4.0

# [objects frozen right after the last full collection or the first freeze, objects frozen
# since (estimated)]
_full = [0, 0]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector for the block, then restore its state; the
    outermost block freezes its survivors (module docstring)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            settle()
            gc.enable()


def settle() -> None:
    """Freeze every tracked object; when the frozen set has grown :data:`GROWTH`-fold since
    the last full collection, unfreeze, collect everything, and freeze what is left.

    The growth is estimated from generation 0's count (the tracked objects allocated less
    those freed since the last collection or freeze), which costs nothing: counting the frozen
    objects (``gc.get_freeze_count``) walks them all (0.4 CPU s at 2.8 million), so it is done
    only right after a full collection, which walks them anyway."""
    added = gc.get_count()[0]
    gc.freeze()
    if not _full[0]:
        _full[0], _full[1] = gc.get_freeze_count(), 0
        return
    _full[1] += added
    if _full[0] + _full[1] > GROWTH * _full[0]:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _full[0], _full[1] = gc.get_freeze_count(), 0
