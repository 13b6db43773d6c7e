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

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..leir.parser import parse
from ..leir.printer import to_text
from ..leir.program import Program
from ..leir.signature import Signature
from ..leir.validate import check
from .engine import Engine
from .steps import single_steps
from .strategy import (Rule, RuleFileError, Strategy, line_of, builtin_strategies,
                       load_rule_file)


def example_program(before: str, signature) -> Program:
    sig = Signature.from_short(signature) if isinstance(signature, str) else Signature.from_dict(signature)
    return Program(parse(before), sig)


def check_example_texts(strategy: Strategy, path: Path | str) -> None:
    """Parse and validate every example's and counterexample's ``before`` (with its
    ``signature``) and ``after`` (with the same signature), as ``leir fmt --sig`` would; the
    first one that does not raises :class:`RuleFileError` at its entry's line, naming the entry
    and the field (a typo in a rule file is bad input, not an internal error)."""
    text = Path(path).read_text()
    entries = ([("examples", n, ex.before, ex.signature, ex.after)
                for n, ex in enumerate(strategy.examples)]
               + [("counterexamples", n, ce.before, ce.signature, None)
                  for n, ce in enumerate(strategy.counterexamples)])
    for table, n, before, signature, after in entries:
        where = "before or signature"
        try:
            program = example_program(before, signature)
            check(program)
            if after is not None:
                where = "after"
                check(program.with_leir(parse(after)))
        except ValueError as error:  # LeirSyntaxError, LeirValidationError, bad signature
            raise RuleFileError(path, line_of(text, table, nth=n),
                                f"[[{table}]] entry {n}: {where}: {error}") from None


def _guard_relations(strategy: Strategy, guard: str) -> set[str]:
    return {r.name for r in strategy.vocabulary.guards[guard].relations}


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
    return replace(rule, rhs=rule.lhs, rhs_variables=rule.lhs_variables,
                   conditions=tuple(c.text for c in kept), parsed_conditions=tuple(kept),
                   bindings=(), guard_atoms=())


def without_guard(strategy: Strategy, guard: str) -> Strategy:
    """The strategy with the conditions of one guard's relations removed (as
    :func:`probe_rule` removes them), its rewrites otherwise as written: what its rules would
    make if that guard did not refuse. A rule whose replacement needs a variable only the
    removed conditions bound is left out. For measuring which guard refuses a move
    (benchmarks/reference_recall.py), never for producing data."""
    return without_relations(strategy, _guard_relations(strategy, guard))


def without_relations(strategy: Strategy, strip: set[str]) -> Strategy:
    """:func:`without_guard` for the conditions headed by the ``strip`` relations only (one
    relation of a guard: what a rule would make without ``MathTermsApart``)."""
    rules = []
    for rule in strategy.rules:
        probe = probe_rule(rule, strip)
        kept = set(rule.lhs_variables).union(*(c.variables for c in probe.parsed_conditions))
        if {v for v, _ in rule.bindings} | rule.rhs_variables <= kept:
            rules.append(replace(probe, rhs=rule.rhs, bindings=rule.bindings))
    return replace(strategy, rules=tuple(rules))


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
        own = _guard_relations(strategy, ce.refused_by)
        used = {a.relation for r in strategy.rules for a in r.guard_atoms}
        if own & used:
            if probe_matches(strategy, program, own) == 0:
                problems.append(f"{strategy.id}: counterexample {n} is refused, but not by "
                                f"'{ce.refused_by}': without it the rule still does not match")
        else:
            others = set().union(*(_guard_relations(strategy, g) for g in strategy.guards
                                   if g != ce.refused_by)) if strategy.guards else set()
            if probe_matches(strategy, program, others) != 0:
                problems.append(f"{strategy.id}: counterexample {n} is refused by another guard, "
                                f"not by the pattern of '{ce.refused_by}'")
    return problems


def verify_examples(strategy: Strategy, verifier) -> list[str]:
    """Problems found by verifying every example's ``after`` against its ``before`` on TVM with
    ``verifier`` (a :class:`leir_egraph.verify.Verifier`): each must be Equal, and Independent
    unless the original itself is not (empty when all hold)."""
    problems = []
    for n, ex in enumerate(strategy.examples):
        before = example_program(ex.before, ex.signature)
        after = before.with_leir(parse(ex.after))
        r = verifier.verify(before, after, timing=False)
        if not r.equal:
            problems.append(f"{strategy.id}: example {n} is not Equal on TVM: {r.level}: "
                            f"{r.reason}")
        elif r.before_independent is not False and not r.independent:
            problems.append(f"{strategy.id}: example {n} breaks a P/V/B claim: {r.reason}")
    return problems


@dataclass
class FileCheck:
    """What ``leir rules check`` found for one rule file."""
    path: Path
    strategy: str | None = None
    examples: int = 0
    counterexamples: int = 0
    verified: int = 0
    problems: list[str] = field(default_factory=list)
    soundness: object = None   # soundcheck.SoundnessReport, with a verifier


def rule_files(paths: list[str | Path]) -> list[Path]:
    """The ``*.toml`` files named, or found below the directories named, in order (a missing
    path raises :class:`FileNotFoundError`)."""
    found: list[Path] = []
    for given in map(Path, paths):
        if given.is_dir():
            found.extend(sorted(given.rglob("*.toml")))
        elif given.is_file():
            found.append(given)
        else:
            raise FileNotFoundError(f"{given}: no such rule file or directory")
    return found


def check_rule_file(path: Path, verifier=None, defined: dict[str, str] | None = None, *,
                    neighbours=(), budget: int = 24, seed: int = 0) -> FileCheck:
    """Load one rule file, type-check it in an engine, run its examples and counterexamples, and
    (with a verifier) verify its examples on TVM and check its soundness beyond them
    (``soundcheck.check_soundness``: up to ``budget`` transitions on mutated examples and the
    ``neighbours``' examples, normal and special-value inputs).

    Refused with :class:`RuleFileError` (one line, the file and the TOML entry), as what would
    break later: a file that does not load or that egglog rejects (the rule, its variant and
    line); an example or counterexample that does not parse or validate; a file without
    examples; an id already ``defined`` by another file (id -> rule file path; the built-in
    strategies when None; the file's id is added). A fact provider that raises while the
    examples run is refused at its own file and line (:func:`vocabulary.provider_failure`)."""
    from .engine import check_strategy
    from .vocabulary import provider_failure

    strategy = load_rule_file(path)
    text = Path(path).read_text()
    defined = {s.id: s.path for s in builtin_strategies()} if defined is None else defined
    first = defined.setdefault(strategy.id, str(path))
    if Path(first).resolve() != Path(path).resolve():
        raise RuleFileError(path, line_of(text, "id"),
                            f"duplicate strategy id '{strategy.id}' (also defined in {first})")
    if not strategy.examples:
        raise RuleFileError(path, line_of(text, "id"),
                            f"'{strategy.id}' has no [[examples]] entry: a strategy needs at "
                            "least one example of what it makes (docs/RULES.md, section 7)")
    check_example_texts(strategy, path)
    check_strategy(strategy)
    result = FileCheck(path, strategy.id, len(strategy.examples), len(strategy.counterexamples))
    try:
        result.problems = check_examples(strategy)
    except Exception as err:  # noqa: BLE001 -- a provider's bug is located in the provider
        located = provider_failure(err)
        if located is None:
            raise
        raise RuleFileError(located.path, located.line,
                            f"{located.message} (strategy '{strategy.id}', {path})") from None
    if verifier is not None:
        verified = verify_examples(strategy, verifier)
        result.problems += verified
        result.verified = len(strategy.examples) - len(verified)
        from .soundcheck import check_soundness
        result.soundness = check_soundness(strategy, verifier, neighbours=neighbours,
                                           budget=budget, seed=seed)
        result.problems += result.soundness.problems
    return result
