"""``leir steps`` and ``leir strategies``: single-step rewrites of a program with their chain
of thought, and the strategies (rule files) they come from."""

from __future__ import annotations

import argparse
import json
import sys

from ..cli import (InputError, TimeLimit, add_rules_option, chosen_strategies, positive_float,
                   positive_int, time_limit)
from ..leir.commands import load_program
from ..leir.limits import STEPS_NODE_BUDGET, check_steps_budget, node_count

STEPS_TIMEOUT = 600.0

STEPS_EXAMPLE = """examples:
  leir steps leir_egraph/examples/softmax.leir --sig leir_egraph/examples/softmax.sig.json \\
      --strategy loop_reorder
  leir steps leir_egraph/examples/softmax.leir --sig leir_egraph/examples/softmax.sig.json \\
      --json --limit 3
  leir steps prog.leir --sig prog.sig.json --rules my_rules/    (add a directory of rule files)

A program of more than --max-nodes AST nodes is refused up front, and an enumeration still
running after --timeout seconds stops (what was printed stays); both exit with status 2 and one
line on stderr. See docs/LEIR.md, section Limits."""


STRATEGIES_EXAMPLE = """examples:
  leir strategies                       (a table: id, category, class, score, guards)
  leir strategies --markdown > docs/STRATEGIES.md
  leir strategies --rules my_rules/"""


RULES_CHECK_EXAMPLE = """examples:
  leir rules check rules/graph/operator_fusion.toml
  leir rules check my_rules/ --verify      (also verify every example on TVM)

Like egglog's own .egg tests: each rule file's examples must be produced by its rules (with the
listed bindings) and each counterexample refused by the guard it names. Exit status 0 when
every file passes, 1 when an example or counterexample fails (each failure is printed), 2 for a
rule file that does not load or that egglog rejects."""


def register(sub) -> None:
    r = sub.add_parser("rules", help="check rule files: their examples and counterexamples",
                       description="Work with rule files (strategies).")
    rules_sub = r.add_subparsers(dest="rules_command", metavar="ACTION", required=True)
    c = rules_sub.add_parser("check", help="run rule files' examples and counterexamples",
                             description="Run the examples and counterexamples of rule files "
                                         "without pytest.",
                             epilog=RULES_CHECK_EXAMPLE,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("paths", nargs="+", metavar="FILE|DIR", help="rule file or directory of them")
    c.add_argument("--verify", action="store_true",
                   help="also verify every example numerically on TVM (Equal, Independent) "
                        "and check soundness beyond the examples: the examples mutated "
                        "(extents, loop kinds, neighbouring nests, a nest twice, dtypes, "
                        "literals), programs drawn from the LEIR schema and the built-in "
                        "strategies' examples, on normal and special-value inputs, "
                        "within the file's declared exact and domain (docs/RULES.md "
                        "\"Value ranges\")")
    c.add_argument("--budget", type=positive_int, default=24, metavar="N",
                   help="with --verify: at most N transitions judged per rule file (default 24)")
    c.add_argument("--seed", type=int, default=0, help="with --verify: the seed of the "
                   "soundness check's order and inputs (default 0)")
    c.set_defaults(handler=run_rules_check)
    s = sub.add_parser("strategies", help="list the strategies (rule files) or write their doc",
                       description="List every loaded strategy, or print docs/STRATEGIES.md "
                                   "generated from the rule files.",
                       epilog=STRATEGIES_EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_rules_option(s)
    s.add_argument("--markdown", action="store_true", help="print the generated Markdown document")
    s.add_argument("--vocabulary", action="store_true",
                   help="print the table of each strategy's rule file, providers and the "
                        "relations it reads (docs/RULES.md section 5)")
    s.set_defaults(handler=run_strategies)
    p = sub.add_parser("steps", help="list single-step rewrites with their chain of thought",
                       description="Enumerate every distinct one-site application of the "
                                   "strategies (rule files) on a LEIR program.",
                       epilog=STEPS_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="LEIR text file ('-' for standard input)")
    p.add_argument("--sig", required=True, help="signature JSON file")
    p.add_argument("--strategy", action="append", help="strategy id (repeatable; default all)")
    add_rules_option(p)
    p.add_argument("--limit", type=positive_int,
                   help="at most this many transitions per strategy")
    p.add_argument("--max-nodes", type=positive_int, default=STEPS_NODE_BUDGET,
                   help=f"refuse programs of more AST nodes (default {STEPS_NODE_BUDGET:,})")
    p.add_argument("--timeout", type=positive_float, default=STEPS_TIMEOUT, metavar="S",
                   help=f"stop the enumeration after S seconds (default {STEPS_TIMEOUT:g})")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(handler=run_steps)


def run_rules_check(args) -> int:
    from contextlib import nullcontext

    from .rulecheck import check_rule_file, rule_files
    from .strategy import builtin_strategies

    from pathlib import Path

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        raise InputError(f"{missing[0]}: no such rule file or directory")
    files = rule_files(args.paths)
    if not files:
        raise InputError(f"{', '.join(args.paths)}: no rule files (*.toml) found")
    failed = 0
    neighbours = ()
    if args.verify:
        from ..verify import Verifier
        from .strategy import load_strategies
        context = Verifier()
        neighbours = load_strategies()
    else:
        context = nullcontext()
    defined = {s.id: s.path for s in builtin_strategies()}   # id -> file, across the files
    with context as verifier:
        for path in files:
            result = check_rule_file(path, verifier, defined, neighbours=neighbours,
                                     budget=args.budget, seed=args.seed)
            verified = f", {result.verified} verified on TVM" if args.verify else ""
            if result.soundness is not None:
                s = result.soundness
                verified += (f"; soundness ({s.declared}): {s.judged} transition(s) of "
                             f"{s.programs} program(s) judged, {s.bitwise} bitwise, worst "
                             f"{s.worst_ulps:.3g} ULP, {s.cpu_s:.1f} CPU s")
            status = "ok  " if not result.problems else "FAIL"
            print(f"{status} {result.strategy}: {result.examples} example(s), "
                  f"{result.counterexamples} counterexample(s){verified}  ({path})")
            for problem in result.problems:
                print(f"     {problem}")
            failed += bool(result.problems)
            sys.stdout.flush()
    print(f"{len(files) - failed} of {len(files)} rule file(s) pass")
    return 1 if failed else 0


def run_strategies(args) -> int:
    from .catalog import strategies_markdown, vocabulary_table
    from .strategy import load_strategies

    strategies = load_strategies(*args.rules)
    if args.markdown:
        print(strategies_markdown(strategies), end="")
        return 0
    if args.vocabulary:
        print(vocabulary_table(strategies))
        return 0
    for s in strategies:
        print(f"{s.id:<58} {s.category:<9} {s.difficulty:<10} {s.score:>5}  {', '.join(s.guards)}")
    return 0


def run_steps(args) -> int:
    """The rewrites of every strategy, strategy by strategy in id order (the order of
    ``all_steps``), printed as each strategy's are ready; on a terminal, progress on stderr.
    Everything runs within ``--timeout``."""
    progress = _Progress(args.file)
    try:
        with time_limit(args.timeout):
            return _steps(args, progress)
    except TimeLimit:
        progress.done()
        sys.stdout.flush()
        raise InputError(f"{args.file}: enumeration stopped after {args.timeout:g} s (--timeout); "
                         "the rewrites printed so far are complete, the others were not "
                         "enumerated") from None


def _steps(args, progress: "_Progress") -> int:
    from .engine import engine_for
    from .steps import transitions_from
    from .strategy import load_strategies

    program = load_program(args.file, args.sig)
    check_steps_budget(program.leir, args.file, args.max_nodes)
    strategies = (chosen_strategies(args.rules, args.strategy, "--strategy")
                  or load_strategies())
    progress.say(f"matching {len(strategies)} strategies on a program of "
                 f"{node_count(program.leir):,} AST nodes")
    matches = engine_for(tuple(strategies)).matches(program, list(strategies))
    by_strategy: dict[str, list] = {}
    for m in matches:
        by_strategy.setdefault(m.strategy, []).append(m)
    shown: dict[str, int] = {}
    ordered = sorted(strategies, key=lambda s: s.id)
    for k, strategy in enumerate(ordered, start=1):
        progress.say(f"{k}/{len(ordered)} {strategy.id}: placing "
                     f"{len(by_strategy.get(strategy.id, []))} match(es)")
        found = transitions_from(program, by_strategy.get(strategy.id, []),
                                 {strategy.id: strategy})
        for t in found[:args.limit]:
            shown[t.strategy] = shown.get(t.strategy, 0) + 1
            if args.json:
                print(json.dumps(t.to_dict()))
            else:
                print(f"== {t.strategy} ({t.difficulty}, {t.score}) rule {t.rule} "
                      f"at {t.site.path}")
                print(f"   after: {t.after.text}")
                print(f"   CoT:   {t.cot}\n")
        sys.stdout.flush()
    progress.done()
    if not args.json:
        total = sum(shown.values())
        print(f"{total} transition(s): " + ", ".join(f"{k} {v}" for k, v in sorted(shown.items())))
    return 0


class _Progress:
    """One overwritten status line on stderr, only when stderr is a terminal."""

    def __init__(self, name: str):
        self.name = name
        self.live = sys.stderr.isatty()

    def say(self, text: str) -> None:
        if self.live:
            print(f"\rleir steps: {self.name}: {text}\033[K", end="", file=sys.stderr,
                  flush=True)

    def done(self) -> None:
        if self.live:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
