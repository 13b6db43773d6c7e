"""``python -m leir_egraph.sample``: build the Step-TP dataset (docs/DATASET.md).

With no arguments it runs the demo: a few small zoo programs, every strategy, seed 0, at most
DEMO_CAP transitions per program and strategy, written to ./leir-out/.
"""

from __future__ import annotations

import argparse
import sys

from .cli import (ArgumentParser, InputError, bounded, natural, positive_float, positive_int,
                  run_command)
from .dataset import DEMO_PROGRAMS, DatasetConfig, Execution, build_dataset
from .dataset.report import enumerated_label, markdown_table

DEMO_CAP = 1

EXAMPLES = f"""\
examples:
  python -m leir_egraph.sample
      the demo: {' '.join(DEMO_PROGRAMS)}, all strategies, seed 0, cap {DEMO_CAP}, -> ./leir-out/
  python -m leir_egraph.sample --programs 'level1:*' --count 3 --workers 2 --out out/l1
      three seeded instances of every level-1 zoo kind
  python -m leir_egraph.sample --programs Gemm_Add_ReLU softmax --strategies loop_split,memory
      two kinds, the loop_split strategy and every memory-category strategy
  python -m leir_egraph.sample --programs model.py prog.leir corpus.jsonl --rules my_rules/
      a KernelBench-style PyTorch file, a LEIR file (+ prog.sig.json), a LEIR corpus, and
      extra rule files
  python -m leir_egraph.sample --programs 'level2:*' --size paper --executor ray \\
      --ray-address auto --out out/l2 --resume
      on a Ray cluster; --resume continues a killed run

The output folder must be new, empty, or one this tool wrote (it keeps a manifest there and
removes only the files listed in it); --overwrite writes into another non-empty folder without
removing anything. Exit status: 0 done (failed programs are recorded, not fatal), 2 bad input
(selectors, options, rule files, output folder), 3 internal error, 130/143 interrupted.
"""


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="python -m leir_egraph.sample",
        description="Enumerate every single-step rewrite of tensor programs, verify each on TVM, "
                    "and write the Step-TP dictionary dataset, the balanced chat-template "
                    "datasets, a report and plots.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("programs")
    g.add_argument("--programs", nargs="+", metavar="SEL",
                   help="zoo kinds or globs (ReLU, 'Gemm_*', 'level1:*', 'level2:Conv*', "
                        "family:attention, composed, '*'), .py files (Model + get_inputs()/"
                        "get_init_inputs(), or model + example_inputs), .leir files (with "
                        "NAME.sig.json beside), .jsonl corpora (leir, signature, name), or "
                        f"folders of those (default: the demo, {' '.join(DEMO_PROGRAMS)})")
    g.add_argument("--count", type=positive_int, default=1,
                   help="instances per zoo kind, instancing seeds SEED..SEED+COUNT-1 (default 1)")
    g.add_argument("--size", choices=("small", "paper"), default="small",
                   help="zoo shape ranges (default small)")
    g.add_argument("--dtype", choices=("f16", "f32", "f64"), default="f32",
                   help="zoo dtype (default f32)")
    g = p.add_argument_group("strategies")
    g.add_argument("--strategies", metavar="LIST",
                   help="comma-separated strategy ids or categories (graph, operator, memory, "
                        "math); default: every strategy")
    g.add_argument("--rules", metavar="DIR", action="append", default=[],
                   help="extra rule directory (repeatable); its files add strategies")
    g.add_argument("--per-strategy-cap", type=positive_int, metavar="N",
                   help="keep at most N transitions per program and strategy, a seeded choice "
                        f"(default: all; the demo uses {DEMO_CAP})")
    g.add_argument("--undo-steps", action="store_true",
                   help="also keep each kept step read backwards as a step of its inverse "
                        "strategy (expand_powsimp from powsimp, ...), as the paper's data has them")
    g = p.add_argument_group("verification")
    g.add_argument("--target", choices=("llvm", "cuda"), default="llvm",
                   help="lowering/verification target (CUDA source is emitted either way)")
    g.add_argument("--trials", type=positive_int, default=3,
                   help="random input sets per check (default 3)")
    g.add_argument("--verify-timeout", type=positive_float, default=60.0, metavar="S",
                   help="seconds of TVM work per verification (default 60)")
    g.add_argument("--timing", action="store_true",
                   help="measure run times and speedups (measurements differ between runs, so "
                        "the time columns are the only bytes that do)")
    g.add_argument("--no-cuda-source", action="store_true",
                   help="skip emitting CUDA C for every before/after program")
    g = p.add_argument_group("balancing")
    g.add_argument("--medium-cap", type=natural, default=2000,
                   help="occurrences per medium strategy in the multi-answer set (default 2000)")
    g.add_argument("--multi-max-answers", type=bounded(int, 2), default=8,
                   help="answers per multi-answer example, at most (default 8)")
    g.add_argument("--multi-max-entries", type=positive_int, default=3,
                   help="multi-answer examples drawn per original program, at most (default 3)")
    g = p.add_argument_group("run")
    g.add_argument("--seed", type=natural, default=0,
                   help="seed of every random choice, >= 0 (default 0)")
    g.add_argument("--out", default="leir-out", help="output folder (default ./leir-out)")
    g.add_argument("--overwrite", action="store_true",
                   help="write into a non-empty --out folder this tool did not create (files "
                        "of its names are replaced; nothing is removed)")
    g.add_argument("--workers", type=positive_int, default=2,
                   help="parallel workers (default 2)")
    g.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local process pool, or Ray (default local)")
    g.add_argument("--ray-address", metavar="ADDR",
                   help="Ray cluster to join ('auto' or host:port); default: a local Ray with "
                        "--workers CPUs")
    g.add_argument("--resume", action="store_true",
                   help="continue an interrupted run in --out (same settings required)")
    g.add_argument("--shard-size", type=positive_int, default=8,
                   help="programs per output shard (default 8)")
    g.add_argument("--program-timeout", type=positive_float, default=3600.0, metavar="S",
                   help="a program still running after S seconds is recorded as failed")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def config_from(args: argparse.Namespace) -> DatasetConfig:
    demo = args.programs is None
    cap = args.per_strategy_cap if args.per_strategy_cap is not None else (DEMO_CAP if demo else None)
    strategies = tuple(s.strip() for s in (args.strategies or "").split(",") if s.strip())
    return DatasetConfig(
        programs=tuple(args.programs or DEMO_PROGRAMS), count=args.count, size=args.size,
        dtype=args.dtype, strategies=strategies, rules=tuple(args.rules), seed=args.seed,
        target=args.target, per_strategy_cap=cap, undo_steps=args.undo_steps,
        trials=args.trials,
        verify_timeout=args.verify_timeout, timing=args.timing,
        cuda_source=not args.no_cuda_source, shard_size=args.shard_size,
        medium_cap=args.medium_cap, multi_max_answers=args.multi_max_answers,
        multi_max_entries=args.multi_max_entries)


def main(argv: list[str] | None = None) -> int:
    """Run the sampler with the command-line policy of ``leir`` (one-line errors, exit
    status 2 for bad input; see leir_egraph/cli.py)."""
    p = parser()
    p.set_defaults(handler=run)
    return run_command(p, argv)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    execution = Execution(out=args.out, workers=args.workers, executor=args.executor,
                          ray_address=args.ray_address, resume=args.resume,
                          overwrite=args.overwrite, quiet=args.quiet,
                          program_timeout=args.program_timeout)
    try:
        result = build_dataset(config, execution)
    except OSError as err:  # a full disk, a read-only --out, an unreadable input
        where = err.filename if err.filename is not None else args.out
        raise InputError(f"{where}: {err.strerror or err}") from None
    s, rates = result.summary, result.rates()
    rows = [
        {"": "programs", "count": f"{s['programs']} ({s['programs_failed']} failed)"},
        {"": enumerated_label(config.per_strategy_cap), "count": str(s["transitions_enumerated"])},
        {"": "transitions verified (attempted)", "count": str(s["transitions"])},
        {"": "verified (Equal/Independent)", "count": str(s["verified"])},
        {"": "failure rows", "count": " ".join(f"{k}={v}" for k, v in
                                               s["failures_by_stage"].items()) or "0"},
        {"": "single-answer examples", "count": str(s["single_answer"])},
        {"": "multi-answer examples", "count": str(s["multi_answer"])},
        {"": "this session", "count": f"{result.programs_processed} programs in "
                                      f"{result.elapsed_s:.1f} s: {rates['programs_per_min']:.1f} "
                                      f"programs/min, {rates['transitions_per_min']:.0f} "
                                      f"transitions/min, {rates['verified_per_min']:.0f} "
                                      "verified/min"},
    ]
    print(markdown_table(rows), end="")
    print(f"\nwrote {result.out}/: {', '.join(result.files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
