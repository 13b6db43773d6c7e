"""Multi-step optimization search (docs/SEARCH.md): the paper's seven algorithms over
pluggable proposers, every candidate verified against the root and timed.

    search(program, algorithm="greedy", proposer=RulesProposer(), max_samples=None, seed=0)
        -> SearchResult   (.trajectory, .samples, .metrics(): samples, speedup, strategies,
                           efficiency)

Algorithms: greedy, beam, bfs, dfs, mcts, chain, chain_no_parent. Proposers: RulesProposer
(``rank="cost"|"random"``), LLMProposer (OpenAI-compatible endpoint), ReplayProposer (JSONL).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..leir.program import Program
from .algorithms import ALGORITHMS, DEFAULTS, Budget
from .answers import AnswerError, parse_answer
from .judge import Judge, Verdict
from .llm import ChatClient, ChatError, LLMProposer
from .proposer import Proposer, Request
from .replay import ReplayProposer
from .rules_proposer import RulesProposer
from .run import Search, SearchResult, run
from .tree import Node, Proposal, Sample


def search(program: Program, algorithm: str = "greedy", proposer: Proposer | None = None, *,
           iterations: int | None = None, candidates: int | None = None,
           topk: int | None = None, max_depth: int | None = None,
           max_samples: int | None = None, judge: Judge | None = None, trials: int = 3,
           timeout: float = 60.0, seed: int = 0, cache_file=None,
           progress: Callable[[Search], None] | None = None,
           confirm: bool = False) -> SearchResult:
    """Run one search from ``program``. Budgets default to the paper's for the algorithm
    (``algorithms.DEFAULTS``); ``max_samples`` caps the candidates judged; ``confirm``
    re-times the best program against the root back to back (``confirmed_speedup``)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    budget = DEFAULTS[algorithm]
    changes = {k: v for k, v in dict(iterations=iterations, candidates=candidates, topk=topk,
                                     max_depth=max_depth).items() if v is not None}
    budget = replace(budget, **changes)
    proposer = proposer or RulesProposer(seed=seed)
    judge = judge or Judge(program, trials=trials, timeout=timeout, seed=seed,
                           cache_file=cache_file)
    state = Search(program, proposer, judge, algorithm, max_samples,
                   with_parent=algorithm != "chain_no_parent", progress=progress)
    return run(state, lambda s: ALGORITHMS[algorithm](s, budget), confirm)


__all__ = ["search", "SearchResult", "Search", "Judge", "Verdict", "Budget", "DEFAULTS",
           "ALGORITHMS", "RulesProposer", "LLMProposer", "ReplayProposer", "ChatClient",
           "ChatError", "Proposer", "Request", "Proposal", "Node", "Sample", "parse_answer",
           "AnswerError"]
