"""Translate and verify the whole workload zoo: the per-family pass table and translation times.

    .venv/bin/python benchmarks/frontend_zoo.py [--dtypes f32,f64] [--workers 2]
        [--kinds NAME ...] [--family network] [--seed 0] [--json OUT]
    .venv/bin/python benchmarks/frontend_zoo.py --family network --size paper

Every kind is instantiated at small shapes, translated with ``from_torch``, lowered, compiled
and run on llvm (LLVM optimisation off: verification, not speed), and compared with PyTorch
eager under the project's tolerance policy. Prints, per family: kinds, programs equal in each
dtype, mean nests, mean/max translation time, mean compile time (lowering and ``tvm.compile``;
large programs in segments) and mean first-run time (which includes LLVM's code generation);
then translation-time percentiles over all programs and the machine's load average (read the
times with it on a shared machine).

``--size paper`` translates only, at the models' usual sizes, with meta-device inputs (shapes
only, nothing is computed): translation time and nests per program.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leir_egraph.frontend.oracle import check_kinds  # noqa: E402
from leir_egraph.workloads import KINDS, zoo  # noqa: E402
from results_file import recorded  # noqa: E402


def _children_cpu() -> float:
    """User + system CPU seconds of finished child processes (the pool's workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kinds", nargs="*", help="kinds to check (default: the whole zoo)")
    ap.add_argument("--family", help="only this zoo family (network, attention, ...)")
    ap.add_argument("--size", choices=("small", "paper"), default="small",
                    help="paper: shape-only translation at the models' usual sizes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write every record here")
    args = ap.parse_args(argv)
    kinds = args.kinds or zoo(family=args.family)
    dtypes = tuple(args.dtypes.split(","))
    if args.size == "paper":
        return translate_only(kinds, dtypes[0], args.seed)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    cpu_before = _children_cpu()
    records = check_kinds(kinds, dtypes, workers=args.workers, seed=args.seed)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu_before

    families: dict[str, list] = {}
    for r in records:
        families.setdefault(r.family, []).append(r)
    header = f"{'family':<16}{'kinds':>6}" + "".join(f"{d + ' equal':>11}" for d in dtypes) + \
        f"{'nests':>7}{'translate ms':>14}{'max ms':>8}{'compile s':>11}{'run s':>7}"
    print(header)
    print("-" * len(header))
    for family in sorted(families, key=lambda f: (KINDS[families[f][0].kind].level, f)):
        rs = families[family]
        n_kinds = len({r.kind for r in rs})
        cells = "".join(f"{sum(r.status == 'equal' for r in rs if r.dtype == d):>6}/"
                        f"{sum(r.dtype == d for r in rs):<4}" for d in dtypes)
        ms = [r.translate_s * 1e3 for r in rs if r.translate_s]
        nests = statistics.mean(r.nests for r in rs if r.nests) if any(r.nests for r in rs) else 0
        compile_s = [r.compile_s for r in rs if r.compile_s]
        run_s = [r.run_s for r in rs if r.run_s]
        print(f"{family:<16}{n_kinds:>6}{cells}{nests:>7.1f}"
              f"{statistics.mean(ms) if ms else 0:>14.1f}{max(ms) if ms else 0:>8.0f}"
              f"{statistics.mean(compile_s) if compile_s else 0:>11.2f}"
              f"{statistics.mean(run_s) if run_s else 0:>7.2f}")
    total_equal = sum(r.status == "equal" for r in records)
    print("-" * len(header))
    print(f"{'all':<16}{len(set(kinds)):>6}  {total_equal}/{len(records)} equal")

    ms = sorted(r.translate_s * 1e3 for r in records if r.translate_s)
    if ms:
        def pct(p):
            return ms[min(len(ms) - 1, int(p / 100 * len(ms)))]
        print(f"\ntranslation per program: mean {statistics.mean(ms):.1f} ms, median {pct(50):.1f}"
              f", p95 {pct(95):.1f}, max {ms[-1]:.1f} ms  ({len(ms)} programs)")
    builds = [r.compile_s + r.run_s for r in records if r.run_s]
    if builds:
        print(f"lower+compile+first run per program: mean {statistics.mean(builds):.2f} s, "
              f"max {max(builds):.2f} s")
    if any(r.family == "network" for r in records):
        print("\nnetwork kinds (first dtype): nests, translate s, compile s, run s")
        for r in records:
            if r.family == "network" and r.dtype == dtypes[0]:
                print(f"  {r.kind:<26}{r.nests:>6}{r.translate_s:>9.2f}{r.compile_s:>9.2f}"
                      f"{r.run_s:>8.2f}  {r.status}")
    print(f"wall {wall:.0f} s with {args.workers} workers; load average {load_before:.1f} before,"
          f" {os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)")
    print(f"CPU time of the workers {cpu:.0f} s: about {cpu / args.workers:.0f} s of wall time on "
          f"{args.workers} otherwise idle cores")
    for r in records:
        if r.status != "equal":
            print(f"NOT EQUAL {r.kind} [{r.dtype}] {r.status}: {r.detail[:300]}")
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in records], indent=1,
                                              default=str))
    return 0 if total_equal == len(records) else 1


def translate_only(kinds, dtype: str, seed: int) -> int:
    """Shape-only translation at paper size: meta-device inputs, nothing computed."""
    import torch

    from leir_egraph.frontend import from_torch
    from leir_egraph.frontend.oracle import warm_up
    from leir_egraph.workloads import instantiate
    warm_up()
    load_before = os.getloadavg()[0]
    print(f"{'kind':<26}{'nests':>7}{'inputs':>8}{'translate s':>13}  largest input")
    failures = 0
    for kind in kinds:
        module, inputs, meta = instantiate(kind, seed, "paper", dtype)
        meta_inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
        start = time.perf_counter()
        try:
            program = from_torch(module, meta_inputs, name=kind)
        except Exception as err:  # noqa: BLE001 -- reported, the batch goes on
            failures += 1
            print(f"{kind:<26} FAILED {type(err).__name__}: {str(err)[:200]}")
            continue
        seconds = time.perf_counter() - start
        biggest = max(program.signature.inputs, key=lambda s: math.prod(s.shape))
        print(f"{kind:<26}{len(program.leir.nests):>7}{len(program.signature.inputs):>8}"
              f"{seconds:>13.2f}  {biggest.name}{list(biggest.shape)}", flush=True)
        del module, program
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
          f"({os.cpu_count()} cores)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(recorded(main))
