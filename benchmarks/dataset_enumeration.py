"""The dataset pipeline's enumeration CPU per program, in process, on a stated slice of the zoo.

    .venv/bin/python benchmarks/dataset_enumeration.py [--every 10] [--offset 0] [--count 2]
        [--per-strategy-cap 1] [--kinds NAME ...] [--json OUT]

``python -m leir_egraph.sample`` spends a program's CPU on translation, enumeration (every
strategy's drawn applications, ``--per-strategy-cap``), lowering and verification; the last runs
in worker processes. This measures the enumeration stage alone: each program is translated,
then its transitions are drawn exactly as the pipeline draws them (``_ProgramRun.transitions``,
the same configuration as ``benchmarks/dataset_build.py``), timed in this process's CPU. Every
``--every``-th zoo kind from ``--offset``, at ``--count`` seeds.

To compare two commits side by side, run the same command with ``PYTHONPATH`` pointing at a
checkout of the other commit (the script only uses the pipeline's entry points, which it reads
from the imported package), alternating the two runs. Prints one row per program and the
median and mean enumeration CPU s per program; a ResNet50 that the enumeration budget refuses
counts as refused, not as zero.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--count", type=int, default=2, help="seeds per kind")
    ap.add_argument("--per-strategy-cap", type=int, default=1)
    ap.add_argument("--kinds", nargs="*", help="these kinds instead of a slice of the zoo")
    ap.add_argument("--json", help="write every row and the summary here")
    args = ap.parse_args(argv)

    import leir_egraph
    from leir_egraph.dataset import DatasetConfig
    from leir_egraph.dataset import pipeline
    from leir_egraph.dataset.sources import FrontendFailure, load_program, select_programs
    from leir_egraph.workloads import zoo

    kinds = args.kinds or zoo()[args.offset::args.every]
    config = DatasetConfig(programs=tuple(kinds), count=args.count, seed=0,
                           per_strategy_cap=args.per_strategy_cap, shard_size=4)
    sources = select_programs(list(kinds), count=args.count, seed=0)
    context = pipeline._context(config)
    load = os.getloadavg()[0]
    rows = []
    wall = time.perf_counter()
    for src in sources:
        try:
            program = load_program(src)
        except FrontendFailure as err:
            rows.append({"program": src.program_id, "refused": f"{err.stage}: {err.reason}"})
            continue
        try:
            pipeline.check_steps_budget(program.leir, "enumeration")
        except pipeline.ProgramTooLarge as err:
            rows.append({"program": src.program_id, "refused": str(err)})
            continue
        run = pipeline._ProgramRun(src, config, context)
        cpu = time.process_time()
        chosen = run.transitions(program)
        cpu = time.process_time() - cpu
        rows.append({"program": src.program_id, "nests": len(program.leir.nests),
                     "enumerated": run.summary["enumerated"], "drawn": len(chosen),
                     "enumeration_cpu_s": round(cpu, 3)})
        print(f"{src.program_id:<60} {len(program.leir.nests):>4} nests "
              f"{run.summary['enumerated']:>6} enumerated {len(chosen):>4} drawn "
              f"{cpu:8.3f} CPU s", flush=True)
    wall = time.perf_counter() - wall
    pipeline.close_contexts()
    timed = [r["enumeration_cpu_s"] for r in rows if "enumeration_cpu_s" in r]
    summary = {
        "package": str(Path(leir_egraph.__file__).resolve().parents[1]),
        "programs": len(rows), "timed": len(timed),
        "refused": [r for r in rows if "refused" in r],
        "enumeration_cpu_s_median": round(statistics.median(timed), 3) if timed else None,
        "enumeration_cpu_s_mean": round(statistics.fmean(timed), 3) if timed else None,
        "enumeration_cpu_s_total": round(sum(timed), 1),
        "wall_s": round(wall, 1), "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
    for k, v in summary.items():
        if k != "refused":
            print(f"{k:<28} {v}")
    for r in summary["refused"]:
        print(f"refused: {r['program']}: {r['refused'][:160]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
