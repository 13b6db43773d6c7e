"""CPU time of the rules proposer ranking one search node (``RulesProposer("cost").ranked``).

    python benchmarks/search_ranking.py [--workload 67] [--children 3] [--unshared]

Ranks the root of one of the paper's test workloads at CPU size (default #67, MHA mean: 25
nests, about 7,200 steps), then its ``--children`` best-ranked steps as the next nodes of a
search would be, on one proposer. Each node's CPU seconds are split into enumerating its own
steps (``steps``: ``all_steps`` over every strategy) and the rest (costing them, the
lookahead's second steps and their costs). The engines are compiled outside the timed region
(a search compiles them once). ``--unshared`` runs the same on a proposer with
``shared=False`` (every lookahead step enumerated in full) and checks the rankings agree.
CPU seconds of this process; the machine is shared, so the load average is printed. Each
node's ranking is printed as a hash (sha1 of its steps' strategy, path and program text, in
order), so runs of two versions of the code can be checked to rank alike.

The node's two parts run under two pauses of the garbage collector (``steps``, then
``ranked``), where a search pauses once per node (``ranked`` alone). The process's one full
collection lands where the objects kept cross ``GROWTH`` (leir_egraph/gcpause.py): at child 1,
in its ``steps`` or its rest depending on how many objects the code keeps, so compare nodes'
totals, not the split, across versions of the code.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_file import recorded  # noqa: E402

TINY = ("B^{64}_{tx=0}L^{256}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];",
        {"inputs": [{"name": "A", "dtype": "float32", "shape": [64, 256]}],
         "outputs": [{"name": "D", "dtype": "float32", "shape": [64]}]})


def rank(proposer, program) -> tuple[list, float, float]:
    """(ranking, CPU s enumerating the node's own steps, CPU s of the rest of the ranking)."""
    t0 = time.process_time()
    proposer.steps(program)
    t1 = time.process_time()
    order = proposer.ranked(program)
    return order, t1 - t0, time.process_time() - t1


def ranking_hash(ranking) -> str:
    """sha1 (first 12 hex digits) of a ranking: each step's strategy, path and program text."""
    digest = hashlib.sha1()
    for t in ranking:
        digest.update(f"{t.strategy}|{t.path}|{t.after.text}\n".encode())
    return digest.hexdigest()[:12]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", type=int, default=67, help="test workload index")
    ap.add_argument("--children", type=int, default=3, help="best-ranked children to rank too")
    ap.add_argument("--unshared", action="store_true",
                    help="also rank with shared=False and compare")
    args = ap.parse_args()
    from leir_egraph import Program
    from leir_egraph.search import RulesProposer
    from leir_egraph.workloads import steptp

    entry = next(e for e in steptp.load() if e.index == args.workload)
    program = steptp.program(entry, "cpu", seed=0)
    RulesProposer("cost").ranked(Program.parse(*TINY))   # compile the engines
    print(f"#{entry.index} {entry.name}: {len(program.leir.nests)} nests; load average before "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n{'proposer':<10}{'node':<8}{'steps':>7}{'enumerate s':>13}{'rest s':>9}"
          f"{'total CPU s':>13}  ranking sha1")
    rankings = {}
    for shared in ([True, False] if args.unshared else [True]):
        proposer = RulesProposer("cost", shared=shared)
        label = "shared" if shared else "unshared"
        order, enum_s, rest_s = rank(proposer, program)
        rows = [("root", order, enum_s, rest_s)]
        for k, child in enumerate(order[:args.children]):
            rows.append((f"child {k + 1}", *rank(proposer, child.after)))
        for name, ranking, e, r in rows:
            print(f"{label:<10}{name:<8}{len(ranking):>7}{e:>13.2f}{r:>9.2f}{e + r:>13.2f}"
                  f"  {ranking_hash(ranking)}")
        rankings[label] = [[(t.strategy, t.path, t.after.text) for t in ranking]
                           for _, ranking, _, _ in rows]
    if args.unshared:
        same = rankings["shared"] == rankings["unshared"]
        print(f"\nrankings equal (same steps, same order, every node): {same}")
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if not args.unshared or same else 1


if __name__ == "__main__":
    sys.exit(recorded(main))
