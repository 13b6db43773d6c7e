"""The search algorithms' budgets, with the paper's defaults (Appendix C; see algorithms.py),
and the bounds of one request to a served model (``llm.ChatClient``). Plain data, so that
``leir search --help`` can list them without importing the search."""

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


# One request to a served model (README.md, "Talking to a served model"): safe defaults.
READ_TIMEOUT = 120.0           # seconds without a byte from the server (--llm-timeout)
DEADLINE = 600.0               # seconds for the whole request, answer included (--llm-deadline)
MAX_RESPONSE_BYTES = 16 << 20  # bytes of one response body (--llm-max-bytes)
