"""Chain-of-thought derived from the rule that fired: its description, the concrete site, the
guard facts that held (with their arguments), the parameters bound, and how the rewritten part
is reassembled into the program. Nothing here is free text: every sentence is a template of the
rule file or of a guard, filled with values from the match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..leir.analysis import changed_span
from ..leir.printer import to_text
from .encoding import decode
from .strategy import Rule, Strategy


def fragment_text(value, decoder=decode) -> str:
    """LEIR text of a term of any sort (lists as their concatenated elements), or a literal.
    ``decoder`` may be a memoising :class:`~leir_egraph.egraph.encoding.Decoder`."""
    if not isinstance(value, tuple):
        return str(value)
    head = value[0]
    if head in ("LCons", "LNil", "BEq", "BNest", "BNil", "SCons", "SNil"):
        items = []
        while value[0] in ("LCons", "BEq", "BNest", "SCons"):
            items.append(value[1])
            value = value[2]
        if head in ("SCons", "SNil"):
            return ",".join(fragment_text(i, decoder) for i in items)
        sep = ";" if head in ("BEq", "BNest", "BNil") else ""
        return "".join(fragment_text(i, decoder) + (sep if i[0] == "MkEq" else "") for i in items)
    if head in ("CCons", "CNil"):
        parts = []
        while value[0] == "CCons":
            parts.append(value[1] + fragment_text(value[2], decoder))
            value = value[3]
        return "".join(parts)
    return to_text(decoder(value))


@dataclass(frozen=True)
class Site:
    """Where a rule matched: the term path, the matched sort, the top-level nest (``None`` for a
    program suffix), the matched text, and the text of the enclosing equation if any."""
    path: tuple[int, ...]
    sort: str
    nest: int | None
    first_nest: int
    text: str
    equation: str = ""

    def to_dict(self) -> dict:
        return {"path": list(self.path), "sort": self.sort, "nest": self.nest,
                "first_nest": self.first_nest, "text": self.text, "equation": self.equation}


def locate(program_term, path: tuple[int, ...], sort: str, text: str, decoder=decode) -> Site:
    """Turn a term path into nest coordinates: every ``2`` step along the program list moves to
    the next nest; the first ``1`` step enters a nest. Also finds the enclosing equation."""
    nest, term, entered, equation = 0, program_term, False, ""
    for step in path:
        if not entered and step == 2:
            nest += 1
        elif not entered:
            entered = True
        term = term[step]
        if isinstance(term, tuple) and term[0] == "MkEq" and sort not in ("Eqn",):
            equation = fragment_text(term, decoder)
    if not entered:
        return Site(path, sort, None, nest, text)
    return Site(path, sort, nest, nest, text, equation)


def _nest_list(indices: range) -> str:
    if len(indices) == 0:
        return "no nest"
    if len(indices) == 1:
        return f"nest {indices[0]}"
    return f"nests {indices[0]}-{indices[-1]}"


def atom_args(bindings: dict[str, str], atom) -> list[str]:
    out = []
    for arg in atom.args:
        if arg in bindings:
            out.append(f"'{bindings[arg]}'")
        else:
            out.append(arg.strip('"'))
    return out


def render_cot(strategy: Strategy, rule: Rule, site: Site, rendered: dict[str, str],
               lhs_text: str, rhs_text: str, before, after, *, same=None, text=to_text
               ) -> tuple[str, list[str]]:
    """The chain of thought and the list of guard-fact sentences for one transition.

    ``before`` and ``after`` are the two programs' ``Leir``, or their top-level nests in any form
    that ``same`` compares and ``text`` prints (enumeration passes the nest terms, compared by
    identity before their decoded ASTs, and a printer that prints each nest term once)."""
    vocab = strategy.vocabulary
    facts = [vocab.holds(a.relation, atom_args(rendered, a))
             for a in rule.guard_atoms if a.relation in vocab.relations]
    params = [vocab.holds(a.relation, atom_args(rendered, a))
              for a in rule.guard_atoms if a.relation in vocab.parameters
              and a.relation != "Root"]
    before, after = getattr(before, "nests", before), getattr(after, "nests", after)
    first, end_before, _, end_after = changed_span(before, after, same)
    old_text = "".join(text(n) for n in before[first:end_before])
    new_text = "".join(text(n) for n in after[first:end_after])
    changed = _nest_list(range(first, end_before))
    parts = [strategy.description]
    if site.nest is None:
        parts.append(f"Under the given IR, rule '{rule.name}' matches the program from nest "
                     f"{site.first_nest} on and changes {changed}: '{old_text}'.")
    elif site.equation:
        parts.append(f"Under the given IR, rule '{rule.name}' matches '{lhs_text}' in the "
                     f"equation '{site.equation}' of nest {site.nest}.")
    else:
        parts.append(f"Under the given IR, rule '{rule.name}' matches nest {site.nest}: "
                     f"'{lhs_text}'.")
    if "pattern_match" in strategy.guards:
        parts.append("Pattern match: the rule's pattern occurs there.")
    parts.extend(f"{f[0].upper()}{f[1:]}." for f in facts)
    if params:
        parts.append("Parameters: " + "; ".join(params) + ".")
    slots = dict(rendered, lhs=lhs_text, rhs=rhs_text)
    parts.append(re.sub(r"{(\w+)}", lambda m: slots.get(m.group(1), m.group(0)),
                        rule.cot or strategy.cot))
    if site.nest is None:
        verb = "becomes" if len(range(first, end_before)) == 1 else "become"
        parts.append(f"Reassembled, {changed} of the original {verb} '{new_text}'; every other "
                     "nest stays as it is.")
    else:
        parts.append(f"Putting '{rhs_text}' in its place turns {changed} into '{new_text}'; "
                     "every other nest stays as it is.")
    return " ".join(parts), facts
