"""Balancing rules (docs/STRATEGIES.md) and the chat-template format, on constructed records."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from leir_egraph.dataset.balance import (BalancePolicy, balance_multi, balance_single,
                                         balance_table, grouped)
from leir_egraph.dataset.chat import (known_info, multi_example, single_example)
from leir_egraph.leir.signature import Signature

SIG = Signature.from_short("A:f32[16,256] C:f32[16] -> D:f32[16,256]")
# strategy -> (category, class, direction)
KINDS = {
    "logsimp": ("math", "easy", "simplify"),
    "expand_log": ("math", "easy", "expand"),
    "operator_fission": ("graph", "easy", ""),
    "loop_reorder": ("operator", "medium", ""),
    "operator_fusion": ("graph", "medium", ""),
    "loop_split": ("operator", "difficult", ""),
    "online_softmax": ("math", "difficult", ""),
}


def record(program: int, strategy: str, k: int) -> dict:
    category, cls, direction = KINDS[strategy]
    return {"id": f"p{program}/{strategy}/{k}", "program_id": f"p{program}",
            "program": f"Prog{program}", "signature": SIG.to_json(),
            "before_leir": f"B^{{16}}_{{tx=0}}[D^{{f32,g}}_{{tx,{program}}}=A^{{f32,g}}_{{tx,0}};];",
            "after_leir": f"after-{program}-{strategy}-{k}", "strategy": strategy,
            "category": category, "difficulty": cls, "direction": direction,
            "cot": f"Reasoning for {strategy} #{k}.", "speedup": None}


def corpus(programs: int = 300, per_strategy: int = 4) -> list[dict]:
    return [record(p, s, k) for p in range(programs) for s in KINDS for k in range(per_strategy)]


def test_single_answer_keeps_20_percent_of_simplifying_and_4_percent_of_expanding_easy():
    records = corpus()
    single = balance_single(records, BalancePolicy(seed=1))
    kept = Counter(r["strategy"] for r in single)
    assert kept["logsimp"] == 240          # 20% of 1,200 (simplify)
    assert kept["expand_log"] == 48        # 4% of 1,200 (expand)
    assert kept["operator_fission"] == 240  # no direction: treated as the simplifying side
    for s in ("loop_reorder", "operator_fusion", "loop_split", "online_softmax"):
        assert kept[s] == 1200             # medium and difficult: all kept in single-answer
    kept_ids = {r["id"] for r in single}
    assert single == [r for r in records if r["id"] in kept_ids]  # input order kept


def test_small_counts_round_stochastically_and_seeded():
    records = [record(p, "expand_log", 0) for p in range(10)]  # 4% of 10 = 0.4 expected
    kept = [len(balance_single(records, BalancePolicy(seed=s))) for s in range(200)]
    assert set(kept) == {0, 1} and 40 <= sum(kept) <= 120
    assert balance_single(records, BalancePolicy(seed=5)) == \
        balance_single(records, BalancePolicy(seed=5))


def test_multi_answer_drops_easy_caps_medium_keeps_difficult():
    records = corpus()
    policy = BalancePolicy(seed=2, medium_cap=50)
    multi = balance_multi(records, policy)
    occurrences = Counter(a["strategy"] for e in multi for a in e.answers)
    assert not {"logsimp", "expand_log", "operator_fission"} & set(occurrences)
    assert occurrences["loop_reorder"] == 50 and occurrences["operator_fusion"] == 50
    uncapped = balance_multi(records, BalancePolicy(seed=2, medium_cap=10**9))
    difficult = Counter(a["strategy"] for e in uncapped for a in e.answers
                        if a["difficulty"] == "difficult")
    # Capping medium answers never removes a difficult one from an entry that survives.
    assert occurrences["loop_split"] <= difficult["loop_split"]
    assert occurrences["loop_split"] > 0.8 * difficult["loop_split"]
    seen = set()
    for e in multi:
        assert 2 <= len(e.answers) <= policy.multi_max_answers
        assert {a["program_id"] for a in e.answers} == {e.program_id}
        key = (e.program_id, tuple(a["id"] for a in e.answers))
        assert key not in seen
        seen.add(key)
    assert len({e.program_id for e in multi}) > 240  # some lose entries made of capped medium
    assert max(Counter(e.program_id for e in multi).values()) <= policy.multi_max_entries


def test_balancing_is_seeded():
    records = corpus(programs=40)
    a = balance_multi(records, BalancePolicy(seed=7, medium_cap=20))
    b = balance_multi(records, BalancePolicy(seed=7, medium_cap=20))
    c = balance_multi(records, BalancePolicy(seed=8, medium_cap=20))
    assert a == b and a != c


def test_table_before_and_after_by_strategy_category_class():
    records = corpus(programs=50)
    policy = BalancePolicy(seed=0, medium_cap=30)
    single, multi = balance_single(records, policy), balance_multi(records, policy)
    table = balance_table(records, single, multi)
    rows = {r["strategy"]: r for r in table}
    assert rows["expand_log"]["verified"] == 200 and rows["expand_log"]["single"] == 8
    assert rows["expand_log"]["multi"] == 0
    assert rows["loop_reorder"]["multi"] == 30
    by_class = {r["class"]: r for r in grouped(table, "class")}
    assert list(by_class) == ["easy", "medium", "difficult"]
    assert sum(r["kept"] for r in table) == len(single) + sum(len(e.answers) for e in multi)
    assert pytest.approx(sum(r["kept_share"] for r in by_class.values()), abs=0.05) == 100
    assert by_class["difficult"]["kept_share"] > by_class["difficult"]["verified_share"]
    assert {r["category"] for r in grouped(table, "category")} == {"graph", "operator", "math"}


def test_chat_format_single_and_multi():
    r0, r1 = record(0, "loop_split", 0), record(0, "online_softmax", 3)
    single = single_example(r0)
    user, assistant = single["messages"]
    assert user["role"] == "user" and assistant["role"] == "assistant"
    assert user["content"].startswith(f"Give the following IR of Prog0: '{r0['before_leir']}'")
    assert ("'A' with the dtype torch.float32 and shape [16, 256], 'C' with the dtype "
            "torch.float32 and shape [16], and 'D' with the dtype torch.float32 and shape "
            "[16, 256]") in user["content"]
    assert "'transformed_IR', 'applied_strategy'." in user["content"]
    assert assistant["content"] == ('<think>Reasoning for loop_split #0.</think><answer>'
                                    '{"transformed_IR": "after-0-loop_split-0", '
                                    '"applied_strategy": "loop_split"}</answer>')
    from leir_egraph.dataset.balance import MultiEntry
    multi = multi_example(MultiEntry("p0", 0, (r0, r1)))
    user, assistant = multi["messages"]
    assert "at least 2 different" in user["content"]
    assert "'idx', 'transformed_IR', 'applied_strategy'." in user["content"]
    m = re.fullmatch(r"<think>(.*)</think><answer>(.*)</answer>", assistant["content"], re.S)
    assert m.group(1) == ("These 2 transformed IRs can be individually analyzed as follows: "
                          "0. Reasoning for loop_split #0.\n1. Reasoning for online_softmax #3.\n")
    assert json.loads(m.group(2)) == [
        {"idx": 0, "transformed_IR": "after-0-loop_split-0", "applied_strategy": "loop_split"},
        {"idx": 1, "transformed_IR": "after-0-online_softmax-3",
         "applied_strategy": "online_softmax"}]


def test_known_info_of_a_single_tensor_has_no_leading_and():
    sig = Signature.from_short("A:f64[2,3] -> B:f64[]")
    assert known_info(Signature(sig.inputs[:0], sig.outputs)) == \
        "'B' with the dtype torch.float64 and shape []"
