"""Single-step enumeration throughput per strategy over a fixed sample of the reference corpus.

    python benchmarks/single_step_throughput.py [--programs 60] [--verify 0] [--seed 0]

Prints, per strategy: programs where it applies, transitions, enumeration time and
transitions/second (each strategy enumerated alone, so its time is its own). With
``--verify N`` it also verifies the first N transitions of each strategy on TVM (llvm) and
reports the Equal rate and transitions/second for enumeration + verification.
The reference corpus' larger programs are used for enumeration; verification runs on the
golden twins (same structure, tiny shapes) so it finishes on a laptop.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leir_egraph.egraph import single_steps  # noqa: E402
from leir_egraph.egraph.engine import engine_for  # noqa: E402
from leir_egraph.egraph.steps import default_strategies  # noqa: E402
from leir_egraph.leir import Program  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def load(path: Path, n: int, seed: int) -> list[Program]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["dtype"] in ("float32", "float64")]
    random.Random(seed).shuffle(rows)
    return [Program.parse(r["leir"], r["signature"], r["name"]) for r in rows[:n]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=60)
    ap.add_argument("--verify", type=int, default=0, help="verify this many transitions per strategy")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    programs = load(DATA / "reference_corpus.jsonl", args.programs, args.seed)
    print(f"{len(programs)} reference-corpus programs (seed {args.seed}), "
          f"{len(default_strategies())} strategies")
    rows = []
    for strategy in default_strategies():
        engine_for((strategy,))  # compile outside the timed region
        applies, count = 0, 0
        start = time.perf_counter()
        for p in programs:
            n = len(single_steps(p, strategy))
            count += n
            applies += n > 0
        seconds = time.perf_counter() - start
        rows.append([strategy.id, applies, count, seconds, count / seconds if seconds else 0.0])

    if args.verify:
        from leir_egraph.verify import verify

        golden = load(DATA / "golden" / "golden_corpus.jsonl", args.programs, args.seed)
        for row, strategy in zip(rows, default_strategies()):
            done = equal = 0
            start = time.perf_counter()
            for p in golden:
                for t in single_steps(p, strategy):
                    if done >= args.verify:
                        break
                    result = verify(t.before, t.after)
                    done += 1
                    equal += result.level in ("equal", "independent")
                if done >= args.verify:
                    break
            seconds = time.perf_counter() - start
            row += [done, equal, done / seconds if seconds else 0.0]

    head = f"{'strategy':<58}{'programs':>9}{'transitions':>12}{'enum s':>9}{'trans/s':>10}"
    if args.verify:
        head += f"{'verified':>9}{'equal':>7}{'enum+verify/s':>15}"
    print(head)
    for row in rows:
        line = f"{row[0]:<58}{row[1]:>9}{row[2]:>12}{row[3]:>9.2f}{row[4]:>10.1f}"
        if args.verify:
            line += f"{row[5]:>9}{row[6]:>7}{row[7]:>15.2f}"
        print(line)
    total_t = sum(r[2] for r in rows)
    total_s = sum(r[3] for r in rows)
    print(f"{'total':<58}{'':>9}{total_t:>12}{total_s:>9.2f}{total_t / total_s:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
