"""How far ``explore --time-limit`` overruns its limit (docs/EXPLORE.md, "Time limit").

The two cases of issue 37: ScaledDotProductAttention to depth 3 with the eight loop strategies
(the factored method; round 2 alone takes several times the limit) and Average_Pooling_2D to
depth 3 with every strategy (the per-program method). Each is measured twice: the ``explore``
call (the limit counts from it, engine set-up included) and the whole ``leir explore`` command
in a fresh process (imports, tracing the zoo kind and printing come on top of the limit).

    PYTHONPATH=. python benchmarks/explore_time_limit.py [--time-limit 5] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from results_file import recorded  # noqa: E402  (benchmarks/ is the script's folder)

LOOP = ("loop_reorder,loop_split,loop_tiling,loop_unrolling,loop_parallelization,"
        "loop_vectorization,loop_binding,loop_fusion")
CASES = [("ScaledDotProductAttention", LOOP), ("Average_Pooling_2D", None)]


def in_process(kind: str, strategies: str | None, limit: float) -> dict:
    from leir_egraph.explore import explore
    from leir_egraph.frontend import from_torch
    from leir_egraph.workloads import instantiate
    module, inputs, _ = instantiate(kind, seed=0, size="small")
    program = from_torch(module, inputs, name=kind)
    start = time.perf_counter()
    space = explore(program, strategies.split(",") if strategies else None, depth=3,
                    time_limit=limit)
    wall = time.perf_counter() - start
    return {"wall": wall, "stopped": space.stopped, "method": space.method,
            "rounds": [(r.depth, r.expanded, getattr(r, "stopped", "?")) for r in space.rounds],
            "held": len(space)}


def command(kind: str, strategies: str | None, limit: float) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "leir_egraph", "explore", "--kind", kind, "--depth", "3",
            "--time-limit", str(limit), "--json"] + (["--strategies", strategies]
                                                     if strategies else [])
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"leir explore failed: {done.stderr.strip()[-500:]}")
    return wall, json.loads(done.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    limit = args.time_limit
    print(f"time limit {limit:g} s, depth 3, size small, seed 0\n")
    print("| case | method | run | explore() s | overrun s | stopped | rounds (depth, expanded,"
          " cut) | programs held | `leir explore` wall s | its `seconds` |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind, strategies in CASES:
        for run in range(1, args.repeat + 1):
            r = in_process(kind, strategies, limit)
            wall, summary = command(kind, strategies, limit)
            print(f"| {kind} ({'loop strategies' if strategies else 'all strategies'}) | "
                  f"{r['method']} | {run} | {r['wall']:.2f} | {r['wall'] - limit:+.2f} | "
                  f"{r['stopped']} | {r['rounds']} | {r['held']} | {wall:.2f} | "
                  f"{summary['seconds']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
