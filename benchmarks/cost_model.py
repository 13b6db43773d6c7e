"""Calibration of the CPU cost model against measured TVM times (docs/COST.md).

A seeded sample of programs -- the paper's test workloads at CPU size and random chains of
1-3 single steps from each (seeded ``egraph.sample_steps``) -- is timed with TVM (llvm,
opt-level 3, ``time_evaluator``: ``lower.build.time_program``) and costed by the model. It
prints the Spearman rank correlation over all programs and the mean per-workload
correlation (what search ranking needs: ordering candidates of one root), and the model's
time per program.

    python benchmarks/cost_model.py [--workloads 12] [--variants 6] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import numpy as np
from results_file import recorded  # noqa: E402


def spearman(x, y) -> float:
    def ranks(v):
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        # average ranks of ties
        v = np.asarray(v)
        for value in set(v.tolist()):
            idx = np.where(v == value)[0]
            if len(idx) > 1:
                r[idx] = r[idx].mean()
        return r
    if len(x) < 3:
        return float("nan")
    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=12)
    ap.add_argument("--variants", type=int, default=6, help="random step chains per workload")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from leir_egraph.cost import cost
    from leir_egraph.egraph import sample_steps
    from leir_egraph.leir.validate import check
    from leir_egraph.lower.build import time_program
    from leir_egraph.verify.inputs import random_inputs
    from leir_egraph.workloads import steptp

    rng = random.Random(args.seed)
    entries = [e for e in steptp.load() if steptp.is_mapped(e)]
    entries = rng.sample(entries, min(args.workloads, len(entries)))
    pairs, per_workload, model_s = [], [], []
    for e in entries:
        try:
            root = steptp.program(e, "cpu", seed=args.seed)
        except Exception as err:  # noqa: BLE001
            print(f"#{e.index}: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        programs = [root]
        for v in range(args.variants):
            p = root
            for depth in range(rng.randint(1, 3)):
                steps = sample_steps(p, seed=args.seed * 1000 + v * 10 + depth)
                if not steps:
                    break
                p = rng.choice(steps).after
            programs.append(p)
        local = []
        inputs = random_inputs(root, args.seed, 0)
        for p in programs:
            try:
                check(p)
                measured = time_program(p, inputs)
            except Exception:  # noqa: BLE001 -- a variant that does not build is skipped
                continue
            t0 = time.perf_counter()
            predicted = cost(p).seconds
            model_s.append(time.perf_counter() - t0)
            local.append((predicted, measured))
        pairs.extend(local)
        rho = spearman([a for a, _ in local], [b for _, b in local])
        per_workload.append(rho)
        print(f"#{e.index:3d} {root.name[:40]:40s} programs {len(local):2d} spearman {rho:6.3f}",
              file=sys.stderr, flush=True)
    overall = spearman([a for a, _ in pairs], [b for _, b in pairs])
    finite = [r for r in per_workload if r == r]
    print(f"programs timed: {len(pairs)} from {len(per_workload)} workloads")
    print(f"Spearman (all programs): {overall:.3f}")
    print(f"Spearman (per workload, mean of {len(finite)}): "
          f"{statistics.mean(finite) if finite else float('nan'):.3f}")
    if model_s:
        print(f"model time per program: median {statistics.median(model_s) * 1e6:.0f} us, "
              f"max {max(model_s) * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
