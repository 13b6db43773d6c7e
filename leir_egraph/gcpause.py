"""The cyclic garbage collector paused around allocation-heavy work that makes no cycles.

Enumerating a program's steps allocates hundreds of thousands of tuples (terms, decoded nests,
transitions) that reference counting frees; nearly none is part of a cycle. Each allocation
counts towards CPython's collection thresholds, and every generation-2 collection walks every
live object -- the engines, their caches, the cost model's memo tables -- finding nothing to
free. Measured on the MHA node (#67, 25 nests, 7,237 steps, benchmarks/results/
single_step_throughput.md) that was 0.8-1.3 of 4.7-5.2 CPU s of one ``all_steps``.

``with gc_paused():`` disables the collector for the block and restores the state it found (a
nested block leaves it disabled for the outer one). Cycles made inside are collected by the
next collection after the block, so memory stays bounded by what one block allocates.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector for the block, then restore its state."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
