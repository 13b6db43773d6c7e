"""Exhaustive exploration of a program's rewrite space (issue 12, docs/EXPLORE.md).

    >>> from leir_egraph.explore import explore
    >>> # space = explore(program, ["loop_reorder", "loop_split"], depth=2)
    >>> # space.counts(), space.stopped, space.graph, top_k(space, 16)
"""

from .explorer import explore, naive, successors
from .space import Exploration, Round, STOP_REASONS

__all__ = ["explore", "naive", "successors", "Exploration", "Round", "STOP_REASONS"]
