"""Multi-step optimization search (docs/SEARCH.md): the paper's seven algorithms over
pluggable proposers, every candidate verified against the root and timed.

    search(program, algorithm="greedy", proposer=RulesProposer(), max_samples=None, seed=0)
        -> SearchResult   (.trajectory, .samples, .metrics(): samples, speedup, strategies,
                           efficiency)

Algorithms: greedy, beam, bfs, dfs, mcts, chain, chain_no_parent. Proposers: RulesProposer
(``rank="cost"|"random"``), LLMProposer (OpenAI-compatible endpoint), ReplayProposer (JSONL).
"""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "search": "algorithms", "ALGORITHMS": "algorithms",
    "Budget": "budgets", "DEFAULTS": "budgets",
    "AnswerError": "answers", "parse_answer": "answers",
    "Judge": "judge", "Verdict": "judge",
    "ChatClient": "llm", "ChatError": "llm", "LLMProposer": "llm",
    "Proposer": "proposer", "Request": "proposer",
    "ReplayProposer": "replay",
    "RulesProposer": "rules_proposer",
    "Search": "run", "SearchResult": "run",
    "Node": "tree", "Proposal": "tree", "Sample": "tree",
})
