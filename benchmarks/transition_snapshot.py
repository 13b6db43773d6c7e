"""Snapshot of every single-step transition on a fixed corpus, to show that a refactoring left
enumeration unchanged (issue 10: "the transition sets of all 43 strategies on the golden corpus
and 20 zoo programs are identical before and after").

A snapshot is a JSON-lines file, one line per transition: program, strategy, rule, site path,
the program after the step and a hash of its chain of thought. ``--compare`` diffs two
snapshots and exits 1 when they differ.

    python benchmarks/transition_snapshot.py --out before.jsonl          (about 2-4 min)
    python benchmarks/transition_snapshot.py --out after.jsonl
    python benchmarks/transition_snapshot.py --compare before.jsonl after.jsonl
    (--shard 0/2 and --shard 1/2 in two processes split the work; --compare takes the
    concatenation)

The corpus: every valid program of ``tests/data/golden/golden_corpus.jsonl`` (``--golden``)
and the 20 zoo programs of benchmarks/exploration.py at their smallest shapes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from results_file import recorded  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's leir_egraph

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "data" / "golden"


def corpus(golden_dir: Path, limit: int | None):
    """(name, program) pairs: the golden corpus's valid programs, then the 20 zoo programs."""
    from exploration import SUITE
    from leir_egraph.frontend import from_torch
    from leir_egraph.leir.program import Program
    from leir_egraph.leir.validate import LeirValidationError, check
    from leir_egraph.lower.golden import load_corpus
    from leir_egraph.workloads import instantiate

    entries = load_corpus(golden_dir) if (golden_dir / "golden_corpus.jsonl").exists() else []
    for entry in entries[:limit]:
        program = Program.parse(entry["leir"], entry["signature"], name=entry["name"])
        try:
            check(program)
        except LeirValidationError:
            continue
        yield entry["id"], program
    for kind in SUITE[:limit]:
        module, inputs, _ = instantiate(kind, seed=0)
        yield f"zoo:{kind}", from_torch(module, inputs, name=kind)


def snapshot(out: Path, golden_dir: Path, limit: int | None, shard: tuple[int, int] = (0, 1)
             ) -> None:
    from leir_egraph.egraph.steps import all_steps

    start, rows, programs = time.perf_counter(), 0, 0
    with open(out, "w") as f:
        for k, (name, program) in enumerate(corpus(golden_dir, limit)):
            if k % shard[1] != shard[0]:
                continue
            programs += 1
            for t in all_steps(program):
                f.write(json.dumps({
                    "program": name, "strategy": t.strategy, "rule": t.rule,
                    "site": list(t.site.path), "after": t.after.text,
                    "cot": hashlib.sha256(t.cot.encode()).hexdigest()[:16]}) + "\n")
                rows += 1
    print(f"{programs} programs, {rows} transitions in {time.perf_counter() - start:.1f} s "
          f"-> {out}")


def compare(a: Path, b: Path) -> int:
    def rows(path):
        with open(path) as f:
            return {line.strip() for line in f if line.strip()}

    left, right = rows(a), rows(b)
    only_a, only_b = sorted(left - right), sorted(right - left)
    per = {}
    for line in left:
        s = json.loads(line)["strategy"]
        per[s] = per.get(s, 0) + 1
    print(f"{a}: {len(left)} transitions over {len(per)} strategies; {b}: {len(right)}")
    for label, lines in ((f"only in {a}", only_a), (f"only in {b}", only_b)):
        if lines:
            print(f"{len(lines)} {label}, e.g.:")
            for line in lines[:5]:
                print("   ", line[:300])
    if not (only_a or only_b):
        print("identical")
    return 1 if only_a or only_b else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write a snapshot here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    parser.add_argument("--golden", type=Path, default=GOLDEN)
    parser.add_argument("--limit", type=int, help="only the first N golden and N zoo programs")
    parser.add_argument("--shard", default="0/1", help="K/N: only programs number K mod N, to "
                                                      "run N processes side by side (concatenate "
                                                      "their files before --compare)")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        parser.error("give --out or --compare")
    k, n = (int(x) for x in args.shard.split("/"))
    snapshot(args.out, args.golden, args.limit, (k, n))
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
