"""Judging a candidate: verified against the **root** (Equal and Independent) and timed.

A candidate is a valid child when it differs from the root and from the node it was proposed
for (up to renaming, ``leir.canonical``), reaches Equal against the root and Independent
(or Equal only, when the root's own P/V/B claims are false: the candidate cannot be blamed,
as in the dataset pipeline), and has a time. Its speedup is ``root time / its time``, both
measured by the verifier's worker on the optimised CPU build.

Verdicts are cached by canonical text, in memory and optionally in a JSONL file keyed by the
root's text, so that a resumed run or another algorithm on the same workload does not verify
the same program twice.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..leir.canonical import canonical_text
from ..leir.parser import LeirSyntaxError, parse
from ..leir.program import Program
from ..verify import VerificationResult, Verifier, verify


@dataclass(frozen=True)
class Verdict:
    valid: bool
    level: str
    reason: str | None
    time_ms: float | None = None
    root_ms: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Judge:
    """Verifies candidates of one root. ``cache_file``: JSONL of earlier verdicts (resume)."""

    def __init__(self, root: Program, *, verifier: Verifier | None = None, trials: int = 3,
                 timeout: float = 60.0, seed: int = 0, cache_file: str | Path | None = None):
        self.root = root
        self.root_key = canonical_text(root)
        self.verifier = verifier
        self.options = dict(trials=trials, timeout=timeout, seed=seed, timing=True)
        self.root_ms: float | None = None
        self.cache: dict[str, Verdict] = {}
        self.cache_file = Path(cache_file) if cache_file else None
        self._confirmations = 0
        self._load()

    def _load(self):
        if self.cache_file is None or not self.cache_file.exists():
            return
        with open(self.cache_file) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue   # a line cut off by an interrupted run
                if row.get("root") == self.root.text:
                    self.cache[row["key"]] = Verdict(**row["verdict"])
                    if row["verdict"].get("root_ms"):
                        self.root_ms = self.root_ms or row["verdict"]["root_ms"]

    def _store(self, key: str, verdict: Verdict):
        self.cache[key] = verdict
        if self.cache_file is not None:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.cache_file, "a") as f:
                f.write(json.dumps({"root": self.root.text, "key": key,
                                    "verdict": verdict.to_dict()}) + "\n")
                f.flush()
                os.fsync(f.fileno())

    def program_of(self, text: str) -> Program | str:
        """The candidate as a Program with the root's signature, or why it is not one."""
        try:
            return Program(parse(text), self.root.signature, self.root.name, self.root.values)
        except LeirSyntaxError as err:
            return f"none: the answer is not LEIR: {err}"

    def key(self, program: Program) -> str:
        return canonical_text(program)

    def judge(self, program: Program, current_key: str) -> Verdict:
        """The verdict on ``program`` proposed at the node whose canonical text is
        ``current_key``."""
        key = self.key(program)
        if key == self.root_key:
            return Verdict(False, "none", "same as the root (up to renaming)")
        if key == current_key:
            return Verdict(False, "none", "same as the current program (up to renaming)")
        if key in self.cache:
            return self.cache[key]
        result = self._verify(program, **self.options)
        verdict = self._verdict(result)
        self._store(key, verdict)
        return verdict

    def confirm(self, program: Program) -> float | None:
        """A paired re-measurement: root and ``program`` timed back to back (a fresh seed makes
        the worker re-time the root), so that a speedup picked as the best of many noisy
        timings is checked once more. ``None`` when it does not verify."""
        self._confirmations += 1
        r = self._verify(program, trials=1, timeout=self.options["timeout"],
                         seed=10_000 + self._confirmations, timing=True)
        return r.speedup if r.equal else None

    def _verify(self, program: Program, **options) -> VerificationResult:
        """With the given verifier, else the process-wide one of ``verify.verify``."""
        if self.verifier is not None:
            return self.verifier.verify(self.root, program, **options)
        return verify(self.root, program, **options)

    def _verdict(self, r: VerificationResult) -> Verdict:
        if r.time_before_ms:
            self.root_ms = self.root_ms or r.time_before_ms
        independent = r.independent or (r.equal and r.before_independent is False)
        if not r.equal or not independent:
            return Verdict(False, r.level, r.reason or "not equal", root_ms=r.time_before_ms)
        if not r.time_after_ms:
            return Verdict(False, r.level, r.reason or "equal but not timed",
                           root_ms=r.time_before_ms)
        return Verdict(True, r.level, None, r.time_after_ms, r.time_before_ms)
