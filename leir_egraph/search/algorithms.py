"""The seven search algorithms of the paper (its Appendix C; docs/REFERENCE.md §5).

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
from dataclasses import replace
from typing import Callable

from ..leir.program import Program
from .budgets import DEFAULTS, Budget
from .judge import Judge
from .proposer import Proposer
from .run import Search, SearchResult, run
from .tree import Node

REPEAT_LIMIT = 5   # the reference stops after this many consecutive repeated candidates


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
    beam is kept when none is valid), fastest by :func:`evidence`. The frontier's candidates
    are judged once all its nodes are ranked (``Search.expand(defer=True)``, ``settle``): a
    node's ranking then runs while the worker verifies the candidates of the node before it,
    and the same candidates are judged, in the same order, with the same results."""
    frontier = [search.root]
    for _ in range(budget.iterations):
        if _terminal(search, REPEAT_LIMIT * budget.candidates):
            return
        try:
            for node in frontier:
                search.expand(node, budget.candidates, defer=True)
        finally:
            children = search.settle()
        if children:
            frontier = keep_enabler(search, children, beam_order(children)[:budget.topk])


def evidence(node: Node) -> float:
    """A node's speedup where its timing shows one beyond noise (``faster`` or ``slower``),
    else 1.0: a speedup within noise says nothing."""
    return node.speedup if node.faster or node.slower else 1.0


def beam_order(children: list[Node]) -> list[Node]:
    """Children by :func:`evidence`, best first; equal evidence in the order they were
    proposed (``id``), the proposer's own ranking. An enabling step that changes no time by
    itself (#81's split of 505 columns into 101 x 5, before the 5 become a V loop) then keeps
    its place in the beam instead of losing it to a neutral sibling's noise: under load it
    measured 0.92x (fastest rounds 1.04x) and the beam dropped it."""
    return sorted(children, key=lambda n: (-evidence(n), n.id))


# The beam keeps a slower child in place of its last member when the proposer's model expects
# it to lead, in one step, to a program this many times cheaper than any member's own
# expectation (``keep_enabler``).
ENABLER_MARGIN = 1.15


def keep_enabler(search: Search, children: list[Node], frontier: list[Node]) -> list[Node]:
    """``frontier`` with its last member replaced by the child left out whose expected seconds
    (the proposer's ``expected``: its model with lookahead) are ENABLER_MARGIN times below
    every member's, if there is one (the least such). A step whose payoff comes one step later
    -- #34's transposed copy of its weight, slower alone, before register_tiling reads whole
    vectors of it -- is measured slower than the root and the plain beam dropped it; a
    proposer without ``expected`` (a model, a replay) leaves the beam as it is."""
    expected = getattr(search.proposer, "expected", None)
    if expected is None or len(frontier) < 2:
        return frontier
    members = [expected(n.program) for n in frontier]
    if any(m is None for m in members):
        return frontier
    left = [(e, n.id, n) for n in children if n not in frontier
            for e in [expected(n.program)] if e is not None]
    if not left:
        return frontier
    best, _, enabler = min(left)
    if best * ENABLER_MARGIN < min(members):
        return frontier[:-1] + [enabler]
    return frontier


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


def search(program: Program, algorithm: str = "greedy", proposer: Proposer | None = None, *,
           iterations: int | None = None, candidates: int | None = None,
           topk: int | None = None, max_depth: int | None = None,
           max_samples: int | None = None, judge: Judge | None = None, trials: int = 3,
           timeout: float = 60.0, seed: int = 0, cache_file=None,
           progress: Callable[[Search], None] | None = None,
           confirm: bool = True) -> SearchResult:
    """Run one search from ``program``. Budgets default to the paper's for the algorithm
    (``budgets.DEFAULTS``); ``max_samples`` caps the candidates judged. Every candidate is
    timed against the root back to back (judge.py); ``confirm`` re-times the fastest nodes
    against the root at the end, and the confirmed speedup is the result's ``speedup``
    (``run.confirm_best``)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    budget = DEFAULTS[algorithm]
    changes = {k: v for k, v in dict(iterations=iterations, candidates=candidates, topk=topk,
                                     max_depth=max_depth).items() if v is not None}
    budget = replace(budget, **changes)
    if proposer is None:
        from .rules_proposer import RulesProposer
        proposer = RulesProposer(seed=seed)
    judge = judge or Judge(program, trials=trials, timeout=timeout, seed=seed,
                           cache_file=cache_file)
    judge.launch()   # the worker starts while the root is ranked
    state = Search(program, proposer, judge, algorithm, max_samples,
                   with_parent=algorithm != "chain_no_parent", progress=progress)
    return run(state, lambda s: ALGORITHMS[algorithm](s, budget), confirm)
