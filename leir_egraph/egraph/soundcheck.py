"""The soundness check of ``leir rules check --verify``: a strategy tried far beyond its
author's examples (docs/RULES.md section 10, "Value ranges").

*Programs*: every example's and counterexample's ``before``, and mutations of it -- every
float tensor in f16, f32 and f64; every literal replaced (by a third of it, by 1e30, by its
negation minus 0.5); small generated programs (``GENERATED``, extents from the seed); and the
examples and counterexamples of the other loaded strategies (neighbouring programs the rule
may also fire on). On each, *every* transition of the strategy (not only the
one the example lists: the other occurrences its pattern matches) is judged by
``verify.soundness.judge`` on normal and special-value inputs within the strategy's declared
``domain``, against its declared ``exact``-ness.

A budget bounds the work: at most ``budget`` transitions per strategy (3 per program), taken
round-robin over the strategy's own and the generated programs so that every mutation kind
gets its turn, with 8 of the other strategies' programs after each round; the order is fixed by
``seed``.
The first failure is reported as the program, the rule that fired, the inputs and both outputs.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Iterable

from ..leir.ast import Num
from ..leir.program import Program
from ..leir.traverse import rebuild
from ..verify.soundness import FLOAT_CODES, judge, with_float_dtype
from ..verify.verifier import RunError
from .rulecheck import example_program
from .steps import single_steps
from .strategy import Strategy

# Small programs generated for every check (extents drawn from the seed): the dependence
# patterns a loop rule must respect, and value shapes a math rule may match. {n} and {m} are
# extents, {k} = n+m-1.
GENERATED = (
    ("an overwrite: the last writer of D_{a+c} depends on the loop order",
     "L^{n}_{a=0}L^{m}_{c=0}[D^{f32,g}_{a+c}=A^{f32,g}_{a,c};];", "A:f32[{n},{m}] -> D:f32[{k}]"),
    ("a scan along the inner loop",
     "B^{n}_{tx=0}L^{m}_{a=0}[F^{f32,g}_{tx,a}=if_then_else(a-1<0,0,F^{f32,g}_{tx,a-1})"
     "+A^{f32,g}_{tx,a};];", "A:f32[{n},{m}] -> F:f32[{n},{m}]"),
    ("a reduction",
     "B^{n}_{tx=0}L^{m}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a}*2;];",
     "A:f32[{n},{m}] -> D:f32[{n}]"),
    ("element-wise arithmetic",
     "B^{n}_{tx=0}[C^{f32,g}_{tx}=(A^{f32,g}_{tx}-D^{f32,g}_{tx})/2+A^{f32,g}_{tx}*3;];",
     "A:f32[{n}] D:f32[{n}] -> C:f32[{n}]"),
)
# at most this many transitions of one program are judged in one pass over the programs
PER_PROGRAM = 3

# each literal L becomes one of these (a mutation per entry)
LITERAL_MUTATIONS = (("a third", lambda v: v / 3), ("1e30", lambda v: 1e30),
                     ("negated", lambda v: -v - 0.5))


@dataclass
class SoundnessReport:
    """What the soundness check found for one strategy."""
    strategy: str
    declared: str                 # "bitwise, domain float" etc.
    programs: int = 0             # programs the strategy was run on
    judged: int = 0               # transitions judged
    bitwise: int = 0              # of which bitwise identical on every input set
    worst_ulps: float = 0.0       # largest ULP difference from before measured
    cpu_s: float = 0.0            # this process's CPU time plus the verification worker's
    problems: list[str] = field(default_factory=list)


def _literals(program: Program, label: str, change) -> Program | None:
    changed = False

    def swap(node):
        nonlocal changed
        if isinstance(node, Num) and node.text not in ("inf", "-inf", "nan"):
            changed = True
            return replace(node, text=repr(float(change(float(node.text)))))
        return None

    leir = rebuild(program.leir, swap)
    return program.with_leir(leir) if changed else None


def mutations(program: Program) -> list[tuple[str, Program]]:
    """``program`` and its mutations, labelled: other float dtypes, other literal values."""
    out = [("as written", program)]
    codes = {v.dtype for v in _vars(program)} & set(FLOAT_CODES)
    if codes:
        for code in ("f16", "f32", "f64"):
            if codes != {code}:
                out.append((f"in {code}", with_float_dtype(program, code)))
    for label, change in LITERAL_MUTATIONS:
        mutated = _literals(program, label, change)
        if mutated is not None:
            out.append((f"literals {label}", mutated))
    return out


def _vars(program: Program) -> Iterable:
    from ..leir.ast import Var
    from ..leir.traverse import walk
    return (n for n in walk(program.leir) if isinstance(n, Var))


def generated_programs(seed: int) -> list[tuple[str, Program]]:
    """``GENERATED`` with extents drawn from ``seed`` (2..6)."""
    rng = random.Random(seed)
    out = []
    for what, text, sig in GENERATED:
        n, m = rng.randint(2, 6), rng.randint(2, 6)
        fill = {"n": n, "m": m, "k": n + m - 1}
        leir = text.replace("^{n}", "^{%d}" % n).replace("^{m}", "^{%d}" % m)
        out.append((f"generated {what} ({n}x{m})", example_program(leir, sig.format(**fill))))
    return out


def source_programs(strategy: Strategy, neighbours: Iterable[Strategy] = ()
                    ) -> list[tuple[str, Program]]:
    """The programs the check starts from: the strategy's examples and counterexamples, then
    the examples and counterexamples of ``neighbours`` (other strategies: the programs their
    guards were written against), each labelled."""
    out = []
    for n, ex in enumerate(strategy.examples):
        out.append((f"example {n}", example_program(ex.before, ex.signature)))
    for n, ce in enumerate(strategy.counterexamples):
        out.append((f"counterexample {n}", example_program(ce.before, ce.signature)))
    for other in neighbours:
        if other.id == strategy.id:
            continue
        for n, ex in enumerate(other.examples):
            out.append((f"{other.id} example {n}", example_program(ex.before, ex.signature)))
        for n, ce in enumerate(other.counterexamples):
            out.append((f"{other.id} counterexample {n}",
                        example_program(ce.before, ce.signature)))
    return out


def check_soundness(strategy: Strategy, verifier, *, neighbours: Iterable[Strategy] = (),
                    budget: int = 24, seed: int = 0, trials: int = 2,
                    deadline_s: float | None = None) -> SoundnessReport:
    """Judge up to ``budget`` transitions of ``strategy`` on its examples, their mutations and
    the ``neighbours``' examples (module docstring); stop at the first failure. ``deadline_s``
    bounds the wall time (the transitions not reached are not judged, and the report says so
    in ``judged``)."""
    start, wall, worker_cpu = time.process_time(), time.monotonic(), 0.0
    report = SoundnessReport(strategy.id, f"exact {strategy.exact}, domain {strategy.domain}")
    own = source_programs(strategy) + generated_programs(seed)
    queues = [[(f"{label}, {what}", p) for what, p in mutations(program)]
              for label, program in own]
    random.Random(seed).shuffle(queues)
    others = [(f"{label}, as written", p) for label, p in
              source_programs(replace(strategy, examples=(), counterexamples=()), neighbours)]
    random.Random(seed).shuffle(others)
    pending = _round_robin(queues, others)
    for label, program in pending:
        if report.judged >= budget or (deadline_s is not None and
                                       time.monotonic() - wall > deadline_s):
            break
        try:
            found = single_steps(program, strategy)
        except Exception as err:  # noqa: BLE001 -- a mutation the engine cannot take
            report.problems.append(f"{strategy.id}: {label}: the engine fails: "
                                   f"{type(err).__name__}: {err}")
            break
        report.programs += 1
        for t in found[: min(PER_PROGRAM, budget - report.judged)]:
            try:
                verdict = judge(verifier, program, t.after, strategy.ulps, strategy.domain,
                                seed=seed, trials=trials)
            except RunError as err:   # the worker timed out or crashed: nothing judged
                report.problems.append(f"{strategy.id}: rule '{t.rule}' on {label}: not "
                                       f"judged: {err}\n  after:   {t.after.text}")
                report.cpu_s = time.process_time() - start + worker_cpu
                return report
            if verdict.skipped:
                break
            report.judged += 1
            worker_cpu += verdict.cpu_s
            report.bitwise += verdict.bitwise
            report.worst_ulps = max(report.worst_ulps, verdict.ulps)
            if not verdict.ok:
                report.problems.append(
                    f"{strategy.id}: unsound: rule '{t.rule}' on {label} changes the result "
                    f"({report.declared})\n  program: {program.text}\n  signature: "
                    f"{program.signature.to_json()}\n  after:   {t.after.text}\n  "
                    + verdict.failure.replace("\n", "\n  "))
                report.cpu_s = time.process_time() - start + worker_cpu
                return report
            if report.judged >= budget:
                break
    report.cpu_s = time.process_time() - start + worker_cpu
    return report


def _round_robin(queues: list[list], extra: list, per_round: int = 8) -> Iterable:
    """One item of each queue in turn, and ``per_round`` items of ``extra`` after each round,
    until everything is taken."""
    queues, extra = [list(q) for q in queues], list(extra)
    while any(queues) or extra:
        for q in queues:
            if q:
                yield q.pop(0)
        for _ in range(min(per_round, len(extra))):
            yield extra.pop(0)
