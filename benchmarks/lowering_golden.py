"""Lower, build and run every golden-corpus program; compare with PyTorch's stored output.

    .venv/bin/python benchmarks/lowering_golden.py [--dir DIR] [--limit N] [--json OUT]

Prints the equal rate over the programs that pass validation, every failing entry with its
reason (known failures with the documented explanation, others with what went wrong; float32
mismatches also show how far the same LEIR evaluated in float64 lands from PyTorch), and the
mean build time (lower + compile) per program.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leir_egraph.lower.golden import (DEFAULT_DIR, GOLDEN_RTOL, KNOWN_FAILING,  # noqa: E402
                                      check_entry, load_corpus)
from results_file import recorded  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="golden corpus directory")
    parser.add_argument("--limit", type=int, help="only the first N entries")
    parser.add_argument("--json", help="write every outcome to this JSON file")
    args = parser.parse_args(argv)

    corpus = load_corpus(args.dir)[: args.limit]
    start = time.perf_counter()
    outcomes = []
    for i, entry in enumerate(corpus, 1):
        outcome = check_entry(entry, args.dir)
        outcomes.append(outcome)
        if outcome.status not in ("equal", "invalid"):
            print(f"[{i}/{len(corpus)}] {outcome.id} {outcome.name}: {outcome.status}",
                  file=sys.stderr)
    wall = time.perf_counter() - start

    counts = Counter(o.status for o in outcomes)
    ran = [o for o in outcomes if o.status != "invalid"]
    equal = [o for o in ran if o.status == "equal"]
    builds = [o.build_s for o in ran if o.build_s is not None]
    print(f"golden corpus: {len(outcomes)} programs, {counts['invalid']} excluded (fail "
          f"validation), {len(ran)} run")
    print(f"equal: {len(equal)}/{len(ran)} = {len(equal) / max(len(ran), 1):.2%} "
          f"(rtol=atol {GOLDEN_RTOL['float32']:g} f32, {GOLDEN_RTOL['float64']:g} f64)")
    for dtype in ("float32", "float64"):
        subset = [o for o in ran if o.dtype == dtype]
        ok = sum(o.status == "equal" for o in subset)
        print(f"  {dtype}: {ok}/{len(subset)}")
    print(f"build (lower + compile, llvm): mean {np.mean(builds):.3f} s, median "
          f"{np.median(builds):.3f} s, max {np.max(builds):.2f} s over {len(builds)} programs")
    print(f"wall time: {wall:.0f} s")

    by_id = {e["id"]: e for e in corpus}
    failing = [o for o in ran if o.status != "equal"]
    if failing:
        print("\nfailing entries:")
    for o in failing:
        why = KNOWN_FAILING.get(o.id, "UNEXPECTED")
        print(f"  {o.id} {o.name} ({o.dtype}) {o.status}: {o.detail}")
        print(f"      reason: {why}")
        if o.dtype == "float32" and o.status == "mismatch":
            wide = check_entry(by_id[o.id], args.dir, widen=True)
            print(f"      same LEIR in float64 vs PyTorch: {wide.status}, max abs error "
                  f"{wide.max_abs_err:.3g}")
    invalid = [o for o in outcomes if o.status == "invalid"]
    if invalid:
        print("\nexcluded (invalid LEIR):")
        for o in invalid:
            print(f"  {o.id} {o.name} ({o.dtype}): {o.detail}")
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    return 0 if all(o.id in KNOWN_FAILING for o in failing) else 1


if __name__ == "__main__":
    sys.exit(recorded(main))
