"""Our optimised programs against what users run instead (issue 39, item 5).

On the CPU-size workloads of ``benchmarks/search.py`` (the same seeded 30), side by side in
one process, interleaved rounds, at each ``--threads`` count:

* **eager**: the PyTorch module (torch's intra-op threads set to the count);
* **compile**: ``torch.compile`` (inductor, default mode), compiled afresh for each count;
* **root**: our translation of the module, TVM llvm at opt-level 3 (``lower.prepared_calls``);
* **best**: the best program of ``leir search --algorithm beam --max-samples N`` (the rules
  proposer ranked by the cost model; confirmed speedup, docs/SEARCH.md §1), searched at that
  thread count;
* **best_any** (with ``--algorithms`` beyond beam): the fastest of the best programs of those
  algorithms (their confirmed speedups decide);
* **metaschedule**: TVM MetaSchedule's design space replayed at random (``ms_replay.py``:
  PyTorch's program as TVM imports it, each PrimFunc the fastest of ``--ms-samples`` replays),
  where TVM can import and build the workload and its outputs have PyTorch's dtypes (TVM's
  Relax import computes #10's float64 matmul in float32: such a program is not timed).

**Timing.** Every contender is a zero-argument call on inputs made once (the module's seeded
inputs; TVM tensors made from the same arrays). Each is calibrated to a number of calls lasting
at least ``--min-ms`` (from the fastest of five single calls); then ``--rounds`` rounds each time
every contender once (one untimed call, then that many calls,
per-call milliseconds), the order rotating from round to round, so a change of machine load
falls on all of them alike. A contender's time is the median over its rounds. One clock for
all (``time.perf_counter`` around Python calls): TVM's and torch's call overheads (microseconds)
count the same way for both; a user pays them too.

**Figures** (per thread count, medians over the workloads where both sides ran): best /
torch.compile, best / eager, root / best measured here, and the search's confirmed speedup
over the root (the issue's "confirmed speedup over root"). Lower ratios best / peer are better
for us; the issue's targets are best/compile <= 1.0, best/eager <= 1.5, confirmed >= 3x.

Each workload x thread count is one line of ``--out``/results.jsonl (threads the pools really
had, load before and after, dtype, per-contender round times, search metrics with the parallel
finish's record, MetaSchedule's per-function replays or why it could not run); the
verification verdicts are cached in
``--out``/verdicts.jsonl. A run skips rows it already has (same settings), so an interrupted or
staged run resumes; ``--report`` prints the tables of what is there.

    python benchmarks/peers.py --threads 1 --workloads 8             # the first 8 of the 30
    python benchmarks/peers.py --threads 1 2 --workloads 10,62 --algorithms beam greedy
    python benchmarks/peers.py --report
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from results_file import recorded  # noqa: E402
from search import load_rows  # noqa: E402  (benchmarks/search.py: its workloads, its rows)

ALGORITHMS = ["greedy", "beam", "bfs", "dfs", "mcts", "chain", "chain_no_parent"]
CONTENDERS = ("eager", "compile", "root", "best", "best_any", "metaschedule")


def chosen_workloads(spec: str) -> list:
    """The workloads of ``benchmarks/search.py`` (its seeded 30): ``N`` takes the first N,
    ``10,62`` the listed indices (``62,`` one index; each must be one of the 30)."""
    from search import workloads
    thirty = workloads(SimpleNamespace(all=False, seed=0, workloads=30, indices=None))
    if "," not in spec:
        return thirty[:int(spec)]
    wanted = [int(x) for x in spec.split(",") if x.strip()]
    by_index = {e.index: e for e in thirty}
    missing = [i for i in wanted if i not in by_index]
    if missing:
        raise SystemExit(f"--workloads: {missing} not among the 30 workloads of "
                         f"benchmarks/search.py ({sorted(by_index)})")
    return [by_index[i] for i in wanted]


# ---------------------------------------------------------------- timing

def calibrate(call: Callable[[], Any], min_ms: float, warmup: int = 2, tries: int = 5) -> int:
    """Calls per timed repeat so that one repeat lasts at least ``min_ms``: from the fastest of
    ``tries`` single calls after ``warmup`` -- the first calls after another contender pay the
    switch between thread pools (below), which a single timed call took for the call's time."""
    for _ in range(warmup):
        call()
    once = 1e9
    for _ in range(tries):
        start = time.perf_counter()
        call()
        once = min(once, time.perf_counter() - start)
    return max(1, math.ceil(min_ms / 1e3 / max(once, 1e-7)))


def interleaved(calls: dict[str, Callable[[], Any]], rounds: int,
                min_ms: float) -> dict[str, list[float]]:
    """Per-call milliseconds of every call in each of ``rounds`` rounds; each round times every
    call once (its calibrated number of calls, after one untimed call), starting from a
    different one each round.

    The untimed call takes the switch between thread pools: with more than one thread, the
    first call after another contender waits for the cores that the other's pool (torch's
    OpenMP threads, TVM's workers) still spins on -- #10's root at 2 threads ran 0.09 ms a call
    in a batch and 5 ms for a torch eager call and a root call alternated, and a batch of two
    calls calibrated from such a first call was timed at 2.3-3.8 ms a call."""
    numbers = {name: calibrate(call, min_ms) for name, call in calls.items()}
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            call, number = calls[name], numbers[name]
            call()
            start = time.perf_counter()
            for _ in range(number):
                call()
            times[name].append((time.perf_counter() - start) / number * 1e3)
    return times


# ---------------------------------------------------------------- one workload

def _searched(program, algorithms, max_samples, seed, verifier, cache) -> dict[str, Any]:
    from leir_egraph.search import Judge, RulesProposer, search
    found = {}
    for algorithm in algorithms:
        judge = Judge(program, verifier=verifier, seed=seed, cache_file=cache)
        start = time.perf_counter()
        result = search(program, algorithm, RulesProposer("cost", seed=seed),
                        max_samples=max_samples, judge=judge, seed=seed)
        found[algorithm] = {**result.metrics(), "threads": result.threads,
                            "trajectory": [n.strategy for n in result.trajectory[1:]],
                            "finish": result.finish,   # the parallel finish (search/finish.py)
                            "wall_s": time.perf_counter() - start,
                            "program": result.best.program}
    return found


def _torch_outputs(value) -> list:
    import torch
    items = value if isinstance(value, (list, tuple)) else [value]
    return [x.detach().double().cpu().numpy() for x in items if isinstance(x, torch.Tensor)]


def _torch_dtypes(value) -> list[str]:
    """The dtype names of a module's output tensors (``float64``, ``bfloat16``, ...)."""
    import torch
    items = value if isinstance(value, (list, tuple)) else [value]
    return [str(x.dtype).removeprefix("torch.") for x in items if isinstance(x, torch.Tensor)]


def _max_abs(outputs, reference) -> float | None:
    import numpy as np
    if len(outputs) != len(reference):
        return None
    return max((float(np.nanmax(np.abs(np.asarray(o, dtype=np.float64) - r)))
                if r.size else 0.0) for o, r in zip(outputs, reference))


def measure_workload(entry, threads: int, args, verifier, cache: Path) -> dict[str, Any]:
    """One results line: every contender of the module docstring on ``entry`` at ``threads``."""
    import numpy as np
    import torch

    from leir_egraph.explore.measure import program_inputs
    from leir_egraph.frontend import from_torch
    from leir_egraph.lower import prepared_calls, run
    from leir_egraph.lower import threads as pool
    from leir_egraph.lower.targets import cpu_target
    from leir_egraph.workloads import steptp

    load_before = os.getloadavg()
    started = time.perf_counter()
    module, inputs, meta = steptp.instantiate(entry, "cpu", seed=args.seed)
    program = from_torch(module, inputs, name=meta["kind"])
    row: dict[str, Any] = {"index": entry.index, "name": entry.name, "kind": meta["kind"],
                           "dtype": entry.dtype, "settings": settings(args), "errors": {}}
    with torch.no_grad():
        produced = module(*inputs)
    reference = _torch_outputs(produced)
    reference_dtypes = _torch_dtypes(produced)
    tvm_inputs = program_inputs(program, inputs)
    row["root_max_abs_err"] = _max_abs(list(run(program, tvm_inputs).values()), reference)

    searches = _searched(program, args.algorithms, args.max_samples, args.seed, verifier, cache)
    row["search"] = {a: {k: v for k, v in s.items() if k != "program"}
                     for a, s in searches.items()}
    calls: dict[str, Callable[[], Any]] = {}

    def eager():
        with torch.no_grad():
            return module(*inputs)
    calls["eager"] = eager
    try:
        torch._dynamo.reset()   # inductor bakes the thread count into its kernels
        compiled = torch.compile(module)
        start = time.perf_counter()
        with torch.no_grad():
            compiled_out = _torch_outputs(compiled(*inputs))
        row["compile_s"] = time.perf_counter() - start
        row["compile_max_abs_err"] = _max_abs(compiled_out, reference)

        def compiled_call():
            with torch.no_grad():
                return compiled(*inputs)
        calls["compile"] = compiled_call
    except Exception as err:  # noqa: BLE001 -- recorded, the other contenders still run
        row["errors"]["compile"] = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
    ours = {"root": program}   # one set of tensors for all of them (lower.prepared_calls)
    if "beam" in searches:
        ours["best"] = searches["beam"]["program"]
    if len(searches) > 1 or "beam" not in searches:
        fastest = max(searches, key=lambda a: (searches[a]["speedup"], a == "beam"))
        row["best_any_algorithm"] = fastest
        ours["best_any"] = searches[fastest]["program"]
    calls.update(zip(ours, prepared_calls(list(ours.values()), tvm_inputs)))
    if args.ms_samples:
        from ms_replay import ReplayError, replay
        try:
            start = time.perf_counter()
            replayed = replay(module, inputs, cpu_target(), samples=args.ms_samples,
                              threads=threads, seed=args.seed)
            row["metaschedule"] = {"functions": replayed.functions,
                                   "wall_s": time.perf_counter() - start}
            outputs = replayed.outputs()
            error = _max_abs(outputs, reference)
            row["metaschedule"]["max_abs_err"] = error
            dtypes = [str(o.dtype) for o in outputs]
            scale = max((float(np.nanmax(np.abs(r))) for r in reference if r.size), default=1.0)
            tolerance = {"float16": 1e-2, "bfloat16": 5e-2}.get(entry.dtype, 1e-4) * max(scale, 1)
            if dtypes != reference_dtypes:
                # TVM's Relax import computes #10's float64 matmul in float32
                row["errors"]["metaschedule"] = (f"outputs are {dtypes} where PyTorch's are "
                                                 f"{reference_dtypes}: not timed")
            elif error is None or not error <= tolerance:
                row["errors"]["metaschedule"] = (f"outputs differ from torch eager by {error} "
                                                 f"(tolerance {tolerance:.3g}): not timed")
            else:
                calls["metaschedule"] = replayed.call
        except ReplayError as err:
            row["errors"]["metaschedule"] = str(err)
    torch.set_num_threads(threads)
    row["threads"] = {"tvm": pool.in_use(), "torch": torch.get_num_threads(), "wanted": threads}
    row["rounds"] = interleaved(calls, args.rounds, args.min_ms)
    row["load_before"], row["load_after"] = list(load_before), list(os.getloadavg())
    row["wall_s"] = time.perf_counter() - started
    return row


def settings(args) -> dict[str, Any]:
    """What makes two rows comparable (a row of other settings is measured again)."""
    return {"max_samples": args.max_samples, "algorithms": sorted(args.algorithms),
            "ms_samples": args.ms_samples, "rounds": args.rounds, "seed": args.seed,
            "tensors": "shared"}   # our programs on one set of tensors (lower.prepared_calls)


# ---------------------------------------------------------------- running and reporting

def run(args) -> None:
    import torch

    from leir_egraph.lower import threads as pool
    from leir_egraph.verify import Verifier
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    chosen = chosen_workloads(args.workloads)
    pool.use(max(args.threads))
    pool.configure()   # this process's TVM pool, created at the largest count (it cannot grow)
    for threads in args.threads:
        pool.use(threads)
        torch.set_num_threads(threads)
        done = {(r["index"], r["threads"]["wanted"]) for r in load_rows(results)
                if r.get("settings") == settings(args)}
        todo = [e for e in chosen if (e.index, threads) not in done]
        print(f"{threads} thread(s): {len(todo)} workloads to measure: "
              f"{[e.index for e in todo]}", file=sys.stderr, flush=True)
        if not todo:
            continue
        with Verifier() as verifier:   # a worker started at this count (it inherits it)
            for entry in todo:
                try:
                    row = measure_workload(entry, threads, args, verifier,
                                           out / "verdicts.jsonl")
                except Exception as err:  # noqa: BLE001 -- recorded, the run goes on
                    row = {"index": entry.index, "name": entry.name, "dtype": entry.dtype,
                           "settings": settings(args), "threads": {"wanted": threads},
                           "error": f"{type(err).__name__}: {' '.join(str(err).split())[:400]}"}
                with open(results, "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(summary_line(row), file=sys.stderr, flush=True)


def medians(row) -> dict[str, float]:
    return {name: statistics.median(times) for name, times in row.get("rounds", {}).items()}


def summary_line(row) -> str:
    if "error" in row:
        return f"#{row['index']:3d} {row['name'][:30]:30s} error: {row['error'][:200]}"
    m = medians(row)
    parts = " ".join(f"{k} {m[k]:.4g}" for k in CONTENDERS if k in m)
    return (f"#{row['index']:3d} {row['name'][:30]:30s} {row['dtype']:8s} ms: {parts}; "
            f"confirmed {row['search'].get('beam', {}).get('speedup', float('nan')):.2f}x; "
            f"load {row['load_before'][0]:.1f}-{row['load_after'][0]:.1f} "
            f"({row['wall_s']:.0f} s)")


def _ratio(m, a, b) -> float | None:
    return m[a] / m[b] if a in m and b in m and m[b] > 0 else None


def _med(values) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.2f} (n={len(values)})" if values else "-"


def _geo(values) -> str:
    values = [v for v in values if v is not None and v > 0]
    return f"{math.exp(statistics.mean(math.log(v) for v in values)):.2f}" if values else "-"


def report(args) -> int:
    """Print the tables and figures of every row in ``--out`` (the exit status: 0)."""
    rows = load_rows(Path(args.out) / "results.jsonl")
    if args.note:
        print(args.note + "\n")
    counts = sorted({r["threads"]["wanted"] for r in rows})
    print("Times: per-call milliseconds, median over interleaved rounds (module docstring). "
          "Ratios best/peer < 1: ours is faster. `confirmed`: the beam search's confirmed "
          "speedup over the root (re-timed back to back, docs/SEARCH.md).")
    for threads in counts:
        mine = {}
        for r in rows:   # the latest row of each workload at this count
            if r["threads"]["wanted"] == threads:
                mine[r["index"]] = r
        ok = [r for r in mine.values() if "error" not in r]
        failed = [r for r in mine.values() if "error" in r]
        configs = sorted({json.dumps(r["settings"], sort_keys=True) for r in mine.values()})
        loads = [x for r in ok for x in (r["load_before"][0], r["load_after"][0])]
        thirty = [e.index for e in chosen_workloads("30")]
        left = [i for i in thirty if i not in mine]
        print(f"\n## {threads} thread(s): {len(ok)} workloads measured"
              + (f", {len(failed)} failed" if failed else "")
              + (f"; {len(left)} of the 30 not measured at this count "
                 f"({', '.join(f'#{i}' for i in left)})" if left else "; all 30"))
        print(f"\nworkloads: {', '.join(f'#{i}' for i in sorted(mine))}; settings: "
              f"{'; '.join(configs)}; 1-minute load during the rows: "
              + (f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-")
              + "; threads the pools had: "
              + ", ".join(sorted({f"TVM {r['threads']['tvm']} / torch {r['threads']['torch']}"
                                  for r in ok})))
        print("\n| # | workload | dtype | eager | compile | root | best | best_any | "
              "metaschedule | best/compile | best/eager | root/best | confirmed |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sorted(ok, key=lambda r: r["index"]):
            m = medians(r)
            cells = [f"{m[k]:.4g}" if k in m else ("err" if k in r["errors"] else "-")
                     for k in CONTENDERS]
            ratios = [_ratio(m, "best", "compile"), _ratio(m, "best", "eager"),
                      _ratio(m, "root", "best")]
            confirmed = r["search"].get("beam", {}).get("speedup")
            shown = [f"{x:.2f}" if x is not None else "-" for x in ratios + [confirmed]]
            print(f"| {r['index']} | {r['name'][:32]} | {r['dtype']} | {' | '.join(cells)} | "
                  f"{' | '.join(shown)} |")
        ms = [medians(r) for r in ok]
        print("\n| figure | median | geometric mean | issue target |")
        print("|---|---|---|---|")
        for label, values, target in [
                ("best / torch.compile", [_ratio(m, "best", "compile") for m in ms], "<= 1.0"),
                ("best / eager", [_ratio(m, "best", "eager") for m in ms], "<= 1.5"),
                ("confirmed speedup over root (beam)",
                 [r["search"].get("beam", {}).get("speedup") for r in ok], ">= 3"),
                ("root / best, measured here", [_ratio(m, "root", "best") for m in ms], ""),
                ("root / eager", [_ratio(m, "root", "eager") for m in ms], ""),
                ("torch.compile / eager", [_ratio(m, "compile", "eager") for m in ms], ""),
                ("best_any / torch.compile", [_ratio(m, "best_any", "compile") for m in ms], ""),
                ("best_any / eager", [_ratio(m, "best_any", "eager") for m in ms], ""),
                ("best / metaschedule", [_ratio(m, "best", "metaschedule") for m in ms], "")]:
            print(f"| {label} | {_med(values)} | {_geo(values)} | {target} |")
        errors = [(r["index"], k, v) for r in ok for k, v in r["errors"].items()]
        errors += [(r["index"], "workload", r["error"]) for r in failed]
        if errors:
            print("\nnot measured:")
            for index, what, why in sorted(errors):
                print(f"- #{index} {what}: {why[:220]}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="30",
                    help="N: the first N of benchmarks/search.py's 30 workloads; or a comma list "
                         "of their indices ('62,' for one) (default 30)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1],
                    help="thread counts, each measured in turn (default 1)")
    ap.add_argument("--rounds", type=int, default=11, help="interleaved timing rounds")
    ap.add_argument("--min-ms", type=float, default=5.0,
                    help="milliseconds of calls per contender and round, at least")
    ap.add_argument("--max-samples", type=int, default=16, help="candidates per search")
    ap.add_argument("--algorithms", nargs="+", default=["beam"], choices=ALGORITHMS,
                    help="search algorithms (beam is 'best'; with more, 'best_any' is the "
                         "fastest of them)")
    ap.add_argument("--ms-samples", type=int, default=16,
                    help="MetaSchedule replays per PrimFunc (0: no MetaSchedule contender)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/out/peers", help="results folder")
    ap.add_argument("--report", action="store_true", help="only print the tables")
    ap.add_argument("--note", default="",
                    help="a paragraph printed above the tables (e.g. how a staged run was "
                         "made: its commands and scale)")
    args = ap.parse_args(argv)
    if min(args.threads) < 1 or args.rounds < 1 or args.max_samples < 1 or args.ms_samples < 0:
        ap.error("--threads, --rounds and --max-samples must be >= 1, --ms-samples >= 0")
    if not args.report:
        run(args)
    return report(args)


if __name__ == "__main__":
    sys.exit(recorded(main))
