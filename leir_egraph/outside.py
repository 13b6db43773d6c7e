"""Outside inputs: files and code that come from the user or a model, read through one bounded
path that ends in a one-line error.

* **JSONL files** (answer files of ``leir eval``, recorded answers of ``--proposer replay``):
  :func:`jsonl_objects` reads a line at a time, never more than ``max_line_bytes`` of one line
  into memory, and refuses a line that is too long, not UTF-8, not JSON, nested too deeply for
  the JSON reader, or not a JSON object -- each as ``FILE:LINE: what`` (``FILE:LINE:COL`` for
  a byte that is not UTF-8).
* **Code** (rule providers, the model files of ``leir from-torch``): :func:`bounded` runs a
  call under a wall-clock limit and turns an overrun into :class:`OutsideInputError` with the
  caller's words (which name the file).

Every error is :class:`OutsideInputError`, a bad-input error of the command-line policy
(``leir_egraph.cli.INPUT_ERRORS``): exit status 2, one line, never a traceback.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

# One line of a JSONL file of answers, at most (an answer is far smaller: answers.MAX_ANSWER_CHARS).
MAX_LINE_BYTES = 8 << 20
# Nesting depth the JSON reader follows: far beyond any answer, far below the C stack's reach.
MAX_JSON_DEPTH = 2000

T = TypeVar("T")


class OutsideInputError(ValueError):
    """An outside input that cannot be used; the message names the file (and line)."""


class JsonTooDeep(OutsideInputError):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH`."""


@contextmanager
def _json_depth_limit():
    """The JSON reader recurses once per nesting level: bound it here, whatever the process's
    recursion limit (the entry points raise it for deep programs)."""
    previous = sys.getrecursionlimit()
    frames = 0
    frame = sys._getframe()
    while frame is not None:
        frames, frame = frames + 1, frame.f_back
    sys.setrecursionlimit(min(previous, frames + MAX_JSON_DEPTH))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def json_value(text: str | bytes, where: str) -> Any:
    """``json.loads(text)`` with a bounded depth; errors name ``where``."""
    try:
        with _json_depth_limit():
            return json.loads(text)
    except RecursionError:
        raise JsonTooDeep(f"{where}: JSON nested more than {MAX_JSON_DEPTH} levels "
                                "deep") from None
    except json.JSONDecodeError as err:
        raise OutsideInputError(f"{where}: not JSON: {err.msg} (column {err.colno})") from None


def unreadable(name: str, err: OSError) -> str:
    """``NAME: why`` for a file that cannot be opened or read (one wording for every reader)."""
    if isinstance(err, FileNotFoundError):
        return f"{name}: no such file"
    if isinstance(err, IsADirectoryError):
        return f"{name}: is a folder, not a file"
    if isinstance(err, PermissionError):
        return f"{name}: permission denied"
    return f"{name}: cannot read: {err.strerror or err}"


def open_input(path: str | Path):
    """``path`` opened for reading bytes, or a one-line error saying why it cannot be."""
    try:
        return open(path, "rb")
    except OSError as err:
        raise OutsideInputError(unreadable(str(path), err)) from None


def jsonl_objects(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES
                  ) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each non-empty line of the JSONL file at ``path``."""
    name = str(path)
    with open_input(path) as f:
        n = 0
        while True:
            try:
                raw = f.readline(max_line_bytes + 1)
            except OSError as err:
                raise OutsideInputError(unreadable(name, err)) from None
            if not raw:
                return
            n += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise OutsideInputError(f"{name}:{n}: line longer than {max_line_bytes} bytes")
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise OutsideInputError(f"{name}:{n}:{err.start + 1}: not UTF-8 text (byte "
                                        f"0x{raw[err.start]:02x})") from None
            if not text.strip():
                continue
            value = json_value(text, f"{name}:{n}")
            if not isinstance(value, dict):
                raise OutsideInputError(f"{name}:{n}: expected a JSON object, got "
                                        f"{_json_kind(value)}")
            yield n, value


def _json_kind(value: Any) -> str:
    return {list: "a list", str: "a string", type(None): "null", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def bounded(call: Callable[[], T], seconds: float, overrun: str) -> T:
    """``call()``, stopped after ``seconds`` of wall-clock time with
    ``OutsideInputError(overrun)`` (its ``__cause__``'s traceback reaches the line the call was
    stopped at). The limit is SIGALRM (POSIX, main thread; elsewhere the
    call runs unbounded, and the caller's own process limit applies). An outer
    :func:`leir_egraph.cli.time_limit` that expires first still wins."""
    from .cli import TimeLimit, time_limit
    limit = None
    try:
        with time_limit(seconds) as limit:
            return call()
    except TimeLimit as fired:
        if limit is None or fired.limit is not limit:
            raise
        raise OutsideInputError(overrun) from fired   # the cause: where the call was stopped


__all__ = ["MAX_LINE_BYTES", "MAX_JSON_DEPTH", "JsonTooDeep", "OutsideInputError", "bounded", "json_value",
           "jsonl_objects", "open_input", "unreadable"]
