"""``leir steps``: every single-step rewrite of a program, with its chain of thought."""

from __future__ import annotations

import argparse
import json
import sys

from ..leir.commands import load_program
from .strategy import RuleFileError, load_strategies

STEPS_EXAMPLE = """examples:
  leir steps examples/softmax.leir --sig examples/softmax.sig.json --strategy loop_reorder
  leir steps examples/softmax.leir --sig examples/softmax.sig.json --json --limit 3
  leir steps prog.leir --sig prog.sig.json --rules my_rules/    (add a directory of rule files)"""


STRATEGIES_EXAMPLE = """examples:
  leir strategies                       (a table: id, category, class, score, guards)
  leir strategies --markdown > docs/STRATEGIES.md
  leir strategies --rules my_rules/"""


def register(sub) -> None:
    s = sub.add_parser("strategies", help="list the strategies (rule files) or write their doc",
                       description="List every loaded strategy, or print docs/STRATEGIES.md "
                                   "generated from the rule files.",
                       epilog=STRATEGIES_EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--rules", action="append", default=[], help="extra rule directory")
    s.add_argument("--markdown", action="store_true", help="print the generated Markdown document")
    s.set_defaults(handler=run_strategies)
    p = sub.add_parser("steps", help="list single-step rewrites with their chain of thought",
                       description="Enumerate every distinct one-site application of the "
                                   "strategies (rule files) on a LEIR program.",
                       epilog=STEPS_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="LEIR text file")
    p.add_argument("--sig", required=True, help="signature JSON file")
    p.add_argument("--strategy", action="append", help="strategy id (repeatable; default all)")
    p.add_argument("--rules", action="append", default=[], help="extra rule directory (repeatable)")
    p.add_argument("--limit", type=int, help="at most this many transitions per strategy")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(handler=run_steps)


def run_strategies(args) -> int:
    from .catalog import strategies_markdown

    try:
        strategies = load_strategies(*args.rules)
    except RuleFileError as err:
        print(err, file=sys.stderr)
        return 2
    if args.markdown:
        print(strategies_markdown(strategies), end="")
        return 0
    for s in strategies:
        print(f"{s.id:<58} {s.category:<9} {s.difficulty:<10} {s.score:>5}  {', '.join(s.guards)}")
    return 0


def run_steps(args) -> int:
    from .steps import all_steps

    program = load_program(args.file, args.sig)
    try:
        strategies = load_strategies(*args.rules)
    except RuleFileError as err:
        print(err, file=sys.stderr)
        return 2
    if args.strategy:
        by_id = {s.id: s for s in strategies}
        unknown = [s for s in args.strategy if s not in by_id]
        if unknown:
            print(f"unknown strategy {', '.join(unknown)}; known: {', '.join(sorted(by_id))}",
                  file=sys.stderr)
            return 2
        strategies = [by_id[s] for s in args.strategy]
    shown: dict[str, int] = {}
    for t in all_steps(program, strategies):
        if args.limit is not None and shown.get(t.strategy, 0) >= args.limit:
            continue
        shown[t.strategy] = shown.get(t.strategy, 0) + 1
        if args.json:
            print(json.dumps(t.to_dict()))
        else:
            print(f"== {t.strategy} ({t.difficulty_class}, {t.difficulty}) rule {t.rule} "
                  f"at {t.site.path}")
            print(f"   after: {t.after.text}")
            print(f"   CoT:   {t.cot}\n")
    if not args.json:
        total = sum(shown.values())
        print(f"{total} transition(s): " + ", ".join(f"{k} {v}" for k, v in sorted(shown.items())))
    return 0
