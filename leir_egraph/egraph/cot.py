"""Chain-of-thought derived from the rule that fired: its description, the concrete site, the
guard facts that held (with their arguments), the parameters bound, and how the rewritten part
is reassembled into the program. Nothing here is free text: every sentence is a template of the
rule file or of a guard, filled with values from the match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..leir.ast import Leir
from ..leir.printer import to_text
from .encoding import Term, decode
from .guards import RELATIONS
from .parameters import PARAMETERS
from .strategy import Rule, Strategy

_PARAMETER_RELATIONS = {r.name: r for r in PARAMETERS}


def fragment_text(value) -> str:
    """LEIR text of a term of any sort (lists as their concatenated elements), or a literal."""
    if not isinstance(value, tuple):
        return str(value)
    head = value[0]
    if head in ("LCons", "LNil", "BEq", "BNest", "BNil", "SCons", "SNil"):
        items = []
        while value[0] in ("LCons", "BEq", "BNest", "SCons"):
            items.append(value[1])
            value = value[2]
        if head in ("SCons", "SNil"):
            return ",".join(fragment_text(i) for i in items)
        sep = ";" if head in ("BEq", "BNest", "BNil") else ""
        return "".join(fragment_text(i) + (sep if i[0] == "MkEq" else "") for i in items)
    if head in ("CCons", "CNil"):
        parts = []
        while value[0] == "CCons":
            parts.append(value[1] + fragment_text(value[2]))
            value = value[3]
        return "".join(parts)
    node = decode(value)
    return to_text(node)


@dataclass(frozen=True)
class Site:
    """Where a rule matched: the term path, the top-level nest, and the matched text."""
    path: tuple[int, ...]
    sort: str
    nest: int | None          # top-level nest number, or None for a whole-program suffix
    first_nest: int           # first top-level nest the matched term covers
    text: str

    def to_dict(self) -> dict:
        return {"path": list(self.path), "sort": self.sort, "nest": self.nest,
                "first_nest": self.first_nest, "text": self.text}


def locate(path: tuple[int, ...], sort: str, text: str) -> Site:
    """Turn a term path into nest coordinates: every ``2`` step along the program list moves to
    the next nest; the first ``1`` step enters a nest."""
    nest = 0
    for i, step in enumerate(path):
        if step == 2:
            nest += 1
            continue
        return Site(path, sort, nest, nest, text)
    return Site(path, sort, None, nest, text)


def _changed_span(before: Leir, after: Leir) -> tuple[int, int, int, int]:
    """(first, last_before, last_after) of the nests that differ, by trimming equal ends."""
    a, b = before.nests, after.nests
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    return p, len(a) - s, p, len(b) - s


def _nest_list(indices: range) -> str:
    if len(indices) == 0:
        return "no nest"
    if len(indices) == 1:
        return f"nest {indices[0]}"
    return f"nests {indices[0]}-{indices[-1]}"


def render_fact(relation: str, args: list[str]) -> str:
    """The ``holds`` sentence of a guard or parameter relation with rendered arguments."""
    if relation in RELATIONS:
        guard, rel = RELATIONS[relation]
        return f"{guard.name.replace('_', ' ')}: " + rel.holds.format(*args)
    return _PARAMETER_RELATIONS[relation].holds.format(*args)


def atom_args(rule: Rule, bindings: dict[str, str], atom) -> list[str]:
    out = []
    for arg in atom.args:
        if arg in bindings:
            out.append(f"'{bindings[arg]}'")
        else:
            out.append(arg.strip('"'))
    return out


def render_cot(strategy: Strategy, rule: Rule, site: Site, rendered: dict[str, str],
               lhs_text: str, rhs_text: str, before: Leir, after: Leir) -> tuple[str, list[str]]:
    """The chain of thought and the list of guard-fact sentences for one transition."""
    facts = []
    for atom in rule.guard_atoms:
        if atom.relation in RELATIONS:
            facts.append(render_fact(atom.relation, atom_args(rule, rendered, atom)))
    params = [render_fact(a.relation, atom_args(rule, rendered, a))
              for a in rule.guard_atoms if a.relation in _PARAMETER_RELATIONS
              and a.relation != "Root"]
    where = ("the whole program" if site.nest is None and site.sort == "Prog" and site.first_nest == 0
             else f"the program from nest {site.first_nest} on" if site.sort == "Prog"
             else f"nest {site.nest}")
    parts = [strategy.description]
    parts.append(f"Under the given IR, rule '{rule.name}' matches {where}: '{lhs_text}'.")
    structural = [g for g in strategy.guards if g == "pattern_match"]
    if structural:
        parts.append("pattern match: the rule's pattern occurs there.")
    parts.extend(f"{f[0].upper()}{f[1:]}." for f in facts)
    if params:
        parts.append("Parameters: " + "; ".join(params) + ".")
    slots = dict(rendered, lhs=lhs_text, rhs=rhs_text)
    parts.append(re.sub(r"{(\w+)}", lambda m: slots.get(m.group(1), m.group(0)), strategy.cot))
    first, end_before, _, end_after = _changed_span(before, after)
    new_text = "".join(to_text(n) for n in after.nests[first:end_after])
    parts.append(f"Putting '{rhs_text}' in place of the matched part rewrites "
                 f"{_nest_list(range(first, end_before))} of the original into "
                 f"'{new_text}'; every other nest stays as it is.")
    return " ".join(parts), facts
