"""A strategy of your own, used by every command (issue 35 items 1 and 5).

The files of docs/RULES.md's walk-through ("Your first strategy", docs/first_strategy/) are
run exactly as the walk-through runs them: checked and verified, enumerated, explored and
searched from the command line with ``--rules DIR``, and through the Python API after
``load_strategies(DIR)`` (the one mechanism by which an id of yours resolves everywhere).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import leir_egraph as le
from leir_egraph import cli
from leir_egraph.egraph.strategy import RuleFileError, UnknownStrategy, strategy_by_id

ROOT = Path(__file__).resolve().parents[1]
WALK = ROOT / "docs" / "first_strategy"
RULES = WALK / "my_rules"
PROGRAM = WALK / "scale.leir"
SIG = WALK / "scale.sig.json"
SUM = "B^{64}_{tx=0}L^{32}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}+A^{f32,g}_{tx,a};];"


@pytest.fixture
def in_walkthrough(tmp_path):
    """The walk-through's commands, with relative paths, in a copy of its folder outside the
    repository (the strategy comes from nowhere the package knows)."""
    copy = tmp_path / "walk"
    shutil.copytree(WALK, copy)
    before = os.getcwd()
    os.chdir(copy)
    yield copy
    os.chdir(before)


def test_rules_md_shows_the_walkthrough_files_as_they_are():
    text = (ROOT / "docs" / "RULES.md").read_text()
    for path in (RULES / "double_to_sum.toml", PROGRAM, SIG):
        assert path.read_text().strip() in text, f"docs/RULES.md does not show {path.name}"


def test_the_walkthrough_checks_explores_and_searches_a_strategy_from_outside(
        in_walkthrough, capsys):
    # (the walk-through adds --verify; the search below verifies the same step on TVM)
    assert cli.main(["rules", "check", "my_rules"]) == 0
    assert "ok   double_to_sum: 1 example(s), 1 counterexample(s)" in capsys.readouterr().out

    assert cli.main(["steps", "scale.leir", "--sig", "scale.sig.json", "--rules", "my_rules",
                     "--strategy", "double_to_sum"]) == 0
    assert f"after: {SUM}" in capsys.readouterr().out

    graph = in_walkthrough / "space.jsonl"
    assert cli.main(["explore", "scale.leir", "--sig", "scale.sig.json", "--rules", "my_rules",
                     "--strategies", "double_to_sum,loop_reorder", "--depth", "2", "--json",
                     "--graph", str(graph)]) == 0
    summary = json.loads(capsys.readouterr().out)
    # the root, its sum and its reorder, and the reordered sum (reached both ways)
    assert summary["strategies"] == ["double_to_sum", "loop_reorder"]
    assert summary["per_depth"] == [1, 2, 1] and summary["stopped"] == "depth"
    rows = [json.loads(line) for line in graph.read_text().splitlines()]
    assert SUM in {r["program"] for r in rows if "node" in r}
    assert sum(any(s.startswith("double_to_sum") for s in r["steps"])
               for r in rows if "edge" in r) == 2

    assert cli.main(["search", "scale.leir", "--sig", "scale.sig.json", "--rules", "my_rules",
                     "--strategies", "double_to_sum", "--max-samples", "2", "--timeout", "600",
                     "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (sample,) = result["samples"]   # the one step there is, verified against the root
    assert sample["strategy"] == "double_to_sum" and sample["text"] == SUM
    assert sample["valid"] and sample["level"] == "independent"


def test_eval_attributes_an_answer_to_a_user_strategy_only_with_its_rules(in_walkthrough,
                                                                          capsys):
    from leir_egraph.dataset.chat import single_prompt

    program = le.Program.parse(PROGRAM.read_text(), json.loads(SIG.read_text()), "scale")
    Path("cases.jsonl").write_text(json.dumps({"messages": [
        {"role": "user", "content": single_prompt("scale", program.text, program.signature)},
        {"role": "assistant", "content": "label"}]}) + "\n")
    claim = json.dumps({"transformed_IR": SUM, "applied_strategy": "double_to_sum"})
    Path("answers.jsonl").write_text(json.dumps(
        {"answers": [f"<think>t</think><answer>{claim}</answer>"]}) + "\n")
    found = {}
    for rules in ([], ["--rules", "my_rules"]):
        assert cli.main(["eval", "cases.jsonl", "--answers", "answers.jsonl", "--json",
                         *rules]) == 0
        found[bool(rules)] = json.loads(capsys.readouterr().out)["attribution"]
    assert found[False] == {"equal": 1, "attributed": 0, "unknown": 1, "tir": 0}
    assert found[True] == {"equal": 1, "attributed": 1, "unknown": 0, "tir": 0}


def test_loading_a_folder_makes_its_ids_work_in_every_api_call():
    from leir_egraph.explore import explore
    from leir_egraph.search import RulesProposer, search

    program = le.Program.parse(PROGRAM.read_text(), json.loads(SIG.read_text()))
    loaded = le.load_strategies(RULES)
    assert "double_to_sum" in {s.id for s in loaded} and len(loaded) == 47
    (step,) = le.single_steps(program, "double_to_sum")   # README's two lines
    assert step.after.text == SUM and step.bindings == {"x": "A^{f32,g}_{tx,a}"}
    assert le.applicable(program, ["double_to_sum"]) == {"double_to_sum": 1}
    space = explore(program, ["double_to_sum", "loop_reorder"], depth=2)
    assert space.counts() == [1, 2, 1]

    proposer = RulesProposer("cost", strategies=["double_to_sum", "loop_split"])
    assert {t.strategy for t in proposer.ranked(program)} == {"double_to_sum", "loop_split"}
    # the lookahead takes the user's strategy and the built-in loop moves among those it runs
    assert proposer.lookahead_strategies == ["double_to_sum", "loop_split"]
    assert RulesProposer(strategies=["double_to_sum"],
                         lookahead_strategies=["loop_reorder"]).lookahead_strategies == \
        ["loop_reorder"]
    # step 7's search, through the API: the one step, verified on TVM against the root
    result = search(program, "greedy", RulesProposer("cost", strategies=["double_to_sum"]),
                    max_samples=2, timeout=600)
    assert [(x.strategy, x.text, x.valid) for x in result.samples] == [
        ("double_to_sum", SUM, True)]


def test_an_unknown_id_is_an_error_everywhere_never_an_empty_result():
    from leir_egraph.explore import explore
    from leir_egraph.search import RulesProposer

    program = le.Program.parse(PROGRAM.read_text(), json.loads(SIG.read_text()))
    for call in (lambda: RulesProposer("cost", strategies=["no_such_id"]),
                 lambda: RulesProposer(lookahead_strategies=["no_such_id"]),
                 lambda: le.single_steps(program, "no_such_id"),
                 lambda: explore(program, ["no_such_id"], depth=1)):
        with pytest.raises(UnknownStrategy) as raised:
            call()
        message = str(raised.value)
        assert message.startswith("unknown strategy 'no_such_id' (a strategy of your own: load "
                                  "its directory first") and "\n" not in message
    with pytest.raises(ValueError, match="an empty list chooses nothing"):
        RulesProposer(strategies=[])


def test_a_user_id_that_takes_a_builtin_one_is_refused(tmp_path):
    mine = tmp_path / "operator"
    mine.mkdir()
    (mine / "loop_split.toml").write_text((RULES / "double_to_sum.toml").read_text().replace(
        'id = "double_to_sum"', 'id = "loop_split"').replace('"math"', '"operator"'))
    with pytest.raises(RuleFileError, match="duplicate strategy id 'loop_split'"):
        le.load_strategies(tmp_path, include_default=False)
    # the built-in loop_split is still the one its id resolves to
    assert strategy_by_id("loop_split").path.endswith("rules/operator/loop_split.toml")


def test_the_provider_api_table_matches_the_code():
    """Every name of docs/RULES.md section 5.4 exists, with the parameters the table gives."""
    text = (ROOT / "docs" / "RULES.md").read_text()
    section = text[text.index("### 5.4 The provider API"):text.index("### 5.3 Which strategy")]
    modules = {m: f"leir_egraph.leir.{m}" for m in ("analysis", "legality", "memory",
                                                     "scheduling", "hardware", "ranges",
                                                     "printer")}
    modules.update(LoadedProgram="leir_egraph.egraph.vocabulary")
    flat = {"Relation": "vocabulary", "Guard": "vocabulary", "GuardExtension": "vocabulary",
            "ParameterSet": "vocabulary", "later": "vocabulary", "FactError": "vocabulary",
            "encode": "encoding",
            "to_egglog": "encoding"}
    checked = 0
    for row in re.findall(r"^\| (.+?) \|", section, re.M):
        for name, params in re.findall(r"`([A-Za-z_.]+)(?:\(([^`]*)\))?`", row):
            owner, _, attr = name.rpartition(".")
            if owner == "LoadedProgram":
                loaded = importlib.import_module(modules[owner]).LoadedProgram
                if attr in loaded.__dataclass_fields__:   # a field (LoadedProgram.program)
                    checked += 1
                    continue
                target = getattr(loaded, attr)
            elif owner:
                target = getattr(importlib.import_module(modules[owner]), attr)
            else:
                target = getattr(importlib.import_module(f"leir_egraph.egraph.{flat[attr]}"),
                                 attr)
            checked += 1
            given = [p.split("=")[0].strip() for p in params.split(",") if p.strip()]
            real = [p for p in inspect.signature(target).parameters if p != "self"]
            assert given == real, f"{name}: the table says ({params}), the code has {real}"
    assert checked >= 40
