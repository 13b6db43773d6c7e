"""A strategy is its rule file plus, where it needs facts no shared relation states, a fact
provider beside it (docs/RULES.md §5): a user adds one from a directory of their own, with no
edit of ``leir_egraph/``, and its transitions are verified on TVM."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from leir_egraph.egraph import RuleFileError, load_strategies, single_steps
from leir_egraph.egraph.catalog import TABLE_END, TABLE_START, vocabulary_table
from leir_egraph.egraph.rulecheck import check_examples, example_program
from leir_egraph.egraph.vocabulary import vocabulary_of
from leir_egraph.leir import Program, Signature, parse

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = load_strategies()

# A new fact: the loop indexes the last (contiguous) dimension of a tensor the nest writes.
PROVIDER = '''
"""Fact provider of unroll_contiguous: ContiguousWriteLoop n i -- the loop i of nest n indexes
the last dimension of a tensor n writes, so unrolling it makes consecutive stores."""

from leir_egraph.egraph.vocabulary import Guard, GuardExtension, Relation
from leir_egraph.leir.ast import IName

CONTIGUOUS_WRITE_LOOP = Relation("ContiguousWriteLoop", ("Nest", "String"),
                                 "the loop {1} of {0} indexes the last dimension of a tensor it "
                                 "writes")


def contiguous_write_facts(loaded):
    for term, nest in loaded.term_nests():
        for eq in nest.equations:
            subs = eq.target.subscripts
            if subs and isinstance(subs[-1], IName):
                yield CONTIGUOUS_WRITE_LOOP(term, subs[-1].name)


CONTIGUOUS_WRITE = Guard(
    "contiguous_write",
    "The loop indexes the last dimension of a tensor the nest writes.",
    "the loop does not index the last dimension of any tensor the nest writes",
    relations=(CONTIGUOUS_WRITE_LOOP,),
    facts=contiguous_write_facts)

GUARD_EXTENSIONS = (GuardExtension("contiguous_write", new_guard=CONTIGUOUS_WRITE),)
'''

RULE = '''
id = "unroll_contiguous"
category = "operator"
description = "Unroll a short serial loop that walks the last dimension of a written tensor."
guards = ["pattern_match", "contiguous_write"]
providers = ["unroll_contiguous.py"]
P = 1
S = 1
cot = "The serial loop '{i}' of {n} iterations indexes the last dimension of what {nest} writes; unrolling it keeps the order of every iteration."

[[rules]]
name = "unroll-contiguous-loop"
bindings = { nest = "Nest", i = "String", n = "i64" }
egglog = """
(rewrite (MkNest loops body)
         (MkNest (LReplace loops loop (LCons (MkLoop "U" n i) (LNil))) body)
  :when ((= nest (MkNest loops body))
         (LoopIn loops loop)
         (= loop (MkLoop "L" n i))
         (>= n 2)
         (<= n 16)
         (ContiguousWriteLoop nest i)))
"""

[[examples]]
before = "B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
signature = "A:f32[4,6] -> D:f32[4,6]"
after = "B^{4}_{tx=0}U^{6}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
bindings = { i = "a", n = "6" }

[[counterexamples]]
note = "the serial loop a indexes the first dimension of D, not the last"
before = "B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{a,tx}=A^{f32,g}_{tx,a}*2;];"
signature = "A:f32[4,6] -> D:f32[6,4]"
refused_by = "contiguous_write"
'''


@pytest.fixture
def user_rules(tmp_path):
    directory = tmp_path / "my_rules"
    directory.mkdir()
    (directory / "unroll_contiguous.toml").write_text(textwrap.dedent(RULE))
    (directory / "unroll_contiguous.py").write_text(textwrap.dedent(PROVIDER))
    return directory


def test_a_user_strategy_with_a_new_fact_needs_no_package_edit(user_rules):
    (strategy,) = load_strategies(user_rules, include_default=False)
    assert strategy.providers == (str((user_rules / "unroll_contiguous.py").resolve()),)
    assert "ContiguousWriteLoop" in strategy.vocabulary.relations
    # its own examples and counterexample, the counterexample refused by the new guard
    assert check_examples(strategy) == []
    program = example_program("B^{4}_{tx=0}L^{6}_{a=0}L^{3}_{c=0}"
                              "[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a}*C^{f32,g}_{c};];",
                              "A:f32[4,6] C:f32[3] -> D:f32[4,6,3]")
    steps = single_steps(program, strategy)
    assert [t.after.text for t in steps] == [
        "B^{4}_{tx=0}L^{6}_{a=0}U^{3}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a}*C^{f32,g}_{c};];"]
    # the chain of thought states the provider's fact with its guard
    assert any("contiguous write: the loop 'c' of" in fact for fact in steps[0].guard_facts)


def test_a_user_strategy_with_a_new_fact_is_verified_on_tvm_from_the_command_line(user_rules):
    done = subprocess.run([sys.executable, "-m", "leir_egraph", "rules", "check",
                           str(user_rules), "--verify"], capture_output=True, text=True,
                          cwd=user_rules.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 verified on TVM" in done.stdout
    # and it is listed together with the default strategies
    listed = subprocess.run([sys.executable, "-m", "leir_egraph", "strategies", "--rules",
                             str(user_rules)], capture_output=True, text=True)
    assert listed.returncode == 0 and "unroll_contiguous" in listed.stdout


def test_a_broken_provider_is_a_located_one_line_error(user_rules):
    (user_rules / "unroll_contiguous.py").write_text("GUARD_EXTENSIONS = (1/0,)\n")
    with pytest.raises(RuleFileError, match=r"unroll_contiguous\.py:1: the provider failed to "
                                            r"load: ZeroDivisionError"):
        load_strategies(user_rules, include_default=False)
    done = subprocess.run([sys.executable, "-m", "leir_egraph", "strategies", "--rules",
                           str(user_rules)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unroll_contiguous.py:1:" in done.stderr
    assert "Traceback" not in done.stderr


# What a provider may get wrong about a fact, the line of the provider that is named (in
# PROVIDER: the line of the ``yield``), and the message.
BAD_FACTS = [
    ("CONTIGUOUS_WRITE_LOOP(term, subs[-1].name, 3)", "ContiguousWriteLoop takes 2 columns"),
    ("CONTIGUOUS_WRITE_LOOP(term, len(subs))", "ContiguousWriteLoop column 2 is of sort String, "
                                               "got int"),
    ("CONTIGUOUS_WRITE_LOOP(subs[-1].name, term)", "column 1 is of sort Nest, got str"),
    ("CONTIGUOUS_WRITE_LOOP(eq.value, subs[-1].name)", "column 1 is of sort Nest"),
    ("Relation('Contiguous', ('Nest', 'String'), '{0}')(term, subs[-1].name)",
     "relation 'Contiguous' is not declared"),
    ("f'(ContiguousWriteLoop {term} {subs[-1].name})'", "yields facts made by calling a declared "
                                                         "Relation, got str"),
]


@pytest.mark.parametrize("made, message", BAD_FACTS, ids=[m for _, m in BAD_FACTS])
def test_a_bad_fact_is_a_one_line_error_at_the_providers_line(user_rules, made, message):
    """Arity, column sorts and the relation are checked where the fact is made; the error names
    the provider's file and the line that made the fact, for the library call and for
    ``leir rules check`` (bad input, exit 2), never a fact dropped or a traceback."""
    provider = user_rules / "unroll_contiguous.py"
    good = "yield CONTIGUOUS_WRITE_LOOP(term, subs[-1].name)"
    text = provider.read_text()
    line = text[:text.index(good)].count("\n") + 1
    provider.write_text(text.replace(good, f"yield {made}"))
    (strategy,) = load_strategies(user_rules, include_default=False)
    program = example_program("B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];",
                              "A:f32[4,6] -> D:f32[4,6]")
    with pytest.raises(RuleFileError) as caught:
        single_steps(program, strategy)
    assert str(caught.value).startswith(f"{provider}:{line}: ")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    done = subprocess.run([sys.executable, "-m", "leir_egraph", "rules", "check",
                           str(user_rules)], capture_output=True, text=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"unroll_contiguous.py:{line}: " in done.stderr and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_missing_provider_and_a_clashing_relation_are_refused(user_rules):
    rule = user_rules / "unroll_contiguous.toml"
    rule.write_text(rule.read_text().replace('"unroll_contiguous.py"', '"nowhere.py"'))
    with pytest.raises(RuleFileError, match="provider 'nowhere.py' not found"):
        load_strategies(user_rules, include_default=False)
    rule.write_text(rule.read_text().replace('"nowhere.py"', '"unroll_contiguous.py"'))
    provider = user_rules / "unroll_contiguous.py"
    provider.write_text(provider.read_text().replace('Relation("ContiguousWriteLoop"',
                                                     'Relation("Independent"'))
    with pytest.raises(RuleFileError, match="relation 'Independent' is already defined"):
        load_strategies(user_rules, include_default=False)


# A user's deferred relation (docs/RULES.md §5.2): SplitPlan i f m -- the serial loop i may be split
# into f outer iterations of m; m, the last column, is stated only for the drawn applications.
DEFERRED_PROVIDER = '''
from leir_egraph.egraph.vocabulary import ParameterSet, Relation, later

SPLIT_PLAN = Relation("SplitPlan", ("String", "i64", "i64"),
                      "the loop {0} splits into {1} times {2}", deferred=True)


def split_plans(loaded):
    for _, nest in loaded.term_nests():
        for loop in (l for l in nest.loops if l.kind == "L"):
            for f in range(2, loop.extent):
                if loop.extent % f == 0:
                    yield SPLIT_PLAN(loop.index, f, later(lambda m=loop.extent // f: m))


PARAMETER_SETS = (ParameterSet((SPLIT_PLAN,), split_plans),)
'''

DEFERRED_RULE = '''
id = "split_by_plan"
category = "operator"
description = "Split a loop by a planned factor."
guards = ["pattern_match"]
providers = ["split_plans.py"]
P = 1
S = 1
cot = "The loop '{i}' runs {f} times {m}."

[[rules]]
name = "split-by-plan"
bindings = { nest = "Nest", i = "String", f = "i64", m = "i64", o = "String" }
egglog = """
(rewrite (MkNest loops body)
         (MkNest (LReplace loops loop (LCons (MkLoop "L" f o) (LCons (MkLoop k m i) (LNil))))
                 (SubstBody body i (IAdd (IMul (IName o) (IConst m)) (IName i))))
  :when ((= nest (MkNest loops body))
         (LoopIn loops loop)
         (= loop (MkLoop k n i))
         (SplitPlan i f m)
         (FreshIndex nest 0 o)))
"""

[[examples]]
before = "B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
signature = "A:f32[4,6] -> D:f32[4,6]"
after = "B^{4}_{tx=0}L^{2}_{c=0}L^{3}_{a=0}[D^{f32,g}_{tx,c*3+a}=A^{f32,g}_{tx,c*3+a}*2;];"

[[counterexamples]]
before = "B^{4}_{tx=0}L^{3}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
signature = "A:f32[4,3] -> D:f32[4,3]"
refused_by = "pattern_match"
'''


def test_a_users_deferred_relation_waits_for_the_draw_or_is_sent_whole(tmp_path):
    """A user's deferred relation: the engine states it by its key and sends the whole facts
    of the drawn applications only; a second strategy that reads its last column in another
    condition makes the engine state it whole. Either way a draw gives transitions of the full
    enumeration, and all of them at an unlimited cap."""
    from leir_egraph.egraph.engine import Engine
    from leir_egraph.egraph.steps import drawn_steps

    (tmp_path / "split_plans.py").write_text(DEFERRED_PROVIDER)
    (tmp_path / "split_by_plan.toml").write_text(DEFERRED_RULE)
    (strategy,) = load_strategies(tmp_path, include_default=False)
    assert check_examples(strategy) == []
    program = example_program("B^{4}_{tx=0}L^{12}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];",
                              "A:f32[4,12] -> D:f32[4,12]")
    full = sorted(t.after.text for t in single_steps(program, strategy))
    assert len(full) == 4  # a: 2, 3, 4 or 6 outer iterations
    engine = Engine([strategy])
    assert set(engine.deferred) == {"SplitPlan"}
    ((_, one),), _ = drawn_steps(program, [strategy], 1, lambda sid: 3, engine=engine)
    assert one.after.text in full and int(one.bindings["m"]) * int(one.bindings["f"]) == 12
    every, _ = drawn_steps(program, [strategy], 100, lambda sid: 3, engine=engine)
    assert sorted(t.after.text for _, t in every) == full

    (tmp_path / "split_by_two.toml").write_text(
        DEFERRED_RULE.replace('id = "split_by_plan"', 'id = "split_by_two"')
        .replace("(SplitPlan i f m)", "(SplitPlan i f m)\n         (= m 2)"))
    both = load_strategies(tmp_path, include_default=False)
    engine = Engine(both)
    assert engine.deferred == {}
    every, _ = drawn_steps(program, both, 100, lambda sid: 3, engine=engine)
    assert sorted(t.after.text for _, t in every if t.strategy == "split_by_plan") == full
    assert sorted(t.after.text for _, t in every if t.strategy == "split_by_two") == sorted(
        t.after.text for t in single_steps(program, both[1]))


def test_rules_md_lists_every_strategys_providers_and_relations():
    """docs/RULES.md §5 holds the generated table (``leir strategies --vocabulary``)."""
    text = (ROOT / "docs" / "RULES.md").read_text()
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END)
    assert text[start:end] == vocabulary_table(load_strategies()), \
        "regenerate: leir strategies --vocabulary, and paste it into docs/RULES.md"


def test_package_holds_only_the_shared_vocabulary():
    """Every strategy-specific recogniser lives beside its rule file: what remains in
    egraph/extensions/ is read by strategies of more than one family."""
    from leir_egraph.egraph import extensions

    modules = sorted(p.stem for p in Path(extensions.__path__[0]).glob("*.py")
                     if p.stem != "__init__")
    assert modules == ["math_ranges"]


# ---------------------------------------------------------------- facts keyed by their terms

def term_keyed_relations() -> list[str]:
    """The relations docs/RULES.md 5.5 says are decided by their key columns alone."""
    text = (ROOT / "docs" / "RULES.md").read_text()
    return re.findall(r"^\| `(\w+)` \|[^|]*\|[^|]*\| its key columns alone \|$", text, re.M)


def facts_by_key(vocab, program, relation: str, keys=None):
    """The facts of ``relation`` about ``program`` (their columns), and the nest and suffix terms
    the program holds; with ``keys``, only the facts whose Nest and Prog columns are among them."""
    from leir_egraph.egraph.loaded import LoadedProgram

    loaded = LoadedProgram(program)
    held = set(loaded.nest_terms) | set(loaded.suffix_terms)
    facts = {f.columns() for f in vocab.facts(loaded, {relation})}
    if keys is not None:
        sorts = (vocab.parameters.get(relation) or vocab.relations[relation][1]).sorts
        facts = {f for f in facts
                 if all(v in keys for v, s in zip(f, sorts) if s in ("Nest", "Prog"))}
    return facts, held


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_term_keyed_facts_are_the_same_in_every_program_holding_their_keys(golden_rows, data):
    """A relation drawn from those docs/RULES.md 5.5 calls decided by their key columns alone:
    its facts about a golden program P equal its facts about a program Q that holds P's nests
    -- in reverse order, or twice over -- for every key term P and Q share, so a fact stated for
    one program is true of every program holding its key terms."""
    from leir_egraph.leir.ast import Leir

    vocab = vocabulary_of(STRATEGIES)
    produced = {name for _, declared in vocab.producers for name in declared}
    candidates = sorted(set(term_keyed_relations()) & produced)
    assert len(candidates) >= 25, candidates  # the table is read, not silently empty
    relation = data.draw(st.sampled_from(candidates), label="relation")
    programs = [Program(parse(r["leir"]), Signature.from_dict(r["signature"]), r["name"])
                for r in golden_rows[:16]]
    with_facts = [p for p in programs if facts_by_key(vocab, p, relation)[0]]
    assume(with_facts)  # a relation none of these programs has a fact of proves nothing here
    p = data.draw(st.sampled_from(with_facts), label="program")
    variant = data.draw(st.sampled_from(["reversed", "doubled"]), label="Q")
    nests = p.leir.nests[::-1] if variant == "reversed" else p.leir.nests * 2
    q = Program(Leir(tuple(nests)), p.signature, p.name)
    _, keys_p = facts_by_key(vocab, p, relation)
    _, keys_q = facts_by_key(vocab, q, relation)
    shared = keys_p & keys_q
    facts_p, _ = facts_by_key(vocab, p, relation, shared)
    facts_q, _ = facts_by_key(vocab, q, relation, shared)
    assert facts_p == facts_q
