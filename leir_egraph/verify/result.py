"""What a verification returns: the equivalence level reached and the evidence for it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# docs/LEIR.md §4, weakest first; "none" means not even Diff.
LEVELS = ("none", "diff", "build", "exec", "equal", "independent")
# Why the next level was not reached, as data (``reason`` says it in words), docs/VERIFY.md.
CAUSES = ("parse", "unchanged", "signature", "invalid", "build", "exec", "crash", "timeout",
          "before", "mismatch", "uninformative", "independence", "internal")


@dataclass(frozen=True)
class VerificationResult:
    """The level ``after`` reached against ``before`` (none < diff < build < exec < equal <
    independent), one boolean per level, and why the next level was not reached.

    ``cause`` is why the next level was not reached, as one of ``CAUSES`` (``None`` when
    ``after`` reached Independent): ``invalid`` (after is not valid LEIR), ``build``, ``exec``,
    ``crash`` and ``timeout`` (of after), ``before`` (the original's own problem stops the
    comparison; ``before_problem`` says which), ``mismatch``, ``uninformative``,
    ``independence`` ...

    ``before_problem`` names a defect of ``before`` itself (it does not build or run, or its own
    P/V/B claims are false), for which ``after`` cannot be blamed. ``speedup`` is
    the median of the per-round ratios of ``before`` and ``after`` timed back to back
    (``lower.build.time_pair``); the two times are each side's median, on the CPU, run on
    ``threads`` threads of TVM's runtime pool (``lower.threads``; None when not timed).
    """
    level: str
    diff: bool = False
    build: bool = False
    exec: bool = False
    equal: bool = False
    independent: bool = False
    reason: str | None = None
    cause: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    time_before_ms: float | None = None
    time_after_ms: float | None = None
    speedup: float | None = None
    threads: int | None = None
    build_s_before: float | None = None
    build_s_after: float | None = None
    before_independent: bool | None = None
    before_problem: str | None = None
    trials: int = 0
    target: str = "llvm"
    elapsed_s: float = 0.0
    cpu_s: float | None = None   # CPU time of the process that verified (its threads included)

    @property
    def ok(self) -> bool:
        """Reached Equal (the outputs agree); ``independent`` says whether P/V/B claims hold."""
        return self.equal

    def reached(self, level: str) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "VerificationResult":
        names = {f.name for f in fields(VerificationResult)}
        return VerificationResult(**{k: v for k, v in d.items() if k in names})

    @staticmethod
    def at(level: str, reason: str | None = None, **evidence) -> "VerificationResult":
        """A result that reached ``level``: every level up to it passed, none above it."""
        rank = LEVELS.index(level)
        flags = {name: LEVELS.index(name) <= rank for name in LEVELS[1:]}
        return VerificationResult(level=level, reason=reason, **flags, **evidence)

    def summary(self) -> str:
        """Human-readable lines (used by ``leir verify``)."""
        marks = "  ".join(f"{name} {'ok' if getattr(self, name) else '--'}" for name in LEVELS[1:])
        lines = [f"level: {self.level}", f"levels: {marks}"]
        if self.reason:
            lines.append(f"reason: {self.reason}")
        if self.before_problem:
            lines.append(f"before: {self.before_problem}")
        if self.max_abs_err is not None:
            lines.append(f"max abs error: {self.max_abs_err:.3g}   max rel error: "
                         f"{self.max_rel_err:.3g}   trials: {self.trials}")
        if self.time_before_ms is not None and self.time_after_ms is not None:
            threads = f" on {self.threads} threads" if self.threads is not None else ""
            lines.append(f"time: before {self.time_before_ms:.4g} ms, after "
                         f"{self.time_after_ms:.4g} ms, speedup {self.speedup:.3g}x{threads}")
        if self.build_s_after is not None:
            before = f"{self.build_s_before:.3g} s" if self.build_s_before is not None else "-"
            lines.append(f"build: before {before}, after {self.build_s_after:.3g} s")
        return "\n".join(lines)
