"""Does the cost model rank the kernel moves of issue 39 as the machine does?

For a few of the paper's test workloads at CPU size (default the matrix products #10, 47, 62,
63), the programs one or two steps away along the moves that reach fast CPU kernels -- loop
reorder (reduction outward), register tiling (vector lanes, local accumulator tile), loop
vectorisation, loop split, loop parallelisation -- are enumerated (``egraph.single_steps``),
a seeded sample of them is timed with TVM (llvm, opt-level 3, ``lower.build.time_program``, on
the timing thread count of ``lower.threads``) and costed by the model (``cost.cost``, the
machine of ``search.rules_proposer.timing_machine``: what the search ranks with). It prints,
per workload, the Spearman rank correlation of model and measurement over the sample (ranking
candidates of one root is what search needs), and its mean, and which program each ranks
first.

    python benchmarks/kernel_ranking.py [--workloads 10,47,62,63] [--programs 12] [--seed 0] [--verbose]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys

from cost_model import spearman  # noqa: E402  (one Spearman for every benchmark)
from results_file import recorded  # noqa: E402

FIRST = ("loop_reorder", "register_tiling", "loop_vectorization", "loop_split",
         "loop_parallelization")
SECOND = ("register_tiling", "loop_vectorization", "loop_reorder")


def candidates(root, rng: random.Random, programs: int) -> list:
    """(how it was reached, program): the root and a seeded sample of the programs one step away along FIRST and two steps
    away (a FIRST step, then a SECOND one), distinct texts only."""
    from leir_egraph.egraph import single_steps
    one = [(sid, t.after) for sid in FIRST for t in single_steps(root, sid)]
    rng.shuffle(one)
    two = []
    for first, p in one[:4]:
        two.extend((f"{first}+{sid}", t.after) for sid in SECOND for t in single_steps(p, sid))
    rng.shuffle(two)
    out, seen = [("root", root)], {root.text}
    for label, p in [x for pair in zip(one, two) for x in pair] + one + two:
        if p.text not in seen and len(out) < programs:
            seen.add(p.text)
            out.append((label, p))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="10,47,62,63")
    ap.add_argument("--programs", type=int, default=12, help="programs timed per workload")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="every program's two times")
    args = ap.parse_args(argv)
    from leir_egraph.cost import cost
    from leir_egraph.lower.build import time_program
    from leir_egraph.lower.threads import configure
    from leir_egraph.search.rules_proposer import timing_machine
    from leir_egraph.verify.inputs import random_inputs
    from leir_egraph.workloads import steptp

    threads = configure()
    machine = timing_machine()
    print(f"timing threads: {threads}; model cores: {machine.cores}")
    rhos = []
    for index in (int(w) for w in args.workloads.split(",")):
        root = steptp.program(index, "cpu", seed=args.seed)
        rng = random.Random(f"{args.seed}|{index}")
        inputs = random_inputs(root, args.seed, 0)
        rows = []
        for label, p in candidates(root, rng, args.programs):
            rows.append((cost(p, machine).seconds * 1e3, time_program(p, inputs), label))
        rho = spearman([r[0] for r in rows], [r[1] for r in rows])
        rhos.append(rho)
        by_model = min(rows, key=lambda r: r[0])
        by_time = min(rows, key=lambda r: r[1])
        root_ms = rows[0][1]
        print(f"#{index:3d} {root.name[:32]:32s} programs {len(rows):2d} spearman {rho:6.3f}  "
              f"root {root_ms:8.3f} ms  model's first {by_model[1]:8.3f} ms  "
              f"fastest {by_time[1]:8.3f} ms", flush=True)
        if args.verbose:
            for model_ms, measured_ms, label in rows:
                print(f"      model {model_ms:9.4f} ms  measured {measured_ms:9.4f} ms  {label}")
    finite = [r for r in rhos if r == r]
    print(f"Spearman per workload, mean of {len(finite)}: "
          f"{statistics.mean(finite) if finite else float('nan'):.3f} "
          f"(min {min(finite):.3f}, max {max(finite):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
