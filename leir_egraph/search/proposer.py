"""The proposer interface: given a node of the search, offer ``k`` candidate programs.

    class Proposer(Protocol):
        name: str
        def propose(self, request: Request) -> list[Proposal]

Three implementations: ``RulesProposer`` (single steps of our engine, cost-ranked or random),
``LLMProposer`` (any OpenAI-compatible chat-completions endpoint, the paper's prompts) and
``ReplayProposer`` (answers read from a JSONL file). A proposer never raises for a bad answer:
it returns a ``Proposal`` with ``error`` set, which the search records as a failed sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .tree import Node, Proposal


@dataclass(frozen=True)
class Request:
    """What a proposer knows when asked: the root, the node to transform (its parent and its
    failed attempts are reachable from it), how many candidates, the algorithm asking, the
    canonical texts already judged in this run, and whether the prompt shows the parent."""
    root: Node
    node: Node
    k: int
    algorithm: str
    seen: frozenset[str] = frozenset()
    with_parent: bool = True
    hardware: str = "cpu"


class Proposer(Protocol):
    name: str

    def propose(self, request: Request) -> list[Proposal]: ...


__all__ = ["Request", "Proposer", "Proposal"]
