"""Per strategy: on how many corpus/zoo programs it applies, how many transitions it yields,
their Equal rate on TVM (llvm), and its enumeration time.

    python benchmarks/strategy_coverage.py                      # full run (slow)
    python benchmarks/strategy_coverage.py --golden 40 --zoo 20 --verify-cap 2
    python benchmarks/strategy_coverage.py --golden 40 --zoo 0 --verify-cap -1 \
        --strategies loop_split,loop_reorder,operator_fusion,set_storage_scope,expand_log,logsimp
        # every transition of the core strategies on tests/test_soundness_core.py's 40 programs

Programs: the golden corpus (tiny shapes, f32 and f64; the ``add_add`` entries excluded: the
reference translator emits an invalid subscript for them) and zoo kinds instantiated at small
shapes in f32 (seed 0). Each strategy is enumerated alone over every program (one egglog engine
at a time), then up to ``--verify-cap`` of its transitions per program (a seeded choice) are
verified, two worker processes in parallel. "Equal" counts transitions that reach Equal and,
where the original's own P/V/B claims hold, Independent. Every non-Equal transition is listed.
A transition whose outputs agree everywhere but are all zero or non-finite in every trial (the
verifier's "not established": KLDivLoss of standard-normal "probabilities" is NaN whatever the
rewrite) cannot be judged; such transitions are counted and listed apart, outside the rate.
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
from results_file import recorded  # noqa: E402

DATA = ROOT / "tests" / "data"


def golden_programs(n: int | None, seed: int) -> list[Program]:
    rows = [json.loads(l) for l in (DATA / "golden" / "golden_corpus.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["name"] != "add_add"]
    random.Random(seed).shuffle(rows)
    return [Program.parse(r["leir"], r["signature"], r["name"]) for r in rows[:n]]


def zoo_programs(n: int | None, seed: int) -> tuple[list[Program], list[str]]:
    from leir_egraph.frontend import from_torch
    from leir_egraph.workloads import instantiate, zoo

    kinds = zoo()
    random.Random(seed).shuffle(kinds)
    out, failed = [], []
    for kind in kinds[:n]:
        try:
            module, inputs, _ = instantiate(kind, seed=0, size="small", dtype="f32")
            out.append(from_torch(module, inputs, name=kind))
        except Exception as err:  # noqa: BLE001 -- a zoo failure is reported, not fatal
            failed.append(f"{kind}: {type(err).__name__}: {err}")
    return out, failed


def verify_all(transitions, workers: int):
    from leir_egraph.verify import verify_many

    results = verify_many([(t.before, t.after) for t in transitions], timing=False,
                          workers=workers)
    return list(zip(transitions, results))


def sound(result) -> bool:
    return result.equal and (result.independent or result.before_independent is False)


def unjudgeable(result) -> bool:
    """Every comparison agreed, but no output held a finite non-zero value in any trial."""
    return result.level == "exec" and "not established" in (result.reason or "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", type=int, default=None, help="golden programs (default all 402)")
    ap.add_argument("--zoo", type=int, default=None, help="zoo kinds (default all)")
    ap.add_argument("--verify-cap", type=int, default=2, help="verified transitions per program and strategy (0: none, -1: all)")
    ap.add_argument("--strategies", help="comma-separated strategy ids (default all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the table as JSON to this file")
    args = ap.parse_args()

    programs = golden_programs(args.golden, args.seed)
    zoo, zoo_failed = zoo_programs(args.zoo, args.seed)
    programs += zoo
    print(f"{len(programs)} programs ({len(programs) - len(zoo)} golden, {len(zoo)} zoo; "
          f"{len(zoo_failed)} zoo kinds failed to translate)")
    rng = random.Random(args.seed)
    table = []
    wanted = set(args.strategies.split(",")) if args.strategies else None
    for strategy in default_strategies():
        if wanted is not None and strategy.id not in wanted:
            continue
        engine_for((strategy,))
        start = time.perf_counter()
        found = {p.name + p.signature.to_short(): single_steps(p, strategy) for p in programs}
        seconds = time.perf_counter() - start
        applies = sum(bool(v) for v in found.values())
        total = sum(len(v) for v in found.values())
        cap = args.verify_cap
        chosen = [t for v in found.values()
                  for t in (v if cap < 0 else rng.sample(v, min(cap, len(v))))]
        row = {"strategy": strategy.id, "category": strategy.category, "class": strategy.difficulty,
               "programs": applies, "transitions": total, "enum_s": round(seconds, 2),
               "verified": 0, "equal": 0, "unjudgeable": 0, "failures": [],
               "unjudgeable_programs": []}
        if chosen:
            results = verify_all(chosen, args.workers)
            row["unjudgeable"] = sum(unjudgeable(r) for _, r in results)
            row["verified"] = len(results) - row["unjudgeable"]
            row["equal"] = sum(sound(r) for _, r in results)
            row["failures"] = [{"program": t.before.name, "after": t.after.text, "level": r.level,
                                "reason": r.reason} for t, r in results
                               if not sound(r) and not unjudgeable(r)]
            row["unjudgeable_programs"] = sorted({t.before.name for t, r in results
                                                  if unjudgeable(r)})
        table.append(row)
        rate = f"{100 * row['equal'] / row['verified']:.1f}%" if row["verified"] else "-"
        print(f"{strategy.id:<58}{applies:>5}/{len(programs):<5}{total:>8}{seconds:>8.1f}s"
              f"{row['verified']:>7}{rate:>8}", flush=True)
    verified = sum(r["verified"] for r in table)
    equal = sum(r["equal"] for r in table)
    print(f"\nverified {verified} transitions, {equal} Equal "
          f"({100 * equal / verified if verified else 0:.2f}%)")
    for row in table:
        for f in row["failures"]:
            print(f"  {row['strategy']} on {f['program']}: {f['level']}: {f['reason']}")
    unjudged = sum(r["unjudgeable"] for r in table)
    if unjudged:
        names = sorted({n for r in table for n in r["unjudgeable_programs"]})
        print(f"not judgeable (outputs agree, but all zero or non-finite in every trial): "
              f"{unjudged} transitions, of {', '.join(names)}")
    for line in zoo_failed:
        print(f"  zoo: {line}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
