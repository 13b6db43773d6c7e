"""The search tree: nodes (programs reached by verified steps) and samples (every candidate
judged, valid or not, with its reason)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..leir.program import Program


@dataclass(frozen=True)
class Proposal:
    """One candidate a proposer offers for a node: the transformed program (or the raw text
    that failed to become one), the strategy it claims, its chain of thought, and the
    proposer's own failure reason (an unparsable answer, an HTTP error) when there is no
    program."""
    text: str | None
    strategy: str = ""
    cot: str = ""
    raw: str = ""
    error: str | None = None
    program: Program | None = field(default=None, compare=False, repr=False)


@dataclass
class Sample:
    """A judged candidate: spent budget, valid or not."""
    number: int
    node: int                    # id of the node it was proposed for
    strategy: str
    valid: bool
    level: str                   # verification level reached ("none" for unparsable answers)
    reason: str | None
    time_ms: float | None = None
    speedup: float | None = None   # paired: median of root / candidate over interleaved rounds
    text: str | None = None
    faster: bool = False           # the speedup is beyond noise (judge.NOISE_THRESHOLD)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(eq=False)
class Node:
    """A program in the search tree. The root has ``parent=None`` and ``speedup=1``.
    ``speedup`` is the paired measurement against the root (judge.py); ``faster`` and
    ``slower`` say whether it is beyond noise either way."""
    id: int
    program: Program
    key: str                      # canonical text (leir.canonical): identity up to renaming
    parent: "Node | None" = None
    depth: int = 0
    strategy: str = ""
    cot: str = ""
    speedup: float = 1.0
    time_ms: float | None = None
    faster: bool = False
    children: list["Node"] = field(default_factory=list)
    slower: bool = False
    trials: int = 0               # times this node was expanded
    failures: list[tuple[str, str]] = field(default_factory=list)  # (candidate text, reason)
    visits: int = 0               # MCTS
    value: float = 0.0            # MCTS

    def path(self) -> list["Node"]:
        out, node = [], self
        while node is not None:
            out.append(node)
            node = node.parent
        return out[::-1]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "parent": None if self.parent is None else self.parent.id,
                "depth": self.depth, "strategy": self.strategy, "speedup": self.speedup,
                "faster": self.faster, "time_ms": self.time_ms, "text": self.program.text,
                "cot": self.cot}
