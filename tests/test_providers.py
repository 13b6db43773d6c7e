"""A strategy is its rule file plus, where it needs facts no shared relation states, a fact
provider beside it (docs/RULES.md §5): a user adds one from a directory of their own, with no
edit of ``leir_egraph/``, and its transitions are verified on TVM."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from leir_egraph.egraph import RuleFileError, load_strategies, single_steps
from leir_egraph.egraph.catalog import TABLE_END, TABLE_START, vocabulary_table
from leir_egraph.egraph.rulecheck import check_examples, example_program

ROOT = Path(__file__).resolve().parents[1]

# A new fact: the loop indexes the last (contiguous) dimension of a tensor the nest writes.
PROVIDER = '''
"""Fact provider of unroll_contiguous: ContiguousWriteLoop n i -- the loop i of nest n indexes
the last dimension of a tensor n writes, so unrolling it makes consecutive stores."""

from leir_egraph.egraph.encoding import quoted
from leir_egraph.egraph.vocabulary import Guard, GuardExtension, Relation
from leir_egraph.leir.ast import IName


def contiguous_write_facts(loaded):
    for name, nest in loaded.named_nests():
        for eq in nest.equations:
            subs = eq.target.subscripts
            if subs and isinstance(subs[-1], IName):
                yield f"(ContiguousWriteLoop {name} {quoted(subs[-1].name)})"


CONTIGUOUS_WRITE = Guard(
    "contiguous_write",
    "The loop indexes the last dimension of a tensor the nest writes.",
    "the loop does not index the last dimension of any tensor the nest writes",
    relations=(Relation("ContiguousWriteLoop", ("Nest", "String"),
                        "the loop {1} of {0} indexes the last dimension of a tensor it writes"),),
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
