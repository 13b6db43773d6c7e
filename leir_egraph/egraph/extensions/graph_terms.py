"""egglog text for the terms the graph-level facts carry (lists of loops, subscripts, nests)."""

from __future__ import annotations

from ..encoding import encode, encode_value, to_egglog


def loops_term(loops) -> str:
    text = "(LNil)"
    for loop in reversed(loops):
        text = f"(LCons {to_egglog(encode(loop))} {text})"
    return text


def subs_term(subscripts) -> str:
    text = "(SNil)"
    for sub in reversed(subscripts):
        text = f"(SCons {to_egglog(encode(sub))} {text})"
    return text


def nests_body_term(nests) -> str:
    """A Body whose items are the given nests."""
    text = "(BNil)"
    for nest in reversed(nests):
        text = f"(BNest {to_egglog(encode(nest))} {text})"
    return text


def expr_term(expr) -> str:
    return to_egglog(encode_value(expr))


def quoted(text: str) -> str:
    return '"' + text + '"'
