"""``leir explore``: exhaustive exploration of a program's rewrite space (docs/EXPLORE.md)."""

from __future__ import annotations

import argparse
import json
import sys

EXAMPLE = """examples:
  leir explore leir_egraph/examples/softmax.leir --sig leir_egraph/examples/softmax.sig.json \\
      --depth 2 --strategies loop_reorder,loop_split
  leir explore prog.leir --sig prog.sig.json --depth 2 --rules my_rules/ --strategies my_id
  leir explore --kind softmax --size small --depth 2 --top 4
  leir explore prog.leir --sig prog.sig.json --depth 3 --max-programs 5000 --time-limit 60 \\
      --json --graph space.graphml

Progress is one line per round on stderr; the summary (or --json) on stdout. --top K verifies
the K programs the CPU cost model ranks best against the root and times them (TVM llvm); for
a zoo kind (--kind) torch eager is timed on the same inputs beside them, for a LEIR file there
is no torch reference and that column is left out."""


def register(sub) -> None:
    from ..cli import add_rules_option, add_threads_option, natural, positive_float, positive_int
    p = sub.add_parser("explore", help="every program reachable in at most --depth steps",
                       description="Enumerate every program reachable from a LEIR program in at "
                                   "most --depth single steps, up to renaming of intermediates "
                                   "and loop indices; rank them with the CPU cost model and "
                                   "measure the best.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", nargs="?", help="LEIR text file (with --sig)")
    p.add_argument("--sig", help="signature JSON file")
    p.add_argument("--kind", help="a zoo kind instead of a file")
    p.add_argument("--size", default="small", choices=["small", "paper"], help="zoo size")
    p.add_argument("--seed", type=natural, default=0, help="zoo instance and sampling seed")
    p.add_argument("--depth", type=natural, required=True, help="steps from the root")
    p.add_argument("--strategies", help="comma-separated strategy ids (default: all, the "
                                        "--rules directories' included)")
    add_rules_option(p)
    p.add_argument("--max-programs", type=positive_int,
                   help="stop at this many programs (factored: hold this many in the graph, "
                        "100000 by default, and count the rest)")
    p.add_argument("--time-limit", type=positive_float, metavar="S",
                   help="stop exploring after S seconds, counted from the start of the "
                        "exploration (engine set-up, matching, the space e-graph, the "
                        "factored graph's materialisation); the shared method's egglog runs "
                        "are killed at it, the per-program and factored methods may overrun "
                        "by one egglog run (one program's matching, or one factored engine "
                        "run sized to the time left); --top's verification and timing come "
                        "after it")
    p.add_argument("--memory-limit", type=positive_float, metavar="MB",
                   help="stop exploring when the shared method's egglog database (a process "
                        "of its own) holds more than MB resident (default: half the "
                        "machine's memory)")
    p.add_argument("--top", type=natural, default=0, metavar="K",
                   help="verify and time the K best by the cost model")
    p.add_argument("--timeout", type=positive_float, default=60.0,
                   help="seconds per verification")
    add_threads_option(p)
    p.add_argument("--naive", action="store_true", help="run the naive oracle instead")
    p.add_argument("--method", choices=["auto", "factored", "shared", "egraph"], default="auto",
                   help="factored: each kernel variant matched once, the product space counted "
                        "(kernel-local strategies only); shared: every program added to one "
                        "persistent database, each term matched once; egraph: every program "
                        "matched alone; auto (default): factored where it applies, else shared")
    p.add_argument("--json", action="store_true", help="the result as one JSON object")
    p.add_argument("--graph", metavar="OUT", help="write the state graph (.graphml or .jsonl)")
    p.set_defaults(handler=run_explore)


def _root(args):
    """(program, torch module, torch inputs) — the module only for a zoo kind."""
    from ..cli import InputError
    if args.file and args.kind:
        raise InputError("give a LEIR file or --kind, not both")
    if args.file:
        if not args.sig:
            raise InputError(f"{args.file}: a LEIR file needs --sig")
        from ..leir.commands import load_program
        return load_program(args.file, args.sig), None, None
    if args.kind:
        from ..workloads import KINDS, instantiate
        if args.kind not in KINDS:
            raise InputError(f"--kind: unknown zoo kind '{args.kind}'")
        from ..frontend import from_torch
        module, inputs, _ = instantiate(args.kind, seed=args.seed, size=args.size)
        return from_torch(module, inputs, name=args.kind), module, inputs
    raise InputError("give a LEIR file with --sig, or --kind")


def run_explore(args) -> int:
    from ..cli import InputError, chosen_strategies, id_list
    from . import explore, naive
    from .measure import top_k, torch_eager_ms, tvm_ms

    if args.graph and not args.graph.endswith((".graphml", ".jsonl")):
        raise InputError(f"--graph {args.graph}: write .graphml or .jsonl")
    program, module, inputs = _root(args)
    strategies = chosen_strategies(args.rules, id_list(args.strategies))

    def progress(r):
        print(f"leir explore: depth {r.depth}: expanded {r.expanded}, {r.steps} steps, "
              f"{r.new_programs} new programs, "
              + (f"e-graph {r.eclasses} classes / {r.enodes} nodes, " if r.enodes is not None
                 else "")
              + f"{r.seconds:.2f} s, peak {r.peak_rss_mb:.0f} MB"
              + (f"; cut by {r.stopped.replace('_', ' ')}" if r.stopped else ""),
              file=sys.stderr, flush=True)

    budget = dict(depth=args.depth, max_programs=args.max_programs, time_limit=args.time_limit,
                  seed=args.seed, progress=progress)
    try:
        space = (naive(program, strategies, **budget) if args.naive
                 else explore(program, strategies, method=args.method,
                              memory_limit=args.memory_limit, **budget))
    except ValueError as err:   # --method factored on a space that is not a product
        raise InputError(f"--method {args.method}: {err}") from None
    if args.graph:
        (space.write_graphml if args.graph.endswith(".graphml") else space.write_jsonl)(args.graph)
    best = top_k(space, args.top, timeout=args.timeout, seed=args.seed) if args.top else []
    torch_ms = root_tvm = best_tvm = None
    if module is not None and best:
        from ..lower.threads import wanted
        valid = [m for m in best if m.valid and m.speedup]
        torch_ms = torch_eager_ms(module, inputs, threads=wanted())   # as many threads as TVM
        root_tvm = tvm_ms(space.programs[space.root_key], inputs)
        if valid:
            best_tvm = tvm_ms(space.programs[max(valid, key=lambda m: m.speedup).program], inputs)
    space.space_egraph()   # the rounds' e-graph statistics, built once the space is explored
    result = space.summary()
    result["top"] = [m.to_dict() for m in best]
    result["threads"] = next((m.threads for m in best if m.threads is not None), None)
    result["torch_eager_ms"], result["root_tvm_ms"], result["best_tvm_ms"] = (torch_ms, root_tvm,
                                                                             best_tvm)
    if args.json:
        print(json.dumps(result))
        return 0
    print(table(space, best, torch_ms, root_tvm, best_tvm, module is not None))
    return 0


def table(space, best, torch_ms, root_tvm, best_tvm, has_torch: bool) -> str:
    lines = ["| depth | programs | steps matched | e-classes | e-nodes | seconds |",
             "|---|---|---|---|---|---|", "| 0 | 1 | - | - | - | - |"]
    for r in space.rounds:
        lines.append(f"| {r.depth} | {r.new_programs} | {r.steps} | {r.eclasses} | {r.enodes} | "
                     f"{r.seconds:.2f} |")
    lines.append(f"\n{len(space)} distinct programs (up to renaming), {space.graph.number_of_edges()}"
                 f" steps between them; stopped: {space.stopped}; method: {space.method}; "
                 f"{space.seconds:.2f} s")
    if space.factored is not None:
        counted = space.space_counts()
        lines.append(f"the space (counted from its kernels, {'complete' if space.space_complete else 'incomplete: time limit'}): "
                     f"{sum(counted):,} programs, per depth {counted}")
    if best:
        lines += ["", "| rank | depth | modelled us | level | root ms | ms | speedup |",
                  "|---|---|---|---|---|---|---|"]
        for i, m in enumerate(best, 1):
            fmt = (lambda v: f"{v:.4g}" if v else "-")
            lines.append(f"| {i} | {m.depth} | {m.modelled_s * 1e6:.4g} | {m.level} | "
                         f"{fmt(m.root_ms)} | {fmt(m.time_ms)} | "
                         f"{fmt(m.speedup) + 'x' if m.speedup else '-'} |")
        threads = next((m.threads for m in best if m.threads is not None), None)
        if threads is not None:
            lines.append(f"\ntimed on {threads} thread(s) (--threads)")
        if has_torch and torch_ms:
            lines.append(f"\nsame inputs: torch eager {torch_ms:.4g} ms, root (TVM) "
                         f"{root_tvm:.4g} ms" + (f", best (TVM) {best_tvm:.4g} ms"
                                                 if best_tvm else ""))
        elif not has_torch:
            lines.append("\n(no torch reference for a LEIR file: torch eager not timed)")
    return "\n".join(lines)
