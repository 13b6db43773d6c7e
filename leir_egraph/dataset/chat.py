"""Chat-template examples in the Step-TP format (docs/REFERENCE.md §4).

Each example is one JSON line ``{"messages": [{"role": "user", "content": PROMPT},
{"role": "assistant", "content": ANSWER}]}`` -- the ``messages`` format that Hugging Face
``datasets`` loads as JSON and ms-swift takes as a custom dataset.

The prompt and answer follow the authors' text, with their slips fixed: the key is
``applied_strategy`` in the prompt as in the label (the prompt said ``applied_strategies``),
the tags are closed as ``</think>`` and ``</answer>``, a single known tensor reads without a
leading "and", and the key list has a space after "keys:".

    single answer:  <think>CoT</think><answer>{"transformed_IR": "...", "applied_strategy": "..."}</answer>
    multi answer:   <think>These 2 transformed IRs can be individually analyzed as follows:
                    0. CoT\n1. CoT\n</think><answer>[{"idx": 0, ...}, {"idx": 1, ...}]</answer>
"""

from __future__ import annotations

import json
from typing import Any

from ..leir.signature import Signature
from .balance import MultiEntry

Record = dict[str, Any]


def known_info(signature: Signature) -> str:
    """``'A' with the dtype torch.float32 and shape [16, 256], and 'C' with ...``: every known
    tensor (inputs, then outputs), as the reference's ``obtain_known_info`` writes it."""
    parts = [f"'{t.name}' with the dtype torch.{t.dtype} and shape {list(t.shape)}"
             for t in signature.inputs + signature.outputs]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + ", and " + parts[-1]


def _opening(name: str, ir: str, signature: Signature) -> str:
    return (f"Give the following IR of {name}: '{ir}', where the known variables are "
            f"{known_info(signature)}. Do not change the names, shapes or dtypes of these known "
            "variables in the IR. \n")


def single_prompt(name: str, ir: str, signature: Signature) -> str:
    return (_opening(name, ir, signature) +
            "Please give me a **numerically equivalent transformed** IR that produces exactly "
            "the same outputs for any floating-point inputs (bitwise identical), and also "
            "provide applied strategy in this transformed IR. \n Return the answer **only** as "
            "a valid JSON object with the following keys: 'transformed_IR', "
            "'applied_strategy'.")


def multi_prompt(name: str, ir: str, signature: Signature, k: int) -> str:
    return (_opening(name, ir, signature) +
            f"Please give me at least {k} different **numerically equivalent transformed** IRs "
            "that produces exactly the same outputs for any floating-point inputs (bitwise "
            "identical), and also provide applied strategy for each transformed IR. \n Return "
            "the answer list **only** as a valid JSON object, and each entry with the following "
            "keys: 'idx', 'transformed_IR', 'applied_strategy'.")


def single_label(record: Record) -> str:
    return json.dumps({"transformed_IR": record["after_leir"],
                       "applied_strategy": record["strategy"]})


def multi_label(answers: tuple[Record, ...] | list[Record]) -> str:
    return json.dumps([{"idx": i, "transformed_IR": r["after_leir"],
                        "applied_strategy": r["strategy"]} for i, r in enumerate(answers)])


def single_answer(record: Record) -> str:
    return f"<think>{record['cot']}</think><answer>{single_label(record)}</answer>"


def multi_answer(answers: tuple[Record, ...] | list[Record]) -> str:
    # Numbered from 0 so that each CoT's number is the idx of its answer.
    steps = "".join(f"{i}. {r['cot']}\n" for i, r in enumerate(answers))
    return (f"<think>These {len(answers)} transformed IRs can be individually analyzed as "
            f"follows: {steps}</think><answer>{multi_label(answers)}</answer>")


def _messages(user: str, assistant: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": user},
                         {"role": "assistant", "content": assistant}]}


def single_example(record: Record) -> dict[str, Any]:
    sig = Signature.from_json(record["signature"])
    return _messages(single_prompt(record["program"], record["before_leir"], sig),
                     single_answer(record))


def multi_example(entry: MultiEntry) -> dict[str, Any]:
    first = entry.answers[0]
    sig = Signature.from_json(first["signature"])
    return _messages(multi_prompt(first["program"], first["before_leir"], sig,
                                  len(entry.answers)),
                     multi_answer(entry.answers))


def single_meta(record: Record) -> dict[str, Any]:
    """Provenance of a single-answer line (kept out of the chat file: ms-swift reads extra
    keys such as ``label`` as training targets)."""
    return {"program_id": record["program_id"], "ids": [record["id"]],
            "strategies": [record["strategy"]], "classes": [record["difficulty"]]}


def multi_meta(entry: MultiEntry) -> dict[str, Any]:
    return {"program_id": entry.program_id, "ids": [r["id"] for r in entry.answers],
            "strategies": [r["strategy"] for r in entry.answers],
            "classes": [r["difficulty"] for r in entry.answers]}
