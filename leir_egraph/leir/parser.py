"""Parse LEIR text into the AST with lark (grammar: ``leir.lark``).

>>> parse("B^{4}_{tx=0}[C^{f32,g}_{tx}=max(A^{f32,g}_{tx},0);];").nests[0].loops[0].index
'tx'

Errors are :class:`LeirSyntaxError` with ``line``, ``column``, the offending text and what was
expected there.
"""

from __future__ import annotations

import threading
import unicodedata
from functools import lru_cache
from pathlib import Path

import lark

from .ast import (DTYPE_CODES, FUNCTIONS_1, KEYWORDS, RESERVED_TENSOR_LETTERS, SCOPES, Bin, Call,
                  Compare, Equation, IBin, IConst, Idx, IfThenElse, IName, Leir, Logic, Loop,
                  LoopNest, Neg, Num, Var)
from .limits import depth_problem

GRAMMAR_FILE = Path(__file__).with_name("leir.lark")

_EXPECTED_WORDS = {
    "LOOP_KIND": "a loop kind (L, P, V, U or B)", "TENSOR": "a tensor name", "DTYPE": "a dtype code",
    "SCOPE": "a scope (g, s or l)", "INDEX": "an index name", "INT": "an integer",
    "NUMBER": "a number", "INF": "inf", "FUNC1": "a function", "FUNC2": "max or min",
    "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'",
    "SEMICOLON": "';'", "COMMA": "','", "EQUAL": "'='", "CIRCUMFLEX": "'^'", "_": "'_'",
    "UNDERSCORE": "'_'", "CMPOP": "a comparison", "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'",
    "FLOORDIV": "'//'", "PERCENT": "'%'", "POW": "'**'", "IF_THEN_ELSE": "if_then_else",
    "AMPERSAND": "'&'", "VBAR": "'|'", "$END": "end of input",
}


class LeirSyntaxError(ValueError):
    """A LEIR text that does not parse, with ``line``/``column`` (1-based) and the source line."""

    def __init__(self, message: str, line: int, column: int, text: str = ""):
        self.message, self.line, self.column = message, line, column
        self.source_line = text.splitlines()[line - 1] if text and 0 < line <= len(text.splitlines()) else ""
        super().__init__(f"{line}:{column}: {message}")

    def render(self, filename: str = "<leir>") -> str:
        """``FILE:line:col: message`` plus the source line with a caret (long lines clipped)."""
        head = f"{filename}:{self.line}:{self.column}: {self.message}"
        if not self.source_line:
            return head
        start = max(0, self.column - 40)
        snippet = self.source_line[start:self.column + 40]
        return f"{head}\n  {snippet}\n  {' ' * (self.column - 1 - start)}^"


def _describe_expected(names) -> str:
    words = sorted({_EXPECTED_WORDS.get(n, repr(n)) for n in names})
    return ", ".join(words[:8]) + (", ..." if len(words) > 8 else "")


class _Builder(lark.Transformer):
    """lark parse tree -> AST, checking the lexical rules a grammar cannot express."""

    def __init__(self, text: str):
        super().__init__()
        self._text = text

    def _fail(self, message: str, token) -> None:
        raise LeirSyntaxError(message, token.line, token.column, self._text)

    # ---- program structure
    def start(self, nests):
        return Leir(tuple(nests))

    def nest(self, items):
        loops = tuple(i for i in items if isinstance(i, Loop))
        body = tuple(i for i in items if not isinstance(i, Loop))
        return LoopNest(loops, body, pos=loops[0].pos)

    def loop(self, items):
        kind, extent, index, start = items
        if _integer(start) != 0:
            self._fail(f"loop start must be 0 (LEIR loops run from 0 to extent-1), got "
                       f"'{_integer(start)}'", start)
        if _integer(extent) < 1:
            self._fail(f"loop extent must be at least 1, got {_integer(extent)}", extent)
        self._check_index_name(index)
        return Loop(str(kind), _integer(extent), str(index), pos=(kind.line, kind.column))

    def equation(self, items):
        target, value = items
        return Equation(target, value, pos=target.pos)

    # ---- variables
    def var(self, items):
        name, dtype, scope = items[:3]
        subs = tuple(items[3]) if len(items) > 3 else ()
        empty = len(items) > 3 and not subs
        if name[0] in RESERVED_TENSOR_LETTERS:
            self._fail(f"tensor name '{name}' starts with reserved letter '{name[0]}' "
                       "(L P V B U name loop kinds and T is kept for TVM); rename the tensor", name)
        if str(dtype) not in DTYPE_CODES:
            self._fail(f"unknown dtype '{dtype}'; expected one of {', '.join(DTYPE_CODES)}", dtype)
        if str(scope) not in SCOPES:
            self._fail(f"unknown scope '{scope}'; expected g (global), s (shared) or l (local)", scope)
        return Var(str(name), str(dtype), str(scope), subs, pos=(name.line, name.column),
                   empty_subscript=empty)

    def subscripts(self, items):
        return items

    # ---- index arithmetic
    def iname(self, items):
        (token,) = items
        self._check_index_name(token)
        return IName(str(token), pos=(token.line, token.column))

    def iconst(self, items):
        return IConst(int(items[0]))

    def ibinary(self, items):
        lhs, op, rhs = items
        return IBin(str(op), lhs, rhs)

    # ---- value expressions
    def number(self, items):
        return Num(str(items[0]))

    def index_value(self, items):
        (token,) = items
        self._check_index_name(token)
        return Idx(str(token), pos=(token.line, token.column))

    def binary(self, items):
        lhs, op, rhs = items
        return Bin(str(op), lhs, rhs)

    def pow(self, items):
        return Bin("**", items[0], items[2])

    def neg(self, items):
        return Neg(items[1])

    def call(self, items):
        fn = str(items[0])
        args = tuple(items[1:])
        expected = 1 if fn in FUNCTIONS_1 else 2
        if len(args) != expected:
            self._fail(f"{fn} takes {expected} argument(s), got {len(args)}", items[0])
        return Call(fn, args)

    def if_then_else(self, items):
        return IfThenElse(*items[1:])

    def compare(self, items):
        return Compare(tuple(items[0::2]), tuple(str(op) for op in items[1::2]))

    def logic_and(self, items):
        return Logic("&", items[0], items[1])

    def logic_or(self, items):
        return Logic("|", items[0], items[1])

    # ---- lexical rules for index names
    def _check_index_name(self, token) -> None:
        name = str(token)
        if name in KEYWORDS:
            self._fail(f"'{name}' is a keyword, not an index name", token)
        if "e" in name:
            self._fail(f"index name '{name}' contains 'e', which LEIR reserves for number "
                       "exponents (1e-05); choose another name", token)
        if name[0] in "tb" and (len(name) < 2 or name[1] not in "xyz"):
            self._fail(f"bad binding name '{name}': names starting with '{name[0]}' are GPU "
                       f"bindings and must continue with x, y or z (e.g. '{name[0]}x', "
                       f"'{name[0]}ya')", token)
        if name[0] in "vxyz":
            self._fail(f"index name '{name}' starts with '{name[0]}'; ordinary index names avoid "
                       "t b v x y z e (use a, c, d, f, ...)", token)


def _integer(token) -> int:
    return int("".join(str(token).split()))  # "- 4" -> -4


def _describe_character(char: str) -> str:
    """``'x'`` for visible ASCII; the code point and Unicode name for anything else, which may
    be invisible (a byte-order mark, a zero-width or non-breaking space)."""
    if char.isascii() and char.isprintable() and not char.isspace():
        return f"'{char}'"
    return f"character U+{ord(char):04X} ({unicodedata.name(char, 'unnamed').lower()})"


_BUILDER = _Builder("")
_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    # The transformer runs inline with the LALR parser: no parse tree is ever built.
    return lark.Lark(GRAMMAR_FILE.read_text(), parser="lalr", lexer="contextual",
                     maybe_placeholders=False, transformer=_BUILDER)


def parse(text: str) -> Leir:
    """Parse LEIR text into a :class:`Leir` AST, or raise :class:`LeirSyntaxError`."""
    parser = _parser()
    try:
        with _LOCK:
            _BUILDER._text = text
            leir = parser.parse(text)
    except lark.exceptions.UnexpectedCharacters as err:
        char = text[err.pos_in_stream]
        if char.isascii() and char.isprintable():
            bad = text[err.pos_in_stream:err.pos_in_stream + 12].split("\n")[0]
            what = f"text '{bad}'"
        else:
            what = _describe_character(char)
        raise LeirSyntaxError(f"unexpected {what}; expected "
                              f"{_describe_expected(err.allowed or [])}",
                              err.line, err.column, text) from None
    except lark.exceptions.UnexpectedToken as err:
        if err.token.type == "$END":
            lines = text.splitlines() or [""]
            line, column = len(lines), len(lines[-1]) + 1
            what = "end of input"
        else:
            line, column, what = err.token.line, err.token.column, f"'{err.token}'"
        raise LeirSyntaxError(f"unexpected {what}; expected {_describe_expected(err.expected)}",
                              line, column, text) from None
    except lark.exceptions.UnexpectedEOF as err:
        lines = text.splitlines() or [""]
        raise LeirSyntaxError(f"unexpected end of input; expected {_describe_expected(err.expected)}",
                              len(lines), len(lines[-1]) + 1, text) from None
    too_deep = depth_problem(leir)
    if too_deep is not None:
        message, pos = too_deep
        line, column = pos or (1, 1)
        raise LeirSyntaxError(message, line, column, text)
    return leir

