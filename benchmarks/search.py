"""Multi-step search on the paper's test workloads at CPU size (the paper's Tables 3 and 4).

Every algorithm runs with the ``rules`` proposer ranked by the CPU cost model, and with the
random-ranked ``rules`` proposer as the baseline, each capped at ``--max-samples`` candidates
per program. Every candidate is verified against the root (Equal and Independent) and timed
against it back to back (TVM llvm, opt-level 3, interleaved time_evaluator rounds; the
speedup is the median of the per-round ratios, docs/SEARCH.md §1). At the end of each run the
fastest nodes are re-timed against the root; the **confirmed** speedup is the headline
(``speedup``; 1 when nothing stays faster than NOISE_THRESHOLD), the in-search figure is kept
as ``search_speedup``. Every row records the 1-minute load average at its start and end, so
noisy runs are visible. Results go to ``--out`` (``results.jsonl``, one line per workload x
algorithm x proposer; ``verdicts.jsonl``, the verification cache): an interrupted run resumes
where it stopped. Rows of older versions (timed unpaired) are ignored.

With the rules proposer mcts, chain and chain_no_parent make the same trajectory (one
candidate per expansion and only valid children make the MCTS tree a path, which is the
chain's, and the rules proposer does not read the prompt); their rows differ only by the
final re-timing, a measure of its noise.

    python benchmarks/search.py                      # seeded subset of 30 workloads
    python benchmarks/search.py --all                # all mapped workloads
    python benchmarks/search.py --indices 6 67       # only these of the seeded subset
    python benchmarks/search.py --report             # print the tables of what is there
    python benchmarks/search.py --report --out DIR1 DIR2   # several runs' rows together (e.g.
                                                     # one process per proposer, or a second
                                                     # one started with --reverse)

The report also compares the proposers on the workloads where every proposer has a row for
every algorithm (``common``), so a baseline that finished fewer workloads is compared like
for like.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from results_file import recorded  # noqa: E402

ALGORITHMS = ["greedy", "beam", "bfs", "dfs", "mcts", "chain", "chain_no_parent"]
# rows of this version: paired timing on the host CPU target (lower.targets.cpu_target); older
# rows (root timed once, or baseline x86-64 where float16 ran through software calls) are ignored
TIMING = "paired-host"


def workloads(args):
    from leir_egraph.workloads import steptp
    mapped = [e for e in steptp.load() if steptp.is_mapped(e)]   # no module built: quick
    if not args.all:
        rng = random.Random(args.seed)
        mapped = sorted(rng.sample(mapped, min(args.workloads, len(mapped))),
                        key=lambda e: e.index)
    if args.indices:
        mapped = [e for e in mapped if e.index in args.indices]
    return mapped


def load_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def run(args) -> None:
    from leir_egraph.verify import launch
    launch()   # the searches' verification worker starts (TVM's import) while workloads load
    from leir_egraph.search import RulesProposer, search
    from leir_egraph.workloads import steptp
    out = Path(args.out[0])
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    from leir_egraph.lower.targets import cpu_target

    def done() -> set:   # re-read before each workload: the other folders may be growing
        return {(r["index"], r["algorithm"], r["proposer"]) for d in args.out
                for r in load_rows(Path(d) / "results.jsonl") if r.get("timing") == TIMING}
    chosen = workloads(args)
    if args.reverse:   # a second process on the same set, from the other end (its own --out)
        chosen = chosen[::-1]
    print(f"{len(chosen)} workloads: {[e.index for e in chosen]}", file=sys.stderr)
    for e in chosen:
        finished = done()
        todo = [(a, p) for a in args.algorithms for p in args.proposers
                if (e.index, a, p) not in finished]
        if not todo:
            continue
        try:
            program = steptp.program(e, "cpu", seed=args.seed)
        except Exception as err:  # noqa: BLE001 -- recorded, the run goes on
            with open(results, "a") as f:
                for a, p in todo:
                    f.write(json.dumps({"index": e.index, "name": e.name, "algorithm": a,
                                        "proposer": p, "timing": TIMING,
                                        "error": f"{type(err).__name__}: {err}"}) + "\n")
            continue
        proposers = {"cost": RulesProposer("cost", seed=args.seed),
                     "random": RulesProposer("random", seed=args.seed)}
        for a, p in todo:
            start = time.perf_counter()
            result = search(program, a, proposers[p], max_samples=args.max_samples,
                            seed=args.seed, cache_file=out / "verdicts.jsonl", confirm=True)
            row = {"index": e.index, "name": e.name, "kind": program.name, "algorithm": a,
                   "proposer": p, "timing": TIMING,
                   # the target the worker timed on (cpu_target() here would import TVM)
                   "target": result.target or cpu_target(), **result.metrics(),
                   "root_ms": result.root_ms, "stopped": result.stopped,
                   "wall_s": time.perf_counter() - start,
                   "load_start": result.load[0], "load_end": result.load[1],
                   "loadavg": list(os.getloadavg()),
                   "trajectory": [n.strategy for n in result.trajectory[1:]],
                   "confirmations": result.confirmations}
            with open(results, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"#{e.index:3d} {program.name[:34]:34s} {a:15s} {p:6s} samples "
                  f"{row['samples']:2d} speedup {row['speedup']:5.2f} (in search "
                  f"{row['search_speedup']:5.2f}) strategies {row['strategies']} load "
                  f"{row['load_start']:.1f}-{row['load_end']:.1f} ({row['wall_s']:.0f} s)",
                  file=sys.stderr, flush=True)


def _stats(values):
    return (statistics.mean(values), statistics.median(values), max(values)) if values else \
        (float("nan"),) * 3


def report(args) -> None:
    every = [r for d in args.out for r in load_rows(Path(d) / "results.jsonl")]
    current, seen = [], set()
    for r in every:   # a workload two processes both ran counts once (the first folder's row)
        key = (r.get("index"), r.get("algorithm"), r.get("proposer"))
        if r.get("timing") == TIMING and key not in seen:
            seen.add(key)
            current.append(r)
    rows = [r for r in current if "error" not in r]
    complete = {}
    for r in rows:
        complete.setdefault(r["index"], set()).add((r["algorithm"], r["proposer"]))
    need = {(a, p) for a in args.algorithms for p in args.proposers}
    common = sorted(i for i, have in complete.items() if need <= have)
    errors = [r for r in current if "error" in r]
    older = sum(r.get("timing") != TIMING for r in every)
    repeated = len(every) - older - len(current)
    print(f"workloads with results: {len({r['index'] for r in rows})}; "
          f"errors: {len({r['index'] for r in errors})}"
          + (f"; {older} rows of an older version ignored" if older else "")
          + (f"; {repeated} rows two processes both ran counted once" if repeated else ""))
    print("speedup: confirmed, root / best re-timed back to back after the search (1 when no "
          "program stays >= 1.05x faster); in search: the paired figure before confirmation")
    tables = [("all workloads with rows", rows)]
    if len(args.proposers) > 1:
        tables.append((f"common: the {len(common)} workloads every proposer finished "
                       f"({', '.join(f'#{i}' for i in common)})",
                       [r for r in rows if r["index"] in common]))
    for title, table_rows in tables:
        print(f"\n## {title}")
        _tables(args, table_rows)
    for r in errors[:10]:
        print(f"error #{r['index']} {r['name']}: {r['error'][:150]}")


def _tables(args, rows) -> None:
    for proposer in args.proposers:
        print(f"\n### proposer: rules ({proposer}-ranked), max {args.max_samples} samples\n")
        print("| algorithm | n | samples avg | samples med | speedup avg | speedup med | "
              "speedup max | runs > 1 | efficiency avg | strategies avg | strategies max | "
              "in-search med | in-search max | load avg | load max |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for a in args.algorithms:
            sel = [r for r in rows if r["algorithm"] == a and r["proposer"] == proposer]
            if not sel:
                continue
            s = [r["samples"] for r in sel]
            sp = [r["speedup"] for r in sel]
            ins = [r["search_speedup"] for r in sel]
            ef = [r["efficiency"] for r in sel]
            st = [r["strategies"] for r in sel]
            load = [max(r["load_start"], r["load_end"]) for r in sel]
            sp_avg, sp_med, sp_max = _stats(sp)
            print(f"| {a} | {len(sel)} | {statistics.mean(s):.1f} | {statistics.median(s):.0f} | "
                  f"{sp_avg:.2f} | {sp_med:.2f} | {sp_max:.2f} | {sum(x > 1 for x in sp)} | "
                  f"{statistics.mean(ef):.3f} | {statistics.mean(st):.2f} | {max(st)} | "
                  f"{statistics.median(ins):.2f} | {max(ins):.2f} | "
                  f"{statistics.mean(load):.1f} | {max(load):.1f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=30, help="seeded subset size")
    ap.add_argument("--all", action="store_true", help="every mapped workload")
    ap.add_argument("--indices", type=int, nargs="+",
                    help="only these workloads of the chosen set (a subset that fits a budget)")
    ap.add_argument("--algorithms", nargs="+", default=ALGORITHMS)
    ap.add_argument("--proposers", nargs="+", default=["cost", "random"],
                    choices=["cost", "random"])
    ap.add_argument("--max-samples", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", nargs="+", default=["benchmarks/out/search"],
                    help="results folders: a run writes to the first and skips what any of "
                         "them holds; --report reads all")
    ap.add_argument("--report", action="store_true", help="only print the tables")
    ap.add_argument("--reverse", action="store_true",
                    help="take the workloads in reverse order (a second process, own --out)")
    args = ap.parse_args(argv)
    if not args.report:
        run(args)
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
