"""Exhaustive exploration on a fixed suite of tiny zoo programs (issue 12, docs/EXPLORE.md).

Per program (smallest zoo shapes, seed 0): programs at each depth (closure where reached; for
a factored exploration counted over the whole space, ``complete`` says whether the time limit
cut it), the space e-graph's classes and nodes, the time of the e-graph explorer and of the
naive oracle side by side (ratio) at ``--naive-depth`` (no program cap there; the compared
exploration is the root's second, so the oracle against its first, where that explored to the
same depth, is reported beside it: "first CPU ratio"), the best
measured speedup over the root among the cost model's top ``--top`` (extracted from the whole
space; verified Equal/Independent against the root, TVM llvm opt-level 3) and torch eager on
the same inputs, and the Spearman rank correlation between the cost model and the measured
time on a seeded sample of ``--sample`` explored programs. Writes JSON and three plots
(programs per depth, log scale; time vs programs explored for both explorers; modelled vs
measured time).

    python benchmarks/exploration.py                           (the whole suite: long)
    python benchmarks/exploration.py --programs 5 --depth 2 --top 4 --sample 6   (minutes)
    python benchmarks/exploration.py --strategies mixed ...    (all four categories)

``--strategies kernel`` (default) is the eight loop strategies, explored factored
(docs/EXPLORE.md); ``mixed`` is ten strategies of all four categories, explored program by
program. Every exploration runs under ``--time-limit`` seconds and holds at most
``--max-programs`` programs; a row says which budget stopped it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's leir_egraph
from cost_model import spearman  # noqa: E402  (one Spearman for every benchmark)
from results_file import recorded  # noqa: E402

# Every family, smallest shapes; softmax, a GEMM chain, a conv, normalisations, an attention.
SUITE = ["ReLU", "Sigmoid", "softmax", "GELU", "Matmul_with_small_K_dimension",
         "Matrix_vector_multiplication", "L1Norm", "LayerNorm", "Max_reduction_over_a_dimension",
         "Sum_reduction_over_a_dimension", "cumsum", "Max_Pooling_1D", "Average_Pooling_2D",
         "conv_standard_1D", "conv_transposed_1D", "MSELoss", "Gemm_Add_ReLU",
         "Gemm_Divide_Sum_Scaling", "ScaledDotProductAttention", "RMSNorm"]
# The kernel-local strategies (every loop strategy): explored factored (explore/factored.py).
KERNEL = ["loop_reorder", "loop_split", "loop_tiling", "loop_unrolling", "loop_parallelization",
          "loop_vectorization", "loop_binding", "loop_fusion"]
# A mixed set of all four categories: explored program by program.
STRATEGIES = ["loop_reorder", "loop_fusion", "loop_parallelization", "loop_vectorization",
              "loop_unrolling", "compute_inline", "set_storage_scope", "expression_splitting",
              "exponential_split", "operator_fission"]


def run_one(kind: str, args) -> dict:
    from leir_egraph.explore import explore, naive
    from leir_egraph.explore.measure import best_keys, measure, sample, torch_eager_ms, tvm_ms
    from leir_egraph.frontend import from_torch
    from leir_egraph.workloads import KINDS, instantiate

    module, inputs, _ = instantiate(kind, seed=0)
    root = from_torch(module, inputs, name=kind)
    budget = dict(max_programs=args.max_programs, time_limit=args.time_limit)
    row: dict = {"kind": kind, "family": KINDS[kind].family, "nests": len(root.leir.nests)}
    space = explore(root, args.strategies, depth=args.depth, **budget)
    space.space_egraph()   # its rounds' e-graph statistics (built after, not timed)
    row.update(per_depth=space.space_counts(), programs=sum(space.space_counts()),
               held=len(space), complete=space.space_complete, method=space.method,
               stopped=space.stopped, explore_s=space.seconds,
               explore_cpu_s=space.cpu_seconds,
               peak_rss_mb=max((r.peak_rss_mb for r in space.rounds), default=None),
               eclasses=space.rounds[-1].eclasses if space.rounds else 0,
               enodes=space.rounds[-1].enodes if space.rounds else 0,
               rounds=[r.to_dict() for r in space.rounds])
    # explorer vs oracle at the same depth and budgets
    d = min(args.naive_depth, args.depth)
    compare = dict(time_limit=args.time_limit)   # no program cap: both must find everything
    naive(root, args.strategies, depth=1, max_programs=2)   # the oracle's engine compiled too
    # CPU seconds as the explorations count them: the process's, and for the shared method
    # its database's process too (explore/worker.py)
    fast = explore(root, args.strategies, depth=d, **compare)
    slow = naive(root, args.strategies, depth=d, **compare)
    fast_cpu, slow_cpu = fast.cpu_seconds, slow.cpu_seconds
    row.update(compare_depth=d, egraph_s=fast.seconds, naive_s=slow.seconds,
               egraph_cpu_s=fast_cpu, naive_cpu_s=slow_cpu, compare_method=fast.method,
               ratio=slow.seconds / fast.seconds if fast.seconds and d > 0 else None,
               ratio_cpu=slow_cpu / fast_cpu if fast_cpu and d > 0 else None,
               # the compared exploration is the root's second (after ``space``), with the
               # providers' program-keyed memos warm: the first one's ratio beside it, where
               # it explored to the same depth (state one leaves for the next shows here)
               ratio_cpu_first=(slow_cpu / row["explore_cpu_s"]
                                if d == args.depth and d > 0 and row["explore_cpu_s"] else None),
               compare_programs=len(slow),
               same_programs=fast.keys() == slow.keys(), compare_stopped=[fast.stopped,
                                                                         slow.stopped])
    if args.per_program and fast.method == "shared":
        alone = explore(root, args.strategies, depth=d, method="egraph", **compare)
        row.update(per_program_s=alone.seconds, per_program_cpu_s=alone.cpu_seconds,
                   same_programs=row["same_programs"] and alone.keys() == slow.keys())
    print(f"{kind}: {space.space_counts()} ({space.stopped}, {space.method}), e-graph {row['eclasses']} classes / "
          f"{row['enodes']} nodes, explored in {space.seconds:.1f} s wall, "
          f"{row['explore_cpu_s']:.1f} s CPU, peak RSS {row['peak_rss_mb'] or 0:.0f} MB; "
          f"depth {d}: explorer {fast.seconds:.2f} s, naive "
          f"{slow.seconds:.2f} s, same {row['same_programs']}", file=sys.stderr, flush=True)
    # top-k by the cost model and a seeded sample, measured once each
    ranked = best_keys(space, args.top)
    sampled = sample(space, args.sample, seed=args.seed)
    keys = list(dict.fromkeys(ranked + sampled))
    measured = {m.program: m for m in measure(space, keys, timeout=args.timeout,
                                              seed=args.seed)} if keys else {}
    top = [measured[k] for k in ranked]
    valid = [m for m in top if m.valid and m.speedup]
    best = max(valid, key=lambda m: m.speedup) if valid else None
    row.update(top=[m.to_dict() for m in top], best_speedup=best.speedup if best else None,
               root_ms=top[0].root_ms if top else None)
    pts = [(measured[k].modelled_s, measured[k].time_ms) for k in sampled
           if measured[k].valid and measured[k].time_ms]
    row.update(sample_equal=sum(measured[k].equal for k in sampled), sample_size=len(sampled),
               sample_points=pts,
               spearman=spearman([a for a, _ in pts], [b for _, b in pts]) if len(pts) >= 3
               else None)
    if best is not None:
        row["torch_eager_ms"] = torch_eager_ms(module, inputs)
        row["root_tvm_ms_same_inputs"] = tvm_ms(root, inputs)
        row["best_tvm_ms_same_inputs"] = tvm_ms(space.programs[best.program], inputs)
        row["best_vs_torch"] = row["torch_eager_ms"] / row["best_tvm_ms_same_inputs"]
    print(f"{kind}: best of top-{args.top} {row['best_speedup'] or 0:.3g}x over the root, "
          f"sample {row['sample_equal']}/{row['sample_size']} equal, spearman {row['spearman']}",
          file=sys.stderr, flush=True)
    return row


def plots(rows: list[dict], out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    fig, ax = plt.subplots(figsize=(7, 5))
    for r in rows:
        ax.plot(range(len(r["per_depth"])), [max(c, 1) for c in r["per_depth"]], marker="o",
                label=r["kind"][:18])
    ax.set_yscale("log")
    ax.set_xlabel("depth")
    ax.set_ylabel("distinct programs")
    ax.legend(fontsize=5)
    fig.tight_layout()
    files.append(str(out.with_suffix(".programs.png")))
    fig.savefig(files[-1], dpi=120)
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter([r["compare_programs"] for r in rows], [r["egraph_s"] for r in rows],
               label="e-graph explorer")
    ax.scatter([r["compare_programs"] for r in rows], [r["naive_s"] for r in rows],
               label="naive oracle")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"programs explored (depth <= {rows[0]['compare_depth']})")
    ax.set_ylabel("seconds")
    ax.legend()
    fig.tight_layout()
    files.append(str(out.with_suffix(".times.png")))
    fig.savefig(files[-1], dpi=120)
    fig, ax = plt.subplots(figsize=(5, 5))
    for r in rows:
        if r["sample_points"]:
            ax.scatter([a * 1e3 for a, _ in r["sample_points"]], [b for _, b in r["sample_points"]],
                       s=10, label=r["kind"][:18])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cost model (ms)")
    ax.set_ylabel("measured TVM llvm (ms)")
    if any(r["sample_points"] for r in rows):
        ax.legend(fontsize=5)
    fig.tight_layout()
    files.append(str(out.with_suffix(".cost.png")))
    fig.savefig(files[-1], dpi=120)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=len(SUITE), help="first N of the suite")
    ap.add_argument("--kinds", help="comma-separated zoo kinds instead of the suite")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--naive-depth", type=int, default=2,
                    help="depth of the side-by-side timing (0: skip it)")
    ap.add_argument("--strategies", default="kernel",
                    help="comma-separated ids, or 'kernel' (the loop strategies, explored "
                         "factored), 'mixed' (ten of all four categories) or 'all' (the 43)")
    ap.add_argument("--per-program", action="store_true",
                    help="also time the per-program method (method='egraph') beside the shared one")
    ap.add_argument("--max-programs", type=int, default=20_000)
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per exploration")
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--sample", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per verification")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/out/exploration.json",
                    help="raw rows and plots (benchmarks/out/ is ignored by git)")
    args = ap.parse_args(argv)
    named = {"kernel": KERNEL, "mixed": STRATEGIES}
    args.strategies = (None if args.strategies == "all" else named.get(args.strategies)
                       or [s for s in args.strategies.split(",") if s])
    kinds = args.kinds.split(",") if args.kinds else SUITE[:args.programs]
    start = time.perf_counter()
    rows = [run_one(k, args) for k in kinds]
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    speedups = [r["best_speedup"] for r in rows if r["best_speedup"]]
    rhos = [r["spearman"] for r in rows if r["spearman"] is not None]
    summary = {
        "programs": len(rows), "strategies": args.strategies, "depth": args.depth,
        "median_ratio_naive_over_egraph": statistics.median(ratios) if ratios else None,
        "median_cpu_ratio_naive_over_egraph": statistics.median(
            [r["ratio_cpu"] for r in rows if r.get("ratio_cpu")] or [0]),
        "median_cpu_ratio_naive_over_first_exploration": statistics.median(
            [r["ratio_cpu_first"] for r in rows if r.get("ratio_cpu_first")] or [0]),
        "median_cpu_ratio_per_program_over_shared": statistics.median(
            [r["per_program_cpu_s"] / r["egraph_cpu_s"] for r in rows
             if r.get("per_program_cpu_s") and r["egraph_cpu_s"]] or [0]),
        "median_best_speedup": statistics.median(speedups) if speedups else None,
        "sample_equal": sum(r["sample_equal"] for r in rows),
        "sample_size": sum(r["sample_size"] for r in rows),
        "median_spearman": statistics.median(rhos) if rhos else None,
        "all_same_programs": all(r["same_programs"] for r in rows),
        "seconds": time.perf_counter() - start}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    summary["plots"] = plots(rows, out)
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print("| kind | per depth | method | stopped | classes | nodes | explorer s | naive s | "
          "ratio | explorer CPU s | naive CPU s | CPU ratio | first CPU ratio | "
          "per-program CPU s | best top-k | vs torch | spearman |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = (lambda v, p="": f"{v:.3g}{p}" if isinstance(v, (int, float)) else "-")
        print(f"| {r['kind'][:28]} | {r['per_depth']} | {r['method']} | {r['stopped']} | "
              f"{r['eclasses']} | "
              f"{r['enodes']} | {f(r['egraph_s'])} | {f(r['naive_s'])} | {f(r['ratio'], 'x')} | "
              f"{f(r['egraph_cpu_s'])} | {f(r['naive_cpu_s'])} | {f(r['ratio_cpu'], 'x')} | "
              f"{f(r.get('ratio_cpu_first'), 'x')} | {f(r.get('per_program_cpu_s'))} | "
              f"{f(r['best_speedup'], 'x')} | {f(r.get('best_vs_torch'), 'x')} | "
              f"{f(r['spearman'])} |")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
