"""The ``replay`` proposer: answers read from a JSONL file, for reproducible, offline runs.

Each line is one answer: ``{"answer": "<think>..</think><answer>{...}</answer>"}`` (a model's
raw text, as ``LLMProposer(record=...)`` writes it) or ``{"transformed_IR": "...",
"applied_strategy": "..."}``, optionally with ``"current": "<LEIR>"``: the program the answer
is for. Lines with ``current`` are served when the search asks at that program (up to
renaming, in file order); the others are served in file order to any request. When none is
left the proposer offers nothing, which ends the search like a run of repeated answers.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

from ..leir.canonical import canonical_text
from ..leir.parser import LeirSyntaxError, parse
from ..leir.program import Program
from ..outside import OutsideInputError
from .answers import jsonl_rows
from .llm import proposals_from_answer
from .proposer import Request
from .tree import Proposal


class ReplayProposer:
    def __init__(self, path: str | Path, signature=None):
        self.path = Path(path)
        self.name = f"replay:{self.path.name}"
        self._anywhere: deque[str] = deque()
        self._keyed: dict[str, deque[str]] = {}
        self._pending: list[tuple[str, str]] = []
        for n, row in jsonl_rows(self.path):
            for key in ("answer", "current", "transformed_IR", "applied_strategy"):
                if row.get(key) is not None and not isinstance(row[key], str):
                    raise OutsideInputError(f"{self.path}:{n}: '{key}' must be a string")
            answer = row.get("answer")
            if answer is None:
                answer = "<answer>" + json.dumps(
                    {k: row[k] for k in ("transformed_IR", "applied_strategy") if k in row}
                ) + "</answer>"
            if row.get("current"):
                self._pending.append((row["current"], answer))
            else:
                self._anywhere.append(answer)

    def _key(self, text: str, program: Program) -> str:
        try:
            return canonical_text(Program(parse(text), program.signature))
        except (LeirSyntaxError, RecursionError, ValueError):
            return text

    def propose(self, request: Request) -> list[Proposal]:
        program = request.node.program
        if self._pending:   # keys need the signature, known only now
            for text, answer in self._pending:
                self._keyed.setdefault(self._key(text, program), deque()).append(answer)
            self._pending = []
        queue = self._keyed.get(canonical_text(program))
        source = queue if queue else self._anywhere
        if not source:
            return []
        return proposals_from_answer(source.popleft(), request.k)
