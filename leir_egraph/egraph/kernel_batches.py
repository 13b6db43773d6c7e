"""Several kernels (top-level nests) matched in one engine run, as one program.

A fact about a nest term holds wherever the term occurs, so kernels can share a run only when
no nest term occurs in two of them: then every fact of a member is the one it has alone, and
its rows are exactly its own single steps. ``disjoint_batches`` groups kernels that way;
``member_of`` maps a row's path in the batch program back to its member and the path inside
it. The factored exploration (explore/factored.py) and the search's kernel steps
(search/kernel_steps.py) match kernels this way.

    >>> member_of((2, 2, 1, 1))     # the third member's nest, then its child 1
    (2, (1,))
"""

from __future__ import annotations

from typing import Callable, TypeVar

from ..leir.ast import LoopNest
from ..leir.traverse import nests_in

BATCH_NESTS = 64   # kernels matched in one engine run

T = TypeVar("T")


def disjoint_batches(items: list[T], nest: Callable[[T], LoopNest] = lambda item: item
                     ) -> list[list[T]]:
    """``items`` in groups of at most ``BATCH_NESTS`` in which no nest term (``nest(item)``
    or one nested in it) occurs in two members, in order: each item goes to the first group it
    fits in."""
    groups: list[tuple[list, set]] = []
    for item in items:
        subs = set(nests_in(nest(item)))
        for members, used in groups:
            if len(members) < BATCH_NESTS and not (subs & used):
                members.append(item)
                used |= subs
                break
        else:
            groups.append(([item], subs))
    return [members for members, _ in groups]


def member_of(path: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """Member number and path inside it, for a path into a ``PCons`` list of nests."""
    i = 0
    while path and path[0] == 2:
        i, path = i + 1, path[1:]
    return i, path[1:]
