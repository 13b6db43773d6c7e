"""CPU time per verified transition (issue 11, goal 3: median <= 0.15 CPU s at zoo small shapes).

    .venv/bin/python benchmarks/verification_cost.py [--every 25] [--offset 3]
        [--programs KIND ...] [--cap 1] [--trials 3] [--compare] [--json OUT]

Takes every ``--every``-th kind of the zoo (from ``--offset``; or the kinds given with
``--programs``), one instance each at small shapes, draws the dataset's transitions (every
strategy, ``--cap`` per strategy: ``egraph.steps.drawn_steps`` with the dataset's seeds) and
verifies them as the dataset pipeline does: one isolated worker process per program, the
candidates prepared in one TVM module (``Verifier.prepare``), then each verified with all
``--trials`` trials, the reverse-order independence check and no timing. A transition's CPU
time is what its verification job used in the worker (``VerificationResult.cpu_s``, all its
threads) plus an equal share of its program's preparation. The enumeration is not counted
(``benchmarks/single_step_throughput.py`` measures it), nor the worker's start (TVM's import,
once per worker).

Prints per program its transitions, verified count and CPU, then the median, mean, p90 and
max CPU s per verified transition over all. ``--compare`` verifies every program a second time
in a fresh worker without the preparation (each candidate built alone, as before it existed)
and prints both. Verdicts must agree; the script says so, or lists the disagreements.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leir_egraph.dataset.pipeline import compile_strategies, select_strategies  # noqa: E402
from leir_egraph.dataset.sources import load_program, select_programs  # noqa: E402
from leir_egraph.egraph.steps import drawn_steps  # noqa: E402
from leir_egraph.verify import Verifier  # noqa: E402
from results_file import recorded  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--programs", nargs="+", help="zoo kinds (default: every --every-th kind)")
    p.add_argument("--every", type=int, default=25)
    p.add_argument("--offset", type=int, default=3)
    p.add_argument("--cap", type=int, default=1, help="transitions per program and strategy")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--compare", action="store_true",
                   help="also verify without Verifier.prepare, in a fresh worker")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)

    sources = (select_programs(args.programs, count=1) if args.programs
               else select_programs(["*"], count=1)[args.offset::args.every])
    strategies, engine, rejected = compile_strategies(select_strategies(()))
    if rejected:
        print(f"rule files egglog rejected: {sorted(rejected)}", file=sys.stderr)
    seed = args.seed  # the dataset's seed: its draw is f"{seed}|{program_id}|{strategy}"
    modes = ("prepared", "alone") if args.compare else ("prepared",)
    per: dict[str, list[float]] = {m: [] for m in modes}
    rows, disagreements = [], []
    print(f"{'program':<50} {'trans':>5} {'verif':>5} " +
          " ".join(f"{m + ' CPU s':>14}" for m in modes))
    for src in sources:
        program = load_program(src)
        drawn, _ = drawn_steps(program, strategies, args.cap,
                               lambda sid, s=src: f"{seed}|{s.program_id}|{sid}", engine=engine)
        afters = [t.after for _, t in drawn]
        row = {"program": src.name, "transitions": len(afters)}
        verdicts = {}
        for mode in modes:
            with Verifier() as verifier:
                verifier.verify(program, program, timing=False)  # start the worker: not counted
                prepared = (verifier.prepare(program, afters, timeout=args.timeout)
                            if mode == "prepared" and afters else None)
                share = (prepared or {}).get("cpu_s", 0.0) / max(len(afters), 1)
                results = [verifier.verify(program, a, trials=args.trials, timeout=args.timeout,
                                           seed=args.seed, timing=False) for a in afters]
            verdicts[mode] = [(r.level, r.reason) for r in results]
            costs = [(r.cpu_s or 0.0) + share for r in results]
            verified = [c for c, r in zip(costs, results) if r.equal]
            per[mode] += verified
            row[mode] = {"verified": len(verified), "cpu_s": round(sum(costs), 3),
                         "prepare_cpu_s": round((prepared or {}).get("cpu_s", 0.0), 3)}
        if args.compare and verdicts["prepared"] != verdicts["alone"]:
            disagreements.append(src.name)
        rows.append(row)
        print(f"{src.name[:50]:<50} {len(afters):>5} {row[modes[0]]['verified']:>5} " +
              " ".join(f"{row[m]['cpu_s']:>14.2f}" for m in modes), flush=True)

    summary = {}
    for mode in modes:
        costs = sorted(per[mode])
        if not costs:
            continue
        summary[mode] = {
            "verified": len(costs), "median_cpu_s": round(statistics.median(costs), 4),
            "mean_cpu_s": round(statistics.fmean(costs), 4),
            "p90_cpu_s": round(costs[int(0.9 * (len(costs) - 1))], 4),
            "max_cpu_s": round(costs[-1], 4), "total_cpu_s": round(sum(costs), 2)}
        s = summary[mode]
        print(f"{mode}: {s['verified']} verified transitions, CPU s per verified transition: "
              f"median {s['median_cpu_s']:.3f}, mean {s['mean_cpu_s']:.3f}, p90 "
              f"{s['p90_cpu_s']:.3f}, max {s['max_cpu_s']:.3f} (total {s['total_cpu_s']:.1f})")
    if args.compare:
        print("verdicts agree in both modes" if not disagreements
              else f"verdicts DIFFER for: {', '.join(disagreements)}")
    print(f"load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs), "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    if args.json:
        Path(args.json).write_text(json.dumps({"programs": rows, "summary": summary,
                                               "disagreements": disagreements}, indent=1))
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(recorded(main))
