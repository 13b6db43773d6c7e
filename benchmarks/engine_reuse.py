"""Does reusing one e-graph across programs change what enumeration finds?

    .venv/bin/python benchmarks/engine_reuse.py [--programs 201] [--strategies a,b] [--json OUT]

The engine keeps one egglog e-graph per strategy set and brackets each program with
``(push)``/``(pop)``. Anything egglog keeps between programs must not change the results. It
did once: egglog 13.2 names the variable through which a command reads a global after the
global plus a counter that lives as long as the e-graph, and the engine's ``let`` names ended
in digits, so ``$f13`` could be read through ``$f131`` -- another global (docs/ARCHITECTURE.md,
"egglog's global names"). Which names collided depended on the programs seen before.

This benchmark enumerates the golden float32 programs, in corpus order, twice: with one reused
engine (what ``all_steps`` and the dataset pipeline do) and with a new engine for every program.
It prints, per program that differs, the transitions only one side has, then the totals and the
wall and CPU time of both passes. It exits 1 when any program differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leir_egraph.egraph.steps import all_steps, default_strategies  # noqa: E402
from leir_egraph.egraph.engine import engine_for  # noqa: E402
from leir_egraph.leir import Program, Signature, parse  # noqa: E402
from results_file import recorded  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden" / "golden_corpus.jsonl"


def golden_programs(limit: int) -> list[tuple[str, Program]]:
    rows = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["dtype"] == "float32"][:limit]
    return [(r["id"], Program(parse(r["leir"]), Signature.from_dict(r["signature"]), r["name"]))
            for r in rows]


def enumerate_all(programs, strategies, fresh: bool) -> tuple[dict, dict, float, float]:
    """Transition keys per program, broken matches per program, wall s, CPU s."""
    found, broken_by = {}, {}
    wall, cpu = time.perf_counter(), time.process_time()
    for pid, program in programs:
        if fresh:
            engine_for.cache_clear()
        broken: list = []
        steps = all_steps(program, strategies, broken=broken)
        found[pid] = {(t.strategy, t.rule, t.path, t.after.text) for t in steps}
        broken_by[pid] = broken
    return found, broken_by, time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=201)
    ap.add_argument("--strategies", help="comma-separated ids (default: all)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    strategies = list(default_strategies())
    if args.strategies:
        wanted = args.strategies.split(",")
        strategies = [s for s in strategies if s.id in wanted]
    programs = golden_programs(args.programs)
    reused, reused_broken, r_wall, r_cpu = enumerate_all(programs, strategies, False)
    fresh, fresh_broken, f_wall, f_cpu = enumerate_all(programs, strategies, True)
    differing = []
    for pid, _ in programs:
        only_reused = reused[pid] - fresh[pid]
        only_fresh = fresh[pid] - reused[pid]
        if only_reused or only_fresh or len(reused_broken[pid]) != len(fresh_broken[pid]):
            differing.append(pid)
            print(f"{pid}: {len(only_reused)} only with the reused engine, {len(only_fresh)} only "
                  f"with fresh engines, broken {len(reused_broken[pid])} vs {len(fresh_broken[pid])}")
            for key in sorted(only_reused | only_fresh)[:5]:
                print("   ", "reused" if key in only_reused else "fresh ", key[0], key[1], key[2])
    total = sum(len(v) for v in reused.values())
    figures = {
        "programs": len(programs), "strategies": len(strategies),
        "transitions_reused": total, "transitions_fresh": sum(len(v) for v in fresh.values()),
        "programs_differing": differing,
        "broken_reused": sum(len(v) for v in reused_broken.values()),
        "broken_fresh": sum(len(v) for v in fresh_broken.values()),
        "reused_wall_s": round(r_wall, 1), "reused_cpu_s": round(r_cpu, 1),
        "fresh_wall_s": round(f_wall, 1), "fresh_cpu_s": round(f_cpu, 1),
    }
    print(f"{len(programs)} golden f32 programs x {len(strategies)} strategies: "
          f"{figures['transitions_reused']} transitions with one reused engine, "
          f"{figures['transitions_fresh']} with a new engine per program; "
          f"{len(differing)} programs differ")
    print(f"reused engine: {r_wall:.1f} s wall, {r_cpu:.1f} s CPU; "
          f"new engine per program: {f_wall:.1f} s wall, {f_cpu:.1f} s CPU")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(recorded(main))
