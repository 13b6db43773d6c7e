"""Reading a model's answer: the JSON between ``<answer>`` and ``</answer>`` (docs/REFERENCE.md
§4-§5), as a list of ``(transformed IR, claimed strategy)``.

The paper's label key is ``applied_strategy``; its prompt asked for ``applied_strategies`` (a
list or a string), so both are read. A multi-answer is a JSON list of such objects (``idx``
is ignored). The reference repaired answers cut off by the token limit; here an answer whose
JSON does not close is completed by closing its open strings, lists and objects, and one that
still does not parse is an ``AnswerError`` with the reason -- a failed sample, never a crash.

    >>> parse_answer('<think>..</think><answer>{"transformed_IR": "L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];", "applied_strategy": "loop_split"}</answer>')
    [('L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];', 'loop_split')]
"""

from __future__ import annotations

import ast
import re
from typing import Iterator


class AnswerError(ValueError):
    """An answer that carries no usable transformed IR; the message says why."""


_CLOSE = re.compile(r"</answer>|<\\answer>|<\\\\answer>", re.IGNORECASE)


# An answer longer than this is refused before anything parses it: a LEIR program of the
# paper's sizes is a few KB, and parsing costs time and memory in proportion (docs/SEARCH.md).
MAX_ANSWER_CHARS = 1 << 20


def jsonl_rows(path) -> "Iterator[tuple[int, dict]]":
    """``(line number, object)`` of each non-empty line of a JSONL file of answers, read
    through the bounded path of ``leir_egraph.outside`` (errors name ``file:line``)."""
    from ..outside import jsonl_objects
    return jsonl_objects(path)


def answer_text(text: str) -> str:
    """The text between the last ``<answer>`` and the following ``</answer>`` (or the end:
    answers cut off by the token limit keep what they have)."""
    if not isinstance(text, str) or not text.strip():
        raise AnswerError("empty answer")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(f"the answer is {len(text)} characters long, over the limit of "
                          f"{MAX_ANSWER_CHARS}")
    start = text.lower().rfind("<answer>")
    if start < 0:
        raise AnswerError("no <answer> tag in the answer")
    body = text[start + len("<answer>"):]
    close = _CLOSE.search(body)
    return (body[:close.start()] if close else body).strip()


def _close_json(text: str) -> str:
    """Close the strings, lists and objects a truncated JSON text left open."""
    stack, in_string, escape = [], False, False
    for ch in text:
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}" and stack:
            stack.pop()
    return text + ('"' if in_string else "") + "".join(reversed(stack))


def _load(body: str):
    from ..outside import JsonTooDeep, OutsideInputError, json_value
    for attempt in (body, _close_json(body)):
        try:
            return json_value(attempt, "the answer")
        except JsonTooDeep as err:
            raise AnswerError(str(err)) from None
        except OutsideInputError:
            pass
        try:
            return ast.literal_eval(attempt)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    raise AnswerError(f"the answer is not valid JSON: {body[:80]!r}")


def _strategy(entry: dict) -> str:
    value = entry.get("applied_strategy", entry.get("applied_strategies", ""))
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return str(value).strip()


def parse_answer(text: str) -> list[tuple[str, str]]:
    """``[(transformed_IR, strategy), ...]`` of one answer (one entry for a single answer).
    Raises ``AnswerError`` naming what is wrong."""
    data = _load(answer_text(text))
    entries = data if isinstance(data, list) else [data]
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise AnswerError(f"answer entry {i} is not a JSON object")
        ir = entry.get("transformed_IR")
        if not isinstance(ir, str) or not ir.strip():
            raise AnswerError(f"answer entry {i} has no 'transformed_IR' string")
        out.append((ir.strip(), _strategy(entry)))
    if not out:
        raise AnswerError("the answer list is empty")
    return out


__all__ = ["AnswerError", "MAX_ANSWER_CHARS", "answer_text", "parse_answer", "jsonl_rows"]
