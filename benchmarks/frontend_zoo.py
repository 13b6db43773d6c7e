"""Translate and verify the whole workload zoo: the per-family pass table and translation times.

    .venv/bin/python benchmarks/frontend_zoo.py [--dtypes f32,f64] [--workers 2]
        [--kinds NAME ...] [--seed 0] [--json OUT]

Every kind is instantiated at small shapes, translated with ``from_torch``, lowered and run on
llvm (LLVM optimisation off: verification, not speed), and compared with PyTorch eager under
the project's tolerance policy. Prints, per family: kinds, programs equal in each dtype, mean
nests, mean/max translation time; then translation-time percentiles over all programs and the
machine's load average (read the times with it on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leir_egraph.frontend.oracle import check_kinds  # noqa: E402
from leir_egraph.workloads import KINDS, zoo  # noqa: E402


def _children_cpu() -> float:
    """User + system CPU seconds of finished child processes (the pool's workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kinds", nargs="*", help="kinds to check (default: the whole zoo)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write every record here")
    args = ap.parse_args(argv)
    kinds = args.kinds or zoo()
    dtypes = tuple(args.dtypes.split(","))
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
        f"{'nests':>7}{'translate ms':>14}{'max ms':>8}"
    print(header)
    print("-" * len(header))
    for family in sorted(families, key=lambda f: (KINDS[families[f][0].kind].level, f)):
        rs = families[family]
        n_kinds = len({r.kind for r in rs})
        cells = "".join(f"{sum(r.status == 'equal' for r in rs if r.dtype == d):>6}/"
                        f"{sum(r.dtype == d for r in rs):<4}" for d in dtypes)
        ms = [r.translate_s * 1e3 for r in rs if r.translate_s]
        nests = statistics.mean(r.nests for r in rs if r.nests) if any(r.nests for r in rs) else 0
        print(f"{family:<16}{n_kinds:>6}{cells}{nests:>7.1f}"
              f"{statistics.mean(ms) if ms else 0:>14.1f}{max(ms) if ms else 0:>8.0f}")
    total_equal = sum(r.status == "equal" for r in records)
    print("-" * len(header))
    print(f"{'all':<16}{len(set(kinds)):>6}  {total_equal}/{len(records)} equal")

    ms = sorted(r.translate_s * 1e3 for r in records if r.translate_s)
    if ms:
        def pct(p):
            return ms[min(len(ms) - 1, int(p / 100 * len(ms)))]
        print(f"\ntranslation per program: mean {statistics.mean(ms):.1f} ms, median {pct(50):.1f}"
              f", p95 {pct(95):.1f}, max {ms[-1]:.1f} ms  ({len(ms)} programs)")
    runs = [r.run_s for r in records if r.run_s]
    if runs:
        print(f"lower+compile+run per program: mean {statistics.mean(runs):.2f} s, "
              f"max {max(runs):.2f} s")
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


if __name__ == "__main__":
    sys.exit(main())
