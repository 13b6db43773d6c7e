"""Canonical LEIR text straight from terms (encoding.py's tuples), without decoding them.

``TermText()(term) == to_text(decode(term))`` for every term of a non-list sort (a program, a
nest, a loop, an equation, a variable, an expression or a subscript): the same precedence
ladder and parenthesisation as ``leir/printer.py``, read off the terms' heads.

A ``TermText`` keeps the text of every term it printed, by object identity, and builds a term's
text from its children's: enumeration prints thousands of new nests of one program that share
nearly all their subterms with the program and with each other (``replace_at`` rebuilds only
the path to the replaced subterm, and ``from_termdag`` shares the replacements' subterms), so
each new nest costs the few terms that are new in it.

>>> from leir_egraph.leir import parse
>>> from .encoding import encode
>>> TermText()(encode(parse("B^{4}_{tx=0}[C^{f32,g}_{tx}=(A^{f32,g}_{tx}+1)*-(-2);];")))
'B^{4}_{tx=0}[C^{f32,g}_{tx}=(A^{f32,g}_{tx}+1)*-(-2);];'
"""

from __future__ import annotations

from ..leir.printer import _AND, _ATOM, _BIN_PREC, _CMP, _NEG, _OR, _POW
from .encoding import _UNBIN, _UNCALL, _UNIBIN, _UNLOGIC, Term, kept_suffixes

_OP = {**_UNBIN, **_UNIBIN, **_UNLOGIC}
# a head's binding strength (printer._prec of the node it decodes to); ATOM when absent
_PREC = {**{h: _BIN_PREC[op] for h, op in {**_UNBIN, **_UNIBIN}.items()},
         "Neg": _NEG, "Cmp": _CMP, "And": _AND, "Or": _OR}


class TermText:
    """A printer of terms with a memo of every term's text (see the module's docstring). The
    memo holds the terms it printed (their ids stay theirs); one per program's enumeration."""

    def __init__(self):
        self._memo: dict[int, tuple[Term, str]] = {}

    def __call__(self, term: Term) -> str:
        hit = self._memo.get(id(term))
        if hit is not None and hit[0] is term:
            return hit[1]
        make = _TEXT.get(term[0])
        if make is None:
            raise ValueError(f"not a LEIR term of a printable sort: {term[0]}")
        text = make(term, self)
        self._memo[id(term)] = (term, text)
        return text

    def items(self, cell: Term) -> str:
        """The text of a loop list or a body (``LCons``/``BEq``/``BNest`` ... ``LNil``/``BNil``)
        from ``cell`` on, each suffix's kept: a new nest shares its loops and the body after
        its changed item with the nest it was made from."""
        return kept_suffixes(cell, self._memo, "", self._item)

    def _item(self, cell: Term, rest: str) -> str:
        return self(cell[1]) + (";" if cell[0] == "BEq" else "") + rest

    def operand(self, term: Term, needed: int, strict: bool) -> str:
        """``term``'s text, parenthesised when it binds looser than ``needed`` (or equally,
        if ``strict``): printer._wrap."""
        p = _PREC.get(term[0], _ATOM)
        text = self(term)
        return "(" + text + ")" if p < needed or (strict and p == needed) else text


def _program(t: Term, text: TermText) -> str:
    parts = []
    while t[0] == "PCons":
        parts.append(text(t[1]))
        t = t[2]
    return "".join(parts)


def _nest(t: Term, text: TermText) -> str:
    return text.items(t[1]) + "[" + text.items(t[2]) + "];"


def _var(t: Term, text: TermText) -> str:
    head = f"{t[1]}^{{{t[2]},{t[3]}}}"
    subs, items = t[4], []
    while subs[0] == "SCons":
        items.append(text(subs[1]))
        subs = subs[2]
    return head + "_{" + ",".join(items) + "}" if items else head


def _infix(t: Term, text: TermText) -> str:
    p = _PREC[t[0]]
    return text.operand(t[1], p, False) + _OP[t[0]] + text.operand(t[2], p, True)


def _pow(t: Term, text: TermText) -> str:  # right-associative: a**b**c == a**(b**c)
    return text.operand(t[1], _POW, True) + "**" + text.operand(t[2], _NEG, False)


def _neg(t: Term, text: TermText) -> str:
    # printer._neg: nested negation is parenthesised, a power operand is not
    if t[1][0] == "Neg":
        return "-(" + text(t[1]) + ")"
    return "-" + text.operand(t[1], _NEG, False)


def _compare(t: Term, text: TermText) -> str:
    parts, tail = [text.operand(t[1], _CMP, True)], t[2]
    while tail[0] == "CCons":
        parts += [tail[1], text.operand(tail[2], _CMP, True)]
        tail = tail[3]
    return "".join(parts)


_TEXT = {
    "PCons": _program, "PNil": _program,
    "MkNest": _nest,
    "MkLoop": lambda t, text: f"{t[1]}^{{{t[2]}}}_{{{t[3]}=0}}",
    "MkEq": lambda t, text: text(t[1]) + "=" + text(t[2]),
    "MkVar": _var,
    "MkVarEmpty": lambda t, text: f"{t[1]}^{{{t[2]},{t[3]}}}_{{}}",
    "Read": lambda t, text: text(t[1]), "IRead": lambda t, text: text(t[1]),
    "IConst": lambda t, text: str(t[1]),
    "IName": lambda t, text: t[1],
    "Num": lambda t, text: t[1],
    "Idx": lambda t, text: t[1],
    "Neg": _neg,
    **{h: _infix for h in (*_UNIBIN, *_UNLOGIC, *(h for h in _UNBIN if h != "Pow"))},
    "Pow": _pow,
    **{h: (lambda fn: lambda t, text: fn + "(" + ",".join(map(text, t[1:])) + ")")(fn)
       for h, fn in _UNCALL.items()},
    "Ite": lambda t, text: ("if_then_else(" + text(t[1]) + "," + text(t[2]) + ","
                            + text(t[3]) + ")"),
    "Cmp": _compare,
}
