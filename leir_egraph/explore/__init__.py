"""Exhaustive exploration of a program's rewrite space (issue 12, docs/EXPLORE.md).

    >>> from leir_egraph.explore import explore
    >>> # space = explore(program, ["loop_reorder", "loop_split"], depth=2)
    >>> # space.counts(), space.stopped, space.graph, top_k(space, 16)

The names are imported on first use, so that ``leir --help`` (which imports this package's
``commands``) pays neither for egglog nor for networkx.
"""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "explore": "explorer", "naive": "explorer", "successors": "explorer",
    "Exploration": "space", "Round": "space", "STOP_REASONS": "space",
    "rank": "measure", "top_k": "measure", "sample": "measure",
})
