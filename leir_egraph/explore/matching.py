"""One program's recorded matches, as ``Engine.matches`` finds them, reading only the match
tables of rules that fired.

``Engine.matches`` prints every match relation of the chosen strategies after each program
(several hundred ``print-function`` commands, about 0.15-0.25 s per program with all 43
strategies, more than the matching itself). Exploration calls it for thousands of programs, so
here the step is run as its own command and its run report (``num_matches_per_rule``) says which
rules matched; only their relations are printed. Everything else (facts, schedule, push/pop,
the engine's persistent e-graph) is the engine's, so the matches are the same rows:

    matches(engine, program)  ==  engine.matches(program)      (as sets of RawMatch)

It drives the engine's own e-graph through ``Engine._run`` and reads ``Engine._read_relations``
instead of changing ``egraph/engine.py`` (kept untouched while the engine is being batched on
another branch); if the engine gains a cheaper per-program path, this module is the one place
to switch to it.
"""

from __future__ import annotations

from ..egraph.engine import (MAX_ROWS, Engine, RawMatch, batches, match_relation,
                             ruleset_name)
from ..egraph.encoding import from_termdag
from ..egraph.facts import LoadedProgram
from ..egraph.guards import GUARDS
from ..egraph.parameters import PARAMETER_SETS


def fact_commands(engine: Engine, program) -> list[str]:
    """The program's ``let`` declarations and the guard/parameter facts the engine's rules read
    (the same selection as ``Engine.matches``), computed for this program alone."""
    loaded = LoadedProgram(program)
    facts = [loaded.declarations()]
    wanted = engine._read_relations
    for guard in GUARDS.values():
        if guard.facts is not None and any(r.name in wanted for r in guard.relations):
            facts.extend(f for f in guard.facts(loaded) if f[1:f.index(" ")] in wanted)
    for params in PARAMETER_SETS:
        if any(r.name in wanted for r in params.relations):
            facts.extend(f for f in params.facts(loaded) if f[1:f.index(" ")] in wanted)
    return facts[0].splitlines() + facts[1:]


def matches(engine: Engine, program, strategies=None) -> list[RawMatch]:
    """Every recorded application of ``strategies`` (default: the engine's) on ``program``."""
    chosen = engine.strategies if strategies is None else tuple(strategies)
    if set(chosen) == set(engine.strategies) and len(chosen) > 1:
        step = "(run strategy__all 1)"
    else:
        step = "\n".join(f"(run {ruleset_name(s)} 1)" for s in chosen)
    # push, facts, analysis and the one iteration in as few egglog calls as possible (each
    # call has a fixed cost); the step's run report says which rules matched.
    commands = (["(push)"] + fact_commands(engine, program) +
                ["(run-schedule (saturate (run analysis)))", step])
    fired: set[str] = set()
    popped = False
    try:
        for batch in batches(commands, 4000):
            for output in engine._run(batch):
                report = getattr(output, "report", None)
                if report is not None:
                    fired.update(k for k, v in report.num_matches_per_rule.items() if v)
        relations = [(s, r, match_relation(s, r)) for s in chosen for r in s.rules
                     if f"{s.id}/{r.name}" in fired]
        outputs = engine._run("\n".join(
            ["(run-schedule (saturate (run helpers)))"] +
            [f"(print-function {name} {MAX_ROWS})" for _, _, name in relations] + ["(pop)"]))
        popped = True
        outputs = [o for o in outputs if hasattr(o, "termdag")]
    finally:
        if not popped:
            engine._run("(pop)")
    found: list[RawMatch] = []
    for (strategy, rule, _), output in zip(relations, outputs):
        termdag, memo = output.termdag, {}
        for row_id, _ in output.terms:
            args = [from_termdag(termdag, a, memo) for a in termdag.get(row_id).args]
            lhs, rhs, values = args[0], args[1], args[2:]
            if lhs is None:
                continue
            found.append(RawMatch(strategy.id, rule.name, lhs, rhs,
                                  tuple(zip(rule.binding_names, values))))
    return found
