"""The seven search algorithms of the paper (its Appendix C; REFERENCE_NOTES.md §6).

Defaults are the paper's budgets: 20 iterations for greedy, beam, MCTS and both chain
variants; depth 20 and 2 candidates per node for BFS and DFS; greedy breadth 2; beam 3
candidates per node and top-k 2. Where the authors' scripts differ (BFS/DFS depth 4, MCTS 10
iterations) the paper wins; docs/SEARCH.md lists the differences. The paper gives BFS and DFS
no cap on expansions (a full tree of depth 20 and breadth 2 never ends): here one expansion is
one iteration and the cap is the same 20 iterations as the others.

Each algorithm is a function of a ``Search`` (``run.py``) and its budget; all spending goes
through ``search.expand(node, k)``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .run import Search
from .tree import Node

REPEAT_LIMIT = 5   # the reference stops after this many consecutive repeated candidates


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


def _terminal(search: Search, limit: int = REPEAT_LIMIT) -> bool:
    return search.consecutive_repeats > limit


def chain(search: Search, budget: Budget) -> None:
    """One candidate per iteration from the current node; move to the newest valid child."""
    current = search.root
    for _ in range(budget.iterations):
        if _terminal(search):
            return
        search.expand(current, budget.candidates)
        if current.children:
            current = current.children[-1]


def greedy(search: Search, budget: Budget) -> None:
    """``candidates`` per iteration; move to the fastest child of the current node."""
    current = search.root
    for _ in range(budget.iterations):
        if _terminal(search, REPEAT_LIMIT * budget.candidates):
            return
        search.expand(current, budget.candidates)
        if current.children:
            current = max(current.children, key=lambda n: (n.speedup, -n.id))


def beam(search: Search, budget: Budget) -> None:
    """Expand every node of the beam; the next beam is the ``topk`` fastest new children (the
    beam is kept when none is valid)."""
    frontier = [search.root]
    for _ in range(budget.iterations):
        if _terminal(search, REPEAT_LIMIT * budget.candidates):
            return
        children: list[Node] = []
        for node in frontier:
            children.extend(search.expand(node, budget.candidates))
        if children:
            frontier = sorted(children, key=lambda n: (-n.speedup, n.id))[:budget.topk]


def _tree_walk(search: Search, budget: Budget, lifo: bool) -> None:
    todo: deque[Node] = deque([search.root])
    expansions = 0
    while todo and expansions < budget.iterations:
        node = todo.pop() if lifo else todo.popleft()
        if node.depth >= budget.max_depth or node.trials > budget.max_trials:
            continue
        children = search.expand(node, budget.candidates)
        expansions += 1
        # the reference appends the answers in reverse order; only valid children can be
        # expanded here (an unverified program has no place in the tree)
        todo.extend(reversed(children))


def bfs(search: Search, budget: Budget) -> None:
    """Breadth first from the root: a FIFO queue of valid children."""
    _tree_walk(search, budget, lifo=False)


def dfs(search: Search, budget: Budget) -> None:
    """Depth first from the root: a LIFO stack of valid children."""
    _tree_walk(search, budget, lifo=True)


def _ucb(node: Node, parent_visits: int) -> float:
    if node.visits == 0:
        return math.inf
    return node.value / node.visits + 1.414 * math.sqrt(2 * math.log(max(parent_visits, 1))
                                                        / node.visits)


def mcts(search: Search, budget: Budget) -> None:
    """Monte-Carlo tree search: select by UCB1 down expanded nodes, expand the leaf with one
    candidate, simulate = verification, back-propagate ``(exp(speedup-1)-1)*10``."""
    root = search.root
    for _ in range(budget.iterations):
        if _terminal(search):
            return
        node = root
        while node.children:
            node = max(node.children, key=lambda c: (_ucb(c, node.visits), -c.id))
        children = search.expand(node, budget.candidates)
        if not children:
            continue
        for child in children:
            reward = (math.exp(min(child.speedup - 1, 700.0)) - 1) * 10
            walk: Node | None = child
            while walk is not None:
                walk.visits += 1
                walk.value += reward
                walk = walk.parent


ALGORITHMS = {"greedy": greedy, "beam": beam, "bfs": bfs, "dfs": dfs, "mcts": mcts,
              "chain": chain, "chain_no_parent": chain}
