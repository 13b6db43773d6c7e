"""docs/STRATEGIES.md, generated from the rule files: per strategy its category, guards,
difficulty inputs and class, description, and its first example as before -> after.

    leir strategies --markdown > docs/STRATEGIES.md
"""

from __future__ import annotations

from collections import Counter

from ..leir.parser import parse
from ..leir.printer import to_text
from .guards import GUARDS
from .strategy import CATEGORIES, Strategy


def strategies_markdown(strategies: list[Strategy]) -> str:
    counts = Counter(s.category for s in strategies)
    lines = [
        "# The strategies",
        "",
        "Generated from the rule files by `leir strategies --markdown`; do not edit by hand "
        "(tests/test_catalog.py checks this file is current).",
        "",
        f"{len(strategies)} strategies: " + ", ".join(f"{counts[c]} {c}" for c in CATEGORIES) + ".",
        "Difficulty = 0.1*K + 0.5*(P-1) + S with K = number of guards; easy < 1 <= medium < 2.5 "
        "<= difficult.",
        "",
        "| strategy | category | class | score | K | P | S | guards | inverse |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in strategies:
        lines.append(f"| [{s.id}](#{s.id}) | {s.category} | {s.difficulty} | {s.score} | {s.K} | "
                     f"{s.P} | {s.S} | {', '.join(s.guards)} | {', '.join(s.inverse)} |")
    lines += ["", "## Guards", ""]
    for g in GUARDS.values():
        lines.append(f"* **{g.name}** — {g.doc} Refuses when {g.refusal}.")
    for category in CATEGORIES:
        lines += ["", f"## {category.capitalize()} strategies"]
        for s in (s for s in strategies if s.category == category):
            lines += ["", f"### {s.id}", "", s.description, "",
                      f"*{s.difficulty}* (score {s.score}; K={s.K}, P={s.P}, S={s.S}); "
                      f"guards: {', '.join(s.guards) or 'none'}"
                      + (f"; direction: {s.direction}" if s.direction else "")
                      + (f"; inverse: {', '.join(s.inverse)}" if s.inverse else "") + ".",
                      f"Rules: {', '.join(r.name for r in s.rules)}. File: `{_relative(s.path)}`."]
            if s.examples:
                ex = s.examples[0]
                lines += ["", "```", to_text(parse(ex.before)), "->", to_text(parse(ex.after)), "```"]
    return "\n".join(lines) + "\n"


def _relative(path: str) -> str:
    marker = "/rules/"
    return "rules/" + path.split(marker, 1)[1] if marker in path else path
