"""The datasets of the paper's experiments from the zoo: a held-out split, the four ablation
variants of Tables 5-6, and multi-step trajectories, with their counts next to the paper's and
what the variants and trajectories cost relative to the plain run.

    .venv/bin/python benchmarks/paper_datasets.py [--programs SEL ...] [--count 2]
        [--dtypes f32,f64] [--strategies LIST] [--per-strategy-cap 1] [--trajectories 2]
        [--max-samples 6] [--workers 2]

1. **The split of the whole zoo** (no building: the assignment is a hash of the kind name):
   kinds per split with the default fractions, and how many test cases a paper-size test
   split would need (the paper: 180 held-out programs, 2,248 test cases by dtype and shape,
   100 multi-step workloads) against what the zoo's kinds give.
2. **A plain run** of ``build_dataset`` on ``--programs`` (wall and CPU seconds).
3. **Split and variants from the same shards**: ``finalize`` again with ``--split`` and
   ``--variants paper`` on the plain run's folder -- the extra cost of the four variants
   is this finalize against the plain run's (the enumeration and verification are shared).
   The counts per split, variant, category and difficulty class are printed next to the
   paper's: 8:9:5:21 strategies per category (graph:operator:memory:math), and
   difficult:medium:easy occurrences of 42:51:7 with filtering and 25:28:47 without.
4. **Trajectories** (``--trajectories N`` programs, greedy, ``--max-samples``) and their cost.

Every figure is measured on this machine; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leir_egraph.dataset import DatasetConfig, Execution, build_dataset  # noqa: E402
from leir_egraph.dataset.build import finalize, run_identity  # noqa: E402
from leir_egraph.dataset.report import markdown_table  # noqa: E402
from leir_egraph.dataset.shards import OutputFolder  # noqa: E402
from leir_egraph.dataset.sources import select_programs  # noqa: E402
from leir_egraph.dataset.splits import DEFAULT_FRACTIONS, assign  # noqa: E402
from results_file import recorded  # noqa: E402  (benchmarks/ is the script's folder)

SAMPLE = ("ReLU", "softmax", "LayerNorm", "Sum_reduction_over_a_dimension",
          "Argmin_over_a_dimension", "Gemm_Add_ReLU", "GroupNorm", "cumsum")
PAPER = {"test_programs": 180, "test_cases": 2248, "multi_step": 100,
         "categories": {"graph": 8, "operator": 9, "memory": 5, "math": 21},
         "filtered": {"difficult": 42, "medium": 51, "easy": 7},
         "unfiltered": {"difficult": 25, "medium": 28, "easy": 47}}


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn):
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = fn()
    return result, time.perf_counter() - wall, cpu_seconds() - cpu


def shares(counts: dict[str, int]) -> str:
    total = sum(counts.values()) or 1
    return ":".join(f"{round(100 * v / total)}" for v in counts.values())


def zoo_split(seed: int) -> None:
    from leir_egraph.workloads import zoo
    kinds = zoo()
    split = Counter(assign(kinds, seed, DEFAULT_FRACTIONS).values())
    print(f"## 1. The whole zoo's split (seed {seed}, fractions "
          f"{'/'.join(str(f) for f in DEFAULT_FRACTIONS)})\n")
    rows = [{"split": s, "kinds": split.get(s, 0)}
            for s in ("train", "validation", "test", "steptp")]
    print(markdown_table(rows))
    test = split.get("test", 0)
    per = PAPER["test_cases"] / PAPER["test_programs"]
    free = len(kinds) - split.get("steptp", 0)
    print(f"\nThe zoo has {len(kinds)} kinds; {split.get('steptp', 0)} are the kinds of the "
          f"paper's {PAPER['multi_step']} multi-step workloads (held out, as the paper holds "
          f"them out). The paper's single-step test split has {PAPER['test_programs']} programs "
          f"and {PAPER['test_cases']} test cases ({per:.1f} per program). With the default "
          f"fractions the zoo gives {test} test kinds: {test} x 3 dtypes x 4 shape draws = "
          f"{test * 12} test cases. A test split of the paper's size would take "
          f"{PAPER['test_programs']} of the {free} kinds outside the multi-step ones, leaving "
          f"{free - PAPER['test_programs']} for training: the zoo does not allow the paper's "
          "test size next to a useful training set (the paper trains on 6,335 programs).\n")


def zoo_leaks(seed: int) -> None:
    """Instantiate every zoo kind (small, f32, one draw) and list kinds whose shape-free forms
    coincide: pairs a split could leak between."""
    from leir_egraph.dataset.sources import FrontendFailure, load_program
    from leir_egraph.dataset.splits import shape_free_form, split_of
    from leir_egraph.workloads import zoo
    start = time.perf_counter()
    forms: dict[str, list[str]] = {}
    failed = 0
    for kind in zoo():
        try:
            program = load_program(select_programs([kind], seed=seed)[0])
        except FrontendFailure:
            failed += 1
            continue
        forms.setdefault(shape_free_form(program.text), []).append(kind)
    shared = [ks for ks in forms.values() if len(ks) > 1]
    crossing = [ks for ks in shared if len({split_of(k, seed) for k in ks}) > 1]
    print(f"## Zoo-wide leak scan\n\n{len(zoo()) - failed} kinds translated ({failed} failed) "
          f"in {time.perf_counter() - start:.0f} s: {len(forms)} distinct shape-free forms; "
          f"{len(shared)} forms shared by several kinds, {len(crossing)} of them across splits "
          f"with seed {seed} (a --split run holding both would be refused):\n")
    for ks in shared:
        print(f"- {', '.join(f'{k} ({split_of(k, seed)})' for k in ks)}")
    print()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--programs", nargs="+", default=list(SAMPLE))
    p.add_argument("--count", type=int, default=2, help="shape draws per kind")
    p.add_argument("--dtypes", default="f32,f64")
    p.add_argument("--strategies", default="", help="comma-separated (default: all)")
    p.add_argument("--per-strategy-cap", type=int, default=1)
    p.add_argument("--trajectories", type=int, default=2, help="programs searched")
    p.add_argument("--max-samples", type=int, default=6)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--merge-equal-kinds", action="store_true",
                   help="split kinds that are one program up to shape together (needed for "
                        "selections holding such kinds, e.g. 'level1:*')")
    p.add_argument("--zoo-leaks", action="store_true",
                   help="translate every zoo kind and list shape-free forms shared by kinds")
    p.add_argument("--only-zoo", action="store_true", help="sections 1 (and the scan) only")
    args = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}\n")
    zoo_split(args.seed)
    if args.zoo_leaks:
        zoo_leaks(args.seed)
    if args.only_zoo:
        return 0

    strategies = tuple(s for s in args.strategies.split(",") if s)
    plain = DatasetConfig(programs=tuple(args.programs), count=args.count,
                          dtypes=tuple(args.dtypes.split(",")), strategies=strategies,
                          per_strategy_cap=args.per_strategy_cap, seed=args.seed,
                          cuda_source=False)
    out = Path(tempfile.mkdtemp(prefix="paper-datasets-")) / "out"
    result, wall, cpu = timed(lambda: build_dataset(plain, Execution(out=out,
                                                                     workers=args.workers,
                                                                     quiet=True)))
    s = result.summary
    print(f"## 2. Plain run\n\n{s['programs']} programs (selectors {' '.join(args.programs)}: "
          f"{args.count} draw(s) x {args.dtypes}), {s['transitions']} transitions, "
          f"{s['verified']} verified: {wall:.1f} s wall, {cpu:.1f} CPU s (this process and "
          "its workers)\n")

    sources = select_programs(list(plain.programs), count=plain.count, dtypes=plain.dtypes,
                              seed=plain.seed)
    folder = OutputFolder(out)
    folder.start(run_identity(plain, sources), resume=True)
    _, base_wall, base_cpu = timed(lambda: finalize(folder, plain))
    split = DatasetConfig(**{**plain.to_dict(), "split": DEFAULT_FRACTIONS,
                             "variants": "paper",
                             "merge_equal_kinds": args.merge_equal_kinds})
    (summary, _), var_wall, var_cpu = timed(lambda: finalize(folder, split))
    print("## 3. Split and the four variants from the same shards\n")
    print(f"finalize of the plain run: {base_wall:.2f} s wall ({base_cpu:.2f} CPU s); with "
          f"--split --variants paper: {var_wall:.2f} s ({var_cpu:.2f} CPU s): the variants add "
          f"{var_wall - base_wall:.2f} s, {100 * (var_wall - base_wall) / wall:.1f}% of the "
          "plain run's wall time\n")
    print(markdown_table(summary["splits"]))
    rows = []
    for name, c in summary["chat"].items():
        rows.append({"set": name, "verified": c["verified"], "single": c["single"],
                     "multi": c["multi"],
                     "difficult:medium:easy": ":".join(str(v) for v in c["classes"].values()),
                     "%": shares(c["classes"]),
                     "paper %": ":".join(str(v) for v in
                                         PAPER["unfiltered" if "nofilter" in name
                                               else "filtered"].values())})
    print("\n" + markdown_table(rows))
    categories = Counter()
    for r in summary["strategies"]:
        categories[r["category"]] += r["kept"]
    from leir_egraph.egraph.steps import default_strategies
    ours = Counter(st.category for st in default_strategies())
    print("\nCategories (training set, full variant; occurrences) and strategies per category "
          "(ours vs the paper's 8:9:5:21):\n")
    print(markdown_table([{"category": c, "occurrences": categories.get(c, 0),
                           "strategies": ours.get(c, 0), "paper strategies": n}
                          for c, n in PAPER["categories"].items()]))

    if args.trajectories:
        from leir_egraph.dataset.trajectories import build_trajectories
        tconfig = DatasetConfig(**{**plain.to_dict(), "dtypes": (plain.dtypes[0],), "count": 1,
                                   "programs": tuple(dict.fromkeys(
                                       src.name for src in sources))[:args.trajectories],
                                   "split": DEFAULT_FRACTIONS,
                                   "merge_equal_kinds": args.merge_equal_kinds})
        tout = out.parent / "trajectories"
        t, t_wall, t_cpu = timed(lambda: build_trajectories(
            tconfig, Execution(out=tout, quiet=True), max_samples=args.max_samples))
        per_program_plain = wall / max(s["programs"], 1)
        print(f"\n## 4. Trajectories ({args.trajectories} programs, greedy, "
              f"{args.max_samples} samples each)\n")
        print(json.dumps({k: v for k, v in t.items() if k != "machine"}))
        print(f"\n{t_wall:.1f} s wall ({t_cpu:.1f} CPU s): {t_wall / max(t['programs'], 1):.1f} s "
              f"per program against {per_program_plain:.1f} s per program in the plain run "
              f"({t_wall / max(t['programs'], 1) / per_program_plain:.1f}x); machine: "
              f"{t['machine']}")
    print(f"\nload average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
