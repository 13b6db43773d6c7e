"""Judging a candidate: verified against the **root** (Equal and Independent) and timed
against it, back to back.

A candidate is a valid child when it differs from the root and from the node it was proposed
for (up to renaming, ``leir.canonical``), reaches Equal against the root and Independent
(or Equal only, when the root's own P/V/B claims are false: the candidate cannot be blamed,
as in the dataset pipeline), and has a time.

**Timing is paired.** After verification (without timing) the root and the candidate are
timed in the verifier's worker, interleaved: ``rounds`` rounds of one ``time_evaluator``
repeat each (>= 2 ms of kernel calls), alternating which goes first
(``lower.build.time_pair``). The speedup is the median of the per-round ratios root /
candidate, so both sides of every ratio saw the same machine load. A candidate counts as
**faster** only when that median and the ratio of the two minima both reach
``NOISE_THRESHOLD`` (1.05): a no-op rewrite measures 1 +- a few percent on a loaded machine,
and is never an improvement. ``confirm`` re-times a program the same way with more rounds.

Builds: the worker compiles every program once per target and lowering options, keyed by its
text (``lower.build``); the root's optimised build is made once and reused by every pair, so
a candidate's paired timing compiles only the candidate, and ``confirm`` compiles nothing
(``PairedTiming.compiled``).

Verdicts are cached by canonical text, in memory and optionally in a JSONL file keyed by the
root's text, so that a resumed run or another algorithm on the same workload does not verify
the same program twice. Valid verdicts timed unpaired (older caches), with another number
of rounds or on another number of threads (``lower.threads``) are not reused (they are judged
again).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..leir.canonical import canonical_text
from ..leir.parser import LeirSyntaxError, parse
from ..leir.program import Program
from ..verify import (TimingError, VerificationResult, Verifier, launch, prepare, time_pair,
                      verify)


NOISE_THRESHOLD = 1.05   # a paired speedup below this is noise, not an improvement
ROUNDS = 31              # interleaved rounds (>= 2 ms of kernel calls a side) per candidate
CONFIRM_ROUNDS = 61      # ... when the best programs are re-timed at the end of a run


@dataclass(frozen=True)
class Verdict:
    valid: bool
    level: str
    reason: str | None
    time_ms: float | None = None       # the candidate's median over its paired rounds
    root_ms: float | None = None       # the root's median over the same rounds
    speedup: float | None = None       # median of the per-round ratios root / candidate
    min_speedup: float | None = None   # fastest root round / fastest candidate round
    faster: bool = False               # both ratios >= the judge's threshold
    load: float | None = None          # 1-minute load average when it was timed
    rounds: int | None = None          # paired rounds it was timed with
    threads: int | None = None         # TVM runtime threads it was timed on (lower.threads)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Timed:
    """One paired measurement of a program against the root (``Judge.time``)."""
    speedup: float
    min_speedup: float
    faster: bool
    root_ms: float
    time_ms: float
    rounds: int
    compiled: int | None
    load: float
    threads: int | None = None   # TVM runtime threads both ran on (lower.threads)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


class Judge:
    """Verifies candidates of one root and times them against it, paired. ``cache_file``:
    JSONL of earlier verdicts (resume). ``rounds``/``confirm_rounds``: interleaved timing
    rounds when judging / confirming; ``threshold``: the paired speedup a program must reach
    to count as faster (``NOISE_THRESHOLD``). Every timing records the thread count of TVM's
    pool (``threads``, ``lower.threads``); a cached verdict timed on another count is judged
    again."""

    def __init__(self, root: Program, *, verifier: Verifier | None = None, trials: int = 3,
                 timeout: float = 60.0, seed: int = 0, cache_file: str | Path | None = None,
                 rounds: int = ROUNDS, confirm_rounds: int = CONFIRM_ROUNDS,
                 threshold: float = NOISE_THRESHOLD):
        self.root = root
        self.root_key = canonical_text(root)
        self.verifier = verifier
        self.options = dict(trials=trials, timeout=timeout, seed=seed, timing=False)
        self.rounds, self.confirm_rounds, self.threshold = rounds, confirm_rounds, threshold
        self.root_ms: float | None = None
        self.threads: int | None = None   # the thread count of the latest paired timing
        self.target: dict | None = None   # the TVM target of the latest paired timing
        self.cache: dict[str, Verdict] = {}
        self.cache_file = Path(cache_file) if cache_file else None
        self._load()

    def _load(self):
        if self.cache_file is None or not self.cache_file.exists():
            return
        from ..lower.threads import wanted
        threads = wanted()   # the count this run's timings will run on
        with open(self.cache_file) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue   # a line cut off by an interrupted run
                if row.get("root") != self.root.text:
                    continue
                fields = {k: v for k, v in row["verdict"].items()
                          if k in Verdict.__dataclass_fields__}
                if fields.get("valid") and (fields.get("speedup") is None
                                            or fields.get("rounds") != self.rounds
                                            or fields.get("threads") != threads):
                    continue   # timed unpaired, with other rounds or threads: judge it again
                if fields.get("valid"):
                    fields["faster"] = self._faster(fields["speedup"], fields["min_speedup"])
                self.cache[row["key"]] = Verdict(**fields)
                if fields.get("valid") and fields.get("root_ms"):
                    self.root_ms = self.root_ms or fields["root_ms"]
                    self.threads = threads

    def _faster(self, speedup: float | None, min_speedup: float | None) -> bool:
        return bool(speedup and min_speedup and speedup >= self.threshold
                    and min_speedup >= self.threshold)

    def slower(self, verdict: Verdict) -> bool:
        """Both ratios of a timed verdict at most 1 / the threshold: slower beyond noise."""
        limit = 1 / self.threshold
        return bool(verdict.speedup and verdict.min_speedup and verdict.speedup <= limit
                    and verdict.min_speedup <= limit)

    def _store(self, key: str, verdict: Verdict):
        self.cache[key] = verdict
        if self.cache_file is not None:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.cache_file, "a") as f:
                f.write(json.dumps({"root": self.root.text, "key": key,
                                    "verdict": verdict.to_dict()}) + "\n")
                f.flush()
                os.fsync(f.fileno())

    def launch(self) -> None:
        """Start the verifier's worker now, without waiting for it (``Verifier.launch``): its
        start-up then overlaps what comes before the first verification (a search's first
        ranking) instead of delaying it."""
        if self.verifier is not None:
            self.verifier.launch()
        else:
            launch()

    def program_of(self, text: str) -> Program | str:
        """The candidate as a Program with the root's signature, or why it is not one."""
        from ..outside import OutsideInputError, bounded
        seconds = self.options["timeout"]
        try:   # an answer is parsed within the time a verification may take (--timeout)
            return bounded(lambda: Program(parse(text), self.root.signature, self.root.name,
                                           self.root.values), seconds,
                           f"parsing took over {seconds:g} s (--timeout)")
        except LeirSyntaxError as err:
            return f"none: the answer is not LEIR: {err}"
        except OutsideInputError as err:
            return f"none: the answer is not usable LEIR: {err}"
        except (RecursionError, MemoryError) as err:
            return f"none: the answer is not usable LEIR: {type(err).__name__}"

    def key(self, program: Program) -> str:
        return canonical_text(program)

    def judge(self, program: Program, current_key: str) -> Verdict:
        """The verdict on ``program`` proposed at the node whose canonical text is
        ``current_key``."""
        return self.conclude(program, self.verification(program, current_key))

    def verification(self, program: Program, current_key: str) -> Verdict | VerificationResult:
        """The first half of ``judge``: a final verdict when the candidate needs no worker
        (the root, the current program, a cached verdict), else its verification (no timing);
        a candidate to be timed also gets its timing build made here (``Verifier.prepare``).
        Safe to run in a thread beside the caller's own work (``run.Search``'s deferred
        judging): it only waits on the worker."""
        key = self.key(program)
        if key == self.root_key:
            return Verdict(False, "none", "same as the root (up to renaming)")
        if key == current_key:
            return Verdict(False, "none", "same as the current program (up to renaming)")
        if key in self.cache:
            return self.cache[key]
        checked = self._verify(program, **self.options)
        if self._timed(checked):   # its timing's build, made here too: the timing compiles none
            (self.verifier.prepare if self.verifier is not None else prepare)(
                self.root, [program], self.options["timeout"], timing=True)
        return checked

    def conclude(self, program: Program, checked: Verdict | VerificationResult) -> Verdict:
        """The second half of ``judge``: a verified candidate timed against the root, and its
        verdict stored."""
        if isinstance(checked, Verdict):
            return checked
        verdict = self._verdict(program, checked)
        self._store(self.key(program), verdict)
        return verdict

    def time(self, program: Program, rounds: int | None = None) -> Timed:
        """``program`` and the root timed back to back, ``rounds`` interleaved rounds
        (default: the judge's). Raises ``verify.TimingError``."""
        rounds = rounds or self.rounds
        options = dict(rounds=rounds, timeout=self.options["timeout"],
                       seed=self.options["seed"])
        if self.verifier is not None:
            paired = self.verifier.time_pair(self.root, program, **options)
        else:
            paired = time_pair(self.root, program, **options)
        self.root_ms = self.root_ms or paired.before_median_ms
        self.threads, self.target = paired.threads, paired.target
        return Timed(paired.speedup, paired.min_speedup,
                     self._faster(paired.speedup, paired.min_speedup),
                     paired.before_median_ms, paired.after_median_ms, rounds, paired.compiled,
                     load_average(), paired.threads)

    def confirm(self, program: Program) -> Timed | None:
        """A final paired re-measurement with ``confirm_rounds`` rounds: a speedup picked as
        the best of many measurements is biased upward, this one is not. ``None`` when the
        pair cannot be timed."""
        try:
            return self.time(program, self.confirm_rounds)
        except TimingError:
            return None

    def _verify(self, program: Program, **options) -> VerificationResult:
        """With the given verifier, else the process-wide one of ``verify.verify``."""
        if self.verifier is not None:
            return self.verifier.verify(self.root, program, **options)
        return verify(self.root, program, **options)

    @staticmethod
    def _timed(r: VerificationResult) -> bool:
        """Whether a verified candidate is valid enough to be timed: Equal, and Independent
        (or the root's own claims are false)."""
        return r.equal and (r.independent or r.before_independent is False)

    def _verdict(self, program: Program, r: VerificationResult) -> Verdict:
        if not self._timed(r):
            return Verdict(False, r.level, r.reason or "not equal")
        try:
            t = self.time(program)
        except TimingError as err:
            return Verdict(False, r.level, f"equal but not timed: {err}")
        return Verdict(True, r.level, None, t.time_ms, t.root_ms, t.speedup, t.min_speedup,
                       t.faster, t.load, t.rounds, t.threads)
