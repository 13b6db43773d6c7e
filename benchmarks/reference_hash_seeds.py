"""How many of the reference's moves depend on Python's string hashing.

    python benchmarks/reference_hash_seeds.py --reference-dir /path/to/StepTP [--seeds 0,1]
        [--programs golden|corpus] [--strategies a,b] [--limit N] [--json R]

The Step-TP reference iterates over ``list(set(...))`` of strings in places (the loops and
dimensions of expression_splitting's new nest, which loops get marked parallel or bound, ...),
so its output depends on ``PYTHONHASHSEED`` (reference_steptp.py). This runs the reference's
strategies (a checkout the user fetched; nothing of it is vendored) on the same programs once
per hash seed, each in a child process started with that seed, and prints per strategy how many
of its distinct moves under the first seed it makes under every other seed too -- compared in
our canonical form (``exact_canonical_text``: up to names of new tensors and indices). Only
moves from the program itself count (the swapped strategies' pairs from another original are
left out). Strategies whose moves are all stable are summed but not listed.

The latest figures: benchmarks/results/reference_hash_seeds.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from reference_recall import SOURCES, canonical_or_none, known_names, load_rows  # noqa: E402
from reference_steptp import SHARED_STRATEGIES, ReferenceStrategies  # noqa: E402
from results_file import recorded  # noqa: E402


def dump(args) -> None:
    """Child: the reference's outputs from each program, per strategy, under this process's
    hash seed, as JSON (strategy -> program id -> sorted output texts)."""
    reference = ReferenceStrategies(args.reference_dir)
    rows = load_rows(args.programs, args.dtype, args.limit)
    wanted = args.strategies.split(",") if args.strategies else list(SHARED_STRATEGIES)
    out = {}
    for sid in wanted:
        if not reference.has(sid):
            continue
        out[sid] = {}
        for row in rows:
            result = reference.steps(row["leir"], known_names(row), sid, seed=0)
            out[sid][row["id"]] = sorted({o for before, o in result.pairs if before == row["leir"]})
    Path(args.dump).write_text(json.dumps(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference-dir", required=True)
    ap.add_argument("--seeds", default="0,1", help="comma-separated PYTHONHASHSEED values")
    ap.add_argument("--programs", choices=tuple(SOURCES), default="golden")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--strategies", help="comma-separated strategy ids (default: all shared)")
    ap.add_argument("--json", help="write the per-strategy counts here")
    ap.add_argument("--dump", help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    if args.dump:
        dump(args)
        return 0

    seeds = [int(s) for s in args.seeds.split(",")]
    if len(seeds) < 2:
        ap.error("--seeds needs at least two seeds to compare")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            path = Path(tmp) / f"seed{seed}.json"
            child = ["--reference-dir", args.reference_dir, "--programs", args.programs,
                     "--dtype", args.dtype, "--dump", str(path)]
            child += ["--limit", str(args.limit)] if args.limit else []
            child += ["--strategies", args.strategies] if args.strategies else []
            subprocess.run([sys.executable, __file__, *child], check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)})
            runs.append(json.loads(path.read_text()))
    rows = {r["id"]: r for r in load_rows(args.programs, args.dtype, args.limit)}
    report, total, stable_total = {}, 0, 0
    print(f"{len(rows)} {args.programs} {args.dtype} programs, hash seeds {seeds}")
    print(f"{'strategy':<56}{'moves':>8}{'stable':>8}{'share':>8}")
    for sid in runs[0]:
        moves = stable = 0
        for pid, texts in runs[0][sid].items():
            sets = [{canonical_or_none(t, rows[pid]) for t in run[sid][pid]} - {None}
                    for run in runs]
            moves += len(sets[0])
            stable += len(set.intersection(*sets))
        report[sid] = {"moves": moves, "stable": stable}
        total, stable_total = total + moves, stable_total + stable
        if stable != moves:
            print(f"{sid:<56}{moves:>8}{stable:>8}{100 * stable / moves:>7.1f}%")
    share = 100 * stable_total / total if total else 100.0
    print(f"{'all ' + str(len(runs[0])) + ' strategies':<56}{total:>8}{stable_total:>8}{share:>7.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps({"seeds": seeds, "strategies": report}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
