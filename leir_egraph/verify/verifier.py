"""``verify(before, after)``: how far a transformed program is equivalent to its original.

Everything but the argument checks runs in a persistent worker process (``worker.py``) --
parsing and validating ``after``, building, running, comparing -- so that a crash, a hang or a
runaway kernel becomes a result instead of taking the caller down, and ``timeout`` bounds the
whole call. ``isolate=False`` runs the same code in-process (for debugging: no timeout, and a
segfault kills the caller).

    >>> r = verify(softmax, softmax_with_parallel_rows)            # doctest: +SKIP
    >>> r.level, r.speedup                                         # doctest: +SKIP
    ('independent', 1.7)
"""

from __future__ import annotations

import atexit
import time
from contextlib import nullcontext
from itertools import groupby
from typing import Any, Iterable, Mapping

from ..leir.program import Program
from ..lower.build import PairedTiming
from ..lower.link import WHOLE_UP_TO
from ..lower.targets import TargetLike, target_kind
from .result import LEVELS, VerificationResult
from .worker import Worker


class Verifier:
    """Verifies pairs with one worker process, reused across calls.

    >>> with Verifier() as v:                                      # doctest: +SKIP
    ...     results = [v.verify(before, after) for after in candidates]
    """

    def __init__(self, isolate: bool = True):
        self.isolate = isolate
        self._worker = Worker() if isolate else None

    def __enter__(self) -> "Verifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()

    def launch(self) -> None:
        """Start the worker now without waiting for it (``Worker.launch``), when none runs:
        its start-up (TVM's import) overlaps what the caller does before its first request,
        which waits for the rest. Nothing for ``isolate=False``."""
        if self._worker is not None and not self._worker.alive():
            self._worker.launch()

    def verify(self, before: Program, after: Program | str, target: TargetLike = "llvm",
               trials: int = 3, timeout: float = 60.0, seed: int = 0,
               timing: bool = True, *, started: float | None = None,
               domain: str | None = None, ulps: int | None = None,
               scale: str = "output") -> VerificationResult:
        """See :func:`verify`. Never raises: every failure is a result with a reason.
        ``started``: the ``time.monotonic()`` at which the caller's ``timeout`` began (default:
        now), when the caller did part of the work already. ``domain`` and ``ulps``: what the
        rewrite's strategy declares (``Strategy.domain``, ``Strategy.ulps``, ``Strategy.scale``:
        where the ULPs are measured); with a domain,
        Equal also needs one special-value input set within it and the declared exactness
        (docs/VERIFY.md "Special values")."""
        start = time.perf_counter()
        # the worker held from here: a job of another thread sharing it (the search's deferred
        # judging) neither runs between the first request and its retry nor eats the timeout
        with self._worker.exclusive() if self._worker is not None else nullcontext():
            deadline = (time.monotonic() if started is None else started) + timeout
            try:
                result = self._verify(before, after, target, trials, timeout, seed, timing,
                                      deadline, domain, ulps, scale)
            except Exception as err:  # noqa: BLE001 -- the contract is to return, never raise
                from .session import describe_error
                result = VerificationResult.at("none", f"internal error: {describe_error(err)}",
                                               cause="internal")
        return _with(result, elapsed_s=time.perf_counter() - start)

    def _verify(self, before, after, target, trials, timeout, seed, timing,
                deadline: float, domain=None, ulps=None, scale="output") -> VerificationResult:
        kind = target_kind(target)
        if not isinstance(before, Program):
            return VerificationResult.at("none", "before must be a Program (LEIR + signature)",
                                         target=kind, cause="internal")
        after_spec = _spec(after) if isinstance(after, Program) else {"text": after}
        job = {
            "before": _spec(before), "after": after_spec,
            "values": _input_values(before, [after] if isinstance(after, Program) else []),
            "target": dict(target) if isinstance(target, Mapping) else target,
            "trials": trials, "seed": seed, "timing": timing, "before_problem": None,
            "domain": domain, "ulps": ulps, "scale": scale,
        }
        if self._worker is None:
            from .session import evaluate
            return _finish(evaluate(job), kind)
        outcome = self._worker.request(job, deadline)
        if outcome.status == "done":
            return _finish(outcome.result, kind)
        first = _interrupted(outcome, timeout, kind)
        if first.cause == "before" and time.monotonic() < deadline:
            # The original crashed or hung the worker: its problem is known, and after is
            # still judged (build, exec) in a fresh worker, without the original.
            job["before_problem"] = first.before_problem
            retry = self._worker.request(job, deadline)
            if retry.status == "done":
                return _finish(retry.result, kind)
            return _interrupted(retry, timeout, kind, first.before_problem)
        return first

    def verify_tir(self, before: Program, text: str, original_tir: str | None = None,
                   trials: int = 3, timeout: float = 60.0, seed: int = 0) -> VerificationResult:
        """A TVMScript TIR answer ``text`` against the LEIR original ``before``: parsed by TVM,
        compiled for the CPU, run and compared on the random input sets of ``seed``
        (``tir_answer.py``); ``original_tir``: the original's TIR as shown to the model (the
        Diff level compares with it). ``timeout`` bounds the whole call. Never raises."""
        start = time.perf_counter()
        job = {"kind": "tir", "before": _spec(before), "text": text,
               "original_tir": original_tir, "values": _input_values(before, []),
               "trials": trials, "seed": seed}
        try:
            if self._worker is None:
                from .session import evaluate
                result = _finish(evaluate(job), "llvm")
            else:
                outcome = self._worker.request(job, time.monotonic() + timeout)
                result = (_finish(outcome.result, "llvm") if outcome.status == "done"
                          else _interrupted(outcome, timeout, "llvm"))
        except Exception as err:  # noqa: BLE001 -- the contract is to return, never raise
            from .session import describe_error
            result = VerificationResult.at("none", f"internal error: {describe_error(err)}",
                                           cause="internal")
        return _with(result, elapsed_s=time.perf_counter() - start)

    def prepare(self, before: Program, afters: Iterable[Program], timeout: float = 60.0, *,
                timing: bool = False) -> dict[str, Any] | None:
        """Compile ``before`` and the candidates ``afters`` for their verifications, all in one
        TVM module (``lower.build.build_many``), so that each ``verify(before, after)`` that
        follows finds its build in the worker's cache: the module's fixed costs are paid once
        instead of once per candidate. Judges nothing and changes no verdict. Returns the
        worker's answer (``compiled``, ``cpu_s``), or ``None`` when it timed out or crashed --
        then the worker starts afresh and each verification builds its own candidate -- or
        when there was nothing to batch (fewer than two candidates built whole: a program of
        more than ``lower.link.WHOLE_UP_TO`` nests compiles in cached segments instead).

        ``timing``: compile ``before`` and ``afters`` for ``time_pair`` instead, each alone,
        the builds it would make itself (``lower.build.build_for_timing``): a pair timed
        after that compiles nothing, and nothing it measures changes."""
        afters = list(afters)
        if not timing:
            afters = [a for a in afters if len(a.leir.nests) <= WHOLE_UP_TO]  # others: segments
            if len(afters) < 2:
                return None
        job = {"kind": "prebuild", "before": _spec(before), "afters": [_spec(a) for a in afters],
               "values": _input_values(before, afters), "timing": timing}
        if self._worker is None:
            from .session import evaluate
            try:
                return evaluate(job)
            except Exception:  # noqa: BLE001 -- the verifications say what is wrong
                return None
        outcome = self._worker.request(job, time.monotonic() + timeout)
        return outcome.result if outcome.status == "done" else None

    def verify_many(self, pairs: Iterable[tuple[Program, Program | str]], **options
                    ) -> list[VerificationResult]:
        """``verify`` for each pair, in order; each run of consecutive pairs with the same
        original is prepared first (``prepare``: its candidates compiled in one module)."""
        out: list[VerificationResult] = []
        for _, group in groupby(pairs, key=lambda pair: id(pair[0])):
            group = list(group)
            self.prepare(group[0][0], [a for _, a in group if isinstance(a, Program)],
                         timeout=options.get("timeout", 60.0))
            out += [self.verify(before, after, **options) for before, after in group]
        return out

    def time_pair(self, before: Program, after: Program, rounds: int = 31,
                  timeout: float = 60.0, seed: int = 0) -> PairedTiming:
        """``before`` and ``after`` timed back to back in the worker, ``rounds`` interleaved
        rounds on the optimised CPU build (``lower.build.time_pair``), on the first random
        input set of ``seed``. Builds come from the worker's cache when it compiled them
        already (a verification with ``timing=True`` or an earlier pair). Equivalence is not
        checked: verify the pair first. Raises ``TimingError`` (timeout, crash, error)."""
        job = {"kind": "time", "before": _spec(before), "after": _spec(after),
               "values": _input_values(before, [after]),
               "rounds": rounds, "seed": seed}
        if self._worker is None:
            from .session import evaluate
            fields = evaluate(job)
        else:
            outcome = self._worker.request(job, time.monotonic() + timeout)
            if outcome.status != "done":
                what = {"timeout": f"timed out after {timeout:g} s"}.get(
                    outcome.status, f"{outcome.status}: {outcome.detail}")
                raise TimingError(f"paired timing {what}")
            fields = outcome.result
        return PairedTiming(tuple(fields["before_ms"]), tuple(fields["after_ms"]),
                            fields.get("compiled"), fields.get("threads"), fields.get("target"))


    def outputs(self, programs: list[Program], inputs: list[dict[str, Any]],
                timeout: float = 60.0) -> dict[str, Any]:
        """Run each program on each input set in the worker (the Equal level's build: serial,
        intermediates poisoned). Answers ``outputs`` -- per program its outputs per input set,
        or the text of its error -- and ``cpu_s``, the worker's CPU time. Raises ``RunError``
        when the worker times out or crashes."""
        job = {"kind": "outputs", "programs": [_spec(p) for p in programs],
               "inputs": [dict(i) for i in inputs]}
        if self._worker is None:
            from .session import evaluate
            return evaluate(job)
        outcome = self._worker.request(job, time.monotonic() + timeout)
        if outcome.status != "done":
            what = {"timeout": f"timed out after {timeout:g} s"}.get(
                outcome.status, f"{outcome.status}: {outcome.detail}")
            raise RunError(f"running the programs {what}")
        return outcome.result


class TimingError(RuntimeError):
    """The worker could not time a pair (``Verifier.time_pair``)."""


class RunError(RuntimeError):
    """The worker could not run the programs of ``Verifier.outputs`` (timeout, crash)."""


def _spec(program: Program) -> dict[str, Any]:
    return {"text": program.text, "signature": program.signature.to_dict(), "name": program.name}


def _input_values(before: Program, afters: list[Program]) -> dict[str, Any]:
    """The stored input values a job carries: ``before``'s, then the candidates' (a later one
    wins), for the inputs of ``before``'s signature."""
    values = dict(before.values)
    for after in afters:
        values.update(after.values)
    return {k: v for k, v in values.items() if k in before.signature.input_names}


def _with(result: VerificationResult, **changes) -> VerificationResult:
    from dataclasses import replace
    return replace(result, **changes)


def _finish(fields: dict[str, Any], kind: str) -> VerificationResult:
    fields = dict(fields)
    level, reason = fields.pop("level"), fields.pop("reason", None)
    fields["target"] = kind
    return VerificationResult.at(level, reason, **{k: v for k, v in fields.items()
                                                   if k in VerificationResult.__dataclass_fields__})


def _interrupted(outcome, timeout: float, kind: str,
                 before_problem: str | None = None) -> VerificationResult:
    """A result for a job the worker did not finish: the level it had passed, and why.
    ``before_problem``: the original's, found by an earlier attempt of the same call."""
    progress = outcome.progress
    level = progress.get("passed", "none")
    stage = progress.get("stage", "starting")
    if outcome.status == "timeout":
        what = f"timed out after {timeout:g} s while {stage}"
    elif outcome.status == "crash":
        what = f"{outcome.detail} while {stage}"
        if outcome.output:
            what += f" (worker output: {outcome.output})"
    else:
        what = f"worker error while {stage}: {outcome.detail}"
    cause = "timeout" if outcome.status == "timeout" else "crash"
    fields = {k: v for k, v in progress.get("fields", {}).items()
              if k in VerificationResult.__dataclass_fields__}
    fields["target"] = kind
    if before_problem is not None:
        fields["before_problem"] = before_problem
    verdict = progress.get("reason")  # after's own verdict, when already known
    if progress.get("activity") == "timing":
        return VerificationResult.at(level, "; ".join(filter(None, [verdict, f"timing {what}"])),
                                     cause=None if verdict is None else "independence", **fields)
    attempted = LEVELS[min(LEVELS.index(level) + 1, len(LEVELS) - 1)]
    if progress.get("program") == "before":  # building, running, validating or checking it
        fields["before_problem"] = f"before {what}"
        if LEVELS.index(level) < LEVELS.index("equal"):
            return VerificationResult.at(level, f"{attempted}: cannot tell, before {what}",
                                         cause="before", **fields)
        return VerificationResult.at(level, verdict, cause=None if verdict is None else
                                     "independence", **fields)
    return VerificationResult.at(level, f"{attempted}: {what}", cause=cause, **fields)


_default: Verifier | None = None


def _shared_verifier() -> Verifier:
    global _default
    if _default is None:
        _default = Verifier()
        atexit.register(_default.close)
    return _default


def verify(before: Program, after: Program | str, target: TargetLike = "llvm", trials: int = 3,
           timeout: float = 60.0, seed: int = 0, timing: bool = True, *,
           isolate: bool = True, started: float | None = None) -> VerificationResult:
    """Check how far ``after`` is equivalent to ``before`` (docs/LEIR.md §4, docs/VERIFY.md).

    ``after`` may be LEIR text (it takes ``before``'s signature and values). ``timeout`` bounds
    the whole call, the start of a worker process included (from ``started``, a
    ``time.monotonic()`` value, when the caller's own work counts too). Never raises: build
    errors, runtime errors, crashes and timeouts come back as a result naming the level
    reached, why (``reason``) and the kind of failure (``cause``).
    """
    verifier = _shared_verifier() if isolate else Verifier(isolate=False)
    return verifier.verify(before, after, target, trials, timeout, seed, timing, started=started)


def launch() -> None:
    """``Verifier.launch`` of the process-wide worker of ``verify``."""
    _shared_verifier().launch()


def prepare(before: Program, afters: Iterable[Program], timeout: float = 60.0, *,
            timing: bool = False) -> dict[str, Any] | None:
    """``Verifier.prepare`` with the process-wide worker of ``verify``."""
    return _shared_verifier().prepare(before, afters, timeout, timing=timing)


def time_pair(before: Program, after: Program, rounds: int = 31, timeout: float = 60.0,
              seed: int = 0) -> PairedTiming:
    """``Verifier.time_pair`` with the process-wide worker of ``verify``."""
    return _shared_verifier().time_pair(before, after, rounds, timeout, seed)


def verify_many(pairs: Iterable[tuple[Program, Program | str]], target: TargetLike = "llvm",
                trials: int = 3, timeout: float = 60.0, seed: int = 0, timing: bool = True, *,
                isolate: bool = True, workers: int = 1) -> list[VerificationResult]:
    """``verify`` for many ``(before, after)`` pairs, results in the order of ``pairs``.

    With one worker (builds of a shared ``before`` are compiled once). With ``workers > 1``
    the pairs are dealt round-robin to that many fresh worker processes, verified in parallel.
    """
    options = dict(target=target, trials=trials, timeout=timeout, seed=seed, timing=timing)
    if workers <= 1 or not isolate:
        verifier = _shared_verifier() if isolate else Verifier(isolate=False)
        return verifier.verify_many(pairs, **options)
    from concurrent.futures import ThreadPoolExecutor

    pairs = list(pairs)
    chunks = [pairs[i::workers] for i in range(workers)]

    def run(chunk):
        with Verifier() as v:
            return v.verify_many(chunk, **options)

    out: list[VerificationResult] = [None] * len(pairs)  # type: ignore[list-item]
    with ThreadPoolExecutor(workers) as pool:
        for i, part in enumerate(pool.map(run, chunks)):
            out[i::workers] = part
    return out
