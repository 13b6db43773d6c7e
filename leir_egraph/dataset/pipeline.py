"""The per-program work: source -> Program -> transitions -> lowering + verification -> records.

``process_program(source, config)`` is a pure function of its arguments (plain dicts in, plain
dicts out), so it runs the same in a local worker process and in a Ray task, and the same
inputs always give the same records (timings aside, see DatasetConfig.timing). Nothing TVM ever
leaves the process: TIR and CUDA travel as text.

Every failure becomes a row of the failures file with its stage and reason, and the work goes
on with what is left: a strategy whose rules raise does not cost the others, a transition that
does not lower is still verified (and fails there), and a program whose original cannot be
lowered or run yields no records but one failure.
"""

from __future__ import annotations

import atexit
import json
from dataclasses import dataclass
from typing import Any

from ..egraph.strategy import CATEGORIES, Strategy, load_strategies
from ..leir.limits import ProgramTooLarge, check_steps_budget
from ..leir.program import Program
from .config import DatasetConfig
from .records import failure
from .sources import FrontendFailure, ProgramSource, load_program


class StrategySelectionError(ValueError):
    """A --strategies entry that is neither a strategy id nor a category."""


def select_strategies(selection: tuple[str, ...] | list[str], rules: tuple[str, ...] = ()
                      ) -> tuple[Strategy, ...]:
    """The strategies of ``rules/`` plus ``rules`` directories, narrowed to ``selection`` (ids
    or category names; empty = all), in the loader's order (category, then id)."""
    loaded = load_strategies(*rules)
    if not selection:
        return tuple(loaded)
    ids = {s.id for s in loaded}
    wanted: set[str] = set()
    for token in selection:
        if token in CATEGORIES:
            wanted |= {s.id for s in loaded if s.category == token}
        elif token in ids:
            wanted.add(token)
        else:
            raise StrategySelectionError(
                f"unknown strategy or category '{token}'; categories: {', '.join(CATEGORIES)}; "
                f"strategies: {', '.join(sorted(ids))}")
    return tuple(s for s in loaded if s.id in wanted)


@dataclass
class _Context:
    """What a worker keeps between programs: the strategies, their compiled engine, the
    strategies whose rules egglog rejected (with why), and one verifier (its TVM worker process
    compiles each original once and keeps it cached)."""
    strategies: tuple[Strategy, ...]
    engine: Any
    rejected: dict[str, str]
    verifier: Any


_contexts: dict[str, _Context] = {}


def compile_strategies(strategies: tuple[Strategy, ...]) -> tuple[tuple[Strategy, ...], Any,
                                                                   dict[str, str]]:
    """One engine for all strategies. A rule file that egglog rejects is left out (and
    reported) rather than costing the run: RuleFileError names its file, so each retry drops
    exactly one strategy. One engine, not one per strategy: each holds hundreds of MB."""
    from ..egraph.engine import engine_for
    from ..egraph.strategy import RuleFileError

    rejected: dict[str, str] = {}
    kept = tuple(strategies)
    while True:
        try:
            return kept, engine_for(kept), rejected
        except RuleFileError as err:
            bad = [s for s in kept if s.path == err.path]
            if not bad:
                raise
            for s in bad:
                rejected[s.id] = f"RuleFileError: {err}"
            kept = tuple(s for s in kept if s not in bad)


def _context(config: DatasetConfig) -> _Context:
    key = config.key()
    ctx = _contexts.get(key)
    if ctx is None:
        from ..verify import Verifier
        for old in _contexts.values():
            old.verifier.close()
        _contexts.clear()
        strategies, engine, rejected = compile_strategies(
            select_strategies(config.strategies, config.rules))
        verifier = Verifier()
        atexit.register(verifier.close)
        ctx = _contexts[key] = _Context(strategies, engine, rejected, verifier)
    return ctx


def close_contexts() -> None:
    """Stop the verifiers' TVM worker processes (a worker process calls this on its way out,
    so they are reaped, not orphaned)."""
    for ctx in _contexts.values():
        ctx.verifier.close()
    _contexts.clear()


def process_program(source: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """All records and failures of one program: ``{"program": summary, "records": [...],
    "failures": [...]}``. Never raises for a problem of the program itself."""
    cfg = DatasetConfig.from_dict(config)
    src = ProgramSource.from_dict(source)
    return _ProgramRun(src, cfg, _context(cfg)).run()


class _ProgramRun:
    def __init__(self, src: ProgramSource, cfg: DatasetConfig, ctx: _Context):
        self.src, self.cfg, self.ctx = src, cfg, ctx
        self.records: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self._lowered: dict[str, tuple] = {}
        self.summary: dict[str, Any] = {
            "program_id": src.program_id, "program": src.name, "source": src.kind,
            "seed": src.seed, "status": "ok", "stage": None, "reason": None, "leir": None,
            "signature": None, "enumerated": 0, "selected": 0, "verified": 0,
            "by_strategy": {},
        }

    def fail(self, stage: str, reason: str, **where) -> None:
        self.failures.append(failure(self.src.program_id, self.src.name, stage, reason, **where))

    def fail_program(self, stage: str, reason: str) -> dict[str, Any]:
        # Transitions of a broken original were never judged: their rows go with the records.
        self.failures = [f for f in self.failures if f["id"] is None]
        self.fail(stage, reason)
        self.summary.update(status="failed", stage=stage, reason=reason)
        self.records = []
        return self.result()

    def result(self) -> dict[str, Any]:
        self.summary["verified"] = sum(r["verified"] for r in self.records)
        return {"program": self.summary, "records": self.records, "failures": self.failures}

    def run(self) -> dict[str, Any]:
        try:
            program = load_program(self.src)
        except FrontendFailure as err:
            return self.fail_program(err.stage, err.reason)
        self.summary.update(leir=program.text, signature=program.signature.to_dict())
        from ..leir.validate import LeirValidationError, check
        try:
            check(program)
        except LeirValidationError as err:
            return self.fail_program("validate", str(err))
        try:
            check_steps_budget(program.leir, "enumeration")
        except ProgramTooLarge as err:
            return self.fail_program("budget", str(err))
        chosen = self.transitions(program)
        if not chosen:
            return self.result()
        tir_error = self.lowered(program)[1]
        if tir_error is not None:  # the original does not lower: nothing verifies
            return self.fail_program("lower", f"the original does not lower: {tir_error}")
        # the candidates' CPU builds in one module: fixed costs once (docs/VERIFY.md)
        self.ctx.verifier.prepare(program, [t.after for _, t in chosen],
                                  timeout=self.cfg.verify_timeout)
        for k, t in chosen:
            broken = self.transition(k, t)
            if broken and t.before is program:
                return self.fail_program("verify", broken)
            if broken:  # an undo step's original, a candidate: this record only
                self.fail("verify", broken, id=self.tid(k, t), strategy=t.strategy)
        return self.result()

    # ---------------------------------------------------------------- enumeration

    def transitions(self, program: Program) -> list[tuple[str, Any]]:
        """(k, transition) pairs to verify. Without a cap, every strategy's enumeration,
        numbered k = 0, 1, ... in the engine's order. With a cap, a seeded draw of at most
        ``cap`` per strategy that builds only the drawn replacements (``egraph.steps.
        drawn_steps``; k is the application's position in the canonical order)."""
        from ..egraph.steps import drawn_steps, transitions_from
        for sid, reason in self.ctx.rejected.items():
            self.fail("engine", reason, strategy=sid)
        strategies = self.ctx.strategies
        cap = self.cfg.per_strategy_cap
        broken: list = []
        if cap is not None:
            def draw(chosen):
                return drawn_steps(program, chosen, cap, self._seed_of, engine=self.ctx.engine,
                                   broken=broken)
        else:
            by_id = {s.id: s for s in strategies}

            def draw(chosen):
                found = transitions_from(program, self.ctx.engine.matches(program, list(chosen)),
                                         by_id, broken)
                numbered: dict[str, list] = {s.id: [] for s in chosen}
                for t in found:
                    numbered[t.strategy].append(t)
                return ([(str(k), t) for ts in numbered.values() for k, t in enumerate(ts)],
                        {sid: len(ts) for sid, ts in numbered.items()})
        try:
            out, counts = draw(strategies)
        except Exception:  # noqa: BLE001 -- find which strategy it is, keep the others
            out, counts, broken = [], {}, []
            for s in strategies:
                try:
                    got, n = draw((s,))
                    out += got
                    counts.update(n)
                except Exception as err:  # noqa: BLE001
                    self.fail("engine", _describe(err), strategy=s.id)
        for b in broken:
            self.fail("engine", f"rule '{b.rule}' matched '{b.lhs}' but its right-hand side did "
                                "not finish evaluating", strategy=b.strategy)
        if self.cfg.undo_steps:
            out = self.with_undo_steps(out)
        kept: dict[str, int] = {}
        for _, t in out:
            kept[t.strategy] = kept.get(t.strategy, 0) + 1
        for sid, n in counts.items():
            if n:
                self.summary["by_strategy"][sid] = [n, kept.get(sid, 0)]
        self.summary["enumerated"] = sum(counts.values())
        self.summary["selected"] = len(out)
        return out

    def with_undo_steps(self, out: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """``out`` with each step ``program -> q`` of a strategy followed by ``q -> program`` as a
        step of each chosen inverse strategy (``egraph.steps.reversed_step``; k ``<k>~<id>``):
        the paper's data for its inverse strategies is exactly these swapped pairs."""
        from ..egraph.steps import reversed_step
        by_id = {s.id: s for s in self.ctx.strategies}
        withundo: list[tuple[str, Any]] = []
        for k, t in out:
            withundo.append((k, t))
            for inverse in by_id[t.strategy].inverse:
                if inverse in by_id:
                    withundo.append((f"{k}~{t.strategy}", reversed_step(t, by_id[inverse])))
        return withundo

    def _seed_of(self, strategy_id: str) -> str:
        return f"{self.cfg.seed}|{self.src.program_id}|{strategy_id}"

    # ---------------------------------------------------------------- one transition

    def cuda(self, program: Program) -> tuple[str | None, str | None]:
        if not self.cfg.cuda_source:
            return None, "not requested (cuda_source is off)"
        from ..lower import cuda_source
        try:
            return cuda_source(program), None
        except Exception as err:  # noqa: BLE001 -- CudaInvalid and lowering errors alike
            return None, _describe(err)

    def lowered(self, program: Program) -> tuple[str | None, str | None, str | None, str | None]:
        """``(tir, tir_error, cuda, cuda_error)`` of a program of this run, made once: an undo
        step's two programs are the program itself and a candidate already lowered for its
        forward step."""
        hit = self._lowered.get(program.text)
        if hit is None:
            tir = tir_error = None
            try:
                tir = _tir(program, self.cfg.target)
            except Exception as err:  # noqa: BLE001
                tir_error = _describe(err)
            hit = self._lowered[program.text] = (tir, tir_error, *self.cuda(program))
        return hit

    def tid(self, k: str, t) -> str:
        return f"{self.src.program_id}/{t.strategy}/{k}"

    def transition(self, k: str, t) -> str | None:
        """Verify one transition (``t.before -> t.after``: the program, or a candidate for an
        undo step) and keep its record; returns a reason when the verification showed that the
        *original* is broken (then no transition of it can be judged)."""
        cfg, program, tid = self.cfg, t.before, self.tid(k, t)
        before_tir, before_error, *before_cuda = self.lowered(program)
        if before_error is not None:  # an undo step's original (the program's was checked)
            self.fail("lower", f"the undo step's original does not lower: {before_error}",
                      id=tid, strategy=t.strategy)
            return None
        strategy = next(s for s in self.ctx.strategies if s.id == t.strategy)
        after_tir, tir_error, *after_cuda = self.lowered(t.after)
        result = self.ctx.verifier.verify(program, t.after, target=cfg.target, trials=cfg.trials,
                                          timeout=cfg.verify_timeout, seed=cfg.seed,
                                          timing=cfg.timing, domain=strategy.domain,
                                          ulps=strategy.ulps, scale=strategy.scale)
        if result.before_problem and not result.equal:
            # the original itself does not validate, build or run (verification establishes it
            # first): a problem of the program, not of this strategy
            return f"the original cannot be verified against: {result.before_problem}"
        verified = bool(result.equal and (result.independent or
                                          result.before_independent is False))
        self.records.append({
            "id": tid, "program_id": self.src.program_id, "program": self.src.name,
            "source": self.src.kind, "seed": self.src.seed,
            "signature": json.dumps(program.signature.to_dict()),
            "before_leir": program.text, "after_leir": t.after.text,
            "before_tir": before_tir, "after_tir": after_tir, "tir_error": tir_error,
            "before_cuda": before_cuda[0], "before_cuda_error": before_cuda[1],
            "after_cuda": after_cuda[0], "after_cuda_error": after_cuda[1],
            "strategy": t.strategy, "category": t.category, "rule": t.rule,
            "direction": strategy.direction, "site": json.dumps(t.site.to_dict()),
            "bindings": json.dumps(dict(t.bindings)), "guard_facts": list(t.guard_facts),
            "cot": t.cot, "K": strategy.K, "P": strategy.P, "S": strategy.S,
            "score": float(strategy.score), "difficulty": strategy.difficulty,
            "level": result.level, "verified": verified, "reason": result.reason,
            "before_problem": result.before_problem,
            "max_abs_err": _finite(result.max_abs_err), "max_rel_err": _finite(result.max_rel_err),
            "time_before_ms": result.time_before_ms if cfg.timing else None,
            "time_after_ms": result.time_after_ms if cfg.timing else None,
            "speedup": result.speedup if cfg.timing else None,
            "threads": result.threads if cfg.timing else None,
            "domain": strategy.domain, "exact": strategy.exact, "bitwise": result.bitwise,
            "max_ulps": _finite(result.ulps),
        })
        if not verified:
            reason = f"reached {result.level}: {result.reason or 'not verified'}"
            if result.cause == "invalid":
                stage = "validate"  # the rule wrote something that is not a LEIR program
            elif tir_error:
                stage, reason = "lower", tir_error
            else:
                stage = "verify"
            self.fail(stage, reason, id=tid, strategy=t.strategy)
        return None


def _tir(program: Program, target: str) -> str:
    from ..lower import lower
    return lower(program, target).script()


def _finite(x: float | None) -> float | None:
    """inf/NaN errors (shape mismatch, NaN at different places) are stored as null: JSON has
    no spelling for them; the reason column says what happened."""
    if x is None or x != x or x in (float("inf"), float("-inf")):
        return None
    return float(x)


def _describe(err: BaseException) -> str:
    lines = [l.strip() for l in str(err).strip().splitlines() if l.strip()]
    line = lines[-1] if lines and (type(err).__module__ or "").startswith("tvm") else \
        (lines[0] if lines else "")
    line = line if len(line) <= 400 else line[:397] + "..."
    return f"{type(err).__name__}: {line}" if line else type(err).__name__
