"""Throughput of the dataset pipeline, and what it projects for the paper's 6,335 programs.

    .venv/bin/python benchmarks/dataset_build.py [--programs SEL ...] [--count N]
        [--size small|paper] [--workers 2] [--executor local|ray] [--per-strategy-cap 1]
        [--out DIR] [--resume] [--same-as DIR] [--json OUT] [--progress-every 25]

``--programs '*' --count 2`` is the whole zoo (293 kinds) at two instancing seeds: 586 program
instances, the issue-11 run of at least 500 programs. ``--executor ray`` runs the same on a
local Ray instance with ``--workers`` CPUs; ``--same-as DIR`` then compares every output file
byte for byte with an earlier run's folder (e.g. the local run's ``--out``) and prints which
differ.

Runs ``build_dataset`` on a fixed zoo sample (default: 12 kinds across the zoo's families,
small shapes, every strategy, one transition per program and strategy -- the reference made
one call per program and strategy, which is how the paper's 35,878 entries came from 6,335
programs) and prints programs/min, transitions/min and verified/min over the whole run, the
start-up time (until the first program came back: worker processes, TVM, the e-graph engine)
and the steady rate after it. The wall-clock projection for 6,335 programs is start-up + 6,334
programs at the steady rate, for the same sample mix, shapes and worker count.

On a shared machine the wall clock measures the neighbours too, so the CPU time the run used
(this process and every worker and verification process it started: what it reaped, or, for
Ray's workers, which it cannot reap, its whole live process tree sampled as each program
arrives) is printed as well, with the projection it gives for two dedicated cores: CPU seconds per program x 6,335 / 2.
The machine's load average is printed alongside.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leir_egraph.dataset import (DatasetConfig, Execution, OutputFolderError,  # noqa: E402
                                 ResumeError, SourceError, build_dataset)
from results_file import recorded  # noqa: E402

PAPER_PROGRAMS = 6335
SAMPLE = ("ReLU", "softmax", "LayerNorm", "Sum_reduction_over_a_dimension",
          "Matrix_vector_multiplication", "Gemm_Add_ReLU", "Matmul_Divide_GELU",
          "Conv2d_HardSwish_ReLU", "MHA_sum", "CrossEntropyLoss", "Max_Pooling_2D", "cumsum")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--programs", nargs="+", default=list(SAMPLE))
    p.add_argument("--count", type=int, default=1, help="instances per selected kind")
    p.add_argument("--size", choices=("small", "paper"), default="small")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--executor", choices=("local", "ray"), default="local")
    p.add_argument("--per-strategy-cap", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="output folder (default: a temporary one)")
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--same-as", help="compare every output file with this earlier run's folder")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run in --out: finished shards are kept, and "
                        "the rates and CPU figures cover this session's programs only")
    p.add_argument("--progress-every", type=int, default=25, metavar="N",
                   help="print the figures so far after every N programs (0: only at the end)")
    args = p.parse_args(argv)

    config = DatasetConfig(programs=tuple(args.programs), count=args.count, size=args.size,
                           seed=args.seed, per_strategy_cap=args.per_strategy_cap, shard_size=4)
    out = Path(args.out or tempfile.mkdtemp(prefix="leir-bench-"))
    arrivals: list[float] = []
    tree_cpu: list[float] = []  # CPU of the live process tree at each program's arrival
    load_before = os.getloadavg()
    cpu_before = _cpu_seconds()
    tree_cpu_before = _tree_cpu_seconds()
    start = time.perf_counter()
    try:
        result = build_dataset(config, Execution(out=out, workers=args.workers, quiet=True,
                                                 executor=args.executor, resume=args.resume),
                               on_program=lambda _: progress(arrivals, tree_cpu, start, tree_cpu_before,
                                                             args.progress_every))
    except (SourceError, ResumeError, OutputFolderError) as err:
        print(f"dataset_build: {err}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - start
    # Pool workers are reaped by this process, so rusage counts them; Ray's workers are children
    # of its raylet, which Ray shuts down without reaping them, so only the live tree sampled at
    # the last arrival counts them. The larger figure is the one that saw every worker.
    cpu = max(_cpu_seconds() - cpu_before, (tree_cpu[-1] - tree_cpu_before) if tree_cpu else 0.0)
    load_after = os.getloadavg()
    s, rates = result.summary, result.rates()
    startup = arrivals[0] if arrivals else wall
    steady = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) * 60 \
        if len(arrivals) > 1 and arrivals[-1] > arrivals[0] else rates["programs_per_min"]
    projected_min = startup / 60 + (PAPER_PROGRAMS - 1) / steady
    per_program = s["transitions"] / max(s["programs"], 1)
    session = max(result.programs_processed, 1)
    figures = {
        "programs": s["programs"], "programs_failed": s["programs_failed"],
        "programs_this_session": result.programs_processed,
        "transitions": s["transitions"], "verified": s["verified"],
        "size": args.size, "workers": args.workers, "executor": args.executor,
        "per_strategy_cap": args.per_strategy_cap, "out": str(out),
        "wall_s": round(wall, 1), "startup_s": round(startup, 1),
        "programs_per_min": round(rates["programs_per_min"], 2),
        "transitions_per_min": round(rates["transitions_per_min"], 1),
        "verified_per_min": round(rates["verified_per_min"], 1),
        "steady_programs_per_min": round(steady, 2),
        "projected_hours_for_6335_programs": round(projected_min / 60, 1),
        "projected_transitions_for_6335_programs": round(per_program * PAPER_PROGRAMS),
        "cpu_s": round(cpu, 1),
        "cpu_s_per_program": round(cpu / session, 1),
        "cpu_s_per_transition": round(cpu / max(result.transitions_processed, 1), 2),
        "projected_hours_for_6335_programs_on_2_dedicated_cores":
            round(cpu / session * PAPER_PROGRAMS / 2 / 3600, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
    }
    if args.same_as:
        mine, theirs = _files(out), _files(Path(args.same_as))
        figures["same_files_as"] = args.same_as
        figures["files_compared"] = len(set(mine) | set(theirs))
        figures["files_differing"] = sorted(n for n in set(mine) | set(theirs)
                                            if mine.get(n) != theirs.get(n))
    width = max(map(len, figures))
    for k, v in figures.items():
        print(f"{k:<{width}}  {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


def progress(arrivals: list[float], tree_cpu: list[float], start: float, cpu_before: float,
             every: int) -> None:
    """Record one finished program (its arrival time and the process tree's CPU then); every
    ``every`` programs print the rate and the CPU so far (on stderr, so a long run can be
    judged, and stopped, before it ends)."""
    arrivals.append(time.perf_counter() - start)
    tree_cpu.append(_tree_cpu_seconds())
    done = len(arrivals)
    if every and done % every == 0:
        minutes = arrivals[-1] / 60
        cpu = tree_cpu[-1] - cpu_before
        print(f"[dataset_build] {done} programs in {minutes:.1f} min: "
              f"{done / minutes:.2f} programs/min, CPU {cpu / done:.1f} s/program, "
              f"{cpu / done * PAPER_PROGRAMS / 2 / 3600:.1f} h for "
              f"{PAPER_PROGRAMS} programs on 2 cores; load {os.getloadavg()[0]:.1f}",
              file=sys.stderr, flush=True)


def _tree_cpu_seconds() -> float:
    """User + system time of this process and every live descendant (workers, verification
    processes, a local Ray cluster), with what each has reaped; on a system without /proc, what
    :func:`_cpu_seconds` counts (live workers not included)."""
    try:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                stats[int(entry)] = (int(fields[1]), sum(map(int, fields[11:15])))
    except OSError:
        return _cpu_seconds()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _cpu_seconds() -> float:
    """User + system time of this process and of every descendant it has reaped (workers reap
    their verification processes, so those count too)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(recorded(main))
