"""``leir eval``: single-step evaluation of a served model or of recorded answers."""

from __future__ import annotations

import argparse
import json
import sys

EXAMPLE = """examples:
  leir eval leir-out/chat/single.jsonl --answers answers.jsonl
  leir eval leir-out/chat/single.jsonl --base-url http://127.0.0.1:8000/v1 --model stepTP -k 4
  leir eval tests/data/golden/golden_corpus.jsonl --limit 20 --answers answers.jsonl --json
  leir eval cases.jsonl --answers answers.jsonl --rules my_rules/   (attribute to your strategies too)
  leir eval out/cases/test.jsonl --base-url http://127.0.0.1:8000/v1 --model stepTP -k 8
      the held-out test split of `python -m leir_egraph.sample --split`, pass@1..8
  leir eval out/chat/tir-nocot/test/single.jsonl out/chat/full/test/single.jsonl --answers a.jsonl
      the TIR and LEIR variants' test sets, reported per split and variant (a TIR answer is
      parsed by TVM, compiled for the CPU and compared with the LEIR original it transforms)"""


def register(sub) -> None:
    from ..cli import add_rules_option, natural, natural_float, positive_float, positive_int
    from ..search.commands import add_llm_bounds
    p = sub.add_parser("eval", help="single-step evaluation: pass rates, pass@k, attribution",
                       description="Score a model's single-step answers: Different / Build / "
                                   "Execute / Equal pass rates over random input sets, pass@k, "
                                   "and whether each Equal answer is a step of the strategy it "
                                   "claims.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cases", nargs="+",
                   help="chat JSONL (messages) or program JSONL (leir, signature), e.g. the "
                        "sampler's cases/test.jsonl; several files are scored together and "
                        "reported per split and variant (answers: one line per case, in order)")
    p.add_argument("--answers", help="recorded answers, one JSONL line per case")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://host/v1")
    p.add_argument("--model", help="model name at --base-url")
    p.add_argument("-k", type=positive_int, default=1, help="answers per case from the model")
    p.add_argument("--temperature", type=natural_float, default=0.0)
    add_llm_bounds(p)
    p.add_argument("--limit", type=positive_int, help="only the first N cases")
    p.add_argument("--trials", type=positive_int, default=3, help="random input sets per verification")
    p.add_argument("--timeout", type=positive_float, default=60.0, metavar="S",
                   help="seconds per answer for reading it (JSON, LEIR parsing and checks) and "
                        "again for verifying it (a TIR answer is parsed in the verification); "
                        "an answer over it is scored none with one line on stderr")
    p.add_argument("--seed", type=natural, default=0)
    p.add_argument("--no-attribution", action="store_true", help="skip strategy attribution")
    add_rules_option(p)   # answers that name a user strategy are attributed to it
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_eval)


def run_eval(args) -> int:
    from ..cli import chosen_strategies
    from .scoring import CaseError, ask_model, evaluate, load_answers, load_cases
    strategies = chosen_strategies(args.rules, None)
    try:
        cases = []
        for path in args.cases:
            left = None if args.limit is None else args.limit - len(cases)
            if left == 0:
                break
            cases += load_cases(path, left, start=len(cases))
        if args.answers:
            answers = load_answers(args.answers, len(cases),
                                   limited=args.limit is not None)
        elif args.base_url and args.model:
            from ..search.llm import ChatClient
            client = ChatClient(args.base_url, args.model, timeout=args.llm_timeout,
                                deadline=args.llm_deadline, max_bytes=args.llm_max_bytes,
                                temperature=args.temperature)
            answers = ask_model(cases, client, args.k)
        else:
            raise CaseError("give --answers FILE or --base-url and --model")
        report = evaluate(cases, answers, trials=args.trials, seed=args.seed,
                          attribution=not args.no_attribution, strategies=strategies,
                          timeout=args.timeout,
                          warn=lambda line: print(f"leir eval: {line}", file=sys.stderr,
                                                  flush=True))
    except (CaseError, OSError) as err:
        print(f"leir eval: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(f"{report.cases} cases, {len(report.answers)} answers")
        print(report.table())
    return 0
