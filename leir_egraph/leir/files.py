"""LEIR programs and signatures read from files, with one-line errors that name the file.

Text files are UTF-8; a leading byte-order mark is dropped (some editors write one, and it
would otherwise be an invisible first character that does not parse). ``-`` reads standard
input.

    >>> read_signature("missing.sig.json")                      # doctest: +SKIP
    LeirFileError: missing.sig.json: no such file
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .parser import LeirSyntaxError, parse
from .program import Program
from .signature import Signature


class LeirFileError(ValueError):
    """A file that cannot be used: missing, unreadable, not UTF-8, not JSON, not a valid
    signature, or LEIR text that does not parse. The message starts with the file name (and
    ``line:col`` where one applies)."""


def in_file(path: str | Path, err: Exception) -> LeirFileError:
    """A syntax or validation error of the text of ``path``, as ``FILE:line:col: message``
    (``FILE: message`` when it has no position)."""
    if getattr(err, "line", None) is not None:
        return LeirFileError(f"{path}:{err}")
    return LeirFileError(f"{path}: {err}")


def read_text(path: str | Path) -> str:
    """The text of ``path`` (``-``: standard input) as UTF-8, without a byte-order mark."""
    name = str(path)
    try:
        data = sys.stdin.buffer.read() if name == "-" else Path(path).read_bytes()
    except OSError as err:
        from ..outside import unreadable
        raise LeirFileError(unreadable(name, err)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise LeirFileError(f"{name}:{line}:{column}: not UTF-8 text (byte "
                            f"0x{data[err.start]:02x})") from None


def read_signature(path: str | Path) -> Signature:
    """The signature JSON file at ``path`` (docs/LEIR.md section 2)."""
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise LeirFileError(f"{path}:{err.lineno}:{err.colno}: not JSON: {err.msg}") from None
    try:
        return Signature.from_dict(data)
    except ValueError as err:
        raise LeirFileError(f"{path}: bad signature: {err}") from None


def read_program(path: str | Path, signature: Signature, name: str | None = None) -> Program:
    """Parse the LEIR file at ``path`` (no validation: ``check`` does that)."""
    text = read_text(path)
    try:
        leir = parse(text)
    except LeirSyntaxError as err:
        raise in_file(path, err) from None
    return Program(leir, signature, name if name is not None else Path(str(path)).stem)
