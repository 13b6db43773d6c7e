"""Exhaustive exploration of a program's rewrite space (issue 12, docs/EXPLORE.md).

    >>> from leir_egraph.explore import explore
    >>> # space = explore(program, ["loop_reorder", "loop_split"], depth=2)
    >>> # space.counts(), space.stopped, space.graph, top_k(space, 16)

The names are imported on first use, so that ``leir --help`` (which imports this package's
``commands``) pays neither for egglog nor for networkx.
"""

from importlib import import_module

_NAMES = {"explore": "explorer", "naive": "explorer", "successors": "explorer",
          "Exploration": "space", "Round": "space", "STOP_REASONS": "space",
          "rank": "measure", "top_k": "measure", "sample": "measure"}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_NAMES[name]}", __name__), name)
