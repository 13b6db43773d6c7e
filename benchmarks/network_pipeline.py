"""The Step-TP pipeline on whole networks: enumeration and verification per network program.

    .venv/bin/python benchmarks/network_pipeline.py [--kinds ViT ResNet18 ...]
        [--verify 6] [--strategies ID,...] [--seed 0]

For every zoo kind of the ``network`` family (small shapes, f32) it translates the model,
enumerates every single-step rewrite of every strategy (``all_steps``, what ``leir steps`` and
the sampler run) and verifies a seeded sample of ``--verify`` transitions, at most one per
strategy, with the verifier's worker process (opt-level-0 builds, three input sets, timing
off as in the dataset pipeline). Prints per program: nests, transitions, strategies with a
site, enumeration seconds, the verified sample's Equal count and mean seconds per
verification; then totals and the machine's load average. Read times with the load: the
machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leir_egraph.egraph import load_strategies  # noqa: E402
from leir_egraph.egraph.steps import all_steps  # noqa: E402
from leir_egraph.frontend import from_torch  # noqa: E402
from leir_egraph.verify import Verifier  # noqa: E402
from leir_egraph.workloads import instantiate, zoo  # noqa: E402
from results_file import recorded  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="*", help="network kinds (default: all)")
    ap.add_argument("--verify", type=int, default=6, help="transitions verified per program")
    ap.add_argument("--strategies", help="comma-separated strategy ids (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    kinds = args.kinds or zoo(family="network")
    strategies = load_strategies()
    if args.strategies:
        wanted = set(args.strategies.split(","))
        strategies = [s for s in strategies if s.id in wanted]
    load = os.getloadavg()[0]
    print(f"{'program':<24}{'nests':>6}{'transitions':>12}{'strategies':>11}{'enum s':>9}"
          f"{'verified':>9}{'equal':>6}{'s/verify':>9}", flush=True)
    totals = {"enum": 0.0, "transitions": 0, "verified": 0, "equal": 0, "verify": 0.0}
    worst = []
    with Verifier() as verifier:
        for kind in kinds:
            module, inputs, _ = instantiate(kind, args.seed)
            program = from_torch(module, inputs, name=kind)
            start = time.perf_counter()
            transitions = list(all_steps(program, strategies))
            enum_s = time.perf_counter() - start
            by_strategy: dict[str, list] = {}
            for t in transitions:
                by_strategy.setdefault(t.strategy, []).append(t)
            rng = random.Random(f"{args.seed}-{kind}")
            sample = [rng.choice(ts) for _, ts in sorted(by_strategy.items())]
            rng.shuffle(sample)
            sample = sample[:args.verify]
            seconds, equal = [], 0
            for t in sample:
                start = time.perf_counter()
                result = verifier.verify(t.before, t.after, timing=False, timeout=300)
                seconds.append(time.perf_counter() - start)
                equal += result.level in ("equal", "independent")
                if result.level not in ("equal", "independent"):
                    worst.append(f"{kind} {t.strategy}: {result.level} {result.reason}")
            mean = statistics.mean(seconds) if seconds else 0.0
            print(f"{kind:<24}{len(program.leir.nests):>6}{len(transitions):>12}"
                  f"{len(by_strategy):>11}{enum_s:>9.1f}{len(sample):>9}{equal:>6}{mean:>9.2f}",
                  flush=True)
            totals["enum"] += enum_s
            totals["transitions"] += len(transitions)
            totals["verified"] += len(sample)
            totals["equal"] += equal
            totals["verify"] += sum(seconds)
    print(f"\n{len(kinds)} programs: {totals['transitions']} transitions enumerated in "
          f"{totals['enum']:.0f} s; {totals['equal']}/{totals['verified']} verified Equal in "
          f"{totals['verify']:.0f} s")
    for line in worst:
        print("NOT EQUAL", line[:300])
    print(f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after "
          f"({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
