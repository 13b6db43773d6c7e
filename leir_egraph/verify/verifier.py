"""``verify(before, after)``: how far a transformed program is equivalent to its original.

The cheap checks (Diff, signature, validation) run here; everything that needs TVM runs in a
persistent worker process (``worker.py``) so that a crash, a hang or a runaway kernel becomes
a result instead of taking the caller down. ``isolate=False`` runs the same code in-process
(for debugging: no timeout, and a segfault kills the caller).

    >>> r = verify(softmax, softmax_with_parallel_rows)            # doctest: +SKIP
    >>> r.level, r.speedup                                         # doctest: +SKIP
    ('independent', 1.7)
"""

from __future__ import annotations

import atexit
import time
from typing import Any, Iterable, Mapping

from ..leir.parser import LeirSyntaxError, parse
from ..leir.program import Program
from ..leir.validate import LeirValidationError, check
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

    def verify(self, before: Program, after: Program | str, target: TargetLike = "llvm",
               trials: int = 3, timeout: float = 60.0, seed: int = 0,
               timing: bool = True) -> VerificationResult:
        """See :func:`verify`. Never raises: every failure is a result with a reason."""
        start = time.perf_counter()
        try:
            result = self._verify(before, after, target, trials, timeout, seed, timing)
        except Exception as err:  # noqa: BLE001 -- the contract is to return, never raise
            from .session import describe_error
            result = VerificationResult.at("none", f"internal error: {describe_error(err)}")
        return _with(result, elapsed_s=time.perf_counter() - start)

    def _verify(self, before, after, target, trials, timeout, seed, timing) -> VerificationResult:
        kind = target_kind(target)
        if not isinstance(before, Program):
            return VerificationResult.at("none", "before must be a Program (LEIR + signature)",
                                         target=kind)
        if isinstance(after, str):
            try:
                after = Program(parse(after), before.signature, before.name, before.values)
            except LeirSyntaxError as err:
                return VerificationResult.at("none", f"after does not parse: {err}", target=kind)
        if after.text == before.text:
            return VerificationResult.at("none", "no change: after prints the same as before",
                                         target=kind)
        if after.signature != before.signature:
            return VerificationResult.at(
                "diff", "build: after's signature differs from before's "
                        f"({after.signature.to_json()} vs {before.signature.to_json()})",
                target=kind)
        try:
            check(after)
        except LeirValidationError as err:
            return VerificationResult.at("diff", f"build: invalid LEIR: {err}", target=kind)
        before_problem = None
        try:
            check(before)
        except LeirValidationError as err:
            before_problem = f"before is invalid LEIR: {err}"
        values = dict(before.values)
        values.update(after.values)
        job = {
            "before": _spec(before), "after": _spec(after),
            "values": {k: v for k, v in values.items() if k in before.signature.input_names},
            "target": dict(target) if isinstance(target, Mapping) else target,
            "trials": trials, "seed": seed, "timing": timing, "before_problem": before_problem,
        }
        if self._worker is None:
            from .session import evaluate
            return _finish(evaluate(job), kind)
        outcome = self._worker.request(job, timeout)
        if outcome.status == "done":
            return _finish(outcome.result, kind)
        return _interrupted(outcome, timeout, kind)

    def verify_many(self, pairs: Iterable[tuple[Program, Program | str]], **options
                    ) -> list[VerificationResult]:
        return [self.verify(before, after, **options) for before, after in pairs]


def _spec(program: Program) -> dict[str, Any]:
    return {"text": program.text, "signature": program.signature.to_dict(), "name": program.name}


def _with(result: VerificationResult, **changes) -> VerificationResult:
    from dataclasses import replace
    return replace(result, **changes)


def _finish(fields: dict[str, Any], kind: str) -> VerificationResult:
    fields = dict(fields)
    level, reason = fields.pop("level"), fields.pop("reason", None)
    fields["target"] = kind
    return VerificationResult.at(level, reason, **{k: v for k, v in fields.items()
                                                   if k in VerificationResult.__dataclass_fields__})


def _interrupted(outcome, timeout: float, kind: str) -> VerificationResult:
    """A result for a job the worker did not finish: the level it had passed, and why."""
    progress = outcome.progress
    level = progress.get("passed", "diff")
    stage = progress.get("stage", "starting")
    if outcome.status == "timeout":
        what = f"timed out after {timeout:g} s while {stage}"
    elif outcome.status == "crash":
        what = f"{outcome.detail} while {stage}"
        if outcome.output:
            what += f" (worker output: {outcome.output})"
    else:
        what = f"worker error while {stage}: {outcome.detail}"
    fields = {k: v for k, v in progress.get("fields", {}).items()
              if k in VerificationResult.__dataclass_fields__}
    fields["target"] = kind
    verdict = progress.get("reason")  # after's own verdict, when already known
    if stage.startswith("timing"):
        return VerificationResult.at(level, "; ".join(filter(None, [verdict, f"timing {what}"])),
                                     **fields)
    if "before" in stage:
        fields["before_problem"] = f"before {what}"
        if LEVELS.index(level) < LEVELS.index("equal"):
            return VerificationResult.at(level, f"equal: cannot compare, before {what}", **fields)
        return VerificationResult.at(level, verdict, **fields)
    attempted = LEVELS[min(LEVELS.index(level) + 1, len(LEVELS) - 1)]
    return VerificationResult.at(level, f"{attempted}: {what}", **fields)


_default: Verifier | None = None


def _shared_verifier() -> Verifier:
    global _default
    if _default is None:
        _default = Verifier()
        atexit.register(_default.close)
    return _default


def verify(before: Program, after: Program | str, target: TargetLike = "llvm", trials: int = 3,
           timeout: float = 60.0, seed: int = 0, timing: bool = True, *,
           isolate: bool = True) -> VerificationResult:
    """Check how far ``after`` is equivalent to ``before`` (docs/LEIR.md §4, docs/VERIFY.md).

    ``after`` may be LEIR text (it takes ``before``'s signature and values). ``timeout`` bounds
    the TVM work of this call (worker start-up excluded). Never raises: build errors, runtime
    errors, crashes and timeouts come back as a result naming the level reached and why.
    """
    verifier = _shared_verifier() if isolate else Verifier(isolate=False)
    return verifier.verify(before, after, target, trials, timeout, seed, timing)


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
