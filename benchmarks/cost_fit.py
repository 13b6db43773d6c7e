"""Fit the cost model's machine constants to measured kernel moves, and report the fit on
other workloads.

Input: timing files of ``benchmarks/kernel_ranking.py --save FILE`` (programs of a workload
with their interleaved round times). ``--train`` files choose the constants, ``--test`` files
only report them: no constant is fitted to a workload it is reported on. The search is a
coordinate descent over multiplicative steps of the ``Machine`` fields in ``PARAMETERS``,
maximising the mean per-workload Spearman rank correlation of model and measured time (the
fastest round, or ``--statistic median``)
(ties broken toward the default constants); deterministic.

    python benchmarks/cost_fit.py --train a.json b.json --test c.json [--passes 2]

It prints the fitted constants (as ``Machine(...)`` keyword arguments) and, per workload, the
Spearman of the default machine and of the fitted one, with each file's noise ceiling.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace

from cost_model import spearman  # noqa: E402  (one Spearman for every benchmark)
from kernel_ranking import STATISTICS, noise_ceiling  # noqa: E402
from results_file import recorded  # noqa: E402

PARAMETERS = ("chain_latency", "memory_chain_latency", "half_cycles", "gather_cycles",
              "loop_cycles", "memory_weight", "overlap", "unrolled_reduction", "code_growth",
              "serial_launch_cycles")
STEPS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)


def load(paths, statistic=min) -> list[tuple[str, list]]:
    """(label, [(program, time in ms, round times)]) per workload of the files; a program's
    time is ``statistic`` of its rounds."""
    from leir_egraph import Program
    out = []
    for path in paths:
        for w in json.loads(open(path).read())["workloads"]:
            out.append((f"#{w['index']} {w['name'][:28]}", [
                (Program.parse(r["text"], json.loads(r["signature"])),
                 statistic(r["rounds"]), r["rounds"]) for r in w["programs"]]))
    return out


def per_workload(workloads, machine) -> list[float]:
    from leir_egraph.cost import cost
    return [spearman([cost(p, machine).seconds for p, _, _ in rows], [t for _, t, _ in rows])
            for _, rows in workloads]


def score(workloads, machine) -> float:
    rhos = [r for r in per_workload(workloads, machine) if r == r]
    return statistics.mean(rhos) if rhos else float("nan")


def fit(workloads, machine, passes: int):
    best = score(workloads, machine)
    for _ in range(passes):
        for name in PARAMETERS:
            base = getattr(machine, name)
            for step in STEPS:
                value = type(base)(round(base * step)) if isinstance(base, int) else base * step
                if name == "overlap":
                    value = min(value, 1.0)
                trial = replace(machine, **{name: value})
                s = score(workloads, trial)
                if s > best + 1e-9:
                    best, machine = s, trial
    return machine, best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", nargs="+", required=True)
    ap.add_argument("--test", nargs="+", required=True)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--statistic", choices=sorted(STATISTICS), default="min",
                    help="a program's time from its rounds (kernel_ranking.py)")
    ap.add_argument("--cores", type=int, default=1, help="the model's cores (the timings')")
    args = ap.parse_args(argv)
    if set(args.train) & set(args.test):
        ap.error("a file is both --train and --test")
    from leir_egraph.cost import CPU
    default = replace(CPU, cores=args.cores)
    statistic = STATISTICS[args.statistic]
    train, test = load(args.train, statistic), load(args.test, statistic)
    fitted, train_score = fit(train, default, args.passes)
    changed = {n: getattr(fitted, n) for n in PARAMETERS if getattr(fitted, n) != getattr(default, n)}
    print(f"fitted on {len(train)} workloads ({' '.join(args.train)}): mean Spearman "
          f"{score(train, default):.3f} -> {train_score:.3f}")
    print("constants: Machine(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")")
    for title, workloads in (("train", train), ("test", test)):
        before, after = per_workload(workloads, default), per_workload(workloads, fitted)
        print(f"\n{title}: workload, Spearman default -> fitted, noise ceiling")
        for (label, rows), b, a in zip(workloads, before, after):
            print(f"  {label:34s} {b:6.3f} -> {a:6.3f}   ceiling "
                  f"{noise_ceiling([r for _, _, r in rows], statistic):6.3f}")
        finite_b = [x for x in before if x == x]
        finite_a = [x for x in after if x == x]
        print(f"  mean {statistics.mean(finite_b):.3f} -> {statistics.mean(finite_a):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
