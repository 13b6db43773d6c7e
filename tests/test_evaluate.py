"""Single-step evaluation on a recorded answer set with known pass rates."""

from __future__ import annotations

import json

import pytest

from leir_egraph import Program
from leir_egraph.dataset.chat import single_prompt
from leir_egraph.egraph import single_steps
from leir_egraph.evaluate import (CaseError, evaluate, load_answers, load_cases, pass_at_k,
                                  program_from_prompt)
from leir_egraph.verify import Verifier

SIG = {"inputs": [{"name": "A", "dtype": "float32", "shape": [8, 16]}],
       "outputs": [{"name": "C", "dtype": "float32", "shape": [8, 16]}]}
TEXT = "B^{8}_{tx=0}L^{16}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a})*2;];"


def answer(ir, strategy):
    return "<think>t</think><answer>" + json.dumps(
        {"transformed_IR": ir, "applied_strategy": strategy}) + "</answer>"


def test_recorded_answers_give_the_known_rates(tmp_path):
    program = Program.parse(TEXT, SIG, "exp2")
    chat = tmp_path / "single.jsonl"
    chat.write_text(json.dumps({"messages": [
        {"role": "user", "content": single_prompt("exp2", TEXT, program.signature)},
        {"role": "assistant", "content": "label"}]}) + "\n")
    split = single_steps(program, "loop_split")[0].after.text
    vectorized = "B^{8}_{tx=0}V^{16}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a})*2;];"
    wrong = "B^{8}_{tx=0}L^{16}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a})*3;];"
    bad_sig = "B^{8}_{tx=0}L^{16}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a})*2+X^{f32,g}_{a};];"
    answers = [
        answer(split, "loop_split"),            # equal, attributed
        answer(vectorized, "loop_unrolling"),   # equal, but not an unrolling step
        answer(wrong, "loop_split"),            # executes, not equal
        answer(bad_sig, "loop_split"),          # different, does not build (unknown X)
        "no answer at all",                     # not even different
        answer(TEXT, "loop_split"),             # the original again
    ]
    rec = tmp_path / "answers.jsonl"
    rec.write_text(json.dumps({"answers": answers}) + "\n")
    cases = load_cases(chat)
    assert cases[0].program.text == program.text
    assert cases[0].program.signature == program.signature
    with Verifier() as v:
        report = evaluate(cases, load_answers(rec), verifier=v)
    levels = [s.level for s in report.answers]
    assert levels == ["equal", "equal", "execute", "different", "none", "none"]
    assert report.rates == pytest.approx({"different": 4 / 6, "build": 3 / 6,
                                          "execute": 3 / 6, "equal": 2 / 6})
    assert report.pass_at[1] == pytest.approx(2 / 6)
    assert report.pass_at[6] == 1.0
    assert [s.attributed for s in report.answers[:2]] == [True, False]
    assert report.attribution == {"equal": 2, "attributed": 1, "unknown": 0, "tir": 0}
    assert report.categories == {"operator": 2}
    assert "pass@k" in report.table()


def test_pass_at_k_estimator():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 3, 2) == 1.0


def test_bad_case_lines_name_file_and_line(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hello"}]}\n')
    with pytest.raises(CaseError, match=r"cases.jsonl:1: .*not a Step-TP single-answer prompt"):
        load_cases(path)
    with pytest.raises(CaseError, match="no known tensor"):
        program_from_prompt("Give the following IR of x: 'L^{4}_{a=0}[C^{f32,g}_{a}="
                            "A^{f32,g}_{a};];', where the known variables are 'A' with the "
                            "dtype torch.float32 and shape [4]. Do not change")
