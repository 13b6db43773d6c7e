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

A variant (``variants.py``) may write the IRs as TVMScript TIR (``representation="tir"``: the
records' ``before_tir``/``after_tir``) and leave out the ``<think>`` part (``cot=False``);
nothing else of the text changes.
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


BITWISE = "exactly the same outputs for any floating-point inputs (bitwise identical)"


def preserves(records) -> str:
    """What the steps of ``records`` all preserve, as the prompt promises it: bitwise identical
    outputs only when every step's strategy declares it (``exact``) and its verification found
    every output bit equal; otherwise the same outputs up to the largest declared rounding
    bound, which holds at the values a step rewrites (the outputs computed from them: the
    verifier's tolerance); "finite" (or "moderate": finite, far from overflow) inputs when a strategy's guards
    assume them (``domain``)."""
    records = list(records)
    domains = {r.get("domain") for r in records}
    inputs = ("moderate finite" if "bounded" in domains else
              "finite" if "finite" in domains else "any")
    bounds = [r.get("exact") or "bitwise" for r in records]
    ulps = max((int(b.split()[0]) for b in bounds if b != "bitwise"), default=0)
    if ulps == 0 and all(r.get("bitwise") is not False for r in records):
        return BITWISE if inputs == "any" else BITWISE.replace("any floating",
                                                               f"any {inputs} floating")
    if not ulps:   # bitwise strategies whose verification found a difference (-0 for +0)
        return ("the same outputs up to rounding (within the last place of the exact result) "
                f"for {inputs} floating-point inputs")
    rounding = f"{ulps} ULP"
    if any(b.endswith("of values") for b in bounds):   # ULPs at the largest value computed
        rounding += " at the magnitude of the largest value the program computes"
    # the bound holds where the rewrite acts (docs/RULES.md section 10); what the program
    # computes from those values afterwards is held to the verifier's tolerance
    return (f"the same outputs up to rounding (every value the transformation rewrites within "
            f"{rounding} of the exact result, the outputs computed from them within float "
            f"tolerance) for {inputs} floating-point inputs")


def single_prompt(name: str, ir: str, signature: Signature, promise: str = BITWISE) -> str:
    return (_opening(name, ir, signature) +
            "Please give me a **numerically equivalent transformed** IR that produces "
            f"{promise}, and also "
            "provide applied strategy in this transformed IR. \n Return the answer **only** as "
            "a valid JSON object with the following keys: 'transformed_IR', "
            "'applied_strategy'.")


def multi_prompt(name: str, ir: str, signature: Signature, k: int,
                 promise: str = BITWISE) -> str:
    return (_opening(name, ir, signature) +
            f"Please give me at least {k} different **numerically equivalent transformed** IRs "
            f"that produces {promise}, and also provide applied strategy for each transformed "
            "IR. \n Return "
            "the answer list **only** as a valid JSON object, and each entry with the following "
            "keys: 'idx', 'transformed_IR', 'applied_strategy'.")


def _ir(record: Record, side: str, representation: str) -> str:
    """The program of one side (``before``/``after``) of a record in a representation."""
    return record[f"{side}_{representation}"]


def single_label(record: Record, representation: str = "leir") -> str:
    return json.dumps({"transformed_IR": _ir(record, "after", representation),
                       "applied_strategy": record["strategy"]})


def multi_label(answers: tuple[Record, ...] | list[Record], representation: str = "leir") -> str:
    return json.dumps([{"idx": i, "transformed_IR": _ir(r, "after", representation),
                        "applied_strategy": r["strategy"]} for i, r in enumerate(answers)])


def single_answer(record: Record, representation: str = "leir", cot: bool = True) -> str:
    think = f"<think>{record['cot']}</think>" if cot else ""
    return f"{think}<answer>{single_label(record, representation)}</answer>"


def multi_answer(answers: tuple[Record, ...] | list[Record], representation: str = "leir",
                 cot: bool = True) -> str:
    # Numbered from 0 so that each CoT's number is the idx of its answer.
    steps = "".join(f"{i}. {r['cot']}\n" for i, r in enumerate(answers))
    think = (f"<think>These {len(answers)} transformed IRs can be individually analyzed as "
             f"follows: {steps}</think>" if cot else "")
    return f"{think}<answer>{multi_label(answers, representation)}</answer>"


def _messages(user: str, assistant: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": user},
                         {"role": "assistant", "content": assistant}]}


def single_example(record: Record, representation: str = "leir", cot: bool = True
                   ) -> dict[str, Any]:
    sig = Signature.from_json(record["signature"])
    return _messages(single_prompt(record["program"], _ir(record, "before", representation),
                                   sig, preserves([record])),
                     single_answer(record, representation, cot))


def multi_example(entry: MultiEntry, representation: str = "leir", cot: bool = True
                  ) -> dict[str, Any]:
    first = entry.answers[0]
    sig = Signature.from_json(first["signature"])
    return _messages(multi_prompt(first["program"], _ir(first, "before", representation), sig,
                                  len(entry.answers), preserves(entry.answers)),
                     multi_answer(entry.answers, representation, cot))


def single_meta(record: Record, **where: str) -> dict[str, Any]:
    """Provenance of a single-answer line (kept out of the chat file: ms-swift reads extra
    keys such as ``label`` as training targets); ``where``: the split and variant it is in."""
    return {"program_id": record["program_id"], "ids": [record["id"]],
            "strategies": [record["strategy"]], "classes": [record["difficulty"]], **where}


def multi_meta(entry: MultiEntry, **where: str) -> dict[str, Any]:
    return {"program_id": entry.program_id, "ids": [r["id"] for r in entry.answers],
            "strategies": [r["strategy"] for r in entry.answers],
            "classes": [r["difficulty"] for r in entry.answers], **where}
