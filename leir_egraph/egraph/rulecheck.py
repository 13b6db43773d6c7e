"""Run a rule file's own examples and counterexamples.

* An example must be produced: some transition of the strategy on ``before`` prints exactly as
  ``after`` and carries the listed bindings.
* A counterexample must be refused (no transition), and the refusal must be attributable to the
  guard it names: a *probe* -- the rule with that guard's conditions removed (and conditions that
  then lose their inputs), recording only the match -- must match. For a guard a rule checks by
  its pattern alone (``pattern_match``, or a guard without relations in the rule), the probe
  with every *other* guard removed must still refuse.
"""

from __future__ import annotations

from dataclasses import replace

from ..leir.parser import parse
from ..leir.printer import to_text
from ..leir.program import Program
from ..leir.signature import Signature
from .engine import Engine
from .guards import GUARDS
from .steps import single_steps
from .strategy import Rule, Strategy


def example_program(before: str, signature) -> Program:
    sig = Signature.from_short(signature) if isinstance(signature, str) else Signature.from_dict(signature)
    return Program(parse(before), sig)


def _guard_relations(guard: str) -> set[str]:
    return {r.name for r in GUARDS[guard].relations}


def probe_rule(rule: Rule, strip: set[str]) -> Rule:
    """The rule without the conditions headed by ``strip`` relations, recording the matched term
    as its own replacement.

    Reading the conditions left to right, each binds the variables it mentions first. A removed
    condition loses the variables it bound, and any later condition mentioning a lost variable
    is removed too (so nothing the stripped guard constrained is left dangling).
    """
    bound = set(rule.lhs_variables)
    lost: set[str] = set()
    kept = []
    for cond in rule.parsed_conditions:
        new = cond.variables - bound
        if cond.head in strip or cond.variables & lost:
            lost |= new
        else:
            kept.append(cond)
        bound |= new
    return replace(rule, rhs=rule.lhs, conditions=tuple(c.text for c in kept),
                   parsed_conditions=tuple(kept), bindings=(), guard_atoms=())


def probe_matches(strategy: Strategy, program: Program, strip: set[str]) -> int:
    """Number of matches of the strategy's rules with the ``strip`` relations removed."""
    probe = replace(strategy, id=f"{strategy.id}__probe",
                    rules=tuple(probe_rule(r, strip) for r in strategy.rules))
    return len(Engine([probe]).matches(program))


def check_examples(strategy: Strategy) -> list[str]:
    """Problems with the strategy's examples and counterexamples (empty when all hold)."""
    problems = []
    for n, ex in enumerate(strategy.examples):
        program = example_program(ex.before, ex.signature)
        expected = to_text(parse(ex.after))
        found = [t for t in single_steps(program, strategy) if t.after.text == expected]
        if not found:
            produced = [t.after.text for t in single_steps(program, strategy)]
            problems.append(f"{strategy.id}: example {n} not produced; expected {expected}; "
                            f"produced {produced[:6]}{' ...' if len(produced) > 6 else ''}")
            continue
        want = {k: str(v) for k, v in ex.bindings.items()}
        if want and not any(all(t.bindings.get(k) == v for k, v in want.items()) for t in found):
            problems.append(f"{strategy.id}: example {n} produced with bindings "
                            f"{[t.bindings for t in found]}, expected {want}")
    for n, ce in enumerate(strategy.counterexamples):
        program = example_program(ce.before, ce.signature)
        got = single_steps(program, strategy)
        if got:
            problems.append(f"{strategy.id}: counterexample {n} was rewritten to {got[0].after.text}")
            continue
        own = _guard_relations(ce.refused_by)
        used = {a.relation for r in strategy.rules for a in r.guard_atoms}
        if own & used:
            if probe_matches(strategy, program, own) == 0:
                problems.append(f"{strategy.id}: counterexample {n} is refused, but not by "
                                f"'{ce.refused_by}': without it the rule still does not match")
        else:
            others = set().union(*(_guard_relations(g) for g in strategy.guards
                                   if g != ce.refused_by)) if strategy.guards else set()
            if probe_matches(strategy, program, others) != 0:
                problems.append(f"{strategy.id}: counterexample {n} is refused by another guard, "
                                f"not by the pattern of '{ce.refused_by}'")
    return problems
