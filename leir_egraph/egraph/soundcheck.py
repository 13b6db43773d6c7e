"""The soundness check of ``leir rules check --verify``: a strategy tried far beyond its
author's examples (docs/RULES.md section 10, "Value ranges").

*Programs*, each with a *kind* (``PROGRAM_KINDS``): every example's and counterexample's
``before`` as written; its mutations (``egraph.mutations``: ``dtype``, ``literal``, ``extent``,
``loop_kind``, ``neighbour``, ``twice``, each candidate parsed back and validated); small
``generated`` programs (``GENERATED``, extents from the seed: the dependence patterns a loop
rule must respect), which are mutated too; programs ``drawn`` from the LEIR schema with
hypothesis (``leir.drawn``), kept only where the rule fires; and the examples and
counterexamples of the other loaded strategies (``others``: neighbouring programs the rule may
also fire on). On each, *every* transition of the strategy (not only the one an example lists:
the other occurrences its pattern matches) is judged by ``verify.soundness.judge`` on normal
and special-value inputs within the strategy's declared ``domain``, against its declared
``exact``-ness. A program on which the rule does not fire is skipped.

A budget bounds the work: at most ``budget`` transitions per strategy (``PER_PROGRAM`` per
program), taken round-robin over the kinds -- each kind's turn judges one transition, of its
next program the rule fires on -- so that every kind gets its turn, and at most ``TRIES_PER_JUDGED * budget``
programs run through the engine; the order is fixed by ``seed``. The first failure is reported as the program, the rule that fired, the inputs and
both outputs.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Iterable

from ..leir.program import Program
from ..verify.soundness import judge
from ..verify.verifier import RunError
from .mutations import KINDS as MUTATION_KINDS
from .mutations import mutations
from .rulecheck import example_program
from .steps import single_steps
from .strategy import Strategy

# every kind of program the check tries, in the order of a round: the kinds that change a
# program's context and shape first, so that a small budget (the slow test's) reaches them
PROGRAM_KINDS = ("as written", "extent", "loop_kind", "neighbour", "twice", "drawn", "dtype",
                 "literal", "generated", "others")
# what the check tried before the extent, loop-kind, neighbour, twice and drawn programs
FIRST_KINDS = ("as written", "dtype", "literal", "generated", "others")
# programs drawn from the schema per check (those the rule fires on are judged)
DRAWN = 24
# at most this many programs go through the engine per transition of the budget
TRIES_PER_JUDGED = 8

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
# at most this many transitions of one program are judged
PER_PROGRAM = 2


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
    by_kind: dict[str, int] = field(default_factory=dict)   # transitions judged per kind


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


def candidate_programs(strategy: Strategy, neighbours: Iterable[Strategy] = (), seed: int = 0,
                       kinds: Iterable[str] = PROGRAM_KINDS
                       ) -> dict[str, list[tuple[str, Program]]]:
    """The programs of each kind of ``kinds`` (module docstring), labelled, each kind's in an
    order drawn from ``seed``; the kinds in ``PROGRAM_KINDS`` order."""
    kinds = tuple(k for k in PROGRAM_KINDS if k in set(kinds))
    own = source_programs(strategy)
    generated = generated_programs(seed)
    queues: dict[str, list] = {k: [] for k in kinds}
    if "as written" in queues:
        queues["as written"] = [(f"{label}, as written", p) for label, p in own]
    if "generated" in queues:
        queues["generated"] = [(label, p) for label, p in generated]
    mutated = [k for k in kinds if k in MUTATION_KINDS]
    for n, (label, program) in enumerate(own + (generated if "generated" in queues else [])):
        for kind, what, p in mutations(program, seed + n, mutated):
            queues[kind].append((f"{label}, {what}", p))
    if "others" in queues:
        queues["others"] = [(f"{label}, as written", p) for label, p in
                            source_programs(replace(strategy, examples=(), counterexamples=()),
                                            neighbours)]
    if "drawn" in queues:
        from ..leir.drawn import draw_programs
        queues["drawn"] = [(f"drawn program {n}", p)
                           for n, p in enumerate(draw_programs(seed, DRAWN))]
    for k, kind in enumerate(kinds):
        if kind != "as written":
            random.Random(seed * 1000 + k).shuffle(queues[kind])
    return queues


def check_soundness(strategy: Strategy, verifier, *, neighbours: Iterable[Strategy] = (),
                    budget: int = 24, seed: int = 0, trials: int = 2,
                    deadline_s: float | None = None,
                    kinds: Iterable[str] = PROGRAM_KINDS) -> SoundnessReport:
    """Judge up to ``budget`` transitions of ``strategy`` on the programs of ``kinds``
    (module docstring); stop at the first failure. ``deadline_s`` bounds the wall time (the
    transitions not reached are not judged, and the report says so in ``judged``)."""
    start, wall, worker_cpu = time.process_time(), time.monotonic(), 0.0
    report = SoundnessReport(strategy.id, f"exact {strategy.exact}, domain {strategy.domain}")
    queues = candidate_programs(strategy, neighbours, seed, kinds)
    tries = 0

    def turns():
        """One transition of each kind in turn: of the kind's next program the rule fires on
        (or the exception the engine raised on it); a program's next transitions (up to
        ``PER_PROGRAM``) are its kind's next turns."""
        nonlocal tries
        while any(queues.values()):
            for kind, queue in queues.items():
                while queue and tries < TRIES_PER_JUDGED * budget:
                    item = queue.pop(0)
                    if len(item) == 3:      # the next transitions of a program already run
                        label, program, found = item
                    else:
                        label, program = item
                        tries += 1
                        try:
                            found = single_steps(program, strategy)[:PER_PROGRAM]
                        except Exception as err:  # noqa: BLE001 -- the engine fails on it
                            yield kind, label, program, err
                            return
                    if found:
                        if len(found) > 1:
                            queue.insert(0, (label, program, found[1:]))
                        yield kind, label, program, found[:1]
                        break
            if tries >= TRIES_PER_JUDGED * budget:
                return

    programs, seen = turns(), set()
    while True:
        if report.judged >= budget or (deadline_s is not None and
                                       time.monotonic() - wall > deadline_s):
            break
        kind, label, program, found = next(programs, (None, None, None, None))
        if kind is None:
            break
        if isinstance(found, Exception):
            report.problems.append(f"{strategy.id}: {label}: the engine fails: "
                                   f"{type(found).__name__}: {found}")
            break
        seen.add(label)
        report.programs = len(seen)
        for t in found:
            try:
                verdict = judge(verifier, program, t.after, strategy.ulps, strategy.domain,
                                seed=seed, trials=trials, scale=strategy.scale)
            except RunError as err:   # the worker timed out or crashed: nothing judged
                report.problems.append(f"{strategy.id}: rule '{t.rule}' on {label}: not "
                                       f"judged: {err}\n  after:   {t.after.text}")
                report.cpu_s = time.process_time() - start + worker_cpu
                return report
            if verdict.skipped:
                break
            report.judged += 1
            report.by_kind[kind] = report.by_kind.get(kind, 0) + 1
            worker_cpu += verdict.cpu_s
            report.bitwise += verdict.bitwise
            report.worst_ulps = max(report.worst_ulps, verdict.ulps)
            if not verdict.ok:
                report.problems.append(
                    f"{strategy.id}: unsound: rule '{t.rule}' on {label} ({kind}) changes the "
                    f"result ({report.declared})\n  program: {program.text}\n  signature: "
                    f"{program.signature.to_json()}\n  after:   {t.after.text}\n  "
                    + verdict.failure.replace("\n", "\n  "))
                report.cpu_s = time.process_time() - start + worker_cpu
                return report
    report.cpu_s = time.process_time() - start + worker_cpu
    return report
