"""One search run: the state shared by the algorithms (tree, samples, budget) and the result.

``Search.expand(node, k)`` is the only way the algorithms spend budget: it asks the proposer
for ``k`` candidates at ``node``, judges each against the root (``judge.py``) and attaches the
valid ones as children. A candidate already judged in this run is a *repeat* (no sample is
spent, as the reference's per-IR database does); every other candidate is a sample, whether
it verifies, fails a level, or never was a program (an unparsable answer, an HTTP error).

Metrics, exactly as the paper defines them:

* ``samples``: candidates judged;
* ``speedup``: root time / best time, over the root and every valid node (so at least 1);
* ``strategies``: distinct strategy types on the trajectory from the root to the best node;
* ``efficiency``: speedup / samples.

How speedup is measured (judge.py, docs/SEARCH.md §1): every valid candidate is timed
against the root back to back (interleaved rounds; the median of the per-round ratios), and
only a node whose paired speedup is beyond noise (``faster``: >= ``NOISE_THRESHOLD``) can be
the best. With ``confirm`` (the default) the ``CONFIRM_TOP`` fastest such nodes are re-timed
against the root with more rounds at the end; the fastest that is still faster beyond noise
is the best node and its confirmed speedup is the headline ``speedup``; when none is, the
best node is the root and the speedup 1. ``search_speedup`` keeps the in-search figure.
With more than one thread, the confirmed best then gets the parallel finish (``finish.py``):
P loops on its nests' outer parallel axes, kept only if confirmed faster than the best.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from ..leir.canonical import canonical_text
from ..leir.program import Program
from .finish import parallel_finish
from .judge import Judge, load_average
from .proposer import Request
from .tree import Node, Proposal, Sample


CONFIRM_TOP = 3   # nodes re-timed at the end of a run (the fastest faster-than-noise ones)


class BudgetSpent(Exception):
    """Raised inside an algorithm when ``max_samples`` is reached."""


@dataclass
class SearchResult:
    algorithm: str
    proposer: str
    root: Node
    best: Node
    samples: list[Sample]
    nodes: list[Node]
    repeats: int
    queries: int
    root_ms: float | None
    elapsed_s: float
    stopped: str
    confirmed: float | None = None   # the best node's confirmed speedup (1.0: none confirmed)
    search_best: Node | None = None  # the best node before confirmation
    confirmations: list[dict[str, Any]] = field(default_factory=list)
    load: tuple[float, float] | None = None   # 1-minute load average at the start and end
    confirm_s: float = 0.0   # of elapsed_s, the seconds the final re-timing (and finish) took
    threads: int | None = None   # TVM runtime threads its timings ran on (None: nothing timed)
    target: dict[str, Any] | None = None   # the TVM target its timings ran on (None: not timed)
    finish: dict[str, Any] | None = None   # the parallel finish (finish.py; None: not run)

    @property
    def trajectory(self) -> list[Node]:
        return self.best.path()

    @property
    def speedup(self) -> float:
        """The headline: the confirmed speedup when the run was confirmed, else the paired
        in-search speedup of the best node (1 for the root)."""
        if self.confirmed is not None:
            return self.confirmed
        return self.search_speedup

    @property
    def search_speedup(self) -> float:
        node = self.search_best or self.best
        return node.speedup if node.faster else 1.0

    @property
    def n_samples(self) -> int:
        return len(self.samples)

    @property
    def strategies(self) -> int:
        return len({n.strategy for n in self.trajectory[1:]})

    @property
    def efficiency(self) -> float:
        return self.speedup / self.n_samples if self.samples else 0.0

    def metrics(self) -> dict[str, Any]:
        return {"samples": self.n_samples, "speedup": self.speedup,
                "strategies": self.strategies, "efficiency": self.efficiency,
                "valid": sum(s.valid for s in self.samples),
                "faster": sum(s.faster for s in self.samples), "repeats": self.repeats,
                "queries": self.queries, "depth": self.best.depth,
                "search_speedup": self.search_speedup, "confirmed_speedup": self.confirmed}

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "proposer": self.proposer,
                "metrics": self.metrics(), "root_ms": self.root_ms, "stopped": self.stopped,
                "elapsed_s": self.elapsed_s, "confirm_s": self.confirm_s, "load": self.load,
                "threads": self.threads, "target": self.target, "finish": self.finish,
                "confirmations": self.confirmations,
                "trajectory": [n.to_dict() for n in self.trajectory],
                "samples": [s.to_dict() for s in self.samples]}


@dataclass
class Search:
    root_program: Program
    proposer: Any
    judge: Judge
    algorithm: str
    max_samples: int | None = None
    with_parent: bool = True
    progress: Callable[["Search"], None] | None = None
    nodes: list[Node] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    repeats: int = 0
    queries: int = 0
    consecutive_repeats: int = 0
    _deferred: list[Callable[[], Node | None]] = field(default_factory=list)
    _owed: int = 0
    _progress_due: int = 0
    _background: "_Background" = field(default_factory=lambda: _Background())

    def __post_init__(self):
        key = canonical_text(self.root_program)
        self.root = Node(0, self.root_program, key)
        self.nodes.append(self.root)
        self.seen.add(key)

    # ------------------------------------------------------------ spending budget

    def budget_left(self) -> bool:
        spent = len(self.samples) + self._owed   # the samples ``settle`` will record
        return self.max_samples is None or spent < self.max_samples

    def expand(self, node: Node, k: int, defer: bool = False) -> list[Node]:
        """Ask for ``k`` candidates at ``node``; returns the new valid children.

        ``defer``: the candidates' verifications start in the background (one thread, waiting
        on the verifier's worker) and ``expand`` returns at once with no children; ``settle``
        then times them and attaches the valid ones, in order. The caller ranks its next node
        meanwhile (the beam's frontier): each candidate is verified and timed exactly as
        without ``defer``, and the timings still run while this process waits, never beside
        a ranking. Only the order of the worker's jobs changes, not what is judged: the
        samples, nodes and their ids come out as without ``defer``, provided the caller does
        not read the children before ``settle``."""
        if not self.budget_left():
            raise BudgetSpent
        node.trials += 1
        self.queries += 1
        request = Request(self.root, node, k, self.algorithm, frozenset(self.seen),
                          self.with_parent)
        try:
            proposals = self.proposer.propose(request)
        except Exception as err:  # noqa: BLE001 -- a proposer failure is a failed sample
            proposals = [Proposal(None, error=f"proposer failed: {type(err).__name__}: {err}")]
        if not proposals:
            self.consecutive_repeats += 1   # nothing new to offer: counts toward terminal
            return []
        children = []
        for proposal in proposals[:max(k, 1)]:
            if not self.budget_left():
                break
            if defer:
                self._defer(node, proposal)
                continue
            child = self._judge(node, proposal)
            if child is not None:
                children.append(child)
        if defer:
            self._progress_due += 1
        elif self.progress:
            self.progress(self)
        return children

    def _defer(self, node: Node, proposal: Proposal) -> None:
        """``_judge`` with the verification started in the background (``expand(defer=True)``):
        what the proposer sees (``seen``, the repeat counts) is updated now, as ``_judge``
        does; the verdict and every record (samples, failures, nodes) wait for ``settle``, in
        order."""
        checked = self._prejudge(node, proposal, self._deferred)
        if checked is None:
            return
        program, key = checked
        future = self._background.submit(self.judge.verification, program, node.key)
        self._owed += 1
        self._deferred.append(lambda: self._attach(
            node, proposal, program, key, self.judge.conclude(program, future.result())))

    def settle(self) -> list[Node]:
        """The deferred candidates (``expand(defer=True)``) judged, in the order they were
        proposed: timed against the root and attached as children as ``expand`` does; returns
        the new valid children."""
        children = []
        deferred, self._deferred, self._owed = self._deferred, [], 0
        try:
            for finish in deferred:
                child = finish()
                if child is not None:
                    children.append(child)
        finally:   # an interrupted settle leaves no verification queued behind it
            self._background.cancel()
        due, self._progress_due = self._progress_due, 0
        for _ in range(due if self.progress else 0):
            self.progress(self)
        return children

    def _judge(self, node: Node, proposal: Proposal) -> Node | None:
        checked = self._prejudge(node, proposal)
        if checked is None:
            return None
        program, key = checked
        return self._attach(node, proposal, program, key, self.judge.judge(program, node.key))

    def _prejudge(self, node: Node, proposal: Proposal, later: list | None = None
                  ) -> tuple[Program, str] | None:
        """What ``_judge`` does before the judge: a failed or repeated candidate is recorded
        (None; into ``later``, to be done by ``settle``, when given); else the candidate is
        counted as new, and its program and key come back."""
        def record(action: Callable[[], None], sample: bool) -> None:
            if later is None:
                action()
            else:
                later.append(action)
                self._owed += sample

        def failed(text: str, reason: str) -> None:
            def action():
                self._sample(node, proposal, False, "none", reason)
                node.failures.append((text, reason))
            record(action, True)

        if proposal.error is not None or proposal.text is None:
            return failed(proposal.raw or "", proposal.error or "no answer")
        program = proposal.program or self.judge.program_of(proposal.text)
        if isinstance(program, str):
            return failed(proposal.text, program)
        key = canonical_text(program)
        if key in self.seen:
            self.repeats += 1
            self.consecutive_repeats += 1
            record(lambda: node.failures.append((proposal.text,
                                                 "repeats a program already judged")), False)
            return None
        self.consecutive_repeats = 0
        self.seen.add(key)
        return program, key

    def _attach(self, node: Node, proposal: Proposal, program: Program, key: str,
                verdict) -> Node | None:
        """The sample of a judged candidate, and its node when it is valid."""
        self._sample(node, proposal, verdict.valid, verdict.level, verdict.reason,
                     verdict.time_ms, verdict.speedup, verdict.faster)
        if not verdict.valid:
            node.failures.append((proposal.text, verdict.reason or "not valid"))
            return None
        child = Node(len(self.nodes), program, key, node, node.depth + 1, proposal.strategy,
                     proposal.cot, verdict.speedup or 1.0, verdict.time_ms, verdict.faster,
                     slower=self.judge.slower(verdict))
        node.children.append(child)
        self.nodes.append(child)
        return child

    def _sample(self, node, proposal, valid, level, reason, time_ms=None, speedup=None,
                faster=False):
        self.samples.append(Sample(len(self.samples) + 1, node.id, proposal.strategy, valid,
                                   level, reason, time_ms, speedup, proposal.text, faster))

    # ------------------------------------------------------------ the result

    def best(self) -> Node:
        """The node with the highest paired speedup among those faster beyond noise; the root
        when there is none."""
        faster = [n for n in self.nodes if n.faster]
        return max(faster, key=lambda n: (n.speedup, -n.id)) if faster else self.root

    def result(self, elapsed: float, stopped: str) -> SearchResult:
        best = self.best()
        return SearchResult(self.algorithm, getattr(self.proposer, "name", "?"), self.root,
                            best, self.samples, self.nodes, self.repeats, self.queries,
                            self.judge.root_ms, elapsed, stopped, search_best=best)


class _Background:
    """One daemon thread running submitted calls in order (``Search.expand(defer=True)``'s
    verifications: they wait on the verifier's worker, so they hold no core). A daemon, so
    that an interrupted run does not wait at exit for a job it no longer needs."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable, *args) -> Future:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, args=(self._jobs,),
                                            name="search-judge", daemon=True)
            self._thread.start()
        future: Future = Future()
        self._jobs.put((future, fn, args))
        return future

    def close(self) -> None:
        """End the thread once the jobs before are done (a search's end: its thread goes)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._jobs, self._thread = queue.SimpleQueue(), None

    def cancel(self) -> None:
        """Drop the jobs not started yet (their futures are cancelled)."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            job[0].cancel()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as err:  # noqa: BLE001 -- re-raised by future.result()
                future.set_exception(err)


def confirm_best(search: Search, result: SearchResult, top: int = CONFIRM_TOP) -> None:
    """Re-time the ``top`` fastest faster-than-noise nodes against the root (``Judge.confirm``,
    more rounds); the best node becomes the fastest that is still faster beyond noise, with
    its confirmed speedup as the headline, else the root with 1."""
    ranked = sorted((n for n in search.nodes if n.faster), key=lambda n: (-n.speedup, n.id))
    held: list[tuple[float, Node]] = []
    for node in ranked[:top]:
        timed = search.judge.confirm(node.program)
        entry: dict[str, Any] = {"node": node.id, "strategy": node.strategy,
                                 "search_speedup": node.speedup}
        if timed is None:
            entry["error"] = "could not be timed"
        else:
            entry.update(timed.to_dict())
            if timed.faster:
                held.append((timed.speedup, node))
        result.confirmations.append(entry)
    if held:
        result.confirmed, result.best = max(held, key=lambda x: (x[0], -x[1].id))
    else:
        result.confirmed, result.best = 1.0, result.root


def run(search: Search, algorithm: Callable[[Search], None], confirm: bool = True
        ) -> SearchResult:
    start = time.perf_counter()
    load = load_average()
    stopped = "finished"
    try:
        algorithm(search)
    except BudgetSpent:
        stopped = "sample budget spent"
    finally:
        search._background.close()
    result = search.result(time.perf_counter() - start, stopped)
    if confirm:
        searched = time.perf_counter()
        confirm_best(search, result)
        parallel_finish(search, result)   # more than one thread: P loops on the best, if faster
        result.confirm_s = time.perf_counter() - searched
        result.elapsed_s += result.confirm_s   # the whole run, the re-timing included
    result.load = (load, load_average())
    result.threads, result.target = search.judge.threads, search.judge.target
    return result

