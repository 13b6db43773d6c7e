"""The e-graph engine: encoding, rule files, guards, single-step enumeration, chain of thought."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leir_egraph.egraph import (RuleFileError, all_steps, applicable, load_strategies, sample_steps,
                                single_steps)
from leir_egraph.egraph.encoding import decode, encode
from leir_egraph.egraph.engine import Engine
from leir_egraph.egraph.encoding import to_egglog
from leir_egraph.egraph.guards import PAPER_PRECONDITIONS
from leir_egraph.egraph.loaded import LoadedProgram
from leir_egraph.egraph.rulecheck import check_examples, example_program
from leir_egraph.egraph.vocabulary import vocabulary_of
from leir_egraph.leir import Program, Signature, parse, to_text

STRATEGIES = load_strategies()


def program(text: str, sig: str) -> Program:
    return Program(parse(text), Signature.from_short(sig))


def test_encoding_is_lossless_on_the_reference_corpus(reference_rows):
    for row in reference_rows:
        leir = parse(row["leir"])
        back = decode(encode(leir))
        assert back == leir and to_text(back) == row["leir"], row["id"]


def test_encoding_survives_a_trip_through_egglog(golden_rows):
    from egglog import bindings

    from leir_egraph.egraph.encoding import from_termdag, to_egglog
    from leir_egraph.egraph.traversals import SCHEMA_FILE

    egraph = bindings.EGraph()
    egraph.run_program(*egraph.parse_program(SCHEMA_FILE.read_text()))
    for row in golden_rows[::10]:
        leir = parse(row["leir"])
        out = egraph.run_program(*egraph.parse_program(f"(push)(let $p {to_egglog(encode(leir))})(extract $p)"))
        egraph.run_program(*egraph.parse_program("(pop)"))
        assert decode(from_termdag(out[-1].termdag, out[-1].term, {})) == leir


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.id)
def test_rule_file_examples_and_counterexamples(strategy):
    """Every rule file brings its own tests: examples must be produced, counterexamples refused
    by the guard they name."""
    assert strategy.examples, f"{strategy.id} has no examples"
    assert strategy.counterexamples, f"{strategy.id} has no counterexamples"
    assert check_examples(strategy) == []


def test_every_guard_is_named_documented_and_can_refuse():
    assert set(PAPER_PRECONDITIONS) <= set(vocabulary_of(()).guards)
    guards = vocabulary_of(STRATEGIES).guards   # shared guards and the providers' relations
    for guard in guards.values():
        assert guard.doc and guard.refusal
        assert guard.structural or guard.relations


def test_every_relation_has_a_reader():
    """The vocabulary holds no relation that no rule and no analysis rule reads."""
    engine = Engine(STRATEGIES)
    vocab = engine.vocabulary
    unread = (set(vocab.relations) | set(vocab.parameters)) - engine.read_relations
    assert not unread


# ---------------------------------------------------------------- the nine guards, held and refused

def facts_of(p: Program) -> list[str]:
    """The guards' facts as egglog text, a column that is a nest or program suffix written as
    its let name (``$n0_``, ``$s1_``)."""
    loaded = LoadedProgram(p)
    names = loaded.named_terms()
    out = []
    for guard in vocabulary_of(STRATEGIES).guards.values():
        if guard.facts:
            out.extend("(" + " ".join([f.name, *(names.get(v) or to_egglog(v)
                                                 if isinstance(v, tuple) else to_egglog(v)
                                                 for v in f.columns())]) + ")"
                       for f in guard.facts(loaded))
    return out


SOFTMAX = program(
    "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
    "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
    "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];",
    "A:f32[4,8] -> C:f32[4,8]")
ELEMENTWISE = program(
    "B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=log(A^{f32,g}_{tx,a});];"
    "B^{4}_{tx=0}L^{6}_{a=0}[E^{f32,g}_{tx,a}=log(A^{f32,g}_{tx,a});];"
    "B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+E^{f32,g}_{tx,a};];",
    "A:f32[4,6] -> C:f32[4,6]")


def test_dependency_guard():
    facts = facts_of(ELEMENTWISE)
    assert "(Independent $n0_ $n1_)" in facts      # both only read A
    assert "(Independent $n1_ $n2_)" not in facts  # RAW on E
    assert "(Fusible $n1_ $n2_)" in facts           # element-wise flow
    assert "(Fusible $n0_ $n1_)" in facts
    softmax = facts_of(SOFTMAX)
    assert not any(f.startswith("(Fusible") for f in softmax)  # reductions feed later nests
    assert '(Swappable $n0_ "tx" "a")' in softmax  # order-free max reduction
    assert '(UnreadIn "D" (PNil))' in softmax and '(UnreadIn "D" $s2_)' not in softmax


def test_operation_identity_guard():
    assert any(f.startswith("(RepeatedIn $s0_ (Log") for f in facts_of(ELEMENTWISE))
    # softmax computes exp(A-D) in the sum and again in the normalisation
    assert any(f.startswith("(RepeatedIn $s1_ (Exp (Sub") for f in facts_of(SOFTMAX))
    once = program("B^{4}_{tx=0}[C^{f32,g}_{tx}=exp(A^{f32,g}_{tx})*2;];", "A:f32[4] -> C:f32[4]")
    assert not any(f.startswith("(RepeatedIn") for f in facts_of(once))


def test_loop_nest_consistency_guard():
    assert "(SameLoops $n0_ $n2_)" in facts_of(ELEMENTWISE)
    mixed = program("B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};];"
                    "B^{4}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx,0};];", "A:f32[4,6] -> C:f32[4]")
    assert not any(f.startswith("(SameLoops") for f in facts_of(mixed))


def test_equation_and_loop_axis_count_guards():
    argmax = program("B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});"
                     "C^{i64,g}_{tx}=if_then_else(A^{f32,g}_{tx,a}>=D^{f32,g}_{tx},a,C^{i64,g}_{tx});];",
                     "A:f32[4,6] -> C:i64[4]")
    facts = facts_of(argmax)
    assert "(EquationCount $n0_ 2)" in facts
    assert "(EquationCount $n0_ 1)" in facts_of(SOFTMAX)


def test_loop_range_factorization_guard():
    facts = facts_of(SOFTMAX)
    assert "(ProperFactor 8 2)" in facts and "(ProperFactor 8 4)" in facts
    assert not any(f.startswith("(ProperFactor 8 8)") or f.startswith("(ProperFactor 8 1)") for f in facts)
    prime = program("B^{7}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];", "A:f32[7] -> C:f32[7]")
    assert not any(f.startswith("(ProperFactor") for f in facts_of(prime))


def test_reduction_axis_guard():
    facts = facts_of(SOFTMAX)
    assert '(IndependentAxis $n0_ "tx")' in facts
    assert '(IndependentAxis $n0_ "a")' not in facts
    assert '(IndependentAxis $n2_ "a")' in facts  # the normalisation nest writes C_{tx,a}


def test_intermediate_variable_guard():
    facts = facts_of(SOFTMAX)
    assert '(Intermediate "D")' in facts and '(ScopeOf "D" "g")' in facts
    assert '(Intermediate "C")' not in facts and '(Intermediate "A")' not in facts


def test_operand_range_follows_values_through_intermediates():
    facts = facts_of(SOFTMAX)
    read = '(MathNonNegative (Read (MkVar "{}" "f32" "g" (SCons (IName "tx") (SNil)))))'
    assert read.format("E") in facts          # a sum of exp
    assert read.format("D") not in facts      # a max of inputs


# ---------------------------------------------------------------- enumeration

def test_one_site_per_transition_even_for_repeated_subterms():
    # exp(erf(A)+2) is at least e: the product with 2 is a normal number and both logarithms
    # are positive, as expand_log's guards ask
    p = program("B^{4}_{tx=0}[C^{f32,g}_{tx}=log(exp(erf(A^{f32,g}_{tx})+2)*2)+log(exp(erf(A^{f32,g}_{tx})+2)*2);];",
                "A:f32[4] -> C:f32[4]")
    steps = single_steps(p, "expand_log")
    assert [t.after.text for t in steps] == [
        "B^{4}_{tx=0}[C^{f32,g}_{tx}=log(exp(erf(A^{f32,g}_{tx})+2))+log(2)+log(exp(erf(A^{f32,g}_{tx})+2)*2);];",
        "B^{4}_{tx=0}[C^{f32,g}_{tx}=log(exp(erf(A^{f32,g}_{tx})+2)*2)+(log(exp(erf(A^{f32,g}_{tx})+2))+log(2));];"]
    assert len({t.site.path for t in steps}) == 2


def test_enumeration_is_exhaustive_and_deterministic():
    steps = single_steps(SOFTMAX, "loop_split")
    # every loop (tx: 4, a: 8) of every nest with every proper factor: (1 + 2) * 3 nests
    assert len(steps) == 9
    assert [t.after.text for t in steps] == [t.after.text for t in single_steps(SOFTMAX, "loop_split")]
    assert {t.bindings["f"] for t in steps} == {"2", "4"}
    assert single_steps(SOFTMAX, "loop_split", limit=2) == steps[:2]


def test_reasoning_is_rendered_on_first_use():
    steps = single_steps(SOFTMAX, "loop_split")
    lazy, eager = steps[0], single_steps(SOFTMAX, "loop_split")[0]
    eager.to_dict()
    assert callable(lazy._details) and not callable(eager._details)   # nothing printed yet
    assert lazy == eager and lazy.path == eager.site.path
    assert lazy.cot == eager.cot and not callable(lazy._details)      # rendered once, kept
    assert lazy.to_dict() == eager.to_dict()


def test_batched_per_strategy_and_per_program_enumeration_agree(golden_rows):
    """The fast paths never change the transition set: a seeded sample of golden programs
    enumerated all strategies at once, several programs at once (steps_many), each strategy
    alone on the shared engine, a seeded subset of strategies on their own engines
    (single_steps), and every strategy in one e-graph scope (no ``run_alone`` groups, so no
    facts stated per group) give the same transitions, chains of thought included."""
    import dataclasses
    import random

    from leir_egraph.egraph import steps_many
    from leir_egraph.egraph.engine import engine_for
    from leir_egraph.egraph.steps import default_strategies, transitions_from

    rng = random.Random(11)
    rows = rng.sample([r for r in golden_rows if len(r["leir"]) <= 700], 3)
    programs = [Program.parse(r["leir"], r["signature"], r["name"]) for r in rows]
    strategies = default_strategies()
    alone = rng.sample(strategies, 4)
    shared = engine_for(strategies)

    def rows_of(found):
        return sorted(json.dumps(t.to_dict(), sort_keys=True) for t in found)

    batched = steps_many(programs)
    assert len(batched) == len(programs) and sum(map(len, batched)) > 100
    groups = shared.groups(strategies)
    assert len(groups) > 1 and any(shared.scopes(groups)[1])
    one_scope = [dataclasses.replace(s, run_alone=False) for s in strategies]
    together = engine_for(tuple(one_scope))
    assert len(together.groups(tuple(one_scope))) == 1
    for program, many in zip(programs, batched):
        assert [t.to_dict() for t in many] == [t.to_dict() for t in transitions_from(
            program, together.matches(program), {s.id: s for s in one_scope})]
    for program, many in zip(programs, batched):
        everything = all_steps(program)
        assert [t.to_dict() for t in many] == [t.to_dict() for t in everything]
        per_strategy = [t for s in strategies
                        for t in transitions_from(program, shared.matches(program, [s]), {s.id: s})]
        assert rows_of(per_strategy) == rows_of(everything)
        for s in alone:
            assert rows_of(single_steps(program, s)) == rows_of(
                t for t in everything if t.strategy == s.id), (program.name, s.id)


def test_placing_a_match_by_its_nest_is_placing_it_in_the_whole_program(golden_rows):
    """``transitions_from`` prints and decodes only the nest or suffix a site replaces, the
    rest kept from the program: every transition is the one the whole program term with the
    replacement spliced in gives (text and AST), and every such splice that changes the program
    is a transition. Seeded golden programs, every strategy (whole-suffix rewriters included)."""
    import random

    from leir_egraph.egraph.encoding import OccurrenceIndex, replace_at
    from leir_egraph.egraph.engine import engine_for
    from leir_egraph.egraph.steps import default_strategies, transitions_from

    strategies = default_strategies()
    engine = engine_for(strategies)
    rows = random.Random(5).sample([r for r in golden_rows if len(r["leir"]) <= 900], 3)
    suffixes = 0
    for row in rows:
        program = Program.parse(row["leir"], row["signature"], row["name"])
        matches = engine.matches(program)
        placed = {(t.strategy, t.path): t for t in
                  transitions_from(program, matches, {s.id: s for s in strategies})}
        term = encode(program.leir)
        index = OccurrenceIndex(term)
        whole = {}
        for m in matches:
            if m.rhs is None or m.rhs == m.lhs:
                continue
            for path in index.paths(m.lhs):
                after = decode(replace_at(term, path, m.rhs))
                if to_text(after) != program.text:
                    whole.setdefault((m.strategy, path), set()).add(to_text(after))
                    suffixes += set(path) <= {2}
        assert placed.keys() == whole.keys(), program.name
        for key, t in placed.items():
            assert t.after.text in whole[key] and to_text(t.after.leir) == t.after.text
            assert t.after.leir == parse(t.after.text)
    assert suffixes > 0  # a whole-suffix replacement was placed


def test_drawn_steps_are_a_seeded_draw_from_the_full_enumeration(golden_rows):
    """The capped path (queries first, replacements built only for the drawn applications)
    draws from exactly the transitions the full enumeration makes: every drawn transition is one
    of them (the same record, chain of thought included, where the same rule is credited: when
    two rules of a strategy make the same program, the full enumeration keeps the first rule's
    and a draw the drawn rule's), each strategy gets min(cap, its count) of them, a cap above
    every count gives the full set, and the draw depends only on the seed."""
    import random

    from leir_egraph.egraph.engine import engine_for
    from leir_egraph.egraph.steps import default_strategies, drawn_steps

    rng = random.Random(5)
    rows = rng.sample([r for r in golden_rows if 300 <= len(r["leir"]) <= 900], 3)
    strategies = default_strategies()
    engine = engine_for(strategies)

    def key(t):
        return (t.strategy, t.path, t.after.text)

    for row in rows:
        program = Program.parse(row["leir"], row["signature"], row["name"])
        full = {key(t): t for t in all_steps(program)}
        count: dict[str, int] = {}
        for sid, _, _ in full:
            count[sid] = count.get(sid, 0) + 1
        for cap in (1, 2):
            def seed_of(sid, cap=cap):
                return f"{cap}|{row['name']}|{sid}"
            drawn, found = drawn_steps(program, strategies, cap, seed_of, engine=engine)
            again, _ = drawn_steps(program, strategies, cap, seed_of, engine=engine)
            assert [(k, t.after.text) for k, t in drawn] == [(k, t.after.text) for k, t in again]
            got: dict[str, int] = {}
            for _, t in drawn:
                got[t.strategy] = got.get(t.strategy, 0) + 1
                same = full.get(key(t))
                assert same is not None, (row["name"], t.strategy, t.after.text)
                if same.rule == t.rule:
                    assert same.to_dict() == t.to_dict()
            assert got == {sid: min(cap, n) for sid, n in count.items()}, row["name"]
            assert all(found[sid] >= n for sid, n in got.items())
        everything, _ = drawn_steps(program, strategies, 10 ** 6, lambda sid: 0, engine=engine)
        assert sorted(key(t) for _, t in everything) == sorted(full)


def test_a_drawn_application_makes_only_rows_the_full_enumeration_has():
    """A rule restricted to the drawn applications (``Chosen``) matches a subset of what it
    matches unrestricted. With the ``Chosen`` atom first in the making rule, egglog 13.2 gave
    partially_equivalent_then_correct three rows on the zoo's conv1d_conv1d_padding where the
    rule has one: the padding's loops bound to every loop list holding the padded loop, two
    programs reading out of range (engine.making_rule)."""
    from leir_egraph.dataset.sources import load_program, select_programs
    from leir_egraph.egraph.engine import engine_for
    from leir_egraph.egraph.steps import drawn_steps, resolve
    from leir_egraph.leir.validate import problems

    strategy = resolve(["partially_equivalent_then_correct"])
    engine = engine_for(strategy)
    program = load_program(select_programs(["conv1d_conv1d_padding"], count=1)[0])
    full = sorted((t.rule, t.path, t.after.text) for t in single_steps(program, strategy[0]))
    assert full  # the two padded convolutions fuse
    drawn, _ = drawn_steps(program, strategy, 10 ** 6, lambda sid: 0, engine=engine)
    assert sorted((t.rule, t.path, t.after.text) for _, t in drawn) == full
    assert not [p for _, t in drawn for p in problems(t.after) if p.severity == "error"]


def test_deferred_facts_wait_for_the_draw_and_change_no_transition():
    """set_storage_layout's maps and layout_transformation's new subscripts are deferred
    (Relation.deferred): the queries run on their keys alone, a draw sends only the facts of the
    applications it builds, and every drawn transition -- at any cap -- is one the full
    enumeration (which states every fact) makes, with the same bindings."""
    from leir_egraph.egraph.engine import Engine, key_relation
    from leir_egraph.egraph.steps import drawn_steps

    program = example_program(
        "B^{4}_{tx=0}L^{6}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}"
        "+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"
        "B^{4}_{tx=0}L^{6}_{a=0}[F^{f32,g}_{tx,a}=exp(D^{f32,g}_{tx,a});];",
        "A:f32[4,5] C:f32[5,6] -> F:f32[4,6]")
    chosen = [s for s in STRATEGIES if s.id in ("set_storage_layout", "layout_transformation")]
    engine = Engine(chosen)
    assert set(engine.deferred) == {"StorageLayout", "NewLayout"}
    facts, waiting = engine.finding_facts(LoadedProgram(program))
    assert not any(f.startswith(("(StorageLayout ", "(NewLayout ")) for f in facts)
    keys = [f for f in facts if f.startswith(f"({key_relation('StorageLayout')} ")]
    assert len(keys) == len({k for k in waiting if k[0] == "StorageLayout"}) > 1
    full = {(t.strategy, t.after.text): t for s in chosen for t in single_steps(program, s)}
    for cap in (1, 3, 10 ** 6):
        drawn, found = drawn_steps(program, chosen, cap, lambda sid: sid, engine=engine)
        for _, t in drawn:
            assert full[t.strategy, t.after.text].bindings == t.bindings
        assert len(drawn) == sum(min(cap, sum(1 for k in full if k[0] == s.id)) for s in chosen)
    with engine.applications(program, chosen) as run:
        some = [a for a in run.found if a.strategy == "set_storage_layout"][:2]
        assert all("map" not in dict(a.bindings) for a in some)
        made = run.make(some)
        assert len(made) == 2 and len(run._sent) == 2  # two maps sent, of all the layouts


def test_applicable_and_seeded_sampling():
    counts = applicable(ELEMENTWISE)
    assert counts["operator_fusion"] == 2 and counts["loop_split"] == 3
    assert "expand_log" not in counts
    a = sample_steps(ELEMENTWISE, seed=7)
    b = sample_steps(ELEMENTWISE, seed=7)
    assert [t.after.text for t in a] == [t.after.text for t in b]
    assert {t.strategy for t in a} == set(counts)


def test_chain_of_thought_is_derived_from_rule_site_and_bindings():
    (t,) = [t for t in single_steps(SOFTMAX, "loop_split")
            if t.site.nest == 1 and t.bindings["i"] == "a" and t.bindings["f"] == "4"]
    strategy = next(s for s in STRATEGIES if s.id == "loop_split")
    assert t.cot.startswith(strategy.description)
    assert "matches nest 1" in t.cot
    assert "Loop range factorization: '4' properly divides the extent '8'" in t.cot
    assert "'c' is an index name unused" in t.cot
    assert "'c*2+a'" in t.cot
    assert t.after.text in SOFTMAX.text or t.after.leir.nests[1] != SOFTMAX.leir.nests[1]
    assert to_text(t.after.leir.nests[1]) in t.cot
    assert t.guard_facts == ("loop range factorization: '4' properly divides the extent '8'",)


def test_transition_records_everything():
    t = single_steps(ELEMENTWISE, "operator_fusion")[0]
    d = t.to_dict()
    for key in ("before", "after", "strategy", "category", "rule", "site", "bindings",
                "guard_facts", "cot", "score", "difficulty"):
        assert key in d
    assert d["category"] == "graph" and d["difficulty"] == "medium"


# ---------------------------------------------------------------- rule files

COMMUTE = '''
id = "commute_add"
category = "math"
description = "Swap the operands of an addition."
guards = ["pattern_match"]
P = 1
S = 0
cot = "The sum '{lhs}' equals '{rhs}'."

[[rules]]
name = "commute"
bindings = { a = "Expr", b = "Expr" }
egglog = """
(rewrite (Add a b) (Add b a))
"""

[[examples]]
before = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];"
signature = "A:f32[4] -> C:f32[4]"
after = "B^{4}_{tx=0}[C^{f32,g}_{tx}=1+A^{f32,g}_{tx};];"

[[counterexamples]]
before = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];"
signature = "A:f32[4] -> C:f32[4]"
refused_by = "pattern_match"
'''


def test_user_story_a_new_strategy_is_one_file(tmp_path):
    (tmp_path / "math").mkdir()
    (tmp_path / "math" / "commute_add.toml").write_text(COMMUTE)
    strategies = load_strategies(tmp_path)
    assert "commute_add" in {s.id for s in strategies}
    assert len(strategies) == len(STRATEGIES) + 1
    mine = next(s for s in strategies if s.id == "commute_add")
    assert check_examples(mine) == []
    steps = all_steps(ELEMENTWISE, [mine])
    assert [t.after.text.split(";];")[2] for t in steps] == [
        "B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=E^{f32,g}_{tx,a}+D^{f32,g}_{tx,a}"]
    assert steps[0].difficulty == "easy"
    # a rule's own CoT template replaces the strategy's for that rule's transitions
    (tmp_path / "math" / "commute_add.toml").write_text(
        COMMUTE.replace('name = "commute"', 'name = "commute"\ncot = "Swap {a} and {b}."'))
    (mine,) = [s for s in load_strategies(tmp_path) if s.id == "commute_add"]
    (step,) = all_steps(ELEMENTWISE, [mine])
    assert "Swap D^{f32,g}_{tx,a} and E^{f32,g}_{tx,a}." in step.cot
    assert "The sum" not in step.cot


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace('guards = ["pattern_match"]', 'guards = ["pattern_matching"]'),
     ":4: unknown guard 'pattern_matching'"),
    (lambda t: t.replace('category = "math"', 'category = "maths"'), ":2: unknown category 'maths'"),
    (lambda t: t.replace("(rewrite (Add a b) (Add b a))", "(rewrite (Add a b) (Add b a)"),
     "commute_add.toml:14: egglog syntax"),
    (lambda t: t.replace('S = 0', 'S = 0\ncolour = "red"'), "unknown key 'colour'"),
    (lambda t: t.replace('S = 0', 'S = 0\nrun_alone = "yes"'), ":7: run_alone must be true or false"),
    (lambda t: t.replace('a = "Expr", b = "Expr"', 'a = "Expr", q = "Expr"'),
     "binding 'q' does not occur in the rule"),
    (lambda t: t.replace('{rhs}', '{c}'), "slot(s) c are not bindings"),
    (lambda t: t.replace('name = "commute"', 'name = "commute"\ncot = "{a} and {z}"'),
     ":11: the rule's CoT template slot(s) z are not its bindings"),
    (lambda t: t.replace('refused_by = "pattern_match"', 'refused_by = "dependency"'),
     "refused_by 'dependency' is not one of this strategy's guards"),
])
def test_loader_rejects_bad_rule_files_with_file_and_line(tmp_path, edit, message):
    path = tmp_path / "commute_add.toml"
    path.write_text(edit(COMMUTE.lstrip("\n")))
    with pytest.raises(RuleFileError) as err:
        load_strategies(tmp_path)
    assert message in str(err.value), str(err.value)
    assert str(err.value).startswith(str(path))


def test_replace_over_an_unevaluated_replace_keeps_terms_apart():
    """(Replace (Replace x D F) E G): the outer Replace must not push down past a subterm that
    only turns out equal to E once the inner Replace is evaluated, or it unions E with G."""
    from egglog import bindings
    from leir_egraph.egraph.engine import base_program

    egraph = bindings.EGraph()
    run = lambda text: egraph.run_program(*egraph.parse_program(text))  # noqa: E731
    read = lambda n: f'(Read (MkVar "{n}" "f32" "g" (SNil)))'  # noqa: E731
    run(base_program())
    run(f"(let $q (ReplaceExpr (ReplaceExpr (Div {read('D')} {read('E')}) {read('D')} {read('F')}) "
        f"{read('E')} {read('G')}))")
    run("(run-schedule (saturate (run helpers)))")
    run(f"(check (= $q (Div {read('F')} {read('G')})))")
    with pytest.raises(Exception):
        run(f"(check (= {read('E')} {read('G')}))")



def test_replace_keeps_accesses_whole_even_where_a_gather_reads_the_old_expression():
    """Replace<Sort> replaces Expr subterms and walks no Var, Subs or IExpr (none holds an
    Expr): a gather reading tensor E in another access's subscripts is an index expression, not
    the expression (Read E), so it stays, while the Read E beside it is replaced."""
    from egglog import bindings
    from leir_egraph.egraph.engine import base_program

    egraph = bindings.EGraph()
    run = lambda text: egraph.run_program(*egraph.parse_program(text))  # noqa: E731
    var = lambda n, subs="(SNil)": f'(MkVar "{n}" "f32" "g" {subs})'  # noqa: E731
    gather = var("X", f'(SCons (IAdd (IRead {var("E")}) (IName "i")) (SNil))')
    run(base_program())
    run(f"(let $q (ReplaceExpr (Mul (Read {gather}) (Read {var('E')})) (Read {var('E')}) "
        f"(Read {var('G')})))")
    run("(run-schedule (saturate (run helpers)))")
    run(f"(check (= $q (Mul (Read {gather}) (Read {var('G')}))))")

def test_loader_rejects_duplicate_ids(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "loop_split.toml").write_text(
        (Path(STRATEGIES[0].path).parents[1] / "operator" / "loop_split.toml").read_text())
    with pytest.raises(RuleFileError, match="duplicate strategy id 'loop_split'"):
        load_strategies(tmp_path)


def test_engine_rejects_rules_egglog_cannot_type(tmp_path):
    (tmp_path / "commute_add.toml").write_text(COMMUTE.replace("(Add b a)", "(Plus b a)"))
    (strategy,) = load_strategies(tmp_path, include_default=False)
    with pytest.raises(RuleFileError, match="egglog rejects the rules of 'commute_add'"):
        Engine([strategy])


@pytest.mark.parametrize("first", ["parameters", "guards", "steps", "vocabulary"])
def test_provider_parameters_survive_any_import_order(first):
    """Providers import ParameterSet and GuardExtension from the engine's modules while those
    modules may still be initialising; whichever engine module is imported first, every
    provider's guard and parameter relations must reach the vocabulary of the strategies."""
    import subprocess
    import sys

    script = (f"import leir_egraph.egraph.{first}\n"
              "from leir_egraph.egraph.strategy import load_strategies\n"
              "from leir_egraph.egraph.vocabulary import load_provider, vocabulary_of\n"
              "ss = load_strategies()\n"
              "vocab = vocabulary_of(ss)\n"
              "loaded = [load_provider(p) for s in ss for p in s.providers]\n"
              "params = {r.name for p in loaded for ps in p.parameter_sets for r in ps.relations}\n"
              "guards = {r.name for p in loaded for e in p.guard_extensions\n"
              "          for r in e.relations + (e.new_guard.relations if e.new_guard else ())}\n"
              "assert params and guards\n"
              "assert not params - set(vocab.parameters), params - set(vocab.parameters)\n"
              "assert not guards - set(vocab.relations), guards - set(vocab.relations)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_fresh_index_avoids_the_loops_around_a_nested_nest():
    """A nested nest may not rebind an index of the loops around it: loop_split of the inner
    loop must not call its new loop 'a'."""
    p = program("B^{4}_{tx=0}L^{2}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};"
                "L^{4}_{c=0}[E^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,c};];];",
                "A:f32[4,4] -> D:f32[4,2] E:f32[4,2,4]")
    from leir_egraph.leir import check

    inner = [t for t in single_steps(p, "loop_split") if t.bindings["i"] == "c"]
    assert inner
    for t in inner:
        assert t.bindings["o"] == "d", t.after.text
        check(t.after)


def test_facts_reach_egglog_in_bounded_batches():
    """egglog's time and memory for one text grow with the square of its length, so
    Engine.matches sends a program's declarations and facts in bounded batches: each batch stays
    within the limit (unless one command alone is longer), and together they are the commands,
    in order."""
    from leir_egraph.egraph.engine import batches

    commands = [f"(Fact {i} {'x' * (i % 7)})" for i in range(200)] + ["(" + "y" * 500 + ")", "(Z)"]
    out = batches(commands, limit=300)
    assert "\n".join(out) == "\n".join(commands)
    assert len(out) > 1 and all(len(b) <= 300 or "\n" not in b for b in out)


def test_leir_rules_check_runs_a_directorys_examples_and_verifies_them(tmp_path, capsys):
    """``leir rules check`` passes a good file, verifies its example on TVM with ``--verify``,
    and reports a wrong example (status 1) and a file egglog rejects (status 2, one line)."""
    from leir_egraph import cli

    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "commute_add.toml").write_text(COMMUTE)
    assert cli.main(["rules", "check", str(tmp_path / "ok"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "ok   commute_add: 1 example(s), 1 counterexample(s), 1 verified on TVM" in out

    (tmp_path / "wrong").mkdir()
    (tmp_path / "wrong" / "commute_add.toml").write_text(
        COMMUTE.replace('after = "B^{4}_{tx=0}[C^{f32,g}_{tx}=1+A^{f32,g}_{tx};];"',
                        'after = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}+2;];"'))
    assert cli.main(["rules", "check", str(tmp_path / "wrong" / "commute_add.toml")]) == 1
    out = capsys.readouterr().out
    assert "FAIL commute_add" in out and "example 0 not produced" in out
    assert "0 of 1 rule file(s) pass" in out

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "commute_add.toml").write_text(COMMUTE.replace("(Add b a)", "(Plus b a)"))
    assert cli.main(["rules", "check", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "egglog rejects the rules of 'commute_add'" in err[0]

    # an example whose signature or text does not parse is bad input, named by file and entry
    (tmp_path / "typo").mkdir()
    (tmp_path / "typo" / "commute_add.toml").write_text(
        COMMUTE.replace('signature = "A:f32[4] -> C:f32[4]"', 'signature = "A:f32[4], -> C:f32[4]"', 1))
    assert cli.main(["rules", "check", str(tmp_path / "typo")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "commute_add.toml" in err[0] and "[[examples]] entry 0" in err[0]
    assert "bad tensor" in err[0] and "internal error" not in err[0]


def test_a_right_hand_side_that_never_evaluates_is_reported_not_lost(tmp_path):
    """A rule whose right-hand side uses a helper no rule evaluates gives a row egglog cannot
    extract, not even its constructor's name: the engine finds its strategy by running each
    alone and reports it as broken, beside the other strategies' transitions."""
    (tmp_path / "stuck.egg").write_text("(constructor Stuck (Expr) Expr :unextractable)\n")
    (tmp_path / "stuck_add.toml").write_text(
        COMMUTE.replace('id = "commute_add"', 'id = "stuck_add"')
        .replace('guards = ["pattern_match"]', 'guards = ["pattern_match"]\nproviders = ["stuck.egg"]')
        .replace("(rewrite (Add a b) (Add b a))", "(rewrite (Add a b) (Stuck (Add b a)))"))
    (tmp_path / "commute_add.toml").write_text(COMMUTE)
    strategies = load_strategies(tmp_path, include_default=False)
    assert {s.id for s in strategies} == {"commute_add", "stuck_add"}
    broken: list = []
    steps = all_steps(ELEMENTWISE, strategies, broken=broken)
    assert [t.strategy for t in steps] == ["commute_add"]
    assert [(b.strategy, b.rule, b.lhs) for b in broken] == [
        ("stuck_add", "commute", "(not extractable)")]


def test_facts_egglog_stores_are_the_facts_sent(golden_rows):
    """Every fact reaches egglog as written, whether loaded as a row of its relation's twin
    (input_rows: its terms by reference numbers) or sent as text, and the program's
    ``let``-bound nests included.
    With let names ending in a digit, egglog 13.2 read ``$f13`` in a command that also named
    ``$f131`` through a variable of that name and stored gold-0001's copy form of A with its tx
    loop replaced by a second g loop (loaded.py); the copy nest built from it was wrong."""

    from leir_egraph.egraph.encoding import from_termdag
    from leir_egraph.egraph.engine import engine_for
    from leir_egraph.egraph.steps import default_strategies

    row = next(r for r in golden_rows if r["id"] == "gold-0001")
    program = Program(parse(row["leir"]), Signature.from_dict(row["signature"]), row["name"])
    engine = engine_for(default_strategies())
    loaded = LoadedProgram(program)
    commands = engine.fact_commands(loaded)
    assert any(c.startswith("(input ") for c in commands)  # facts loaded as rows
    assert any(c.startswith("(let $n") for c in commands)  # the program's nests
    relations = ("CopyForm", "StorageLayout", "NewLayout")
    # text() outside shared_terms: each fact's whole text, deferred last columns computed
    sent = {fact.text() for fact in engine.vocabulary.facts(loaded, set(relations))}
    assert len(sent) > 100
    engine.run("(push)")
    try:
        engine.send(commands)
        stored = set()
        for relation in relations:
            (output,) = engine.run(f"(print-function {relation} 100000)")
            stored |= {to_egglog(from_termdag(output.termdag, row_id, {}))
                       for row_id, _ in output.terms}
    finally:
        engine.run("(pop)")
    assert stored == sent


def test_rows_read_from_frozen_tables_are_the_printed_rows(golden_rows):
    """``Engine.read_table`` reads the ``Matched`` rows of a full enumeration and the ``Found``
    rows of a draw from egglog's frozen tables: the same rows, terms and order as
    ``print-function`` gives, on golden and drawn programs with every strategy; an e-class
    with two extractable nodes is left to egglog's extractor."""
    from egglog import bindings

    from leir_egraph.egraph import engine as engine_module
    from leir_egraph.egraph.frozen_rows import Ambiguous, FrozenReader
    from leir_egraph.egraph.steps import default_strategies, engine_for
    from leir_egraph.leir.drawn import draw_programs

    engine = engine_for(default_strategies())
    compared = {"Matched": [], "Found": []}

    def both(relation, names=None):  # names: the program's fresh names put in as read
        string = None if names is None else names.term
        frozen = FrozenReader(engine._egraph, engine._unextractable, string).rows(relation)
        (output,) = engine.run(f"(print-function {relation} {engine_module.MAX_ROWS})")
        printed = engine_module._printed_rows(output, names)
        assert frozen == printed
        compared[relation].append(len(printed))
        return printed

    programs = [Program.parse(r["leir"], r["signature"]) for r in golden_rows[::60]]
    engine.read_table = both
    try:
        for p in programs + draw_programs(7, 12):
            engine.matches(p)
        for p in programs[:3]:
            with engine.applications(p) as found:
                assert found.found
    finally:
        del engine.read_table
    assert len(compared["Matched"]) >= len(programs) and sum(compared["Matched"]) > 1000
    assert len(compared["Found"]) == 3 and sum(compared["Found"]) > 100

    egraph = bindings.EGraph()
    egraph.run_program(*egraph.parse_program(
        "(datatype T (A i64) (B T))\n(let $x_ (B (A 1)))\n(union (A 2) (A 1))"))
    reader = FrozenReader(egraph, frozenset())
    x = reader.functions["$x_"].rows[0].output
    with pytest.raises(Ambiguous):
        reader.term(x, "T")
