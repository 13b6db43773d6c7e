"""The search algorithms' budgets, with the paper's defaults (Appendix C; see algorithms.py).
Plain data, so that ``leir search --help`` can list the algorithms without importing them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    iterations: int = 20
    candidates: int = 1       # answers per query (num_IRs)
    topk: int = 2             # beam width
    max_depth: int = 20       # BFS/DFS
    max_trials: int = 3       # BFS/DFS: a node expanded more often is skipped


DEFAULTS = {
    "greedy": Budget(iterations=20, candidates=2),
    "beam": Budget(iterations=20, candidates=3, topk=2),
    "bfs": Budget(iterations=20, candidates=2, max_depth=20),
    "dfs": Budget(iterations=20, candidates=2, max_depth=20),
    "mcts": Budget(iterations=20, candidates=1),
    "chain": Budget(iterations=20, candidates=1),
    "chain_no_parent": Budget(iterations=20, candidates=1),
}
