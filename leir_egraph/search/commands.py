"""``leir search``: multi-step optimization of one program (docs/SEARCH.md)."""

from __future__ import annotations

import argparse
import json
import sys

EXAMPLE = """examples:
  leir search leir_egraph/examples/softmax.leir --sig leir_egraph/examples/softmax.sig.json --algorithm greedy
  leir search --kind softmax --algorithm beam --max-samples 16 --json
  leir search --workload 2 --algorithm mcts            (the paper's test workload 2, CPU size)
  leir search --workload 2 --proposer llm --base-url http://127.0.0.1:8000/v1 --model stepTP
  leir search --kind ReLU --proposer replay --answers answers.jsonl
  leir search prog.leir --sig prog.sig.json --rules my_rules/ --strategies my_id,loop_split"""


def register(sub) -> None:
    from ..cli import add_rules_option, add_threads_option, natural, natural_float, positive_float, positive_int
    from .budgets import DEFAULTS
    p = sub.add_parser("search", help="multi-step optimization search over verified steps",
                       description="Search for a faster equivalent program step by step: every "
                                   "candidate is verified against the root and timed (CPU).",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", nargs="?", help="LEIR text file (with --sig)")
    p.add_argument("--sig", help="signature JSON file")
    p.add_argument("--kind", help="a zoo kind instead of a file (small size)")
    p.add_argument("--workload", type=positive_int, help="the paper's test workload index (1-100)")
    p.add_argument("--size", default="cpu", choices=["cpu", "paper"],
                   help="size of --workload programs")
    p.add_argument("--algorithm", default="greedy", choices=sorted(DEFAULTS))
    p.add_argument("--proposer", default="rules", choices=["rules", "random", "llm", "replay"])
    p.add_argument("--strategies", help="rules/random proposer: comma-separated strategy ids "
                                        "(default: all, the --rules directories' included)")
    add_rules_option(p)
    p.add_argument("--iterations", type=positive_int, help="iterations (default: the paper's budget)")
    p.add_argument("--candidates", type=positive_int, help="candidates per query")
    p.add_argument("--topk", type=positive_int, help="beam width")
    p.add_argument("--max-depth", type=positive_int, help="BFS/DFS depth limit")
    p.add_argument("--max-samples", type=positive_int, help="cap on candidates judged")
    p.add_argument("--base-url", help="llm: OpenAI-compatible endpoint, e.g. http://host/v1")
    p.add_argument("--model", help="llm: model name")
    p.add_argument("--temperature", type=natural_float, default=0.3)
    add_llm_bounds(p)
    p.add_argument("--record", help="llm: append every answer to this JSONL (replayable)")
    p.add_argument("--answers", help="replay: JSONL of answers")
    p.add_argument("--trials", type=positive_int, default=3, help="random input sets per verification")
    p.add_argument("--timeout", type=positive_float, default=60.0, help="seconds per verification")
    p.add_argument("--seed", type=natural, default=0)
    p.add_argument("--confirm", action=argparse.BooleanOptionalAction, default=True,
                   help="re-time the fastest programs against the root at the end; the "
                        "confirmed speedup is the result (default: on)")
    add_threads_option(p)
    p.add_argument("--json", action="store_true", help="the whole result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_search)


def _program(args):
    if args.file:
        if not args.sig:
            raise ValueError("a LEIR file needs --sig")
        from ..leir.commands import load_program
        return load_program(args.file, args.sig)
    if args.workload is not None:
        from ..workloads import steptp
        return steptp.program(args.workload, args.size, seed=args.seed)
    if args.kind:
        from ..frontend import from_torch
        from ..workloads import instantiate
        module, inputs, meta = instantiate(args.kind, seed=args.seed)
        return from_torch(module, inputs, name=args.kind)
    raise ValueError("give a LEIR file with --sig, --kind or --workload")


def _proposer(args):
    from ..cli import InputError, chosen_strategies, id_list
    from .llm import ChatClient, LLMProposer
    from .replay import ReplayProposer
    from .rules_proposer import RulesProposer
    strategies = chosen_strategies(args.rules, id_list(args.strategies))
    if args.proposer in ("rules", "random"):
        return RulesProposer("cost" if args.proposer == "rules" else "random", seed=args.seed,
                             strategies=strategies)
    if args.strategies is not None:
        raise InputError(f"--strategies: the {args.proposer} proposer does not choose "
                         "strategies (use --proposer rules or random)")
    if args.proposer == "replay":
        if not args.answers:
            raise ValueError("--proposer replay needs --answers FILE.jsonl")
        return ReplayProposer(args.answers)
    if not args.base_url or not args.model:
        raise ValueError("--proposer llm needs --base-url and --model")
    return LLMProposer(ChatClient(args.base_url, args.model, timeout=args.llm_timeout,
                                  deadline=args.llm_deadline, max_bytes=args.llm_max_bytes,
                                  temperature=args.temperature), record=args.record)


def add_llm_bounds(p) -> None:
    """The three bounds of one request to a served model (search and eval share them)."""
    from ..cli import positive_float, positive_int
    from .budgets import DEADLINE, MAX_RESPONSE_BYTES, READ_TIMEOUT
    p.add_argument("--llm-timeout", type=positive_float, default=READ_TIMEOUT, metavar="S",
                   help=f"llm: seconds without a byte from the server (default {READ_TIMEOUT:g})")
    p.add_argument("--llm-deadline", type=positive_float, default=DEADLINE, metavar="S",
                   help=f"llm: seconds for a whole request, answer included (default "
                        f"{DEADLINE:g})")
    p.add_argument("--llm-max-bytes", type=positive_int, default=MAX_RESPONSE_BYTES,
                   metavar="N", help=f"llm: bytes of one response, at most (default "
                                     f"{MAX_RESPONSE_BYTES})")


def table(result) -> str:
    lines = ["| step | strategy | paired speedup | time ms |", "|---|---|---|---|"]
    for n in result.trajectory:
        t = f"{n.time_ms:.4g}" if n.time_ms else (f"{result.root_ms:.4g}" if n.parent is None
                                                 and result.root_ms else "-")
        noise = "" if n.parent is None or n.faster else " (noise)"
        speed = f"{n.speedup:.3g}x{noise}"
        if n.parent is not None and n.time_ms is None:
            speed = "untimed (a step of the parallel finish)"
        lines.append(f"| {n.depth} | {n.strategy or '(root)'} | {speed} | {t} |")
    m = result.metrics()
    lines.append("")
    lines.append(f"samples {m['samples']} (valid {m['valid']}, repeats {m['repeats']}), speedup "
                 f"{m['speedup']:.3g}x, strategies {m['strategies']}, efficiency "
                 f"{m['efficiency']:.3g}; {result.stopped}")
    if result.threads is not None:
        lines.append(f"timed on {result.threads} thread(s) (--threads)")
    if result.confirmed is not None:
        lines.append(f"speedup confirmed by re-timing against the root (in search: "
                     f"{result.search_speedup:.3g}x); {len(result.confirmations)} node(s) "
                     f"re-timed")
    else:
        lines.append("speedup not confirmed (--no-confirm): the paired in-search figure")
    finish = result.finish
    if finish is not None:
        done = ("kept" if finish["kept"] else f"not kept: {finish.get('reason', '')}")
        lines.append(f"parallel finish: {finish['steps']} P loop(s) on the best's nests, {done}")
    return "\n".join(lines)


def run_search(args) -> int:
    from . import search
    try:
        program = _program(args)
        proposer = _proposer(args)
    except OSError as err:  # --record or --answers that cannot be used
        where = f"{err.filename}: " if err.filename else ""
        print(f"leir search: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as err:
        print(f"leir search: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    bar = None
    if not args.quiet and not args.json:
        from tqdm import tqdm
        bar = tqdm(total=args.max_samples, unit="sample", file=sys.stderr, leave=False)

    def progress(state):
        if bar is not None:
            bar.n = len(state.samples)
            best = max(n.speedup if n.faster else 1.0 for n in state.nodes)
            bar.set_postfix_str(f"query {state.queries}, best {best:.3g}x")
            bar.refresh()

    result = search(program, args.algorithm, proposer, iterations=args.iterations,
                    candidates=args.candidates, topk=args.topk, max_depth=args.max_depth,
                    max_samples=args.max_samples, trials=args.trials, timeout=args.timeout,
                    seed=args.seed, progress=progress, confirm=args.confirm)
    if bar is not None:
        bar.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(table(result))
    return 0
