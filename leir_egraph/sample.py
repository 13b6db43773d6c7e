"""``python -m leir_egraph.sample``: build the Step-TP dataset (docs/DATASET.md).

With no arguments it runs the demo: a few small zoo programs, every strategy, seed 0, at most
DEMO_CAP transitions per program and strategy, written to ./leir-out/.
"""

from __future__ import annotations

import argparse
import sys

from .cli import (ArgumentParser, InputError, add_threads_option, bounded, natural,
                  positive_float, positive_int, run_command)
from .dataset import DEMO_PROGRAMS, DatasetConfig, Execution, build_dataset
from .dataset.report import enumerated_label, markdown_table
from .dataset.splits import DEFAULT_FRACTIONS, SplitLeakError
from .search.budgets import DEFAULTS

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
  python -m leir_egraph.sample --programs '*' --count 4 --dtypes f16,f32,f64 --split \\
      --merge-equal-kinds --variants paper --per-strategy-cap 1 --out out/paper
      held-out splits by kind, test cases per dtype and shape, the four ablation datasets
  python -m leir_egraph.sample --trajectories --programs 'level1:*' --split \\
      --merge-equal-kinds --out out/traj
      verified multi-step trajectories and preference pairs from the search

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
    g.add_argument("--dtypes", type=dtype_list, metavar="LIST",
                   help="comma-separated zoo dtypes, every zoo program once per dtype (e.g. "
                        "f16,f32,f64; integer inputs stay integer); replaces --dtype")
    g = p.add_argument_group("splits (docs/DATASET.md, \"Splits\")")
    default_split = ",".join(str(f) for f in DEFAULT_FRACTIONS)
    g.add_argument("--split", nargs="?", const=default_split, type=fractions, metavar="T,V,T",
                   help="assign whole kinds to train/validation/test by a hash of the kind name "
                        f"and --seed (fractions, default {default_split}), refuse a run where a "
                        "program of one split is a renamed/reshaped copy of another's, and "
                        "write chat sets and test cases per split")
    g.add_argument("--steptp-in-training", action="store_true",
                   help="with --split: draw the kinds of the paper's 100 multi-step test "
                        "workloads like any other (default: held out in split 'steptp')")
    g.add_argument("--merge-equal-kinds", action="store_true",
                   help="with --split: kinds that are one program up to names and shapes (the "
                        "zoo's square/standard matmuls, MQA/GQA, ...) share one split instead "
                        "of making the leakage check refuse the run")
    g = p.add_argument_group("variants (the paper's Tables 5-6)")
    g.add_argument("--representation", choices=("leir", "tir"), default="leir",
                   help="prompts and answers in LEIR or in TVM TIR text (default leir)")
    g.add_argument("--no-cot", action="store_true",
                   help="answers without the chain of thought (<answer> only)")
    g.add_argument("--no-filter", action="store_true",
                   help="no difficulty balancing: every verified transition")
    g.add_argument("--variants", choices=("paper",),
                   help="write the paper's four ablation datasets side by side from this one "
                        "run (TIR without CoT, LEIR without CoT, LEIR without filtering, full) "
                        "under chat/<variant>/; replaces the three options above")
    g = p.add_argument_group("trajectories (multi-step data; docs/DATASET.md, \"Trajectories\")")
    g.add_argument("--trajectories", action="store_true",
                   help="instead of the single-step dataset, search every program (rules "
                        "proposer, paired timing against the root) and write verified "
                        "multi-step trajectories and preference pairs under trajectories/")
    g.add_argument("--algorithm", default="greedy",
                   choices=sorted(DEFAULTS),
                   help="search algorithm for --trajectories (default greedy)")
    g.add_argument("--max-samples", type=positive_int, default=8, metavar="N",
                   help="candidates judged per program with --trajectories (default 8)")
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
    add_threads_option(g)
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
                   help="continue an interrupted run in --out (same settings required): "
                        "files that match their manifest checksums are kept (finished shards; "
                        "with --trajectories, finished programs' searches)")
    g.add_argument("--shard-size", type=positive_int, default=8,
                   help="programs per output shard (default 8)")
    g.add_argument("--program-timeout", type=positive_float, default=3600.0, metavar="S",
                   help="a program still running after S seconds is recorded as failed")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def dtype_list(text: str) -> tuple[str, ...]:
    dtypes = tuple(dict.fromkeys(d.strip() for d in text.split(",") if d.strip()))
    bad = [d for d in dtypes if d not in ("f16", "f32", "f64")]
    if bad or not dtypes:
        raise argparse.ArgumentTypeError(f"expected dtypes among f16,f32,f64, got {text!r}")
    return dtypes


def fractions(text: str) -> tuple[float, float, float]:
    from .dataset.splits import parse_fractions
    try:
        return parse_fractions(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def config_from(args: argparse.Namespace) -> DatasetConfig:
    if args.variants and (args.no_cot or args.no_filter or args.representation != "leir"):
        raise InputError("argument --variants: writes its own set of variants; leave out "
                         "--representation, --no-cot and --no-filter")
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
        multi_max_entries=args.multi_max_entries, dtypes=args.dtypes or (),
        split=args.split, hold_steptp=not args.steptp_in_training,
        merge_equal_kinds=args.merge_equal_kinds,
        representation=args.representation, cot=not args.no_cot, filter=not args.no_filter,
        variants=args.variants)


def main(argv: list[str] | None = None) -> int:
    """Run the sampler with the command-line policy of ``leir`` (one-line errors, exit
    status 2 for bad input; see leir_egraph/cli.py)."""
    p = parser()
    p.set_defaults(handler=run)
    return run_command(p, argv)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    if args.trajectories:
        return run_trajectories(args, config)
    execution = Execution(out=args.out, workers=args.workers, executor=args.executor,
                          ray_address=args.ray_address, resume=args.resume,
                          overwrite=args.overwrite, quiet=args.quiet,
                          program_timeout=args.program_timeout)
    try:
        result = build_dataset(config, execution)
    except OSError as err:  # a full disk, a read-only --out, an unreadable input
        where = err.filename if err.filename is not None else args.out
        raise InputError(f"{where}: {err.strerror or err}") from None
    except SplitLeakError as err:  # refused before any work (build.refuse_leaks_early)
        raise InputError(f"{args.out}: {err}") from None
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


def run_trajectories(args: argparse.Namespace, config: DatasetConfig) -> int:
    from .dataset.trajectories import build_trajectories
    execution = Execution(out=args.out, overwrite=args.overwrite, quiet=args.quiet,
                          resume=args.resume)

    def shown(line):
        if not args.quiet:
            print(f"{line['program_id']}: {len(line['steps'])} steps, speedup "
                  f"{line['final_speedup']:.2f}x", file=sys.stderr)
    try:
        s = build_trajectories(config, execution, algorithm=args.algorithm,
                               max_samples=args.max_samples, on_program=shown)
    except OSError as err:
        where = err.filename if err.filename is not None else args.out
        raise InputError(f"{where}: {err.strerror or err}") from None
    except SplitLeakError as err:
        raise InputError(f"{args.out}: {err}") from None
    print(markdown_table([{"": k, "count": str(v)} for k, v in s.items() if k != "machine"]),
          end="")
    print(f"\nwrote {args.out}/trajectories/ (machine: {s['machine']['cpu']}, "
          f"{s['machine']['cores']} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
